// Helpers every module of the library includes, as kernel libraries keep them in a header: the
// strided index of a dims-then-strides layout, and the conversions of the casts.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

__device__ inline size_t strided_index(size_t i, size_t num_dims, const size_t* dims, const size_t* strides) {
    size_t index = 0;
    for (size_t d = num_dims; d-- > 0;) {
        index += (i % dims[d]) * strides[d];
        i /= dims[d];
    }
    return index;
}

__device__ inline float to_float(float x) { return x; }
__device__ inline float to_float(__half x) { return __half2float(x); }
__device__ inline float to_float(__nv_fp8_e4m3 x) { return static_cast<float>(x); }

__device__ inline void store(float* out, float x) { *out = x; }
__device__ inline void store(__half* out, float x) { *out = __float2half(x); }
__device__ inline void store(__nv_fp8_e4m3* out, float x) { *out = __nv_fp8_e4m3(x); }

// A kernel in a header: each module that includes it has a copy, and none is its module.
extern "C" __global__ void zero_f32(float* x, const size_t n) {
    const size_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = 0.0f;
}
