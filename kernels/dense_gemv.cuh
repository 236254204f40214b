// The one GEMV body of `gemv::dense_gemv_bf16` (m = 1) and
// `dense_gemv_bf16_batchm::dense_gemv_bf16_batchm` (2 ≤ m ≤ DENSE_GEMV_BATCHM_MAX_M). Both modules
// include it, so every output row is computed by the same expressions in the same order:
//
//   y[i][j] = bf16(acc), acc = 0; for p ascending: acc = acc + f32(x[i][p]) · f32(w[j][p])
//
// one f32 accumulator per output in ascending p: the ABI's order, the Rust reference's, and the
// GEMM's. Hence batchm rows are bit-identical to the gemv (and to the CPU mirror, with --fmad=false).
//
// Geometry: blockDim = (GEMV_COLS_PER_BLOCK, ROW_GROUPS), grid.x = ⌈n / GEMV_COLS_PER_BLOCK⌉ (the
// kernel grid-strides over column blocks). Thread (c, g) owns output column j0 + c for the rows
// i ≡ g (mod ROW_GROUPS). The weight streams through shared memory in K tiles of KT elements with
// cp.async double buffering: each tile of 32 weight rows is loaded coalesced (16-byte chunks) and
// stored with the chunk index XOR-swizzled by the row, so that the 32 lanes, each reading its own
// row, hit distinct banks. x rows are staged the same way and read as broadcasts. Positions past k
// are zero-filled in both, adding exact +0 terms (an accumulator started at +0 is never −0, so
// acc + 0 = acc bit for bit).
#pragma once

#include "kda_common.cuh"

#ifndef GEMV_COLS_PER_BLOCK
#error "GEMV_COLS_PER_BLOCK must be defined by the build (kernels.toml [defines])"
#endif

static_assert(GEMV_COLS_PER_BLOCK == 32, "the GEMV maps one lane to one output column");

// Copies 8 consecutive bf16 of a row (elements [p, p + 8) of a row of length k) into a 16-byte
// shared-memory chunk: cp.async when the whole chunk is in bounds and aligned, else element by
// element with zeros past k (or for rows past the end).
__device__ __forceinline__ void gemv_load_chunk(uint4* dst, const bf16* row, bool row_ok, u32 p, u32 k,
                                                bool vector_ok) {
    if (row_ok && vector_ok && p + 8 <= k) {
        cp_async_16(dst, row + p);
        return;
    }
    *dst = load_chunk_scalar(row, row_ok, p, k);
}

// acc = acc + x[e] · w[e] for the 8 elements of a chunk, in element order.
__device__ __forceinline__ float gemv_dot8(float acc, uint4 xv, uint4 wv) {
    acc = acc + bf16_lo(xv.x) * bf16_lo(wv.x);
    acc = acc + bf16_hi(xv.x) * bf16_hi(wv.x);
    acc = acc + bf16_lo(xv.y) * bf16_lo(wv.y);
    acc = acc + bf16_hi(xv.y) * bf16_hi(wv.y);
    acc = acc + bf16_lo(xv.z) * bf16_lo(wv.z);
    acc = acc + bf16_hi(xv.z) * bf16_hi(wv.z);
    acc = acc + bf16_lo(xv.w) * bf16_lo(wv.w);
    acc = acc + bf16_hi(xv.w) * bf16_hi(wv.w);
    return acc;
}

// x [m, k], w [n, k], y [m, n], 1 ≤ m ≤ MAXM; blockDim must be (32, ROW_GROUPS).
template <u32 MAXM, u32 ROW_GROUPS, u32 KT>
__device__ __forceinline__ void dense_gemv_body(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                                bf16* __restrict__ y, u32 m, u32 n, u32 k) {
    constexpr u32 COLS = GEMV_COLS_PER_BLOCK;
    constexpr u32 CH = KT / 8;                       // 16-byte chunks per row per tile
    constexpr u32 THREADS = COLS * ROW_GROUPS;
    constexpr u32 ROWS_PER_THREAD = (MAXM + ROW_GROUPS - 1) / ROW_GROUPS;
    static_assert(KT % 64 == 0, "the swizzle needs at least 8 chunks per row");
    __shared__ uint4 w_tile[2][COLS][CH];
    __shared__ uint4 x_tile[2][MAXM][CH];

    if (blockDim.x != COLS || blockDim.y != ROW_GROUPS || blockDim.z != 1) return;
    if (m == 0 || m > MAXM) return;
    const u32 lane = threadIdx.x, group = threadIdx.y, tid = group * COLS + lane;
    // Uniform: vector copies need every row start 16-byte aligned.
    const bool vector_ok = (k % 8 == 0) && aligned16(x) && aligned16(w);
    const u32 tiles = (k + KT - 1) / KT;

    for (u32 j0 = blockIdx.x * COLS; j0 < n; j0 += gridDim.x * COLS) {
        auto load_tile = [&](u32 stage, u32 tile) {
            const u32 p0 = tile * KT;
            for (u32 e = tid; e < COLS * CH; e += THREADS) {
                const u32 r = e / CH, c = e % CH;
                const u32 j = j0 + r;
                const bool ok = j < n;
                const bf16* row = w + static_cast<size_t>(ok ? j : 0) * k;
                gemv_load_chunk(&w_tile[stage][r][c ^ (r & 7)], row, ok, p0 + c * 8, k, vector_ok);
            }
            for (u32 e = tid; e < m * CH; e += THREADS) {
                const u32 r = e / CH, c = e % CH;
                gemv_load_chunk(&x_tile[stage][r][c], x + static_cast<size_t>(r) * k, true, p0 + c * 8, k,
                                vector_ok);
            }
            cp_async_commit();
        };

        float acc[ROWS_PER_THREAD];
#pragma unroll
        for (u32 r = 0; r < ROWS_PER_THREAD; ++r) acc[r] = 0.0f;

        if (tiles > 0) load_tile(0, 0);
        for (u32 tile = 0; tile < tiles; ++tile) {
            const u32 stage = tile & 1;
            if (tile + 1 < tiles) {
                load_tile(stage ^ 1, tile + 1);
                cp_async_wait<1>();
            } else {
                cp_async_wait<0>();
            }
            __syncthreads();
#pragma unroll 4
            for (u32 c = 0; c < CH; ++c) {
                const uint4 wv = w_tile[stage][lane][c ^ (lane & 7)];
#pragma unroll
                for (u32 r = 0; r < ROWS_PER_THREAD; ++r) {
                    const u32 i = group + r * ROW_GROUPS;
                    if (i < m) acc[r] = gemv_dot8(acc[r], x_tile[stage][i][c], wv);
                }
            }
            // The next iteration's load overwrites this stage.
            __syncthreads();
        }

        const u32 j = j0 + lane;
        if (j < n) {
#pragma unroll
            for (u32 r = 0; r < ROWS_PER_THREAD; ++r) {
                const u32 i = group + r * ROW_GROUPS;
                if (i < m) y[static_cast<size_t>(i) * n + j] = narrow(acc[r]);
            }
        }
    }
}
