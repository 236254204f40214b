// kda_layer_ops: the small kernels around the KDA core (docs/kernels.md): the sigmoid-gated output
// norm and the fill.
//
// Geometry (src/launch.rs): `kda_o_norm_gated_bf16` runs `launch::norm(rows)`: one warp per row,
// grid-strided over the warps of the grid, any block of whole warps (≤ 1024 threads). The fill
// runs `launch::elementwise(n)` and grid-strides, so any 1-D geometry covers it.
#include "kda_common.cuh"

// x [rows, d] f32, gate [rows, d] bf16, weight [d] bf16 -> out [rows, d] bf16:
// r = 1/sqrt(mean(x²) + eps) per row (one head), out = bf16(((x·r)·w)·σ(gate)).
// The Σx² order: each lane over its elements lane, lane + 32, … ascending, then a warp butterfly
// (the ABI leaves it free; tolerance ≤ 1 bf16 ulp).
extern "C" __global__ void kda_o_norm_gated_bf16(const float* __restrict__ x, const bf16* __restrict__ gate,
                                                 const bf16* __restrict__ weight, bf16* __restrict__ out,
                                                 u32 rows, u32 d, float eps) {
    if ((blockDim.x & 31u) != 0 || d == 0) return;
    const u32 lane = threadIdx.x & 31;
    for (size_t row = warp_index(); row < rows; row += warp_count()) {
        const size_t base = row * d;
        float sum = 0.0f;
        for (u32 i = lane; i < d; i += 32) {
            const float xi = x[base + i];
            sum = sum + xi * xi;
        }
        const float r = 1.0f / sqrtf(warp_sum(sum) / static_cast<float>(d) + eps);
        for (u32 i = lane; i < d; i += 32) {
            const float value = x[base + i] * r * widen(weight[i]) * sigmoidf_acc(widen(gate[base + i]));
            out[base + i] = narrow(value);
        }
    }
}

// dst[i] = value, i < n.
extern "C" __global__ void kda_fill_f32(float* __restrict__ dst, u32 n, float value) {
    const u32 stride = gridDim.x * blockDim.x;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) dst[i] = value;
}
