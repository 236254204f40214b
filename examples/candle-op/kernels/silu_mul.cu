// `silu_mul_{T}`: out[i] = silu(gate[i]) * up[i] for i < n (kernels.toml, `silu_mul`), computed in
// f32 and rounded once. Grid-stride, so any grid covers n.
#include "element.cuh"

template <typename T>
__device__ void silu_mul(const T* gate, const T* up, T* out, unsigned int n) {
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float g = load_f32(gate[i]);
        out[i] = store_f32<T>(g / (1.0f + expf(-g)) * load_f32(up[i]));
    }
}

extern "C" __global__ void silu_mul_f32(const float* gate, const float* up, float* out, unsigned int n) {
    silu_mul(gate, up, out, n);
}

extern "C" __global__ void silu_mul_bf16(const __nv_bfloat16* gate, const __nv_bfloat16* up, __nv_bfloat16* out,
                                         unsigned int n) {
    silu_mul(gate, up, out, n);
}
