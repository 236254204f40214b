// Binary kernels: one macro that names the output type, one that does not and expands to the first.
// `dims_and_strides` holds the dims, the left input's strides, then the right input's.
#include "utils.cuh"

#define BINARY_OP_OUT(TYPENAME, OUT_TYPENAME, FN_NAME, FUNC) \
extern "C" __global__ void FN_NAME( \
    const size_t numel, \
    const size_t num_dims, \
    const size_t *dims_and_strides, \
    const TYPENAME *lhs, \
    const TYPENAME *rhs, \
    OUT_TYPENAME *out \
) { \
    const size_t *dims = dims_and_strides; \
    const size_t *lhs_strides = dims_and_strides + num_dims; \
    const size_t *rhs_strides = dims_and_strides + 2 * num_dims; \
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < numel; i += blockDim.x * gridDim.x) { \
        TYPENAME x = lhs[strided_index(i, num_dims, dims, lhs_strides)]; \
        TYPENAME y = rhs[strided_index(i, num_dims, dims, rhs_strides)]; \
        out[i] = FUNC; \
    } \
}

#define BINARY_OP(TYPENAME, FN_NAME, FUNC) BINARY_OP_OUT(TYPENAME, TYPENAME, FN_NAME, FUNC)

BINARY_OP(float, badd_f32, x + y)
BINARY_OP(double, bmul_f64, x * y)
BINARY_OP_OUT(float, uint8_t, blt_f32, x < y)
