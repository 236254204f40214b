// Dequantization of q8_0 blocks behind `const void*`, which the kernel decodes itself: each block
// is an f16 scale then 32 int8 values (34 bytes), and y[i] = scale * q[i] for its block's values.
#include "utils.cuh"

#define QK8_0 32
typedef struct {
    __half d;
    int8_t qs[QK8_0];
} block_q8_0;
static_assert(sizeof(block_q8_0) == 34, "the manifest's extent counts 34 bytes a block");

#define DEQUANTIZE_Q8_0_OP(TYPENAME, FN_NAME)                                                  \
    extern "C" __global__ void FN_NAME(const void* vx, TYPENAME* y, const size_t k) {          \
        const block_q8_0* x = static_cast<const block_q8_0*>(vx);                              \
        for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < k; i += blockDim.x * gridDim.x) { \
            const block_q8_0& block = x[i / QK8_0];                                            \
            y[i] = from_float<TYPENAME>(__half2float(block.d) * block.qs[i % QK8_0]);          \
        }                                                                                      \
    }

DEQUANTIZE_Q8_0_OP(float, dequantize_q8_0_f32)
DEQUANTIZE_Q8_0_OP(__half, dequantize_q8_0_f16)
