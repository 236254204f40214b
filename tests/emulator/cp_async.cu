// cp.async through the emulator's own calls (kda_emu::cp_async and friends): the destination
// reads as NaN bytes until the wait that covers its group. On a GPU, a plain copy stands in.

// Each thread copies 16 bytes of `src` into shared memory and records the destination's bits
// before the wait (`before`) and after it (`after`).
extern "C" __global__ void cp_async_window(const float* src, unsigned int* before, unsigned int* after,
                                           unsigned int n) {
    __shared__ float4 stage[32];
    const unsigned int t = threadIdx.x;
    if (t >= n || t >= 32) return;
#if defined(KDA_EMULATION)
    kda_emu::cp_async(&stage[t], &src[4 * t], 16);
    kda_emu::cp_async_commit();
    before[4 * t + 0] = __float_as_uint(stage[t].x);
    before[4 * t + 1] = __float_as_uint(stage[t].y);
    before[4 * t + 2] = __float_as_uint(stage[t].z);
    before[4 * t + 3] = __float_as_uint(stage[t].w);
    kda_emu::cp_async_wait(0);
#else
    for (int k = 0; k < 4; ++k) before[4 * t + k] = 0xffffffffu;
    stage[t] = make_float4(src[4 * t], src[4 * t + 1], src[4 * t + 2], src[4 * t + 3]);
#endif
    after[4 * t + 0] = __float_as_uint(stage[t].x);
    after[4 * t + 1] = __float_as_uint(stage[t].y);
    after[4 * t + 2] = __float_as_uint(stage[t].z);
    after[4 * t + 3] = __float_as_uint(stage[t].w);
}

// A 16-byte copy from `src + 1`: 4-byte aligned only.
extern "C" __global__ void cp_async_misaligned(const float* src, unsigned int* out, unsigned int n) {
    __shared__ float4 stage[32];
    const unsigned int t = threadIdx.x;
    if (t >= n || t >= 32) return;
#if defined(KDA_EMULATION)
    kda_emu::cp_async(&stage[t], &src[4 * t + 1], 16);
    kda_emu::cp_async_commit();
    kda_emu::cp_async_wait(0);
#else
    stage[t] = make_float4(src[4 * t + 1], src[4 * t + 2], src[4 * t + 3], src[4 * t + 4]);
#endif
    out[4 * t] = __float_as_uint(stage[t].x);
}

// A copy of no bytes, which cp.async does not have (4, 8 or 16).
extern "C" __global__ void cp_async_empty(const float* src, unsigned int* out) {
    __shared__ float4 stage[1];
#if defined(KDA_EMULATION)
    kda_emu::cp_async(&stage[0], src, 0);
    kda_emu::cp_async_commit();
    kda_emu::cp_async_wait(0);
#endif
    out[0] = __float_as_uint(stage[0].x);
}
