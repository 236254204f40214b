// The f32 products of kernels/mma_f32.cuh on the emulator, against one tf32 product: the fixture
// of tests/mma_f32.rs.
#include "../../kernels/kda_common.cuh"
#include "../../kernels/mma_f32.cuh"

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
