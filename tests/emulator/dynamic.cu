// Dynamic shared memory through kernels/kda_common.cuh's dynamic_shared: its size, its alignment,
// what a block sees of it before writing it, and that every block has all of it.
#include "../../kernels/kda_common.cuh"

// Run with 32 threads a block, any number of blocks up to 4, and at least 256 bytes of dynamic
// shared memory. Block b, thread t: out[b][t] gets word t of the memory as the block finds it,
// then every thread writes its word and thread 0 the memory's last word, and out[b][32 + t] gets
// word 31 - t back. Thread 0 writes info[b] = {dynamic_shared_bytes(), the memory's address
// modulo 128, its last word as read back}.
extern "C" __global__ void dynamic_words(u32* out, u32* info) {
    u32* words = reinterpret_cast<u32*>(dynamic_shared());
    const u32 t = threadIdx.x, b = blockIdx.x, last = dynamic_shared_bytes() / 4 - 1;
    out[64 * b + t] = words[t];
    __syncthreads();
    words[t] = 1000 * (b + 1) + t;
    if (t == 0) words[last] = 7 + b;
    __syncthreads();
    out[64 * b + 32 + t] = words[31 - t];
    if (t == 0) {
        info[3 * b] = dynamic_shared_bytes();
        info[3 * b + 1] = static_cast<u32>(reinterpret_cast<uintptr_t>(words) % 128);
        info[3 * b + 2] = words[last];
    }
}
