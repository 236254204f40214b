// causal_conv1d: the depthwise causal conv (width W ≤ CONV_MAX_WIDTH) with SiLU, carrying a
// [dim, W] f32 state of the last W inputs, channel-major, slot W−1 the newest (docs/kernels.md).
//
// Geometry (src/launch.rs): `launch::conv(dim, rows)`: one thread per channel, blockDim.x ==
// CONV_BLOCK, grid (⌈dim / CONV_BLOCK⌉, rows). The decode entry takes one batch row per
// blockIdx.y and needs exactly that block, so that its L2 heads never straddle blocks (CONV_BLOCK
// is a multiple of every head_dim); the prefill entry takes `launch::conv_prefill(dim, t)`, one
// grid row per tile of CONV_PREFILL_TOKENS tokens.
//
// Per channel c and token: shift state[c][0..W−1] ← state[c][1..W], state[c][W−1] ← f32(x[c]);
// a = Σ_{s<W} state[c][s]·f32(w[c][s]) (one accumulator from 0, ascending s: tap 0 multiplies the
// oldest input); y = silu(a) = a·(1/(1+e^{−a})).
#include "kda_common.cuh"

#ifndef KDA_MAX_HEAD_DIM
#error "KDA_MAX_HEAD_DIM must be defined by the build (kernels.toml [defines])"
#endif
#ifndef CONV_BLOCK
#error "CONV_BLOCK must be defined by the build (kernels.toml [defines])"
#endif
#ifndef CONV_MAX_WIDTH
#error "CONV_MAX_WIDTH must be defined by the build (kernels.toml [defines])"
#endif
#ifndef CONV_PREFILL_TOKENS
#error "CONV_PREFILL_TOKENS must be defined by the build (kernels.toml [defines])"
#endif

static_assert(CONV_BLOCK % 32 == 0 && CONV_BLOCK <= 1024, "CONV_BLOCK must be whole warps");
static_assert(CONV_BLOCK % KDA_MAX_HEAD_DIM == 0, "a conv block must hold whole L2 heads");
static_assert(CONV_PREFILL_TOKENS >= CONV_MAX_WIDTH, "a later token tile's window lies in x");

__device__ __forceinline__ float silu(float a) { return a * (1.0f / (1.0f + expf(-a))); }

// Loads channel c's window into win[0..width) and its taps into tap[0..width).
__device__ __forceinline__ void load_channel(const float* state, const bf16* weight, u32 c, u32 width,
                                             float (&win)[CONV_MAX_WIDTH], float (&tap)[CONV_MAX_WIDTH]) {
    const size_t base = static_cast<size_t>(c) * width;
#pragma unroll
    for (u32 s = 0; s < CONV_MAX_WIDTH; ++s) {
        win[s] = s < width ? state[base + s] : 0.0f;
        tap[s] = s < width ? widen(weight[base + s]) : 0.0f;
    }
}

// Shifts the window by one input and returns a = Σ_s win[s]·tap[s], ascending s.
__device__ __forceinline__ float push(float (&win)[CONV_MAX_WIDTH], const float (&tap)[CONV_MAX_WIDTH], u32 width,
                                      float input) {
#pragma unroll
    for (u32 s = 0; s + 1 < CONV_MAX_WIDTH; ++s)
        if (s + 1 < width) win[s] = win[s + 1];
#pragma unroll
    for (u32 s = 0; s < CONV_MAX_WIDTH; ++s)
        if (s + 1 == width) win[s] = input;
    float a = 0.0f;
#pragma unroll
    for (u32 s = 0; s < CONV_MAX_WIDTH; ++s)
        if (s < width) a = a + win[s] * tap[s];
    return a;
}

__device__ __forceinline__ void store_channel(float* state, u32 c, u32 width, const float (&win)[CONV_MAX_WIDTH]) {
    const size_t base = static_cast<size_t>(c) * width;
#pragma unroll
    for (u32 s = 0; s < CONV_MAX_WIDTH; ++s)
        if (s < width) state[base + s] = win[s];
}

// Batched decode, one token for each of b sequences: x, out [b, dim]; batch row r updates the
// window in pool slot batch_slot(slot, r, slots) ([slots, dim, W]; a row without one writes
// nothing). Then for c < qk_channels (the q and k heads, head_dim consecutive channels each):
// y ← y / sqrt(Σ_head y² + eps); out[r][c] = bf16(y), one rounding. The Σy² order is warp
// butterflies then the head's warp partials in order (the ABI leaves it free). Grid
// (⌈dim / CONV_BLOCK⌉, ≥ b): blockIdx.y is the batch row. Requires blockDim.x == CONV_BLOCK,
// head_dim a multiple of 32 dividing CONV_BLOCK, qk_channels a multiple of head_dim and ≤ dim,
// 1 ≤ width ≤ CONV_MAX_WIDTH; otherwise nothing is written.
extern "C" __global__ void causal_conv1d_update_l2norm(float* __restrict__ pool, const u32* __restrict__ slot,
                                                       const bf16* __restrict__ x, const bf16* __restrict__ weight,
                                                       bf16* __restrict__ out, u32 b, u32 slots, u32 dim, u32 width,
                                                       u32 qk_channels, u32 head_dim, float eps) {
    __shared__ float partial[CONV_BLOCK / 32];
    if (blockDim.x != CONV_BLOCK || width == 0 || width > CONV_MAX_WIDTH) return;
    if (head_dim == 0 || head_dim % 32 != 0 || CONV_BLOCK % head_dim != 0) return;
    if (qk_channels % head_dim != 0 || qk_channels > dim) return;
    const u32 row = blockIdx.y;
    if (row >= b) return;
    // Block-uniform: every thread of the block returns here or none does.
    const u32 s = batch_slot(slot, row, slots);
    if (s == KDA_NO_SLOT) return;
    float* const state = pool + static_cast<size_t>(s) * dim * width;
    const size_t row_base = static_cast<size_t>(row) * dim;

    const u32 block_start = blockIdx.x * CONV_BLOCK;
    const u32 c = block_start + threadIdx.x;
    const bool active = c < dim;
    float y = 0.0f;
    if (active) {
        float win[CONV_MAX_WIDTH], tap[CONV_MAX_WIDTH];
        load_channel(state, weight, c, width, win, tap);
        y = silu(push(win, tap, width, widen(x[row_base + c])));
        store_channel(state, c, width, win);
    }
    // Block-uniform: does this block hold any q/k channel? (Heads never straddle blocks.)
    if (block_start < qk_channels) {
        const bool normed = c < qk_channels;
        const float sq = warp_sum(normed ? y * y : 0.0f);
        const u32 warp = threadIdx.x >> 5;
        if ((threadIdx.x & 31) == 0) partial[warp] = sq;
        __syncthreads();
        if (normed) {
            const u32 warps_per_head = head_dim >> 5;
            const u32 first = (threadIdx.x / head_dim) * warps_per_head;
            float total = 0.0f;
            for (u32 i = 0; i < warps_per_head; ++i) total = total + partial[first + i];
            y = y / sqrtf(total + eps);
        }
    }
    if (active) out[row_base + c] = narrow(y);
}

// Prefill, t tokens: x, out [t, dim]; out[τ][c] = bf16(silu(a)), no L2. The final state holds
// the last W inputs (with the old state's tail when t < W). A width-W filter has no recurrence, so
// the tokens run in parallel: thread (c, tile) computes channel c over the CONV_PREFILL_TOKENS
// tokens of its tile, its window seeded with the W inputs before the tile (from x, or from the old
// state before token 0) and then carried in registers, each token's a in the same order as
// decode. Grid-stride over channels (x) and tiles (y), any block shape. The state of channel c is
// read and written only by the thread that runs (c, tile 0), so no block reads a window another
// writes. Requires 1 ≤ width ≤ CONV_MAX_WIDTH.
extern "C" __global__ void causal_conv1d_update_prefill(float* __restrict__ state, const bf16* __restrict__ x,
                                                        const bf16* __restrict__ weight, bf16* __restrict__ out,
                                                        u32 dim, u32 width, u32 t) {
    if (width == 0 || width > CONV_MAX_WIDTH) return;
    const u32 tiles = (t + CONV_PREFILL_TOKENS - 1) / CONV_PREFILL_TOKENS;
    for (u32 tile = blockIdx.y; tile < tiles; tile += gridDim.y) {
        for (u32 c = blockIdx.x * blockDim.x + threadIdx.x; c < dim; c += gridDim.x * blockDim.x) {
            const u32 first = tile * CONV_PREFILL_TOKENS;
            const u32 last = min(t, first + CONV_PREFILL_TOKENS);
            // The W inputs before the tile: the old state before token 0; x past the first tile
            // (first ≥ CONV_PREFILL_TOKENS ≥ W, so they all lie in x).
            // Only tile 0 reads the state: the others never touch what it writes.
            float win[CONV_MAX_WIDTH], tap[CONV_MAX_WIDTH];
            const size_t base = static_cast<size_t>(c) * width;
#pragma unroll
            for (u32 s = 0; s < CONV_MAX_WIDTH; ++s) {
                tap[s] = s < width ? widen(weight[base + s]) : 0.0f;
                if (s >= width) {
                    win[s] = 0.0f;
                } else if (first == 0) {
                    win[s] = state[base + s];
                } else {
                    win[s] = widen(x[static_cast<size_t>(first - width + s) * dim + c]);
                }
            }
            for (u32 tau = first; tau < last; ++tau) {
                const size_t at = static_cast<size_t>(tau) * dim + c;
                out[at] = narrow(silu(push(win, tap, width, widen(x[at]))));
            }
            if (tile == 0) {
                // One tile: the window now holds the last W inputs. More: they all lie in x.
                if (t > CONV_PREFILL_TOKENS) {
#pragma unroll
                    for (u32 s = 0; s < CONV_MAX_WIDTH; ++s)
                        if (s < width) win[s] = widen(x[static_cast<size_t>(t - width + s) * dim + c]);
                }
                store_channel(state, c, width, win);
            }
        }
    }
}
