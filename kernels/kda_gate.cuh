// kda_gate: the forget gate as a per-channel log-decay g ≤ 0, and beta, the per-head sigmoid of the
// b projection (docs/kernels.md, "The forget gate and beta"). No kernel of its own: the kernels
// that consume them (kda_chunk_prepare at prefill, the recurrent pair at decode) take the raw
// projections and apply the laws where they read them, so that the f32 gates never cross global
// memory. One definition here keeps prefill and decode on the same expressions, and the
// recurrent pair bit-identical.
//
//   law 0 (bounded):  g = lower_bound · σ(e^{a_log[h]} · (g_raw + dt_bias))
//   law 1 (softplus): g = −e^{a_log[h]} · softplus(g_raw + dt_bias), softplus(x) = x for x > 20,
//                     else ln(1 + e^x) (as log1pf, accurate where e^x is tiny)
//   beta = σ(b_raw)
// Accurate expf throughout. The laws are checked by the kernels' callers' contract (`law <= 1`);
// ForgetGate::valid lets a kernel write nothing on any other.
#pragma once

#include "kda_common.cuh"

// The raw gate inputs of one launch: g_raw [rows, h, d] bf16 (the gate's up projection),
// dt_bias [h·d] f32 (per channel), a_log [h] f32 (per head), b_raw [rows, h] bf16 with rows `ldb`
// elements apart (the b columns of a wider projection), and the law.
struct ForgetGate {
    const bf16* g_raw;
    const float* dt_bias;
    const float* a_log;
    const bf16* b_raw;
    u32 ldb;
    u32 law;
    float lower_bound;

    // A law the kernels know, and b_raw's rows wide enough for h heads.
    __device__ __forceinline__ bool valid(u32 h) const { return law <= 1 && ldb >= h; }

    // e^{a_log}, the head's rate: taken once per head, not per channel.
    __device__ __forceinline__ float head_rate(u32 head) const { return expf(a_log[head]); }

    // The log-decay of g_raw's element `at`, channel `channel` (head·d + x) of its row, on a head
    // of rate `rate`.
    __device__ __forceinline__ float log_decay(size_t at, u32 channel, float rate) const {
        const float x = widen(g_raw[at]) + dt_bias[channel];
        if (law == 0) return lower_bound * sigmoidf_acc(rate * x);
        const float softplus = x > 20.0f ? x : log1pf(expf(x));
        return -rate * softplus;
    }

    // beta of (row, head).
    __device__ __forceinline__ float beta(size_t row, u32 head) const {
        return sigmoidf_acc(widen(b_raw[row * ldb + head]));
    }
};
