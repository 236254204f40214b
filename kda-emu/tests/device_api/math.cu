// Device math, one element per thread, and <cuda/std/limits>.
#include <cuda/std/cstdint>
#include <cuda/std/limits>

// out[f * n + i] = function f of x[i]:
//   0 normcdff  1 erfinvf  2 erfcinvf  3 rsqrtf  4 __saturatef  5 __frcp_rn  6 __fsqrt_rn
//   7 __expf  8 __logf  9 __fdividef(1, x)  10 normcdfinvf  11 __sinf
extern "C" __global__ void float_functions(const float* x, float* out, unsigned int n) {
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float v = x[i];
    const float results[12] = {normcdff(v), erfinvf(v),      erfcinvf(v), rsqrtf(v),
                               __saturatef(v), __frcp_rn(v), __fsqrt_rn(v), __expf(v),
                               __logf(v),   __fdividef(1.0f, v), normcdfinvf(v), __sinf(v)};
    for (unsigned int f = 0; f < 12; ++f) out[f * n + i] = results[f];
}

// out[(3 * op + m) * n + i], m = 0, 1, 2 for _rz, _ru, _rd, of a[i] and b[i]:
//   op 0 __fadd  1 __fmul  2 __fdiv  3 __fsqrt (of a)  4 __frcp (of a)
extern "C" __global__ void directed(const float* a, const float* b, float* out, unsigned int n) {
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float x = a[i], y = b[i];
    const float results[15] = {__fadd_rz(x, y), __fadd_ru(x, y), __fadd_rd(x, y), __fmul_rz(x, y), __fmul_ru(x, y),
                               __fmul_rd(x, y), __fdiv_rz(x, y), __fdiv_ru(x, y), __fdiv_rd(x, y), __fsqrt_rz(x),
                               __fsqrt_ru(x),   __fsqrt_rd(x),   __frcp_rz(x),    __frcp_ru(x),    __frcp_rd(x)};
    for (unsigned int k = 0; k < 15; ++k) out[k * n + i] = results[k];
}

// out[k * n + i], of the words a[i], b[i], c[i]:
//   0 __popc(a)  1 __clz(a)  2 __ffs(a)  3 __brev(a)  4 __byte_perm(a, b, c)  5 __umulhi(a, b)
//   6 __mulhi(a, b)  7 __funnelshift_l(a, b, c)  8 __funnelshift_r(a, b, c)  9 __funnelshift_lc
//   10 __funnelshift_rc  11 __float2int_rn(a as float)  12 __float2int_rz  13 __float2int_ru
//   14 __float2int_rd  15 __float2uint_rn  16 __dp4a(a, b, c) signed  17 __sad(a, b, c)
// wide_out[k * n + i], of the 64-bit words w[i], v[i]:
//   0 __popcll(w)  1 __clzll(w)  2 __ffsll(w)  3 __brevll(w)  4 __umul64hi(w, v)  5 __mul64hi(w, v)
//   6 __float2ll_rn(a as float)  7 __double2ll_rz(w as double bits)
extern "C" __global__ void bit_functions(const unsigned int* a, const unsigned int* b, const unsigned int* c,
                                         const unsigned long long* w, const unsigned long long* v,
                                         unsigned int* out, unsigned long long* wide_out, unsigned int n) {
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const unsigned int x = a[i], y = b[i], z = c[i];
    const float f = __uint_as_float(x);
    const unsigned int results[18] = {
        static_cast<unsigned int>(__popc(x)),
        static_cast<unsigned int>(__clz(static_cast<int>(x))),
        static_cast<unsigned int>(__ffs(static_cast<int>(x))),
        __brev(x),
        __byte_perm(x, y, z),
        __umulhi(x, y),
        static_cast<unsigned int>(__mulhi(static_cast<int>(x), static_cast<int>(y))),
        __funnelshift_l(x, y, z),
        __funnelshift_r(x, y, z),
        __funnelshift_lc(x, y, z),
        __funnelshift_rc(x, y, z),
        static_cast<unsigned int>(__float2int_rn(f)),
        static_cast<unsigned int>(__float2int_rz(f)),
        static_cast<unsigned int>(__float2int_ru(f)),
        static_cast<unsigned int>(__float2int_rd(f)),
        __float2uint_rn(f),
        static_cast<unsigned int>(__dp4a(static_cast<int>(x), static_cast<int>(y), static_cast<int>(z))),
        __sad(static_cast<int>(x), static_cast<int>(y), z),
    };
    for (unsigned int k = 0; k < 18; ++k) out[k * n + i] = results[k];
    const unsigned long long p = w[i], q = v[i];
    const unsigned long long wide[8] = {
        static_cast<unsigned long long>(__popcll(p)),
        static_cast<unsigned long long>(__clzll(static_cast<long long>(p))),
        static_cast<unsigned long long>(__ffsll(static_cast<long long>(p))),
        __brevll(p),
        __umul64hi(p, q),
        static_cast<unsigned long long>(__mul64hi(static_cast<long long>(p), static_cast<long long>(q))),
        static_cast<unsigned long long>(__float2ll_rn(f)),
        static_cast<unsigned long long>(__double2ll_rz(__longlong_as_double(static_cast<long long>(p)))),
    };
    for (unsigned int k = 0; k < 8; ++k) wide_out[k * n + i] = wide[k];
}

// The limits of <cuda/std/limits> as bits: out = {max, min, lowest, epsilon, infinity,
// quiet_NaN, denorm_min} of __half, then of __nv_bfloat16, then digits of each and of float.
extern "C" __global__ void limits(unsigned int* out) {
    using H = cuda::std::numeric_limits<__half>;
    using B = cuda::std::numeric_limits<__nv_bfloat16>;
    const cuda::std::uint16_t bits[14] = {
        __half_as_ushort(H::max()),         __half_as_ushort(H::min()),       __half_as_ushort(H::lowest()),
        __half_as_ushort(H::epsilon()),     __half_as_ushort(H::infinity()),  __half_as_ushort(H::quiet_NaN()),
        __half_as_ushort(H::denorm_min()),  __bfloat16_as_ushort(B::max()),   __bfloat16_as_ushort(B::min()),
        __bfloat16_as_ushort(B::lowest()),  __bfloat16_as_ushort(B::epsilon()), __bfloat16_as_ushort(B::infinity()),
        __bfloat16_as_ushort(B::quiet_NaN()), __bfloat16_as_ushort(B::denorm_min())};
    for (unsigned int k = 0; k < 14; ++k) out[k] = bits[k];
    out[14] = H::digits;
    out[15] = B::digits;
    out[16] = cuda::std::numeric_limits<float>::digits;
}
