// `sum_squares_f32`: out[0] = sum of x[i]^2 for i < n (kernels.toml, `sum_squares`), by one block
// of BLOCK threads (a [defines] constant, which the manifest's `requires` makes every launch use).

static_assert(BLOCK > 0 && (BLOCK & (BLOCK - 1)) == 0, "the tree reduction halves BLOCK to 1");

extern "C" __global__ void sum_squares_f32(const float* x, float* out, unsigned int n) {
    __shared__ float partial[BLOCK];
    float sum = 0.0f;
    for (size_t i = threadIdx.x; i < n; i += BLOCK) {
        sum += x[i] * x[i];
    }
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (unsigned int half = BLOCK / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) {
            partial[threadIdx.x] += partial[threadIdx.x + half];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[0] = partial[0];
    }
}
