// gemm: dense_gemm_bf16, c[i][j] = bf16(Σ_p f32(a[i][p])·f32(b[j][p])) with a [m, k], b [n, k]
// (a Linear weight), c [m, n], no output stride (docs/kernels.md).
//
// One f32 accumulator per output in ascending p (`acc = acc + a·b` from +0, --fmad=false): the
// order the ABI fixes, so every row equals the GEMV of that row and the CPU mirror bit for bit.
// That rules out tensor cores and split-K; speed comes from register blocking instead: a block of
// GEMM_THREADS = 256 threads computes a GEMM_TILE_M × GEMM_TILE_N = 64 × 64 tile, each thread a
// 4 × 4 sub-tile (rows ty + 16·r, columns tx + 16·c: 16 independent accumulator chains), over K
// tiles of 32 staged in shared memory as f32 (k-major, so each step reads a broadcast column of a
// and a contiguous row of b). The next K tile is prefetched into registers during the compute.
// Positions past m, n or k are zero-filled: the extra +0 terms leave every accumulator's bits
// unchanged (started at +0, an accumulator is never −0).
//
// Geometry (src/launch.rs): `launch::gemm(m, n)`: blockDim = (GEMM_THREADS, 1, 1),
// grid (⌈n / GEMM_TILE_N⌉, ⌈m / GEMM_TILE_M⌉). Shared memory is static (16.25 KiB).
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

static_assert(GEMM_TILE_M == 64 && GEMM_TILE_N == 64 && GEMM_THREADS == 256,
              "dense_gemm_bf16 is written for 64 x 64 tiles of 256 threads (4 x 4 outputs each)");

namespace {
constexpr u32 BM = GEMM_TILE_M, BN = GEMM_TILE_N, BK = 32;
constexpr u32 TM = 4, TN = 4;             // outputs per thread
constexpr u32 CHUNKS = BK / 8;            // 16-byte chunks per tile row
static_assert(BM * CHUNKS == GEMM_THREADS && BN * CHUNKS == GEMM_THREADS, "one chunk of a and b per thread");

// Eight consecutive bf16 of `row` from position p (zeros past k or for a missing row), as 4 words.
__device__ __forceinline__ uint4 load_chunk(const bf16* row, bool row_ok, u32 p, u32 k, bool vector_ok) {
    if (row_ok && vector_ok && p + 8 <= k) return __ldg(reinterpret_cast<const uint4*>(row + p));
    return load_chunk_scalar(row, row_ok, p, k);
}

// Widens a chunk into column `r` of a k-major [BK][width] tile, at rows 8·c .. 8·c + 7.
template <u32 WIDTH>
__device__ __forceinline__ void store_chunk(float (&tile)[BK][WIDTH], u32 r, u32 c, uint4 v) {
    const u32 p = c * 8;
    tile[p + 0][r] = bf16_lo(v.x);
    tile[p + 1][r] = bf16_hi(v.x);
    tile[p + 2][r] = bf16_lo(v.y);
    tile[p + 3][r] = bf16_hi(v.y);
    tile[p + 4][r] = bf16_lo(v.z);
    tile[p + 5][r] = bf16_hi(v.z);
    tile[p + 6][r] = bf16_lo(v.w);
    tile[p + 7][r] = bf16_hi(v.w);
}
}  // namespace

extern "C" __global__ void __launch_bounds__(GEMM_THREADS)
    dense_gemm_bf16(const bf16* __restrict__ a, const bf16* __restrict__ b, bf16* __restrict__ c, u32 m, u32 n,
                    u32 k) {
    // One pad column: the 4 lanes storing the chunks of one row then hit distinct banks.
    __shared__ float a_tile[BK][BM + 1];
    __shared__ float b_tile[BK][BN + 1];
    if (blockDim.x != GEMM_THREADS || blockDim.y != 1 || blockDim.z != 1) return;

    const u32 tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    // This thread's load slot: row `lr` of the a and b tiles, chunk `lc`.
    const u32 lr = tid / CHUNKS, lc = tid % CHUNKS;
    const bool vector_ok = (k % 8 == 0) && aligned16(a) && aligned16(b);
    const u32 tiles = (k + BK - 1) / BK;

    for (u32 m0 = blockIdx.y * BM; m0 < m; m0 += gridDim.y * BM) {
        for (u32 n0 = blockIdx.x * BN; n0 < n; n0 += gridDim.x * BN) {
            const bool a_ok = m0 + lr < m, b_ok = n0 + lr < n;
            const bf16* a_row = a + static_cast<size_t>(a_ok ? m0 + lr : 0) * k;
            const bf16* b_row = b + static_cast<size_t>(b_ok ? n0 + lr : 0) * k;

            float acc[TM][TN];
#pragma unroll
            for (u32 r = 0; r < TM; ++r)
#pragma unroll
                for (u32 q = 0; q < TN; ++q) acc[r][q] = 0.0f;

            uint4 a_next = make_uint4(0, 0, 0, 0), b_next = make_uint4(0, 0, 0, 0);
            if (tiles > 0) {
                a_next = load_chunk(a_row, a_ok, lc * 8, k, vector_ok);
                b_next = load_chunk(b_row, b_ok, lc * 8, k, vector_ok);
            }
            for (u32 tile = 0; tile < tiles; ++tile) {
                // The previous tile's reads are done (barrier at the end of the last iteration).
                store_chunk(a_tile, lr, lc, a_next);
                store_chunk(b_tile, lr, lc, b_next);
                __syncthreads();
                if (tile + 1 < tiles) {
                    const u32 p = (tile + 1) * BK + lc * 8;
                    a_next = load_chunk(a_row, a_ok, p, k, vector_ok);
                    b_next = load_chunk(b_row, b_ok, p, k, vector_ok);
                }
#pragma unroll 8
                for (u32 p = 0; p < BK; ++p) {
                    float av[TM], bv[TN];
#pragma unroll
                    for (u32 r = 0; r < TM; ++r) av[r] = a_tile[p][ty + 16 * r];
#pragma unroll
                    for (u32 q = 0; q < TN; ++q) bv[q] = b_tile[p][tx + 16 * q];
#pragma unroll
                    for (u32 r = 0; r < TM; ++r)
#pragma unroll
                        for (u32 q = 0; q < TN; ++q) acc[r][q] = acc[r][q] + av[r] * bv[q];
                }
                __syncthreads();
            }

#pragma unroll
            for (u32 r = 0; r < TM; ++r) {
                const u32 i = m0 + ty + 16 * r;
                if (i >= m) continue;
#pragma unroll
                for (u32 q = 0; q < TN; ++q) {
                    const u32 j = n0 + tx + 16 * q;
                    if (j < n) c[static_cast<size_t>(i) * n + j] = narrow(acc[r][q]);
                }
            }
        }
    }
}
