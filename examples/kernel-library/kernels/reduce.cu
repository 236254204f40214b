// Row reductions: one block per row, the rows counted by the grid (`gridDim.x` rows of `d`
// elements). Each warp reduces with shuffles, then the warps' partials meet in the launch's
// dynamic shared memory (one float per warp), as libraries size it at launch.
#include "utils.cuh"

extern __shared__ float warp_partials[];

// `a + b`, or the larger of the two where `take_max`.
__device__ __forceinline__ float combine(float a, float b, bool take_max) { return take_max ? fmaxf(a, b) : a + b; }

__device__ __forceinline__ float warp_reduce(float value, bool take_max) {
    for (int offset = 16; offset > 0; offset /= 2) {
        value = combine(value, __shfl_xor_sync(0xffffffffu, value, offset), take_max);
    }
    return value;
}

// The block's sum (or max) of `value`, returned to every thread. The last barrier keeps a second
// reduction of the same block from overwriting partials some warp still reads.
__device__ __forceinline__ float block_reduce(float value, bool take_max) {
    const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    value = warp_reduce(value, take_max);
    if (lane == 0) warp_partials[warp] = value;
    BLOCK_SYNC();
    value = warp_reduce(lane < warps ? warp_partials[lane] : (take_max ? -INFINITY : 0.0f), take_max);
    __syncthreads();
    return value;
}

// out[row] = sum of x[row * d .. row * d + d).
extern "C" __global__ void sum_rows_f32(const float* x, float* out, const size_t d) {
    const float* row = x + blockIdx.x * d;
    float sum = 0.0f;
    for (size_t col = threadIdx.x; col < d; col += blockDim.x) sum += row[col];
    sum = block_reduce(sum, false);
    if (threadIdx.x == 0) out[blockIdx.x] = sum;
}

// y = softmax of each row of x: exp(x - max) / sum of exp(x - max), the max subtracted so that no
// exp overflows.
extern "C" __global__ void softmax_f32(const float* x, float* y, const size_t d) {
    const float* row = x + blockIdx.x * d;
    float* out = y + blockIdx.x * d;
    float max = -INFINITY;
    for (size_t col = threadIdx.x; col < d; col += blockDim.x) max = fmaxf(max, row[col]);
    max = block_reduce(max, true);
    float sum = 0.0f;
    for (size_t col = threadIdx.x; col < d; col += blockDim.x) {
        const float e = expf(row[col] - max);
        out[col] = e;
        sum += e;
    }
    const float scale = 1.0f / block_reduce(sum, false);
    for (size_t col = threadIdx.x; col < d; col += blockDim.x) out[col] *= scale;
}
