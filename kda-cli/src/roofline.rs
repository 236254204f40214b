//! The roofline model of one KDA layer on an H200: for each kernel launch of a decode step at
//! B = 1, a batched decode step at B = 64 and a prefill of T tokens, the bytes it must move, the
//! FLOPs it must do, and the time neither HBM bandwidth nor arithmetic throughput lets it beat:
//! `max(bytes / 4.8 TB/s, FLOPs / peak)`, the peak [989 TFLOPS](TENSOR_BF16_FLOPS) for the
//! tensor-core GEMM and [67 TFLOPS](F32_FLOPS) of f32 for every other kernel. A scenario's total
//! is the sum over its launches: the layer's time if each kernel ran at its own roofline, back to
//! back. This is a model, not a measurement.
//!
//! # Where the launches come from
//!
//! The launches are the block's own: [`Glm5NextKdaBlock::decode_batch`] and
//! [`Glm5NextKdaBlock::prefill`] run on [`FakeBackend`], which computes nothing and records every
//! launch with its arguments (buffer views with element type and length, and scalars), so the
//! kernels, their order, the dense dispatch ([`kda::ops::dense_mm_kernel`]) and every shape are the
//! ones the block launches; no second list of launches exists to drift from it.
//!
//! The fake's buffers are real host memory, zeroed on allocation: at `glm5-flash` one layer's
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
//! writes in place count twice ([`READ_WRITE`]: the conv windows, the recurrent states, the
//! in-place L2 norm), and weights count once per launch. Two kernels touch less than the view the
//! block hands them, and count what they touch:
//! - `l2` normalises the first `heads·head_dim` values of each of its `rows` rows (q and k; the v
//!   channels of the same rows are left alone): `rows·heads·head_dim` elements, read and written;
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
use kda::kernels::{Glm5NextKda, Glm5NextKdaKernels};
use kda::weights::HostWeights;
use kda_runtime::testing::{FakeArg, FakeBackend, FakeLaunch};
use kda_runtime::{BackendError, DType, GpuBackend, KernelEntry};

use crate::bench::BenchReport;

/// H200 HBM3e bandwidth: 4.8 TB/s (10¹² bytes per second).
pub const HBM_BYTES_PER_S: f64 = 4.8e12;
/// H200 dense bf16 tensor-core throughput (no sparsity): 989 TFLOPS.
pub const TENSOR_BF16_FLOPS: f64 = 989e12;
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
/// recurrent states and the in-place L2 norm (the launch cases' `ReadWrite` arguments, which a
/// test compares this with). Every other written parameter is written without being read.
pub const READ_WRITE: [(&str, &str); 6] = [
    ("conv_decode", "pool"),
    ("conv_prefill", "state"),
    ("l2", "data"),
    ("chunk_scan", "state"),
    ("recurrent", "pool"),
    ("recurrent_smem", "pool"),
];

/// Why the model could not be built.
#[derive(Debug, thiserror::Error)]
pub enum RooflineError {
    /// The geometry or a token count is not one the block runs.
    #[error(transparent)]
    Geometry(#[from] GeometryError),
    /// The block refused to run on the fake backend.
    #[error(transparent)]
    Block(#[from] BlockError),
    /// The fake backend refused an allocation.
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
    /// A launch of a kernel that is not in the table (the fake carries only the table's).
    #[error("a launch of `{0}`, which is not an entry of `[glm5next_kda]`")]
    UnknownKernel(String),
    /// A kernel without a FLOP count here, or whose params lack one the count needs.
    #[error("no FLOP model for `{field}` (needs the scalar `{param}`): add it to kda-cli/src/roofline.rs")]
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

    /// Runs the scenario's call of `block` on `gpu` (the fake the block was made on) and returns
    /// the launches of that call alone (not those that set up its pool).
    fn record(
        &self,
        gpu: &FakeBackend,
        block: &Glm5NextKdaBlock<'_>,
    ) -> Result<Vec<FakeLaunch>, RooflineError> {
        let hidden = block.geometry().hidden as usize;
        let before = match *self {
            Scenario::Decode { batch } => {
                let mut pool = block.new_pool(batch)?;
                let slots = (0..batch).map(|_| block.acquire(&mut pool)).collect::<Result<Vec<_>, _>>()?;
                let input = gpu.alloc(DType::Bf16, batch as usize * hidden)?;
                let before = gpu.launches().len();
                block.decode_batch(&mut pool, &slots, &input)?;
                before
            }
            Scenario::Prefill { tokens } => {
                let mut state = block.new_state()?;
                let input = gpu.alloc(DType::Bf16, tokens as usize * hidden)?;
                let before = gpu.launches().len();
                block.prefill(&mut state, &input)?;
                before
            }
        };
        Ok(gpu.launches().split_off(before))
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
    /// f32 on the CUDA cores: every other kernel, [`F32_FLOPS`].
    F32,
}

impl Peak {
    /// FLOPs per second.
    pub fn flops_per_s(self) -> f64 {
        match self {
            Peak::TensorBf16 => TENSOR_BF16_FLOPS,
            Peak::F32 => F32_FLOPS,
        }
    }

    /// The peak of a kernel of the table.
    pub fn of(field: &str) -> Peak {
        if field == "gemm" { Peak::TensorBf16 } else { Peak::F32 }
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
    /// The table field.
    pub field: &'static str,
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
    /// A launch of `field` with `args` (in parameter order), its bytes and FLOPs counted.
    pub fn new(field: &'static str, args: Vec<LaunchArg>) -> Result<Self, RooflineError> {
        let mut launch =
            LaunchModel { field, args, bytes: 0, flops: 0, peak: Peak::of(field), measured: None };
        launch.bytes = launch.count_bytes()?;
        launch.flops = flops(&launch)?;
        Ok(launch)
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
        self.scalar(name).ok_or(RooflineError::NoModel { field: self.field, param: name })
    }

    /// Bytes: each buffer's touched elements at its element type, twice for [`READ_WRITE`] ones.
    fn count_bytes(&self) -> Result<u64, RooflineError> {
        let mut bytes = 0;
        for arg in &self.args {
            let LaunchArg::Buffer { name, dtype, len, .. } = *arg else { continue };
            let touched = match (self.field, name) {
                // The first heads·head_dim values of each row: q and k, not v.
                ("l2", "data") => self.need("rows")? * self.need("heads")? * self.need("head_dim")?,
                // Only the b batch rows' slots of the pool.
                ("conv_decode" | "recurrent" | "recurrent_smem", "pool") => {
                    let slots = self.need("slots")?.max(1);
                    len / slots * self.need("b")?.min(slots)
                }
                _ => len,
            };
            let passes = if READ_WRITE.contains(&(self.field, name)) { 2 } else { 1 };
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
        match self.field {
            "gemv" => format!("1×{}×{}", self.scalar("n").unwrap_or(0), self.scalar("k").unwrap_or(0)),
            "gemm" | "gemv_batchm" => {
                let [m, n, k] = ["m", "n", "k"].map(|name| self.scalar(name).unwrap_or(0));
                format!("{m}×{n}×{k}")
            }
            _ => ["b", "t", "rows", "n"]
                .into_iter()
                .find_map(|name| self.scalar(name).map(|value| format!("{name} = {value}")))
                .unwrap_or_default(),
        }
    }

    /// Whether the launch case that `scalars` describes (its integer scalars by name) has this
    /// launch's sizes: the same value for every integer scalar but `slots`, the capacity of a
    /// decode pool, which sets no work (a step touches the b slots its rows name).
    pub fn matches(&self, scalars: &[(&'static str, u64)]) -> bool {
        let mine: Vec<(&str, u64)> = self
            .args
            .iter()
            .filter_map(|arg| match arg {
                LaunchArg::Int { name, value } if *name != "slots" => Some((*name, *value)),
                _ => None,
            })
            .collect();
        let theirs: Vec<(&str, u64)> = scalars.iter().copied().filter(|(name, _)| *name != "slots").collect();
        mine == theirs
    }
}

/// The FLOPs of one launch, from its kernel and scalars; `docs/kernels.md` §2 has each kernel's
/// math, and each count below follows it under the conventions of the [module](self) docs.
///
/// - **`gemm`, `gemv_batchm`**: `2·m·n·k`; **`gemv`**: `2·n·k` (m = 1). One multiply and one add
///   per term of each of the m·n sums of k terms.
/// - **`conv_decode`**: `b·(dim·(2·width + 4) + 3·qk_channels + 2·qk_channels/head_dim)`. Per
///   channel: the `width` taps' products and sums (2·width), then SiLU `a·σ(a)` with
///   `σ(a) = 1/(1 + e^{−a})` (exp, add, divide, multiply: 4). Per q/k channel the L2 norm: square
///   and sum (2), divide by the root (1); per q/k head: `+ eps` and `sqrt` (2). The window shift
///   moves data only.
/// - **`conv_prefill`**: `t·dim·(2·width + 4)`: the same conv and SiLU per token, no norm.
/// - **`l2`**: `rows·heads·(3·head_dim + 2)`: per value square, sum and divide (3); per head
///   `+ eps` and `sqrt` (2).
/// - **`gate`**: law 0 `6·t·h·d + h`, law 1 `4·t·h·d + h`. Per channel `x = g + dt_bias` (1);
///   law 0 `lower_bound·σ(e·x)`: multiply, σ (exp, add, divide), multiply (5); law 1
///   `−e·softplus(x)` = `−e·log1p(e^x)`: exp, log1p, multiply (3). `e = exp(a_log)` once per
///   head (h).
/// - **`sigmoid`**: `3·n`: exp, add, divide per element.
/// - **`o_norm`**: `rows·(8·d + 4)`. Per value: square and sum (2), `x·r`, `·w` (2), σ of the
///   gate (3), the gating product (1); per row: `/d`, `+ eps`, `sqrt`, the reciprocal (4).
/// - **`recurrent`, `recurrent_smem`**: `b·h·(7·d² + 4·d)`. Per (row, head): `α = exp(g)` and
///   `q·scale` (2·d); per state column v (d of them): pass 1 over k `s = S·α` and `kv += s·k`
///   (3·d), `δ = β·(v − kv)` (2), pass 2 over k `s += k·δ` and `o += s·q` (4·d).
/// - **`chunk_prepare`**: per (chunk, head), `cdiv(t, c)·h` of them, with `P = c(c−1)/2` pairs
///   j < i, `R = c(c+1)/2` pairs j ≤ i and `Q = c(c−1)(c−2)/6` triples j < m < i:
///   `3·c·d + P·(5·d + 2) + 2·Q + R·(4·d + 1)`. The in-chunk prefix sums of the gates (c·d);
///   `A[i][j]` for j < i: per channel `k_i·k_j`, `gc_i − gc_j`, exp, product, sum (5·d), then
///   `·(−β_i)` (1); the forward substitution: a product and a sum per triple (2·Q) and the update
///   of each pair (P); `u`: `a = A[i][j]·β_j` per pair (1) and `a·v` summed per channel (2·d); `w`:
///   `k̃ = k·exp(gc)` once per (position, channel) (2·c·d) and `a·k̃` summed per pair and channel
///   (2·d).
/// - **`chunk_scan`**: per (chunk, head): `6·c·d² + 8·c·d + 7·R·d + 2·d² + d`. `q_s = q·scale`
///   (c·d) and `q̃ = q_s·exp(gc)` (2·c·d); `vnew = u − w·S` (c·d·(2·d + 1)); `inter = q̃·S`
///   (2·c·d²); `intra[i][j]` for j ≤ i: per channel `q_s·k`, `gc_i − gc_j`, exp, product, sum
///   (5·R·d); `out = inter + intra·vnew` (2·R·d + c·d); the state update: the closing decay
///   `exp(gc_l)` (d) applied (d²), `k·exp(gc_l − gc_i)` per (position, channel) (3·c·d), its
///   product with `vnew` summed over the chunk (2·c·d²), added to the decayed state (d²).
/// - **`split_widen`, `pack`, `fill`**: 0: data movement (and exact widening) only.
pub fn flops(launch: &LaunchModel) -> Result<u64, RooflineError> {
    let s = |name| launch.need(name);
    Ok(match launch.field {
        "gemm" | "gemv_batchm" => 2 * s("m")? * s("n")? * s("k")?,
        "gemv" => 2 * s("n")? * s("k")?,
        "conv_decode" => {
            let (qk, head_dim) = (s("qk_channels")?, s("head_dim")?.max(1));
            s("b")? * (s("dim")? * (2 * s("width")? + 4) + 3 * qk + 2 * (qk / head_dim))
        }
        "conv_prefill" => s("t")? * s("dim")? * (2 * s("width")? + 4),
        "l2" => s("rows")? * s("heads")? * (3 * s("head_dim")? + 2),
        "gate" => {
            let per_channel = if s("law")? == 0 { 6 } else { 4 };
            per_channel * s("t")? * s("h")? * s("d")? + s("h")?
        }
        "sigmoid" => 3 * s("n")?,
        "o_norm" => s("rows")? * (8 * s("d")? + 4),
        "recurrent" | "recurrent_smem" => {
            let d = s("d")?;
            s("b")? * s("h")? * (7 * d * d + 4 * d)
        }
        "chunk_prepare" | "chunk_scan" => {
            let (c, d) = (s("c")?, s("d")?);
            let chunks = s("t")?.div_ceil(c.max(1));
            let pairs_below = c * c.saturating_sub(1) / 2;
            let pairs = c * (c + 1) / 2;
            let triples = c * c.saturating_sub(1) * c.saturating_sub(2) / 6;
            let per_chunk_head = if launch.field == "chunk_prepare" {
                3 * c * d + pairs_below * (5 * d + 2) + 2 * triples + pairs * (4 * d + 1)
            } else {
                6 * c * d * d + 8 * c * d + 7 * pairs * d + 2 * d * d + d
            };
            chunks * s("h")? * per_chunk_head
        }
        "split_widen" | "pack" | "fill" => 0,
        field => return Err(RooflineError::NoModel { field, param: "-" }),
    })
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
            match kernels.iter_mut().find(|(field, _)| *field == launch.field) {
                Some((_, time)) => *time += launch.time(),
                None => kernels.push((launch.field, launch.time())),
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
    /// The backend whose launch-case timings sit beside the model; `None`: the model alone.
    pub measured_on: Option<String>,
    /// One per scenario.
    pub scenarios: Vec<ScenarioModel>,
}

impl RooflineReport {
    /// Sets beside each launch the time `bench` measured for the launch case of the same kernel
    /// with the same sizes ([`LaunchModel::matches`]), where the benchmark ran at this layer's
    /// geometry; the report then names `bench`'s backend. The decode cases of b ≥ 3 rows leave two
    /// rows without a slot (`docs/kernels.md` §5): beside B = 64 they do 62/64 of the work.
    pub fn with_measurements(mut self, bench: &BenchReport) -> Self {
        let same_layer = bench.geometry == self.geometry;
        for launch in self.scenarios.iter_mut().flat_map(|scenario| &mut scenario.launches) {
            launch.measured = bench
                .kernels
                .iter()
                .filter(|case| same_layer && case.field == launch.field)
                .find(|case| launch.matches(&case.scalars))
                .and_then(|case| case.per_launch);
        }
        self.measured_on = Some(bench.backend.clone());
        self
    }
}

/// The roofline model of one layer at `geometry` in the three [scenarios](Scenario::all), the
/// prefill of `tokens` tokens, on a target that lacks the optional entries `absent` (their calls
/// go where the block sends them without: `gemv_batchm` rows to `gemm`, `recurrent_smem` to
/// `recurrent`).
pub fn model(geometry: &KdaGeometry, tokens: u32, absent: &[&str]) -> Result<RooflineReport, RooflineError> {
    model_scenarios(geometry, &Scenario::all(tokens), absent)
}

/// [`model`] for any list of scenarios.
pub fn model_scenarios(
    geometry: &KdaGeometry,
    scenarios: &[Scenario],
    absent: &[&str],
) -> Result<RooflineReport, RooflineError> {
    geometry.validate()?;
    for scenario in scenarios {
        let (Scenario::Decode { batch: t } | Scenario::Prefill { tokens: t }) = *scenario;
        geometry.padded(t)?;
    }
    // runs[h][s]: the launches of scenario s at SAMPLE_HEADS[h] heads.
    let runs = SAMPLE_HEADS
        .iter()
        .map(|&heads| record(&KdaGeometry { heads, ..*geometry }, scenarios, absent))
        .collect::<Result<Vec<_>, _>>()?;
    let scenarios = scenarios
        .iter()
        .enumerate()
        .map(|(s, scenario)| {
            let launches = extrapolate(scenario, [&runs[0][s], &runs[1][s], &runs[2][s]], geometry.heads)?;
            Ok(ScenarioModel { scenario: *scenario, launches })
        })
        .collect::<Result<_, RooflineError>>()?;
    Ok(RooflineReport { geometry: *geometry, measured_on: None, scenarios })
}

/// The block at `geometry` on a fresh fake carrying the table less `absent`, and the launches of
/// each of `scenarios` on it.
pub fn record(
    geometry: &KdaGeometry,
    scenarios: &[Scenario],
    absent: &[&str],
) -> Result<Vec<Vec<FakeLaunch>>, RooflineError> {
    let gpu = absent
        .iter()
        .filter_map(|field| table_entry(|entry| entry.field == *field))
        .fold(FakeBackend::new().with_table::<Glm5NextKda>(), |gpu, entry| {
            gpu.without(entry.module, entry.entry)
        });
    // Synthetic weights: only their lengths matter here, and at 1 to 3 heads they are small.
    let block = Glm5NextKdaBlock::new(&gpu, *geometry, &HostWeights::synthetic(geometry, 0))?;
    scenarios.iter().map(|scenario| scenario.record(&gpu, &block)).collect()
}

fn table_entry(find: impl Fn(&KernelEntry) -> bool) -> Option<&'static KernelEntry> {
    Glm5NextKdaKernels::ENTRIES.iter().find(|entry| find(entry))
}

/// The launches of `runs` (at [`SAMPLE_HEADS`] heads) at `heads` heads: each integer value
/// extrapolated from the first two runs and checked against the third.
fn extrapolate(
    scenario: &Scenario,
    runs: [&[FakeLaunch]; 3],
    heads: u32,
) -> Result<Vec<LaunchModel>, RooflineError> {
    let drift = |run: usize, what: String| RooflineError::Drift {
        scenario: scenario.to_string(),
        heads: SAMPLE_HEADS[run],
        what,
    };
    for (run, launches) in runs.iter().enumerate().skip(1) {
        if launches.len() != runs[0].len() {
            return Err(drift(run, format!("{} launches, not {}", launches.len(), runs[0].len())));
        }
    }
    let at = |h: u32, one: i128, two: i128| one + (i128::from(h) - 1) * (two - one);
    let mut model = Vec::with_capacity(runs[0].len());
    for (index, first) in runs[0].iter().enumerate() {
        let entry = table_entry(|entry| entry.module == first.module && entry.entry == first.entry)
            .ok_or_else(|| RooflineError::UnknownKernel(format!("{}::{}", first.module, first.entry)))?;
        let field = entry.field;
        let params = entry.signature.map_or(&[][..], |signature| signature.params);
        let [one, two, three] = runs.map(|run| &run[index]);
        for (run, other) in [(1, two), (2, three)] {
            if (other.module.as_str(), other.entry.as_str()) != (first.module.as_str(), first.entry.as_str())
                || other.args.len() != first.args.len()
            {
                return Err(drift(
                    run,
                    format!("launch {index} is `{}::{}`, not `{field}`", other.module, other.entry),
                ));
            }
        }
        let mut args = Vec::with_capacity(first.args.len());
        for (position, arg) in one.args.iter().enumerate() {
            let name = params.get(position).map_or("?", |param| param.name);
            let (b, c) = (&two.args[position], &three.args[position]);
            let (values, max) = match sample([arg, b, c]) {
                Some(Sampled::F32(value)) => {
                    args.push(LaunchArg::F32 { name, value });
                    continue;
                }
                Some(Sampled::Buffer { lens, .. }) => (lens, i128::from(u64::MAX)),
                Some(Sampled::Int { values, max }) => (values, max),
                None => {
                    let what = format!(
                        "launch {index} (`{field}`): `{name}` is {arg:?}, {b:?}, {c:?} at 1, 2, 3 heads"
                    );
                    return Err(drift(1, what));
                }
            };
            let [x, y, z] = values;
            let expected = at(SAMPLE_HEADS[2], x, y);
            if expected != z {
                return Err(RooflineError::NotAffine {
                    scenario: scenario.to_string(),
                    index,
                    field,
                    param: name,
                    expected,
                    found: z,
                });
            }
            let value = at(heads, x, y);
            let value = u64::try_from(value).ok().filter(|&v| i128::from(v) <= max).ok_or_else(|| {
                RooflineError::Overflow { scenario: scenario.to_string(), field, param: name, value, heads }
            })?;
            args.push(match sample([arg, b, c]) {
                Some(Sampled::Buffer { dtype, writable, .. }) => {
                    LaunchArg::Buffer { name, dtype, len: value, writable }
                }
                _ => LaunchArg::Int { name, value },
            });
        }
        model.push(LaunchModel::new(field, args)?);
    }
    Ok(model)
}

/// One argument at the three sample head counts: a buffer of one element type and access, an
/// integer scalar (its values, and the largest its type holds), or an f32 scalar of one value.
enum Sampled {
    Buffer { dtype: DType, writable: bool, lens: [i128; 3] },
    Int { values: [i128; 3], max: i128 },
    F32(f32),
}

/// The argument at the three head counts, if it is of one kind in all three (and an f32 scalar
/// of one value).
fn sample([a, b, c]: [&FakeArg; 3]) -> Option<Sampled> {
    use FakeArg::{Buffer, F32, I32, U32, U64};
    let int = |x: i128, y: i128, z: i128, max: i128| Some(Sampled::Int { values: [x, y, z], max });
    match (a, b, c) {
        (
            Buffer { dtype, len, writable },
            Buffer { dtype: d2, len: l2, writable: w2 },
            Buffer { dtype: d3, len: l3, writable: w3 },
        ) if (dtype, writable) == (d2, w2) && (dtype, writable) == (d3, w3) => Some(Sampled::Buffer {
            dtype: *dtype,
            writable: *writable,
            lens: [*len, *l2, *l3].map(|l| l as i128),
        }),
        (U32(x), U32(y), U32(z)) => int((*x).into(), (*y).into(), (*z).into(), u32::MAX.into()),
        (I32(x), I32(y), I32(z)) => int((*x).into(), (*y).into(), (*z).into(), i32::MAX.into()),
        (U64(x), U64(y), U64(z)) => int((*x).into(), (*y).into(), (*z).into(), u64::MAX.into()),
        (F32(x), F32(y), F32(z)) if x.to_bits() == y.to_bits() && x.to_bits() == z.to_bits() => {
            Some(Sampled::F32(*x))
        }
        _ => None,
    }
}

/// `value` with an SI prefix and `unit`, four significant digits or so: `67.11 MB`, `275.0 GFLOP`.
fn si(value: f64, unit: &str) -> String {
    let (scaled, prefix) = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
        .into_iter()
        .find(|(scale, _)| value >= *scale)
        .map_or((value, ""), |(scale, prefix)| (value / scale, prefix));
    let digits = if scaled >= 100.0 || prefix.is_empty() { 1 } else { 2 };
    let digits = if prefix.is_empty() { 0 } else { digits };
    format!("{scaled:.digits$} {prefix}{unit}")
}

impl fmt::Display for RooflineReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let measured = self.measured_on.is_some();
        match &self.measured_on {
            None => writeln!(f, "roofline of one layer, model (no device): estimates, nothing measured")?,
            Some(backend) => writeln!(
                f,
                "roofline of one layer, model (estimates) beside the launch cases measured on {backend} where their sizes match"
            )?,
        }
        writeln!(f, "layer: {}", self.geometry)?;
        writeln!(
            f,
            "H200 roofs: HBM {:.1} TB/s; {:.0} TFLOPS bf16 tensor cores (gemm), {:.0} TFLOPS f32 (every other kernel)",
            HBM_BYTES_PER_S / 1e12,
            TENSOR_BF16_FLOPS / 1e12,
            F32_FLOPS / 1e12
        )?;
        for scenario in &self.scenarios {
            writeln!(f, "\n{}: {} launches", scenario.scenario, scenario.launches.len())?;
            let mut header = format!(
                "  {:>2}  {:14}  {:>16}  {:>11}  {:>12}  {:>11}  bound",
                "#", "kernel", "shape", "bytes", "FLOPs", "roofline µs"
            );
            if measured {
                header.push_str("    measured µs  of roofline");
            }
            writeln!(f, "{header}")?;
            for (index, launch) in scenario.launches.iter().enumerate() {
                write!(
                    f,
                    "  {:>2}  {:14}  {:>16}  {:>11}  {:>12}  {:>11.2}  {}",
                    index + 1,
                    launch.field,
                    launch.shape(),
                    si(launch.bytes as f64, "B"),
                    si(launch.flops as f64, "FLOP"),
                    launch.time() * 1e6,
                    launch.bound()
                )?;
                if let Some(time) = launch.measured {
                    let seconds = time.as_secs_f64().max(f64::MIN_POSITIVE);
                    let pad = if launch.bound() == Bound::Memory { " " } else { "" };
                    write!(f, "{pad}  {:>13.2}  {:>9.1} %", seconds * 1e6, 100.0 * launch.time() / seconds)?;
                }
                writeln!(f)?;
            }
            let memory: f64 =
                scenario.launches.iter().filter(|l| l.bound() == Bound::Memory).map(LaunchModel::time).sum();
            let total = scenario.time();
            writeln!(
                f,
                "  total: {} moved, {} done, roofline {:.2} µs ({:.2} µs memory-bound, {:.2} µs compute-bound)",
                si(scenario.bytes() as f64, "B"),
                si(scenario.flops() as f64, "FLOP"),
                total * 1e6,
                memory * 1e6,
                (total - memory) * 1e6
            )?;
            let longest: Vec<String> = scenario
                .by_kernel()
                .iter()
                .take(5)
                .map(|(field, time)| {
                    format!(
                        "{field} {:.2} µs ({:.0} %)",
                        time * 1e6,
                        100.0 * time / total.max(f64::MIN_POSITIVE)
                    )
                })
                .collect();
            writeln!(f, "  longest kernels: {}", longest.join(", "))?;
            if measured {
                let matched: Vec<&LaunchModel> =
                    scenario.launches.iter().filter(|launch| launch.measured.is_some()).collect();
                let time: f64 = matched.iter().filter_map(|l| l.measured).map(|t| t.as_secs_f64()).sum();
                let roof: f64 = matched.iter().map(|l| l.time()).sum();
                match matched.len() {
                    0 => writeln!(f, "  no launch case has the sizes of these launches")?,
                    n => writeln!(
                        f,
                        "  {n} of {} launches beside a case: measured {:.2} µs, {:.1} % of their roofline",
                        scenario.launches.len(),
                        time * 1e6,
                        100.0 * roof / time.max(f64::MIN_POSITIVE)
                    )?,
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::OnceLock;

    use kda::cases::{Access, BufferArg, CaseArg, KernelCase};
    use kda_runtime::LaunchGeometry;

    use super::*;
    use crate::bench::{self, BenchOptions};

    /// The model at `glm5-flash`, built once for every test that reads it.
    fn glm5() -> &'static RooflineReport {
        static MODEL: OnceLock<RooflineReport> = OnceLock::new();
        MODEL.get_or_init(|| model(&KdaGeometry::glm5_flash(), PREFILL_TOKENS, &[]).unwrap())
    }

    fn fields(scenario: &ScenarioModel) -> Vec<&'static str> {
        scenario.launches.iter().map(|launch| launch.field).collect()
    }

    const DENSE: [&str; 3] = ["gemm", "gemv", "gemv_batchm"];

    #[test]
    fn the_scenarios_are_decode_at_1_and_64_and_a_prefill_of_4096() {
        let scenarios: Vec<Scenario> = glm5().scenarios.iter().map(|s| s.scenario).collect();
        assert_eq!(
            scenarios,
            [
                Scenario::Decode { batch: 1 },
                Scenario::Decode { batch: 64 },
                Scenario::Prefill { tokens: 4096 }
            ]
        );
    }

    #[test]
    fn the_decode_gemv_of_q_proj_moves_its_weight_once() {
        let decode = &glm5().scenarios[0];
        // The block's first launch is q_proj: x [1, 4096] · w [8192, 4096]ᵀ, all bf16.
        let q_proj = &decode.launches[0];
        assert_eq!((q_proj.field, q_proj.shape().as_str()), ("gemv", "1×8192×4096"));
        let weight = 8192 * 4096 * 2;
        assert_eq!(weight, 67_108_864);
        assert_eq!(q_proj.bytes, weight + 4096 * 2 + 8192 * 2);
        assert_eq!(q_proj.flops, 2 * 8192 * 4096);
        assert_eq!(q_proj.bound(), Bound::Memory);
        let time = 67_133_440.0 / 4.8e12;
        assert!((q_proj.time() - time).abs() <= 1e-9 * time, "{}", q_proj.time());
        // The last is o_proj: x [1, 8192] · w [4096, 8192]ᵀ.
        let o_proj = decode.launches.last().unwrap();
        assert_eq!((o_proj.field, o_proj.shape().as_str()), ("gemv", "1×4096×8192"));
        assert_eq!(o_proj.bytes, 4096 * 8192 * 2 + 8192 * 2 + 4096 * 2);
        // The prefill's q_proj is a GEMM at m = 4096 on tensor cores, compute-bound.
        let prefill = &glm5().scenarios[2].launches[0];
        assert_eq!((prefill.field, prefill.peak), ("gemm", Peak::TensorBf16));
        assert_eq!(prefill.bytes, (4096 * 4096 + 8192 * 4096 + 4096 * 8192) * 2);
        assert_eq!(prefill.flops, 2 * 4096 * 8192 * 4096);
        assert_eq!(prefill.bound(), Bound::Compute);
        let time = 2.0 * 4096.0 * 8192.0 * 4096.0 / 989e12;
        assert!((prefill.time() - time).abs() <= 1e-9 * time, "{}", prefill.time());
    }

    #[test]
    fn the_recurrent_step_reads_and_writes_each_state_once() {
        for (scenario, b) in [(&glm5().scenarios[0], 1), (&glm5().scenarios[1], 64)] {
            let step = scenario.launches.iter().find(|l| l.field == "recurrent_smem").unwrap();
            // qkv [b, 3·8192] bf16, gate [b, 8192] f32, beta [b, 64] f32, the pool's b states
            // [64, 128, 128] f32 read and written, slot [b] u32, out [b, 8192] f32.
            let state = 64 * 128 * 128 * 4;
            let expected = b * (3 * 8192 * 2 + 8192 * 4 + 64 * 4 + 2 * state + 4 + 8192 * 4);
            assert_eq!(step.bytes, expected, "B = {b}");
            assert_eq!(step.flops, b * 64 * (7 * 128 * 128 + 4 * 128), "B = {b}");
            assert_eq!(step.bound(), Bound::Memory);
        }
    }

    #[test]
    fn decode_at_b_64_runs_the_gemm_and_at_b_1_the_gemv() {
        let [one, sixty_four, prefill] = &glm5().scenarios[..] else { panic!("three scenarios") };
        let dense = |scenario: &ScenarioModel| -> Vec<&'static str> {
            fields(scenario).into_iter().filter(|field| DENSE.contains(field)).collect()
        };
        // q, k, v, f_a, f_b, b_proj, g_a, g_b and o_proj: nine products per call.
        assert_eq!(dense(one), ["gemv"; 9]);
        assert_eq!(dense(sixty_four), ["gemm"; 9]);
        assert_eq!(dense(prefill), ["gemm"; 9]);
        for launch in sixty_four.launches.iter().filter(|l| l.field == "gemm") {
            assert_eq!(launch.scalar("m"), Some(64));
        }
        // Decode uses the shared-memory recurrent step, prefill the chunk pair.
        assert!(fields(one).contains(&"recurrent_smem") && fields(sixty_four).contains(&"recurrent_smem"));
        assert!(fields(prefill).contains(&"chunk_scan") && !fields(prefill).contains(&"recurrent_smem"));
    }

    #[test]
    fn totals_are_the_sums_of_the_rows() {
        for scenario in &glm5().scenarios {
            let bytes: u64 = scenario.launches.iter().map(|l| l.bytes).sum();
            let flops: u64 = scenario.launches.iter().map(|l| l.flops).sum();
            let peak = |l: &LaunchModel| if l.field == "gemm" { 989e12 } else { 67e12 };
            let time: f64 = scenario
                .launches
                .iter()
                .map(|l| (l.bytes as f64 / 4.8e12).max(l.flops as f64 / peak(l)))
                .sum();
            assert_eq!((scenario.bytes(), scenario.flops()), (bytes, flops), "{}", scenario.scenario);
            assert!((scenario.time() - time).abs() <= 1e-9 * time, "{}", scenario.scenario);
            let by_kernel: f64 = scenario.by_kernel().iter().map(|(_, time)| time).sum();
            assert!((by_kernel - time).abs() <= 1e-9 * time);
        }
        let text = glm5().to_string();
        assert!(text.starts_with("roofline of one layer, model (no device)"), "{text}");
        assert_eq!(text.matches("  total: ").count(), 3, "{text}");
    }

    /// The launches of a direct run of the block as the model describes them, compared one by one.
    fn assert_same_launches(model: &[LaunchModel], recorded: &[FakeLaunch], what: &str) {
        assert_eq!(model.len(), recorded.len(), "{what}: launch count");
        for (index, (launch, fake)) in model.iter().zip(recorded).enumerate() {
            let entry = table_entry(|e| e.module == fake.module && e.entry == fake.entry).unwrap();
            assert_eq!(launch.field, entry.field, "{what}: launch {index}");
            assert_eq!(launch.args.len(), fake.args.len(), "{what}: launch {index}");
            for (arg, fake) in launch.args.iter().zip(&fake.args) {
                let same = match (arg, fake) {
                    (
                        LaunchArg::Buffer { dtype, len, writable, .. },
                        FakeArg::Buffer { dtype: d, len: l, writable: w },
                    ) => (dtype, *len, writable) == (d, *l as u64, w),
                    (LaunchArg::Int { value, .. }, FakeArg::U32(v)) => *value == u64::from(*v),
                    (LaunchArg::F32 { value, .. }, FakeArg::F32(v)) => value.to_bits() == v.to_bits(),
                    _ => false,
                };
                assert!(same, "{what}: launch {index} (`{}`): {arg:?} vs {fake:?}", launch.field);
            }
        }
    }

    #[test]
    fn the_model_is_the_block_run_at_the_real_head_count() {
        // At `mid` (8 heads of 64) the block runs at full size on the fake in a moment: the model
        // extrapolated from 1, 2 and 3 heads must be that run, launch by launch, value by value.
        let geometry = KdaGeometry::mid();
        let scenarios = Scenario::all(PREFILL_TOKENS);
        let report = model(&geometry, PREFILL_TOKENS, &[]).unwrap();
        let direct = record(&geometry, &scenarios, &[]).unwrap();
        for ((scenario, modelled), recorded) in scenarios.iter().zip(&report.scenarios).zip(&direct) {
            assert_eq!(modelled.scenario, *scenario);
            assert_same_launches(&modelled.launches, recorded, &scenario.to_string());
        }
        // The same launch counts at glm5-flash: decode 11 front-end launches, the conv, the
        // recurrent step, the norm and o_proj; prefill the front end and 7 more.
        let counts: Vec<usize> = report.scenarios.iter().map(|s| s.launches.len()).collect();
        assert_eq!(counts, [15, 15, 18]);
        let glm5_counts: Vec<usize> = glm5().scenarios.iter().map(|s| s.launches.len()).collect();
        assert_eq!(glm5_counts, counts);
        for (mid, glm5) in report.scenarios.iter().zip(&glm5().scenarios) {
            assert_eq!(fields(mid), fields(glm5), "{}", mid.scenario);
        }
    }

    #[test]
    fn bytes_are_the_launch_cases_bytes_moved_where_the_sizes_match() {
        // At `tiny`, B = 2 (two live rows: the cases skip none below 3) and T = 64 (two whole
        // chunks, no padding): every launch with a case of its sizes moves the case's bytes, so
        // the read-write and touched-prefix rules agree with the cases'.
        let geometry = KdaGeometry::tiny();
        let report = model_scenarios(
            &geometry,
            &[Scenario::Decode { batch: 2 }, Scenario::Prefill { tokens: 64 }],
            &[],
        )
        .unwrap();
        let mut compared = BTreeSet::new();
        for (scenario, t) in report.scenarios.iter().zip([2, 64]) {
            let cases = KernelCase::all(&geometry, t, 3).unwrap();
            for launch in &scenario.launches {
                let scalars = |case: &KernelCase| -> Vec<(&'static str, u64)> {
                    case.args()
                        .iter()
                        .filter_map(|arg| match arg {
                            CaseArg::U32 { name, value } => Some((*name, u64::from(*value))),
                            _ => None,
                        })
                        .collect()
                };
                let Some(case) =
                    cases.iter().find(|c| c.field() == launch.field && launch.matches(&scalars(c)))
                else {
                    continue;
                };
                assert_eq!(
                    launch.bytes,
                    case.bytes_moved(),
                    "{}: {} ({})",
                    scenario.scenario,
                    launch.field,
                    launch.shape()
                );
                compared.insert(launch.field);
            }
        }
        let expected = [
            "chunk_prepare",
            "chunk_scan",
            "conv_decode",
            "conv_prefill",
            "gate",
            "gemm",
            "gemv_batchm",
            "l2",
            "o_norm",
            "pack",
            "recurrent_smem",
            "sigmoid",
            "split_widen",
        ];
        assert_eq!(compared.into_iter().collect::<Vec<_>>(), expected);
    }

    #[test]
    fn the_read_write_buffers_are_the_cases_in_place_ones() {
        let mut in_place: Vec<(&str, &str)> = KernelCase::all(&KdaGeometry::tiny(), 3, 1)
            .unwrap()
            .iter()
            .flat_map(|case| {
                case.args().iter().filter_map(|arg| match arg {
                    CaseArg::Buffer(BufferArg { name, access: Access::ReadWrite(_), .. }) => {
                        Some((case.field(), *name))
                    }
                    _ => None,
                })
            })
            .collect();
        let mut listed = READ_WRITE.to_vec();
        in_place.sort();
        listed.sort();
        assert_eq!(listed, in_place);
    }

    #[test]
    fn every_kernel_of_the_table_has_a_flop_count() {
        for case in KernelCase::all(&KdaGeometry::tiny(), 40, 1).unwrap() {
            let args = case
                .args()
                .iter()
                .map(|arg| match arg {
                    CaseArg::Buffer(BufferArg { name, data, access, .. }) => LaunchArg::Buffer {
                        name,
                        dtype: data.dtype(),
                        len: data.len() as u64,
                        writable: *access != Access::Read,
                    },
                    CaseArg::Slice { name, data, range } => LaunchArg::Buffer {
                        name,
                        dtype: data.dtype(),
                        len: range.len() as u64,
                        writable: false,
                    },
                    CaseArg::U32 { name, value } => LaunchArg::Int { name, value: u64::from(*value) },
                    CaseArg::F32 { name, value } => LaunchArg::F32 { name, value: *value },
                })
                .collect();
            let launch = LaunchModel::new(case.field(), args).unwrap();
            let moves_only = ["split_widen", "pack", "fill"].contains(&case.field());
            assert_eq!(launch.flops == 0, moves_only, "{}: {} FLOPs", case.field(), launch.flops);
            assert!(launch.bytes > 0, "{}", case.field());
        }
        assert!(matches!(
            LaunchModel::new("gemm", vec![LaunchArg::Int { name: "m", value: 1 }]),
            Err(RooflineError::NoModel { field: "gemm", param: "n" })
        ));
    }

    #[test]
    fn the_chunk_pair_counts_follow_their_derivation() {
        // glm5-flash, T = 4096: 64 chunks of 64 positions, 64 heads of 128. By hand, per (chunk,
        // head): prepare 3·64·128 + 2016·642 + 2·41664 + 2080·513 = 2,469,216 and scan
        // 6·64·128² + 8·64·128 + 7·2080·128 + 2·128² + 128 = 8,253,568.
        let prefill = &glm5().scenarios[2];
        let flops = |field| prefill.launches.iter().find(|l| l.field == field).unwrap().flops;
        assert_eq!(flops("chunk_prepare"), 64 * 64 * 2_469_216);
        assert_eq!(flops("chunk_scan"), 64 * 64 * 8_253_568);
    }

    #[test]
    fn absent_optional_kernels_are_absent_from_the_model() {
        let geometry = KdaGeometry::tiny();
        let decode = [Scenario::Decode { batch: 2 }];
        let full = model_scenarios(&geometry, &decode, &[]).unwrap();
        assert!(fields(&full.scenarios[0]).contains(&"gemv_batchm"));
        assert!(fields(&full.scenarios[0]).contains(&"recurrent_smem"));
        let without = model_scenarios(&geometry, &decode, &["gemv_batchm", "recurrent_smem"]).unwrap();
        let without = fields(&without.scenarios[0]);
        assert!(!without.contains(&"gemv_batchm") && without.contains(&"gemm"), "{without:?}");
        assert!(!without.contains(&"recurrent_smem") && without.contains(&"recurrent"), "{without:?}");
    }

    fn sigmoid(n: u32, module: &str) -> FakeLaunch {
        let buffer = |dtype, writable| FakeArg::Buffer { dtype, len: n as usize, writable };
        FakeLaunch {
            stream: 0,
            module: module.to_owned(),
            entry: "kda_sigmoid_bf16_f32".to_owned(),
            geometry: LaunchGeometry::linear(n, 256),
            args: vec![buffer(DType::Bf16, false), buffer(DType::F32, true), FakeArg::U32(n)],
        }
    }

    #[test]
    fn sizes_off_the_line_through_1_and_2_heads_are_refused() {
        let scenario = Scenario::Decode { batch: 1 };
        let run = |n| vec![sigmoid(n, "kda_layer_ops")];
        let (one, two, three) = (run(64), run(128), run(192));
        let launches = extrapolate(&scenario, [&one, &two, &three], 64).unwrap();
        assert_eq!(launches[0].scalar("n"), Some(64 * 64));
        assert_eq!(launches[0].bytes, 64 * 64 * (2 + 4));
        let quadratic = run(64 * 9);
        let error = extrapolate(&scenario, [&one, &two, &quadratic], 64).unwrap_err();
        assert!(
            matches!(error, RooflineError::NotAffine { field: "sigmoid", param: "x", expected: 192, .. }),
            "{error}"
        );
        let other = vec![sigmoid(192, "elsewhere")];
        assert!(matches!(
            extrapolate(&scenario, [&one, &two, &other], 64),
            Err(RooflineError::Drift { heads: 3, .. })
        ));
        assert!(matches!(
            extrapolate(&scenario, [&one, &two, &Vec::new()], 64),
            Err(RooflineError::Drift { .. })
        ));
    }

    #[test]
    fn measured_cases_sit_beside_the_launches_of_their_sizes() {
        // The CPU reference stands in for a device: the cases at T = 64 have the sizes of the
        // B = 1 GEMVs, of most of the B = 64 step and of most of the prefill (at `tiny`
        // qkv = hidden = 64, so o_proj has q_proj's sizes too).
        let geometry = KdaGeometry::tiny();
        let options = BenchOptions { geometry, tokens: 64, iterations: 1, seed: 1, copy_bytes: 1 << 16 };
        let timings = bench::run(&kda::reference::backend(), &options, &mut |_| {}).unwrap();
        let report = model(&geometry, 64, &[]).unwrap().with_measurements(&timings);
        let matched = |s: &ScenarioModel| -> Vec<&str> {
            s.launches.iter().filter(|l| l.measured.is_some()).map(|l| l.field).collect()
        };
        assert_eq!(matched(&report.scenarios[0]), ["gemv"; 4]);
        let front = ["gemm", "gemm", "gemm", "pack", "gate", "sigmoid"];
        let back = ["o_norm", "gemm"];
        let decode: Vec<&str> =
            front.iter().chain(&["conv_decode", "recurrent_smem"]).chain(&back).copied().collect();
        assert_eq!(matched(&report.scenarios[1]), decode);
        let core = ["conv_prefill", "l2", "split_widen", "chunk_prepare", "chunk_scan"];
        let prefill: Vec<&str> = front.iter().chain(&core).chain(&back).copied().collect();
        assert_eq!(matched(&report.scenarios[2]), prefill);
        let text = report.to_string();
        assert!(text.contains("measured on CPU reference backend"), "{text}");
        assert!(
            text.contains("measured µs  of roofline") && text.contains("13 of 18 launches beside a case"),
            "{text}"
        );
        // Another layer's timings sit beside nothing.
        let other = model(&KdaGeometry::mid(), 64, &[]).unwrap().with_measurements(&timings);
        assert!(other.scenarios.iter().all(|s| matched(s).is_empty()));
    }
}
