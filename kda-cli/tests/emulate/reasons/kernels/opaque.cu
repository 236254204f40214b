// Kernels `kda emulate` draws no launch for: two without a contract, two whose contract no
// device keeps.

extern "C" __global__ void opaque_table_a(const float* table, float* y) { y[threadIdx.x] = table[threadIdx.x]; }

extern "C" __global__ void opaque_table_b(const float* table, float* y) { y[threadIdx.x] = table[threadIdx.x]; }

extern "C" __global__ void wide_block_f32(float* y, unsigned int n) {
    if (threadIdx.x < n) y[threadIdx.x] = 0.0f;
}

extern "C" __global__ void wide_block_stated_f32(float* y, unsigned int n) {
    if (threadIdx.x < n) y[threadIdx.x] = 0.0f;
}
