// Unary kernels written once in a macro and instantiated per element type, over a strided input:
// `info` holds the dims, then the input's strides.
#include "utils.cuh"

#define UNARY_OP(TYPENAME, FN_NAME, FUNC) \
extern "C" __global__ void FN_NAME( \
    const size_t numel, \
    const size_t num_dims, \
    const size_t *info, \
    const TYPENAME *inp, \
    TYPENAME *out \
) { \
    const size_t *dims = info; \
    const size_t *strides = info + num_dims; \
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < numel; i += blockDim.x * gridDim.x) { \
        TYPENAME x = inp[strided_index(i, num_dims, dims, strides)]; \
        out[i] = FUNC; \
    } \
} \

UNARY_OP(float, uneg_f32, -x)
UNARY_OP(double, uneg_f64, -x)
UNARY_OP(float, usqr_f32, x * x)

#if __CUDA_ARCH__ >= 530
UNARY_OP(__half, ucopy_f16, x)
#endif
