// Kernels no manifest entry states: plain `char` text, and rows behind a pointer to pointers.
#include "utils.cuh"

extern "C" __global__ void count_newlines(const char *text, unsigned int *count, const size_t n) {
    const size_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && text[i] == '\n') atomicAdd(count, 1u);
}

extern "C" __global__ void gather_rows(const float *const *rows, float *out, const size_t row_len, const size_t n_rows) {
    const size_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < row_len * n_rows) out[i] = rows[i / row_len][i % row_len];
}
