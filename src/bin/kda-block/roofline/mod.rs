//! The roofline model of one KDA layer on an H200: for each kernel launch of a decode step at
//! B = 1, a batched decode step at B = 64 and a prefill of T tokens, the bytes it must move, the
//! FLOPs it must do, and the time neither HBM bandwidth nor arithmetic throughput lets it beat:
//! `max(bytes / 4.8 TB/s, FLOPs / peak)`, the peak [989 TFLOPS](TENSOR_BF16_FLOPS) for the
//! tensor-core GEMM, a third of [495 TFLOPS](TENSOR_TF32_FLOPS) for the chunk scan (f32 products
//! as three tf32 ones on the tensor cores) and [67 TFLOPS](F32_FLOPS) of f32 for every other kernel. A scenario's total
//! is the sum over its launches: the layer's time if each kernel ran at its own roofline, back to
//! back. This is a model, not a measurement.
//!
//! # Where the launches come from
//!
//! The launches are the block's own: [`Glm5NextKdaBlock::decode_batch`] and
//! [`Glm5NextKdaBlock::prefill`] run on [`RecordingBackend`], which computes nothing and records every
//! launch with its arguments (buffer views with element type and length, and scalars), so the
//! kernels, their order, the dense dispatch ([`kda::ops::dense_mm_kernel`]) and every shape are the
//! ones the block launches; no second list of launches exists to drift from it. One part of the
//! dispatch is applied after the extrapolation below: whether the GEMM splits K depends on a
//! product's size at the real head count, so the sampled runs go without the split-K pair and
//! each `gemm` the dispatch would split at its real sizes becomes the pair (`split`).
//!
//! The recording backend's buffers are real host memory, zeroed on allocation: at `glm5-flash` one layer's
//! weights (260 MB of bf16), a prefill of 4,096 tokens (~1.9 GB of activations) and a pool of 64
//! recurrent states (268 MB) would take seconds to zero on a small machine. So the block is run
//! at the layer's real hidden size, head dimension, chunk, batch and token counts but with **1, 2
//! and 3 heads**, and each launch is extrapolated to the real head count: every buffer length and
//! every integer scalar the block computes is affine in the head count H (`H·D·hidden`,
//! `t·H·D`, `slots·H·D·D`, `2·H` q/k heads, ...), so the values at H = 1 and H = 2 give the value
//! at any H exactly, and the run at H = 3 checks that this holds: a launch list that differs in
//! anything but those values (another kernel, another dispatch, an f32 scalar) or whose values at
//! H = 3 are not on the line is an error ([`RooflineError::Drift`], [`RooflineError::NotAffine`]),
//! never a silent wrong figure. At `glm5-flash` with T = 4,096 the three runs take about 0.35 s
//! and 180 MB at most (a release build on the 2-core development machine).
//!
//! # Bytes
//!
//! Each buffer argument counts its elements at the kernel's element type (bf16 2 bytes, f32 and
//! u32 4) once: read once if `const`, written once if written. The buffers a kernel reads and
//! writes in place count twice ([`READ_WRITE`]: the conv windows and the recurrent states), and
//! weights count once per launch. Some kernels touch less than the view the block hands them, and
//! count what they touch:
//! - an operand read in rows a stride apart (the columns of one projection among the stacked
//!   projections' outputs: the dense products' `a` or `x`, the convs' `x`, the `b_raw` of
//!   `chunk_prepare` and the recurrent kernels) counts its rows times their width, not the view
//!   that spans them (nor, for the single-row `gemv`, the rest of the stacked row after its `k`
//!   elements);
//! - `conv_prefill` writes the first `t` rows of its `q`, `k` and `v` (the rows past them are the
//!   chunk padding): `t·qkv` elements each;
//! - the decode kernels' `pool [slots, …]` is touched only in the `b` slots the batch rows name:
//!   `b` slots' worth of it (the model's pools have `slots = b`, so this is the whole pool there).
//!
//! # FLOPs
//!
//! Two per multiply-add of the dense products; for every other kernel the operations of its
//! math in `docs/kernels.md`, counted per element by [`flops`], which derives each count.
//! Conventions: an add, multiply, subtract, divide, `exp`, `sqrt` or `log1p` is one FLOP; a sum
//! of n terms from a zero accumulator is n adds; a factor that does not depend on a loop's index
//! is computed once outside it (`β·A[i][j]` once per pair, `q·scale` once per element);
//! conversions (bf16 ↔ f32), copies and compares are free. Transcendentals run on the SFUs at
//! other rates than f32 FMA, but every kernel they appear in is either memory-bound by a wide
//! margin or dominated by multiply-adds, so the convention moves no bound.

use std::fmt;
use std::time::Duration;

use kda::block::{BlockError, Glm5NextKdaBlock};
use kda::cases::MAX_CASE_BATCH;
use kda::geometry::{GeometryError, KdaGeometry};
use kda::kernels::Glm5NextKdaEntry;
use kda_runtime::profile::TimedLaunch;
use kda_runtime::record::{RecordedLaunch, RecordingBackend};
use kda_runtime::{BackendError, DType, GpuBackend};

mod flops;
mod profile;
mod record;
mod report;
mod split;
#[cfg(test)]
mod tests;

pub use flops::flops;
pub use profile::profile;
use record::extrapolate;
pub use record::record;

/// H200 HBM3e bandwidth: 4.8 TB/s (10¹² bytes per second).
pub const HBM_BYTES_PER_S: f64 = 4.8e12;
/// H200 dense bf16 tensor-core throughput (no sparsity): 989 TFLOPS.
pub const TENSOR_BF16_FLOPS: f64 = 989e12;
/// H200 dense tf32 tensor-core throughput (no sparsity): 495 TFLOPS.
pub const TENSOR_TF32_FLOPS: f64 = 494.7e12;
/// The tf32 products that make one f32 product on the tensor cores (`kernels/mma_f32.cuh`).
pub const TF32_PARTS: f64 = 3.0;
/// H200 f32 throughput on the CUDA cores (FMA counted as two): 67 TFLOPS.
pub const F32_FLOPS: f64 = 67e12;

/// The prefill of the model unless told otherwise: 4,096 tokens, 64 chunks of 64 at `glm5-flash`.
pub const PREFILL_TOKENS: u32 = 4096;
/// The batch of the batched decode scenario: 64 sequences, the batch of the decode launch cases
/// ([`MAX_CASE_BATCH`]), so that their timings sit beside it.
pub const DECODE_BATCH: u32 = MAX_CASE_BATCH;

/// The head counts the block is run at; the first two give the line, the last checks it.
const SAMPLE_HEADS: [u32; 3] = [1, 2, 3];

/// The written buffer parameters that are also read, as `(field, param)`: the conv windows, the
/// recurrent states (the launch cases' `ReadWrite` arguments, which a test compares this with).
/// Every other written parameter is written without being read.
pub const READ_WRITE: [(Glm5NextKdaEntry, &str); 5] = [
    (Glm5NextKdaEntry::conv_decode, "pool"),
    (Glm5NextKdaEntry::conv_prefill, "state"),
    (Glm5NextKdaEntry::chunk_scan, "state"),
    (Glm5NextKdaEntry::recurrent, "pool"),
    (Glm5NextKdaEntry::recurrent_regs, "pool"),
];

/// Why the model could not be built.
#[derive(Debug, thiserror::Error)]
pub enum RooflineError {
    /// The geometry or a token count is not one the block runs.
    #[error(transparent)]
    Geometry(#[from] GeometryError),
    /// The block refused to run on the recording backend.
    #[error(transparent)]
    Block(#[from] BlockError),
    /// The recording backend refused an allocation.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The block's launches at another head count are not the same launches.
    #[error(
        "{scenario}: the block's launches at {heads} heads differ from those at 1 head ({what}); the model extrapolates from equal launch lists"
    )]
    Drift {
        /// The scenario.
        scenario: String,
        /// The head count of the run that differs.
        heads: u32,
        /// What differs.
        what: String,
    },
    /// A length or scalar is not affine in the head count.
    #[error(
        "{scenario}: launch {index} (`{field}`), `{param}` is {found} at 3 heads, not {expected} as 1 and 2 heads give: the model assumes every size is affine in the head count"
    )]
    NotAffine {
        /// The scenario.
        scenario: String,
        /// The launch's position in the scenario.
        index: usize,
        /// The kernel.
        field: &'static str,
        /// The parameter.
        param: &'static str,
        /// The value extrapolated from 1 and 2 heads.
        expected: i128,
        /// The value recorded at 3 heads.
        found: i128,
    },
    /// A size that does not fit at the real head count.
    #[error("{scenario}: `{field}`'s `{param}` is {value} at {heads} heads, outside what the kernels take")]
    Overflow {
        /// The scenario.
        scenario: String,
        /// The kernel.
        field: &'static str,
        /// The parameter.
        param: &'static str,
        /// The extrapolated value.
        value: i128,
        /// The head count.
        heads: u32,
    },
    /// A launch of a kernel that is not in the table (the recording backend carries only the table's).
    #[error("a launch of `{0}`, which is not an entry of `[glm5next_kda]`")]
    UnknownKernel(String),
    /// The block's launches on a backend are not the model's (another kernel, another count).
    #[error("{scenario}: the block on the device launched [{measured}], the model has [{model}]")]
    ProfileDrift {
        /// The scenario.
        scenario: String,
        /// The model's launches, by field.
        model: String,
        /// The launches timed, by field (`?` for a kernel not in the table).
        measured: String,
    },
    /// A kernel without a FLOP count here, or whose params lack one the count needs.
    #[error(
        "no FLOP model for `{field}` (needs the scalar `{param}`): add it to src/bin/kda-block/roofline/flops.rs"
    )]
    NoModel {
        /// The kernel.
        field: &'static str,
        /// The scalar it needs, or `-` for a kernel without a count.
        param: &'static str,
    },
}

/// One layer call the model times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// [`Glm5NextKdaBlock::decode_batch`]: one token of each of `batch` sequences of a pool of
    /// `batch` slots.
    Decode {
        /// Sequences in the step (the dense products' m).
        batch: u32,
    },
    /// [`Glm5NextKdaBlock::prefill`]: `tokens` tokens of one sequence.
    Prefill {
        /// Tokens (the dense products' m).
        tokens: u32,
    },
}

impl Scenario {
    /// The three scenarios: decode at B = 1, at B = [`DECODE_BATCH`], and a prefill of `tokens`.
    pub fn all(tokens: u32) -> [Scenario; 3] {
        [
            Scenario::Decode { batch: 1 },
            Scenario::Decode { batch: DECODE_BATCH },
            Scenario::Prefill { tokens },
        ]
    }

    /// Runs the scenario's call of `block` on `gpu` (the recording backend the block was made on) and returns
    /// the launches of that call alone (not those that set up its pool).
    fn record(
        &self,
        gpu: &RecordingBackend,
        block: &Glm5NextKdaBlock<'_>,
    ) -> Result<Vec<RecordedLaunch>, RooflineError> {
        let mut before = 0;
        self.run(gpu, block, &mut || before = gpu.launches().len())?;
        Ok(gpu.launches().split_off(before))
    }

    /// Runs the scenario's call of `block` on `gpu` (the backend the block was made on), on
    /// inputs of zeros; `begins` is called once what sets the call up (a pool's slots) is issued,
    /// right before the call itself.
    pub(crate) fn run(
        &self,
        gpu: &dyn GpuBackend,
        block: &Glm5NextKdaBlock<'_>,
        begins: &mut dyn FnMut(),
    ) -> Result<(), RooflineError> {
        let hidden = block.geometry().hidden as usize;
        match *self {
            Scenario::Decode { batch } => {
                let mut pool = block.new_pool(batch)?;
                let slots = (0..batch).map(|_| block.acquire(&mut pool)).collect::<Result<Vec<_>, _>>()?;
                let input = gpu.alloc(DType::Bf16, batch as usize * hidden)?;
                begins();
                block.decode_batch(&mut pool, &slots, &input)?;
            }
            Scenario::Prefill { tokens } => {
                let mut state = block.new_state()?;
                let input = gpu.alloc(DType::Bf16, tokens as usize * hidden)?;
                begins();
                block.prefill(&mut state, &input)?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scenario::Decode { batch } => write!(f, "decode step, B = {batch}"),
            Scenario::Prefill { tokens } => write!(f, "prefill, T = {tokens}"),
        }
    }
}

/// The throughput that bounds a kernel's arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peak {
    /// bf16 on tensor cores: `gemm` (`mma.sync`), [`TENSOR_BF16_FLOPS`].
    TensorBf16,
    /// f32 products as three tf32 ones on tensor cores: `chunk_scan`, [`TENSOR_TF32_FLOPS`] /
    /// [`TF32_PARTS`].
    TensorTf32Split,
    /// f32 on the CUDA cores: every other kernel, [`F32_FLOPS`].
    F32,
}

impl Peak {
    /// FLOPs per second.
    pub fn flops_per_s(self) -> f64 {
        match self {
            Peak::TensorBf16 => TENSOR_BF16_FLOPS,
            Peak::TensorTf32Split => TENSOR_TF32_FLOPS / TF32_PARTS,
            Peak::F32 => F32_FLOPS,
        }
    }

    /// The peak of a kernel of the table. `chunk_prepare` keeps the f32 roof although some of its
    /// products run on tensor cores: its exponentials and the pairs within a sub-block do not.
    pub fn of(entry: Glm5NextKdaEntry) -> Peak {
        use Glm5NextKdaEntry::*;
        match entry {
            gemm | gemm_splitk => Peak::TensorBf16,
            chunk_scan => Peak::TensorTf32Split,
            gemm_reduce | gemv | gemv_batchm | conv_decode | conv_prefill | chunk_prepare | recurrent
            | recurrent_regs | o_norm | fill => Peak::F32,
        }
    }
}

/// Which roof a launch sits under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// Its bytes take longer than its FLOPs.
    Memory,
    /// Its FLOPs take longer than its bytes.
    Compute,
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Bound::Memory => "memory",
            Bound::Compute => "compute",
        })
    }
}

/// One argument of a launch at the real head count, named as the manifest names its parameter.
#[derive(Clone, Debug, PartialEq)]
pub enum LaunchArg {
    /// A buffer view: its element type, length, and whether the kernel may write it.
    Buffer {
        /// The parameter.
        name: &'static str,
        /// Element type.
        dtype: DType,
        /// Elements of the view.
        len: u64,
        /// Passed as a mutable view.
        writable: bool,
    },
    /// An integer scalar.
    Int {
        /// The parameter.
        name: &'static str,
        /// Its value.
        value: u64,
    },
    /// An `f32` scalar.
    F32 {
        /// The parameter.
        name: &'static str,
        /// Its value.
        value: f32,
    },
}

/// One kernel launch of a scenario at the real geometry, with its bytes and FLOPs.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchModel {
    /// The table entry launched.
    pub entry: Glm5NextKdaEntry,
    /// The arguments, in parameter order.
    pub args: Vec<LaunchArg>,
    /// Bytes the launch must move.
    pub bytes: u64,
    /// FLOPs it must do.
    pub flops: u64,
    /// The throughput its FLOPs run at.
    pub peak: Peak,
    /// The measured time of the kernel's launch case where its sizes are this launch's.
    pub measured: Option<Duration>,
}

impl LaunchModel {
    /// A launch of `entry` with `args` (in parameter order), its bytes and FLOPs counted.
    pub fn new(entry: Glm5NextKdaEntry, args: Vec<LaunchArg>) -> Result<Self, RooflineError> {
        let mut launch =
            LaunchModel { entry, args, bytes: 0, flops: 0, peak: Peak::of(entry), measured: None };
        launch.bytes = launch.count_bytes()?;
        launch.flops = flops(&launch)?;
        Ok(launch)
    }

    /// The table field of the entry launched.
    pub fn field(&self) -> &'static str {
        self.entry.field()
    }

    /// The integer scalar `name`.
    pub fn scalar(&self, name: &str) -> Option<u64> {
        self.args.iter().find_map(|arg| match arg {
            LaunchArg::Int { name: found, value } if *found == name => Some(*value),
            _ => None,
        })
    }

    /// The integer scalar `name`, or the error that the FLOP model of this kernel needs it.
    fn need(&self, name: &'static str) -> Result<u64, RooflineError> {
        self.scalar(name).ok_or(RooflineError::NoModel { field: self.field(), param: name })
    }

    /// The argument `name`, or the error that the model needs it.
    fn arg(&self, name: &'static str) -> Result<LaunchArg, RooflineError> {
        let named = |arg: &&LaunchArg| match arg {
            LaunchArg::Buffer { name: found, .. }
            | LaunchArg::Int { name: found, .. }
            | LaunchArg::F32 { name: found, .. } => *found == name,
        };
        self.args
            .iter()
            .find(named)
            .cloned()
            .ok_or(RooflineError::NoModel { field: self.field(), param: name })
    }

    /// Bytes: each buffer's touched elements at its element type, twice for [`READ_WRITE`] ones.
    fn count_bytes(&self) -> Result<u64, RooflineError> {
        let mut bytes = 0;
        for arg in &self.args {
            let LaunchArg::Buffer { name, dtype, len, .. } = *arg else { continue };
            use Glm5NextKdaEntry::*;
            let touched = match (self.entry, name) {
                // Rows of a wider matrix: their elements, not the view that spans them.
                (gemm | gemm_splitk, "a") | (gemv_batchm, "x") => self.need("m")? * self.need("k")?,
                (gemv, "x") => self.need("k")?,
                (conv_decode, "x") => self.need("b")? * self.need("dim")?,
                (conv_prefill, "x") => self.need("t")? * 3 * self.need("qkv")?,
                (chunk_prepare, "b_raw") => self.need("t")? * self.need("h")?,
                (recurrent | recurrent_regs, "b_raw") => self.need("b")? * self.need("h")?,
                // The t real rows, not the chunk padding.
                (conv_prefill, "q" | "k" | "v") => self.need("t")? * self.need("qkv")?,
                // Only the b batch rows' slots of the pool.
                (conv_decode | recurrent | recurrent_regs, "pool") => {
                    let slots = self.need("slots")?.max(1);
                    len / slots * self.need("b")?.min(slots)
                }
                _ => len,
            };
            let passes = if READ_WRITE.contains(&(self.entry, name)) { 2 } else { 1 };
            bytes += passes * touched * dtype.size() as u64;
        }
        Ok(bytes)
    }

    /// The time its bytes take at [`HBM_BYTES_PER_S`].
    pub fn memory_time(&self) -> f64 {
        self.bytes as f64 / HBM_BYTES_PER_S
    }

    /// The time its FLOPs take at its peak.
    pub fn compute_time(&self) -> f64 {
        self.flops as f64 / self.peak.flops_per_s()
    }

    /// The roofline time: the longer of the two, in seconds.
    pub fn time(&self) -> f64 {
        self.memory_time().max(self.compute_time())
    }

    /// Which of the two it is.
    pub fn bound(&self) -> Bound {
        if self.compute_time() > self.memory_time() { Bound::Compute } else { Bound::Memory }
    }

    /// The launch's size in a few characters: `m×n×k` for a dense product, else its batch rows,
    /// tokens, rows or elements.
    pub fn shape(&self) -> String {
        match self.entry {
            Glm5NextKdaEntry::gemv => {
                format!("1×{}×{}", self.scalar("n").unwrap_or(0), self.scalar("k").unwrap_or(0))
            }
            Glm5NextKdaEntry::gemm | Glm5NextKdaEntry::gemv_batchm => {
                let [m, n, k] = ["m", "n", "k"].map(|name| self.scalar(name).unwrap_or(0));
                format!("{m}×{n}×{k}")
            }
            Glm5NextKdaEntry::gemm_splitk | Glm5NextKdaEntry::gemm_reduce => {
                let [m, n, splits] = ["m", "n", "splits"].map(|name| self.scalar(name).unwrap_or(0));
                let k = self.scalar("k").map(|k| format!("×{k}")).unwrap_or_default();
                format!("{m}×{n}{k}/{splits}")
            }
            _ => ["b", "t", "rows", "n"]
                .into_iter()
                .find_map(|name| self.scalar(name).map(|value| format!("{name} = {value}")))
                .unwrap_or_default(),
        }
    }
}

/// The launches of one scenario, modelled.
#[derive(Clone, Debug, PartialEq)]
pub struct ScenarioModel {
    /// The call.
    pub scenario: Scenario,
    /// Its launches, in the block's order.
    pub launches: Vec<LaunchModel>,
}

impl ScenarioModel {
    /// Bytes of all its launches.
    pub fn bytes(&self) -> u64 {
        self.launches.iter().map(|launch| launch.bytes).sum()
    }

    /// FLOPs of all its launches.
    pub fn flops(&self) -> u64 {
        self.launches.iter().map(|launch| launch.flops).sum()
    }

    /// The layer's roofline time: the sum of its launches', in seconds.
    pub fn time(&self) -> f64 {
        self.launches.iter().map(LaunchModel::time).sum()
    }

    /// The roofline time of each kernel (its launches summed), longest first.
    pub fn by_kernel(&self) -> Vec<(&'static str, f64)> {
        let mut kernels: Vec<(&'static str, f64)> = Vec::new();
        for launch in &self.launches {
            match kernels.iter_mut().find(|(field, _)| *field == launch.field()) {
                Some((_, time)) => *time += launch.time(),
                None => kernels.push((launch.field(), launch.time())),
            }
        }
        kernels.sort_by(|a, b| b.1.total_cmp(&a.1));
        kernels
    }
}

/// The model of one layer in every scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct RooflineReport {
    /// The layer.
    pub geometry: KdaGeometry,
    /// The backend the block's launches were timed on ([`Self::with_profile`]); `None`: the model
    /// alone.
    pub measured_on: Option<String>,
    /// One per scenario.
    pub scenarios: Vec<ScenarioModel>,
}

impl RooflineReport {
    /// Sets beside each launch of each scenario the time `profile` measured for the launch at the
    /// same position of the same scenario (run on `backend`), which must be a launch of the same
    /// kernel: a profile of the block at this layer ([`profile`]).
    pub fn with_profile(
        mut self,
        profile: &[Vec<TimedLaunch>],
        backend: &str,
    ) -> Result<Self, RooflineError> {
        let named = |launch: &TimedLaunch| {
            record::launched_entry(&launch.module, &launch.entry).map_or("?", Glm5NextKdaEntry::field)
        };
        for (index, scenario) in self.scenarios.iter_mut().enumerate() {
            let timed = profile.get(index).map_or(&[][..], Vec::as_slice);
            let measured: Vec<&str> = timed.iter().map(named).collect();
            let model: Vec<&str> = scenario.launches.iter().map(|launch| launch.field()).collect();
            if measured != model {
                return Err(RooflineError::ProfileDrift {
                    scenario: scenario.scenario.to_string(),
                    model: model.join(", "),
                    measured: measured.join(", "),
                });
            }
            for (launch, timed) in scenario.launches.iter_mut().zip(timed) {
                launch.measured = Some(timed.time);
            }
        }
        self.measured_on = Some(backend.to_owned());
        Ok(self)
    }
}

/// The roofline model of one layer at `geometry` in the three [scenarios](Scenario::all), the
/// prefill of `tokens` tokens, on a target that lacks the optional entries `absent` (their calls
/// go where the block sends them without: `gemv_batchm` rows to `gemm`, `recurrent_regs` to
/// `recurrent`).
pub fn model(
    geometry: &KdaGeometry,
    tokens: u32,
    absent: &[Glm5NextKdaEntry],
) -> Result<RooflineReport, RooflineError> {
    model_scenarios(geometry, &Scenario::all(tokens), absent)
}

/// [`model`] for any list of scenarios.
pub fn model_scenarios(
    geometry: &KdaGeometry,
    scenarios: &[Scenario],
    absent: &[Glm5NextKdaEntry],
) -> Result<RooflineReport, RooflineError> {
    geometry.validate()?;
    for scenario in scenarios {
        let (Scenario::Decode { batch: t } | Scenario::Prefill { tokens: t }) = *scenario;
        geometry.padded(t)?;
    }
    // runs[h][s]: the launches of scenario s at SAMPLE_HEADS[h] heads, without split K (which
    // `split_k` applies at the real sizes, where the target has it).
    let sampled_absent: Vec<Glm5NextKdaEntry> = absent.iter().copied().chain(split::SPLIT_K).collect();
    let runs = SAMPLE_HEADS
        .iter()
        .map(|&heads| record(&KdaGeometry { heads, ..*geometry }, scenarios, &sampled_absent))
        .collect::<Result<Vec<_>, _>>()?;
    let splits_k = !absent.iter().any(|entry| split::SPLIT_K.contains(entry));
    let scenarios = scenarios
        .iter()
        .enumerate()
        .map(|(s, scenario)| {
            let launches = extrapolate(scenario, [&runs[0][s], &runs[1][s], &runs[2][s]], geometry.heads)?;
            let launches = if splits_k { split::split_k(launches)? } else { launches };
            Ok(ScenarioModel { scenario: *scenario, launches })
        })
        .collect::<Result<_, RooflineError>>()?;
    Ok(RooflineReport { geometry: *geometry, measured_on: None, scenarios })
}
