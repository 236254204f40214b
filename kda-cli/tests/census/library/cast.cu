// Casts between f32, f16 and fp8 (E4M3), one macro per pair; a fill that takes its fp8 value by
// copy; a cast left with C++ linkage.
#include "utils.cuh"

#define CAST_OP(SRC_TYPENAME, DST_TYPENAME, FN_NAME) \
extern "C" __global__ void FN_NAME(const SRC_TYPENAME *inp, DST_TYPENAME *out, const size_t numel) { \
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < numel; i += blockDim.x * gridDim.x) { \
        store(out + i, to_float(inp[i])); \
    } \
}

CAST_OP(float, __half, cast_f32_f16)
CAST_OP(__half, float, cast_f16_f32)
CAST_OP(float, __nv_fp8_e4m3, cast_f32_f8_e4m3)
CAST_OP(__nv_fp8_e4m3, float, cast_f8_e4m3_f32)

extern "C" __global__ void fill_f8_e4m3(__nv_fp8_e4m3 *buf, __nv_fp8_e4m3 value, const size_t numel) {
    const size_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < numel) buf[i] = value;
}

__global__ void cast_f32_f64(const float *inp, double *out, const size_t numel) {
    const size_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < numel) out[i] = inp[i];
}
