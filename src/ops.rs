//! Operations that choose among kernels of the table.

use kda_runtime::{BackendError, DType, DeviceBuffer, GpuBackend, KernelArg, KernelHandle};

use crate::kernels::Glm5NextKdaKernels;
use crate::kernels::defines::DENSE_GEMV_BATCHM_MAX_M;
use crate::launch;

/// Which kernel [`dense_mm_bf16`] runs for `m` rows: 1 → `gemv`; 2..=16 → `gemv_batchm` where the
/// target has it, else `gemm`; more → `gemm`.
pub fn dense_mm_kernel(kernels: &Glm5NextKdaKernels, m: u32) -> (KernelHandle, DenseKernel) {
    match (m, kernels.gemv_batchm) {
        (1, _) => (kernels.gemv, DenseKernel::Gemv),
        (2..=DENSE_GEMV_BATCHM_MAX_M, Some(batchm)) => (batchm, DenseKernel::GemvBatchM),
        _ => (kernels.gemm, DenseKernel::Gemm),
    }
}

/// The kernel families of a dense product, which differ in their arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DenseKernel {
    /// `dense_gemv_bf16(x, w, y, n, k)`.
    Gemv,
    /// `dense_gemv_bf16_batchm(x, w, y, m, n, k)`.
    GemvBatchM,
    /// `dense_gemm_bf16(a, b, c, m, n, k)`.
    Gemm,
}

/// `y [m, n] = x [m, k] · w [n, k]ᵀ` in bf16 with f32 accumulation, on the kernel the dispatch
/// rule picks (see [`dense_mm_kernel`]).
pub fn dense_mm_bf16(
    gpu: &dyn GpuBackend,
    kernels: &Glm5NextKdaKernels,
    x: &DeviceBuffer,
    w: &DeviceBuffer,
    (m, n, k): (u32, u32, u32),
) -> Result<DeviceBuffer, BackendError> {
    let mut y = gpu.alloc(DType::Bf16, m as usize * n as usize)?;
    let (kernel, family) = dense_mm_kernel(kernels, m);
    let geometry = match family {
        DenseKernel::Gemv | DenseKernel::GemvBatchM => launch::gemv(m, n),
        DenseKernel::Gemm => launch::gemm(m, n),
    };
    // gemv has no `m`; the others take `x, w, y, m, n, k`.
    let rows = (family != DenseKernel::Gemv).then_some(KernelArg::U32(m));
    let mut args: Vec<KernelArg<'_>> =
        [x.into(), w.into(), (&mut y).into()].into_iter().chain(rows).chain([n.into(), k.into()]).collect();
    gpu.launch(kernel, geometry, &mut args)?;
    drop(args);
    Ok(y)
}
