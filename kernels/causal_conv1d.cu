// causal_conv1d: the depthwise causal conv (width W ≤ CONV_MAX_WIDTH) with SiLU, carrying a
// [dim, W] f32 state of the last W inputs, channel-major, slot W−1 the newest, followed by the
// per-head L2 norm of the q and k channels (docs/kernels.md).
//
// Geometry (src/launch.rs): the decode entry takes `launch::conv(dim, rows)`: one thread per
// channel, blockDim.x == CONV_BLOCK, grid (⌈dim / CONV_BLOCK⌉, rows), one batch row per
// blockIdx.y; it needs exactly that block, so that its L2 heads never straddle blocks (CONV_BLOCK
// is a multiple of every head_dim). The prefill entry takes `launch::conv_prefill(qkv, head_dim,
// t)`: one warp per head and tile of CONV_PREFILL_TOKENS tokens.
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


namespace {

// N consecutive bf16 from p, widened exactly: one load of 2·N bytes where `vector` (p aligned to
// them), else element by element.
template <u32 N>
__device__ __forceinline__ void load_widened(const bf16* p, bool vector, float (&out)[N]) {
    if constexpr (N == 4) {
        if (vector) {
            const uint2 words = *reinterpret_cast<const uint2*>(p);
            out[0] = bf16_lo(words.x), out[1] = bf16_hi(words.x), out[2] = bf16_lo(words.y), out[3] = bf16_hi(words.y);
            return;
        }
    } else if constexpr (N == 2) {
        if (vector) {
            const uint32_t word = *reinterpret_cast<const uint32_t*>(p);
            out[0] = bf16_lo(word), out[1] = bf16_hi(word);
            return;
        }
    }
#pragma unroll
    for (u32 j = 0; j < N; ++j) out[j] = widen(p[j]);
}

// N f32 to p: one store of 4·N bytes where `vector` (p aligned to them), else element by element.
template <u32 N>
__device__ __forceinline__ void store_f32s(float* p, bool vector, const float (&values)[N]) {
    if constexpr (N == 4) {
        if (vector) {
            *reinterpret_cast<float4*>(p) = make_float4(values[0], values[1], values[2], values[3]);
            return;
        }
    } else if constexpr (N == 2) {
        if (vector) {
            *reinterpret_cast<float2*>(p) = make_float2(values[0], values[1]);
            return;
        }
    }
#pragma unroll
    for (u32 j = 0; j < N; ++j) p[j] = values[j];
}

// The prefill with heads of 32·CPL channels, CPL consecutive channels a lane (see the entry).
template <u32 CPL>
__device__ __forceinline__ void conv_prefill_heads(float* __restrict__ state, const bf16* __restrict__ x,
                                                   const bf16* __restrict__ weight, float* __restrict__ q,
                                                   float* __restrict__ k, float* __restrict__ v, u32 t, u32 qkv,
                                                   u32 width, float eps) {
    constexpr u32 HEAD = 32 * CPL;
    const size_t dim = 3 * static_cast<size_t>(qkv);
    const u32 heads = qkv / HEAD;  // of each of q, k and v
    const size_t groups = 3 * static_cast<size_t>(heads);
    const size_t units = (t + CONV_PREFILL_TOKENS - 1) / CONV_PREFILL_TOKENS * groups;
    // Every offset below is a multiple of CPL elements (qkv is a multiple of HEAD), so aligned
    // bases make every access aligned.
    const bool vector = aligned_to(x, 2 * CPL) && aligned_to(q, 4 * CPL) && aligned_to(k, 4 * CPL) &&
                        aligned_to(v, 4 * CPL);
    const u32 lane = threadIdx.x & 31;
    for (size_t unit = warp_index(); unit < units; unit += warp_count()) {
        const u32 tile = static_cast<u32>(unit / groups);
        const size_t group = unit - tile * groups;
        const u32 part = static_cast<u32>(group / heads);  // 0 q, 1 k, 2 v: warp-uniform
        const size_t c0 = group * HEAD + lane * CPL;        // the lane's first channel of x's rows
        const size_t col0 = c0 - part * static_cast<size_t>(qkv);
        float* const dst = part == 0 ? q : (part == 1 ? k : v);
        const u32 first = tile * CONV_PREFILL_TOKENS;
        const u32 last = min(t, first + CONV_PREFILL_TOKENS);
        // The W inputs before the tile: the old state before token 0; x past the first tile
        // (first ≥ CONV_PREFILL_TOKENS ≥ W, so they all lie in x). Only tile 0 reads the state:
        // the other tiles never touch what it writes.
        float win[CPL][CONV_MAX_WIDTH], tap[CPL][CONV_MAX_WIDTH];
#pragma unroll
        for (u32 j = 0; j < CPL; ++j) {
            const size_t base = (c0 + j) * width;
#pragma unroll
            for (u32 s = 0; s < CONV_MAX_WIDTH; ++s) {
                tap[j][s] = s < width ? widen(weight[base + s]) : 0.0f;
                if (s >= width) {
                    win[j][s] = 0.0f;
                } else if (first == 0) {
                    win[j][s] = state[base + s];
                } else {
                    win[j][s] = widen(x[static_cast<size_t>(first - width + s) * dim + c0 + j]);
                }
            }
        }
#pragma unroll 4
        for (u32 tau = first; tau < last; ++tau) {
            float y[CPL];
            load_widened<CPL>(x + tau * dim + c0, vector, y);
            float squares = 0.0f;
#pragma unroll
            for (u32 j = 0; j < CPL; ++j) {
                y[j] = silu(push(win[j], tap[j], width, y[j]));
                squares = squares + y[j] * y[j];
            }
            if (part < 2) {
                const float norm = sqrtf(warp_sum(squares) + eps);
#pragma unroll
                for (u32 j = 0; j < CPL; ++j) y[j] = y[j] / norm;
            }
#pragma unroll
            for (u32 j = 0; j < CPL; ++j) y[j] = widen(narrow(y[j]));
            store_f32s<CPL>(dst + tau * static_cast<size_t>(qkv) + col0, vector, y);
        }
        if (tile == 0) {
#pragma unroll
            for (u32 j = 0; j < CPL; ++j) {
                // One tile: the window now holds the last W inputs. More: they all lie in x.
                if (t > CONV_PREFILL_TOKENS) {
#pragma unroll
                    for (u32 s = 0; s < CONV_MAX_WIDTH; ++s)
                        if (s < width) win[j][s] = widen(x[static_cast<size_t>(t - width + s) * dim + c0 + j]);
                }
                store_channel(state, static_cast<u32>(c0 + j), width, win[j]);
            }
        }
    }
}

}  // namespace

// Prefill, t tokens of packed q | k | v rows, x [t, 3·qkv] (dim = 3·qkv channels): every
// channel's conv and SiLU, then each q and k head (head_dim channels) divided by
// sqrt(Σ_head y² + eps) as in decode, rounded once to bf16 and written widened (exactly) to f32 into
// q, k, v [t, qkv], the chunked form's inputs; rows ≥ t are untouched. The final state holds the
// last W inputs (with the old state's tail when t < W).
//
// A width-W filter has no recurrence, so the tokens run in parallel: a warp takes one head of
// q, k or v over the CONV_PREFILL_TOKENS tokens of one tile, lane l its channels l·CPL ..
// l·CPL + CPL − 1 (CPL = head_dim / 32). Each window is seeded with the W inputs before the tile
// (from x, or from the old state before token 0), then carried in registers, each token's a in
// the same order as decode. The Σy² order: each lane over its channels ascending, then a warp
// butterfly (the ABI leaves it free). Consecutive warps take consecutive heads of one tile, so a
// token's row is read whole. Values move CPL at a time (8- and 16-byte accesses for D = 128) where
// x and q, k, v are aligned to that, element by element otherwise. A channel's state is read and
// written only by the warp that takes its head in tile 0, so no warp reads a window another writes.
//
// Geometry (src/launch.rs): `launch::conv_prefill(qkv, head_dim, t)`, one warp per (tile, head),
// grid-strided over the grid's warps: any 1-D block of whole warps. Requires head_dim 32, 64 or
// 128, qkv a multiple of it and 1 ≤ width ≤ CONV_MAX_WIDTH; otherwise nothing is written.
extern "C" __global__ void causal_conv1d_prefill_l2norm_split(float* __restrict__ state, const bf16* __restrict__ x,
                                                              const bf16* __restrict__ weight, float* __restrict__ q,
                                                              float* __restrict__ k, float* __restrict__ v, u32 t,
                                                              u32 qkv, u32 width, u32 head_dim, float eps) {
    if ((blockDim.x & 31u) != 0 || blockDim.y != 1 || blockDim.z != 1) return;
    if (width == 0 || width > CONV_MAX_WIDTH) return;
    if (head_dim != 32 && head_dim != 64 && head_dim != 128) return;
    if (qkv % head_dim != 0) return;
    switch (head_dim) {
        case 32: conv_prefill_heads<1>(state, x, weight, q, k, v, t, qkv, width, eps); break;
        case 64: conv_prefill_heads<2>(state, x, weight, q, k, v, t, qkv, width, eps); break;
        default: conv_prefill_heads<4>(state, x, weight, q, k, v, t, qkv, width, eps); break;
    }
}
