// The tensor-core wrappers of kernels/kda_common.cuh (ldmatrix_x4, ldmatrix_x2, mma_bf16_16816,
// to_tf32, mma_tf32_1688) and the f32 products of kernels/mma_f32.cuh, run by one warp: used right,
// and used wrongly.
#include "../../kernels/kda_common.cuh"
#include "../../kernels/mma_f32.cuh"

// One 16×8 tile D = (C + A·B) + A·B, as a GEMM's inner step computes it: A [16][16] (m, k) and B
// given as [8][16] (a Linear weight's [n][k] rows, k contiguous) staged in shared memory, their fragments fetched
// with ldmatrix_x4 (A) and ldmatrix_x2 (B), then two accumulating mma_bf16_16816 on them. All
// row-major. Run with 32 threads.
extern "C" __global__ void mma_tile(const bf16* a, const bf16* b, const float* c, float* d) {
    __shared__ uint4 a_tile[32];  // 16 rows of 32 bytes
    __shared__ uint4 b_tile[16];  // 8 rows of 32 bytes
    bf16* a_s = reinterpret_cast<bf16*>(a_tile);
    bf16* b_s = reinterpret_cast<bf16*>(b_tile);
    const u32 l = threadIdx.x, g = l / 4, t = l % 4;
    for (u32 i = l; i < 256; i += 32) a_s[i] = a[i];
    for (u32 i = l; i < 128; i += 32) b_s[i] = b[i];
    __syncthreads();
    // Matrix i of A: rows 8(i%2).., columns 8(i/2)..; matrix j of B: its rows, k from 8j.
    u32 fa[4], fb[2];
    ldmatrix_x4(fa, a_s + (l % 16) * 16 + (l / 16) * 8);
    ldmatrix_x2(fb, b_s + (l % 8) * 16 + ((l / 8) % 2) * 8);
    float acc[4];
    for (u32 i = 0; i < 4; ++i) acc[i] = c[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2];
    mma_bf16_16816(acc, fa, fb);
    mma_bf16_16816(acc, fa, fb);
    for (u32 i = 0; i < 4; ++i) d[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = acc[i];
}

// Each lane's registers from an ldmatrix_x4 and an ldmatrix_x2 of 32 shared rows (`rows`, 4 words
// each), lane l giving row (5l + 3) % 32 to the first and row (3l + 7) % 32 to the second; lanes
// 16.. give the second a misaligned address, which it ignores. out[6l..6l+4] are the x4's
// registers, out[6l+4..6l+6] the x2's. Run with 32 threads.
extern "C" __global__ void ldmatrix_lanes(const u32* rows, u32* out) {
    __shared__ uint4 tile[32];
    u32* words = reinterpret_cast<u32*>(tile);
    const u32 l = threadIdx.x;
    for (u32 i = l; i < 128; i += 32) words[i] = rows[i];
    __syncthreads();
    u32 r4[4], r2[2];
    ldmatrix_x4(r4, &tile[(5 * l + 3) % 32]);
    ldmatrix_x2(r2, l < 16 ? static_cast<const void*>(&tile[(3 * l + 7) % 32]) : static_cast<const void*>(words + 1));
    for (u32 i = 0; i < 4; ++i) out[6 * l + i] = r4[i];
    for (u32 i = 0; i < 2; ++i) out[6 * l + 4 + i] = r2[i];
}

// Lane 5 skips the mma the other 31 wait in, and waits at a barrier instead. Run with 32 threads.
extern "C" __global__ void mma_lane_skips(float* out) {
    const u32 a[4] = {0x3f803f80u, 0x3f803f80u, 0x3f803f80u, 0x3f803f80u}, b[2] = {0x3f803f80u, 0x3f803f80u};
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (threadIdx.x != 5) mma_bf16_16816(d, a, b);
    __syncthreads();
    out[threadIdx.x] = d[0];
}

// An ldmatrix_x4 where lane 3's row address is wrong: 8 bytes into its shared row (mode 0), or a
// 16-byte-aligned local array outside shared memory (mode 1). Run with 32 threads.
extern "C" __global__ void ldmatrix_misaddressed(u32* out, u32 mode) {
    __shared__ uint4 tile[32];
    const u32 l = threadIdx.x;
    tile[l] = make_uint4(l, l, l, l);
    uint4 local = make_uint4(l, l, l, l);
    __syncthreads();
    const void* row = &tile[l];
    if (l == 3) row = mode == 0 ? static_cast<const void*>(reinterpret_cast<const char*>(&tile[l]) + 8)
                                : static_cast<const void*>(&local);
    u32 r[4];
    ldmatrix_x4(r, row);
    out[l] = r[0];
}

// One 16×8 tile D = C + A·B on tf32 tensor cores: A [16][8] and B [8][8] (k, n) row-major in
// global memory, each element rounded with to_tf32 into its fragment register, one
// mma_tf32_1688. `rounded` gets every lane's to_tf32 of its A elements, in A's positions. Run with
// 32 threads.
extern "C" __global__ void mma_tf32_tile(const float* a, const float* b, const float* c, float* d, u32* rounded) {
    const u32 l = threadIdx.x, g = l / 4, t = l % 4;
    u32 fa[4], fb[2];
    for (u32 e = 0; e < 4; ++e) {
        const u32 at = (g + 8 * (e & 1)) * 8 + t + 4 * (e >> 1);
        fa[e] = to_tf32(a[at]);
        rounded[at] = fa[e];
    }
    fb[0] = to_tf32(b[t * 8 + g]);
    fb[1] = to_tf32(b[(t + 4) * 8 + g]);
    float acc[4];
    for (u32 e = 0; e < 4; ++e) acc[e] = c[(g + 8 * (e >> 1)) * 8 + 2 * t + (e & 1)];
    mma_tf32_1688(acc, fa, fb);
    for (u32 e = 0; e < 4; ++e) d[(g + 8 * (e >> 1)) * 8 + 2 * t + (e & 1)] = acc[e];
}

// D = A·B for one 16×8×8 tile of f32 operands, two ways: `split` by mma_f32_1688 (kernels/
// mma_f32.cuh: three tf32 products each), `single` by one mma_tf32_1688 on the operands rounded to
// tf32. A [16][8] and B [8][8] (k, n) row-major. Run with 32 threads.
extern "C" __global__ void mma_f32_tile(const float* a, const float* b, float* split, float* single) {
    const u32 l = threadIdx.x, g = l / 4, t = l % 4;
    float fa[4];
    for (u32 e = 0; e < 4; ++e) fa[e] = a[(g + 8 * (e & 1)) * 8 + t + 4 * (e >> 1)];
    const float fb0 = b[t * 8 + g], fb1 = b[(t + 4) * 8 + g];
    float three[4] = {0.0f, 0.0f, 0.0f, 0.0f}, one[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    mma_f32_1688(three, SplitA(fa), SplitB(fb0, fb1));
    const u32 ra[4] = {to_tf32(fa[0]), to_tf32(fa[1]), to_tf32(fa[2]), to_tf32(fa[3])};
    const u32 rb[2] = {to_tf32(fb0), to_tf32(fb1)};
    mma_tf32_1688(one, ra, rb);
    for (u32 e = 0; e < 4; ++e) {
        const u32 at = (g + 8 * (e >> 1)) * 8 + 2 * t + (e & 1);
        split[at] = three[e];
        single[at] = one[e];
    }
}
