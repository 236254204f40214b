// kda_gate: the forget gate as a per-channel log-decay g ≤ 0, and beta, the per-head sigmoid of the
// b projection (docs/kernels.md, gate): the two elementwise laws of the block's front end, in one
// launch.
//
// Geometry (src/launch.rs): `launch::gate(t, h)`: one warp per (token, head) row of d channels,
// grid-strided over the grid's warps, so any 1-D block of whole warps works. A warp finds its rows'
// token and head by stepping, not by dividing per row; it takes the head's e^{a_log} once a row,
// and its lane 0 the row's beta. Where every pointer allows it and d is a multiple of 4, a lane
// takes 4 channels at a time (8-byte loads of g_raw, 16-byte loads and stores of f32).
#include "kda_common.cuh"

// One channel's gate from x = g_raw + dt_bias and decay = e^{a_log}.
__device__ __forceinline__ float gate_law(float x, float decay, u32 law, float lower_bound) {
    if (law == 0) return lower_bound * sigmoidf_acc(decay * x);
    const float softplus = x > 20.0f ? x : log1pf(expf(x));
    return -decay * softplus;
}

// g_raw [t, h, d] bf16, dt_bias [h·d] f32 (per channel), a_log [h] f32 (per head) -> gate [t, h, d]:
//   law 0 (bounded):  gate = lower_bound · σ(e^{a_log[h]} · (g_raw + dt_bias))
//   law 1 (softplus): gate = −e^{a_log[h]} · softplus(g_raw + dt_bias), softplus(x) = x for x > 20,
//                     else ln(1 + e^x) (as log1pf, accurate where e^x is tiny).
// b_raw [t, h] bf16 (rows ldb ≥ h elements apart: the b columns of a wider projection) -> beta
// [t, h] f32: beta = σ(b_raw). Any other law, ldb < h, or a block of other than whole warps writes
// nothing. Accurate expf throughout.
extern "C" __global__ void kda_gate_bf16(const bf16* __restrict__ g_raw, const float* __restrict__ dt_bias,
                                         const float* __restrict__ a_log, const bf16* __restrict__ b_raw,
                                         float* __restrict__ gate, float* __restrict__ beta, u32 t, u32 h, u32 d,
                                         u32 ldb, u32 law, float lower_bound) {
    if (law > 1 || h == 0 || d == 0 || ldb < h || (blockDim.x & 31u) != 0) return;
    const u32 lane = threadIdx.x & 31;
    const bool by_four = d % 4 == 0 && aligned_to(g_raw, 8) && aligned16(dt_bias) && aligned16(gate);
    // Row (token, head) = warp_index() + k·warps: each step adds warps / h tokens and warps % h heads.
    const size_t warps = warp_count();
    const size_t token_step = warps / h;
    const u32 head_step = static_cast<u32>(warps % h);
    size_t token = warp_index() / h;
    u32 head = static_cast<u32>(warp_index() % h);
    while (token < t) {
        const size_t row = token * h + head;
        if (lane == 0) beta[row] = sigmoidf_acc(widen(b_raw[token * ldb + head]));
        const float decay = expf(a_log[head]);
        const float* bias = dt_bias + static_cast<size_t>(head) * d;
        const size_t at = row * d;
        if (by_four) {
            for (u32 c = 4 * lane; c < d; c += 4 * 32) {
                const uint2 raw = *reinterpret_cast<const uint2*>(g_raw + at + c);
                const float4 b = *reinterpret_cast<const float4*>(bias + c);
                *reinterpret_cast<float4*>(gate + at + c) = make_float4(
                    gate_law(bf16_lo(raw.x) + b.x, decay, law, lower_bound),
                    gate_law(bf16_hi(raw.x) + b.y, decay, law, lower_bound),
                    gate_law(bf16_lo(raw.y) + b.z, decay, law, lower_bound),
                    gate_law(bf16_hi(raw.y) + b.w, decay, law, lower_bound));
            }
        } else {
            for (u32 c = lane; c < d; c += 32)
                gate[at + c] = gate_law(widen(g_raw[at + c]) + bias[c], decay, law, lower_bound);
        }
        token += token_step;
        head += head_step;
        if (head >= h) {
            head -= h;
            ++token;
        }
    }
}
