// Two __shared__ arrays side by side. With past = 1, thread 31 writes one element past `first`:
// on the device into whatever variable the compiler put next, in the emulator under
// AddressSanitizer a report. The write goes through a pointer a helper of its own takes (not
// inlined, as kernels keep large helpers), so no array bound is in sight for UBSan to check.

__device__ __noinline__ void put(float* row, unsigned int i, float value) { row[i] = value; }

// Run with 32 threads.
extern "C" __global__ void one_past(float* out, unsigned int past) {
    __shared__ float first[32];
    __shared__ float second[32];
    const unsigned int t = threadIdx.x;
    second[t] = 0.0f;
    put(first, t + past, static_cast<float>(t + 1));
    __syncthreads();
    out[t] = first[t] + second[t];
}
