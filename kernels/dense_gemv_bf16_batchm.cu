// dense_gemv_bf16_batchm: y[i][j] = bf16(Σ_p x[i][p]·w[j][p]) for 1 ≤ m ≤ DENSE_GEMV_BATCHM_MAX_M
// rows of x (ldx ≥ k elements apart: a column range of a wider matrix), reading the weight once
// for all of them (docs/kernels.md). Each row is computed by the very body of `gemv::dense_gemv_bf16`
// (dense_gemv.cuh: same expressions, same order, whatever m and the block shape), so row i is
// bit-identical to the gemv of row i.
//
// Geometry (src/launch.rs): `launch::gemv(m, n)` with m ≥ 2: blockDim = (GEMV_COLS_PER_BLOCK,
// GEMV_BATCHM_ROW_GROUPS), grid ⌈n / GEMV_COLS_PER_BLOCK⌉: the block's warps share its units
// (4 columns over one part of K each), the accumulators sized by the smallest of 2, 4, 8 and 16
// rows that holds m. Shared memory: the part totals of each of those sizes, 15 KiB in all.
// m outside 1..=DENSE_GEMV_BATCHM_MAX_M writes nothing.
#include "dense_gemv.cuh"

#ifndef DENSE_GEMV_BATCHM_MAX_M
#error "DENSE_GEMV_BATCHM_MAX_M must be defined by the build (kernels.toml [defines])"
#endif
#ifndef GEMV_BATCHM_ROW_GROUPS
#error "GEMV_BATCHM_ROW_GROUPS must be defined by the build (kernels.toml [defines])"
#endif

static_assert(DENSE_GEMV_BATCHM_MAX_M > 8, "the row buckets below: 2, 4, 8, then the most rows");

// One bucket's body as a function of its own: inlined side by side, the four would share one
// register allocation and spill (each alone takes 131 to 210 registers).
template <u32 ROWS>
__device__ __noinline__ void batchm_bucket(const bf16* __restrict__ x, const bf16* __restrict__ w, bf16* __restrict__ y,
                                           u32 m, u32 n, u32 k, u32 ldx) {
    dense_gemv_body<ROWS, GEMV_BATCHM_ROW_GROUPS>(x, w, y, m, n, k, ldx);
}

// At least two blocks per SM: room for the 16 × 4 accumulators, the weight chunks in flight and
// the x chunks without spilling (215 registers; ptxas otherwise caps at 128 and spills).
extern "C" __global__ void __launch_bounds__(GEMV_COLS_PER_BLOCK * GEMV_BATCHM_ROW_GROUPS, 2)
    dense_gemv_bf16_batchm(const bf16* __restrict__ x, const bf16* __restrict__ w, bf16* __restrict__ y, u32 m,
                           u32 n, u32 k, u32 ldx) {
    // The body multiply-adds a compile-time number of rows (branch-free, sum_chunks): the
    // smallest bucket that holds m, so that a batch of 2 does not pay for 16.
    if (m <= 2)
        batchm_bucket<2>(x, w, y, m, n, k, ldx);
    else if (m <= 4)
        batchm_bucket<4>(x, w, y, m, n, k, ldx);
    else if (m <= 8)
        batchm_bucket<8>(x, w, y, m, n, k, ldx);
    else
        batchm_bucket<DENSE_GEMV_BATCHM_MAX_M>(x, w, y, m, n, k, ldx);
}
