// Does not compile against the emulator's shim, which declares no atomics.
extern "C" __global__ void count_atomically(unsigned int* counter) { atomicAdd(counter, 1u); }
