// Casts, one macro per direction: into f32 from the narrow types (exact: every value of each is a
// float), and out of f32 into f16 and the saturating unsigned integers (rounded to nearest even).
#include "utils.cuh"

#define CAST_OP(SRC_TYPENAME, DST_TYPENAME, FN_NAME, CONVERT)                                   \
    extern "C" __global__ void FN_NAME(const SRC_TYPENAME* inp, DST_TYPENAME* out, const size_t numel) { \
        for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < numel; i += blockDim.x * gridDim.x) { \
            out[i] = CONVERT(inp[i]);                                                          \
        }                                                                                      \
    }

CAST_OP(__nv_bfloat16, float, cast_bf16_f32, to_float)
CAST_OP(__nv_fp8_e4m3, float, cast_fp8e4m3_f32, to_float)
CAST_OP(__nv_fp8_e5m2, float, cast_fp8e5m2_f32, to_float)
CAST_OP(int8_t, float, cast_i8_f32, to_float)
CAST_OP(int16_t, float, cast_i16_f32, to_float)

CAST_OP(float, __half, cast_f32_f16, from_float<__half>)
CAST_OP(float, uint8_t, cast_f32_u8, from_float<uint8_t>)
CAST_OP(float, uint16_t, cast_f32_u16, from_float<uint16_t>)
