// Helpers every module of the library shares, as public kernel libraries keep them in one header:
// the offset of a flat index in a dims-then-strides layout, and each element type's trip through
// float, overloaded so that one macro body serves every type.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

// The bugs the library's planted build compiles in (tests/planted.rs builds the same sources for
// the emulator with tests/planted/ among its include directories, whose header defines
// KDA_FIXTURE_PLANT): a loop bound that lets one index past, a barrier left out, an atomic add
// written as a plain one. Every other build, nvcc's included, compiles what the library means.
#if __has_include(<kda_fixture_plant.h>)
#include <kda_fixture_plant.h>
#endif
#ifdef KDA_FIXTURE_PLANT
#define IN_BOUNDS(i, n) ((i) <= (n))
#define BLOCK_SYNC() ((void)0)
#define ATOMIC_ADD(address, value) (*(address) += (value))
#else
#define IN_BOUNDS(i, n) ((i) < (n))
#define BLOCK_SYNC() __syncthreads()
#define ATOMIC_ADD(address, value) atomicAdd(address, value)
#endif

// The offset of the `i`th element, in row-major order of `dims`, in a layout of `strides`. Every
// axis, the outermost included, is taken modulo its dim, so no index reaches past the layout.
__device__ __forceinline__ size_t strided_index(size_t i, size_t num_dims, const size_t* dims, const size_t* strides) {
    size_t offset = 0;
    for (size_t axis = num_dims; axis-- > 0;) {
        offset += (i % dims[axis]) * strides[axis];
        i /= dims[axis];
    }
    return offset;
}

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__nv_fp8_e4m3 x) { return static_cast<float>(x); }
__device__ __forceinline__ float to_float(__nv_fp8_e5m2 x) { return static_cast<float>(x); }
__device__ __forceinline__ float to_float(int8_t x) { return static_cast<float>(x); }
__device__ __forceinline__ float to_float(int16_t x) { return static_cast<float>(x); }

// `from_float<T>(x)`: x rounded to nearest even in T; integers saturate (NaN gives 0), as a
// library's saturating cast does.
template <class T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __forceinline__ uint8_t from_float<uint8_t>(float x) {
    // fmaxf(NaN, 0) is 0: a NaN saturates to 0, as it does on the device's cvt.sat.
    return static_cast<uint8_t>(rintf(fminf(fmaxf(x, 0.0f), 255.0f)));
}
template <>
__device__ __forceinline__ uint16_t from_float<uint16_t>(float x) {
    return static_cast<uint16_t>(rintf(fminf(fmaxf(x, 0.0f), 65535.0f)));
}

// The element-wise functions of the unary kernels, per type: f64 in double, the 16-bit floats
// through float (as libraries do where the type has no intrinsic of its own).
__device__ __forceinline__ float expg(float x) { return expf(x); }
__device__ __forceinline__ double expg(double x) { return exp(x); }
__device__ __forceinline__ __half expg(__half x) { return __float2half(expf(__half2float(x))); }
__device__ __forceinline__ __nv_bfloat16 expg(__nv_bfloat16 x) { return __float2bfloat16_rn(expf(__bfloat162float(x))); }

__device__ __forceinline__ float relug(float x) { return fmaxf(x, 0.0f); }
__device__ __forceinline__ double relug(double x) { return fmax(x, 0.0); }
__device__ __forceinline__ __half relug(__half x) { return __half2float(x) > 0.0f ? x : __float2half(0.0f); }
__device__ __forceinline__ __nv_bfloat16 relug(__nv_bfloat16 x) {
    return __bfloat162float(x) > 0.0f ? x : __float2bfloat16_rn(0.0f);
}
