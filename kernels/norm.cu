// norm: in-place per-head L2 normalisation of bf16 rows (docs/kernels.md, l2).
//
// Geometry (src/launch.rs): `launch::norm(rows·heads, head_dim)`: one block per (row, head),
// grid-strided over them, blockDim.x a multiple of 32 (≤ 1024); the block loops over head_dim.
#include "kda_common.cuh"

// data [rows, row_stride] bf16: for each row r and head hd, the head_dim values at
// r·row_stride + hd·head_dim become bf16(x / sqrt(Σ x² + eps)) (eps inside the root). The Σx² order
// is a block reduction (the ABI leaves it free; tolerance ≤ 1 bf16 ulp). Launches whose heads do
// not fit in row_stride write nothing.
extern "C" __global__ void l2_norm_bf16(bf16* __restrict__ data, u32 rows, u32 row_stride, u32 heads,
                                        u32 head_dim, float eps) {
    __shared__ float scratch[32];
    if ((blockDim.x & 31u) != 0 || head_dim == 0) return;
    if (static_cast<unsigned long long>(heads) * head_dim > row_stride) return;
    const size_t items = static_cast<size_t>(rows) * heads;
    for (size_t item = blockIdx.x; item < items; item += gridDim.x) {
        const size_t row = item / heads, head = item - row * heads;
        bf16* x = data + row * row_stride + head * head_dim;
        float sum = 0.0f;
        for (u32 i = threadIdx.x; i < head_dim; i += blockDim.x) {
            const float xi = widen(x[i]);
            sum = sum + xi * xi;
        }
        const float norm = sqrtf(block_sum(sum, scratch) + eps);
        for (u32 i = threadIdx.x; i < head_dim; i += blockDim.x) x[i] = narrow(widen(x[i]) / norm);
    }
}
