// RMSNorm per row, one block per row (rows from `gridDim.x`): y = x / sqrt(mean(x²) + eps) * w,
// the weight optional (a null `alpha` is no weight) and, for a Gemma-style checkpoint, stored as
// w - 1 (`unit_offset`). The sum of squares is in float for every type.
#include "utils.cuh"

#define RMSNORM_OP(TYPENAME, FN_NAME)                                                          \
    extern "C" __global__ void FN_NAME(const TYPENAME* x, TYPENAME* y, const TYPENAME* alpha,   \
                                       const size_t d, const float eps, const bool unit_offset) { \
        __shared__ float warp_sums[32];                                                        \
        const TYPENAME* row = x + blockIdx.x * d;                                              \
        TYPENAME* out = y + blockIdx.x * d;                                                    \
        float sum = 0.0f;                                                                      \
        for (size_t col = threadIdx.x; col < d; col += blockDim.x) {                           \
            const float value = to_float(row[col]);                                            \
            sum += value * value;                                                              \
        }                                                                                      \
        for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset); \
        if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;                          \
        BLOCK_SYNC();                                                                          \
        sum = threadIdx.x % 32 < blockDim.x / 32 ? warp_sums[threadIdx.x % 32] : 0.0f;         \
        for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset); \
        const float scale = rsqrtf(sum / d + eps);                                             \
        for (size_t col = threadIdx.x; col < d; col += blockDim.x) {                           \
            const float weight = alpha == nullptr ? 1.0f : to_float(alpha[col]) + (unit_offset ? 1.0f : 0.0f); \
            out[col] = from_float<TYPENAME>(to_float(row[col]) * scale * weight);              \
        }                                                                                      \
    }

RMSNORM_OP(float, rmsnorm_f32)
RMSNORM_OP(__half, rmsnorm_f16)
RMSNORM_OP(__nv_bfloat16, rmsnorm_bf16)
