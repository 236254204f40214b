// The paired 16-bit float types of <cuda_fp16.h> and <cuda_bf16.h>, __half2 and __nv_bfloat162:
// two elements in one 32-bit word, `x` in the low half, with the conversions and the
// element-wise arithmetic CUDA declares for them. Each element rounds as its scalar type's
// operation does (kda_emu.h). Included by kda_emu.h after the scalar types.
#pragma once

struct alignas(4) __half2 {
    __half x, y;
};
struct alignas(4) __nv_bfloat162 {
    __nv_bfloat16 x, y;
};
typedef __half2 half2;
typedef __nv_bfloat162 nv_bfloat162;

// One pair type `T2` of scalar `T`: its constructors, element access, float conversions and
// element-wise arithmetic, under CUDA's names for that type.
#define KDA_EMU_PAIR(T2, T, to_float, from_float, make, halves2, scalar2, low, high, floats2, float2pair, \
                     pair2floats, float22pair)                                                           \
    inline T2 make(T x, T y) { return {x, y}; }                                                          \
    inline T2 halves2(T x, T y) { return {x, y}; }                                                       \
    inline T2 scalar2(T x) { return {x, x}; }                                                            \
    inline T low(T2 a) { return a.x; }                                                                   \
    inline T high(T2 a) { return a.y; }                                                                 \
    inline float __low2float(T2 a) { return to_float(a.x); }                                             \
    inline float __high2float(T2 a) { return to_float(a.y); }                                            \
    inline T2 floats2(float x, float y) { return {from_float(x), from_float(y)}; }                      \
    inline T2 float2pair(float x) { return {from_float(x), from_float(x)}; }                            \
    inline float2 pair2floats(T2 a) { return {to_float(a.x), to_float(a.y)}; }                          \
    inline T2 float22pair(float2 a) { return {from_float(a.x), from_float(a.y)}; }                      \
    inline T2 operator+(T2 a, T2 b) { return {a.x + b.x, a.y + b.y}; }                                  \
    inline T2 operator-(T2 a, T2 b) { return {a.x - b.x, a.y - b.y}; }                                  \
    inline T2 operator*(T2 a, T2 b) { return {a.x * b.x, a.y * b.y}; }                                  \
    inline T2 operator/(T2 a, T2 b) { return {a.x / b.x, a.y / b.y}; }                                  \
    inline T2 operator-(T2 a) { return {-a.x, -a.y}; }                                                  \
    inline T2& operator+=(T2& a, T2 b) { return a = a + b; }                                            \
    inline T2& operator-=(T2& a, T2 b) { return a = a - b; }                                            \
    inline T2& operator*=(T2& a, T2 b) { return a = a * b; }                                            \
    inline T2& operator/=(T2& a, T2 b) { return a = a / b; }                                            \
    inline bool operator==(T2 a, T2 b) { return a.x == b.x && a.y == b.y; }                             \
    inline bool operator!=(T2 a, T2 b) { return !(a == b); }                                            \
    inline T2 __hadd2(T2 a, T2 b) { return a + b; }                                                     \
    inline T2 __hsub2(T2 a, T2 b) { return a - b; }                                                     \
    inline T2 __hmul2(T2 a, T2 b) { return a * b; }                                                     \
    inline T2 __h2div(T2 a, T2 b) { return a / b; }                                                     \
    inline T2 __hneg2(T2 a) { return -a; }
KDA_EMU_PAIR(__half2, __half, __half2float, __float2half_rn, make_half2, __halves2half2, __half2half2, __low2half,
             __high2half, __floats2half2_rn, __float2half2_rn, __half22float2, __float22half2_rn)
KDA_EMU_PAIR(__nv_bfloat162, __nv_bfloat16, __bfloat162float, __float2bfloat16_rn, make_bfloat162,
             __halves2bfloat162, __bfloat162bfloat162, __low2bfloat16, __high2bfloat16, __floats2bfloat162_rn,
             __float2bfloat162_rn, __bfloat1622float2, __float22bfloat162_rn)
#undef KDA_EMU_PAIR
