// A correct kernel: every block sums its slice of `x` (a shuffle warp sum, then the warp sums
// through shared memory after a barrier), and every thread records its indices and the launch
// shape. Any block shape whose thread count is a multiple of 32, up to 1024 threads.

extern "C" __global__ void block_sums(const float* x, float* sums, unsigned int* ids, unsigned int* dims,
                                      unsigned int n, unsigned int blocks) {
    __shared__ float warp_sums[32];
    const unsigned int threads = blockDim.x * blockDim.y * blockDim.z;
    const unsigned int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const unsigned int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    const unsigned int i = b * threads + t;
    float v = i < n ? x[i] : 0.0f;
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (t % 32 == 0) warp_sums[t / 32] = v;
    __syncthreads();
    if (t == 0 && b < blocks) {
        float total = 0.0f;
        for (unsigned int w = 0; w < threads / 32; ++w) total += warp_sums[w];
        sums[b] = total;
    }
    if (i < n) {
        unsigned int* own = ids + 6 * i;
        own[0] = threadIdx.x;
        own[1] = threadIdx.y;
        own[2] = threadIdx.z;
        own[3] = blockIdx.x;
        own[4] = blockIdx.y;
        own[5] = blockIdx.z;
    }
    if (i == 0) {
        dims[0] = blockDim.x;
        dims[1] = blockDim.y;
        dims[2] = blockDim.z;
        dims[3] = gridDim.x;
        dims[4] = gridDim.y;
        dims[5] = gridDim.z;
    }
}
