//! Operations that choose among kernels of the table.

use kda_runtime::{BackendError, DType, DeviceBuffer, GpuBackend, KernelEntry, KernelHandle, View, ViewMut};

use crate::kernels::defines::DENSE_GEMV_BATCHM_MAX_M;
use crate::kernels::{Glm5NextKdaKernels, glm5next_kda};
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
    /// `dense_gemv_bf16_batchm(x, w, y, m, n, k, ldx)`.
    GemvBatchM,
    /// `dense_gemm_bf16(a, b, c, m, n, k, lda)`.
    Gemm,
}

impl DenseKernel {
    /// The table entry of this family.
    pub fn entry(self) -> &'static KernelEntry {
        match self {
            DenseKernel::Gemv => glm5next_kda::gemv::ENTRY,
            DenseKernel::GemvBatchM => glm5next_kda::gemv_batchm::ENTRY,
            DenseKernel::Gemm => glm5next_kda::gemm::ENTRY,
        }
    }
}

/// `y [m, n] = x [m, k] · w [n, k]ᵀ` in bf16 with f32 accumulation, into a new buffer, on the
/// kernel the dispatch rule picks (see [`dense_mm_kernel`]). `x` and `w` must be bf16 and hold at
/// least `m·k` and `n·k` elements: anything else is an `Err` before `y` is allocated.
pub fn dense_mm_bf16(
    gpu: &dyn GpuBackend,
    kernels: &Glm5NextKdaKernels,
    x: &DeviceBuffer,
    w: &DeviceBuffer,
    (m, n, k): (u32, u32, u32),
) -> Result<DeviceBuffer, BackendError> {
    let (_, family) = dense_mm_kernel(kernels, m);
    check_operand(family, "x", x.view(), m, k)?;
    check_operand(family, "w", w.view(), n, k)?;
    let len = usize::try_from(u64::from(m) * u64::from(n))
        .map_err(|_| BackendError::TooLarge { dtype: DType::Bf16, len: usize::MAX })?;
    let mut y = gpu.alloc(DType::Bf16, len)?;
    let x = StridedRows { view: x.view(), ld: k };
    dense_mm_bf16_into(gpu, kernels, x, w.view(), y.view_mut(), (m, n, k))?;
    Ok(y)
}

/// The rows of a dense product's input: each row's `k` bf16 at the start of `ld ≥ k`. `ld = k` is
/// a buffer of whole rows; more is a column range of a wider matrix, such as one projection's
/// outputs among those of the block input's stacked projections.
#[derive(Clone, Debug)]
pub struct StridedRows<'a> {
    /// From the first row's first element to (at least) the last row's last.
    pub view: View<'a>,
    /// Elements from one row's start to the next's.
    pub ld: u32,
}

/// [`dense_mm_bf16`] of `m` rows `x` (each [`StridedRows::ld`] apart) into `y`, which must hold
/// at least `m·n` bf16 elements (a workspace that allocates once). Every launch is checked against
/// the kernel's params, so short views are an `Err` before anything runs.
pub fn dense_mm_bf16_into(
    gpu: &dyn GpuBackend,
    kernels: &Glm5NextKdaKernels,
    x: StridedRows<'_>,
    w: View<'_>,
    y: ViewMut<'_>,
    (m, n, k): (u32, u32, u32),
) -> Result<(), BackendError> {
    let (_, family) = dense_mm_kernel(kernels, m);
    let StridedRows { view: x, ld } = x;
    match family {
        DenseKernel::Gemv => {
            kernels.launch_gemv(gpu, launch::gemv(m, n), glm5next_kda::gemv { x, w, y, n, k })
        }
        DenseKernel::GemvBatchM => kernels.launch_gemv_batchm(
            gpu,
            launch::gemv(m, n),
            glm5next_kda::gemv_batchm { x, w, y, m, n, k, ldx: ld },
        ),
        DenseKernel::Gemm => kernels.launch_gemm(
            gpu,
            launch::gemm(m, n),
            glm5next_kda::gemm { a: x, b: w, c: y, m, n, k, lda: ld },
        ),
    }
}

/// Refuses an operand of `family` that is not bf16 or holds fewer than `rows·k` elements, naming
/// the parameter, before the output is allocated.
fn check_operand(
    family: DenseKernel,
    param: &'static str,
    operand: View<'_>,
    rows: u32,
    k: u32,
) -> Result<(), BackendError> {
    let needed = u64::from(rows) * u64::from(k);
    if operand.dtype() != DType::Bf16 || (operand.len() as u64) < needed {
        return Err(BackendError::Argument {
            entry: Box::new(*family.entry()),
            param,
            expected: format!("at least {rows}·{k} = {needed} bf16 elements"),
            found: format!("{} {} elements", operand.len(), operand.dtype()),
        });
    }
    Ok(())
}
