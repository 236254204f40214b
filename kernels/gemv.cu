// gemv: dense_gemv_bf16, y[j] = bf16(Σ_p x[p]·w[j][p]), the m = 1 case of the GEMM
// (docs/kernels.md): K split over the lanes of a warp, fused multiply-adds, a fixed butterfly
// (dense_gemv.cuh); any k (tails zero-filled).
//
// Geometry (src/launch.rs): `launch::gemv(1, n)`: blockDim = (GEMV_COLS_PER_BLOCK, 1),
// grid ⌈n / GEMV_COLS_PER_BLOCK⌉. No shared memory.
#include "dense_gemv.cuh"

extern "C" __global__ void __launch_bounds__(GEMV_COLS_PER_BLOCK)
    dense_gemv_bf16(const bf16* __restrict__ x, const bf16* __restrict__ w, bf16* __restrict__ y, u32 n, u32 k) {
    dense_gemv_body</*MAXM=*/1, /*GROUPS=*/1>(x, w, y, 1, n, k);
}
