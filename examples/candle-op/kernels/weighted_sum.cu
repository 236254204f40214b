// `weighted_sum_{T}`: out[i] = a*x[i] + b*y[i] + c*z[i] + w[i] for i < n (kernels.toml,
// `weighted_sum`), computed in f32 and rounded once. Grid-stride, so any grid covers n.
#include "element.cuh"

template <typename T>
__device__ void weighted_sum(const T* x, const T* y, const T* z, const T* w, T* out, unsigned int n, float a,
                             float b, float c) {
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float sum = a * load_f32(x[i]) + b * load_f32(y[i]) + c * load_f32(z[i]) + load_f32(w[i]);
        out[i] = store_f32<T>(sum);
    }
}

extern "C" __global__ void weighted_sum_f32(const float* x, const float* y, const float* z, const float* w,
                                            float* out, unsigned int n, float a, float b, float c) {
    weighted_sum(x, y, z, w, out, n, a, b, c);
}

extern "C" __global__ void weighted_sum_bf16(const __nv_bfloat16* x, const __nv_bfloat16* y,
                                             const __nv_bfloat16* z, const __nv_bfloat16* w, __nv_bfloat16* out,
                                             unsigned int n, float a, float b, float c) {
    weighted_sum(x, y, z, w, out, n, a, b, c);
}
