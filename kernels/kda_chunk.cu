// kda_chunk: the chunked (WY) form of the gated delta rule for prefill (docs/kernels.md).
// `kda_chunk_prepare` computes everything independent of the carried state, per (chunk, head),
// all chunks at once: the WY factors and the in-chunk attention `aqk`, whose exponentials are
// those of the WY matrix. `kda_chunk_scan` walks each head's chunks in order through the state and
// does only the products with it (plus the attention's product with the new values), so the
// sequential part holds none of the c²·d exponentials.
//
// Layout: k, v, q, gate, gc, u, w, out are [t_pad, h, d] f32 (position-major), beta [t_pad, h],
// aqk [t_pad / c, h, c, c], state [h, d, d] (K-major), t_pad = ⌈t/c⌉·c. Positions ≥ t are read as
// zero whatever the buffers hold. c ∈ {32, 64}; d a multiple of 32, at most KDA_MAX_HEAD_DIM.
// Other launches write nothing.
//
// Every decay is taken in the difference form exp(gc_i − gc_j), j ≤ i (an exponent ≤ 0), with the
// accurate expf; it is never factored into exp(gc_i)·exp(−gc_j), which overflows over a chunk.
//
// Order: every sum is one f32 accumulator, started at +0, over its index in ascending order, with
// the products grouped as the Rust reference groups them (src/reference/kda_chunk.rs), so with
// --fmad=false the results differ from the mirror only where expf and the host's exp differ.
//
// Geometry (src/launch.rs), blockDim.x == CHUNK_THREADS (4 warps) for both:
//   prepare: `launch::chunk_prepare(t_pad / c, h)`: grid (chunks, h), one block per (chunk, head).
//   scan:    `launch::chunk_scan(h, d)`: grid (h, d / CHUNK_SCAN_VT), one block per (head, tile of
//            CHUNK_SCAN_VT state columns v). Columns of the state are independent (every coupling
//            runs along k), so the V split is exact; the blocks of a head share `aqk`.
// Both grid-stride over their items. Shared memory is static and below 48 KiB at c = 64,
// d = 128 (prepare 41,984 B, scan 41,088 B): no dynamic bytes, no opt-in attribute.
#include "kda_common.cuh"

#ifndef KDA_MAX_HEAD_DIM
#error "KDA_MAX_HEAD_DIM must be defined by the build (kernels.toml [defines])"
#endif
#ifndef KDA_MAX_CHUNK
#error "KDA_MAX_CHUNK must be defined by the build (kernels.toml [defines])"
#endif
#ifndef CHUNK_THREADS
#error "CHUNK_THREADS must be defined by the build (kernels.toml [defines])"
#endif
#ifndef CHUNK_SCAN_VT
#error "CHUNK_SCAN_VT must be defined by the build (kernels.toml [defines])"
#endif

namespace {
constexpr u32 NT = CHUNK_THREADS;
constexpr u32 NW = NT / 32;
constexpr u32 CMAX = KDA_MAX_CHUNK;
constexpr u32 DMAX = KDA_MAX_HEAD_DIM;
constexpr u32 VT = CHUNK_SCAN_VT;   // state columns per scan block: one per lane
constexpr u32 PREP_TD = 32;         // d tile of prepare: one column per lane
constexpr u32 SCAN_TK = 32;         // k tile of the scan's products with the state
static_assert(NT % 32 == 0 && NT >= CMAX, "CHUNK_THREADS: whole warps, at least one thread per chunk row");
static_assert(CMAX == 64 && (CMAX / NW) * NW == CMAX, "chunk rows must split evenly over the warps");
static_assert(VT == 32, "the scan maps one lane to one state column");
static_assert(SCAN_TK % NW == 0, "the state-update rows must split evenly over the warps");

constexpr u32 cmax(u32 a, u32 b) { return a > b ? a : b; }
constexpr u32 PREP_STAGE = 3 * CMAX * (PREP_TD + 1);
constexpr u32 SCAN_STAGE = cmax(2 * CMAX * SCAN_TK, CMAX * CMAX);

// Row (position i of the chunk starting at `first`, head) of a [t_pad, h, d] tensor.
struct Rows {
    u32 first, h, head, d;
    __device__ __forceinline__ size_t operator()(u32 i) const {
        return (static_cast<size_t>(first + i) * h + head) * d;
    }
};

// ---------------------------------------------------------------------------------------------
// prepare, one (chunk, head):
//   gc[i]   = Σ_{p≤i} gate[p]                                  (ascending p, per channel)
//   A[i][j] = −β_i Σ_x k[i,x]·k[j,x]·exp(gc[i,x] − gc[j,x])   j < i
//   aqk[i][j] = Σ_x (q[i,x]·scale)·k[j,x]·exp(gc[i,x] − gc[j,x])   j ≤ i < real (0 elsewhere),
//               over the same exponentials as A
//   for i in 1..c: A[i][j] += Σ_{j<m<i} A[i][m]·A[m][j]        (rows < i final; row i from its
//                                                              original values, as in place)
//   A[i][i] = 1;  u[i] = Σ_{j≤i} (A[i][j]·β_j)·v[j];  w[i] = Σ_{j≤i} ((A[i][j]·β_j)·k[j])·e^{gc[j]}
// Pad rows (≥ t) get gc held at the last real value and u = w = 0, exactly what the reference's
// zero-read arithmetic yields (its pad entries of A end as +0 after the substitution).
template <u32 C>
__device__ __forceinline__ void prepare_chunk(const float* __restrict__ q, const float* __restrict__ k,
                                              const float* __restrict__ v, const float* __restrict__ gate,
                                              const float* __restrict__ beta, float* gc, float* __restrict__ u,
                                              float* __restrict__ w, float* __restrict__ aqk, u32 t, u32 h, u32 d,
                                              u32 chunk, u32 head, float scale, float* A, float* beta_s,
                                              float* stage) {
    constexpr u32 RPW = C / NW;  // chunk rows per warp: i = warp + NW·r
    constexpr u32 JB = C / 32;   // column blocks: j = lane + 32·jb
    const u32 tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const u32 first = chunk * C;
    const u32 real = min(C, t - first);
    const Rows at{first, h, head, d};

    // gc, and β (zero past t). gc is re-read below by other threads: plain loads after a barrier.
    for (u32 i = tid; i < C; i += NT) beta_s[i] = i < real ? beta[static_cast<size_t>(first + i) * h + head] : 0.0f;
    for (u32 x = tid; x < d; x += NT) {
        float acc = 0.0f;
        for (u32 i = 0; i < C; ++i) {
            const float g = i < real ? gate[at(i) + x] : 0.0f;
            acc = acc + g;
            gc[at(i) + x] = acc;
        }
    }

    // A (strictly lower) and aqk (lower with the diagonal), d tiles of PREP_TD staged with a pad
    // column (conflict-free rows j); each exponential serves both.
    constexpr u32 STR = PREP_TD + 1;
    float* ks = stage;
    float* gs = stage + C * STR;
    float* qs = stage + 2 * C * STR;
    float acc[RPW][JB], att[RPW][JB];
#pragma unroll
    for (u32 r = 0; r < RPW; ++r)
#pragma unroll
        for (u32 jb = 0; jb < JB; ++jb) acc[r][jb] = att[r][jb] = 0.0f;
    for (u32 x0 = 0; x0 < d; x0 += PREP_TD) {
        __syncthreads();
        for (u32 e = tid; e < C * PREP_TD; e += NT) {
            const u32 i = e / PREP_TD, xx = e % PREP_TD;
            const bool ok = i < real;
            ks[i * STR + xx] = ok ? k[at(i) + x0 + xx] : 0.0f;
            gs[i * STR + xx] = ok ? gc[at(i) + x0 + xx] : 0.0f;
            qs[i * STR + xx] = ok ? q[at(i) + x0 + xx] * scale : 0.0f;
        }
        __syncthreads();
        // Kept rolled: the body already inlines RPW·JB expf calls.
#pragma unroll 1
        for (u32 xx = 0; xx < PREP_TD; ++xx) {
#pragma unroll
            for (u32 r = 0; r < RPW; ++r) {
                const u32 i = warp + NW * r;
                if (i >= real) continue;
                const float ki = ks[i * STR + xx], gi = gs[i * STR + xx], qi = qs[i * STR + xx];
#pragma unroll
                for (u32 jb = 0; jb < JB; ++jb) {
                    const u32 j = lane + 32 * jb;
                    if (j > i) continue;
                    const float kj = ks[j * STR + xx], decay = expf(gi - gs[j * STR + xx]);
                    att[r][jb] = att[r][jb] + qi * kj * decay;
                    if (j < i) acc[r][jb] = acc[r][jb] + ki * kj * decay;
                }
            }
        }
    }
    float* aqk_block = aqk + (static_cast<size_t>(chunk) * h + head) * C * C;
#pragma unroll
    for (u32 r = 0; r < RPW; ++r) {
        const u32 i = warp + NW * r;
#pragma unroll
        for (u32 jb = 0; jb < JB; ++jb) {
            const u32 j = lane + 32 * jb;
            A[i * C + j] = (i < real && j < i) ? -beta_s[i] * acc[r][jb] : 0.0f;
            aqk_block[i * C + j] = (i < real && j <= i) ? att[r][jb] : 0.0f;
        }
    }
    __syncthreads();

    // Forward substitution: thread j of row i, from row i's original values (all read before any
    // is written) and the final rows m < i.
    for (u32 i = 1; i < real; ++i) {
        const u32 j = tid;
        float sum = 0.0f;
        if (j < i)
            for (u32 m = j + 1; m < i; ++m) sum = sum + A[i * C + m] * A[m * C + j];
        __syncthreads();
        if (j < i) A[i * C + j] = A[i * C + j] + sum;
        __syncthreads();
    }

    // Unit diagonal, then β_j folded into the coefficients: A[i][j] ← A[i][j]·β_j, j ≤ i.
    for (u32 e = tid; e < C * C; e += NT) {
        const u32 i = e / C, j = e % C;
        if (j <= i) A[e] = (i == j ? 1.0f : A[e]) * beta_s[j];
    }

    // u and w, d tiles of PREP_TD: lane = column, warp rows i = warp + NW·r.
    float* vs = stage;
    float* kt = stage + C * PREP_TD;
    float* es = stage + 2 * C * PREP_TD;
    for (u32 x0 = 0; x0 < d; x0 += PREP_TD) {
        __syncthreads();
        for (u32 e = tid; e < C * PREP_TD; e += NT) {
            const u32 i = e / PREP_TD, xx = e % PREP_TD;
            const bool ok = i < real;
            const size_t g = at(i) + x0 + xx;
            vs[e] = ok ? v[g] : 0.0f;
            kt[e] = ok ? k[g] : 0.0f;
            es[e] = ok ? expf(gc[g]) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (u32 r = 0; r < RPW; ++r) {
            const u32 i = warp + NW * r;
            float au = 0.0f, aw = 0.0f;
            if (i < real) {
                for (u32 j = 0; j <= i; ++j) {
                    const float coef = A[i * C + j];
                    au = au + coef * vs[j * PREP_TD + lane];
                    aw = aw + coef * kt[j * PREP_TD + lane] * es[j * PREP_TD + lane];
                }
            }
            u[at(i) + x0 + lane] = au;
            w[at(i) + x0 + lane] = aw;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// scan, one head and the state columns v0 .. v0 + VT, all chunks in order. Per chunk (rows < t):
//   vnew[i,v]  = u[i,v] − Σ_k w[i,k]·S[k,v]
//   inter[i,v] = Σ_k ((q[i,k]·scale)·exp(gc[i,k]))·S[k,v]
//   out[i,v]   = inter[i,v] + Σ_{j≤i} aqk[i,j]·vnew[j,v]                   (state before the update)
//   S[k,v]     ← S[k,v]·exp(gc[l,k]) + Σ_{i<real} (k[i,k]·exp(gc[l,k] − gc[i,k]))·vnew[i,v]
// with l the chunk's last real position. The state tile stays in shared memory for all chunks.
template <u32 C>
__device__ __forceinline__ void scan_columns(const float* __restrict__ q, const float* __restrict__ k,
                                             const float* __restrict__ gc, const float* __restrict__ u,
                                             const float* __restrict__ w, const float* __restrict__ aqk,
                                             float* __restrict__ state,
                                             float* __restrict__ out, u32 t, u32 h, u32 d, u32 head, u32 v0,
                                             float scale, float* S_s, float* vn_s, float* dec_s, float* stage) {
    constexpr u32 RPW = C / NW;
    constexpr u32 JB = C / 32;
    const u32 tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    // S_s[k·VT + v] = S[head][k][v0 + v].
    float* S_g = state + static_cast<size_t>(head) * d * d + v0;
    for (u32 e = tid; e < d * VT; e += NT) S_s[e] = S_g[static_cast<size_t>(e / VT) * d + e % VT];

    const u32 chunks = (t + C - 1) / C;
    for (u32 chunk = 0; chunk < chunks; ++chunk) {
        const u32 first = chunk * C;
        const u32 real = min(C, t - first);
        const Rows at{first, h, head, d};

        // vnew and inter: k tiles of w and q·scale·e^{gc}; lane = column v, rows i = warp + NW·r.
        float av[RPW], ao[RPW];
#pragma unroll
        for (u32 r = 0; r < RPW; ++r) av[r] = ao[r] = 0.0f;
        {
            float* ws = stage;
            float* qg = stage + C * SCAN_TK;
            for (u32 k0 = 0; k0 < d; k0 += SCAN_TK) {
                __syncthreads();
                for (u32 e = tid; e < C * SCAN_TK; e += NT) {
                    const u32 i = e / SCAN_TK, kk = e % SCAN_TK;
                    if (i < real) {
                        const size_t g = at(i) + k0 + kk;
                        ws[e] = w[g];
                        qg[e] = q[g] * scale * expf(gc[g]);
                    } else {
                        ws[e] = 0.0f;
                        qg[e] = 0.0f;
                    }
                }
                __syncthreads();
                for (u32 kk = 0; kk < SCAN_TK; ++kk) {
                    const float s = S_s[(k0 + kk) * VT + lane];
#pragma unroll
                    for (u32 r = 0; r < RPW; ++r) {
                        const u32 i = warp + NW * r;
                        if (i < real) {
                            av[r] = av[r] + ws[i * SCAN_TK + kk] * s;
                            ao[r] = ao[r] + qg[i * SCAN_TK + kk] * s;
                        }
                    }
                }
            }
        }
#pragma unroll
        for (u32 r = 0; r < RPW; ++r) {
            const u32 i = warp + NW * r;
            vn_s[i * VT + lane] = i < real ? u[at(i) + v0 + lane] - av[r] : 0.0f;
        }

        // The chunk's attention block into the stage (only its entries j ≤ i < real are read
        // below); the barrier also publishes vn_s.
        {
            const float* block = aqk + (static_cast<size_t>(chunk) * h + head) * C * C;
            __syncthreads();
#pragma unroll 4
            for (u32 e = tid; e < C * C; e += NT) stage[e] = block[e];
            __syncthreads();
        }

        // out = inter + Σ_{j≤i} aqk[i,j]·vnew[j], rows < t only.
#pragma unroll
        for (u32 r = 0; r < RPW; ++r) {
            const u32 i = warp + NW * r;
            if (i >= real) continue;
            float al = 0.0f;
            for (u32 j = 0; j <= i; ++j) al = al + stage[i * C + j] * vn_s[j * VT + lane];
            out[at(i) + v0 + lane] = ao[r] + al;
        }

        // State update, k tiles: kd[i][kk] = k[i,k]·exp(gc[l,k] − gc[i,k]), dec[kk] = exp(gc[l,k]);
        // lane = column v, warp rows kk = warp + NW·r.
        {
            const size_t last = at(real - 1);
            float* kd = stage;
            for (u32 k0 = 0; k0 < d; k0 += SCAN_TK) {
                __syncthreads();
                for (u32 e = tid; e < C * SCAN_TK; e += NT) {
                    const u32 i = e / SCAN_TK, kk = e % SCAN_TK;
                    kd[e] = i < real ? k[at(i) + k0 + kk] * expf(gc[last + k0 + kk] - gc[at(i) + k0 + kk]) : 0.0f;
                }
                if (tid < SCAN_TK) dec_s[tid] = expf(gc[last + k0 + tid]);
                __syncthreads();
#pragma unroll
                for (u32 r = 0; r < SCAN_TK / NW; ++r) {
                    const u32 kk = warp + NW * r;
                    float acc = 0.0f;
                    for (u32 i = 0; i < real; ++i) acc = acc + kd[i * SCAN_TK + kk] * vn_s[i * VT + lane];
                    const u32 idx = (k0 + kk) * VT + lane;
                    S_s[idx] = S_s[idx] * dec_s[kk] + acc;
                }
            }
        }
    }

    __syncthreads();
    for (u32 e = tid; e < d * VT; e += NT) S_g[static_cast<size_t>(e / VT) * d + e % VT] = S_s[e];
}
}  // namespace

// q, k, v, gate [t_pad, h, d], beta [t_pad, h] -> gc, u, w [t_pad, h, d], aqk [t_pad / c, h, c, c]
// (every position written).
// Both kernels ask for no more than one block per SM, so that ptxas may give a thread all the
// registers it needs: left to itself it capped them at 168 and spilled the accumulators of A and
// aqk, or of vnew and inter. At 210 (prepare) and 178 (scan) registers two blocks still fit.
extern "C" __global__ void __launch_bounds__(CHUNK_THREADS, 1)
    kda_chunk_prepare(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                      const float* __restrict__ gate, const float* __restrict__ beta, float* gc,
                      float* __restrict__ u, float* __restrict__ w, float* __restrict__ aqk, u32 t, u32 h, u32 d,
                      u32 c, float scale) {
    __shared__ float A[CMAX * CMAX];
    __shared__ float beta_s[CMAX];
    __shared__ float stage[PREP_STAGE];
    if (blockDim.x != NT || blockDim.y != 1 || blockDim.z != 1) return;
    if ((c != 32 && c != 64) || c > CMAX || d == 0 || d % PREP_TD != 0) return;
    const u32 chunks = (t + c - 1) / c;
    for (u32 chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
        for (u32 head = blockIdx.y; head < h; head += gridDim.y) {
            if (c == 32)
                prepare_chunk<32>(q, k, v, gate, beta, gc, u, w, aqk, t, h, d, chunk, head, scale, A, beta_s, stage);
            else
                prepare_chunk<64>(q, k, v, gate, beta, gc, u, w, aqk, t, h, d, chunk, head, scale, A, beta_s, stage);
            __syncthreads();
        }
    }
}

// q, k, gc, u, w [t_pad, h, d], aqk [t_pad / c, h, c, c], state [h, d, d] in/out
// -> out [t_pad, h, d] (rows < t written).
extern "C" __global__ void __launch_bounds__(CHUNK_THREADS, 1)
    kda_chunk_scan(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ gc,
                   const float* __restrict__ u, const float* __restrict__ w, const float* __restrict__ aqk,
                   float* __restrict__ state,
                   float* __restrict__ out, u32 t, u32 h, u32 d, u32 c, float scale) {
    __shared__ float S_s[DMAX * VT];
    __shared__ float vn_s[CMAX * VT];
    __shared__ float dec_s[SCAN_TK];
    __shared__ float stage[SCAN_STAGE];
    if (blockDim.x != NT || blockDim.y != 1 || blockDim.z != 1) return;
    if ((c != 32 && c != 64) || c > CMAX || d == 0 || d > DMAX) return;
    if (d % VT != 0 || d % SCAN_TK != 0) return;
    for (u32 head = blockIdx.x; head < h; head += gridDim.x) {
        for (u32 v0 = blockIdx.y * VT; v0 < d; v0 += gridDim.y * VT) {
            if (c == 32)
                scan_columns<32>(q, k, gc, u, w, aqk, state, out, t, h, d, head, v0, scale, S_s, vn_s, dec_s, stage);
            else
                scan_columns<64>(q, k, gc, u, w, aqk, state, out, t, h, d, head, v0, scale, S_s, vn_s, dec_s, stage);
            __syncthreads();
        }
    }
}
