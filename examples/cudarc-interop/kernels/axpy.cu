// `axpy_f32`: y[i] += a * x[i] for i < n (kernels.toml, `axpy`). Grid-stride, so any grid covers n.

extern "C" __global__ void axpy_f32(const float* x, float* y, unsigned int n, float a) {
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] += a * x[i];
    }
}
