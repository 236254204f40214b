// CUDA's atomic functions for sm_90 (CUDA C++ Programming Guide, "Atomic Functions"; PTX ISA
// `atom`): every overload CUDA declares, with the `_block` and `_system` variants of each, the
// same operation here, where one block runs at a time on one host. Included by kda_emu.h.
//
// Each is a GCC `__atomic` builtin on the location, relaxed as CUDA's atomics are (they order no
// other access): ThreadSanitizer sees an atomic access, so atomics of many threads on one word are
// no race, while a plain access no barrier orders against them still is. What the builtins lack
// (min and max, inc and dec, the floating adds) is a compare-exchange loop on the location, which
// compares bits, so a NaN or a signed zero in memory cannot loop forever.
#pragma once

namespace kda_emu {
// Whether the `bytes` at `address` lie in the block's shared memory, static or dynamic
// (kda_emu_runtime.cpp).
bool in_shared_memory(const void* address, size_t bytes);

// Stores `next(old)` at `address` atomically; the old value.
template <class T, class F>
T atomic_update(T* address, F next) {
    T old;
    __atomic_load(address, &old, __ATOMIC_RELAXED);
    T desired = next(old);
    while (!__atomic_compare_exchange(address, &old, &desired, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        desired = next(old);
    return old;
}

template <class T>
T atomic_exchange(T* address, T value) {
    T old;
    __atomic_exchange(address, &value, &old, __ATOMIC_RELAXED);
    return old;
}

template <class T>
T atomic_compare_exchange(T* address, T compare, T value) {
    // On failure `compare` receives the value found; on success it already is that value.
    __atomic_compare_exchange(address, &compare, &value, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return compare;
}

// atom.add.f32: to nearest even; on global memory (not shared) subnormal inputs and results are
// flushed to zero of their sign (PTX ISA, atom).
inline float atomic_add_f32(float* address, float value) {
    if (in_shared_memory(address, sizeof(float)))
        return atomic_update(address, [value](float old) { return old + value; });
    const float operand = flush_to_zero(value);
    return atomic_update(address, [operand](float old) { return flush_to_zero(flush_to_zero(old) + operand); });
}
}  // namespace kda_emu

// `name(T* address, T value)` returning `expression`, and its `_block` and `_system` variants.
#define KDA_EMU_ATOMIC(name, T, expression)                                        \
    inline T name(T* address, T value) { return expression; }                      \
    inline T name##_block(T* address, T value) { return name(address, value); }    \
    inline T name##_system(T* address, T value) { return name(address, value); }
// One builtin `__atomic_fetch_<op>`.
#define KDA_EMU_ATOMIC_FETCH(name, op, T) \
    KDA_EMU_ATOMIC(name, T, __atomic_fetch_##op(address, value, __ATOMIC_RELAXED))
// A compare-exchange loop storing `next` (of `old` and `value`).
#define KDA_EMU_ATOMIC_LOOP(name, T, next) \
    KDA_EMU_ATOMIC(name, T, kda_emu::atomic_update(address, [value](T old) { return next; }))
#define KDA_EMU_ATOMIC_CAS(T)                                                                                       \
    inline T atomicCAS(T* address, T compare, T value) { return kda_emu::atomic_compare_exchange(address, compare, value); } \
    inline T atomicCAS_block(T* address, T compare, T value) { return atomicCAS(address, compare, value); }               \
    inline T atomicCAS_system(T* address, T compare, T value) { return atomicCAS(address, compare, value); }
// The integer families, by the types CUDA declares each for.
#define KDA_EMU_ATOMIC_ADD_SUB(T) \
    KDA_EMU_ATOMIC_FETCH(atomicAdd, add, T) KDA_EMU_ATOMIC_FETCH(atomicSub, sub, T)
#define KDA_EMU_ATOMIC_MIN_MAX(T)                                      \
    KDA_EMU_ATOMIC_LOOP(atomicMin, T, value < old ? value : old)       \
    KDA_EMU_ATOMIC_LOOP(atomicMax, T, value > old ? value : old)
#define KDA_EMU_ATOMIC_BITWISE(T)                                                                     \
    KDA_EMU_ATOMIC_FETCH(atomicAnd, and, T)                                                           \
    KDA_EMU_ATOMIC_FETCH(atomicOr, or, T) KDA_EMU_ATOMIC_FETCH(atomicXor, xor, T)
#define KDA_EMU_ATOMIC_EXCH(T) KDA_EMU_ATOMIC(atomicExch, T, kda_emu::atomic_exchange(address, value))
// A floating add in the type's own arithmetic, to nearest even, subnormals kept (atom.add.f64 and
// atom.add.noftz of the 16-bit types; a pair adds element-wise, one word).
#define KDA_EMU_ATOMIC_FLOAT_ADD(T) KDA_EMU_ATOMIC_LOOP(atomicAdd, T, old + value)

KDA_EMU_ATOMIC_ADD_SUB(int)
KDA_EMU_ATOMIC_ADD_SUB(unsigned int)
KDA_EMU_ATOMIC_FETCH(atomicAdd, add, unsigned long long int)
KDA_EMU_ATOMIC(atomicAdd, float, kda_emu::atomic_add_f32(address, value))
KDA_EMU_ATOMIC_FLOAT_ADD(double)
KDA_EMU_ATOMIC_FLOAT_ADD(__half)
KDA_EMU_ATOMIC_FLOAT_ADD(__half2)
KDA_EMU_ATOMIC_FLOAT_ADD(__nv_bfloat16)
KDA_EMU_ATOMIC_FLOAT_ADD(__nv_bfloat162)
// atom.global.v2.f32.add and .v4 (sm_90, global memory): each element its own atomic add.
KDA_EMU_ATOMIC(atomicAdd, float2,
               (float2{atomicAdd(&address->x, value.x), atomicAdd(&address->y, value.y)}))
KDA_EMU_ATOMIC(atomicAdd, float4,
               (float4{atomicAdd(&address->x, value.x), atomicAdd(&address->y, value.y),
                       atomicAdd(&address->z, value.z), atomicAdd(&address->w, value.w)}))

KDA_EMU_ATOMIC_EXCH(int)
KDA_EMU_ATOMIC_EXCH(unsigned int)
KDA_EMU_ATOMIC_EXCH(unsigned long long int)
KDA_EMU_ATOMIC_EXCH(float)

KDA_EMU_ATOMIC_MIN_MAX(int)
KDA_EMU_ATOMIC_MIN_MAX(unsigned int)
KDA_EMU_ATOMIC_MIN_MAX(unsigned long long int)
KDA_EMU_ATOMIC_MIN_MAX(long long int)

KDA_EMU_ATOMIC_BITWISE(int)
KDA_EMU_ATOMIC_BITWISE(unsigned int)
KDA_EMU_ATOMIC_BITWISE(unsigned long long int)
KDA_EMU_ATOMIC_BITWISE(long long int)

// atom.inc: ((old >= value) ? 0 : old + 1); atom.dec: ((old == 0 || old > value) ? value : old - 1).
KDA_EMU_ATOMIC_LOOP(atomicInc, unsigned int, old >= value ? 0u : old + 1u)
KDA_EMU_ATOMIC_LOOP(atomicDec, unsigned int, old == 0u || old > value ? value : old - 1u)

KDA_EMU_ATOMIC_CAS(int)
KDA_EMU_ATOMIC_CAS(unsigned int)
KDA_EMU_ATOMIC_CAS(unsigned long long int)
KDA_EMU_ATOMIC_CAS(unsigned short int)

#undef KDA_EMU_ATOMIC_FLOAT_ADD
#undef KDA_EMU_ATOMIC_EXCH
#undef KDA_EMU_ATOMIC_BITWISE
#undef KDA_EMU_ATOMIC_MIN_MAX
#undef KDA_EMU_ATOMIC_ADD_SUB
#undef KDA_EMU_ATOMIC_CAS
#undef KDA_EMU_ATOMIC_LOOP
#undef KDA_EMU_ATOMIC_FETCH
#undef KDA_EMU_ATOMIC
