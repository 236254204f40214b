// Kernels that use barriers and warp shuffles wrongly: each must be a launch error, not a hang.

// Threads 8.. return before the barrier the others wait at.
extern "C" __global__ void barrier_skipped(unsigned int* out) {
    if (threadIdx.x >= 8) return;
    __syncthreads();
    out[threadIdx.x] = 1;
}

// Lanes 16.. return; the others shuffle with a mask that names them.
extern "C" __global__ void shuffle_lanes_gone(float* out) {
    if (threadIdx.x >= 16) return;
    const float v = __shfl_xor_sync(0xffffffffu, static_cast<float>(threadIdx.x), 1);
    out[threadIdx.x] = v;
}

// Run with 48 threads: the second warp has 16 lanes, and a full mask names 16 it does not have.
extern "C" __global__ void shuffle_past_warp(float* out) {
    const float v = __shfl_xor_sync(0xffffffffu, static_cast<float>(threadIdx.x), 1);
    out[threadIdx.x] = v;
}

// Run with 64 threads: lanes 0..16 of warp 0 shuffle with lanes 16..32, which wait at the barrier
// with warp 1 instead; nobody can go on.
extern "C" __global__ void shuffle_deadlock(float* out) {
    float v = static_cast<float>(threadIdx.x);
    if (threadIdx.x < 16) {
        v = __shfl_xor_sync(0xffffffffu, v, 16);
    } else {
        __syncthreads();
    }
    out[threadIdx.x] = v;
}
