// Unary kernels over a strided input, written once in a macro and instantiated per element type:
// `info` holds the dims, then the input's strides, so a transposed or broadcast input needs no
// copy. Grid-stride, so any grid covers `numel`; the output is contiguous.
#include "utils.cuh"

#define UNARY_OP(TYPENAME, FN_NAME, FUNC)                                                      \
    extern "C" __global__ void FN_NAME(const size_t numel, const size_t num_dims, const size_t* info, \
                                       const TYPENAME* inp, TYPENAME* out) {                   \
        const size_t* dims = info;                                                             \
        const size_t* strides = info + num_dims;                                               \
        for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; IN_BOUNDS(i, numel); i += blockDim.x * gridDim.x) { \
            const TYPENAME x = inp[strided_index(i, num_dims, dims, strides)];                 \
            out[i] = FUNC;                                                                     \
        }                                                                                      \
    }

#define UNARY_OPS(TYPENAME, SUFFIX)               \
    UNARY_OP(TYPENAME, uneg_##SUFFIX, -x)         \
    UNARY_OP(TYPENAME, uexp_##SUFFIX, expg(x))    \
    UNARY_OP(TYPENAME, urelu_##SUFFIX, relug(x))

UNARY_OPS(float, f32)
UNARY_OPS(double, f64)
UNARY_OPS(__half, f16)
UNARY_OPS(__nv_bfloat16, bf16)
