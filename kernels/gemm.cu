// gemm: dense_gemm_bf16, c[i][j] = bf16(Σ_p f32(a[i][p])·f32(b[j][p])) with a [m, k], b [n, k]
// (a Linear weight), c [m, n], no output stride (docs/kernels.md).
//
// The ABI leaves a GEMM's summation order free (its tolerance is the dense products' one), so the
// products run on tensor cores: bf16 inputs, f32 accumulation, `mma.sync.m16n8k16`. A block of
// GEMM_THREADS = 256 threads (8 warps, 4 along m by 2 along n) computes a GEMM_TILE_M ×
// GEMM_TILE_N = 128 × 64 tile of c, each warp 32 × 32 (2 × 4 mma tiles, 32 accumulators a thread),
// over K tiles of 32 that `cp.async` stages in shared memory STAGES deep, so the loads of the tiles
// ahead overlap the products of this one. Rows are padded to 40 bf16 (80 bytes): the eight 16-byte
// row segments one `ldmatrix` reads then fall in distinct bank groups. Tiles past m or n, and K
// chunks past k, are zero-filled in shared memory (zeros add nothing to a sum).
//
// The tensor-core path needs 16-byte rows (k % 8 == 0) and 16-byte aligned operands; any other
// launch takes the scalar path, the same tile as four 64 × 32 register-blocked sub-tiles of f32
// products in ascending p, which the emulated cases exercise with odd k and offset views.
//
// Geometry (src/launch.rs): `launch::gemm(m, n)`: blockDim = (GEMM_THREADS, 1, 1),
// grid (⌈n / GEMM_TILE_N⌉, ⌈m / GEMM_TILE_M⌉), a grid-stride loop over further tiles. Shared
// memory is static: 45 KiB, shared by the two paths.
#include "kda_common.cuh"

#ifndef GEMM_TILE_M
#error "GEMM_TILE_M must be defined by the build (kernels.toml [defines])"
#endif
#ifndef GEMM_TILE_N
#error "GEMM_TILE_N must be defined by the build (kernels.toml [defines])"
#endif
#ifndef GEMM_THREADS
#error "GEMM_THREADS must be defined by the build (kernels.toml [defines])"
#endif

static_assert(GEMM_TILE_M == 128 && GEMM_TILE_N == 64 && GEMM_THREADS == 256,
              "dense_gemm_bf16 is written for 128 x 64 tiles of 256 threads (8 warps of 32 x 32)");

namespace {
constexpr u32 BM = GEMM_TILE_M, BN = GEMM_TILE_N, BK = 32;
constexpr u32 STAGES = 3;
constexpr u32 LDS = BK + 8;                    // shared row length in bf16: 80 bytes
constexpr u32 WARPS_M = 4, WARPS_N = 2;        // warp grid of a block
constexpr u32 WM = BM / WARPS_M, WN = BN / WARPS_N;  // 32 x 32 per warp
constexpr u32 MT = WM / 16, NT = WN / 8;       // mma tiles per warp: 2 x 4
constexpr u32 CHUNKS = BK / 8;                 // 16-byte chunks per tile row
constexpr u32 STAGE_ELEMS = (BM + BN) * LDS;   // bf16 per stage: a rows, then b rows
static_assert(WARPS_M * WARPS_N * 32 == GEMM_THREADS, "one warp per 32 x 32 sub-tile");
static_assert((BM + BN) * CHUNKS % GEMM_THREADS == 0, "whole chunks per thread");

// The scalar path: a 64 × 32 sub-tile per pass, 4 × 2 outputs per thread, K tiles of SK.
constexpr u32 SM = 64, SN = 32, SK = 32;
constexpr u32 SCALAR_BYTES = SK * (SM + 1) * 4 + SK * (SN + 1) * 4;
constexpr u32 TENSOR_BYTES = STAGES * STAGE_ELEMS * 2;
constexpr u32 SHARED_BYTES = TENSOR_BYTES > SCALAR_BYTES ? TENSOR_BYTES : SCALAR_BYTES;
static_assert(SHARED_BYTES <= 48 * 1024 && SHARED_BYTES % 16 == 0, "static, whole 16-byte words, no opt-in");

// Stages K tile `tile` (columns tile·BK ..) of rows m0.. of a and n0.. of b into `stage`: each
// 16-byte chunk by cp.async where it lies inside the operand, zeros where it does not.
__device__ __forceinline__ void load_stage(bf16* stage, const bf16* a, const bf16* b, u32 m, u32 n, u32 k, u32 m0,
                                           u32 n0, u32 tile) {
    const u32 k0 = tile * BK;
#pragma unroll
    for (u32 i = threadIdx.x; i < (BM + BN) * CHUNKS; i += GEMM_THREADS) {
        const u32 row = i / CHUNKS, p = k0 + (i % CHUNKS) * 8;
        const bool is_a = row < BM;
        const u32 r = is_a ? m0 + row : n0 + (row - BM);
        const bool inside = (is_a ? r < m : r < n) && p < k;  // k % 8 == 0: a chunk is all in or out
        bf16* dst = stage + row * LDS + (i % CHUNKS) * 8;
        if (inside) {
            cp_async_16(dst, (is_a ? a : b) + static_cast<size_t>(r) * k + p);
        } else {
            *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
        }
    }
}

// The tensor-core tile at (m0, n0); k % 8 == 0 and a, b 16-byte aligned.
__device__ __forceinline__ void tensor_tile(bf16* smem, const bf16* a, const bf16* b, bf16* c, u32 m, u32 n, u32 k,
                                            u32 m0, u32 n0) {
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const u32 wm = (warp / WARPS_N) * WM, wn = (warp % WARPS_N) * WN;
    const u32 tiles = (k + BK - 1) / BK;
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
        if (s < tiles) load_stage(smem + s * STAGE_ELEMS, a, b, m, n, k, m0, n0, s);
        cp_async_commit();
    }
    for (u32 tile = 0; tile < tiles; ++tile) {
        cp_async_wait<STAGES - 2>();  // this tile's group has landed, for this thread's copies
        __syncthreads();              // ... and every thread's; the stage refilled next is free
        const u32 ahead = tile + STAGES - 1;
        if (ahead < tiles) load_stage(smem + (ahead % STAGES) * STAGE_ELEMS, a, b, m, n, k, m0, n0, ahead);
        cp_async_commit();

        const bf16* as = smem + (tile % STAGES) * STAGE_ELEMS;
        const bf16* bs = as + BM * LDS;
#pragma unroll
        for (u32 kk = 0; kk < BK; kk += 16) {
            u32 af[MT][4], bfr[NT][2];
            // A 16 × 16: lanes 0-15 address rows 0-15 at k, lanes 16-31 the same rows at k + 8.
#pragma unroll
            for (u32 i = 0; i < MT; ++i)
                ldmatrix_x4(af[i], as + (wm + i * 16 + (lane & 15)) * LDS + kk + (lane >> 4) * 8);
            // B for two n8 tiles: lanes 8q..8q+7 address n rows (q / 2)·8.. at k + (q % 2)·8.
#pragma unroll
            for (u32 j = 0; j < NT; j += 2) {
                u32 r[4];
                ldmatrix_x4(r, bs + (wn + j * 8 + ((lane >> 4) << 3) + (lane & 7)) * LDS + kk + ((lane >> 3) & 1) * 8);
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
    }
    cp_async_wait<0>();
    __syncthreads();  // every warp is done with the stages before the next tile reuses them

    const u32 g = lane >> 2, t = lane & 3;
#pragma unroll
    for (u32 i = 0; i < MT; ++i)
#pragma unroll
        for (u32 j = 0; j < NT; ++j)
#pragma unroll
            for (u32 e = 0; e < 4; ++e) {
                const u32 row = m0 + wm + i * 16 + g + (e >> 1) * 8;
                const u32 col = n0 + wn + j * 8 + 2 * t + (e & 1);
                if (row < m && col < n) c[static_cast<size_t>(row) * n + col] = narrow(acc[i][j][e]);
            }
}

// The scalar path's sub-tile at (m0, n0): SM × SN outputs, thread (tx, ty) owning rows ty + 16·r
// and columns tx + 16·q, over K tiles staged as f32 (k-major: a broadcast column of a and a
// contiguous row of b per step). Every thread of the block takes part (barriers).
__device__ __forceinline__ void scalar_subtile(unsigned char* smem, const bf16* a, const bf16* b, bf16* c, u32 m,
                                               u32 n, u32 k, u32 m0, u32 n0) {
    auto a_tile = reinterpret_cast<float(*)[SM + 1]>(smem);
    auto b_tile = reinterpret_cast<float(*)[SN + 1]>(smem + SK * (SM + 1) * 4);
    const u32 tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    float acc[4][2] = {};
    for (u32 k0 = 0; k0 < k; k0 += SK) {
        // Each thread widens up to 8 a and 4 b elements of the tile (row-major reads, k-major
        // stores).
        for (u32 i = tid; i < SK * (SM + SN); i += GEMM_THREADS) {
            const u32 row = i / SK, p = i % SK, gp = k0 + p;
            if (row < SM) {
                const u32 r = m0 + row;
                a_tile[p][row] = (r < m && gp < k) ? widen(a[static_cast<size_t>(r) * k + gp]) : 0.0f;
            } else {
                const u32 r = n0 + (row - SM);
                b_tile[p][row - SM] = (r < n && gp < k) ? widen(b[static_cast<size_t>(r) * k + gp]) : 0.0f;
            }
        }
        __syncthreads();
        for (u32 p = 0; p < SK; ++p) {
#pragma unroll
            for (u32 r = 0; r < 4; ++r)
#pragma unroll
                for (u32 q = 0; q < 2; ++q) acc[r][q] = acc[r][q] + a_tile[p][ty + 16 * r] * b_tile[p][tx + 16 * q];
        }
        __syncthreads();
    }
#pragma unroll
    for (u32 r = 0; r < 4; ++r)
#pragma unroll
        for (u32 q = 0; q < 2; ++q) {
            const u32 i = m0 + ty + 16 * r, j = n0 + tx + 16 * q;
            if (i < m && j < n) c[static_cast<size_t>(i) * n + j] = narrow(acc[r][q]);
        }
}
static_assert(SCALAR_BYTES <= SHARED_BYTES, "the scalar path fits the shared buffer");

// The scalar path's tile at (m0, n0), as its sub-tiles.
__device__ __forceinline__ void scalar_tile(unsigned char* smem, const bf16* a, const bf16* b, bf16* c, u32 m, u32 n,
                                         u32 k, u32 m0, u32 n0) {
    for (u32 sm = 0; sm < BM; sm += SM)
        for (u32 sn = 0; sn < BN; sn += SN) scalar_subtile(smem, a, b, c, m, n, k, m0 + sm, n0 + sn);
}
}  // namespace

// Two blocks per SM (2 × 45 KiB of shared memory): room for 128 registers a thread, which the
// tensor path's 32 accumulators and fragments need without spilling (ptxas picks ~80 and spills
// when left to aim for three).
extern "C" __global__ void __launch_bounds__(GEMM_THREADS, 2)
    dense_gemm_bf16(const bf16* __restrict__ a, const bf16* __restrict__ b, bf16* __restrict__ c, u32 m, u32 n,
                    u32 k) {
    // Words of 16 bytes: aligned for cp.async and ldmatrix, then viewed as each path's tiles.
    __shared__ uint4 smem_words[SHARED_BYTES / 16];
    unsigned char* smem = reinterpret_cast<unsigned char*>(smem_words);
    if (blockDim.x != GEMM_THREADS || blockDim.y != 1 || blockDim.z != 1) return;
    // Uniform over the launch: every thread of every block takes the same path.
    if ((k % 8 == 0) && aligned16(a) && aligned16(b)) {
        for (u32 m0 = blockIdx.y * BM; m0 < m; m0 += gridDim.y * BM)
            for (u32 n0 = blockIdx.x * BN; n0 < n; n0 += gridDim.x * BN)
                tensor_tile(reinterpret_cast<bf16*>(smem), a, b, c, m, n, k, m0, n0);
    } else {
        for (u32 m0 = blockIdx.y * BM; m0 < m; m0 += gridDim.y * BM)
            for (u32 n0 = blockIdx.x * BN; n0 < n; n0 += gridDim.x * BN)
                scalar_tile(smem, a, b, c, m, n, k, m0, n0);
    }
}
