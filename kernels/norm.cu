// norm: in-place per-head L2 normalisation of bf16 rows (docs/kernels.md, l2).
//
// Geometry (src/launch.rs): `launch::norm(rows·heads)`: one warp per (row, head), grid-strided over
// the warps of the grid, any block of whole warps (≤ 1024 threads); a lane takes every 32nd value.
#include "kda_common.cuh"

// data [rows, row_stride] bf16: for each row r and head hd, the head_dim values at
// r·row_stride + hd·head_dim become bf16(x / sqrt(Σ x² + eps)) (eps inside the root). The Σx² order:
// each lane over its values ascending, then a warp butterfly (the ABI leaves it free; tolerance
// ≤ 1 bf16 ulp). Launches whose heads do not fit in row_stride write nothing.
extern "C" __global__ void l2_norm_bf16(bf16* __restrict__ data, u32 rows, u32 row_stride, u32 heads,
                                        u32 head_dim, float eps) {
    if ((blockDim.x & 31u) != 0 || head_dim == 0) return;
    if (static_cast<unsigned long long>(heads) * head_dim > row_stride) return;
    const size_t items = static_cast<size_t>(rows) * heads;
    const u32 lane = threadIdx.x & 31;
    for (size_t item = warp_index(); item < items; item += warp_count()) {
        const size_t row = item / heads, head = item - row * heads;
        bf16* x = data + row * row_stride + head * head_dim;
        float sum = 0.0f;
        for (u32 i = lane; i < head_dim; i += 32) {
            const float xi = widen(x[i]);
            sum = sum + xi * xi;
        }
        const float norm = sqrtf(warp_sum(sum) + eps);
        for (u32 i = lane; i < head_dim; i += 32) x[i] = narrow(widen(x[i]) / norm);
    }
}
