// A block reduction through a __shared__ array sized for PARTIAL threads, which a larger block
// overruns.

extern "C" __global__ void block_sum_f32(const float* x, float* out, unsigned int n, unsigned int blocks) {
    __shared__ float partial[PARTIAL];
    const unsigned int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    partial[t] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (t == 0) {
        float sum = 0.0f;
        for (unsigned int k = 0; k < blockDim.x; ++k) sum += partial[k];
        out[blockIdx.x] = sum;
    }
}
