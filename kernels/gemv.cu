// gemv: dense_gemv_bf16, y[j] = bf16(Σ_p x[p]·w[j][p]), the m = 1 case of the GEMM
// (docs/kernels.md): K split over the lanes of a warp, fused multiply-adds, a fixed butterfly
// (dense_gemv.cuh); any k (tails zero-filled).
//
// Geometry (src/launch.rs): `launch::gemv(1, n)`: blockDim = (GEMV_COLS_PER_BLOCK, GEMV_WARPS),
// grid ⌈n / GEMV_COLS_PER_BLOCK⌉: each warp two units, a unit 4 of the block's 32 columns over one
// of the GEMV_K_PARTS parts of K, so that enough loads are in flight for HBM however few columns
// the weight has (one warp per block reached 19 % of a copy's bandwidth on an H200, 8 warps of
// whole rows 79 %, and a 128-column projection got 4 blocks). Two blocks per SM: 32 warps, at
// most 64 registers a thread (32 warps of 32 registers spill). Shared memory: the part totals,
// 512 B.
#include "dense_gemv.cuh"

#ifndef GEMV_WARPS
#error "GEMV_WARPS must be defined by the build (kernels.toml [defines])"
#endif

extern "C" __global__ void __launch_bounds__(GEMV_COLS_PER_BLOCK * GEMV_WARPS, 2)
    dense_gemv_bf16(const bf16* __restrict__ x, const bf16* __restrict__ w, bf16* __restrict__ y, u32 n, u32 k) {
    dense_gemv_body</*MAXM=*/1, GEMV_WARPS>(x, w, y, 1, n, k, /*ldx=*/k);
}
