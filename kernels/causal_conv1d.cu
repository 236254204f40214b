// causal_conv1d: the depthwise causal conv (width W ≤ CONV_MAX_WIDTH) with SiLU, carrying a
// [dim, W] f32 state of the last W inputs, channel-major, slot W−1 the newest, followed by the
// per-head L2 norm of the q and k channels (docs/kernels.md).
//
// Both entries give a warp one head of head_dim channels (a q, k or v head of the packed q | k | v
// rows), lane l its channels l·CPL .. l·CPL + CPL − 1 (CPL = head_dim / 32), and run each token
// of a head through one function, `head_token`, so decode and prefill compute the same values the
// same way: the conv and SiLU per channel, then for a q or k head y ← y / sqrt(Σ_head y² + eps),
// the Σy² each lane over its channels ascending, then a warp butterfly (the ABI leaves it free).
// No barrier, no shared memory. Values move CPL at a time (8-byte loads at D = 128) where the
// pointers are aligned to that, element by element otherwise.
//
// Geometry (src/launch.rs): `launch::conv_decode(dim, head_dim, rows)`, one warp per (batch row,
// head), and `launch::conv_prefill(qkv, head_dim, t)`, one warp per (token tile, head); both
// grid-stride over the grid's warps, so any 1-D block of whole warps runs them.
//
// Per channel c and token: shift state[c][0..W−1] ← state[c][1..W], state[c][W−1] ← f32(x[c]);
// a = Σ_{s<W} state[c][s]·f32(w[c][s]) (one accumulator from 0, ascending s: tap 0 multiplies the
// oldest input); y = silu(a) = a·(1/(1+e^{−a})).
#include "kda_common.cuh"

#include <type_traits>

#ifndef CONV_MAX_WIDTH
#error "CONV_MAX_WIDTH must be defined by the build (kernels.toml [defines])"
#endif
#ifndef CONV_PREFILL_TOKENS
#error "CONV_PREFILL_TOKENS must be defined by the build (kernels.toml [defines])"
#endif

static_assert(CONV_PREFILL_TOKENS >= CONV_MAX_WIDTH, "a later token tile's window lies in x");

__device__ __forceinline__ float silu(float a) { return a * (1.0f / (1.0f + expf(-a))); }

// Loads channel c's window into win[0..width) and its taps into tap[0..width).
__device__ __forceinline__ void load_channel(const float* state, const bf16* weight, size_t c, u32 width,
                                             float (&win)[CONV_MAX_WIDTH], float (&tap)[CONV_MAX_WIDTH]) {
    const size_t base = c * width;
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

__device__ __forceinline__ void store_channel(float* state, size_t c, u32 width, const float (&win)[CONV_MAX_WIDTH]) {
    const size_t base = c * width;
#pragma unroll
    for (u32 s = 0; s < CONV_MAX_WIDTH; ++s)
        if (s < width) state[base + s] = win[s];
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

// N values to p, each rounded to bf16: one store of 2·N bytes where `vector` (p aligned to them),
// else element by element.
template <u32 N>
__device__ __forceinline__ void store_bf16s(bf16* p, bool vector, const float (&values)[N]) {
    if constexpr (N == 4) {
        if (vector) {
            const uint32_t lo = pack_bf16(values[0], values[1]), hi = pack_bf16(values[2], values[3]);
            *reinterpret_cast<uint2*>(p) = make_uint2(lo, hi);
            return;
        }
    } else if constexpr (N == 2) {
        if (vector) {
            *reinterpret_cast<uint32_t*>(p) = pack_bf16(values[0], values[1]);
            return;
        }
    }
#pragma unroll
    for (u32 j = 0; j < N; ++j) p[j] = narrow(values[j]);
}

// One token of one head for one lane, the step both entries share: y holds the lane's CPL inputs
// and becomes its outputs before rounding, silu(a) of each channel (win advanced by the input),
// divided by the head's sqrt(Σ y² + eps) where `normed` (a q or k head; uniform over the warp,
// whose 32 lanes must all take part).
template <u32 CPL>
__device__ __forceinline__ void head_token(float (&win)[CPL][CONV_MAX_WIDTH], const float (&tap)[CPL][CONV_MAX_WIDTH],
                                           u32 width, bool normed, float eps, float (&y)[CPL]) {
    float squares = 0.0f;
#pragma unroll
    for (u32 j = 0; j < CPL; ++j) {
        y[j] = silu(push(win[j], tap[j], width, y[j]));
        squares = squares + y[j] * y[j];
    }
    if (normed) {
        const float norm = sqrtf(warp_sum(squares) + eps);
#pragma unroll
        for (u32 j = 0; j < CPL; ++j) y[j] = y[j] / norm;
    }
}

// Batched decode with heads of 32·CPL channels (see the decode entry).
template <u32 CPL>
__device__ __forceinline__ void conv_decode_heads(float* __restrict__ pool, const u32* __restrict__ slot,
                                                  const bf16* __restrict__ x, const bf16* __restrict__ weight,
                                                  bf16* __restrict__ out, u32 b, u32 slots, u32 dim, u32 ldx,
                                                  u32 width, u32 qk_channels, float eps) {
    constexpr u32 HEAD = 32 * CPL;
    const u32 heads = dim / HEAD;
    const size_t units = static_cast<size_t>(b) * heads;
    // Every offset below is a multiple of CPL elements where ldx is (dim is a multiple of HEAD).
    const bool vector = ldx % CPL == 0 && aligned_to(x, 2 * CPL) && aligned_to(out, 2 * CPL);
    const u32 lane = threadIdx.x & 31;
    for (size_t unit = warp_index(); unit < units; unit += warp_count()) {
        const u32 row = static_cast<u32>(unit / heads), head = static_cast<u32>(unit % heads);
        // Uniform over the warp: a row without a slot writes nothing.
        const u32 s = batch_slot(slot, row, slots);
        if (s == KDA_NO_SLOT) continue;
        float* const state = pool + static_cast<size_t>(s) * dim * width;
        const u32 c0 = head * HEAD + lane * CPL;
        float win[CPL][CONV_MAX_WIDTH], tap[CPL][CONV_MAX_WIDTH], y[CPL];
#pragma unroll
        for (u32 j = 0; j < CPL; ++j) load_channel(state, weight, c0 + j, width, win[j], tap[j]);
        load_widened<CPL>(x + static_cast<size_t>(row) * ldx + c0, vector, y);
        head_token<CPL>(win, tap, width, head * HEAD < qk_channels, eps, y);
#pragma unroll
        for (u32 j = 0; j < CPL; ++j) store_channel(state, c0 + j, width, win[j]);
        store_bf16s<CPL>(out + static_cast<size_t>(row) * dim + c0, vector, y);
    }
}

// The prefill with heads of 32·CPL channels, CPL consecutive channels a lane (see the entry).
template <u32 CPL>
__device__ __forceinline__ void conv_prefill_heads(float* __restrict__ state, const bf16* __restrict__ x,
                                                   const bf16* __restrict__ weight, float* __restrict__ q,
                                                   float* __restrict__ k, float* __restrict__ v, u32 t, u32 qkv,
                                                   u32 ldx, u32 width, float eps) {
    constexpr u32 HEAD = 32 * CPL;
    const u32 heads = qkv / HEAD;  // of each of q, k and v
    const size_t groups = 3 * static_cast<size_t>(heads);
    const size_t units = (t + CONV_PREFILL_TOKENS - 1) / CONV_PREFILL_TOKENS * groups;
    // Every offset below is a multiple of CPL elements where ldx is (qkv is a multiple of HEAD), so
    // aligned bases make every access aligned.
    const bool vector = ldx % CPL == 0 && aligned_to(x, 2 * CPL) && aligned_to(q, 4 * CPL) &&
                        aligned_to(k, 4 * CPL) && aligned_to(v, 4 * CPL);
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
                    win[j][s] = widen(x[static_cast<size_t>(first - width + s) * ldx + c0 + j]);
                }
            }
        }
#pragma unroll 4
        for (u32 tau = first; tau < last; ++tau) {
            float y[CPL];
            load_widened<CPL>(x + static_cast<size_t>(tau) * ldx + c0, vector, y);
            head_token<CPL>(win, tap, width, part < 2, eps, y);
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
                        if (s < width) win[j][s] = widen(x[static_cast<size_t>(t - width + s) * ldx + c0 + j]);
                }
                store_channel(state, c0 + j, width, win[j]);
            }
        }
    }
}

}  // namespace

// Batched decode, one token for each of b sequences: x [b, dim] (rows ldx ≥ dim elements apart:
// the q | k | v columns of a wider projection), out [b, dim]; batch row r updates the window in
// pool slot batch_slot(slot, r, slots) ([slots, dim, W]; a row without one writes nothing), then
// the channels c < qk_channels (the q and k heads) are L2-normalised per head and
// out[r][c] = bf16(y), one rounding. One warp per (row, head), grid-strided. Requires head_dim 32,
// 64 or 128, dim and qk_channels multiples of it, qk_channels ≤ dim ≤ ldx and 1 ≤ width ≤
// CONV_MAX_WIDTH; otherwise nothing is written.
extern "C" __global__ void causal_conv1d_update_l2norm(float* __restrict__ pool, const u32* __restrict__ slot,
                                                       const bf16* __restrict__ x, const bf16* __restrict__ weight,
                                                       bf16* __restrict__ out, u32 b, u32 slots, u32 dim, u32 ldx,
                                                       u32 width, u32 qk_channels, u32 head_dim, float eps) {
    if ((blockDim.x & 31u) != 0 || blockDim.y != 1 || blockDim.z != 1) return;
    if (width == 0 || width > CONV_MAX_WIDTH) return;
    if (head_dim != 32 && head_dim != 64 && head_dim != 128) return;
    if (dim % head_dim != 0 || qk_channels % head_dim != 0 || qk_channels > dim || ldx < dim) return;
    with_head_dim(head_dim, [&](auto head_size) {
        conv_decode_heads<decltype(head_size)::value / 32>(pool, slot, x, weight, out, b, slots, dim, ldx, width,
                                                           qk_channels, eps);
    });
}

// Prefill, t tokens of packed q | k | v rows, x [t, 3·qkv] (dim = 3·qkv channels; rows ldx ≥ dim
// elements apart, the q | k | v columns of a wider projection): every channel's conv and SiLU,
// then each q and k head (head_dim channels) divided by sqrt(Σ_head y² + eps) as in decode,
// rounded once to bf16 and written widened (exactly) to f32 into q, k, v [t, qkv], the chunked
// form's inputs; rows ≥ t are untouched. The final state holds the last W inputs (with the old
// state's tail when t < W).
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
// 128, qkv a multiple of it, ldx ≥ 3·qkv and 1 ≤ width ≤ CONV_MAX_WIDTH; otherwise nothing is
// written.
extern "C" __global__ void causal_conv1d_prefill_l2norm_split(float* __restrict__ state, const bf16* __restrict__ x,
                                                              const bf16* __restrict__ weight, float* __restrict__ q,
                                                              float* __restrict__ k, float* __restrict__ v, u32 t,
                                                              u32 qkv, u32 ldx, u32 width, u32 head_dim, float eps) {
    if ((blockDim.x & 31u) != 0 || blockDim.y != 1 || blockDim.z != 1) return;
    if (width == 0 || width > CONV_MAX_WIDTH) return;
    if (head_dim != 32 && head_dim != 64 && head_dim != 128) return;
    if (qkv % head_dim != 0 || ldx < 3 * static_cast<size_t>(qkv)) return;
    with_head_dim(head_dim, [&](auto head_size) {
        conv_prefill_heads<decltype(head_size)::value / 32>(state, x, weight, q, k, v, t, qkv, ldx, width, eps);
    });
}
