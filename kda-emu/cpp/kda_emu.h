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
// (tf32) are gathers every lane of the warp must join, reached through kda_common.cuh's wrappers. What this header does not
// declare (atomics, ballots, other tensor-core instructions, inline PTX) does not compile, so a
// module that needs it is reported at build time instead of being emulated wrongly.
#pragma once

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>
#include <utility>

// Kernels guard the few lines C++ cannot compile (inline PTX) with
// `#if !defined(__CUDA_ARCH__) && defined(KDA_EMULATION)`.
#define KDA_EMULATION 1

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
// Static storage of the one block that runs at a time. The build collects every static of the
// entry's unit (compiled with -fdata-sections) into the section `kda_emu_shared`, which the
// runtime fills with NaN bytes before each block and measures against the device's limit.
// `used`: the runtime writes it behind the compiler's back, so an array no thread writes must not
// be folded to its zero initializer (or dropped), which would hide the NaN of an unwritten read.
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
// The launch's dynamic shared memory (`extern __shared__` on the device, reached through
// kda_common.cuh's dynamic_shared): its bytes, 128-byte aligned, NaN bytes before every block;
// null when the launch asked for none.
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
// The source lane of a shuffle within segments of `width` lanes; -1 keeps the caller's value.
inline int segment_lane(int target, int width) {
    const int base = static_cast<int>(lane()) & ~(width - 1);
    return base + (target & (width - 1));
}
}  // namespace kda_emu

inline void __syncthreads() { kda_emu::syncthreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { kda_emu::syncwarp(mask); }

template <class T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = warpSize) {
    const int source = kda_emu::segment_lane(static_cast<int>(kda_emu::lane()) ^ lane_mask, width);
    return kda_emu::from_bits<T>(kda_emu::exchange("__shfl_xor_sync", mask, kda_emu::to_bits(value), source));
}
template <class T>
T __shfl_sync(unsigned mask, T value, int source_lane, int width = warpSize) {
    const int source = kda_emu::segment_lane(source_lane, width);
    return kda_emu::from_bits<T>(kda_emu::exchange("__shfl_sync", mask, kda_emu::to_bits(value), source));
}
template <class T>
T __shfl_down_sync(unsigned mask, T value, unsigned delta, int width = warpSize) {
    const int in_segment = static_cast<int>(kda_emu::lane()) % width;
    const int source = in_segment + static_cast<int>(delta) < width
                           ? static_cast<int>(kda_emu::lane() + delta)
                           : -1;
    return kda_emu::from_bits<T>(kda_emu::exchange("__shfl_down_sync", mask, kda_emu::to_bits(value), source));
}

// bf16 with round-to-nearest-even, as <cuda_bf16.h> has it.
struct __nv_bfloat16 {
    unsigned short __x;
};
typedef __nv_bfloat16 nv_bfloat16;

inline float __bfloat162float(__nv_bfloat16 h) { return kda_emu::bits_to_float(static_cast<uint32_t>(h.__x) << 16); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    const uint32_t bits = kda_emu::float_to_bits(f);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return {static_cast<unsigned short>((bits >> 16) | 0x0040u)};
    const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
    return {static_cast<unsigned short>(rounded >> 16)};
}
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short bits) { return {bits}; }

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
#define KDA_EMU_TYPE_NAME(type, name)                          \
    template <>                                                \
    struct TypeName<type> {                                    \
        static constexpr const char* get() { return name; }    \
    };
KDA_EMU_TYPE_NAME(const __nv_bfloat16*, "const bf16*")
KDA_EMU_TYPE_NAME(__nv_bfloat16*, "bf16*")
KDA_EMU_TYPE_NAME(const float*, "const f32*")
KDA_EMU_TYPE_NAME(float*, "f32*")
KDA_EMU_TYPE_NAME(const unsigned int*, "const u32*")
KDA_EMU_TYPE_NAME(unsigned int*, "u32*")
KDA_EMU_TYPE_NAME(unsigned int, "u32")
KDA_EMU_TYPE_NAME(int, "i32")
KDA_EMU_TYPE_NAME(unsigned long, "u64")
KDA_EMU_TYPE_NAME(unsigned long long, "u64")
KDA_EMU_TYPE_NAME(float, "f32")
#undef KDA_EMU_TYPE_NAME

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
};

// Adds an entry to this module's registry (kda_emu_runtime.cpp), at load time.
struct Registrar {
    Registrar(const char* name, Invoker invoke, unsigned arity, const char* const* param_types);
};
}  // namespace kda_emu

// Registers the kernel `name` (its extern "C" name) in the unit the build generates for it. The
// registrar lives in an anonymous namespace: its storage is not mistaken for __shared__ storage.
#define KDA_EMU_ENTRY(name)                                                                      \
    namespace {                                                                                  \
    const ::kda_emu::Registrar kda_emu_registrar_##name(                                         \
        #name, &::kda_emu::Entry<decltype(&name)>::template invoke<&name>,                     \
        ::kda_emu::Entry<decltype(&name)>::arity, ::kda_emu::Entry<decltype(&name)>::param_types()); \
    }
