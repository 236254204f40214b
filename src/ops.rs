//! Operations that choose among kernels of the table.

use kda_runtime::{BackendError, DType, DeviceBuffer, GpuBackend, KernelEntry, View, ViewMut};

use crate::kernels::defines::{DENSE_GEMV_BATCHM_MAX_M, GEMM_TILE_M, GEMM_TILE_N};
use crate::kernels::{Glm5NextKdaKernels, glm5next_kda};
use crate::launch;

/// Blocks a split-K product aims for: about two for each of an H200's 132 SMs.
pub const SPLIT_K_BLOCKS: u32 = 256;

/// The shortest range of K a split takes: 32 of the GEMM's K tiles, so that a block's partial
/// sums (written once, read once by `gemm_reduce`) stay small beside the weight it streams.
pub const SPLIT_K_MIN_RANGE: u32 = 1024;

/// Which kernel [`dense_mm_bf16`] runs for a product of `m` rows, `n` columns over `k`: 1 row →
/// `gemv`; 2..=16 → `gemv_batchm` where the target has it, else the GEMM; more → the GEMM. The
/// GEMM splits K ([`gemm_splits`]) where the target has `gemm_splitk` and `gemm_reduce`.
pub fn dense_mm_kernel(kernels: &Glm5NextKdaKernels, (m, n, k): (u32, u32, u32)) -> DenseKernel {
    match (m, kernels.gemv_batchm) {
        (1, _) => DenseKernel::Gemv,
        (2..=DENSE_GEMV_BATCHM_MAX_M, Some(_)) => DenseKernel::GemvBatchM,
        _ => match (gemm_splits(m, n, k), kernels.gemm_splitk, kernels.gemm_reduce) {
            (splits @ 2.., Some(_), Some(_)) => DenseKernel::GemmSplitK { splits },
            _ => DenseKernel::Gemm,
        },
    }
}

/// The ranges the GEMM splits K into for a product of this shape: more than 1 only where the
/// output is one row of tiles (`m ≤ GEMM_TILE_M`, a decode step's rows) with fewer tiles than
/// [`SPLIT_K_BLOCKS`], each range at least [`SPLIT_K_MIN_RANGE`] long. Within that row of tiles
/// it depends on `n` and `k` alone, so a row's result does not depend on how many rows there are
/// (what lets a replay recorded at more rows stand for fewer).
pub fn gemm_splits(m: u32, n: u32, k: u32) -> u32 {
    if m > GEMM_TILE_M {
        return 1;
    }
    let tiles = n.div_ceil(GEMM_TILE_N).max(1);
    (SPLIT_K_BLOCKS / tiles).min(k / SPLIT_K_MIN_RANGE).max(1)
}

/// The kernels of a dense product, which differ in their arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DenseKernel {
    /// `dense_gemv_bf16(x, w, y, n, k)`.
    Gemv,
    /// `dense_gemv_bf16_batchm(x, w, y, m, n, k, ldx)`.
    GemvBatchM,
    /// `dense_gemm_bf16(a, b, c, m, n, k, lda)`.
    Gemm,
    /// `dense_gemm_bf16_splitk(a, b, partial, m, n, k, lda, splits)`, then
    /// `dense_gemm_splitk_reduce_bf16(partial, c, m, n, splits)`.
    GemmSplitK {
        /// The ranges K is split into.
        splits: u32,
    },
}

impl DenseKernel {
    /// The table entry that reads the operands.
    pub fn entry(self) -> &'static KernelEntry {
        match self {
            DenseKernel::Gemv => glm5next_kda::gemv::ENTRY,
            DenseKernel::GemvBatchM => glm5next_kda::gemv_batchm::ENTRY,
            DenseKernel::Gemm => glm5next_kda::gemm::ENTRY,
            DenseKernel::GemmSplitK { .. } => glm5next_kda::gemm_splitk::ENTRY,
        }
    }

    /// f32 elements of partial sums a product of `m × n` outputs needs on this kernel: `splits·m·n`
    /// for the split-K GEMM, none otherwise.
    pub fn partials(self, m: u32, n: u32) -> usize {
        match self {
            DenseKernel::GemmSplitK { splits } => splits as usize * m as usize * n as usize,
            _ => 0,
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
    let family = dense_mm_kernel(kernels, (m, n, k));
    check_operand(family, "x", x.view(), m, k)?;
    check_operand(family, "w", w.view(), n, k)?;
    let len = usize::try_from(u64::from(m) * u64::from(n))
        .map_err(|_| BackendError::TooLarge { dtype: DType::Bf16, len: usize::MAX })?;
    // Both written whole before they are read.
    let mut y = gpu.alloc_for_write(DType::Bf16, len)?;
    let mut partials = gpu.alloc_for_write(DType::F32, family.partials(m, n))?;
    let x = StridedRows { view: x.view(), ld: k };
    dense_mm_bf16_into(gpu, kernels, x, w.view(), y.view_mut(), (m, n, k), &mut partials)?;
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
/// at least `m·n` bf16 elements, with `partials` (f32, at least [`DenseKernel::partials`]
/// elements; any length where the product does not split K) for the split-K GEMM's partial sums:
/// workspaces that allocate once. Every launch is checked against the kernel's params, so short
/// views are an `Err` before anything runs.
pub fn dense_mm_bf16_into(
    gpu: &dyn GpuBackend,
    kernels: &Glm5NextKdaKernels,
    x: StridedRows<'_>,
    w: View<'_>,
    y: ViewMut<'_>,
    (m, n, k): (u32, u32, u32),
    partials: &mut DeviceBuffer,
) -> Result<(), BackendError> {
    let StridedRows { view: x, ld } = x;
    match dense_mm_kernel(kernels, (m, n, k)) {
        DenseKernel::Gemv => kernels.launch_gemv(
            gpu,
            launch::gemv(m, n),
            glm5next_kda::gemv { x: x.into(), w: w.into(), y: y.into(), n, k },
        ),
        DenseKernel::GemvBatchM => kernels.launch_gemv_batchm(
            gpu,
            launch::gemv(m, n),
            glm5next_kda::gemv_batchm { x: x.into(), w: w.into(), y: y.into(), m, n, k, ldx: ld },
        ),
        DenseKernel::Gemm => kernels.launch_gemm(
            gpu,
            launch::gemm(m, n),
            glm5next_kda::gemm { a: x.into(), b: w.into(), c: y.into(), m, n, k, lda: ld },
        ),
        DenseKernel::GemmSplitK { splits } => {
            let partial = partials.view_mut();
            kernels.launch_gemm_splitk(
                gpu,
                launch::gemm_splitk(m, n, splits),
                glm5next_kda::gemm_splitk {
                    a: x.into(),
                    b: w.into(),
                    partial: partial.into(),
                    m,
                    n,
                    k,
                    lda: ld,
                    splits,
                },
            )?;
            kernels.launch_gemm_reduce(
                gpu,
                launch::elementwise(m.saturating_mul(n)),
                glm5next_kda::gemm_reduce { partial: partials.view().into(), c: y.into(), m, n, splits },
            )
        }
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
