// `scale_f32`: x[i] *= factor for i < n (kernels.toml, `scale`). Grid-stride, so any grid covers n.

extern "C" __global__ void scale_f32(float* x, unsigned int n, float factor) {
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        x[i] *= factor;
    }
}
