//! `gemm::dense_gemm_bf16`: `c[m, n] = a[m, k] · b[n, k]ᵀ`, a's rows `lda` apart, no output
//! stride.

use kda_runtime::cpu::{CpuArgs, CpuBackend, KernelError};

use super::gemv::RowsLaunch;
use crate::kernels::glm5next_kda;

pub(super) fn register(gpu: CpuBackend) -> CpuBackend {
    gpu.with_kernel(glm5next_kda::gemm::ENTRY, dense_gemm_bf16)
}

/// `a, b, c, m, n, k, lda`. The reference order (one accumulator, ascending p) is the GEMV's, so each
/// output row is the GEMV of its input row; any m.
fn dense_gemm_bf16(args: CpuArgs<'_>) -> Result<(), KernelError> {
    RowsLaunch::read(args)?.run();
    Ok(())
}
