// Kernels written as C++ templates, as libraries instantiate them for each element type and block
// size rather than through macros: no `extern "C"`, the build instantiates each variant the
// manifest lists and finds it under its mangled name.
#include "utils.cuh"

// y[i] = x[i] · scale + shift in float, rounded once to T; each thread handles PER_THREAD
// consecutive elements, as a library unrolls its vector width.
template <typename T, int PER_THREAD>
__global__ void affine(const T* x, T* y, const float scale, const float shift, const size_t n) {
    const size_t first = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) * PER_THREAD;
#pragma unroll
    for (int k = 0; k < PER_THREAD; ++k) {
        const size_t i = first + k;
        if (IN_BOUNDS(i, n)) y[i] = from_float<T>(to_float(x[i]) * scale + shift);
    }
}

// out[row] = the largest of the `d` elements of each of the `gridDim.x` rows, by the classic tree
// over a `__shared__` array of one float a thread, its size the template's block size.
template <int BLOCK>
__global__ void max_rows(const float* x, float* out, const size_t d) {
    __shared__ float partial[BLOCK];
    const float* row = x + blockIdx.x * d;
    float best = -INFINITY;
    for (size_t col = threadIdx.x; col < d; col += BLOCK) best = fmaxf(best, row[col]);
    partial[threadIdx.x] = best;
    __syncthreads();
    for (int half = BLOCK / 2; half > 0; half /= 2) {
        if (static_cast<int>(threadIdx.x) < half)
            partial[threadIdx.x] = fmaxf(partial[threadIdx.x], partial[threadIdx.x + half]);
        BLOCK_SYNC();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}
