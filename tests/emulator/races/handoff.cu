// Hand-offs through shared memory that CUDA orders (mode 1) or does not (mode 0). Under
// ThreadSanitizer the emulator must report every unordered one and no ordered one: a __syncwarp
// orders only its own warp's lanes, and a shuffle exchanges a value without ordering memory.

// Run with 64 threads: warp 0 writes a word a lane, warp 1 reads them.
extern "C" __global__ void handoff_across_warps(unsigned int* out, unsigned int mode) {
    __shared__ unsigned int words[32];
    const unsigned int lane = threadIdx.x % 32;
    if (threadIdx.x < 32) words[lane] = lane + 1;
    if (mode == 1)
        __syncthreads();
    else
        __syncwarp();
    if (threadIdx.x >= 32) out[lane] = words[lane];
}

// Run with 32 threads: each lane writes its word and reads its neighbour's.
extern "C" __global__ void handoff_within_a_warp(unsigned int* out, unsigned int mode) {
    __shared__ unsigned int words[32];
    const unsigned int lane = threadIdx.x;
    words[lane] = lane + 1;
    if (mode == 1)
        __syncwarp();
    else
        (void)__shfl_xor_sync(0xffffffffu, lane, 1);
    out[lane] = words[(lane + 1) % 32];
}
