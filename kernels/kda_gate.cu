// kda_gate: the forget gate as a per-channel log-decay g ≤ 0 (docs/kernels.md, gate).
//
// Geometry (src/launch.rs): `launch::elementwise(t·h·d)`; the kernel grid-strides, so any 1-D
// geometry covers it.
#include "kda_common.cuh"

// g_raw [t, h, d] bf16, dt_bias [h·d] f32 (per channel), a_log [h] f32 (per head) -> gate [t, h, d]:
//   law 0 (bounded):  gate = lower_bound · σ(e^{a_log[h]} · (g_raw + dt_bias))
//   law 1 (softplus): gate = −e^{a_log[h]} · softplus(g_raw + dt_bias), softplus(x) = x for x > 20,
//                     else ln(1 + e^x) (as log1pf, accurate where e^x is tiny).
// Any other law writes nothing. Accurate expf throughout (tolerance: relative ≤ 1e-6).
extern "C" __global__ void kda_gate_bf16(const bf16* __restrict__ g_raw, const float* __restrict__ dt_bias,
                                         const float* __restrict__ a_log, float* __restrict__ gate, u32 t, u32 h,
                                         u32 d, u32 law, float lower_bound) {
    if (law > 1 || h == 0 || d == 0) return;
    const size_t row = static_cast<size_t>(h) * d;
    const size_t n = static_cast<size_t>(t) * row;
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        const size_t channel = i % row;
        const float x = widen(g_raw[i]) + dt_bias[channel];
        const float decay = expf(a_log[channel / d]);
        float g;
        if (law == 0) {
            g = lower_bound * sigmoidf_acc(decay * x);
        } else {
            const float softplus = x > 20.0f ? x : log1pf(expf(x));
            g = -decay * softplus;
        }
        gate[i] = g;
    }
}
