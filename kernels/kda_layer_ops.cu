// kda_layer_ops: the small kernels around the KDA core (docs/kernels.md): the sigmoid-gated output
// norm and the fill.
//
// Geometry (src/launch.rs): `kda_o_norm_gated_bf16` runs `launch::norm(rows)`: one warp per row,
// grid-strided over the warps of the grid, any block of whole warps (≤ 1024 threads). The fill
// runs `launch::elementwise(n)` and grid-strides, so any 1-D geometry covers it.
#include "kda_common.cuh"

// x [rows, d] f32, gate [rows, d] bf16, weight [d] bf16 -> out [rows, d] bf16:
// r = 1/sqrt(mean(x²) + eps) per row (one head), out = bf16(((x·r)·w)·σ(gate)).
// Where d is a multiple of 4 and every pointer aligned to 4 of its elements, a lane takes 4
// consecutive channels at a time (16-byte loads of x, 8-byte loads of gate and weight, 8-byte
// stores), element by element otherwise. The Σx² order: each lane over its channels ascending,
// then a warp butterfly (the ABI leaves it free; tolerance ≤ 1 bf16 ulp). The second pass reads
// the row's x again, from L1.
extern "C" __global__ void kda_o_norm_gated_bf16(const float* __restrict__ x, const bf16* __restrict__ gate,
                                                 const bf16* __restrict__ weight, bf16* __restrict__ out,
                                                 u32 rows, u32 d, float eps) {
    if ((blockDim.x & 31u) != 0 || d == 0) return;
    const u32 lane = threadIdx.x & 31;
    const bool by_four = d % 4 == 0 && aligned16(x) && aligned_to(gate, 8) && aligned_to(weight, 8) &&
                         aligned_to(out, 8);
    for (size_t row = warp_index(); row < rows; row += warp_count()) {
        const size_t base = row * d;
        const float* xr = x + base;
        float sum = 0.0f;
        if (by_four) {
            for (u32 i = 4 * lane; i < d; i += 4 * 32) {
                const float4 v = *reinterpret_cast<const float4*>(xr + i);
                sum = sum + v.x * v.x;
                sum = sum + v.y * v.y;
                sum = sum + v.z * v.z;
                sum = sum + v.w * v.w;
            }
        } else {
            for (u32 i = lane; i < d; i += 32) sum = sum + xr[i] * xr[i];
        }
        const float r = 1.0f / sqrtf(warp_sum(sum) / static_cast<float>(d) + eps);
        const auto normed = [&](float xi, float wi, float gi) { return xi * r * wi * sigmoidf_acc(gi); };
        if (by_four) {
            for (u32 i = 4 * lane; i < d; i += 4 * 32) {
                const float4 v = *reinterpret_cast<const float4*>(xr + i);
                const uint2 w = *reinterpret_cast<const uint2*>(weight + i);
                const uint2 g = *reinterpret_cast<const uint2*>(gate + base + i);
                const float o0 = normed(v.x, bf16_lo(w.x), bf16_lo(g.x)), o1 = normed(v.y, bf16_hi(w.x), bf16_hi(g.x));
                const float o2 = normed(v.z, bf16_lo(w.y), bf16_lo(g.y)), o3 = normed(v.w, bf16_hi(w.y), bf16_hi(g.y));
                *reinterpret_cast<uint2*>(out + base + i) = make_uint2(pack_bf16(o0, o1), pack_bf16(o2, o3));
            }
        } else {
            for (u32 i = lane; i < d; i += 32)
                out[base + i] = narrow(normed(xr[i], widen(weight[i]), widen(gate[base + i])));
        }
    }
}

// dst[i] = value, i < n.
extern "C" __global__ void kda_fill_f32(float* __restrict__ dst, u32 n, float value) {
    const u32 stride = gridDim.x * blockDim.x;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) dst[i] = value;
}
