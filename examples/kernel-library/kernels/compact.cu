// Stream compaction with warp votes, as libraries write it without CUB: each warp votes on which
// of its 32 elements to keep, its first lane reserves that many slots of the output with one
// atomic, and each kept element goes to the slot its lane's rank among the voters gives. Within a
// warp's 32 the order is kept; the warps' runs land in whatever order they reserve.
#include "utils.cuh"

// out[0 .. *count) = the positive elements of x[0 .. n), `*count` added to (zero it first).
extern "C" __global__ void compact_positive_f32(const float* x, float* out, unsigned int* count, const size_t n) {
    const unsigned int lane = threadIdx.x % 32;
    const size_t stride = static_cast<size_t>(blockDim.x) * gridDim.x;
    // The loop is the warp's, not the lane's: every lane votes in every round.
    for (size_t warp_base = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x - lane; warp_base < n;
         warp_base += stride) {
        const size_t i = warp_base + lane;
        const bool keep = IN_BOUNDS(i, n) && x[i] > 0.0f;
        const unsigned int votes = __ballot_sync(0xffffffffu, keep);
        unsigned int first = 0;
        if (lane == 0) first = atomicAdd(count, static_cast<unsigned int>(__popc(votes)));
        first = __shfl_sync(0xffffffffu, first, 0);
        if (keep) out[first + __popc(votes & ((1u << lane) - 1u))] = x[i];
    }
}
