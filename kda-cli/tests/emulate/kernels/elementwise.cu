// Elementwise kernels: one correct, one that reads one element past its input for an odd n.

extern "C" __global__ void scale_f32(const float* x, float* y, float a, unsigned int n) {
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}

extern "C" __global__ void pair_sum_f32(const float* x, float* y, unsigned int n) {
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (n + 1) / 2) y[i] = x[2 * i] + x[2 * i + 1];
}
