// Shared helpers of the [glm5next_kda] kernels (docs/kernels.md). Kept light: <cuda_bf16.h> and
// a few inline device functions, so that each module compiles fast.
//
// Every module is built with nvcc's defaults (`-O3`): nvcc may contract an `a * b + c` into one
// fused multiply-add, which the ABI's tolerances allow everywhere but in the two bit-identical
// pairs; those write each multiply-add as an explicit `__fmaf_rn`, so the build's `--fmad` setting
// cannot split them. Sums run in the reference's order (`acc = acc + x * y`, ascending) wherever
// the kernels have no reason to reorder them.
#pragma once

#include <cuda_bf16.h>
#include <stdint.h>

#include <type_traits>

typedef __nv_bfloat16 bf16;
typedef unsigned int u32;

// Constants shared with the Rust side come from kernels.toml [defines] (-DNAME=VALUE); each module
// checks the ones it uses with an #error guard.

// Exact bf16 -> f32 widening of the two halves of a 32-bit word (element 0 in the low half).
__device__ __forceinline__ float bf16_lo(uint32_t word) { return __uint_as_float(word << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t word) { return __uint_as_float(word & 0xffff0000u); }

__device__ __forceinline__ float widen(bf16 x) { return __bfloat162float(x); }

// Round to nearest even (the ABI's only f32 -> bf16 rounding).
__device__ __forceinline__ bf16 narrow(float x) { return __float2bfloat16_rn(x); }

// Two values rounded to bf16 as one 32-bit word, the first at the lower address.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    return static_cast<uint32_t>(__bfloat16_as_ushort(narrow(lo))) |
           (static_cast<uint32_t>(__bfloat16_as_ushort(narrow(hi))) << 16);
}

// σ(x) = 1/(1+e^{-x}), with the accurate expf (no fast-math intrinsics anywhere in this project).
__device__ __forceinline__ float sigmoidf_acc(float x) { return 1.0f / (1.0f + expf(-x)); }

// Sum over a full warp; every lane gets the total. The order is a fixed butterfly, used only where
// the ABI leaves the reduction order free (the norms).
__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
    return x;
}

// The warp's index in the grid (1-D launches) and the number of warps of the grid: for the kernels
// that give each unit of work (a row, a head) one warp and grid-stride over the rest.
__device__ __forceinline__ size_t warp_index() {
    return (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
}
__device__ __forceinline__ size_t warp_count() { return (static_cast<size_t>(gridDim.x) * blockDim.x) >> 5; }

// Runs body(D) with the head dimension D = head_dim as a compile-time constant
// (std::integral_constant), for the head dims the kernels take (32, 64 and 128; any other value
// runs as 128, so callers check it first): for the kernels that keep a head's values in registers,
// whose loops must unroll whole.
template <typename Body>
__device__ __forceinline__ void with_head_dim(u32 head_dim, Body body) {
    switch (head_dim) {
        case 32: body(std::integral_constant<u32, 32>{}); break;
        case 64: body(std::integral_constant<u32, 64>{}); break;
        default: body(std::integral_constant<u32, 128>{}); break;
    }
}

// Asynchronous 16-byte global -> shared copy (sm_80+), bypassing L1: for streamed weights.
#if defined(KDA_EMULATION)
// Built as C++ by the emulator (kda-emu/cpp), where inline PTX does not compile: the same
// semantics, the copy landing at the wait that covers its group.
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem) { kda_emu::cp_async(smem, gmem, 16); }
__device__ __forceinline__ void cp_async_commit() { kda_emu::cp_async_commit(); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { kda_emu::cp_async_wait(N); }
#else
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem) {
    const u32 dst = static_cast<u32>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
#endif

// The launch's dynamic shared memory (LaunchGeometry::shared_mem_bytes): `dynamic_shared()` its
// first byte, 16-byte aligned, `dynamic_shared_bytes()` how many bytes the launch gave it, for the
// kernel to check before use (a launch with fewer writes nothing). Beyond 48 KiB a block gets it by
// opt-in, which the CUDA backend makes for the launch.
#if defined(KDA_EMULATION)
__device__ __forceinline__ unsigned char* dynamic_shared() {
    return static_cast<unsigned char*>(kda_emu::dynamic_shared());
}
__device__ __forceinline__ u32 dynamic_shared_bytes() { return kda_emu::dynamic_shared_bytes(); }
#else
extern __shared__ uint4 kda_dynamic_shared[];
__device__ __forceinline__ unsigned char* dynamic_shared() {
    return reinterpret_cast<unsigned char*>(kda_dynamic_shared);
}
__device__ __forceinline__ u32 dynamic_shared_bytes() {
    u32 bytes;
    asm("mov.u32 %0, %%dynamic_smem_size;\n" : "=r"(bytes));
    return bytes;
}
#endif

// A hint that the 128-byte line holding `p` will be read soon: prefetch.global.L2 fetches it from
// HBM into L2 without waiting for it. It changes no result, so the emulator, which has no memory
// hierarchy to warm, reads one byte there instead, so that a sanitizer reports a prefetch outside
// the buffers: `p` must point into a buffer the kernel may read.
#if defined(KDA_EMULATION)
__device__ __forceinline__ void prefetch_l2(const void* p) { (void)*static_cast<const volatile char*>(p); }
#else
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p)); }
#endif

// Tensor cores (sm_80+): ldmatrix and mma.m16n8k16 with bf16 inputs and f32 accumulators, the
// fragment layouts of the PTX ISA ("Warp-level matrix load instruction: ldmatrix", "Matrix
// Fragments for mma.m16n8k16 with floating point type"). Each is a warp collective: every lane of
// the full warp must execute it (the emulator reports a lane that does not as a launch error).
//
// ldmatrix.sync.aligned.m8n8.x4.shared.b16 (no .trans): lanes 8i..8i+7 give the addresses of the
// 8 rows (16 bytes each, in shared memory) of matrix i; r[i] of lane l gets row l/4, elements
// 2(l%4) and 2(l%4)+1 of matrix i (the lower-indexed element in the low 16 bits).
//   ldmatrix_x4(u32 (&r)[4], const void* smem_row);
// The same with two matrices: lanes 0..15 give the addresses (lanes 16..31's are ignored).
//   ldmatrix_x2(u32 (&r)[2], const void* smem_row);
// d += a·b for one 16×8×16 tile (mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 with c = d),
// every lane of the warp taking part, with g = lane/4, t = lane%4:
// a[0] = A[g][2t..2t+1], a[1] = A[g+8][2t..2t+1], a[2] = A[g][2t+8..2t+9], a[3] = A[g+8][2t+8..2t+9];
// b[0] = B[2t..2t+1][g], b[1] = B[2t+8..2t+9][g]  (two bf16 per u32, lower index in the low half);
// d[0] = D[g][2t], d[1] = D[g][2t+1], d[2] = D[g+8][2t], d[3] = D[g+8][2t+1].
//   mma_bf16_16816(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]);
// The order of the 16 products' sum is the tensor core's own (the emulator's is defined in
// kda-emu/cpp/kda_emu_runtime.cpp): results are held to the ABI's tolerances, not to bits.
#if defined(KDA_EMULATION)
__device__ __forceinline__ void ldmatrix_x4(u32 (&r)[4], const void* smem_row) { kda_emu::ldmatrix(4, r, smem_row); }
__device__ __forceinline__ void ldmatrix_x2(u32 (&r)[2], const void* smem_row) { kda_emu::ldmatrix(2, r, smem_row); }
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
    kda_emu::mma_bf16_16816(d, a, b);
}
#else
__device__ __forceinline__ void ldmatrix_x4(u32 (&r)[4], const void* smem_row) {
    const u32 addr = static_cast<u32>(__cvta_generic_to_shared(smem_row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}
__device__ __forceinline__ void ldmatrix_x2(u32 (&r)[2], const void* smem_row) {
    const u32 addr = static_cast<u32>(__cvta_generic_to_shared(smem_row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(addr)
                 : "memory");
}
// d += a·b in place by `mma.sync.aligned.<kind>` (c = d) on four 32-bit A registers and two B
// registers, the operand shape both mmas of this file share.
#define KDA_MMA_4_2(kind)                                                                              \
    asm volatile("mma.sync.aligned." kind " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n" \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                    \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
    KDA_MMA_4_2("m16n8k16.row.col.f32.bf16.bf16.f32");
}
#endif

// tf32 (sm_80+): cvt.rna.tf32.f32 rounds an f32 to tf32 (10 explicit significand bits) to nearest,
// ties away from zero, in a 32-bit register whose 13 low bits are zero; mma.m16n8k8 multiplies
// tf32 operands into f32 accumulators (mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 with
// c = d), every lane of the full warp taking part, one element a register, g = lane/4, t = lane%4:
// a[0] = A[g][t], a[1] = A[g+8][t], a[2] = A[g][t+4], a[3] = A[g+8][t+4];
// b[0] = B[t][g], b[1] = B[t+4][g];  d as for mma_bf16_16816.
//   u32 to_tf32(float x);
//   mma_tf32_1688(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]);
#if defined(KDA_EMULATION)
__device__ __forceinline__ u32 to_tf32(float x) { return kda_emu::tf32_rna(x); }
__device__ __forceinline__ void mma_tf32_1688(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
    kda_emu::mma_tf32_1688(d, a, b);
}
#else
__device__ __forceinline__ u32 to_tf32(float x) {
    u32 r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ void mma_tf32_1688(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
    KDA_MMA_4_2("m16n8k8.row.col.f32.tf32.tf32.f32");
}
#endif

__device__ __forceinline__ bool aligned_to(const void* p, u32 bytes) {
    return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}
__device__ __forceinline__ bool aligned16(const void* p) { return aligned_to(p, 16); }

// Eight consecutive bf16 of `row` from position p, as 4 words, element by element: zeros past k
// or for a missing row (the tail and edge path of the 16-byte loads of the GEMM and GEMV).
__device__ __forceinline__ uint4 load_chunk_scalar(const bf16* row, bool row_ok, u32 p, u32 k) {
    uint32_t words[4];
#pragma unroll
    for (u32 e = 0; e < 4; ++e) {
        const u32 p0 = p + 2 * e, p1 = p0 + 1;
        const uint32_t lo = (row_ok && p0 < k) ? __bfloat16_as_ushort(row[p0]) : 0u;
        const uint32_t hi = (row_ok && p1 < k) ? __bfloat16_as_ushort(row[p1]) : 0u;
        words[e] = lo | (hi << 16);
    }
    return make_uint4(words[0], words[1], words[2], words[3]);
}

// The pool slot batch row `row` of a decode step addresses: slot[row], or KDA_NO_SLOT when that
// index is outside the pool of `slots` sequences or repeats an earlier row's. A row without a slot
// writes nothing at all, so no index value can reach past the pool or make two blocks update one
// sequence's state. The scan of the earlier rows costs `row` loads of a few hundred bytes that
// every block of the step shares through L1.
#define KDA_NO_SLOT 0xffffffffu
__device__ __forceinline__ u32 batch_slot(const u32* slot, u32 row, u32 slots) {
    const u32 s = slot[row];
    if (s >= slots) return KDA_NO_SLOT;
    for (u32 earlier = 0; earlier < row; ++earlier)
        if (slot[earlier] == s) return KDA_NO_SLOT;
    return s;
}
