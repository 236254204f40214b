// CUDA's atomics under contention, and the rules of each on chosen values.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

// Each thread i < n adds to bin keys[i] of every histogram: 1 to the integer counts, 0.5 to the
// f32 and f64 sums, 0.25 to the f16 and bf16 ones and to both halves of their pairs (every partial
// sum exact), and (1, 0.5) to the float2 pairs; the f32 sums go through a block-local histogram in
// shared memory first. `tickets[i]` is what atomicAdd on one counter returned to thread i.
extern "C" __global__ void histogram(const unsigned int* keys, unsigned int* counts, unsigned long long* wide,
                                     float* sums, double* doubles, __half* halves, __nv_bfloat16* bfloats,
                                     __half* half_pairs, __nv_bfloat16* bfloat_pairs, float* float_pairs,
                                     unsigned int* tickets, unsigned int* counter, unsigned int n,
                                     unsigned int bins) {
    __shared__ float local[64];
    for (unsigned int b = threadIdx.x; b < bins; b += blockDim.x) local[b] = 0.0f;
    __syncthreads();
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const unsigned int k = keys[i];
        atomicAdd(&counts[k], 1u);
        atomicAdd_block(&wide[k], 1ull);
        atomicAdd(&local[k], 0.5f);
        atomicAdd_system(&doubles[k], 0.5);
        atomicAdd(&halves[k], __float2half(0.25f));
        atomicAdd(&bfloats[k], __float2bfloat16_rn(0.25f));
        atomicAdd(reinterpret_cast<__half2*>(half_pairs) + k, __float2half2_rn(0.25f));
        atomicAdd(reinterpret_cast<__nv_bfloat162*>(bfloat_pairs) + k, __float2bfloat162_rn(0.25f));
        atomicAdd(reinterpret_cast<float2*>(float_pairs) + k, make_float2(1.0f, 0.5f));
        tickets[i] = atomicAdd(counter, 1u);
    }
    __syncthreads();
    for (unsigned int b = threadIdx.x; b < bins; b += blockDim.x) atomicAdd(&sums[b], local[b]);
}

// Every thread t of one block applies each operation once to one shared word of `state` (its
// initial values as the test gives them), with operands derived from t; `olds[op * n + t]` is what
// each returned. Words: 0 max i32, 1 min i32, 2 max u32, 3 min u32, 4 max/5 min u64, 6 max/7 min
// i64, 8 and/9 or/10 xor u32, 11 and/12 or/13 xor u64, 14 exch u32, 15 inc u32 (limit 10),
// 16 dec u32 (limit 10), 17 CAS-loop add u32, 18 first-wins CAS u32, 19 sub i32, 20 CAS-loop add
// u16 (in the low half of the word), 21 CAS-loop add u64, 22 and/23 or/24 xor i64.
extern "C" __global__ void contended(unsigned long long* state, unsigned int* olds, unsigned int n) {
    const unsigned int t = threadIdx.x;
    const int signed_value = static_cast<int>(t * 2654435761u);
    const unsigned long long wide_value = 0x9e3779b97f4a7c15ull * (t + 1);
    int* words32 = reinterpret_cast<int*>(state);  // the low halves of the words, little-endian
    auto word = [&](unsigned int w) { return reinterpret_cast<unsigned int*>(&state[w]); };
    atomicMax(&words32[0], signed_value);
    atomicMin(&words32[2], signed_value);
    atomicMax(word(2), static_cast<unsigned int>(signed_value));
    atomicMin(word(3), static_cast<unsigned int>(signed_value));
    atomicMax(&state[4], wide_value);
    atomicMin(&state[5], wide_value);
    atomicMax(reinterpret_cast<long long*>(&state[6]), static_cast<long long>(wide_value));
    atomicMin(reinterpret_cast<long long*>(&state[7]), static_cast<long long>(wide_value));
    atomicAnd(word(8), ~(1u << (t % 32)));
    atomicOr(word(9), 1u << (t % 32));
    atomicXor(word(10), static_cast<unsigned int>(signed_value));
    atomicAnd(&state[11], ~wide_value);
    atomicOr(&state[12], wide_value);
    atomicXor(&state[13], wide_value);
    olds[0 * n + t] = atomicExch(word(14), t + 1000);
    olds[1 * n + t] = atomicInc(word(15), 10u);
    olds[2 * n + t] = atomicDec(word(16), 10u);
    unsigned int seen = *word(17), found;
    while ((found = atomicCAS(word(17), seen, seen + t)) != seen) seen = found;
    olds[3 * n + t] = atomicCAS_block(word(18), 0xffffffffu, t);
    atomicSub(&words32[38], static_cast<int>(t));
    unsigned short* half_word = reinterpret_cast<unsigned short*>(&state[20]);
    unsigned short short_seen = *half_word, short_found;
    while ((short_found = atomicCAS(half_word, short_seen, static_cast<unsigned short>(short_seen + 3))) != short_seen)
        short_seen = short_found;
    unsigned long long wide_seen = state[21], wide_found;
    while ((wide_found = atomicCAS(&state[21], wide_seen, wide_seen + wide_value)) != wide_seen) wide_seen = wide_found;
    long long* signed_wide = reinterpret_cast<long long*>(state);
    atomicAnd(&signed_wide[22], static_cast<long long>(~wide_value));
    atomicOr(&signed_wide[23], static_cast<long long>(wide_value));
    atomicXor_system(&signed_wide[24], static_cast<long long>(wide_value));
}

// One thread: each rule on a value of its own. `words` holds the initial values and receives the
// final ones; `olds` what each call returned.
//   0: atomicInc(5, 5) wraps to 0         1: atomicInc(7, 5) wraps to 0     2: atomicInc(3, 5) -> 4
//   3: atomicDec(0, 5) -> 5                4: atomicDec(7, 5) -> 5           5: atomicDec(3, 5) -> 2
//   6: atomicCAS(9, 8, 1) unchanged       7: atomicCAS(9, 9, 1) -> 1
//   8: atomicMax(i32 -5, -7) stays        9: atomicMax(u32 0xfffffffb, 0xfffffff9) stays
//  10: atomicExch(f32 bits, 2.5f)        11: atomicAdd(f32 global, subnormal) flushed
//  12: atomicAdd(f32 shared, subnormal) kept, copied out
extern "C" __global__ void atomic_rules(unsigned int* words, unsigned int* olds) {
    __shared__ float shared_sum;
    olds[0] = atomicInc(&words[0], 5u);
    olds[1] = atomicInc(&words[1], 5u);
    olds[2] = atomicInc(&words[2], 5u);
    olds[3] = atomicDec(&words[3], 5u);
    olds[4] = atomicDec(&words[4], 5u);
    olds[5] = atomicDec(&words[5], 5u);
    olds[6] = atomicCAS(&words[6], 8u, 1u);
    olds[7] = atomicCAS(&words[7], 9u, 1u);
    olds[8] = static_cast<unsigned int>(atomicMax(reinterpret_cast<int*>(&words[8]), -7));
    olds[9] = atomicMax(&words[9], 0xfffffff9u);
    olds[10] = __float_as_uint(atomicExch(reinterpret_cast<float*>(&words[10]), 2.5f));
    olds[11] = __float_as_uint(atomicAdd(reinterpret_cast<float*>(&words[11]), __uint_as_float(words[13])));
    shared_sum = __uint_as_float(words[12]);
    olds[12] = __float_as_uint(atomicAdd(&shared_sum, __uint_as_float(words[13])));
    words[12] = __float_as_uint(shared_sum);
}
