// kda_gate: the forget gate as a per-channel log-decay g ≤ 0, and beta, the per-head sigmoid of the
// b projection (docs/kernels.md, gate): the two elementwise laws of the block's front end, in one
// launch.
//
// Geometry (src/launch.rs): `launch::elementwise_by(t·h·d, 4)`; the kernel grid-strides, so any 1-D
// geometry covers it. Where every pointer allows it and d is a multiple of 4, a thread takes 4
// channels of one head at a time (8-byte loads of g_raw, 16-byte loads and stores of f32); the
// first t·h threads of the grid's stride also take one beta each.
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
// [t, h] f32: beta = σ(b_raw). Any other law, or ldb < h, writes nothing. Accurate expf throughout.
extern "C" __global__ void kda_gate_bf16(const bf16* __restrict__ g_raw, const float* __restrict__ dt_bias,
                                         const float* __restrict__ a_log, const bf16* __restrict__ b_raw,
                                         float* __restrict__ gate, float* __restrict__ beta, u32 t, u32 h, u32 d,
                                         u32 ldb, u32 law, float lower_bound) {
    if (law > 1 || h == 0 || d == 0 || ldb < h) return;
    const size_t row = static_cast<size_t>(h) * d;
    const size_t n = static_cast<size_t>(t) * row;
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    for (size_t i = first; i < static_cast<size_t>(t) * h; i += stride)
        beta[i] = sigmoidf_acc(widen(b_raw[i / h * ldb + i % h]));
    const bool by_four = d % 4 == 0 && aligned_to(g_raw, 8) && aligned16(dt_bias) && aligned16(gate);
    if (by_four) {
        for (size_t i = first; i < n / 4; i += stride) {
            const size_t channel = (i * 4) % row;
            const float decay = expf(a_log[channel / d]);
            const uint2 raw = reinterpret_cast<const uint2*>(g_raw)[i];
            const float4 bias = *reinterpret_cast<const float4*>(dt_bias + channel);
            reinterpret_cast<float4*>(gate)[i] = make_float4(
                gate_law(bf16_lo(raw.x) + bias.x, decay, law, lower_bound),
                gate_law(bf16_hi(raw.x) + bias.y, decay, law, lower_bound),
                gate_law(bf16_lo(raw.y) + bias.z, decay, law, lower_bound),
                gate_law(bf16_hi(raw.y) + bias.w, decay, law, lower_bound));
        }
        return;
    }
    for (size_t i = first; i < n; i += stride) {
        const size_t channel = i % row;
        gate[i] = gate_law(widen(g_raw[i]) + dt_bias[channel], expf(a_log[channel / d]), law, lower_bound);
    }
}
