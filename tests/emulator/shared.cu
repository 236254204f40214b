// Static shared memory: what it holds before a block writes it, and how much of it an entry has.

// Copies a shared array no thread wrote: its bits, whatever the emulator filled it with.
extern "C" __global__ void shared_unwritten(unsigned int* out, unsigned int n) {
    __shared__ float tile[64];
    const unsigned int t = threadIdx.x;
    if (t < n && t < 64) out[t] = __float_as_uint(tile[t]);
}

// Run with 2 blocks of 32 threads: block 0 writes the tile, then reads it into out[0..32]; block
// 1 reads it without writing into out[32..64]. Thread 0 of each block appends blockIdx.x to
// order[1..], order[0] counting.
extern "C" __global__ void shared_per_block(unsigned int* out, unsigned int* order) {
    __shared__ float tile[32];
    const unsigned int t = threadIdx.x;
    if (blockIdx.x == 0) {
        tile[t] = 1.0f + static_cast<float>(t);
        __syncthreads();
        out[t] = __float_as_uint(tile[31 - t]);
    } else {
        out[32 + t] = __float_as_uint(tile[t]);
    }
    if (t == 0) {
        const unsigned int position = order[0];
        if (position < 2) order[1 + position] = blockIdx.x;
        order[0] = position + 1;
    }
}

// 64 floats of shared memory: 256 bytes. Any block shape.
extern "C" __global__ void small_shared(float* out, unsigned int n) {
    __shared__ float tile[64];
    const unsigned int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    if (t < 64) tile[t] = static_cast<float>(t);
    __syncthreads();
    if (t < n && t < 64) out[t] = tile[63 - t];
}

// 49 KiB of shared memory: 1 KiB over what a block may have statically.
extern "C" __global__ void big_shared(float* out, unsigned int n) {
    __shared__ float big[49 * 256];
    const unsigned int t = threadIdx.x;
    for (unsigned int i = t; i < 49 * 256; i += blockDim.x) big[i] = static_cast<float>(i);
    __syncthreads();
    if (t < n) out[t] = big[49 * 256 - 1 - t];
}
