// CUDA's device math beyond what <math.h> and kda_emu.h give (CUDA Math API): the special
// functions the host library lacks, the fast intrinsics, the explicitly rounded arithmetic and
// conversions, bit reinterpretations, the integer intrinsics and the integer min and max. Included
// by kda_emu.h.
//
// Exact where CUDA is exact: every correctly rounded operation (`__fadd_rz`, `__frcp_rn`,
// `__fsqrt_rd`, the conversions) rounds here as IEEE 754 defines it, in the host's rounding mode
// set for that one operation, and the integer intrinsics are bit-exact. The rest are the host's
// within CUDA's documented error bounds, not CUDA's bits: the special functions are computed in
// long double and rounded once, and the fast intrinsics (`__expf`, `__sinf`, `__powf`) follow the
// device's formula (ex2.approx of x * log2(e), rounded to float first, for `__expf`) with the
// host's exact functions where the device approximates.
#pragma once

#include <fenv.h>

#include <initializer_list>
#include <limits>

namespace kda_emu {
// `x` through a volatile, so that the compiler, which assumes the default rounding mode, can
// neither fold an operation on it nor move that operation out of the mode it runs in.
template <class T>
T opaque(T x) {
    volatile T held = x;
    return held;
}

// `op(operands...)` computed in the rounding `mode` (FE_TONEAREST, FE_TOWARDZERO, FE_UPWARD,
// FE_DOWNWARD) of the calling thread, which is restored after.
template <class R, class F, class... A>
R in_rounding(int mode, F op, A... operands) {
    const int saved = fegetround();
    fesetround(mode);
    volatile R result = op(opaque(operands)...);
    fesetround(saved);
    return result;
}

// cvt.{rni,rzi,rpi,rmi}.{s,u}{32,64}.f{32,64} of `x`, already `rounded` to an integer: out of
// range saturates to the destination's bounds; a NaN is 0 from f32 to a 32-bit integer and
// 1 << (bits - 1) otherwise (PTX ISA, cvt).
template <class I, class F>
I to_integer(F x, F rounded) {
    if (isnan(x)) return sizeof(F) == 4 && sizeof(I) == 4 ? I(0) : static_cast<I>(1ull << (8 * sizeof(I) - 1));
    if (rounded <= static_cast<F>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
    // The bound as F rounds up to the power of two past it, which no I holds.
    if (rounded >= static_cast<F>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
    return static_cast<I>(rounded);
}

// The x with erf(x) = y for |y| < 1, `complement` being 1 - |y| exactly (given where |y| >= 0.5):
// Giles's single-precision approximation ("Approximating the erfinv function", 2010) where it was
// fitted (w < 16, |y| up to 1 - 2^-24), the tail's asymptote erfc(x) ~ e^-x² / (x √π) beyond it,
// then Newton steps on erf, or on erfc of the complement in the tails, where 1 - erf(x) would
// cancel.
inline long double inverse_erf(long double y, long double complement) {
    const long double a = fabsl(y);
    const long double sqrt_pi = 1.77245385090551602729816748334114518L;
    long double w = -logl(complement * (2.0L - complement)), x;
    if (w < 5.0L) {
        w -= 2.5L;
        long double p = 2.81022636e-08L;
        for (const long double c : {3.43273939e-07L, -3.5233877e-06L, -4.39150654e-06L, 0.00021858087L,
                                    -0.00125372503L, -0.00417768164L, 0.246640727L, 1.50140941L})
            p = c + p * w;
        x = p * a;
    } else if (w < 16.0L) {
        w = sqrtl(w) - 3.0L;
        long double p = -0.000200214257L;
        for (const long double c : {0.000100950558L, 0.00134934322L, -0.00367342844L, 0.00573950773L,
                                    -0.0076224613L, 0.00943887047L, 1.00167406L, 2.83297682L})
            p = c + p * w;
        x = p * a;
    } else {
        x = sqrtl(-logl(complement));
        for (int step = 0; step < 4; ++step) x = sqrtl(-logl(complement * sqrt_pi * x));
    }
    for (int step = 0; step < 6; ++step) {
        const long double residual = a < 0.5L ? erfl(x) - a : complement - erfcl(x);
        x -= residual * sqrt_pi / (2.0L * expl(-x * x));
    }
    return copysignl(x, y);
}

// erfinv(y): ±inf at ±1, NaN past it.
inline long double erfinv_of(long double y) {
    if (!(fabsl(y) < 1.0L)) return fabsl(y) == 1.0L ? copysignl(INFINITY, y) : NAN;
    if (y == 0.0L) return y;
    return inverse_erf(y, 1.0L - fabsl(y));
}

// erfcinv(c) = erfinv(1 - c), with 1 - |1 - c| kept exact: c itself below 1, 2 - c above.
inline long double erfcinv_of(long double c) {
    if (!(c > 0.0L && c < 2.0L)) return c == 0.0L ? INFINITY : c == 2.0L ? -INFINITY : NAN;
    if (c == 1.0L) return 0.0L;
    return c < 1.0L ? inverse_erf(1.0L - c, c) : inverse_erf(1.0L - c, 2.0L - c);
}

// The standard normal distribution function: erfc(-x / sqrt(2)) / 2, whose tail keeps its
// relative precision where 1 + erf would cancel.
inline long double normcdf_of(long double x) { return 0.5L * erfcl(-x * 0.707106781186547524400844362104849039L); }

template <class U>
U reverse_bits(U x) {
    U reversed = 0;
    for (unsigned i = 0; i < 8 * sizeof(U); ++i, x >>= 1) reversed = static_cast<U>((reversed << 1) | (x & 1u));
    return reversed;
}

// dp4a: the four byte products of x and y (bytes of type B), plus z, modulo 2^32.
template <class B, class T>
T dot4(T x, T y, T z) {
    uint32_t sum = static_cast<uint32_t>(z);
    for (unsigned i = 0; i < 4; ++i) {
        const B a = static_cast<B>(static_cast<uint32_t>(x) >> (8 * i)), b = static_cast<B>(static_cast<uint32_t>(y) >> (8 * i));
        sum += static_cast<uint32_t>(static_cast<int32_t>(a) * static_cast<int32_t>(b));
    }
    return static_cast<T>(sum);
}
// A subnormal as the zero of its sign, as the device's flush-to-zero modes give it.
inline float flush_to_zero(float x) { return fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x; }
}  // namespace kda_emu

// ---- Special functions, computed in long double and rounded once. ----
// A float and a double function of one argument, `name` and `name##f`, from `of` in long double.
#define KDA_EMU_SPECIAL(name, of)                                                    \
    inline double name(double x) { return static_cast<double>(kda_emu::of(x)); }    \
    inline float name##f(float x) { return static_cast<float>(kda_emu::of(x)); }
KDA_EMU_SPECIAL(erfinv, erfinv_of)
KDA_EMU_SPECIAL(erfcinv, erfcinv_of)
KDA_EMU_SPECIAL(normcdf, normcdf_of)
#undef KDA_EMU_SPECIAL
inline double normcdfinv(double p) { return static_cast<double>(-1.41421356237309504880168872420969808L * kda_emu::erfcinv_of(2.0L * p)); }
inline float normcdfinvf(float p) { return static_cast<float>(normcdfinv(p)); }
inline double rsqrt(double x) { return static_cast<double>(1.0L / sqrtl(x)); }
inline double rcbrt(double x) { return static_cast<double>(1.0L / cbrtl(x)); }
inline float rcbrtf(float x) { return static_cast<float>(1.0L / cbrtl(x)); }

// ---- Fast intrinsics: the device's formula, the host's functions where it approximates. ----
// glibc declares names of this form (`__expf`) for its own use, noexcept: these redefine them so.
inline float __expf(float x) noexcept { return exp2f(x * 1.44269504088896340736f); }
inline float __exp10f(float x) noexcept { return exp2f(x * 3.32192809488736234787f); }
inline float __log2f(float x) noexcept { return log2f(x); }
inline float __logf(float x) noexcept { return log2f(x) * 0.693147180559945309417f; }
inline float __log10f(float x) noexcept { return log2f(x) * 0.301029995663981195214f; }
inline float __powf(float x, float y) noexcept { return exp2f(y * log2f(x)); }
inline float __sinf(float x) noexcept { return sinf(x); }
inline float __cosf(float x) noexcept { return cosf(x); }
// div.approx.f32: x times the reciprocal of y, which for 2^126 < |y| < 2^128 is subnormal and
// flushed, so the quotient is 0 (NaN for an infinite x), as CUDA documents.
inline float __fdividef(float x, float y) { return x * kda_emu::flush_to_zero(1.0f / y); }
inline float fdividef(float x, float y) { return __fdividef(x, y); }
inline float __tanf(float x) noexcept { return __fdividef(__sinf(x), __cosf(x)); }
inline void __sincosf(float x, float* s, float* c) noexcept {
    *s = __sinf(x);
    *c = __cosf(x);
}
// cvt.sat.f32.f32: clamped to [0, 1], NaN to +0.
inline float __saturatef(float x) { return x > 1.0f ? 1.0f : x >= 0.0f ? x : 0.0f; }

// ---- Arithmetic rounded as named: _rn to nearest even, _rz toward zero, _ru up, _rd down. ----
// `name##_rz`, `_ru` and `_rd` returning R of `params`: `expression` in that rounding mode,
// `__VA_ARGS__` naming the parameters.
#define KDA_EMU_DIRECTED(name, R, params, expression, ...)                                                  \
    inline R name##_rz params { return kda_emu::in_rounding<R>(FE_TOWARDZERO, [] params { return expression; }, __VA_ARGS__); } \
    inline R name##_ru params { return kda_emu::in_rounding<R>(FE_UPWARD, [] params { return expression; }, __VA_ARGS__); }     \
    inline R name##_rd params { return kda_emu::in_rounding<R>(FE_DOWNWARD, [] params { return expression; }, __VA_ARGS__); }
// The three and `name##_rn`.
#define KDA_EMU_ROUNDED(name, R, params, expression, ...)                                                   \
    inline R name##_rn params { return kda_emu::in_rounding<R>(FE_TONEAREST, [] params { return expression; }, __VA_ARGS__); } \
    KDA_EMU_DIRECTED(name, R, params, expression, __VA_ARGS__)
// One binary operator on float and on double, under CUDA's two names.
#define KDA_EMU_ROUNDED_BINARY(float_name, double_name, op)                     \
    KDA_EMU_ROUNDED(float_name, float, (float a, float b), a op b, a, b)        \
    KDA_EMU_ROUNDED(double_name, double, (double a, double b), a op b, a, b)
KDA_EMU_ROUNDED_BINARY(__fadd, __dadd, +)
KDA_EMU_ROUNDED_BINARY(__fsub, __dsub, -)
KDA_EMU_ROUNDED_BINARY(__fmul, __dmul, *)
KDA_EMU_ROUNDED_BINARY(__fdiv, __ddiv, /)
KDA_EMU_ROUNDED(__frcp, float, (float x), 1.0f / x, x)
KDA_EMU_ROUNDED(__drcp, double, (double x), 1.0 / x, x)
KDA_EMU_ROUNDED(__fsqrt, float, (float x), sqrtf(x), x)
KDA_EMU_ROUNDED(__dsqrt, double, (double x), sqrt(x), x)
// __fmaf_rn is kda_emu.h's.
KDA_EMU_DIRECTED(__fmaf, float, (float a, float b, float c), fmaf(a, b, c), a, b, c)
KDA_EMU_ROUNDED(__fma, double, (double a, double b, double c), fma(a, b, c), a, b, c)
// Integer to floating point, rounded as named where the integer has more bits than the significand.
#define KDA_EMU_FROM_INTEGER(name, I, F) KDA_EMU_ROUNDED(name, F, (I x), static_cast<F>(x), x)
KDA_EMU_FROM_INTEGER(__int2float, int, float)
KDA_EMU_FROM_INTEGER(__uint2float, unsigned int, float)
KDA_EMU_FROM_INTEGER(__ll2float, long long int, float)
KDA_EMU_FROM_INTEGER(__ull2float, unsigned long long int, float)
KDA_EMU_FROM_INTEGER(__ll2double, long long int, double)
KDA_EMU_FROM_INTEGER(__ull2double, unsigned long long int, double)
KDA_EMU_FROM_INTEGER(__double2float, double, float)
#undef KDA_EMU_FROM_INTEGER
inline double __int2double_rn(int x) { return x; }
inline double __uint2double_rn(unsigned int x) { return x; }
#undef KDA_EMU_ROUNDED_BINARY
#undef KDA_EMU_ROUNDED
#undef KDA_EMU_DIRECTED

// Floating point to integer, rounded as named, saturating (kda_emu::to_integer).
#define KDA_EMU_TO_INTEGER(name, F, I)                                                 \
    inline I name##_rn(F x) { return kda_emu::to_integer<I>(x, nearbyint(x)); }        \
    inline I name##_rz(F x) { return kda_emu::to_integer<I>(x, trunc(x)); }            \
    inline I name##_ru(F x) { return kda_emu::to_integer<I>(x, ceil(x)); }             \
    inline I name##_rd(F x) { return kda_emu::to_integer<I>(x, floor(x)); }
KDA_EMU_TO_INTEGER(__float2int, float, int)
KDA_EMU_TO_INTEGER(__float2uint, float, unsigned int)
KDA_EMU_TO_INTEGER(__float2ll, float, long long int)
KDA_EMU_TO_INTEGER(__float2ull, float, unsigned long long int)
KDA_EMU_TO_INTEGER(__double2int, double, int)
KDA_EMU_TO_INTEGER(__double2uint, double, unsigned int)
KDA_EMU_TO_INTEGER(__double2ll, double, long long int)
KDA_EMU_TO_INTEGER(__double2ull, double, unsigned long long int)
#undef KDA_EMU_TO_INTEGER

// ---- Bits. ----
inline long long int __double_as_longlong(double x) { return static_cast<long long>(kda_emu::to_bits(x)); }
inline double __longlong_as_double(long long int bits) { return kda_emu::from_bits<double>(static_cast<uint64_t>(bits)); }
inline int __double2hiint(double x) { return static_cast<int>(kda_emu::to_bits(x) >> 32); }
inline int __double2loint(double x) { return static_cast<int>(kda_emu::to_bits(x) & 0xffffffffu); }
inline double __hiloint2double(int hi, int lo) {
    return kda_emu::from_bits<double>(static_cast<uint64_t>(static_cast<uint32_t>(hi)) << 32 | static_cast<uint32_t>(lo));
}

inline int __popc(unsigned int x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long int x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long int x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long int x) { return __builtin_ffsll(x); }
inline unsigned int __brev(unsigned int x) { return kda_emu::reverse_bits(x); }
inline unsigned long long int __brevll(unsigned long long int x) { return kda_emu::reverse_bits(x); }
// prmt.b32, which __byte_perm is: result byte n is byte s[4n+2:4n] of the eight bytes y:x (x the
// low four); where s[4n+3] is set, that byte's sign bit replicated instead.
inline unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
    const uint64_t bytes = static_cast<uint64_t>(y) << 32 | x;
    unsigned int result = 0;
    for (unsigned n = 0; n < 4; ++n) {
        const unsigned selector = (s >> (4 * n)) & 0xfu;
        unsigned byte = static_cast<unsigned>(bytes >> (8 * (selector & 7u))) & 0xffu;
        if (selector & 8u) byte = (byte & 0x80u) ? 0xffu : 0u;
        result |= byte << (8 * n);
    }
    return result;
}
inline int __mulhi(int x, int y) { return static_cast<int>((static_cast<int64_t>(x) * y) >> 32); }
inline unsigned int __umulhi(unsigned int x, unsigned int y) {
    return static_cast<unsigned>((static_cast<uint64_t>(x) * y) >> 32);
}
inline long long int __mul64hi(long long int x, long long int y) {
    return static_cast<long long>((static_cast<__int128>(x) * y) >> 64);
}
inline unsigned long long int __umul64hi(unsigned long long int x, unsigned long long int y) {
    return static_cast<unsigned long long>((static_cast<unsigned __int128>(x) * y) >> 64);
}
// The low 32 bits of the product of the operands' low 24 bits (signed: sign-extended from bit 23).
inline int __mul24(int x, int y) {
    const auto low24 = [](int v) { return static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(v) << 8) >> 8); };
    return static_cast<int>(static_cast<uint32_t>(low24(x) * low24(y)));
}
inline unsigned int __umul24(unsigned int x, unsigned int y) { return (x & 0xffffffu) * (y & 0xffffffu); }
inline unsigned int __sad(int x, int y, unsigned int z) {
    return static_cast<unsigned>(x > y ? static_cast<int64_t>(x) - y : static_cast<int64_t>(y) - x) + z;
}
inline unsigned int __usad(unsigned int x, unsigned int y, unsigned int z) { return (x > y ? x - y : y - x) + z; }
// Halving adds without the overflow of the sum: (x + y) >> 1 and (x + y + 1) >> 1.
inline int __hadd(int x, int y) { return static_cast<int>((static_cast<int64_t>(x) + y) >> 1); }
inline int __rhadd(int x, int y) { return static_cast<int>((static_cast<int64_t>(x) + y + 1) >> 1); }
inline unsigned int __uhadd(unsigned int x, unsigned int y) { return static_cast<unsigned>((static_cast<uint64_t>(x) + y) >> 1); }
inline unsigned int __urhadd(unsigned int x, unsigned int y) {
    return static_cast<unsigned>((static_cast<uint64_t>(x) + y + 1) >> 1);
}
// shf.l and shf.r of the 64 bits hi:lo, by `shift` modulo 32 (wrap) or at most 32 (clamp).
inline unsigned int __funnelshift_l(unsigned int lo, unsigned int hi, unsigned int shift) {
    return static_cast<unsigned>(((static_cast<uint64_t>(hi) << 32 | lo) << (shift & 31u)) >> 32);
}
inline unsigned int __funnelshift_lc(unsigned int lo, unsigned int hi, unsigned int shift) {
    return static_cast<unsigned>(((static_cast<uint64_t>(hi) << 32 | lo) << (shift < 32u ? shift : 32u)) >> 32);
}
inline unsigned int __funnelshift_r(unsigned int lo, unsigned int hi, unsigned int shift) {
    return static_cast<unsigned>((static_cast<uint64_t>(hi) << 32 | lo) >> (shift & 31u));
}
inline unsigned int __funnelshift_rc(unsigned int lo, unsigned int hi, unsigned int shift) {
    return static_cast<unsigned>((static_cast<uint64_t>(hi) << 32 | lo) >> (shift < 32u ? shift : 32u));
}
inline int __dp4a(int x, int y, int z) { return kda_emu::dot4<int8_t>(x, y, z); }
inline unsigned int __dp4a(unsigned int x, unsigned int y, unsigned int z) { return kda_emu::dot4<uint8_t>(x, y, z); }

// ---- Integer min and max under CUDA's typed names (kda_emu.h has the overloaded min and max). ----
#define KDA_EMU_MIN_MAX(prefix, T)                                     \
    inline T prefix##min(T a, T b) { return b < a ? b : a; }          \
    inline T prefix##max(T a, T b) { return a < b ? b : a; }
KDA_EMU_MIN_MAX(u, unsigned int)
KDA_EMU_MIN_MAX(ll, long long int)
KDA_EMU_MIN_MAX(ull, unsigned long long int)
#undef KDA_EMU_MIN_MAX
