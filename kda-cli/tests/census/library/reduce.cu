// A sum over a contiguous input, a scale inside an `extern "C"` block, and a template kernel with
// its explicit instantiation: exported under a mangled name.
#include "utils.cuh"

extern "C" __global__ void sum_f32(const float *inp, float *out, const size_t numel) {
    float partial = 0.0f;
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < numel; i += blockDim.x * gridDim.x) {
        partial += inp[i];
    }
    atomicAdd(out, partial);
}

extern "C" {
__global__ void scale_f32(float *x, float factor, unsigned int n) {
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= factor;
}
}

template <typename T>
__global__ void max_each(const T *inp, T *out, size_t numel) {
    const size_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < numel) out[i] = inp[i] > out[i] ? inp[i] : out[i];
}

template __global__ void max_each<float>(const float *, float *, size_t);
