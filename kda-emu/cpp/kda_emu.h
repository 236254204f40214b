// The device side of kda's CUDA emulator: what a kernel of `kernels/*.cu` sees when it is
// compiled as plain C++ (g++ or clang++) instead of by nvcc.
//
// Each CUDA thread of a block is an OS thread; the blocks of a grid run one at a time, in a
// seeded shuffled order. `__shared__` variables are static storage in one linker section, and a
// launch's dynamic shared memory one buffer of its size, both filled with NaN bytes before every
// block. `__syncthreads` is a barrier every thread of the block must
// reach, warp shuffles an exchange every lane of the mask must join, and an asynchronous copy
// lands only at its wait: anything else is a launch error naming the kernel, the block and the
// thread (kda_emu_runtime.cpp). The tensor-core ldmatrix, mma.m16n8k16 (bf16) and mma.m16n8k8
// (tf32) are gathers every lane of the warp must join, reached through kda_common.cuh's wrappers. Atomics, warp votes,
// device math and the paired 16-bit floats are in the headers included near the end. What the
// shim does not declare (other tensor-core instructions, inline PTX, cooperative groups) does not
// compile, so a module that needs it is reported at build time instead of being emulated wrongly.
#pragma once

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>
#include <utility>

#include "kda_emu_config.h"

// Kernels guard the few lines C++ cannot compile (inline PTX) with `#if defined(KDA_EMULATION)`.
// __CUDA_ARCH__ is the emulated device's (kda-emu/src/device.rs), so code gated on an
// architecture (`#if __CUDA_ARCH__ >= 800`) is present as it is in nvcc's device pass.
#define KDA_EMULATION 1
#define __CUDA_ARCH__ KDA_EMU_ARCH

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
// Static storage of the one block that runs at a time. The build collects every static of the
// module's unit (compiled with -fdata-sections) that an entry's library keeps, its kernel's, into
// the section `kda_emu_shared`, which the runtime fills with NaN bytes before each block and
// measures against the device's limit.
// `used`: the runtime writes it behind the compiler's back, so an array no thread writes must not
// be folded to its zero initializer (or dropped), which would hide the NaN of an unwritten read.
// `extern __shared__ T name[];`, which this cannot spell, the build rewrites in the module's
// source into a reference to the launch's dynamic shared memory (kda-emu/src/toolchain.rs).
#define __shared__ static __attribute__((used))

struct uint3 {
    unsigned int x, y, z;
};
struct dim3 {
    unsigned int x, y, z;
};
struct alignas(16) uint4 {
    unsigned int x, y, z, w;
};
struct alignas(8) uint2 {
    unsigned int x, y;
};
struct alignas(8) float2 {
    float x, y;
};
struct alignas(16) float4 {
    float x, y, z, w;
};
inline uint4 make_uint4(unsigned int x, unsigned int y, unsigned int z, unsigned int w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned int x, unsigned int y) { return {x, y}; }
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

extern thread_local uint3 threadIdx;
extern thread_local uint3 blockIdx;
extern dim3 blockDim;
extern dim3 gridDim;
constexpr int warpSize = 32;

namespace kda_emu {
// Block-wide barrier (kda_emu_runtime.cpp).
void syncthreads();
// Warp exchange: every lane of `mask` deposits `value`; each gets the value of lane `source`
// (its own when `source` is negative). `op` names the intrinsic for messages. It orders no memory
// accesses, as a shuffle does not.
uint64_t exchange(const char* op, unsigned mask, uint64_t value, int source);
// __syncwarp: the exchange of nothing that orders the memory accesses of the lanes of `mask`.
void syncwarp(unsigned mask);
unsigned lane();
// cp.async: `bytes` from `src` land in `dst` at the wait that covers their group.
void cp_async(void* dst, const void* src, unsigned bytes);
void cp_async_commit();
void cp_async_wait(int newest_pending);
// The launch's dynamic shared memory (`extern __shared__` on the device: the build turns each
// such declaration into a reference to it, and kda_common.cuh's dynamic_shared reaches it): its
// bytes, 128-byte aligned, NaN bytes before every block. An access outside them, either side, is
// an out-of-bounds fault (past its last byte, within 127 bytes where the size is not a multiple of
// 128, is a guard). When the launch asked for none: zero bytes before the guard, or null under a
// sanitizer.
void* dynamic_shared();
unsigned dynamic_shared_bytes();
// Warp gather: every lane of the full warp deposits `bytes` (1 to 32) from `record`; after one
// wait, every lane gets all 32 records, lane by lane, in `all` (32 * bytes). `op` names the
// instruction for messages; like a shuffle's, a lane that does not arrive is a launch error.
void gather(const char* op, const void* record, unsigned bytes, void* all);
// Tensor cores, for kda_common.cuh's wrappers (layouts and the mma's summation order in
// kda_emu_runtime.cpp): ldmatrix.sync.aligned.m8n8.x{count}.shared.b16 (count 1, 2 or 4; each row
// address 16-byte aligned and in shared memory) and
// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 and
// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32, both with c = d. All are gathers of the full
// warp.
void ldmatrix(unsigned count, uint32_t* r, const void* row);
void mma_bf16_16816(float d[4], const uint32_t a[4], const uint32_t b[2]);
void mma_tf32_1688(float d[4], const uint32_t a[4], const uint32_t b[2]);

template <class T>
uint64_t to_bits(T value) {
    static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 8, "a shuffle moves up to 8 bytes");
    uint64_t bits = 0;
    memcpy(&bits, &value, sizeof(T));
    return bits;
}
template <class T>
T from_bits(uint64_t bits) {
    T value;
    memcpy(&value, &bits, sizeof(T));
    return value;
}
inline float bits_to_float(uint32_t bits) {
    float value;
    memcpy(&value, &bits, 4);
    return value;
}
inline uint32_t float_to_bits(float value) {
    uint32_t bits;
    memcpy(&bits, &value, 4);
    return bits;
}
// cvt.rna.tf32.f32: x rounded to tf32 (8 exponent bits, 10 explicit significand bits) to nearest,
// ties away from zero, in a 32-bit register whose 13 low bits are zero; past the largest tf32 it
// is infinite (no .satfinite), a NaN stays a NaN. Adding half a unit of the 13th bit to the
// magnitude's bits carries into the kept bits exactly when the dropped ones are at least half.
inline uint32_t tf32_rna(float x) {
    const uint32_t bits = float_to_bits(x);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fffffffu;
    return (bits + 0x1000u) & 0xffffe000u;
}
}  // namespace kda_emu

inline void __syncthreads() { kda_emu::syncthreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { kda_emu::syncwarp(mask); }

// bf16 with round-to-nearest-even, as <cuda_bf16.h> has it.
struct __nv_bfloat16 {
    unsigned short __x;
};
typedef __nv_bfloat16 nv_bfloat16;

// f16 (<cuda_fp16.h>), stored as its bits; conversions round to nearest even.
struct __half {
    unsigned short __x;
};
typedef __half half;
inline float __half2float(__half h) {
    const uint32_t sign = static_cast<uint32_t>(h.__x & 0x8000u) << 16;
    const uint32_t exponent = (h.__x >> 10) & 0x1fu, mantissa = h.__x & 0x3ffu;
    if (exponent == 0x1f) return kda_emu::bits_to_float(sign | 0x7f800000u | (mantissa << 13));
    if (exponent == 0) {
        // Zero or subnormal: mantissa * 2^-24, exact in float.
        const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
        return sign ? -magnitude : magnitude;
    }
    return kda_emu::bits_to_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}
inline __half __float2half_rn(float f) {
    const uint32_t bits = kda_emu::float_to_bits(f);
    const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
    const uint32_t magnitude = bits & 0x7fffffffu;
    if (magnitude > 0x7f800000u) return {static_cast<unsigned short>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu))};
    if (magnitude >= 0x477ff000u) return {static_cast<unsigned short>(sign | 0x7c00u)};  // rounds past 65504
    if (magnitude < 0x38800000u) {
        // Below the smallest normal (2^-14): a multiple of 2^-24, rounded to nearest even.
        const float scaled = kda_emu::bits_to_float(magnitude) * 16777216.0f;  // exact
        return {static_cast<unsigned short>(sign | static_cast<uint16_t>(nearbyintf(scaled)))};
    }
    const uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
    return {static_cast<unsigned short>(sign | ((rounded - 0x38000000u) >> 13))};
}
inline __half __float2half(float f) { return __float2half_rn(f); }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half __ushort_as_half(unsigned short bits) { return {bits}; }


inline float __bfloat162float(__nv_bfloat16 h) { return kda_emu::bits_to_float(static_cast<uint32_t>(h.__x) << 16); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    const uint32_t bits = kda_emu::float_to_bits(f);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return {static_cast<unsigned short>((bits >> 16) | 0x0040u)};
    const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
    return {static_cast<unsigned short>(rounded >> 16)};
}
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short bits) { return {bits}; }

// The arithmetic of the 16-bit float types: each operation in float, rounded once to the type
// (float's 24 bits are enough for that to be the correctly rounded result, as on the device).
#define KDA_EMU_HALF_ARITHMETIC(T, to_float, from_float)                                         \
    inline T operator+(T a, T b) { return from_float(to_float(a) + to_float(b)); }             \
    inline T operator-(T a, T b) { return from_float(to_float(a) - to_float(b)); }             \
    inline T operator*(T a, T b) { return from_float(to_float(a) * to_float(b)); }             \
    inline T operator/(T a, T b) { return from_float(to_float(a) / to_float(b)); }             \
    inline T operator-(T a) { return {static_cast<unsigned short>(a.__x ^ 0x8000u)}; }         \
    inline T& operator+=(T& a, T b) { return a = a + b; }                                     \
    inline T& operator-=(T& a, T b) { return a = a - b; }                                     \
    inline T& operator*=(T& a, T b) { return a = a * b; }                                     \
    inline T& operator/=(T& a, T b) { return a = a / b; }                                     \
    inline bool operator==(T a, T b) { return to_float(a) == to_float(b); }                   \
    inline bool operator!=(T a, T b) { return to_float(a) != to_float(b); }                   \
    inline bool operator<(T a, T b) { return to_float(a) < to_float(b); }                     \
    inline bool operator<=(T a, T b) { return to_float(a) <= to_float(b); }                   \
    inline bool operator>(T a, T b) { return to_float(a) > to_float(b); }                     \
    inline bool operator>=(T a, T b) { return to_float(a) >= to_float(b); }
KDA_EMU_HALF_ARITHMETIC(__half, __half2float, __float2half_rn)
KDA_EMU_HALF_ARITHMETIC(__nv_bfloat16, __bfloat162float, __float2bfloat16_rn)
#undef KDA_EMU_HALF_ARITHMETIC
inline __half __hadd(__half a, __half b) { return a + b; }
inline __half __hsub(__half a, __half b) { return a - b; }
inline __half __hmul(__half a, __half b) { return a * b; }
inline __half __hdiv(__half a, __half b) { return a / b; }
inline __half __hfma(__half a, __half b, __half c) {
    // One rounding, as the device's fused multiply-add: the product of two halves is exact in float.
    return __float2half_rn(fmaf(__half2float(a), __half2float(b), __half2float(c)));
}
inline __half __hneg(__half a) { return -a; }
inline __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) { return a + b; }
inline __nv_bfloat16 __hmul(__nv_bfloat16 a, __nv_bfloat16 b) { return a * b; }
inline float __low2float(__half a) { return __half2float(a); }

// fp8 (<cuda_fp8.h>): the OCP formats E4M3 (bias 7, no infinity, NaN S.1111.111, largest 448) and
// E5M2 (bias 15, IEEE-style infinities and NaNs, largest 57344), as their bits. Conversions from
// float round to nearest even; __NV_SATFINITE takes what rounds past the largest finite value to
// it, __NV_NOSAT to infinity (E5M2) or NaN (E4M3). The types' constructors saturate, as CUDA's.
typedef unsigned char __nv_fp8_storage_t;
enum __nv_saturation_t { __NV_NOSAT, __NV_SATFINITE };
enum __nv_fp8_interpretation_t { __NV_E4M3, __NV_E5M2 };

namespace kda_emu {
// The format's exponent bias, significand bits, largest finite value (and its bits) and NaN.
struct Fp8Format {
    int bias, significand_bits;
    double largest;
    unsigned char largest_bits, nan;
};
inline Fp8Format fp8_format(__nv_fp8_interpretation_t format) {
    return format == __NV_E4M3 ? Fp8Format{7, 3, 448.0, 0x7e, 0x7f} : Fp8Format{15, 2, 57344.0, 0x7b, 0x7e};
}
inline float fp8_to_float(__nv_fp8_storage_t bits, __nv_fp8_interpretation_t interpretation) {
    const Fp8Format format = fp8_format(interpretation);
    const int exponent_bits = 7 - format.significand_bits;
    const unsigned exponent = (bits >> format.significand_bits) & ((1u << exponent_bits) - 1);
    const unsigned significand = bits & ((1u << format.significand_bits) - 1);
    const double sign = (bits & 0x80) ? -1.0 : 1.0;
    const unsigned top = (1u << exponent_bits) - 1;
    if (interpretation == __NV_E4M3 && exponent == top && significand == (1u << format.significand_bits) - 1)
        return static_cast<float>(sign * NAN);
    if (interpretation == __NV_E5M2 && exponent == top)
        return significand == 0 ? static_cast<float>(sign * INFINITY) : static_cast<float>(sign * NAN);
    const double scale = ldexp(1.0, -format.significand_bits);
    if (exponent == 0) return static_cast<float>(sign * significand * scale * ldexp(1.0, 1 - format.bias));
    return static_cast<float>(sign * (1.0 + significand * scale) * ldexp(1.0, static_cast<int>(exponent) - format.bias));
}
}  // namespace kda_emu

inline __nv_fp8_storage_t __nv_cvt_float_to_fp8(float x, __nv_saturation_t saturate,
                                               __nv_fp8_interpretation_t interpretation) {
    const kda_emu::Fp8Format format = kda_emu::fp8_format(interpretation);
    const unsigned char sign = signbit(x) ? 0x80 : 0x00;
    if (isnan(x)) return static_cast<unsigned char>(sign | format.nan);
    const double magnitude = fabs(static_cast<double>(x));
    const int smallest_exponent = 1 - format.bias;
    // The step of the values around `magnitude`, then the nearest multiple of it (ties to even).
    const int exponent = magnitude < ldexp(1.0, smallest_exponent) ? smallest_exponent : ilogb(magnitude);
    const double step = ldexp(1.0, exponent - format.significand_bits);
    const double rounded = isinf(magnitude) ? magnitude : nearbyint(magnitude / step) * step;
    if (rounded > format.largest) {
        if (saturate == __NV_SATFINITE) return static_cast<unsigned char>(sign | format.largest_bits);
        return static_cast<unsigned char>(sign | (interpretation == __NV_E5M2 ? 0x7c : format.nan));
    }
    if (rounded < ldexp(1.0, smallest_exponent))
        return static_cast<unsigned char>(sign | static_cast<unsigned>(rounded / ldexp(1.0, smallest_exponent - format.significand_bits)));
    const int e = ilogb(rounded);
    const unsigned significand = static_cast<unsigned>(rounded / ldexp(1.0, e - format.significand_bits)) -
                                 (1u << format.significand_bits);
    return static_cast<unsigned char>(sign | ((e + format.bias) << format.significand_bits) | significand);
}

struct __nv_fp8_e4m3 {
    __nv_fp8_storage_t __x;
    __nv_fp8_e4m3() = default;
    explicit __nv_fp8_e4m3(float f) : __x(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3)) {}
    explicit operator float() const { return kda_emu::fp8_to_float(__x, __NV_E4M3); }
};
struct __nv_fp8_e5m2 {
    __nv_fp8_storage_t __x;
    __nv_fp8_e5m2() = default;
    explicit __nv_fp8_e5m2(float f) : __x(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E5M2)) {}
    explicit operator float() const { return kda_emu::fp8_to_float(__x, __NV_E5M2); }
};

inline float __uint_as_float(unsigned int bits) { return kda_emu::bits_to_float(bits); }
inline unsigned int __float_as_uint(float value) { return kda_emu::float_to_bits(value); }
inline float __int_as_float(int bits) { return kda_emu::bits_to_float(static_cast<uint32_t>(bits)); }
inline int __float_as_int(float value) { return static_cast<int>(kda_emu::float_to_bits(value)); }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
// CUDA's global min and max overloads, in the common type of their operands.
template <class A, class B>
std::common_type_t<A, B> min(A a, B b) {
    return b < a ? b : a;
}
template <class A, class B>
std::common_type_t<A, B> max(A a, B b) {
    return a < b ? b : a;
}
template <class T>
T __ldg(const T* p) {
    return *p;
}

// The rest of the device API: the paired 16-bit floats, warp shuffles and votes, math, atomics.
#include "kda_emu_half2.h"
#include "kda_emu_warp.h"
#include "kda_emu_math.h"
#include "kda_emu_atomic.h"

// ---- Inline PTX: a located error, not an assembler's. ----
// A kernel's `asm("...")` or `asm volatile("...")` holds PTX, which no host assembler takes: left
// to the C++ compiler it fails in the assembler, with no line of the kernel. As this expansion
// (after every header of the shim, whose system headers write `__asm__`) it is an undeclared name
// at the statement's own line, the first error of the module's build.
#define asm kda_emu_inline_ptx_is_not_emulated_guard_it_with_if_not_defined_KDA_EMULATION,

// ---- Entries: how the runtime finds a kernel by its extern "C" name and calls it. ----
namespace kda_emu {
using Invoker = void (*)(void* const* args);

// The C spelling of a parameter type, as the manifest's `params` spell it ("const bf16*", "u32").
// Constant: the names below are then read-only data, not static storage of the unit that the
// build would count (and the runtime fill) as __shared__ memory.
template <class T>
struct TypeName {
    static constexpr const char* get() { return "unsupported"; }
};
// One row per C type of kda-types' table (KDA_EMU_TYPE_NAMES, generated): the type as a scalar,
// a read-only buffer and a written one.
#define KDA_EMU_TYPE_NAME(type, name)                                  \
    template <>                                                        \
    struct TypeName<type> {                                            \
        static constexpr const char* get() { return name; }            \
    };                                                                 \
    template <>                                                        \
    struct TypeName<const type*> {                                     \
        static constexpr const char* get() { return "const " name "*"; } \
    };                                                                 \
    template <>                                                        \
    struct TypeName<type*> {                                           \
        static constexpr const char* get() { return name "*"; }        \
    };
KDA_EMU_TYPE_NAMES(KDA_EMU_TYPE_NAME)
#undef KDA_EMU_TYPE_NAME

// What the runtime needs of a parameter to stage the view it points to for a launch (with a
// guard page after it): the element size, which turns a faulting address into an element index,
// and whether the kernel may write through it, which decides whether the view is copied back.
// A scalar has element size 0; a `void` buffer's elements are its bytes, as its view measures it.
struct ParamLayout {
    unsigned element_size;
    bool written;
};
template <class P>
constexpr ParamLayout param_layout() {
    if constexpr (std::is_pointer<P>::value) {
        using T = std::remove_pointer_t<P>;
        if constexpr (std::is_void<T>::value) {
            return {1, !std::is_const<T>::value};
        } else {
            return {static_cast<unsigned>(sizeof(T)), !std::is_const<T>::value};
        }
    } else {
        return {0, false};
    }
}

template <class F>
struct Entry;
template <class... P>
struct Entry<void (*)(P...)> {
    template <void (*F)(P...), size_t... I>
    static void call(void* const* args, std::index_sequence<I...>) {
        F(*static_cast<std::remove_cv_t<P>*>(args[I])...);
    }
    template <void (*F)(P...)>
    static void invoke(void* const* args) {
        call<F>(args, std::index_sequence_for<P...>{});
    }
    static constexpr unsigned arity = sizeof...(P);
    static const char* const* param_types() {
        static constexpr const char* names[sizeof...(P) + 1] = {TypeName<P>::get()..., nullptr};
        return names;
    }
    static const ParamLayout* param_layouts() {
        static constexpr ParamLayout layouts[sizeof...(P) + 1] = {param_layout<P>()..., ParamLayout{}};
        return layouts;
    }
};

// Adds an entry to this library's registry (kda_emu_runtime.cpp).
void register_entry(const char* name, Invoker invoke, unsigned arity, const char* const* param_types,
                    const ParamLayout* layouts);
}  // namespace kda_emu

// Defines `registration`, the function that registers the kernel `...` (its extern "C" name, or a
// template instantiation such as `scale<float, 128>`, which this instantiates) under the name
// `label`. The unit the build generates for a module defines one per entry, each hidden and in a
// section of its own. An entry's library is linked with its registration alone as the runtime's
// `kda_emu_entry_registration`, which the runtime calls at load time: nothing else of the module
// is reached, so the linker drops every other kernel and its __shared__ storage
// (kda-emu/src/toolchain.rs).
#define KDA_EMU_ENTRY_AS(registration, label, ...)                                                      \
    extern "C" __attribute__((visibility("hidden"))) void registration() {                              \
        ::kda_emu::register_entry(                                                                      \
            label, &::kda_emu::Entry<decltype(&__VA_ARGS__)>::template invoke<&__VA_ARGS__>,           \
            ::kda_emu::Entry<decltype(&__VA_ARGS__)>::arity, ::kda_emu::Entry<decltype(&__VA_ARGS__)>::param_types(), \
            ::kda_emu::Entry<decltype(&__VA_ARGS__)>::param_layouts());                                  \
    }
