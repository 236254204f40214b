//! `kda-block bench`: the time of one launch of each kernel of `[glm5next_kda]` on its
//! [launch case](kda::cases), the bandwidth it achieves, and that bandwidth against a
//! device-to-device copy measured in the same run (what the memory system gives a plain copy).
//!
//! Each kernel is launched once to warm up, then `iterations` times back to back inside one
//! [`GpuBackend::time`] (CUDA events on the CUDA backend, the host clock between two
//! synchronizations elsewhere), so the figure is the launch rate the device sustains, launch
//! overhead included. The bandwidth counts [`KernelCase::bytes_moved`]: the bytes a launch must
//! read and write at least; the copy counts its bytes twice (read and written), the same way.
//! Where the target has the split-K pair, their case's product is also timed on the plain `gemm`,
//! so the report says what splitting K buys at that shape ([`SplitKTiming`]).
//!
//! `kda-block bench` then prints the [roofline model](crate::roofline) of one layer (decode at B = 1
//! and 64, a prefill), on CUDA with the time of each launch of the block itself beside it
//! ([`RooflineReport::with_profile`](crate::roofline::RooflineReport::with_profile)).

use std::fmt;
use std::time::Duration;

use kda_runtime::{BackendError, DType, GpuBackend, ResolveError};

use kda::cases::{CaseArg, CaseError, KernelCase};
use kda::geometry::KdaGeometry;
use kda::kernels::{Glm5NextKdaEntry, Glm5NextKdaKernels};

/// What to time.
#[derive(Clone, Copy, Debug)]
pub struct BenchOptions {
    /// The layer geometry of the launch cases.
    pub geometry: KdaGeometry,
    /// Tokens of the prefill cases (decode cases take one).
    pub tokens: u32,
    /// Timed launches per kernel, after one warm-up launch.
    pub iterations: u32,
    /// Seed of the cases' inputs.
    pub seed: u64,
    /// Size of the buffer the reference copy moves.
    pub copy_bytes: usize,
}

impl BenchOptions {
    /// The preset benchmarked on CUDA unless told otherwise: the real layer.
    pub const CUDA_PRESET: &'static str = "glm5-flash";
    /// The preset benchmarked on the CPU reference unless told otherwise: it runs in seconds.
    pub const CPU_PRESET: &'static str = "tiny";
    /// The copy on CUDA: large enough to stream from HBM, far beyond the L2 cache.
    pub const CUDA_COPY_BYTES: usize = 256 << 20;
    /// The copy on the CPU reference: beyond the caches, quick to copy.
    pub const CPU_COPY_BYTES: usize = 16 << 20;
    /// Prefill tokens on the CPU reference unless told otherwise: four chunks of 64.
    pub const TOKENS: u32 = 256;
    /// Prefill tokens on CUDA unless told otherwise: the [roofline model](crate::roofline)'s
    /// prefill, so that the prefill cases (and the decode cases, at B = 64) sit beside its launches.
    pub const CUDA_TOKENS: u32 = crate::roofline::PREFILL_TOKENS;
    /// Default timed launches per kernel.
    pub const ITERATIONS: u32 = 20;

    /// The default preset on CUDA (`on_cuda`) or on the CPU reference.
    pub fn default_preset(on_cuda: bool) -> &'static str {
        if on_cuda { Self::CUDA_PRESET } else { Self::CPU_PRESET }
    }

    /// The default prefill tokens on CUDA (`on_cuda`) or on the CPU reference.
    pub fn default_tokens(on_cuda: bool) -> u32 {
        if on_cuda { Self::CUDA_TOKENS } else { Self::TOKENS }
    }

    /// The default copy size on CUDA (`on_cuda`) or on the CPU reference.
    pub fn default_copy_bytes(on_cuda: bool) -> usize {
        if on_cuda { Self::CUDA_COPY_BYTES } else { Self::CPU_COPY_BYTES }
    }
}

/// The reference copy: `bytes` from one device buffer into another.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CopyTiming {
    /// The buffer's size.
    pub bytes: u64,
    /// The time of one copy.
    pub per_copy: Duration,
}

impl CopyTiming {
    /// Bytes read plus bytes written, per second, in GB/s (10⁹).
    pub fn gb_per_s(&self) -> f64 {
        gb_per_s(2 * self.bytes, self.per_copy)
    }
}

/// One kernel's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelTiming {
    /// The table entry timed.
    pub entry: Glm5NextKdaEntry,
    /// The case's integer scalars by parameter name, in parameter order: its sizes, which the
    /// [roofline model](crate::roofline) matches its launches against.
    pub scalars: Vec<(&'static str, u64)>,
    /// What one launch must read and write ([`KernelCase::bytes_moved`]).
    pub bytes_moved: u64,
    /// The time of one launch; `None` for an optional entry the target lacks.
    pub per_launch: Option<Duration>,
}

impl KernelTiming {
    /// The table field of the entry timed.
    pub fn field(&self) -> &'static str {
        self.entry.field()
    }

    /// The bandwidth one launch achieves, in GB/s (10⁹); `None` when the kernel is absent.
    pub fn gb_per_s(&self) -> Option<f64> {
        self.per_launch.map(|time| gb_per_s(self.bytes_moved, time))
    }
}

/// What `kda-block bench` measured.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchReport {
    /// The backend's description.
    pub backend: String,
    /// The options it ran with.
    pub geometry: KdaGeometry,
    /// Tokens of the prefill cases.
    pub tokens: u32,
    /// Timed launches per kernel.
    pub iterations: u32,
    /// The reference copy.
    pub copy: CopyTiming,
    /// One row per entry of the table, in manifest order.
    pub kernels: Vec<KernelTiming>,
    /// The split-K pair against the plain `gemm` at the pair's case shape, where the target has
    /// the pair.
    pub split_k: Option<SplitKTiming>,
}

/// What splitting K buys at one shape: `gemm_splitk` then `gemm_reduce` on their cases, and
/// `gemm` on the same product unsplit, in the same run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SplitKTiming {
    /// `(m, n, k)`.
    pub shape: (u32, u32, u32),
    /// The ranges K is split into.
    pub splits: u32,
    /// One `gemm_splitk` launch plus one `gemm_reduce` launch.
    pub split: Duration,
    /// One `gemm` launch of the same product.
    pub unsplit: Duration,
}

impl BenchReport {
    /// The `gemm` case's `(m, n, k)` and time, where it ran.
    pub fn gemm(&self) -> Option<((u32, u32, u32), Duration)> {
        let gemm = self.kernels.iter().find(|kernel| kernel.entry == Glm5NextKdaEntry::gemm)?;
        let scalar = |name| {
            gemm.scalars
                .iter()
                .find(|(field, _)| *field == name)
                .and_then(|(_, value)| u32::try_from(*value).ok())
        };
        Some(((scalar("m")?, scalar("n")?, scalar("k")?), gemm.per_launch?))
    }
}

/// Why the benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The launch cases could not be built.
    #[error(transparent)]
    Case(#[from] CaseError),
    /// The table does not resolve on the backend.
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    /// A copy or launch failed.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// Nothing to time.
    #[error("--iterations must be at least 1")]
    NoIterations,
}

/// Times the reference copy, then every kernel of the table on its launch case, on `gpu`.
/// `progress` hears the field of each kernel before it is timed.
pub fn run(
    gpu: &dyn GpuBackend,
    options: &BenchOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<BenchReport, BenchError> {
    if options.iterations == 0 {
        return Err(BenchError::NoIterations);
    }
    let kernels = Glm5NextKdaKernels::resolve(gpu)?;
    let copy = time_copy(gpu, options)?;
    let mut timings = Vec::new();
    for case in KernelCase::all(&options.geometry, options.tokens, options.seed)? {
        progress(case.field());
        let bytes_moved = case.bytes_moved();
        let scalars = case
            .args()
            .iter()
            .filter_map(|arg| match arg {
                CaseArg::U32 { name, value } => Some((*name, u64::from(*value))),
                _ => None,
            })
            .collect();
        let per_launch = time_case(gpu, &kernels, &case, options.iterations)?;
        timings.push(KernelTiming { entry: case.table_entry(), scalars, bytes_moved, per_launch });
    }
    let split_k = time_split_k(gpu, &kernels, &timings, options)?;
    Ok(BenchReport {
        backend: gpu.describe(),
        geometry: options.geometry,
        tokens: options.tokens,
        iterations: options.iterations,
        copy,
        kernels: timings,
        split_k,
    })
}

/// One launch of `case`, timed over `iterations` after a warm-up; `None` where the target lacks
/// its kernel.
fn time_case(
    gpu: &dyn GpuBackend,
    kernels: &Glm5NextKdaKernels,
    case: &KernelCase,
    iterations: u32,
) -> Result<Option<Duration>, BenchError> {
    if case.kernel(kernels).is_none() {
        return Ok(None);
    }
    let mut prepared = case.prepare(gpu)?;
    case.launch(gpu, kernels, &mut prepared)?;
    let total =
        gpu.time(&mut || (0..iterations).try_for_each(|_| case.launch(gpu, kernels, &mut prepared)))?;
    Ok(Some(total / iterations))
}

/// The split-K pair's time (from `timings`) against `gemm` on the same product unsplit, where
/// both of the pair ran.
fn time_split_k(
    gpu: &dyn GpuBackend,
    kernels: &Glm5NextKdaKernels,
    timings: &[KernelTiming],
    options: &BenchOptions,
) -> Result<Option<SplitKTiming>, BenchError> {
    let timing = |entry| timings.iter().find(|timing| timing.entry == entry);
    let (Some(split), Some(reduce)) =
        (timing(Glm5NextKdaEntry::gemm_splitk), timing(Glm5NextKdaEntry::gemm_reduce))
    else {
        return Ok(None);
    };
    let (Some(split_time), Some(reduce_time)) = (split.per_launch, reduce.per_launch) else {
        return Ok(None);
    };
    let scalar = |name| {
        split
            .scalars
            .iter()
            .find(|(found, _)| *found == name)
            .and_then(|(_, value)| u32::try_from(*value).ok())
    };
    let (Some(m), Some(n), Some(k), Some(splits)) = (scalar("m"), scalar("n"), scalar("k"), scalar("splits"))
    else {
        return Ok(None);
    };
    let unsplit = KernelCase::dense(Glm5NextKdaEntry::gemm, (m, n, k), k, 0, options.seed)?;
    let Some(unsplit) = time_case(gpu, kernels, &unsplit, options.iterations)? else { return Ok(None) };
    Ok(Some(SplitKTiming { shape: (m, n, k), splits, split: split_time + reduce_time, unsplit }))
}

/// `options.copy_bytes` copied device to device, once to warm up, then `iterations` times.
fn time_copy(gpu: &dyn GpuBackend, options: &BenchOptions) -> Result<CopyTiming, BackendError> {
    let len = (options.copy_bytes / DType::F32.size()).max(1);
    let source = gpu.alloc(DType::F32, len)?;
    let mut target = gpu.alloc(DType::F32, len)?;
    gpu.copy_on_device(source.view(), target.view_mut())?;
    let total = gpu.time(&mut || {
        (0..options.iterations).try_for_each(|_| gpu.copy_on_device(source.view(), target.view_mut()))
    })?;
    Ok(CopyTiming { bytes: source.byte_len() as u64, per_copy: total / options.iterations })
}

fn gb_per_s(bytes: u64, time: Duration) -> f64 {
    bytes as f64 / time.as_secs_f64().max(f64::MIN_POSITIVE) / 1e9
}

impl fmt::Display for BenchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "bench on {}", self.backend)?;
        writeln!(
            f,
            "layer: {}; {} prefill tokens; {} launches per kernel after a warm-up",
            self.geometry, self.tokens, self.iterations
        )?;
        let copy = &self.copy;
        writeln!(
            f,
            "device copy: {:.1} MiB, {:.1} µs per copy, {:.1} GB/s (read + write)",
            copy.bytes as f64 / (1u64 << 20) as f64,
            copy.per_copy.as_secs_f64() * 1e6,
            copy.gb_per_s()
        )?;
        writeln!(f)?;
        let width = self.kernels.iter().map(|k| k.field().len()).max().unwrap_or(6).max(6);
        writeln!(
            f,
            "  {:width$}  {:>11}  {:>10}  {:>9}  {:>10}",
            "kernel", "µs/launch", "MB/launch", "GB/s", "% of copy"
        )?;
        for kernel in &self.kernels {
            let megabytes = kernel.bytes_moved as f64 / 1e6;
            match (kernel.per_launch, kernel.gb_per_s()) {
                (Some(time), Some(rate)) => writeln!(
                    f,
                    "  {:width$}  {:>11.2}  {:>10.3}  {:>9.1}  {:>8.1} %",
                    kernel.field(),
                    time.as_secs_f64() * 1e6,
                    megabytes,
                    rate,
                    100.0 * rate / copy.gb_per_s()
                )?,
                _ => writeln!(f, "  {:width$}  absent on this target (optional)", kernel.field())?,
            }
        }
        if let Some(SplitKTiming { shape: (m, n, k), splits, split, unsplit }) = self.split_k {
            let us = |time: Duration| time.as_secs_f64() * 1e6;
            writeln!(
                f,
                "split K at {m}×{n}×{k} ({splits} ranges): gemm_splitk + gemm_reduce {:.2} µs, \
                 gemm unsplit {:.2} µs ({:.2}× the speed)",
                us(split),
                us(unsplit),
                unsplit.as_secs_f64() / split.as_secs_f64().max(f64::MIN_POSITIVE)
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> BenchOptions {
        BenchOptions {
            geometry: KdaGeometry::tiny(),
            tokens: 40,
            iterations: 2,
            seed: 1,
            copy_bytes: 1 << 20,
        }
    }

    #[test]
    fn every_kernel_of_the_table_is_timed_against_the_copy() {
        let gpu = kda::reference::backend();
        let mut heard = Vec::new();
        let report = run(&gpu, &options(), &mut |field| heard.push(field.to_owned())).unwrap();
        let fields: Vec<_> = Glm5NextKdaKernels::ENTRIES.iter().map(|e| e.field).collect();
        assert_eq!(report.kernels.iter().map(|k| k.field()).collect::<Vec<_>>(), fields);
        assert_eq!(heard, fields);
        assert_eq!(report.copy.bytes, 1 << 20);
        assert!(report.copy.gb_per_s().is_finite() && report.copy.gb_per_s() > 0.0);
        for kernel in &report.kernels {
            let rate = kernel.gb_per_s().unwrap();
            assert!(rate.is_finite() && rate > 0.0, "{}: {rate}", kernel.field());
            assert!(kernel.bytes_moved > 0, "{}", kernel.field());
        }
        let text = report.to_string();
        assert!(text.starts_with("bench on CPU reference backend\n"), "{text}");
        let gemm = report.kernels.iter().find(|kernel| kernel.entry == Glm5NextKdaEntry::gemm).unwrap();
        let ((m, n, k), time) = report.gemm().unwrap();
        let (layer, tokens) = (options().geometry, options().tokens);
        assert_eq!((m, n, k), (tokens, layer.heads * layer.head_dim, layer.hidden));
        assert_eq!(Some(time), gemm.per_launch);
        for field in fields {
            assert!(text.lines().any(|line| line.trim_start().starts_with(field)), "{field} in\n{text}");
        }
        // The split-K pair beside the plain gemm of its case's product: o_proj at B = min(T, 64),
        // which at `tiny` the dispatch would not split (the case takes 3 ranges then).
        let split = report.split_k.unwrap();
        let pair: Duration = [Glm5NextKdaEntry::gemm_splitk, Glm5NextKdaEntry::gemm_reduce]
            .map(|entry| report.kernels.iter().find(|k| k.entry == entry).unwrap().per_launch.unwrap())
            .into_iter()
            .sum();
        assert_eq!(
            (split.shape, split.splits, split.split),
            ((40, layer.hidden, layer.heads * layer.head_dim), 3, pair)
        );
        assert!(text.contains("split K at 40×64×64 (3 ranges): gemm_splitk + gemm_reduce "), "{text}");
    }

    #[test]
    fn absent_optional_kernels_are_reported_not_timed() {
        let gpu = kda::reference::backend().without("kda_recurrent", "kda_recurrent_decode_bf16_regs");
        let report = run(&gpu, &options(), &mut |_| {}).unwrap();
        let regs = report.kernels.iter().find(|k| k.entry == Glm5NextKdaEntry::recurrent_regs).unwrap();
        assert_eq!((regs.per_launch, regs.gb_per_s()), (None, None));
        assert!(report.to_string().contains("recurrent_regs  absent on this target"), "{report}");
        // Without half of the split-K pair there is no split to compare.
        let gpu = kda::reference::backend().without("gemm", "dense_gemm_splitk_reduce_bf16");
        assert_eq!(run(&gpu, &options(), &mut |_| {}).unwrap().split_k, None);
    }

    #[test]
    fn bandwidth_is_bytes_over_time() {
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b;
        // 5·10⁸ bytes read and written in a millisecond: 10¹² bytes per second.
        let copy = CopyTiming { bytes: 500_000_000, per_copy: Duration::from_millis(1) };
        assert!(close(copy.gb_per_s(), 1000.0), "{}", copy.gb_per_s());
        let kernel = KernelTiming {
            entry: Glm5NextKdaEntry::fill,
            scalars: Vec::new(),
            bytes_moved: 2_000_000,
            per_launch: Some(Duration::from_micros(10)),
        };
        assert!(close(kernel.gb_per_s().unwrap(), 200.0), "{:?}", kernel.gb_per_s());
        assert!(matches!(
            run(&kda::reference::backend(), &BenchOptions { iterations: 0, ..options() }, &mut |_| {}),
            Err(BenchError::NoIterations)
        ));
    }
}
