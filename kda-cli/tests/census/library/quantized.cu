// Quantized blocks behind `const void*`, which the kernel decodes itself, into f32 and half; and
// one that takes its parameters as a struct.
#include "utils.cuh"

#define QK8_0 32
typedef struct {
    half d;
    int8_t qs[QK8_0];
} block_q8_0;
typedef float dfloat;

struct DequantizeParams {
    int k;
    float scale;
};

extern "C" __global__ void dequantize_q8_0_f32(const void *vx, dfloat *y, const int k) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= k) return;
    const block_q8_0 *x = static_cast<const block_q8_0 *>(vx);
    y[i] = __half2float(x[i / QK8_0].d) * x[i / QK8_0].qs[i % QK8_0];
}

extern "C" __global__ void dequantize_q8_0_f16(const void *vx, half *y, const int k) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= k) return;
    const block_q8_0 *x = static_cast<const block_q8_0 *>(vx);
    y[i] = __float2half(__half2float(x[i / QK8_0].d) * x[i / QK8_0].qs[i % QK8_0]);
}

extern "C" __global__ void dequantize_q8_0_scaled(const void *vx, float *y, const DequantizeParams params) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= params.k) return;
    const block_q8_0 *x = static_cast<const block_q8_0 *>(vx);
    y[i] = params.scale * __half2float(x[i / QK8_0].d) * x[i / QK8_0].qs[i % QK8_0];
}
