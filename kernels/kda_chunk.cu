// kda_chunk: the chunked (WY) form of the gated delta rule for prefill (docs/kernels.md).
// `kda_chunk_prepare` computes everything independent of the carried state, per (chunk, head),
// all chunks at once: the WY factors, the in-chunk attention `aqk` (whose exponentials are those
// of the WY matrix) and the decayed q and k the scan multiplies with the state. `kda_chunk_scan`
// walks each head's chunks in order through the state and does only the products with it (plus
// the attention's product with the new values): the sequential part takes no exponential.
//
// Layout: k, v, q, u, w, qdec, kdec, out are [t_pad, h, d] f32 (position-major), g_raw [t, h, d]
// bf16 and b_raw [t, ldb] bf16 (the gate's raw projections, kda_gate.cuh), aqk [t_pad / c, h, c, c],
// sdec [t_pad / c, h, d], state [h, d, d] (K-major), t_pad = ⌈t/c⌉·c. Positions ≥ t are read as
// zero whatever the buffers hold (g_raw and b_raw have none). c ∈ {32, 64}; d a multiple of 32, at
// most KDA_MAX_HEAD_DIM. Other launches write nothing.
//
// Every decay is a difference exp(gc_i − gc_j), j ≤ i (an exponent ≤ 0), with the accurate expf,
// or in prepare's attention phase, between sub-blocks, the product of two such differences at a
// sub-block boundary (below); never exp(gc_i)·exp(−gc_j), which overflows over a chunk.
//
// Order: the sums on the CUDA cores are one f32 accumulator, started at +0, over their index in
// ascending order, as in the Rust reference (src/reference/kda_chunk.rs); nvcc may fuse a product
// into the sum it feeds, and the factored decays round once more. Prepare's pairs across
// sub-blocks, its substitution's blocks below the diagonal, its u and w, and every product of the
// scan run on tf32 tensor cores, three tf32 products to an f32 one (mma_f32.cuh), in the
// hardware's order. All of it stays within the ABI's relative-RMS bound.
//
// Geometry (src/launch.rs):
//   prepare: `launch::chunk_prepare(t_pad / c, h)`: blockDim.x == CHUNK_THREADS (4 warps), grid
//            (chunks, h), one block per (chunk, head).
//   scan:    `launch::chunk_scan(h, d)`: blockDim.x == CHUNK_SCAN_THREADS (8 warps), grid
//            (h, d / CHUNK_SCAN_VT), one block per (head, tile of CHUNK_SCAN_VT state columns v).
//            Columns of the state are independent (every coupling runs along k), so the V split
//            is exact; the blocks of a head share `aqk`.
// Both grid-stride over their items. Shared memory is static and below 48 KiB at c = 64,
// d = 128 (prepare 48,896 B, scan 45,056 B): no dynamic bytes, no opt-in attribute.
#include "kda_common.cuh"
#include "kda_gate.cuh"
#include "mma_f32.cuh"

#ifndef KDA_MAX_HEAD_DIM
#error "KDA_MAX_HEAD_DIM must be defined by the build (kernels.toml [defines])"
#endif
#ifndef KDA_MAX_CHUNK
#error "KDA_MAX_CHUNK must be defined by the build (kernels.toml [defines])"
#endif
#ifndef CHUNK_THREADS
#error "CHUNK_THREADS must be defined by the build (kernels.toml [defines])"
#endif
#ifndef CHUNK_SCAN_THREADS
#error "CHUNK_SCAN_THREADS must be defined by the build (kernels.toml [defines])"
#endif
#ifndef CHUNK_SCAN_VT
#error "CHUNK_SCAN_VT must be defined by the build (kernels.toml [defines])"
#endif

namespace {
constexpr u32 NT = CHUNK_THREADS;
constexpr u32 NW = NT / 32;
constexpr u32 CMAX = KDA_MAX_CHUNK;
constexpr u32 DMAX = KDA_MAX_HEAD_DIM;
constexpr u32 VT = CHUNK_SCAN_VT;   // state columns per scan block: one per lane
constexpr u32 PREP_TD = 32;         // d tile of prepare's u and w
constexpr u32 PREP_STR = PREP_TD + 8;  // a staged row's floats there: no bank conflicts in B fragments
constexpr u32 ASTR = CMAX + 4;      // a row of A's floats: no bank conflicts in A fragments
constexpr u32 SCAN_TK = 16;         // k tile of the scan's products with the state
constexpr u32 MMA_M = 16, MMA_N = 8, MMA_K = 8;  // the tensor-core tile (mma_tf32_1688)
static_assert(NT % 32 == 0, "CHUNK_THREADS: whole warps");
static_assert(VT == 32, "the scan's warps share out a chunk's rows and VT / 8 = 4 column tiles");
constexpr u32 SNT = CHUNK_SCAN_THREADS;
constexpr u32 SNW = SNT / 32;
constexpr u32 STAGE_STRIDE = SCAN_TK + 4;          // a staged row's floats: 16-byte aligned, no conflicts
static_assert(SNW * MMA_M == DMAX, "the scan gives each warp 16 rows of the state");
static_assert(SCAN_TK % MMA_K == 0 && VT % MMA_N == 0, "whole tensor-core tiles");

constexpr u32 SUB = 16;             // rows of a sub-block of prepare's attention phase
constexpr u32 ATT_TD = 16;          // d tile of prepare's attention phase
constexpr u32 ATT_STR = ATT_TD + 4; // its rows' stride in shared memory: no conflicts in fragments
constexpr u32 TRI = SUB * (SUB + 1) / 2;       // pairs j ≤ i within a sub-block
constexpr u32 DIAG_SLOTS = (TRI + 31) / 32;    // of them per lane
static_assert(CMAX % SUB == 0 && CMAX / SUB <= NW, "one warp per diagonal sub-block");
static_assert(SUB == MMA_M && ATT_TD % MMA_K == 0 && PREP_TD % ATT_TD == 0, "whole tensor-core tiles");

constexpr u32 cmax(u32 a, u32 b) { return a > b ? a : b; }
constexpr u32 SCAN_TILE = 2 * CMAX * STAGE_STRIDE;  // one staged k tile: w rows, then qdec rows
constexpr u32 SCAN_STAGE = 2 * SCAN_TILE;             // two: the tile in use and the next one landing

// Row (position i of the chunk starting at `first`, head) of a [t_pad, h, d] tensor.
struct Rows {
    u32 first, h, head, d;
    __device__ __forceinline__ size_t operator()(u32 i) const {
        return (static_cast<size_t>(first + i) * h + head) * d;
    }
};

// Prepare's attention phase splits a chunk into sub-blocks of SUB rows. A pair (i, j), j ≤ i, in
// one sub-block takes its decay exactly, exp(gc_i − gc_j). A pair across sub-blocks factors it at
// the first row r of i's sub-block I: exp(gc_i − gc_r)·exp(gc_r − gc_j), j < r ≤ i, both
// exponents ≤ 0 (gates are log-decays), so neither factor overflows, and each is taken once per
// row and shared by every pair of that row: about a third of the exponentials of taking every
// pair exactly. What is left of those pairs is a product of the factors over x, which runs on the
// tensor cores in 16 × 8 tiles.

// The in-sub-block pairs: warp w takes sub-block w, lane l its pairs l, l + 32, … of the lower
// triangle in row order; a slot past the triangle (or a warp past the sub-blocks) holds i = C.
template <u32 C>
struct DiagonalSlots {
    u32 i[DIAG_SLOTS], j[DIAG_SLOTS];
    __device__ __forceinline__ DiagonalSlots(u32 lane, u32 warp) {
#pragma unroll
        for (u32 m = 0; m < DIAG_SLOTS; ++m) {
            const u32 s = lane + 32 * m;
            u32 a = 0;
            while ((a + 1) * (a + 2) / 2 <= s) ++a;
            const bool ok = warp < C / SUB && s < TRI;
            i[m] = ok ? warp * SUB + a : C;
            j[m] = ok ? warp * SUB + (s - a * (a + 1) / 2) : C;
        }
    }
    __device__ __forceinline__ bool valid(u32 m) const { return i[m] < C; }
};

// The columns of the pairs across sub-blocks: for each sub-block I ≥ 1 (boundary r = SUB·I), its
// columns j < r, numbered in order of I then j.
struct OffDiagonalColumn {
    u32 j, boundary;
};
__device__ __forceinline__ OffDiagonalColumn off_diagonal_column(u32 column) {
    u32 block = 1;
    while (SUB * (block + 1) * block / 2 <= column) ++block;
    return {column - SUB * block * (block - 1) / 2, SUB * block};
}

// The pairs across sub-blocks as tensor-core tiles of 16 rows (one sub-block I ≥ 1) by 8 columns
// j < SUB·I: sub-block I has 2I of them, tiles I(I − 1) .. I(I + 1) in order of I. Warp w takes
// tiles w, w + NW, …; a tile past the last has block 0.
template <u32 C>
struct OffDiagonalTiles {
    static constexpr u32 BLOCKS = C / SUB;
    static constexpr u32 COLUMNS = SUB * BLOCKS * (BLOCKS - 1) / 2;  // (I, j) pairs: right factors
    static constexpr u32 TILES = BLOCKS * (BLOCKS - 1);
    static constexpr u32 PER_WARP = (TILES + NW - 1) / NW;
    u32 block[PER_WARP], column0[PER_WARP];  // sub-block I, first column j of the tile
    __device__ __forceinline__ explicit OffDiagonalTiles(u32 warp) {
#pragma unroll
        for (u32 n = 0; n < PER_WARP; ++n) {
            const u32 tile = warp + NW * n;
            u32 I = 1;
            while (I * (I + 1) <= tile) ++I;
            const bool ok = tile < TILES;
            block[n] = ok ? I : 0;
            column0[n] = ok ? MMA_N * (tile - I * (I - 1)) : 0;
        }
    }
    __device__ __forceinline__ bool valid(u32 n) const { return block[n] != 0; }
    // The right-factor column of (sub-block I, j).
    __device__ __forceinline__ static u32 right_column(u32 I, u32 j) { return SUB * I * (I - 1) / 2 + j; }
};

// Prepare's attention stage, one d tile of ATT_TD: the raw rows k, q·scale and gc of the chunk,
// the left factors k_i·e^{gc_i − gc_r} and q_i·e^{gc_i − gc_r} of the rows past the first
// sub-block, and the right factor k_j·e^{gc_r − gc_j} of each off-diagonal column.
template <u32 C>
struct AttentionStage {
    float* base;
    __device__ __forceinline__ float& k(u32 i, u32 x) const { return base[i * ATT_STR + x]; }
    __device__ __forceinline__ float& q(u32 i, u32 x) const { return base[(C + i) * ATT_STR + x]; }
    __device__ __forceinline__ float& g(u32 i, u32 x) const { return base[(2 * C + i) * ATT_STR + x]; }
    __device__ __forceinline__ float& left_k(u32 i, u32 x) const { return base[(3 * C - SUB + i) * ATT_STR + x]; }
    __device__ __forceinline__ float& left_q(u32 i, u32 x) const { return base[(4 * C - 2 * SUB + i) * ATT_STR + x]; }
    __device__ __forceinline__ float& right(u32 column, u32 x) const {
        return base[(5 * C - 2 * SUB + column) * ATT_STR + x];
    }
};
// Prepare's stage: the attention phase's rows (AttentionStage: 3·C raw, 2·(C − SUB) left factors,
// COLUMNS right factors) or the u/w phase's two C × PREP_TD tiles (rows PREP_STR apart).
constexpr u32 PREP_STAGE = cmax((5 * CMAX - 2 * SUB + OffDiagonalTiles<CMAX>::COLUMNS) * ATT_STR, 2 * CMAX * PREP_STR);

// The forward substitution of prepare, by blocks of SUB rows. With N the strictly lower A it
// finds, it leaves X = (I − N)⁻¹ − I in A's strictly lower triangle (the diagonal stays 0), which
// the row-by-row form computes as X[i][j] = N[i][j] + Σ_{j<m<i} N[i][m]·X[m][j]. In blocks (I, J)
// of SUB × SUB, with T = I + X:
//   the diagonal blocks, each by that row-by-row form within the block: one warp each, a lane per
//   column, __syncwarp between rows; then for row blocks I = 1, 2, … in order,
//   P_IJ = N_IJ + Σ_{J≤K<I} N_IK·X'_KJ   (X'_JJ = X_JJ, X'_KJ = T_KJ below the diagonal blocks),
//   T_IJ = P_IJ + X_II·P_IJ             for every J < I, one warp each,
// every product on the tensor cores (mma_f32.cuh). This is the same T = (I − N)⁻¹ with 2 barriers a
// row block where the row-by-row form waits at 2 a row, and chains of SUB − 1 multiply-adds where
// it had chains of up to C − 1. Rows past t are zero in N and stay zero. Entries of the diagonal
// blocks on or above their diagonal are read as zero.
template <u32 C>
__device__ __forceinline__ void substitute_blocks(float* A, u32 lane, u32 warp) {
    constexpr u32 BLOCKS = C / SUB;
    const u32 g = lane / 4, tg = lane % 4;
    const TileLane tl(lane);
    const auto at = [&](u32 i, u32 j) -> float& { return A[i * ASTR + j]; };
    // Lower part of a diagonal block: entries (i, j) with j < i.
    const auto lower = [&](u32 i, u32 j) { return j < i ? at(i, j) : 0.0f; };

    if (warp < BLOCKS) {
        const u32 r0 = SUB * warp, j = lane;
        for (u32 i = 1; i < SUB; ++i) {
            float sum = 0.0f;
            if (j < i)
                for (u32 m = j + 1; m < i; ++m) sum = sum + at(r0 + i, r0 + m) * at(r0 + m, r0 + j);
            __syncwarp();
            if (j < i) at(r0 + i, r0 + j) = at(r0 + i, r0 + j) + sum;
            __syncwarp();
        }
    }
    // d += a_block(16 rows from i0, 8 columns from k0)·b_block(8 rows from k0', 16 columns from
    // j0) for both 8-column halves of the result; `a` and `b` read an entry of A's layout.
    const auto product = [&](float (&d)[2][4], u32 i0, u32 ka, u32 kb, u32 j0, auto a, auto b) {
        float af[4];
#pragma unroll
        for (u32 e = 0; e < 4; ++e) af[e] = a(i0 + tl.a_row(e), ka + tl.a_col(e));
        const SplitA split(af);
#pragma unroll
        for (u32 half = 0; half < 2; ++half) {
            const u32 column = j0 + MMA_N * half + g;
            mma_f32_1688(d[half], split, SplitB(b(kb + tg, column), b(kb + tg + 4, column)));
        }
    };
    const auto plain = [&](u32 i, u32 j) { return at(i, j); };
    for (u32 I = 1; I < BLOCKS; ++I) {
        __syncthreads();  // the diagonal blocks and the row blocks above I are final
        const u32 J = warp;
        // This lane's entries of block (I, J) in accumulator layout, both 8-column halves.
        const auto entry = [&](u32 half, u32 e) -> float& {
            return at(SUB * I + tl.d_row(e), SUB * J + MMA_N * half + tl.d_col(e));
        };
        float acc[2][4];
        if (J < I) {
            // P_IJ, from N_IJ and row block I's original N_IK.
#pragma unroll
            for (u32 half = 0; half < 2; ++half)
#pragma unroll
                for (u32 e = 0; e < 4; ++e) acc[half][e] = entry(half, e);
            for (u32 K = J; K < I; ++K)
                for (u32 k0 = 0; k0 < SUB; k0 += MMA_K) {
                    if (K == J)
                        product(acc, SUB * I, SUB * K + k0, SUB * K + k0, SUB * J, plain, lower);
                    else
                        product(acc, SUB * I, SUB * K + k0, SUB * K + k0, SUB * J, plain, plain);
                }
        }
        __syncthreads();  // every read of row block I's N is done
        if (J < I) {
#pragma unroll
            for (u32 half = 0; half < 2; ++half)
#pragma unroll
                for (u32 e = 0; e < 4; ++e) entry(half, e) = acc[half][e];
            __syncwarp();
            // T_IJ = P_IJ + X_II·P_IJ: P_IJ is this warp's own block, read whole before the mmas
            // and written after them.
            for (u32 k0 = 0; k0 < SUB; k0 += MMA_K)
                product(acc, SUB * I, SUB * I + k0, SUB * I + k0, SUB * J, lower, plain);
            __syncwarp();
#pragma unroll
            for (u32 half = 0; half < 2; ++half)
#pragma unroll
                for (u32 e = 0; e < 4; ++e) entry(half, e) = acc[half][e];
        }
    }
}

// ---------------------------------------------------------------------------------------------
// prepare, one (chunk, head):
//   gate[p] = the forget gate's log-decay of g_raw[p], β_p of b_raw[p]   (kda_gate.cuh)
//   gc[i]   = Σ_{p≤i} gate[p]                                  (ascending p, per channel)
//   A[i][j] = −β_i Σ_x k[i,x]·k[j,x]·exp(gc[i,x] − gc[j,x])   j < i
//   aqk[i][j] = Σ_x (q[i,x]·scale)·k[j,x]·exp(gc[i,x] − gc[j,x])   j ≤ i < real (0 elsewhere),
//               over the same exponentials as A, factored between sub-blocks
//   for i in 1..c: A[i][j] += Σ_{j<m<i} A[i][m]·A[m][j]        (rows < i final; row i from its
//                                                              original values, as in place)
//   A[i][i] = 1;  u[i] = Σ_{j≤i} (A[i][j]·β_j)·v[j];  w[i] = Σ_{j≤i} (A[i][j]·β_j)·(k[j]·e^{gc[j]})
//   qdec[i] = (q[i]·scale)·e^{gc[i]},  kdec[i] = k[i]·e^{gc[l] − gc[i]},  sdec = e^{gc[l]}
// with l the chunk's last real position. Pad rows (≥ t) hold gc at the last real value and get
// u = w = qdec = kdec = 0, exactly what the reference's zero-read arithmetic yields (its pad
// entries of A end as +0 after the substitution).
//
// gc is nobody's output: it lives in qdec's rows of the chunk until the pass that writes qdec
// over it, each element read by the thread that then overwrites it, and its last real row
// (`closing`, which every row's kdec and sdec need) in shared memory.
template <u32 C>
__device__ __forceinline__ void prepare_chunk(const float* __restrict__ q, const float* __restrict__ k,
                                              const float* __restrict__ v, const ForgetGate& forget,
                                              float* __restrict__ u,
                                              float* __restrict__ w, float* __restrict__ aqk,
                                              float* __restrict__ qdec, float* __restrict__ kdec,
                                              float* __restrict__ sdec, u32 t, u32 h, u32 d, u32 chunk, u32 head,
                                              float scale, float* A, float* beta_s, float* closing, float* stage) {
    const u32 tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const u32 first = chunk * C;
    const u32 real = min(C, t - first);
    const Rows at{first, h, head, d};

    // gc (into qdec's rows, see above), its closing row, and β (zero past t), each gate taken
    // from its raw projection as it is summed. gc is re-read below by other threads: plain loads
    // after a barrier.
    float* const gc = qdec;
    for (u32 i = tid; i < C; i += NT) beta_s[i] = i < real ? forget.beta(first + i, head) : 0.0f;
    const float rate = forget.head_rate(head);
    for (u32 x = tid; x < d; x += NT) {
        const u32 channel = head * d + x;
        float acc = 0.0f;
        for (u32 i = 0; i < C; ++i) {
            const float g = i < real ? forget.log_decay(at(i) + x, channel, rate) : 0.0f;
            acc = acc + g;
            gc[at(i) + x] = acc;
        }
        closing[x] = acc;  // held from the last real row on
    }

    // A (strictly lower) and aqk (lower with the diagonal), accumulated over d tiles of ATT_TD.
    const DiagonalSlots<C> diagonal(lane, warp);
    const u32 g = lane / 4, tg = lane % 4;
    const TileLane tl(lane);
    const OffDiagonalTiles<C> tiles(warp);
    float dacc[DIAG_SLOTS], datt[DIAG_SLOTS], oacc[OffDiagonalTiles<C>::PER_WARP][4],
        oatt[OffDiagonalTiles<C>::PER_WARP][4];
#pragma unroll
    for (u32 m = 0; m < DIAG_SLOTS; ++m) dacc[m] = datt[m] = 0.0f;
#pragma unroll
    for (u32 n = 0; n < OffDiagonalTiles<C>::PER_WARP; ++n)
#pragma unroll
        for (u32 e = 0; e < 4; ++e) oacc[n][e] = oatt[n][e] = 0.0f;
    const AttentionStage<C> st{stage};
    for (u32 x0 = 0; x0 < d; x0 += ATT_TD) {
        __syncthreads();
        // Raw rows: k and q·scale zero past t; gc as written above (held past t, so every
        // exponent below stays ≤ 0).
        for (u32 e = tid; e < C * ATT_TD; e += NT) {
            const u32 i = e / ATT_TD, xx = e % ATT_TD;
            const bool ok = i < real;
            st.k(i, xx) = ok ? k[at(i) + x0 + xx] : 0.0f;
            st.q(i, xx) = ok ? q[at(i) + x0 + xx] * scale : 0.0f;
            st.g(i, xx) = gc[at(i) + x0 + xx];
        }
        __syncthreads();
        // Factors at the boundary r = SUB·I of row i's sub-block I ≥ 1: e^{gc_i − gc_r} times k_i
        // and q_i, and for each I the columns j < r: k_j·e^{gc_r − gc_j}.
        for (u32 e = tid; e < (C - SUB) * ATT_TD; e += NT) {
            const u32 i = SUB + e / ATT_TD, xx = e % ATT_TD;
            const float decay = expf(st.g(i, xx) - st.g(i / SUB * SUB, xx));
            st.left_k(i, xx) = st.k(i, xx) * decay;
            st.left_q(i, xx) = st.q(i, xx) * decay;
        }
        for (u32 e = tid; e < OffDiagonalTiles<C>::COLUMNS * ATT_TD; e += NT) {
            const u32 column = e / ATT_TD, xx = e % ATT_TD;
            const OffDiagonalColumn at_c = off_diagonal_column(column);
            st.right(column, xx) = st.k(at_c.j, xx) * expf(st.g(at_c.boundary, xx) - st.g(at_c.j, xx));
        }
        __syncthreads();
        for (u32 xx = 0; xx < ATT_TD; ++xx) {
            // In-sub-block pairs j ≤ i: the exact difference.
#pragma unroll
            for (u32 m = 0; m < DIAG_SLOTS; ++m) {
                if (!diagonal.valid(m)) continue;
                const u32 i = diagonal.i[m], j = diagonal.j[m];
                const float kj = st.k(j, xx) * expf(st.g(i, xx) - st.g(j, xx));
                dacc[m] = dacc[m] + st.k(i, xx) * kj;
                datt[m] = datt[m] + st.q(i, xx) * kj;
            }
        }
        // Pairs across sub-blocks: products of the factors, on the tensor cores (mma_f32.cuh):
        // A = the left factors of sub-block I's rows, B[x][j] = the right factors of its columns.
#pragma unroll
        for (u32 n = 0; n < OffDiagonalTiles<C>::PER_WARP; ++n) {
            if (!tiles.valid(n)) continue;
            const u32 I = tiles.block[n], right = OffDiagonalTiles<C>::right_column(I, tiles.column0[n] + g);
#pragma unroll
            for (u32 kk = 0; kk < ATT_TD; kk += MMA_K) {
                float ak[4], aq[4];
#pragma unroll
                for (u32 e = 0; e < 4; ++e) {
                    const u32 i = SUB * I + tl.a_row(e), x = kk + tl.a_col(e);
                    ak[e] = st.left_k(i, x);
                    aq[e] = st.left_q(i, x);
                }
                const SplitB b(st.right(right, kk + tg), st.right(right, kk + tg + 4));
                mma_f32_1688(oacc[n], SplitA(ak), b);
                mma_f32_1688(oatt[n], SplitA(aq), b);
            }
        }
    }
    float* aqk_block = aqk + (static_cast<size_t>(chunk) * h + head) * C * C;
    // Every entry j ≤ i is written by exactly one slot or tile element; aqk is zero above the
    // diagonal (A's upper triangle is never read).
    const auto put = [&](u32 i, u32 j, float a_sum, float att_sum) {
        A[i * ASTR + j] = (i < real && j < i) ? -beta_s[i] * a_sum : 0.0f;
        aqk_block[i * C + j] = i < real ? att_sum : 0.0f;
    };
#pragma unroll
    for (u32 m = 0; m < DIAG_SLOTS; ++m)
        if (diagonal.valid(m)) put(diagonal.i[m], diagonal.j[m], dacc[m], datt[m]);
#pragma unroll
    for (u32 n = 0; n < OffDiagonalTiles<C>::PER_WARP; ++n) {
        if (!tiles.valid(n)) continue;
#pragma unroll
        for (u32 e = 0; e < 4; ++e)
            put(SUB * tiles.block[n] + tl.d_row(e), tiles.column0[n] + tl.d_col(e), oacc[n][e], oatt[n][e]);
    }
    for (u32 e = tid; e < C * C; e += NT)
        if (e % C > e / C) aqk_block[e] = 0.0f;
    __syncthreads();

    substitute_blocks<C>(A, lane, warp);
    __syncthreads();

    // Unit diagonal, then β_j folded into the coefficients: A[i][j] ← A[i][j]·β_j, j ≤ i.
    for (u32 e = tid; e < C * C; e += NT) {
        const u32 i = e / C, j = e % C;
        if (j <= i) A[i * ASTR + j] = (i == j ? 1.0f : A[i * ASTR + j]) * beta_s[j];
    }

    // u = A·v and w = A·(k·e^{gc}) on the tensor cores (mma_f32.cuh), d tiles of PREP_TD: warp w
    // takes the 16 rows 16·(w / WPM) .. of the chunk and NPW of the tile's PREP_TD/8 column tiles,
    // both products (each A fragment serves both), over the columns j up to its diagonal tile; A's
    // entries above the diagonal are read as zero. v and k·e^{gc} are staged zero past t.
    constexpr u32 NPW = C / MMA_M;              // column tiles per warp
    constexpr u32 WPM = PREP_TD / MMA_N / NPW;  // warps per 16 rows
    static_assert(WPM * (C / MMA_M) == NW, "the chunk's tiles must share out evenly over the warps");
    const u32 row0 = MMA_M * (warp / WPM), tile0 = (warp % WPM) * NPW;
    // The same pass writes what the scan needs of the gates, qdec and kdec (sdec below), so that
    // its sequential walk takes no exponential: e^{gc} serves both w's operand and qdec. Each
    // thread reads gc at the elements it then writes qdec to; the closing row is in `closing`.
    float* vs = stage;
    float* ke = stage + C * PREP_STR;
    for (u32 x0 = 0; x0 < d; x0 += PREP_TD) {
        __syncthreads();
        for (u32 e = tid; e < C * PREP_TD; e += NT) {
            const u32 i = e / PREP_TD, xx = e % PREP_TD;
            const size_t at_g = at(i) + x0 + xx;
            float v_i = 0.0f, k_decayed = 0.0f, q_decayed = 0.0f, k_closing = 0.0f;
            if (i < real) {
                const float k_i = k[at_g], from_start = expf(gc[at_g]);
                v_i = v[at_g];
                k_decayed = k_i * from_start;
                q_decayed = q[at_g] * scale * from_start;
                k_closing = k_i * expf(closing[x0 + xx] - gc[at_g]);
            }
            vs[i * PREP_STR + xx] = v_i;
            ke[i * PREP_STR + xx] = k_decayed;
            qdec[at_g] = q_decayed;
            kdec[at_g] = k_closing;
        }
        __syncthreads();
        float au[NPW][4], aw[NPW][4];
#pragma unroll
        for (u32 n = 0; n < NPW; ++n)
#pragma unroll
            for (u32 e = 0; e < 4; ++e) au[n][e] = aw[n][e] = 0.0f;
        for (u32 j0 = 0; j0 < row0 + MMA_M && j0 < real; j0 += MMA_K) {
            float a[4];
#pragma unroll
            for (u32 e = 0; e < 4; ++e) {
                const u32 i = row0 + tl.a_row(e), j = j0 + tl.a_col(e);
                a[e] = j <= i ? A[i * ASTR + j] : 0.0f;
            }
            const SplitA coef(a);
            // The B fragment of a staged tile: rows j0 .. j0 + 8, the lane's column.
            const auto staged = [&](const float* tile, u32 column) {
                return SplitB(tile[(j0 + tg) * PREP_STR + column], tile[(j0 + tg + 4) * PREP_STR + column]);
            };
#pragma unroll
            for (u32 n = 0; n < NPW; ++n) {
                const u32 column = MMA_N * (tile0 + n) + g;
                mma_f32_1688(au[n], coef, staged(vs, column));
                mma_f32_1688(aw[n], coef, staged(ke, column));
            }
        }
#pragma unroll
        for (u32 n = 0; n < NPW; ++n)
#pragma unroll
            for (u32 e = 0; e < 4; ++e) {
                const u32 i = row0 + tl.d_row(e);
                const size_t at_o = at(i) + x0 + MMA_N * (tile0 + n) + tl.d_col(e);
                u[at_o] = i < real ? au[n][e] : 0.0f;
                w[at_o] = i < real ? aw[n][e] : 0.0f;
            }
    }

    for (u32 x = tid; x < d; x += NT) sdec[(static_cast<size_t>(chunk) * h + head) * d + x] = expf(closing[x]);
}

// ---------------------------------------------------------------------------------------------
// scan, one head and the state columns v0 .. v0 + VT, all chunks in order. Per chunk (rows < t):
//   vnew[i,v]  = u[i,v] − Σ_k w[i,k]·S[k,v]
//   inter[i,v] = Σ_k qdec[i,k]·S[k,v]
//   out[i,v]   = inter[i,v] + Σ_{j≤i} aqk[i,j]·vnew[j,v]                   (state before the update)
//   S[k,v]     ← S[k,v]·sdec[k] + Σ_{i<real} kdec[i,k]·vnew[i,v]
// with qdec = (q·scale)·e^{gc}, kdec = k·e^{gc_l − gc} and sdec = e^{gc_l} from prepare, l the
// chunk's last real position.
//
// Every product runs on tf32 tensor cores in three parts (mma_f32.cuh), 16 × 8 × 8 tiles:
// - The state lives in registers as accumulators: warp w owns its rows k = 16w .. 16w + 16 (all VT
//   columns) and updates them with kdec's columns of those rows, read from global memory, and
//   the new values. After each update it copies them to S_s, where every warp reads them as the B
//   operand of the next chunk's products.
// - vnew, inter and out: warp w owns rows 16·(w / WPM) .. + 16 of the chunk and NPW of the VT/8
//   column tiles (both products, so each A fragment serves two mmas). w and qdec come in k tiles of
//   SCAN_TK columns staged into one of two buffers while the block computes on the other: at the
//   start of tile T all threads wait for T's copies and meet at a barrier, so the other buffer
//   (tile T − 1's) is free, and T + 1's copies go out before T's products. Only rows < t are
//   staged; the rows past them give accumulator rows that are never stored. aqk is read from
//   global memory, only its tiles at or left of the diagonal.
// - Nothing the walk reads depends on the state, so each chunk starts by asking L2 for the next
//   chunk's rows (prefetch_l2): the chunk's own loads then wait for L2, not HBM.
// S_s and vn_s hold a row of VT columns with groups of 8 columns XOR-swizzled by the row's low two
// bits (`swizzled`), so the B fragments' reads (4 rows × 8 columns a warp) hit 32 different banks;
// the staged rows are padded to STAGE_STRIDE, so the A fragments' reads (8 rows × 4 columns) do
// too.

// Shared-memory index of (row, column) of a row-major tile VT wide: column groups of 8 swizzled by
// the row's low two bits.
__device__ __forceinline__ u32 swizzled(u32 row, u32 column) { return row * VT + (column ^ ((row & 3) << 3)); }

// The staging of a [t_pad, h, d] tensor's rows 0..real, columns k0 .. k0 + SCAN_TK, into
// dst[i·STAGE_STRIDE + kk]: 16-byte cp.async copies where `async` (the tensor 16-byte aligned),
// plain copies otherwise. The caller commits the group and waits for it.
__device__ __forceinline__ void stage_tile(float* dst, const float* src, const Rows& at, u32 real, u32 k0,
                                           bool async) {
    constexpr u32 CHUNKS = SCAN_TK / 4;
    for (u32 e = threadIdx.x; e < real * CHUNKS; e += SNT) {
        const u32 i = e / CHUNKS, c = e % CHUNKS;
        const float* from = src + at(i) + k0 + 4 * c;
        float* to = dst + i * STAGE_STRIDE + 4 * c;
        if (async) {
            cp_async_16(to, from);
        } else {
#pragma unroll
            for (u32 x = 0; x < 4; ++x) to[x] = from[x];
        }
    }
}

// The B fragment of k rows k0 .. k0 + 8 and column tile `tile` of a swizzled VT-wide tile.
__device__ __forceinline__ SplitB b_fragment(const float* tile_s, u32 k0, u32 tile, u32 g, u32 t) {
    const u32 column = MMA_N * tile + g;
    return SplitB(tile_s[swizzled(k0 + t, column)], tile_s[swizzled(k0 + t + 4, column)]);
}

template <u32 C>
__device__ __forceinline__ void scan_columns(const float* __restrict__ qdec, const float* __restrict__ kdec,
                                             const float* __restrict__ sdec, const float* __restrict__ u,
                                             const float* __restrict__ w, const float* __restrict__ aqk,
                                             float* __restrict__ state, float* __restrict__ out, u32 t, u32 h,
                                             u32 d, u32 head, u32 v0, float* S_s, float* vn_s, float* stage) {
    constexpr u32 NPW = C / 32;       // column tiles of vnew, inter and out per warp
    constexpr u32 WPM = VT / MMA_N / NPW;  // warps per 16-row tile of the chunk
    constexpr u32 KSTEPS = C / MMA_K;      // k steps of the update (over the chunk's rows)
    constexpr u32 ATT_GROUP = 4;           // k steps of aqk's product loaded at once
    static_assert(WPM * (C / MMA_M) == SNW, "the chunk's tiles must share out evenly over the warps");
    const u32 tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane / 4, tg = lane % 4;
    const TileLane tl(lane);
    const bool async = aligned16(w) && aligned16(qdec);
    const u32 row0 = MMA_M * (warp / WPM), tile0 = (warp % WPM) * NPW;  // this warp's chunk rows, tiles
    const u32 k_own = MMA_M * warp;                                      // this warp's state rows
    const bool owns_state = k_own < d;

    // The state rows of this warp: S[k_own + g (+8)][v0 + 8·tile + 2tg (+1)], accumulator layout.
    float* S_g = state + static_cast<size_t>(head) * d * d + v0;
    float S[VT / MMA_N][4];
    const auto state_at = [&](u32 tile, u32 e) -> size_t {
        return static_cast<size_t>(k_own + tl.d_row(e)) * d + MMA_N * tile + tl.d_col(e);
    };
    const auto publish_state = [&] {
#pragma unroll
        for (u32 tile = 0; tile < VT / MMA_N; ++tile)
#pragma unroll
            for (u32 e = 0; e < 4; ++e)
                S_s[swizzled(k_own + tl.d_row(e), MMA_N * tile + tl.d_col(e))] = S[tile][e];
    };
    if (owns_state) {
#pragma unroll
        for (u32 tile = 0; tile < VT / MMA_N; ++tile)
#pragma unroll
            for (u32 e = 0; e < 4; ++e) S[tile][e] = S_g[state_at(tile, e)];
        publish_state();
    }

    // Tile T of the walk: chunk T / n, its k columns (T % n)·SCAN_TK .. of w and qdec.
    const u32 n = d / SCAN_TK, chunks = (t + C - 1) / C, tiles = chunks * n;
    const auto issue = [&](u32 tile) {
        const u32 first = tile / n * C, k0 = tile % n * SCAN_TK;
        const Rows at{first, h, head, d};
        float* buffer = stage + (tile & 1) * SCAN_TILE;
        stage_tile(buffer, w, at, min(C, t - first), k0, async);
        stage_tile(buffer + CMAX * STAGE_STRIDE, qdec, at, min(C, t - first), k0, async);
        cp_async_commit();
    };
    // Waits for tile T, frees the other buffer for T + 1 and sends T + 1's copies; T's buffer.
    const auto next = [&](u32 tile) -> const float* {
        cp_async_wait<0>();
        __syncthreads();
        if (tile + 1 < tiles) issue(tile + 1);
        return stage + (tile & 1) * SCAN_TILE;
    };
    if (tiles > 0) issue(0);
    // What chunk c's walk reads, asked of L2 a chunk ahead: none of it depends on the state, and
    // a chunk's own loads then wait for L2, not HBM. 128-byte lines; only rows < t.
    const auto prefetch_chunk = [&](u32 c) {
        const u32 first = c * C, rows = min(C, t - first), lines = d / 32;
        const Rows at{first, h, head, d};
        for (u32 e = tid; e < rows * lines; e += SNT) {
            const size_t line = at(e / lines) + 32 * (e % lines);
            prefetch_l2(w + line);
            prefetch_l2(qdec + line);
            prefetch_l2(kdec + line);
        }
        for (u32 i = tid; i < rows; i += SNT) prefetch_l2(u + at(i) + v0);
        const float* block = aqk + (static_cast<size_t>(c) * h + head) * C * C;
        for (u32 e = tid; e < C * C / 32; e += SNT) prefetch_l2(block + 32 * e);
    };
    if (chunks > 0) prefetch_chunk(0);

    for (u32 chunk = 0; chunk < chunks; ++chunk) {
        const u32 first = chunk * C;
        const u32 real = min(C, t - first);
        const Rows at{first, h, head, d};
        if (chunk + 1 < chunks) prefetch_chunk(chunk + 1);

        // The closing decay of this warp's state rows, fetched now for the update.
        float closing[2];
        const float* sdec_at = sdec + (static_cast<size_t>(chunk) * h + head) * d + k_own + g;
        closing[0] = owns_state ? sdec_at[0] : 0.0f;
        closing[1] = owns_state ? sdec_at[8] : 0.0f;

        // w·S and qdec·S over the staged k tiles.
        float wS[NPW][4], qS[NPW][4];
#pragma unroll
        for (u32 j = 0; j < NPW; ++j)
#pragma unroll
            for (u32 e = 0; e < 4; ++e) wS[j][e] = qS[j][e] = 0.0f;
        for (u32 tile = 0; tile < n; ++tile) {
            const float* ws = next(chunk * n + tile);
            const float* qs = ws + CMAX * STAGE_STRIDE;
#pragma unroll
            for (u32 kk = 0; kk < SCAN_TK; kk += MMA_K) {
                float aw[4], aq[4];
#pragma unroll
                for (u32 e = 0; e < 4; ++e) {
                    const u32 at_s = (row0 + tl.a_row(e)) * STAGE_STRIDE + kk + tl.a_col(e);
                    aw[e] = ws[at_s];
                    aq[e] = qs[at_s];
                }
                const SplitA a_w(aw), a_q(aq);
#pragma unroll
                for (u32 j = 0; j < NPW; ++j) {
                    const SplitB b = b_fragment(S_s, tile * SCAN_TK + kk, tile0 + j, g, tg);
                    mma_f32_1688(wS[j], a_w, b);
                    mma_f32_1688(qS[j], a_q, b);
                }
            }
        }

        // vnew = u − w·S on rows < real (zero past them), published for every warp.
#pragma unroll
        for (u32 j = 0; j < NPW; ++j)
#pragma unroll
            for (u32 e = 0; e < 4; ++e) {
                const u32 i = row0 + tl.d_row(e);
                const u32 v = MMA_N * (tile0 + j) + tl.d_col(e);
                vn_s[swizzled(i, v)] = i < real ? u[at(i) + v0 + v] - wS[j][e] : 0.0f;
            }
        __syncthreads();

        // out = inter + Σ_{j≤i} aqk[i,j]·vnew[j]: the k steps up to this warp's diagonal tile, the
        // entries j ≤ i < real only, their fragments loaded ATT_GROUP steps at a time before the
        // group's mmas (all of them at once would spill).
        const float* block = aqk + (static_cast<size_t>(chunk) * h + head) * C * C;
        for (u32 s0 = 0; MMA_K * s0 < row0 + MMA_M; s0 += ATT_GROUP) {
            float att[ATT_GROUP][4];
#pragma unroll
            for (u32 s = 0; s < ATT_GROUP; ++s)
#pragma unroll
                for (u32 e = 0; e < 4; ++e) {
                    const u32 i = row0 + tl.a_row(e), j = MMA_K * (s0 + s) + tl.a_col(e);
                    att[s][e] = i < real && j <= i ? block[i * C + j] : 0.0f;
                }
#pragma unroll
            for (u32 s = 0; s < ATT_GROUP; ++s) {
                if (MMA_K * (s0 + s) >= row0 + MMA_M) break;
                const SplitA a_att(att[s]);
#pragma unroll
                for (u32 j = 0; j < NPW; ++j)
                    mma_f32_1688(qS[j], a_att, b_fragment(vn_s, MMA_K * (s0 + s), tile0 + j, g, tg));
            }
        }
#pragma unroll
        for (u32 j = 0; j < NPW; ++j)
#pragma unroll
            for (u32 e = 0; e < 4; ++e) {
                const u32 i = row0 + tl.d_row(e);
                if (i < real) out[at(i) + v0 + MMA_N * (tile0 + j) + tl.d_col(e)] = qS[j][e];
            }

        // S ← S·sdec + kdec^T·vnew on this warp's state rows, then published for the next chunk:
        // every warp read S_s before the barrier that published vn_s, and the next chunk's first
        // tile's barrier orders the copy before any read of it.
        if (owns_state) {
#pragma unroll
            for (u32 tile = 0; tile < VT / MMA_N; ++tile)
#pragma unroll
                for (u32 e = 0; e < 4; ++e) S[tile][e] = S[tile][e] * closing[e >> 1];
            // kdec^T: A[m][i] = kdec[i][k_own + m], zero past the chunk's real rows; every step's
            // fragment loaded before the first mma, so the loads wait for memory once.
            float kd[KSTEPS][4];
#pragma unroll
            for (u32 s = 0; s < KSTEPS; ++s)
#pragma unroll
                for (u32 e = 0; e < 4; ++e) {
                    const u32 i = MMA_K * s + tl.a_col(e);
                    kd[s][e] = i < real ? kdec[at(i) + k_own + tl.a_row(e)] : 0.0f;
                }
#pragma unroll
            for (u32 s = 0; s < KSTEPS; ++s) {
                if (MMA_K * s >= real) break;
                const SplitA a_k(kd[s]);
#pragma unroll
                for (u32 tile = 0; tile < VT / MMA_N; ++tile)
                    mma_f32_1688(S[tile], a_k, b_fragment(vn_s, MMA_K * s, tile, g, tg));
            }
            publish_state();
        }
    }

    if (owns_state) {
#pragma unroll
        for (u32 tile = 0; tile < VT / MMA_N; ++tile)
#pragma unroll
            for (u32 e = 0; e < 4; ++e) S_g[state_at(tile, e)] = S[tile][e];
    }
}
}  // namespace

// q, k, v [t_pad, h, d]; g_raw [t, h, d], dt_bias [h·d], a_log [h], b_raw [t, ldb], law and
// lower_bound (the forget gate and beta, kda_gate.cuh) -> u, w, qdec, kdec [t_pad, h, d],
// aqk [t_pad / c, h, c, c], sdec [t_pad / c, h, d] (every position written).
// Three blocks per SM (159 registers a thread, no spill; at four it spills): prepare is latency-bound, and left to
// itself ptxas takes more registers than leave room for three.
extern "C" __global__ void __launch_bounds__(CHUNK_THREADS, 3)
    kda_chunk_prepare(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                      const bf16* __restrict__ g_raw, const float* __restrict__ dt_bias,
                      const float* __restrict__ a_log, const bf16* __restrict__ b_raw, float* __restrict__ u,
                      float* __restrict__ w, float* __restrict__ aqk, float* __restrict__ qdec,
                      float* __restrict__ kdec, float* __restrict__ sdec, u32 t, u32 h, u32 d, u32 c, u32 ldb,
                      u32 law, float scale, float lower_bound) {
    __shared__ float A[CMAX * ASTR];
    __shared__ float beta_s[CMAX];
    __shared__ float closing[DMAX];
    __shared__ float stage[PREP_STAGE];
    if (blockDim.x != NT || blockDim.y != 1 || blockDim.z != 1) return;
    if ((c != 32 && c != 64) || c > CMAX || d == 0 || d % PREP_TD != 0) return;
    const ForgetGate forget{g_raw, dt_bias, a_log, b_raw, ldb, law, lower_bound};
    if (!forget.valid(h)) return;
    const u32 chunks = (t + c - 1) / c;
    for (u32 chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
        for (u32 head = blockIdx.y; head < h; head += gridDim.y) {
            if (c == 32)
                prepare_chunk<32>(q, k, v, forget, u, w, aqk, qdec, kdec, sdec, t, h, d, chunk, head, scale, A,
                                  beta_s, closing, stage);
            else
                prepare_chunk<64>(q, k, v, forget, u, w, aqk, qdec, kdec, sdec, t, h, d, chunk, head, scale, A,
                                  beta_s, closing, stage);
            __syncthreads();
        }
    }
}

// qdec, kdec, u, w [t_pad, h, d], sdec [t_pad / c, h, d], aqk [t_pad / c, h, c, c],
// state [h, d, d] in/out -> out [t_pad, h, d] (rows < t written).
// Two blocks per SM: the grid is only (h, d / VT), 256 blocks at glm5-flash sizes, so every
// block an SM can hold at once counts; a walk is latency-bound, and 8 warps share out its rows.
extern "C" __global__ void __launch_bounds__(CHUNK_SCAN_THREADS, 2)
    kda_chunk_scan(const float* __restrict__ qdec, const float* __restrict__ kdec, const float* __restrict__ sdec,
                   const float* __restrict__ u, const float* __restrict__ w, const float* __restrict__ aqk,
                   float* __restrict__ state, float* __restrict__ out, u32 t, u32 h, u32 d, u32 c) {
    __shared__ float S_s[DMAX * VT];
    __shared__ float vn_s[CMAX * VT];
    __shared__ uint4 stage_words[SCAN_STAGE / 4];  // 16-byte aligned for cp.async
    float* const stage = reinterpret_cast<float*>(stage_words);
    if (blockDim.x != SNT || blockDim.y != 1 || blockDim.z != 1) return;
    if ((c != 32 && c != 64) || c > CMAX || d == 0 || d > DMAX) return;
    if (d % VT != 0 || d % SCAN_TK != 0) return;
    // One walk per (head, column tile); each chunk size has its own loop, so that the two
    // instantiations' registers are allocated apart.
    const auto walks = [&](auto walk) {
        for (u32 head = blockIdx.x; head < h; head += gridDim.x) {
            for (u32 v0 = blockIdx.y * VT; v0 < d; v0 += gridDim.y * VT) {
                walk(head, v0);
                __syncthreads();
            }
        }
    };
    if (c == 32)
        walks([&](u32 head, u32 v0) {
            scan_columns<32>(qdec, kdec, sdec, u, w, aqk, state, out, t, h, d, head, v0, S_s, vn_s, stage);
        });
    else
        walks([&](u32 head, u32 v0) {
            scan_columns<64>(qdec, kdec, sdec, u, w, aqk, state, out, t, h, d, head, v0, S_s, vn_s, stage);
        });
}
