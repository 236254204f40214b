// kda_recurrent: one decode step of the gated delta rule for each of b sequences, all heads, each
// sequence's state in its slot of a pool (docs/kernels.md).
//
// Geometry (src/launch.rs): both entries run `launch::recurrent(h, d, b)`: grid
// (h, d / RECURRENT_VPB, ≥ b), blockDim.x == RECURRENT_VPB; thread v of block (hd, j, r) owns state
// column j·VPB + v of head hd of batch row r's sequence.
// Shared memory is static (the head's inputs): no dynamic bytes.
//
// Per head, α = e^{g} along k, g the forget gate's log-decays of the row's g_raw and β its beta
// (kda_gate.cuh, taken by each block for its head), one thread per column v, in the reference
// order:
//   pass 1, k ascending: s = S[k][v]·α[k]; store s; kv = fma(s, k[k], kv)
//   δ = β·(v[v] − kv)
//   pass 2, k ascending: s = fma(k[k], δ, s);  store s; o = fma(s, q[k]·scale, o)
//   out[v] = o (the updated state's output)
// q and k arrive L2-normalised and are never normalised again. Both entries run the same
// expressions in the same order (`update_column` below), every multiply-add an explicit __fmaf_rn
// and no product left for nvcc to contract, so their state and outputs are bit-identical whatever
// the build's --fmad; they differ only in how often the column crosses global memory. Both take
// the head dim as a compile-time constant (with_head_dim); the _regs entry unrolls its passes
// whole, so that its column is an array of registers.
#include "kda_common.cuh"
#include "kda_gate.cuh"

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

// The block shape, a head dim with_head_dim runs (32, 64 or 128, within the staged arrays), and a
// block inside the heads and columns.
__device__ __forceinline__ bool recurrent_launch_ok(u32 h, u32 d) {
    return blockDim.x == RECURRENT_VPB && (d == 32 || d == 64 || d == 128) && d <= KDA_MAX_HEAD_DIM &&
           d % RECURRENT_VPB == 0 && blockIdx.x < h && (blockIdx.y + 1) * RECURRENT_VPB <= d;
}

// The two passes over one column of D elements, UNROLL steps at a time. `Src` is where pass 1 reads
// the column, `Mid` holds the decayed column between the passes, `Dst` receives the updated column:
// element i of each is at `ptr[i * stride]`. Only the memory differs between the entries, never an
// expression. The __syncwarp between the passes (every lane of the one-warp block reaches it) also
// makes pass 2 read k from shared memory again: kept in registers from pass 1, D more of them
// would spill the _regs entry's column.
template <u32 D, u32 UNROLL>
__device__ __forceinline__ float update_column(const float* src, size_t src_stride, float* mid, size_t mid_stride,
                                               float* dst, size_t dst_stride, const StepInputs& in, float beta,
                                               float v) {
    float kv = 0.0f;
#pragma unroll UNROLL
    for (u32 i = 0; i < D; ++i) {
        const float s = src[i * src_stride] * in.decay[i];
        mid[i * mid_stride] = s;
        kv = __fmaf_rn(s, in.k[i], kv);
    }
    const float delta = beta * (v - kv);
    __syncwarp();
    float o = 0.0f;
#pragma unroll UNROLL
    for (u32 i = 0; i < D; ++i) {
        const float s = __fmaf_rn(in.k[i], delta, mid[i * mid_stride]);
        dst[i * dst_stride] = s;
        o = __fmaf_rn(s, in.q_scaled[i], o);
    }
    return o;
}

// Where batch row `row` of a step reads and writes: its q, k and v heads in the packed
// [b, 3·h·d] rows, its head's first element in g_raw and first channel, the head's rate, beta,
// its output and its state in the pool.
struct StepRow {
    const bf16* q;
    const bf16* k;
    float v;
    size_t gate_at;
    u32 channel;
    float rate;
    float beta;
    float* column;
    float* out;
};

// The row of block (head, j, row), or false when the row has no slot (batch_slot): then the whole
// block returns before any barrier, as the row writes nothing.
__device__ __forceinline__ bool step_row(StepRow& at, const bf16* qkv, const ForgetGate& forget, float* pool,
                                         const u32* slot, float* out, u32 b, u32 slots, u32 h, u32 d) {
    const u32 row = blockIdx.z;
    if (row >= b) return false;
    const u32 s = batch_slot(slot, row, slots);
    if (s == KDA_NO_SLOT) return false;
    const u32 head = blockIdx.x, col = blockIdx.y * RECURRENT_VPB + threadIdx.x;
    const size_t hd = static_cast<size_t>(h) * d;
    const bf16* packed = qkv + static_cast<size_t>(row) * 3 * hd + static_cast<size_t>(head) * d;
    const size_t at_row = static_cast<size_t>(row) * hd + static_cast<size_t>(head) * d;
    at.q = packed;
    at.k = packed + hd;
    at.v = widen(packed[2 * hd + col]);
    at.gate_at = at_row;
    at.channel = head * d;
    at.rate = forget.head_rate(head);
    at.beta = forget.beta(row, head);
    at.column = pool + (static_cast<size_t>(s) * h + head) * d * d + col;
    at.out = out + at_row + col;
    return true;
}

// Stages the inputs of the head `at` names.
template <u32 D>
__device__ __forceinline__ void stage_inputs(StepInputs& in, const StepRow& at, const ForgetGate& forget,
                                             float scale) {
#pragma unroll
    for (u32 i = threadIdx.x; i < D; i += RECURRENT_VPB) {
        in.decay[i] = expf(forget.log_decay(at.gate_at + i, at.channel + i, at.rate));
        in.k[i] = widen(at.k[i]);
        in.q_scaled[i] = widen(at.q[i]) * scale;
    }
    __syncthreads();
}

// qkv [b, 3·h·d] bf16 (q | k | v per row); g_raw [b, h, d], dt_bias [h·d], a_log [h],
// b_raw [b, ldb], law and lower_bound (the forget gate and beta, kda_gate.cuh);
// pool [slots, h, d, d] f32 (K-major: S[hd][k][v] at (hd·d + k)·d + v within a slot), slot [b],
// out [b, h, d] f32, scale = 1/sqrt(d). The column stays in global memory: both passes read and
// write it there (the second read hits L2).
extern "C" __global__ void kda_recurrent_decode_bf16(const bf16* __restrict__ qkv, const bf16* __restrict__ g_raw,
                                                     const float* __restrict__ dt_bias,
                                                     const float* __restrict__ a_log, const bf16* __restrict__ b_raw,
                                                     float* pool, const u32* __restrict__ slot,
                                                     float* __restrict__ out, u32 b, u32 slots, u32 h, u32 d,
                                                     u32 ldb, u32 law, float scale, float lower_bound) {
    __shared__ StepInputs in;
    const ForgetGate forget{g_raw, dt_bias, a_log, b_raw, ldb, law, lower_bound};
    if (!recurrent_launch_ok(h, d) || !forget.valid(h)) return;
    StepRow at;
    if (!step_row(at, qkv, forget, pool, slot, out, b, slots, h, d)) return;
    with_head_dim(d, [&](auto dim) {
        stage_inputs<decltype(dim)::value>(in, at, forget, scale);
        // Unrolled 8 steps at a time, so that pass 2 reads the column back from memory (unrolled
        // whole, nvcc forwards pass 1's stores to it).
        *at.out = update_column<decltype(dim)::value, 8>(at.column, d, at.column, d, at.column, d, in, at.beta,
                                                         at.v);
    });
}

// The same step reading the state once and writing it once: each thread loads its whole column
// into registers (every load in flight together, coalesced across the warp, with the head's q, k
// and raw gate loading behind them), pass 1 decays it there, and pass 2 writes the updated column to
// global memory. Bit-identical to kda_recurrent_decode_bf16: the same expressions on the same
// values. At D = 128 the column takes 128 registers a thread; __launch_bounds__ asks for
// REGS_BLOCKS_PER_SM one-warp blocks an SM, which leaves ptxas 65,536 / (32 · 12) = 170.
constexpr u32 REGS_BLOCKS_PER_SM = 12;
extern "C" __global__ void __launch_bounds__(RECURRENT_VPB, REGS_BLOCKS_PER_SM)
    kda_recurrent_decode_bf16_regs(const bf16* __restrict__ qkv, const bf16* __restrict__ g_raw,
                                   const float* __restrict__ dt_bias, const float* __restrict__ a_log,
                                   const bf16* __restrict__ b_raw, float* pool, const u32* __restrict__ slot,
                                   float* __restrict__ out, u32 b, u32 slots, u32 h, u32 d, u32 ldb, u32 law,
                                   float scale, float lower_bound) {
    __shared__ StepInputs in;
    const ForgetGate forget{g_raw, dt_bias, a_log, b_raw, ldb, law, lower_bound};
    if (!recurrent_launch_ok(h, d) || !forget.valid(h)) return;
    StepRow at;
    if (!step_row(at, qkv, forget, pool, slot, out, b, slots, h, d)) return;
    with_head_dim(d, [&](auto dim) {
        constexpr u32 D = decltype(dim)::value;
        float column[D];
#pragma unroll
        for (u32 i = 0; i < D; ++i) column[i] = at.column[i * D];
        stage_inputs<D>(in, at, forget, scale);
        // Row stride D, not d (equal here): a compile-time stride makes every row's address an
        // immediate offset of one pointer, where d's would hold D 64-bit addresses live from the
        // loads to the stores.
        *at.out = update_column<D, D>(column, 1, column, 1, at.column, D, in, at.beta, at.v);
    });
}
