// The one GEMV body of `gemv::dense_gemv_bf16` (m = 1) and
// `dense_gemv_bf16_batchm::dense_gemv_bf16_batchm` (2 ≤ m ≤ DENSE_GEMV_BATCHM_MAX_M). Both modules
// include it, and every output is computed by the same expressions in the same order whatever m
// and the block shape are, so batchm rows are bit-identical to the gemv (the ABI's pair):
//
//   the row's 16-byte chunks are split into GEMV_K_PARTS parts, each a run of whole groups of 32
//   chunks; in part p, lane l of a warp sums its chunks l, l + 32, ... of the part in ascending
//   order, the 8 elements of a chunk in order, with one fused multiply-add each (__fmaf_rn, from
//   +0); the 32 lane sums of the part are added by a fixed butterfly (lane pairs 16 apart, then 8,
//   4, 2, 1); the part totals are added in part order, ((p0 + p1) + p2) + p3.
//
// That is a split of K over the parts and the 32 lanes (deterministic: no atomics, the order fixed
// by the code), so an output is a chain of k/(32·parts) steps, not k; the ABI leaves the order free
// outside the pair.
//
// Geometry: blockDim = (GEMV_COLS_PER_BLOCK, groups), grid.x = ⌈n / GEMV_COLS_PER_BLOCK⌉ (the
// kernel grid-strides over column blocks). A block's work is its units: (pass, part) pairs, a pass
// being GEMV_COLUMNS_PER_PASS of its columns; warp g takes units g, g + groups, ..., each for all m
// rows: each lane reads the pass's weight rows and the x rows with 16-byte loads (a warp reads 512
// contiguous bytes of a row at once). Splitting K over the warps of a block is what keeps enough
// loads in flight when the weight has few columns (a decode step's narrow projections, 64 or 128
// columns: 2 or 4 blocks). A unit's sums are reduced with one butterfly that also scatters them:
// after the steps 16 and 8 apart each lane holds one column's partial, whose last three steps are a
// plain butterfly; the part totals meet in shared memory, and after a barrier the block's threads
// add each output's parts in order. Chunks past k are zero (adding +0 to a sum started at +0
// leaves it unchanged), and unaligned operands or k % 8 != 0 are read element by element.
#pragma once

#include "kda_common.cuh"

#ifndef GEMV_COLS_PER_BLOCK
#error "GEMV_COLS_PER_BLOCK must be defined by the build (kernels.toml [defines])"
#endif

#ifndef GEMV_K_PARTS
#error "GEMV_K_PARTS must be defined by the build (kernels.toml [defines])"
#endif

static_assert(GEMV_COLS_PER_BLOCK == 32, "a GEMV block owns 32 output columns");

// Columns a warp sums at once: one 16-byte load of each per chunk, and the butterfly that
// scatters them.
constexpr u32 GEMV_COLUMNS_PER_PASS = 4;

// Eight consecutive bf16 of `row` from chunk position p as 4 words: one 16-byte load on the
// vector path (every chunk whole and aligned), else element by element with zeros past k.
template <bool VECTOR>
__device__ __forceinline__ uint4 gemv_chunk(const bf16* row, u32 p, u32 k) {
    if (VECTOR) return __ldg(reinterpret_cast<const uint4*>(row + p));
    return load_chunk_scalar(row, true, p, k);
}

// acc ← fma(x[e], w[e], acc) for the 8 elements of a chunk, in element order.
__device__ __forceinline__ float gemv_fma8(float acc, uint4 xv, uint4 wv) {
    acc = __fmaf_rn(bf16_lo(xv.x), bf16_lo(wv.x), acc);
    acc = __fmaf_rn(bf16_hi(xv.x), bf16_hi(wv.x), acc);
    acc = __fmaf_rn(bf16_lo(xv.y), bf16_lo(wv.y), acc);
    acc = __fmaf_rn(bf16_hi(xv.y), bf16_hi(wv.y), acc);
    acc = __fmaf_rn(bf16_lo(xv.z), bf16_lo(wv.z), acc);
    acc = __fmaf_rn(bf16_hi(xv.z), bf16_hi(wv.z), acc);
    acc = __fmaf_rn(bf16_lo(xv.w), bf16_lo(wv.w), acc);
    acc = __fmaf_rn(bf16_hi(xv.w), bf16_hi(wv.w), acc);
    return acc;
}

// The totals over the warp of four per-lane partials v[0..4): lane l returns the total of column
// (l >> 3) & 3. Steps 16 and 8 apart halve the columns a lane carries (it keeps the half its lane
// bit selects, adding the partner's partial of the same column); steps 4, 2 and 1 apart are a plain
// butterfly. For every column the additions pair the same lanes in the same order.
__device__ __forceinline__ float gemv_reduce4(const float (&v)[GEMV_COLUMNS_PER_PASS], u32 lane) {
    const bool upper16 = lane & 16;
    // Step 16: keep columns {2, 3} (upper) or {0, 1} (lower); send the other two.
    const float keep0 = upper16 ? v[2] : v[0], keep1 = upper16 ? v[3] : v[1];
    const float send0 = upper16 ? v[0] : v[2], send1 = upper16 ? v[1] : v[3];
    const float a0 = keep0 + __shfl_xor_sync(0xffffffffu, send0, 16);
    const float a1 = keep1 + __shfl_xor_sync(0xffffffffu, send1, 16);
    // Step 8: keep the odd (upper) or even column of the two.
    const bool upper8 = lane & 8;
    const float keep = upper8 ? a1 : a0, send = upper8 ? a0 : a1;
    float total = keep + __shfl_xor_sync(0xffffffffu, send, 8);
#pragma unroll
    for (u32 offset = 4; offset > 0; offset >>= 1) total = total + __shfl_xor_sync(0xffffffffu, total, offset);
    return total;
}

// A unit's lane sums: acc[i][c] = the lane's chunks q0, q0 + 32, … < end of x row i against
// weight row c, ascending, each chunk by gemv_fma8; rows i ≥ m sum zeros and are never read. The
// loop has no branch on the data (the row count is MAXM, the loads of rows past m are predicated
// off, the vector path is chosen once outside). The single-row GEMV unrolls it, which puts the
// weight loads of 4 chunks in flight; with more rows the registers the accumulators take leave no
// room for that, so the weight chunks of the next AHEAD steps are loaded into a ring explicitly,
// one step's worth per step: that is what keeps enough bytes in flight per warp.
template <u32 MAXM, bool VECTOR>
__device__ __forceinline__ void sum_chunks(float (&acc)[MAXM][GEMV_COLUMNS_PER_PASS], const bf16* __restrict__ x,
                                           u32 ldx, u32 m, const bf16* const (&rows)[GEMV_COLUMNS_PER_PASS], u32 q0,
                                           u32 end, u32 k) {
    constexpr u32 PASS = GEMV_COLUMNS_PER_PASS;
    constexpr u32 AHEAD = MAXM <= 4 ? 3 : MAXM <= 8 ? 2 : 1;
#pragma unroll
    for (u32 i = 0; i < MAXM; ++i)
#pragma unroll
        for (u32 c = 0; c < PASS; ++c) acc[i][c] = 0.0f;
    // The weight chunks of step q (zeros past end: a step that is never used).
    const auto load_step = [&](uint4 (&wv)[PASS], u32 q) {
#pragma unroll
        for (u32 c = 0; c < PASS; ++c) wv[c] = q < end ? gemv_chunk<VECTOR>(rows[c], q * 8, k) : uint4{};
    };
    const auto step = [&](const uint4 (&wv)[PASS], u32 q) {
#pragma unroll
        for (u32 i = 0; i < MAXM; ++i) {
            const uint4 xv = i < m ? gemv_chunk<VECTOR>(x + static_cast<size_t>(i) * ldx, q * 8, k) : uint4{};
#pragma unroll
            for (u32 c = 0; c < PASS; ++c) acc[i][c] = gemv_fma8(acc[i][c], xv, wv[c]);
        }
    };
    if (MAXM == 1) {
        // Unrolling leaves the order unchanged.
#pragma unroll 4
        for (u32 q = q0; q < end; q += 32) {
            uint4 wv[PASS];
            load_step(wv, q);
            step(wv, q);
        }
    } else {
        uint4 ring[AHEAD][PASS];  // ring[r]: the chunks of step q + 32·(r + 1)
        uint4 wv[PASS];
        load_step(wv, q0);
#pragma unroll
        for (u32 r = 0; r < AHEAD; ++r) load_step(ring[r], q0 + 32 * (r + 1));
        for (u32 q = q0; q < end; q += 32) {
            step(wv, q);
#pragma unroll
            for (u32 c = 0; c < PASS; ++c) wv[c] = ring[0][c];
#pragma unroll
            for (u32 r = 0; r + 1 < AHEAD; ++r)
#pragma unroll
                for (u32 c = 0; c < PASS; ++c) ring[r][c] = ring[r + 1][c];
            load_step(ring[AHEAD - 1], q + 32 * (AHEAD + 1));
        }
    }
}

// x [m, k] (rows ldx ≥ k elements apart), w [n, k], y [m, n], 1 ≤ m ≤ MAXM; blockDim must be
// (32, GROUPS).
template <u32 MAXM, u32 GROUPS>
__device__ __forceinline__ void dense_gemv_body(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                                bf16* __restrict__ y, u32 m, u32 n, u32 k, u32 ldx) {
    constexpr u32 COLS = GEMV_COLS_PER_BLOCK, PASS = GEMV_COLUMNS_PER_PASS, PARTS = GEMV_K_PARTS;
    constexpr u32 PASSES = COLS / PASS, UNITS = PASSES * PARTS;
    static_assert(COLS % PASS == 0 && UNITS % GROUPS == 0, "whole units per warp");
    // The part totals of the block's outputs: [row][part][column].
    __shared__ float part_totals[MAXM][PARTS][COLS];
    if (blockDim.x != COLS || blockDim.y != GROUPS || blockDim.z != 1) return;
    if (m == 0 || m > MAXM || ldx < k) return;
    const u32 lane = threadIdx.x, warp = threadIdx.y, tid = warp * COLS + lane;
    // Uniform: vector loads need every row start 16-byte aligned.
    const bool vector_ok = k % 8 == 0 && ldx % 8 == 0 && aligned16(x) && aligned16(w);
    const u32 chunks = (k + 7) / 8;
    // Chunks per part: whole groups of 32, one chunk a lane.
    const u32 span = ((chunks + 31) / 32 + PARTS - 1) / PARTS * 32;

    for (u32 j0 = blockIdx.x * COLS; j0 < n; j0 += gridDim.x * COLS) {
        for (u32 unit = warp; unit < UNITS; unit += GROUPS) {
            const u32 pass = unit % PASSES, part = unit / PASSES;
            const u32 first = j0 + pass * PASS;
            if (first >= n) continue;  // uniform over the warp; every warp still meets the barrier
            const bf16* rows[PASS];
#pragma unroll
            for (u32 c = 0; c < PASS; ++c) rows[c] = w + static_cast<size_t>(min(first + c, n - 1)) * k;
            float acc[MAXM][PASS];
            const u32 end = min(chunks, (part + 1) * span);
            if (vector_ok)
                sum_chunks<MAXM, true>(acc, x, ldx, m, rows, part * span + lane, end, k);
            else
                sum_chunks<MAXM, false>(acc, x, ldx, m, rows, part * span + lane, end, k);
#pragma unroll
            for (u32 i = 0; i < MAXM; ++i) {
                if (i >= m) break;
                const float total = gemv_reduce4(acc[i], lane);
                if ((lane & 7) == 0) part_totals[i][part][pass * PASS + ((lane >> 3) & 3)] = total;
            }
        }
        __syncthreads();
        for (u32 e = tid; e < m * COLS; e += COLS * GROUPS) {
            const u32 i = e / COLS, column = e % COLS, j = j0 + column;
            if (j >= n) continue;
            float sum = part_totals[i][0][column];
#pragma unroll
            for (u32 p = 1; p < PARTS; ++p) sum = sum + part_totals[i][p][column];
            y[static_cast<size_t>(i) * n + j] = narrow(sum);
        }
        __syncthreads();  // the totals are rewritten by the next column block
    }
}
