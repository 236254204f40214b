// CUDA's warp shuffles and votes. Each is an exchange every lane of its mask must join
// (kda_emu_runtime.cpp), so a lane that skips it, returned before it or waits elsewhere is a
// launch error rather than a hang; like the hardware's, none orders memory accesses (__syncwarp,
// kda_emu.h, does). Included by kda_emu.h.
#pragma once

namespace kda_emu {
// A vote: every lane of `mask` deposits `predicate`; each gets the mask of the lanes whose
// predicate was true. `op` names the intrinsic for messages (kda_emu_runtime.cpp).
unsigned ballot(const char* op, unsigned mask, bool predicate);
// The lanes of the caller's warp that have not returned: the emulator runs a warp's lanes as
// threads of their own, so every lane still in the kernel counts as converged with the caller.
unsigned active_lanes();

enum class ShuffleMode { up, down, butterfly, index };

// The lane a shuffle of the calling lane reads, as shfl.sync computes it (PTX ISA, shfl.sync) from
// the operand `b` and the control word CUDA builds from `width`: c[12:8] = 32 - width marks the
// lane bits that select the segment, c[4:0] the clamp (0 for up, 31 for the others). A source
// before the segment (up) or past it (down, xor) reads the caller's own value: -1. A butterfly
// whose partner lies in an earlier segment reads it, as on the device.
inline int shuffle_source(ShuffleMode mode, unsigned b, int width) {
    const int lane = static_cast<int>(kda_emu::lane());
    const int segment = (warpSize - width) & 0x1f;
    const int clamp = mode == ShuffleMode::up ? 0 : 0x1f;
    const int offset = static_cast<int>(b & 0x1f);
    const int first = lane & segment;
    const int bound = first | (clamp & ~segment);
    switch (mode) {
        case ShuffleMode::up:
            return lane - offset >= bound ? lane - offset : -1;
        case ShuffleMode::down:
            return lane + offset <= bound ? lane + offset : -1;
        case ShuffleMode::butterfly:
            return (lane ^ offset) <= bound ? lane ^ offset : -1;
        case ShuffleMode::index:
            break;
    }
    return first | (offset & ~segment);
}

template <class T>
T shuffle(const char* op, unsigned mask, T value, ShuffleMode mode, unsigned b, int width) {
    return from_bits<T>(exchange(op, mask, to_bits(value), shuffle_source(mode, b, width)));
}
}  // namespace kda_emu

// Any trivially copyable type of up to 8 bytes (the integers, float, double, __half, __half2,
// __nv_bfloat16, __nv_bfloat162), as CUDA's overloads take.
template <class T>
T __shfl_sync(unsigned mask, T value, int source_lane, int width = warpSize) {
    return kda_emu::shuffle("__shfl_sync", mask, value, kda_emu::ShuffleMode::index, static_cast<unsigned>(source_lane),
                            width);
}
template <class T>
T __shfl_up_sync(unsigned mask, T value, unsigned delta, int width = warpSize) {
    return kda_emu::shuffle("__shfl_up_sync", mask, value, kda_emu::ShuffleMode::up, delta, width);
}
template <class T>
T __shfl_down_sync(unsigned mask, T value, unsigned delta, int width = warpSize) {
    return kda_emu::shuffle("__shfl_down_sync", mask, value, kda_emu::ShuffleMode::down, delta, width);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = warpSize) {
    return kda_emu::shuffle("__shfl_xor_sync", mask, value, kda_emu::ShuffleMode::butterfly,
                            static_cast<unsigned>(lane_mask), width);
}

inline unsigned __ballot_sync(unsigned mask, int predicate) {
    return kda_emu::ballot("__ballot_sync", mask, predicate != 0);
}
inline int __any_sync(unsigned mask, int predicate) { return kda_emu::ballot("__any_sync", mask, predicate != 0) != 0; }
inline int __all_sync(unsigned mask, int predicate) {
    return kda_emu::ballot("__all_sync", mask, predicate != 0) == mask;
}
inline unsigned __activemask() { return kda_emu::active_lanes(); }
