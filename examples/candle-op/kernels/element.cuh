// The element types of the kernels' variants, read and written through f32.
#pragma once
#include <cuda_bf16.h>

__device__ inline float load_f32(float x) { return x; }
__device__ inline float load_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> __device__ T store_f32(float x);
template <> __device__ inline float store_f32<float>(float x) { return x; }
template <> __device__ inline __nv_bfloat16 store_f32<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
