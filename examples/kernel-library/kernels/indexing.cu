// Indexing by ids the kernel trusts, as libraries do: a gather of rows (`index_select`) per id
// type, and a scatter-add of rows with atomics, where ids may repeat. Neither checks an id
// against the rows it indexes: the caller guarantees it (the manifest's `safety`).
#include "utils.cuh"

// out[i, :] = src[ids[i], :] for the `n` ids, rows of `d` elements.
#define INDEX_SELECT_OP(INDEX_TYPENAME, FN_NAME)                                               \
    extern "C" __global__ void FN_NAME(const INDEX_TYPENAME* ids, const float* src, float* out, \
                                       const size_t n, const size_t d) {                        \
        for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n * d; i += blockDim.x * gridDim.x) { \
            out[i] = src[static_cast<size_t>(ids[i / d]) * d + i % d];                          \
        }                                                                                      \
    }

INDEX_SELECT_OP(uint32_t, index_select_u32)
INDEX_SELECT_OP(int32_t, index_select_i32)
INDEX_SELECT_OP(int64_t, index_select_i64)

// dst[ids[i], :] += src[i, :] for the `n` ids: a row named by several ids gets each addition,
// atomically, in whatever order the threads reach it.
#define SCATTER_ADD_OP(TYPENAME, FN_NAME)                                                      \
    extern "C" __global__ void FN_NAME(const uint32_t* ids, const TYPENAME* src, TYPENAME* dst, \
                                       const size_t n, const size_t d) {                        \
        for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n * d; i += blockDim.x * gridDim.x) { \
            ATOMIC_ADD(dst + static_cast<size_t>(ids[i / d]) * d + i % d, src[i]);             \
        }                                                                                      \
    }

SCATTER_ADD_OP(float, scatter_add_f32)
// atomicAdd on __nv_bfloat16 exists from sm_80: the kernel is compiled for those devices only.
#if __CUDA_ARCH__ >= 800
SCATTER_ADD_OP(__nv_bfloat16, scatter_add_bf16)
#endif
