// gemm: dense_gemm_bf16, c[i][j] = bf16(Σ_p f32(a[i][p])·f32(b[j][p])) with a [m, k] (rows lda
// elements apart: a column range of a wider matrix), b [n, k] (a Linear weight), c [m, n], no
// output stride (docs/kernels.md).
//
// The ABI leaves a GEMM's summation order free (its tolerance is the dense products' one), so the
// products run on tensor cores: bf16 inputs, f32 accumulation, `mma.sync.m16n8k16` (not wgmma:
// the emulator runs warp-level mma only). A block of GEMM_THREADS = 128 threads (4 warps, 2 along
// m by 2 along n) computes a GEMM_TILE_M × GEMM_TILE_N = 128 × 128 tile of c, each warp 64 × 64
// (4 × 8 mma tiles, 128 f32 accumulators a thread): per 16 of K a warp issues 8 `ldmatrix.x4` for
// 32 mma (64 × 32 warp tiles take 6 for 16, 32 × 32 ones 4 for 8), and a block loads 1/32 byte of
// operand per product where a 128 × 64 tile loads 3/64. On an H200 a throwaway harness timed this
// at 668 µs against 754 for 8 warps of 64 × 32 (4096 × 8192 × 4096), with a third fewer `ldmatrix`
// per mma. K tiles of BK = 32 are staged in shared memory GEMM_STAGES = 4 deep by `cp.async`, so
// the loads of the three tiles ahead overlap the products of this one.
//
// A product of at most 64 rows (a decode step's) runs on 64 × 128 tiles instead, each warp
// 32 × 64: a 128-row tile would stage 64 rows of zeros and spend half its mma on them, which at
// m = 64 makes the step's largest product bound by the tensor cores rather than by its weight's
// bytes. The grid is the same (one tile row either way).
//
// Shared memory is dynamic: (128 + 128) rows × 32 bf16 × 2 B = 16 KiB a stage, 64 KiB for four,
// three blocks an SM (192 KiB of the SM's 228). Three stages fit the 48 KiB a block has without
// opting in; the fourth is the one the H200 runs of 2026-12-04 left to try (docs/measurements.md).
// Rows are not padded: their 64 bytes are four 16-byte chunks,
// and chunk q of tile row r is stored at chunk q ^ ((r >> 1) & 3) of its row. Why that XOR: banks
// repeat every 128 bytes, i.e. every two rows, so the 16-byte bank group of (r, q) is
// 4·(r & 1) + (q ^ ((r >> 1) & 3)). Each 8 × 8 matrix of an `ldmatrix` is 8 consecutive rows
// r0..r0 + 7 (r0 % 8 == 0) at one logical chunk q; over them r & 1 takes both values and, for each,
// (r >> 1) & 3 takes all four, so the 8 row segments land in 8 distinct bank groups (unswizzled,
// rows r and r + 2 would collide: a 4-way conflict). The `cp.async` stores are conflict-free too:
// 8 consecutive threads write all 4 chunks of 2 adjacent rows, again 8 distinct groups. Since every
// fragment row is a multiple of 8 plus a lane offset, the XOR term is the lane's own (lane >> 1) & 3.
// Each thread stages 8 chunks a K tile (4 of a, 4 of b, 32 rows apart), all at the same swizzle.
// Tiles past m or n, and K chunks past k, are zero-filled in shared memory (zeros add nothing).
//
// Blocks walk the tiles in row order with one linear grid-stride index (nested m and n loops
// measured 10 % slower on an H200 at 4096 × 8192 × 4096, through ptxas's register allocation).
// Grouping tile rows for L2 reuse (8 or 16 rows a group) measured no faster there, so the plain
// order stays. Each output's sum runs over the K tiles in the same order whatever m is, so a row of
// c does not depend on the other rows. The split-K entry walks (tile, range of K) units the same
// way, split-major, each range whole K tiles, and writes f32 partial sums that
// `dense_gemm_splitk_reduce_bf16` adds in split order: deterministic, no atomics.
//
// The tensor-core path needs 16-byte rows (k and lda multiples of 8) and 16-byte aligned operands;
// any other launch takes the scalar path, the same tile as four 64 × 64 register-blocked
// sub-tiles of f32 products in ascending p (32 outputs a thread), which the emulated cases exercise
// with odd k, odd strides and offset views. Both paths write two outputs at a time where n is even
// and the output aligned to two of them (`Output`), else element by element.
//
// Geometry (src/launch.rs): `launch::gemm(m, n)`: blockDim = (GEMM_THREADS, 1, 1),
// grid (⌈n / GEMM_TILE_N⌉, ⌈m / GEMM_TILE_M⌉), a grid-stride loop over further tiles (any grid
// works), launch::GEMM_SHARED_BYTES of dynamic shared memory, which the two paths share; a launch
// with fewer writes nothing.
#include "kda_common.cuh"

#include <type_traits>

#ifndef GEMM_TILE_M
#error "GEMM_TILE_M must be defined by the build (kernels.toml [defines])"
#endif
#ifndef GEMM_TILE_N
#error "GEMM_TILE_N must be defined by the build (kernels.toml [defines])"
#endif
#ifndef GEMM_TILE_K
#error "GEMM_TILE_K must be defined by the build (kernels.toml [defines])"
#endif
#ifndef GEMM_THREADS
#error "GEMM_THREADS must be defined by the build (kernels.toml [defines])"
#endif
#ifndef GEMM_STAGES
#error "GEMM_STAGES must be defined by the build (kernels.toml [defines])"
#endif

static_assert(GEMM_TILE_M == 128 && GEMM_TILE_N == 128 && GEMM_TILE_K == 32 && GEMM_THREADS == 128,
              "dense_gemm_bf16 is written for 128 x 128 tiles of 128 threads (4 warps of 64 x 64), K by 32");

namespace {
constexpr u32 BM = GEMM_TILE_M, BN = GEMM_TILE_N, BK = GEMM_TILE_K;
constexpr u32 STAGES = GEMM_STAGES;
static_assert(STAGES >= 2, "a stage in use and at least one landing");
constexpr u32 CHUNKS = BK / 8;                       // 16-byte chunks per tile row: 4 (64 bytes)
constexpr u32 WARPS_M = 2, WARPS_N = 2;              // warp grid of a block
constexpr u32 WN = BN / WARPS_N, NT = WN / 8;        // columns a warp: 64, 8 mma tiles
constexpr u32 LOAD_ROWS = GEMM_THREADS / CHUNKS;     // rows between a thread's chunks: 32
static_assert(WARPS_M * WARPS_N * 32 == GEMM_THREADS, "a 2 x 2 grid of warps");
constexpr u32 LINE_ROWS = 128 / (BK * 2);            // tile rows per 128 bytes (one sweep of the 32 banks): 2
static_assert(WN % 16 == 0 && BK % 16 == 0 && LINE_ROWS * CHUNKS == 8,
              "whole ldmatrix.x4 tiles; the swizzle's period is 8 rows");

// A tensor-core tile of ROWS rows of c by BN columns, each warp (ROWS / 2) × 64: GEMM_TILE_M rows,
// or half of them for a product of at most that many rows (a decode step's), where a full tile
// would stage and multiply rows of zeros: at m = 64 half its tensor-core work.
template <u32 ROWS>
struct Tile {
    static constexpr u32 BM = ROWS;
    static constexpr u32 WM = BM / WARPS_M;                          // rows a warp: 64 or 32
    static constexpr u32 MT = WM / 16;                               // mma tiles a warp along m: 4 or 2
    static constexpr u32 STAGE_ELEMS = (BM + BN) * BK;               // bf16 a stage: a rows, then b rows
    static constexpr u32 LOADS = (BM + BN) * CHUNKS / GEMM_THREADS;  // chunks a thread stages a K tile: 8 or 6
    static constexpr u32 A_LOADS = BM / LOAD_ROWS;                   // of them, the ones in a: 4 or 2
    static_assert(WM % 16 == 0, "whole ldmatrix.x4 tiles");
    static_assert((BM + BN) * CHUNKS % GEMM_THREADS == 0 && BM % LOAD_ROWS == 0 && LOAD_ROWS % 8 == 0,
                  "whole chunks per thread, each in a or in b, all at the same swizzle");
};
using WideTile = Tile<BM>;
using ShortTile = Tile<BM / 2>;

// The scalar path: a 64 × 64 sub-tile per pass, K tiles of SK. A thread owns SR rows, SQ pairs of
// adjacent columns in each (8 × 2 × 2 = 32 outputs), from a grid of S_TX × S_TY threads.
constexpr u32 SM = 64, SN = 64, SK = 32;
constexpr u32 S_TX = 16, S_TY = GEMM_THREADS / S_TX;  // 16 × 8 threads
constexpr u32 SR = SM / S_TY, SQ = SN / (2 * S_TX);    // 8 rows, 2 column pairs a thread
static_assert(S_TX * S_TY == GEMM_THREADS && SR * S_TY == SM && SQ * 2 * S_TX == SN, "the sub-tile, shared out");
constexpr u32 SCALAR_BYTES = SK * (SM + 1) * 4 + SK * (SN + 1) * 4;
// The launch's dynamic shared memory, the wide tile's stages (the short tile's fit in them):
// launch::GEMM_SHARED_BYTES computes the same.
constexpr u32 SHARED_BYTES = STAGES * WideTile::STAGE_ELEMS * 2;
// Three blocks an SM (__launch_bounds__ below): each takes its shared memory plus the 1 KiB the
// device reserves a block, out of an sm_90 SM's 228 KiB.
static_assert(3 * (SHARED_BYTES + 1024) <= 228 * 1024 && SHARED_BYTES % 16 == 0, "three blocks an SM");
static_assert(SCALAR_BYTES <= SHARED_BYTES, "the scalar path fits the tensor path's stages");

// Where chunk q (8 bf16) of row r of a stage is stored, in bf16 from the stage (header: the swizzle).
__device__ __forceinline__ u32 swizzled(u32 r, u32 q) { return r * BK + ((q ^ ((r / LINE_ROWS) % CHUNKS)) * 8); }

// A thread's Shape::LOADS chunks of each K tile: chunk `lchunk` (K columns lchunk·8..) of stage
// rows lrow + LOAD_ROWS·j, the first Shape::A_LOADS of them rows of a, the rest rows of b. Two
// element offsets (row lrow of a and of b, advanced by BK a tile) and one row step keep few
// registers live (ptxas recomputed four pointers every tile at the 128-register cap).
struct Loader {
    size_t a_at;  // (m0 + lrow)·lda + k0 + lchunk·8 in a, then + BK per K tile
    size_t b_at;  // (n0 + lrow)·k + k0 + lchunk·8 in b, likewise
    size_t a_step;  // LOAD_ROWS rows of a
    size_t b_step;  // LOAD_ROWS rows of b
    u32 row_ok;   // bit j: stage row lrow + LOAD_ROWS·j lies inside its operand
    u32 dst;      // the chunk of row lrow in a stage (bf16); row lrow + LOAD_ROWS·j is LOAD_ROWS·j·BK on
    u32 col;      // the K column of this thread's chunk in the next tile
};

template <typename Shape>
__device__ __forceinline__ Loader make_loader(u32 m, u32 n, u32 k, u32 lda, u32 m0, u32 n0, u32 k0) {
    Loader l;
    const u32 lrow = threadIdx.x / CHUNKS, lchunk = threadIdx.x % CHUNKS;
    l.dst = swizzled(lrow, lchunk);  // the same swizzle for every r = lrow + LOAD_ROWS·j (LOAD_ROWS % 8 == 0)
    l.a_step = static_cast<size_t>(LOAD_ROWS) * lda;
    l.b_step = static_cast<size_t>(LOAD_ROWS) * k;
    l.a_at = static_cast<size_t>(m0 + lrow) * lda + k0 + lchunk * 8;
    l.b_at = static_cast<size_t>(n0 + lrow) * k + k0 + lchunk * 8;
    l.row_ok = 0;
#pragma unroll
    for (u32 j = 0; j < Shape::LOADS; ++j) {
        const bool ok = j < Shape::A_LOADS ? m0 + lrow + LOAD_ROWS * j < m
                                           : n0 + lrow + LOAD_ROWS * (j - Shape::A_LOADS) < n;
        l.row_ok |= static_cast<u32>(ok) << j;
    }
    l.col = k0 + lchunk * 8;
    return l;
}

// A 16-byte cp.async that copies 16 bytes from `gmem` if `copy`, else reads none and fills the 16
// with zeros (cp.async's src-size operand): an edge chunk costs no branch and no separate store.
// `gmem` is a valid address either way.
#if defined(KDA_EMULATION)
__device__ __forceinline__ void cp_async_16_or_zero(void* smem, const void* gmem, bool copy) {
    if (copy) {
        cp_async_16(smem, gmem);
    } else {
        *static_cast<uint4*>(smem) = make_uint4(0, 0, 0, 0);
    }
}
#else
__device__ __forceinline__ void cp_async_16_or_zero(void* smem, const void* gmem, bool copy) {
    const u32 dst = static_cast<u32>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(copy ? 16u : 0u)
                 : "memory");
}
#endif

// Stages the next K tile into `stage` and advances `l` past it: each chunk copied where it lies
// inside its operand and before k1 (the end of the tile's K range), zeros where it does not (k and
// the range's start are multiples of 8, its end of 32 or k: a chunk is all in or all out). A chunk
// outside gets the operand's start as its (unread) source, never an address past the operand.
template <typename Shape>
__device__ __forceinline__ void load_stage(bf16* stage, Loader& l, const bf16* a, const bf16* b, u32 k1) {
    const bool in_k = l.col < k1;
#pragma unroll
    for (u32 j = 0; j < Shape::LOADS; ++j) {
        const bool copy = ((l.row_ok >> j) & 1) && in_k;
        const bf16* operand = j < Shape::A_LOADS ? a : b;
        const size_t at = j < Shape::A_LOADS ? l.a_at + j * l.a_step : l.b_at + (j - Shape::A_LOADS) * l.b_step;
        cp_async_16_or_zero(stage + l.dst + LOAD_ROWS * j * BK, copy ? operand + at : operand, copy);
    }
    l.a_at += BK;
    l.b_at += BK;
    l.col += BK;
}

// Where a tile's sums go: outputs (row, col) and (row, col + 1) of an m × n matrix, col even,
// each where it lies inside. `pairs`: n is even and the matrix aligned to two elements, so the two
// are one aligned store, inside together. Rounded once to bf16 (`c`), or kept as f32 (a split-K
// partial).
template <typename T>
struct Output {
    T* out;
    u32 m, n;
    bool pairs;

    __device__ __forceinline__ void store(u32 row, u32 col, float lo, float hi) const {
        if (row >= m || col >= n) return;
        T* at = out + static_cast<size_t>(row) * n + col;
        if (pairs) {
            store_two(at, lo, hi);
        } else {
            at[0] = from_f32(lo);
            if (col + 1 < n) at[1] = from_f32(hi);
        }
    }
    static __device__ __forceinline__ T from_f32(float x) {
        if constexpr (std::is_same_v<T, bf16>) {
            return narrow(x);
        } else {
            return x;
        }
    }
    static __device__ __forceinline__ void store_two(T* at, float lo, float hi) {
        if constexpr (std::is_same_v<T, bf16>) {
            *reinterpret_cast<uint32_t*>(at) = pack_bf16(lo, hi);
        } else {
            *reinterpret_cast<float2*>(at) = make_float2(lo, hi);
        }
    }
};

template <typename T>
__device__ __forceinline__ Output<T> output(T* out, u32 m, u32 n) {
    const bool pairs = n % 2 == 0 && aligned_to(out, 2 * sizeof(T));
    return Output<T>{out, m, n, pairs};
}

// The tensor-core tile of `Shape` at (m0, n0) over K columns k0..k1, into `out`; k and lda
// multiples of 8, k0 of BK, a and b 16-byte aligned.
template <typename Shape, typename T>
__device__ __forceinline__ void tensor_tile(bf16* smem, const bf16* a, const bf16* b, const Output<T>& out, u32 k,
                                            u32 lda, u32 m0, u32 n0, u32 k0, u32 k1) {
    constexpr u32 MT = Shape::MT, STAGE_ELEMS = Shape::STAGE_ELEMS;
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const u32 wm = (warp / WARPS_N) * Shape::WM, wn = (warp % WARPS_N) * WN;
    const u32 tiles = (k1 - k0 + BK - 1) / BK;
    Loader loader = make_loader<Shape>(out.m, out.n, k, lda, m0, n0, k0);

    // ldmatrix addresses (bf16 from a stage) for the two 16-wide K steps s of a tile. A 16 × 16 (mma
    // tile i adds 16 rows): lanes 0-15 address rows 0-15 at chunk 2s, lanes 16-31 the same rows at
    // chunk 2s + 1. B for two n8 tiles (pair jj adds 16 rows): lanes 8q..8q+7 address b rows
    // (q / 2)·8.. at chunk 2s + q % 2. Every row is a multiple of 8 plus lane & 15 or lane & 7,
    // so its swizzle term (r >> 1) & 3 is the lane's (lane >> 1) & 3 (in general, of lane & 7).
    const u32 xr = ((lane & 7) / LINE_ROWS) % CHUNKS;
    const u32 a_row = (wm + (lane & 15)) * BK, b_row = (Shape::BM + wn + ((lane >> 4) << 3) + (lane & 7)) * BK;
    u32 a_off[BK / 16], b_off[BK / 16];
#pragma unroll
    for (u32 s = 0; s < BK / 16; ++s) {
        a_off[s] = a_row + (((2 * s + (lane >> 4)) ^ xr) * 8);
        b_off[s] = b_row + (((2 * s + ((lane >> 3) & 1)) ^ xr) * 8);
    }

    float acc[MT][NT][4];
#pragma unroll
    for (u32 i = 0; i < MT; ++i)
#pragma unroll
        for (u32 j = 0; j < NT; ++j)
#pragma unroll
            for (u32 e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

    // The first STAGES - 1 tiles in flight; one commit group per tile, empty past the last.
#pragma unroll
    for (u32 s = 0; s + 1 < STAGES; ++s) {
        if (s < tiles) load_stage<Shape>(smem + s * STAGE_ELEMS, loader, a, b, k1);
        cp_async_commit();
    }
    u32 read = 0, write = STAGES - 1;  // the stages of this tile and of the one STAGES - 1 ahead
    for (u32 tile = 0; tile < tiles; ++tile) {
        cp_async_wait<STAGES - 2>();  // this tile's group has landed, for this thread's copies
        __syncthreads();              // ... and every thread's; the stage refilled next is free
        if (tile + STAGES - 1 < tiles) load_stage<Shape>(smem + write * STAGE_ELEMS, loader, a, b, k1);
        cp_async_commit();

        const bf16* stage = smem + read * STAGE_ELEMS;
#pragma unroll
        for (u32 s = 0; s < BK / 16; ++s) {
            u32 af[MT][4], bfr[NT][2];
#pragma unroll
            for (u32 i = 0; i < MT; ++i) ldmatrix_x4(af[i], stage + a_off[s] + i * 16 * BK);
#pragma unroll
            for (u32 j = 0; j < NT; j += 2) {
                u32 r[4];
                ldmatrix_x4(r, stage + b_off[s] + j * 8 * BK);
                bfr[j][0] = r[0];
                bfr[j][1] = r[1];
                bfr[j + 1][0] = r[2];
                bfr[j + 1][1] = r[3];
            }
#pragma unroll
            for (u32 i = 0; i < MT; ++i)
#pragma unroll
                for (u32 j = 0; j < NT; ++j) mma_bf16_16816(acc[i][j], af[i], bfr[j]);
        }
        read = read + 1 == STAGES ? 0 : read + 1;
        write = write + 1 == STAGES ? 0 : write + 1;
    }
    cp_async_wait<0>();
    __syncthreads();  // every warp is done with the stages before the next tile reuses them

    // d[0], d[1] = row g, columns 2t, 2t + 1; d[2], d[3] = row g + 8, the same columns.
    const u32 g = lane >> 2, t = lane & 3;
#pragma unroll
    for (u32 i = 0; i < MT; ++i)
#pragma unroll
        for (u32 j = 0; j < NT; ++j)
#pragma unroll
            for (u32 h = 0; h < 2; ++h)
                out.store(m0 + wm + i * 16 + g + h * 8, n0 + wn + j * 8 + 2 * t, acc[i][j][2 * h],
                          acc[i][j][2 * h + 1]);
}

// The scalar path's sub-tile at (m0, n0) over K columns k0..k1: SM × SN outputs, thread (tx, ty)
// owning rows ty + S_TY·r and columns 2·tx + 2·S_TX·q and the one after, over K tiles staged as f32
// (k-major: a broadcast column of a and a contiguous row of b per step, where a warp's 16 tx read
// 16 distinct banks). Every thread of the block takes part (barriers).
template <typename T>
__device__ __forceinline__ void scalar_subtile(unsigned char* smem, const bf16* a, const bf16* b, const Output<T>& out,
                                               u32 k, u32 lda, u32 m0, u32 n0, u32 k0, u32 k1) {
    const u32 m = out.m, n = out.n;
    auto a_tile = reinterpret_cast<float(*)[SM + 1]>(smem);
    auto b_tile = reinterpret_cast<float(*)[SN + 1]>(smem + SK * (SM + 1) * 4);
    const u32 tid = threadIdx.x, tx = tid % S_TX, ty = tid / S_TX;
    float acc[SR][SQ][2] = {};
    for (u32 kt = k0; kt < k1; kt += SK) {
        // Each thread widens up to 16 a and 16 b elements of the tile (row-major reads, k-major
        // stores).
        for (u32 i = tid; i < SK * (SM + SN); i += GEMM_THREADS) {
            const u32 row = i / SK, p = i % SK, gp = kt + p;
            if (row < SM) {
                const u32 r = m0 + row;
                a_tile[p][row] = (r < m && gp < k1) ? widen(a[static_cast<size_t>(r) * lda + gp]) : 0.0f;
            } else {
                const u32 r = n0 + (row - SM);
                b_tile[p][row - SM] = (r < n && gp < k1) ? widen(b[static_cast<size_t>(r) * k + gp]) : 0.0f;
            }
        }
        __syncthreads();
        for (u32 p = 0; p < SK; ++p) {
#pragma unroll
            for (u32 r = 0; r < SR; ++r)
#pragma unroll
                for (u32 q = 0; q < SQ; ++q)
#pragma unroll
                    for (u32 e = 0; e < 2; ++e)
                        acc[r][q][e] = acc[r][q][e] + a_tile[p][ty + S_TY * r] * b_tile[p][2 * (tx + S_TX * q) + e];
        }
        __syncthreads();
    }
#pragma unroll
    for (u32 r = 0; r < SR; ++r)
#pragma unroll
        for (u32 q = 0; q < SQ; ++q)
            out.store(m0 + ty + S_TY * r, n0 + 2 * (tx + S_TX * q), acc[r][q][0], acc[r][q][1]);
}

// The scalar path's tile at (m0, n0), as its sub-tiles.
template <typename T>
__device__ __forceinline__ void scalar_tile(unsigned char* smem, const bf16* a, const bf16* b, const Output<T>& out,
                                            u32 k, u32 lda, u32 m0, u32 n0, u32 k0, u32 k1) {
    for (u32 sm = 0; sm < BM; sm += SM)
        for (u32 sn = 0; sn < BN; sn += SN) scalar_subtile(smem, a, b, out, k, lda, m0 + sm, n0 + sn, k0, k1);
}

// The K columns of split s of `splits`: whole BK tiles, cdiv(cdiv(k, BK), splits) of them a split
// (the last one shorter, or empty), ending at k.
struct KRange {
    u32 begin, end;
};
__device__ __forceinline__ KRange split_range(u32 k, u32 splits, u32 s) {
    const u32 span = ((k + BK - 1) / BK + splits - 1) / splits * BK;
    const u32 begin = min(k, s * span);
    return KRange{begin, min(k, begin + span)};
}

// Runs `tile(m0, n0, s, range)` for every tile of ROWS × BN of an m × n product and every range s
// of K split into `splits` (split_range): the units (tile, split), split-major, t = tile row ·
// tiles_n + tile column within a split, each a block's, grid-strided (block (x, y) takes unit
// y·gridDim.x + x, its own under launch::gemm's grid, and every grid's worth after it).
template <u32 ROWS, typename TileBody>
__device__ __forceinline__ void for_each_unit(u32 m, u32 n, u32 k, u32 splits, TileBody tile) {
    const u32 tiles_n = n / BN + (n % BN != 0);
    const size_t tiles = static_cast<size_t>(m / ROWS + (m % ROWS != 0)) * tiles_n;
    const size_t units = tiles * splits;
    const size_t stride = static_cast<size_t>(gridDim.x) * gridDim.y;
    for (size_t u = static_cast<size_t>(blockIdx.y) * gridDim.x + blockIdx.x; u < units; u += stride) {
        const size_t t = u % tiles;
        const u32 s = static_cast<u32>(u / tiles);
        tile(static_cast<u32>(t / tiles_n) * ROWS, static_cast<u32>(t % tiles_n) * BN, s, split_range(k, splits, s));
    }
}

// The tensor-core path of gemm_units on tiles of `Shape`. Not inlined: each shape gets its own
// register allocation (inlined together, the two spill at the 168-register cap).
template <typename Shape, typename Outs>
__device__ __noinline__ void tensor_units(bf16* stages, const bf16* a, const bf16* b, u32 m, u32 n, u32 k, u32 lda,
                                          u32 splits, Outs outs) {
    for_each_unit<Shape::BM>(m, n, k, splits, [=](u32 m0, u32 n0, u32 s, KRange range) {
        tensor_tile<Shape>(stages, a, b, outs(s), k, lda, m0, n0, range.begin, range.end);
    });
}

// Every tile of an m × n product over K split into `splits` ranges, the sums of range s into
// `outs(s)` (one output for an unsplit product), staged through `smem` (SHARED_BYTES). Each
// output's sum runs over the K tiles of its range in the same order whatever m is (and each mma
// computes an element from its row and column alone, whichever tile holds it), so a row of an
// output does not depend on the other rows.
template <typename Outs>
__device__ __forceinline__ void gemm_units(unsigned char* smem, const bf16* __restrict__ a,
                                           const bf16* __restrict__ b, u32 m, u32 n, u32 k, u32 lda, u32 splits,
                                           Outs outs) {
    bf16* const stages = reinterpret_cast<bf16*>(smem);
    // Uniform over the launch: every thread of every block takes the same path. One loop per path
    // (a branch inside one loop costs registers the tensor path has none of to spare). The short
    // tile covers m ≤ 64 in one tile row, as the wide one does: the grid is the same.
    if (k % 8 == 0 && lda % 8 == 0 && aligned16(a) && aligned16(b)) {
        if (m <= ShortTile::BM) {
            tensor_units<ShortTile>(stages, a, b, m, n, k, lda, splits, outs);
        } else {
            tensor_units<WideTile>(stages, a, b, m, n, k, lda, splits, outs);
        }
    } else {
        for_each_unit<BM>(m, n, k, splits, [=](u32 m0, u32 n0, u32 s, KRange range) {
            scalar_tile(smem, a, b, outs(s), k, lda, m0, n0, range.begin, range.end);
        });
    }
}
// The block shape the kernels are written for, and the dynamic shared memory they stage through.
__device__ __forceinline__ bool gemm_launch_ok() {
    return blockDim.x == GEMM_THREADS && blockDim.y == 1 && blockDim.z == 1 && dynamic_shared_bytes() >= SHARED_BYTES;
}
}  // namespace

// Three blocks per SM (3 × 64 KiB of shared memory, 12 warps to hide latency): room for 168
// registers a thread, which the tensor path's 128 accumulators and 32 fragment registers fit
// without spilling (ptxas takes 168). Four blocks would cap it at 128 and spill; two leave 8 warps
// an SM (ptxas then takes 216), and warps an SM counted on an H200: the 8-warp 64 × 32 kernel ran
// 40 % slower at one block per SM than at two.
extern "C" __global__ void __launch_bounds__(GEMM_THREADS, 3)
    dense_gemm_bf16(const bf16* __restrict__ a, const bf16* __restrict__ b, bf16* __restrict__ c, u32 m, u32 n,
                    u32 k, u32 lda) {
    if (!gemm_launch_ok()) return;
    if (lda < k) return;  // a's rows would overlap
    const Output<bf16> out = output(c, m, n);
    gemm_units(dynamic_shared(), a, b, m, n, k, lda, 1, [=](u32) { return out; });
}

// The same products over K split into `splits` ranges of whole K tiles (split_range), range s's
// f32 sums into partial[s] ([splits, m, n]), for `dense_gemm_splitk_reduce_bf16` to add: for a
// product with too few output tiles to give every SM one (a decode step's o_proj at B = 64 has 32
// over K = 8192), so that more blocks stream the weight, each a shorter K. Geometry
// (src/launch.rs): `launch::gemm_splitk(m, n, splits)`, grid (⌈n / GEMM_TILE_N⌉,
// ⌈m / GEMM_TILE_M⌉ · splits), any grid works. Registers and shared memory as dense_gemm_bf16.
extern "C" __global__ void __launch_bounds__(GEMM_THREADS, 3)
    dense_gemm_bf16_splitk(const bf16* __restrict__ a, const bf16* __restrict__ b, float* __restrict__ partial,
                           u32 m, u32 n, u32 k, u32 lda, u32 splits) {
    if (!gemm_launch_ok()) return;
    if (lda < k || splits == 0) return;
    const size_t slice = static_cast<size_t>(m) * n;
    gemm_units(dynamic_shared(), a, b, m, n, k, lda, splits, [=](u32 s) { return output(partial + s * slice, m, n); });
}

// c[i] = bf16(((partial[0][i] + partial[1][i]) + …) + partial[splits − 1][i]) for the m·n outputs:
// the split sums added in split order, one rounding. Geometry: `launch::elementwise(m·n)`, any
// 1-D geometry (grid-stride).
extern "C" __global__ void dense_gemm_splitk_reduce_bf16(const float* __restrict__ partial, bf16* __restrict__ c,
                                                         u32 m, u32 n, u32 splits) {
    const size_t count = static_cast<size_t>(m) * n;
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
        float sum = partial[i];
        for (u32 s = 1; s < splits; ++s) sum = sum + partial[s * count + i];
        c[i] = narrow(sum);
    }
}
