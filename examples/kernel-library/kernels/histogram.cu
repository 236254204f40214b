// A histogram privatized per block, as libraries write it: each block counts into its own bins in
// the launch's dynamic shared memory with shared-memory atomics, then adds them to the global
// bins with one atomic a bin. Values at or past `bins` are not counted.
#include "utils.cuh"

// hist[b] += the number of values equal to b, for each of the `bins` bins.
extern "C" __global__ void histogram_u32(const unsigned int* values, unsigned int* hist, const size_t n,
                                         const unsigned int bins) {
    extern __shared__ unsigned int block_bins[];
    for (unsigned int b = threadIdx.x; b < bins; b += blockDim.x) block_bins[b] = 0;
    BLOCK_SYNC();
    const size_t stride = static_cast<size_t>(blockDim.x) * gridDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        const unsigned int value = values[i];
        if (value < bins) atomicAdd(&block_bins[value], 1u);
    }
    __syncthreads();
    for (unsigned int b = threadIdx.x; b < bins; b += blockDim.x) atomicAdd(&hist[b], block_bins[b]);
}
