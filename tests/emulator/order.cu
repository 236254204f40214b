// Records the order the blocks ran in: each block appends its blockIdx.x to `log[1..]`, with
// `log[0]` as the count. Racy on a GPU; exact in the emulator, which runs one block at a time.

extern "C" __global__ void record_order(unsigned int* log, unsigned int blocks) {
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned int position = log[0];
        if (position < blocks) log[1 + position] = blockIdx.x;
        log[0] = position + 1;
    }
}
