// Binary kernels over two strided inputs: `dims_and_strides` holds the dims, the left input's
// strides, then the right input's, so either side may be transposed or broadcast.
#include "utils.cuh"

#define BINARY_OP(TYPENAME, FN_NAME, FUNC)                                                     \
    extern "C" __global__ void FN_NAME(const size_t numel, const size_t num_dims,               \
                                       const size_t* dims_and_strides, const TYPENAME* lhs,     \
                                       const TYPENAME* rhs, TYPENAME* out) {                    \
        const size_t* dims = dims_and_strides;                                                 \
        const size_t* lhs_strides = dims_and_strides + num_dims;                               \
        const size_t* rhs_strides = dims_and_strides + 2 * num_dims;                           \
        for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < numel; i += blockDim.x * gridDim.x) { \
            const TYPENAME x = lhs[strided_index(i, num_dims, dims, lhs_strides)];             \
            const TYPENAME y = rhs[strided_index(i, num_dims, dims, rhs_strides)];             \
            out[i] = FUNC;                                                                     \
        }                                                                                      \
    }

BINARY_OP(float, badd_f32, x + y)
BINARY_OP(double, badd_f64, x + y)
BINARY_OP(__nv_bfloat16, badd_bf16, x + y)
BINARY_OP(int64_t, badd_i64, x + y)
