// kda_recurrent: one decode step of the gated delta rule, all heads (docs/kernels.md).
//
// Geometry (src/launch.rs): both entries run `launch::recurrent(h, d)`: grid (h, d / RECURRENT_VPB),
// blockDim.x == RECURRENT_VPB; thread v of block (hd, b) owns state column b·VPB + v of head hd.
// Shared memory is static (the decayed column of the _smem entry included): no dynamic bytes.
//
// Per head, α = e^{g} along k, one thread per column v, in the reference order:
//   pass 1, k ascending: s = S[k][v]·α[k]; store s; kv = kv + s·k[k]
//   δ = β·(v[v] − kv)
//   pass 2, k ascending: s = s + k[k]·δ;  store s; o = o + s·(q[k]·scale)
//   out[v] = o (the updated state's output)
// q and k arrive L2-normalised and are never normalised again. Both entries run the same
// expressions in the same order (`update_column` below), so with --fmad=false their state and
// outputs are bit-identical; they differ only in how often the column crosses global memory.
#include "kda_common.cuh"

#ifndef KDA_MAX_HEAD_DIM
#error "KDA_MAX_HEAD_DIM must be defined by the build (kernels.toml [defines])"
#endif
#ifndef RECURRENT_VPB
#error "RECURRENT_VPB must be defined by the build (kernels.toml [defines])"
#endif

static_assert(RECURRENT_VPB % 32 == 0 && RECURRENT_VPB <= KDA_MAX_HEAD_DIM, "RECURRENT_VPB: whole warps");

// The per-head inputs every column reads: e^{g[k]}, f32(k[k]) and f32(q[k])·scale.
struct StepInputs {
    float decay[KDA_MAX_HEAD_DIM];
    float k[KDA_MAX_HEAD_DIM];
    float q_scaled[KDA_MAX_HEAD_DIM];
};

__device__ __forceinline__ bool recurrent_launch_ok(u32 h, u32 d) {
    return blockDim.x == RECURRENT_VPB && d != 0 && d <= KDA_MAX_HEAD_DIM && d % RECURRENT_VPB == 0 &&
           blockIdx.x < h && (blockIdx.y + 1) * RECURRENT_VPB <= d;
}

__device__ __forceinline__ void stage_inputs(StepInputs& in, const bf16* q, const bf16* k, const float* gate,
                                             u32 head, u32 d, float scale) {
    const size_t row = static_cast<size_t>(head) * d;
    for (u32 i = threadIdx.x; i < d; i += blockDim.x) {
        in.decay[i] = expf(gate[row + i]);
        in.k[i] = widen(k[row + i]);
        in.q_scaled[i] = widen(q[row + i]) * scale;
    }
    __syncthreads();
}

// The two passes over one column. `Src` is where pass 1 reads the column, `Mid` holds the decayed
// column between the passes, `Dst` receives the updated column: element i of each is at
// `ptr[i * stride]`. Only the memory differs between the entries, never an expression.
__device__ __forceinline__ float update_column(const float* src, size_t src_stride, float* mid, size_t mid_stride,
                                               float* dst, size_t dst_stride, const StepInputs& in, u32 d,
                                               float beta, float v) {
    float kv = 0.0f;
#pragma unroll 8
    for (u32 i = 0; i < d; ++i) {
        const float s = src[i * src_stride] * in.decay[i];
        mid[i * mid_stride] = s;
        kv = kv + s * in.k[i];
    }
    const float delta = beta * (v - kv);
    float o = 0.0f;
#pragma unroll 8
    for (u32 i = 0; i < d; ++i) {
        const float s = mid[i * mid_stride] + in.k[i] * delta;
        dst[i * dst_stride] = s;
        o = o + s * in.q_scaled[i];
    }
    return o;
}

// q, k, v [h, d] bf16, gate [h, d] f32 (log-decay), beta [h], state [h, d, d] f32 (K-major:
// S[hd][k][v] at (hd·d + k)·d + v), out [h, d] f32, scale = 1/sqrt(d). The column stays in global
// memory: both passes read and write it there (the second read hits L2).
extern "C" __global__ void kda_recurrent_decode_bf16(const bf16* __restrict__ q, const bf16* __restrict__ k,
                                                     const bf16* __restrict__ v, const float* __restrict__ gate,
                                                     const float* __restrict__ beta, float* state,
                                                     float* __restrict__ out, u32 h, u32 d, float scale) {
    __shared__ StepInputs in;
    if (!recurrent_launch_ok(h, d)) return;
    const u32 head = blockIdx.x, col = blockIdx.y * RECURRENT_VPB + threadIdx.x;
    stage_inputs(in, q, k, gate, head, d, scale);
    float* column = state + static_cast<size_t>(head) * d * d + col;
    const size_t at = static_cast<size_t>(head) * d + col;
    out[at] = update_column(column, d, column, d, column, d, in, d, beta[head], widen(v[at]));
}

// The same step reading the state once and writing it once: pass 1 reads the column from global
// memory and keeps the decayed column in shared memory; pass 2 writes the updated column to
// global memory. Bit-identical to kda_recurrent_decode_bf16.
extern "C" __global__ void kda_recurrent_decode_bf16_smem(const bf16* __restrict__ q, const bf16* __restrict__ k,
                                                          const bf16* __restrict__ v, const float* __restrict__ gate,
                                                          const float* __restrict__ beta, float* state,
                                                          float* __restrict__ out, u32 h, u32 d, float scale) {
    __shared__ StepInputs in;
    // Column-interleaved ([k][VPB]): thread v's element k at k·VPB + v, conflict-free.
    __shared__ float decayed[KDA_MAX_HEAD_DIM * RECURRENT_VPB];
    if (!recurrent_launch_ok(h, d)) return;
    const u32 head = blockIdx.x, col = blockIdx.y * RECURRENT_VPB + threadIdx.x;
    stage_inputs(in, q, k, gate, head, d, scale);
    float* column = state + static_cast<size_t>(head) * d * d + col;
    const size_t at = static_cast<size_t>(head) * d + col;
    out[at] = update_column(column, d, decayed + threadIdx.x, RECURRENT_VPB, column, d, in, d, beta[head],
                            widen(v[at]));
}
