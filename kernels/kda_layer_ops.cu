// kda_layer_ops: the small kernels around the KDA core (docs/kernels.md): the sigmoid-gated output
// norm, q|k|v packing and splitting, the beta sigmoid and the fill.
//
// Geometry (src/launch.rs): `kda_o_norm_gated_bf16` runs `launch::norm(rows, d)`: one block per
// row (grid-strided), blockDim.x a multiple of 32 (≤ 1024). The elementwise kernels run
// `launch::elementwise(n)` and grid-stride, so any 1-D geometry covers them.
#include "kda_common.cuh"

// x [rows, d] f32, gate [rows, d] bf16, weight [d] bf16 -> out [rows, d] bf16:
// r = 1/sqrt(mean(x²) + eps) per row (one head), out = bf16(((x·r)·w)·σ(gate)).
// The Σx² order is a block reduction (the ABI leaves it free; tolerance ≤ 1 bf16 ulp).
extern "C" __global__ void kda_o_norm_gated_bf16(const float* __restrict__ x, const bf16* __restrict__ gate,
                                                 const bf16* __restrict__ weight, bf16* __restrict__ out,
                                                 u32 rows, u32 d, float eps) {
    __shared__ float scratch[32];
    if ((blockDim.x & 31u) != 0 || d == 0) return;
    for (u32 row = blockIdx.x; row < rows; row += gridDim.x) {
        const size_t base = static_cast<size_t>(row) * d;
        float sum = 0.0f;
        for (u32 i = threadIdx.x; i < d; i += blockDim.x) {
            const float xi = x[base + i];
            sum = sum + xi * xi;
        }
        sum = block_sum(sum, scratch);
        const float r = 1.0f / sqrtf(sum / static_cast<float>(d) + eps);
        for (u32 i = threadIdx.x; i < d; i += blockDim.x) {
            const float value = x[base + i] * r * widen(weight[i]) * sigmoidf_acc(widen(gate[base + i]));
            out[base + i] = narrow(value);
        }
    }
}

// src [t, 3·qkv] bf16 -> q, k, v [t, qkv] f32, exact; rows ≥ t untouched.
extern "C" __global__ void kda_split_widen(const bf16* __restrict__ src, float* __restrict__ q,
                                           float* __restrict__ k, float* __restrict__ v, u32 t, u32 qkv) {
    if (qkv == 0) return;
    const size_t n = static_cast<size_t>(t) * 3 * qkv;
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        const QkvPosition at = qkv_position(i, qkv);
        float* dst = at.part == 0 ? q : (at.part == 1 ? k : v);
        dst[at.row * qkv + at.col] = widen(src[i]);
    }
}

// y[i] = σ(f32(x[i])), i < n.
extern "C" __global__ void kda_sigmoid_bf16_f32(const bf16* __restrict__ x, float* __restrict__ y, u32 n) {
    const u32 stride = gridDim.x * blockDim.x;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) y[i] = sigmoidf_acc(widen(x[i]));
}

// dst[i] = value, i < n.
extern "C" __global__ void kda_fill_f32(float* __restrict__ dst, u32 n, float value) {
    const u32 stride = gridDim.x * blockDim.x;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) dst[i] = value;
}

// q, k, v [t, qkv] -> dst [t, 3·qkv] = q[τ] | k[τ] | v[τ].
extern "C" __global__ void kda_pack_qkv_bf16(const bf16* __restrict__ q, const bf16* __restrict__ k,
                                             const bf16* __restrict__ v, bf16* __restrict__ dst, u32 t, u32 qkv) {
    if (qkv == 0) return;
    const size_t n = static_cast<size_t>(t) * 3 * qkv;
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        const QkvPosition at = qkv_position(i, qkv);
        const bf16* src = at.part == 0 ? q : (at.part == 1 ? k : v);
        dst[i] = src[at.row * qkv + at.col];
    }
}
