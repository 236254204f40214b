// f32 products on tf32 tensor cores, to about f32's precision (the "3xTF32" split): each f32
// operand x is taken as hi + lo, hi = tf32(x) and lo = tf32(x − hi) (x − hi is exact in f32), and
// a·b as a_lo·b_hi + a_hi·b_lo + a_hi·b_hi, the small terms first, in three mma_tf32_1688 on one
// accumulator. The dropped a_lo·b_lo and the rounding of lo are each about 2^-22 of |a·b|, where a
// single tf32 product is off by up to 2^-11: the sums meet the f32 kernels' relative-RMS bound,
// which one tf32 pass does not. Fragment layouts as mma_tf32_1688's (kda_common.cuh).
#pragma once

#include "kda_common.cuh"

// Where element e (0 .. 3) of a lane's fragments sits in its 16 × 8 tile, by mma_tf32_1688's
// layouts with g = lane/4, t = lane%4: an A fragment's at (a_row, a_col), an accumulator's at
// (d_row, d_col). (A B fragment's two elements sit at rows t and t + 4 of column g.)
struct TileLane {
    u32 g, t;
    __device__ __forceinline__ explicit TileLane(u32 lane) : g(lane / 4), t(lane % 4) {}
    __device__ __forceinline__ u32 a_row(u32 e) const { return g + 8 * (e & 1); }
    __device__ __forceinline__ u32 a_col(u32 e) const { return t + 4 * (e >> 1); }
    __device__ __forceinline__ u32 d_row(u32 e) const { return g + 8 * (e >> 1); }
    __device__ __forceinline__ u32 d_col(u32 e) const { return 2 * t + (e & 1); }
};

// An operand's two tf32 parts.
struct Tf32Parts {
    u32 hi, lo;
};
__device__ __forceinline__ Tf32Parts tf32_parts(float x) {
    const u32 hi = to_tf32(x);
    return {hi, to_tf32(x - __uint_as_float(hi))};
}

// One lane's A fragment (16 × 8) and B fragment (8 × 8), each split in its two parts.
struct SplitA {
    u32 hi[4], lo[4];
    __device__ __forceinline__ explicit SplitA(const float (&x)[4]) {
#pragma unroll
        for (u32 e = 0; e < 4; ++e) {
            const Tf32Parts p = tf32_parts(x[e]);
            hi[e] = p.hi;
            lo[e] = p.lo;
        }
    }
};
struct SplitB {
    u32 hi[2], lo[2];
    __device__ __forceinline__ SplitB(float x0, float x1) {
        const Tf32Parts p0 = tf32_parts(x0), p1 = tf32_parts(x1);
        hi[0] = p0.hi;
        hi[1] = p1.hi;
        lo[0] = p0.lo;
        lo[1] = p1.lo;
    }
};

// d += a·b for one 16 × 8 × 8 tile, to about f32's precision.
__device__ __forceinline__ void mma_f32_1688(float (&d)[4], const SplitA& a, const SplitB& b) {
    mma_tf32_1688(d, a.lo, b.hi);
    mma_tf32_1688(d, a.hi, b.lo);
    mma_tf32_1688(d, a.hi, b.hi);
}
