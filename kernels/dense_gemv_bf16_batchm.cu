// dense_gemv_bf16_batchm: y[i][j] = bf16(Σ_p x[i][p]·w[j][p]) for 1 ≤ m ≤ DENSE_GEMV_BATCHM_MAX_M
// rows of x (ldx ≥ k elements apart: a column range of a wider matrix), reading the weight once
// for all of them (docs/kernels.md). Each row is computed by the very body of `gemv::dense_gemv_bf16`
// (dense_gemv.cuh: same expressions, same order, whatever m and the block shape), so row i is
// bit-identical to the gemv of row i.
//
// Geometry (src/launch.rs): `launch::gemv(m, n)` with m ≥ 2: blockDim = (GEMV_COLS_PER_BLOCK,
// GEMV_BATCHM_ROW_GROUPS), grid ⌈n / GEMV_COLS_PER_BLOCK⌉: the block's warps share its units
// (4 columns over one part of K each). Shared memory: the part totals of 16 rows, 8 KiB.
// m outside 1..=DENSE_GEMV_BATCHM_MAX_M writes nothing.
#include "dense_gemv.cuh"

#ifndef DENSE_GEMV_BATCHM_MAX_M
#error "DENSE_GEMV_BATCHM_MAX_M must be defined by the build (kernels.toml [defines])"
#endif
#ifndef GEMV_BATCHM_ROW_GROUPS
#error "GEMV_BATCHM_ROW_GROUPS must be defined by the build (kernels.toml [defines])"
#endif

// At least two blocks per SM: room for the 16 × 4 accumulators, the weight chunks in flight and
// the x chunks without spilling (ptxas otherwise caps at 128 registers and spills).
extern "C" __global__ void __launch_bounds__(GEMV_COLS_PER_BLOCK * GEMV_BATCHM_ROW_GROUPS, 2)
    dense_gemv_bf16_batchm(const bf16* __restrict__ x, const bf16* __restrict__ w, bf16* __restrict__ y, u32 m,
                           u32 n, u32 k, u32 ldx) {
    dense_gemv_body<DENSE_GEMV_BATCHM_MAX_M, GEMV_BATCHM_ROW_GROUPS>(x, w, y, m, n, k, ldx);
}
