// Rotary embedding, the non-interleaved form: each of `bh` rows of `td` elements holds `td / d`
// positions of `d` features, and feature i of the first half turns with feature i + d/2 by the
// angle whose cos and sin are at (position, i) of the `td / 2`-element tables. One thread a pair.
#include "utils.cuh"

#define ROPE_OP(TYPENAME, FN_NAME)                                                             \
    extern "C" __global__ void FN_NAME(const TYPENAME* src, const TYPENAME* cos, const TYPENAME* sin, \
                                       TYPENAME* dst, const uint32_t bh, const uint32_t td,     \
                                       const uint32_t d) {                                      \
        const uint32_t idx = blockIdx.x * blockDim.x + threadIdx.x;                            \
        if (2 * idx >= bh * td) return;                                                        \
        const uint32_t i_bh = idx / (td / 2), i_td = idx - (td / 2) * i_bh;                    \
        const uint32_t i_t = i_td / (d / 2), i_d = i_td - (d / 2) * i_t;                       \
        const uint32_t i1 = i_bh * td + i_t * d + i_d, i2 = i1 + d / 2, i_cs = i_t * (d / 2) + i_d; \
        const float c = to_float(cos[i_cs]), s = to_float(sin[i_cs]);                          \
        const float x1 = to_float(src[i1]), x2 = to_float(src[i2]);                            \
        dst[i1] = from_float<TYPENAME>(x1 * c - x2 * s);                                       \
        dst[i2] = from_float<TYPENAME>(x1 * s + x2 * c);                                       \
    }

ROPE_OP(float, rope_f32)
ROPE_OP(__nv_bfloat16, rope_bf16)
