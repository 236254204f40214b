// Warp votes and shuffles, and a vote a lane of its mask skips.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

// Run with 64 threads (two warps). Lane l of warp w votes preds[32 * w + l] four ways; for each,
// out[(4 * v + k) * 64 + t] gets, k = 0..3: __ballot_sync, __any_sync, __all_sync of the vote v:
//   v = 0: the full mask;  v = 1: the half warp the lane is in (0x0000ffff or 0xffff0000);
//   v = 2: the lanes of the lane's parity (0x55555555 or 0xaaaaaaaa);
//   v = 3: lanes 0..2 alone (mask 0x7), the others skip it; their slots keep the test's fill.
// The two groups of votes 1 and 2 vote one after the other, between barriers: the emulator holds
// one collective per warp at a time. out[16 * 64 + t] is __activemask(), taken before the
// full-mask vote, which no lane passes before every lane of its warp has taken it (so none has
// returned).
extern "C" __global__ void votes(const unsigned int* preds, unsigned int* out) {
    const unsigned int t = threadIdx.x, lane = t % 32;
    out[16 * 64 + t] = __activemask();
    const int p = static_cast<int>(preds[t]);
    const unsigned int masks[4] = {0xffffffffu, lane < 16 ? 0x0000ffffu : 0xffff0000u,
                                   lane % 2 == 0 ? 0x55555555u : 0xaaaaaaaau, 0x7u};
    const unsigned int groups[4] = {0, lane / 16, lane % 2, 0};
    const auto vote = [&](unsigned int v) {
        out[(4 * v + 0) * 64 + t] = __ballot_sync(masks[v], p);
        out[(4 * v + 1) * 64 + t] = static_cast<unsigned int>(__any_sync(masks[v], p));
        out[(4 * v + 2) * 64 + t] = static_cast<unsigned int>(__all_sync(masks[v], p));
    };
    for (unsigned int v = 0; v < 3; ++v) {
        for (unsigned int group = 0; group < 2; ++group) {
            if (groups[v] == group) vote(v);
            __syncthreads();
        }
    }
    if (lane < 3) vote(3);
}

// Run with 32 threads. Each lane's value is 1000 + lane; out[c * 32 + lane] is the shuffle of
// configuration c (the test lists them: each width of 8, 16 and 32 with up, down, xor and indexed
// shuffles at offsets `offsets[c]`).
extern "C" __global__ void shuffles(const int* offsets, unsigned int* out, unsigned int configurations) {
    const unsigned int lane = threadIdx.x;
    const unsigned int value = 1000 + lane;
    for (unsigned int c = 0; c < configurations; ++c) {
        const int mode = offsets[3 * c], width = offsets[3 * c + 1], b = offsets[3 * c + 2];
        unsigned int got = 0;
        switch (mode) {
            case 0: got = __shfl_up_sync(0xffffffffu, value, static_cast<unsigned int>(b), width); break;
            case 1: got = __shfl_down_sync(0xffffffffu, value, static_cast<unsigned int>(b), width); break;
            case 2: got = __shfl_xor_sync(0xffffffffu, value, b, width); break;
            default: got = __shfl_sync(0xffffffffu, value, b, width); break;
        }
        out[c * 32 + lane] = got;
    }
}

// Run with 32 threads: lane l's double, __half2 and bf16 and 64-bit integer values, each shuffled.
//   doubles[l] = __shfl_sync(full, 0.1 * l + 1e300 * (l == 5), 31 - l)
//   pairs[2l..2l+1] = __shfl_xor_sync(full, (l, -l) as __half2, 3, 16)
//   bfloats[l] = __shfl_down_sync(full, bf16(l + 0.5), 2, 8)
//   wide[l] = __shfl_up_sync(full, 0x0123456789abcdef * (l + 1), 1)
extern "C" __global__ void typed_shuffles(double* doubles, __half* pairs, __nv_bfloat16* bfloats,
                                          unsigned long long* wide) {
    const unsigned int lane = threadIdx.x;
    doubles[lane] = __shfl_sync(0xffffffffu, 0.1 * lane + (lane == 5 ? 1e300 : 0.0), 31 - static_cast<int>(lane));
    const __half2 pair = __floats2half2_rn(static_cast<float>(lane), -static_cast<float>(lane));
    const __half2 got = __shfl_xor_sync(0xffffffffu, pair, 3, 16);
    pairs[2 * lane] = __low2half(got);
    pairs[2 * lane + 1] = __high2half(got);
    bfloats[lane] = __shfl_down_sync(0xffffffffu, __float2bfloat16_rn(lane + 0.5f), 2u, 8);
    wide[lane] = __shfl_up_sync(0xffffffffu, 0x0123456789abcdefull * (lane + 1), 1u);
}

// Run with 32 threads: lane 7 returns; the rest vote with the full mask, which names it.
extern "C" __global__ void vote_lane_missing(unsigned int* out) {
    if (threadIdx.x == 7) return;
    out[threadIdx.x] = __ballot_sync(0xffffffffu, 1);
}
