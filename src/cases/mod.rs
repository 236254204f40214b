//! Launch cases: one launch of each kernel of `[glm5next_kda]` at a layer geometry and a token
//! count, with seeded host inputs at the scales the block feeds it, the launch geometry of
//! [`launch`], how each written buffer must agree with the CPU reference
//! (`docs/kernels.md`, "Tolerances") and the bytes a launch moves.
//!
//! The GPU parity tests (`tests/gpu.rs`) run every case on CUDA and on the CPU reference and
//! compare what each wrote; `kda-block bench` times them. Only they need the cases, so the module is
//! behind this crate's `cases` feature, which they enable. A case is plain data: its arguments are
//! [`CaseArg`]s in the kernel's parameter order, each named like its parameter, so every kernel is
//! described the same way and uploaded, launched and downloaded by the same code. Before every
//! launch the names and kinds are checked against the entry's `params` in `kernels.toml`
//! ([`KernelCase::check_params`]), so a case cannot drift from the manifest.
//!
//! ```
//! use kda::cases::KernelCase;
//! use kda::geometry::KdaGeometry;
//! use kda::kernels::Glm5NextKdaKernels;
//!
//! let gpu = kda::reference::backend();
//! let kernels = Glm5NextKdaKernels::resolve(&gpu)?;
//! for case in KernelCase::all(&KdaGeometry::tiny(), 3, 7)? {
//!     for output in case.run(&gpu, &kernels)? {
//!         assert!(output.data.is_finite(), "{}: {}", case.field(), output.name);
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod check;
mod data;
mod inputs;
pub mod parity;
#[cfg(test)]
mod tests;

use std::ops::Range;

use half::bf16;

use kda_runtime::{
    BackendError, DType, DeviceBuffer, GpuBackend, KernelArg, KernelEntry, KernelHandle, LaunchGeometry,
};

use crate::geometry::{CONV_WIDTH, GeometryError, KdaGeometry};
use crate::kernels::defines::{DENSE_GEMV_BATCHM_MAX_M, GEMV_K_PARTS};
use crate::kernels::{Glm5NextKdaEntry, Glm5NextKdaKernels};
use crate::launch;
use crate::ops::gemm_splits;
use crate::weights::InputProjection;

pub use check::{Check, Comparison, HostOutput, Measurement, Mismatch};
use data::*;
pub use data::{Access, BufferArg, CaseArg, HostData, POISON};
use inputs::*;

/// Why cases could not be built.
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    /// The geometry is not one the kernels run.
    #[error("invalid geometry: {0}")]
    Geometry(#[from] GeometryError),
    /// A case needs at least one token.
    #[error("a launch case needs at least one token")]
    NoTokens,
    /// The padded token count times a row overflows the kernels' 32-bit sizes.
    #[error("{0} tokens overflow the kernels' 32-bit sizes at this geometry")]
    TooManyTokens(u32),
    /// A dense case of a shape the kernels do not take.
    #[error("{0}")]
    Dense(String),
    /// The reference run that makes the chunk scan's inputs failed.
    #[error("the reference run behind the chunk scan's inputs failed: {0}")]
    Reference(String),
}

/// The shape every case is built from.
#[derive(Clone, Copy, Debug)]
struct Shape {
    geometry: KdaGeometry,
    t: u32,
    t_pad: u32,
    h: u32,
    d: u32,
    qkv: u32,
    dim: u32,
    hidden: u32,
    /// The sequences of a batched decode case: `t`, at most [`MAX_CASE_BATCH`].
    batch: u32,
    /// The row stride of the block's stacked projections, with which the convs and the forget
    /// gate's consumers read their inputs in place ([`InputProjection`]).
    stacked: u32,
}

/// The largest batch of the decode cases (whatever their token count): the batch the benchmarks
/// of serving sizes use, and a pool that fits any device at every geometry.
pub const MAX_CASE_BATCH: u32 = 64;

impl Shape {
    fn new(geometry: &KdaGeometry, t: u32) -> Result<Self, CaseError> {
        geometry.validate()?;
        if t == 0 {
            return Err(CaseError::NoTokens);
        }
        let t_pad = u64::from(t).div_ceil(u64::from(geometry.chunk)) * u64::from(geometry.chunk);
        if t_pad * u64::from(geometry.conv_dim()) > u64::from(u32::MAX) {
            return Err(CaseError::TooManyTokens(t));
        }
        Ok(Self {
            geometry: *geometry,
            t,
            t_pad: t_pad as u32,
            h: geometry.heads,
            d: geometry.head_dim,
            qkv: geometry.qkv(),
            dim: geometry.conv_dim(),
            hidden: geometry.hidden,
            batch: t.min(MAX_CASE_BATCH),
            stacked: InputProjection::stacked_width(geometry),
        })
    }

    /// The ranges of K the split-K cases take: a decode step's o_proj (`batch` rows, `hidden`
    /// columns over `qkv`) split as the dispatch splits it at this geometry, or in 3 (the last
    /// range empty where K is two tiles) where it would not split.
    fn o_proj_splits(&self) -> u32 {
        Some(gemm_splits(self.batch, self.hidden, self.qkv)).filter(|&splits| splits > 1).unwrap_or(3)
    }
}

/// One launch of one kernel of `[glm5next_kda]`: its arguments with their host data and its
/// launch geometry.
#[derive(Clone, Debug)]
pub struct KernelCase {
    entry: Glm5NextKdaEntry,
    launch: LaunchGeometry,
    args: Vec<CaseArg>,
    tokens: u32,
    /// Elements of poison before each buffer argument's data: the kernel gets views this far
    /// into their buffers (1: every pointer off 16-byte alignment).
    offset: usize,
}

/// A case's arguments on a backend, ready for repeated launches.
pub struct PreparedCase {
    slots: Vec<PreparedArg>,
}

impl PreparedCase {
    /// The arguments, in the kernel's order, for a caller that changes them (the launch fuzz).
    pub fn into_args(self) -> Vec<PreparedArg> {
        self.slots
    }
}

/// A prepared argument: elements `range` of an uploaded buffer (and whether the kernel writes
/// them), or a scalar.
pub enum PreparedArg {
    /// Elements `range` of `buffer`.
    View {
        /// The uploaded buffer.
        buffer: DeviceBuffer,
        /// The elements the kernel gets.
        range: Range<usize>,
        /// Whether the kernel writes them.
        writable: bool,
    },
    /// A `u32` scalar.
    U32(u32),
    /// An `f32` scalar.
    F32(f32),
}

impl PreparedArg {
    /// The launch argument: a mutable view of a written buffer, a read-only view of a read one.
    pub fn arg(&mut self) -> KernelArg<'_> {
        match self {
            PreparedArg::View { buffer, range, writable: true } => buffer.slice_mut(range.clone()).into(),
            PreparedArg::View { buffer, range, writable: false } => buffer.slice(range.clone()).into(),
            PreparedArg::U32(value) => (*value).into(),
            PreparedArg::F32(value) => (*value).into(),
        }
    }
}

impl KernelCase {
    /// One case per entry of `[glm5next_kda]`, in manifest order, at `geometry` with `t` tokens
    /// (prefill kernels take all `t`; the batched decode kernels one token of each of `t`
    /// sequences, at most [`MAX_CASE_BATCH`]; the batched GEMV `t` rows clamped to 2..=16), inputs
    /// drawn from `seed`. Fails for an entry without a case.
    pub fn all(geometry: &KdaGeometry, t: u32, seed: u64) -> Result<Vec<KernelCase>, CaseError> {
        Glm5NextKdaEntry::ALL.into_iter().map(|entry| Self::new(entry, geometry, t, seed)).collect()
    }

    /// The case of `entry` (see [`KernelCase::all`]): every entry has one, which the compiler
    /// checks. Each case draws its inputs from its own stream of `seed`; `recurrent` and
    /// `recurrent_regs` draw the same inputs, as do the two chunk kernels (the scan's inputs are
    /// the reference prepare's outputs).
    pub fn new(
        entry: Glm5NextKdaEntry,
        geometry: &KdaGeometry,
        t: u32,
        seed: u64,
    ) -> Result<KernelCase, CaseError> {
        let s = Shape::new(geometry, t)?;
        let mut rng = stream(seed, entry.field());
        let (launch, args) = match entry {
            Glm5NextKdaEntry::gemm => {
                let (m, n, k) = (s.t, s.qkv, s.hidden);
                let (a, b) = (activations(&mut rng, m * k), linear(&mut rng, n, k));
                let args = dense_args(GEMM, a, b, Some(m), n, k);
                (launch::gemm(m, n), args)
            }
            Glm5NextKdaEntry::gemm_splitk => {
                let (m, n, k) = (s.batch, s.hidden, s.qkv);
                return Self::split_k((m, n, k), k, s.o_proj_splits(), 0, seed)
                    .map(|case| case.with_tokens(t));
            }
            Glm5NextKdaEntry::gemm_reduce => {
                let (m, n, splits) = (s.batch, s.hidden, s.o_proj_splits());
                let args = vec![
                    read("partial", uniform(&mut rng, splits * m * n, -1.0, 1.0)),
                    // The same additions in the same order: the same bits.
                    write::<bf16>("c", m * n, Check::Exact),
                    CaseArg::u32("m", m),
                    CaseArg::u32("n", n),
                    CaseArg::u32("splits", splits),
                ];
                (launch::elementwise(m * n), args)
            }
            Glm5NextKdaEntry::gemv => {
                let (n, k) = (s.qkv, s.hidden);
                let args = dense_args(GEMV, activations(&mut rng, k), linear(&mut rng, n, k), None, n, k);
                (launch::gemv(1, n), args)
            }
            Glm5NextKdaEntry::gemv_batchm => {
                let (m, n, k) = (s.t.clamp(2, DENSE_GEMV_BATCHM_MAX_M), s.qkv, s.hidden);
                let (x, w) = (activations(&mut rng, m * k), linear(&mut rng, n, k));
                let args = dense_args(GEMV, x, w, Some(m), n, k);
                (launch::gemv(m, n), args)
            }
            Glm5NextKdaEntry::conv_decode => {
                let batch = DecodeBatch::new(&mut rng, s.batch);
                let (pool, weight) = conv_pool_inputs(&mut rng, s, batch.capacity);
                let args = vec![
                    batch.pool("pool", pool, Check::Exact),
                    batch.slot_arg(),
                    read_rows("x", activations(&mut rng, s.batch * s.dim), s.dim, s.stacked),
                    read("weight", weight),
                    write::<bf16>("out", s.batch * s.dim, Check::Bf16Rounded),
                    CaseArg::u32("b", s.batch),
                    CaseArg::u32("slots", batch.capacity),
                    CaseArg::u32("dim", s.dim),
                    CaseArg::u32("ldx", s.stacked),
                    CaseArg::u32("width", CONV_WIDTH),
                    CaseArg::u32("qk_channels", 2 * s.qkv),
                    CaseArg::u32("head_dim", s.d),
                    CaseArg::f32("eps", s.geometry.l2_eps),
                ];
                (launch::conv_decode(s.dim, s.d, s.batch), args)
            }
            Glm5NextKdaEntry::conv_prefill => {
                let (state, weight) = conv_inputs(&mut rng, s);
                let (real, padded) = (s.t * s.qkv, s.t_pad * s.qkv);
                // bf16 values widened; rows ≥ t of the padded outputs must stay as they were.
                let out = |name| write_prefix::<f32>(name, padded, real, Check::Bf16Rounded);
                let args = vec![
                    update("state", state, Check::Exact),
                    read_rows("x", activations(&mut rng, s.t * s.dim), s.dim, s.stacked),
                    read("weight", weight),
                    out("q"),
                    out("k"),
                    out("v"),
                    CaseArg::u32("t", s.t),
                    CaseArg::u32("qkv", s.qkv),
                    CaseArg::u32("ldx", s.stacked),
                    CaseArg::u32("width", CONV_WIDTH),
                    CaseArg::u32("head_dim", s.d),
                    CaseArg::f32("eps", s.geometry.l2_eps),
                ];
                (launch::conv_prefill(s.qkv, s.d, s.t), args)
            }
            Glm5NextKdaEntry::chunk_prepare => {
                let args = ChunkInputs::draw(&mut stream(seed, "chunk"), s).prepare_args();
                (launch::chunk_prepare(s.t_pad / s.geometry.chunk, s.h), args)
            }
            Glm5NextKdaEntry::chunk_scan => {
                let args = chunk_scan_args(seed, s)?;
                (launch::chunk_scan(s.h, s.d), args)
            }
            Glm5NextKdaEntry::recurrent | Glm5NextKdaEntry::recurrent_regs => {
                let mut rng = stream(seed, "recurrent");
                let batch = DecodeBatch::new(&mut rng, s.batch);
                let args = recurrent_args(&mut rng, s, &batch);
                (launch::recurrent(s.h, s.d, s.batch), args)
            }
            Glm5NextKdaEntry::o_norm => {
                let rows = s.t * s.h;
                let args = vec![
                    read("x", uniform(&mut rng, rows * s.d, -1.0, 1.0)),
                    read("gate", activations(&mut rng, rows * s.d)),
                    read("weight", bf16_vec(&uniform(&mut rng, s.d, 0.9, 1.1))),
                    write::<bf16>("out", rows * s.d, Check::Bf16Rounded),
                    CaseArg::u32("rows", rows),
                    CaseArg::u32("d", s.d),
                    CaseArg::f32("eps", s.geometry.norm_eps),
                ];
                (launch::norm(rows), args)
            }
            Glm5NextKdaEntry::fill => {
                // The real rows of a padded buffer: the rows past them must stay as they were.
                let (n, len) = (s.t * s.qkv, s.t_pad * s.qkv);
                let args = vec![
                    write_prefix::<f32>("dst", len, n, Check::Exact),
                    CaseArg::u32("n", n),
                    CaseArg::f32("value", 0.25),
                ];
                (launch::elementwise(len), args)
            }
        };
        Ok(KernelCase { entry, launch, args, tokens: t, offset: 0 })
    }

    /// A case of a dense product at any shape: `gemm` (`m ≥ 1`), `gemv` (`m = 1`) or
    /// `gemv_batchm` (`2 ≤ m ≤ 16`) of `x [m, k]` by `w [n, k]`, x's rows `ld ≥ k` elements apart
    /// (the single-row `gemv` takes `ld = k`), the operands `offset` elements into their buffers
    /// (`offset % 8 != 0`: unaligned for the kernels' 16-byte loads). For the edge shapes the
    /// model's geometries do not reach: n and k off the tiles, k % 8 != 0, odd m, strides.
    pub fn dense(
        entry: Glm5NextKdaEntry,
        (m, n, k): (u32, u32, u32),
        ld: u32,
        offset: u32,
        seed: u64,
    ) -> Result<KernelCase, CaseError> {
        let field = entry.field();
        let bad =
            |why: &str| CaseError::Dense(format!("{field} with m = {m}, n = {n}, k = {k}, ld = {ld}: {why}"));
        if ld < k || (m == 1 && entry == Glm5NextKdaEntry::gemv && ld != k) {
            return Err(bad("x's rows must lie k or more apart (the single-row gemv: exactly k)"));
        }
        let elements = |rows: u32| rows.checked_mul(k).ok_or_else(|| bad("the operands overflow 32 bits"));
        let (x_len, w_len) = (elements(m)?, elements(n)?);
        m.saturating_sub(1)
            .checked_mul(ld)
            .and_then(|rows| rows.checked_add(k))
            .ok_or_else(|| bad("x's rows overflow 32 bits"))?;
        m.checked_mul(n).ok_or_else(|| bad("the output overflows 32 bits"))?;
        let mut rng = stream(seed, field);
        let (x, w) = (activations(&mut rng, x_len), linear(&mut rng, n, k));
        debug_assert_eq!(w.len(), w_len as usize);
        let offset = offset as usize;
        let (launch, names, m_arg) = match entry {
            Glm5NextKdaEntry::gemm if m >= 1 => (launch::gemm(m, n), GEMM, Some(m)),
            Glm5NextKdaEntry::gemv if m == 1 => (launch::gemv(1, n), GEMV, None),
            Glm5NextKdaEntry::gemv_batchm if (2..=DENSE_GEMV_BATCHM_MAX_M).contains(&m) => {
                (launch::gemv(m, n), GEMV, Some(m))
            }
            Glm5NextKdaEntry::gemm | Glm5NextKdaEntry::gemv | Glm5NextKdaEntry::gemv_batchm => {
                return Err(bad("no such case (gemv: m = 1; gemv_batchm: 2..=16)"));
            }
            _ => return Err(bad("not a dense product (gemm, gemv or gemv_batchm)")),
        };
        let args = dense_args_at(names, x, w, (m_arg, n, k), ld, offset);
        Ok(KernelCase { entry, launch, args, tokens: m, offset: 0 })
    }

    /// A case of `gemm_splitk` of `x [m, k]` (rows `ld ≥ k` apart) by `w [n, k]` over `splits`
    /// ranges of K, the operands `offset` elements into their buffers: its f32 partial sums must
    /// agree with the reference's, range by range.
    pub fn split_k(
        (m, n, k): (u32, u32, u32),
        ld: u32,
        splits: u32,
        offset: u32,
        seed: u64,
    ) -> Result<KernelCase, CaseError> {
        let mut case = Self::dense(Glm5NextKdaEntry::gemm, (m, n, k), ld, offset, seed)?;
        case.entry = Glm5NextKdaEntry::gemm_splitk;
        case.launch = launch::gemm_splitk(m, n, splits);
        let partials = splits.checked_mul(m * n).ok_or_else(|| {
            CaseError::Dense(format!("gemm_splitk of {m} × {n} in {splits} splits overflows 32 bits"))
        })?;
        // a, b, c → a, b, partial; then m, n, k, lda, splits.
        case.args[2] = write::<f32>("partial", partials, Check::RelativeRms(1e-5));
        case.args.push(CaseArg::u32("splits", splits));
        Ok(case)
    }

    /// The same case counted as `tokens` tokens.
    fn with_tokens(mut self, tokens: u32) -> KernelCase {
        self.tokens = tokens;
        self
    }

    /// The dense cases at the shapes the model's geometries miss: n and k off the tiles (128 × 128
    /// for the GEMM, 32 columns for the GEMVs), k % 8 != 0 (no 16-byte loads), k % 8 == 0 over
    /// several of a GEMV lane's 16-byte chunks (its vector loads), x's rows further apart than k
    /// (a multiple of 8 or not), operands one element off alignment, and m at each dispatch class.
    /// `thorough`: every m of 1..=17 and 65 (the GEMM), 1 (the GEMV) and 2..=16 (the batched
    /// GEMV), each at every (n, k, offset) of the grid, packed and strided.
    pub fn dense_edges(seed: u64, thorough: bool) -> Result<Vec<KernelCase>, CaseError> {
        let mut cases = Vec::new();
        if thorough {
            for m in (1..=17).chain([65]) {
                for (n, k) in [(33, 100), (65, 264), (40, 263)] {
                    for (offset, pad) in [(0, 0), (1, 0), (0, 8), (0, 3)] {
                        let (shape, ld) = ((m, n, k), k + pad);
                        cases.push(Self::dense(Glm5NextKdaEntry::gemm, shape, ld, offset, seed)?);
                        match m {
                            1 if pad == 0 => {
                                cases.push(Self::dense(Glm5NextKdaEntry::gemv, shape, ld, offset, seed)?)
                            }
                            2..=DENSE_GEMV_BATCHM_MAX_M => cases.push(Self::dense(
                                Glm5NextKdaEntry::gemv_batchm,
                                shape,
                                ld,
                                offset,
                                seed,
                            )?),
                            _ => {}
                        }
                    }
                }
            }
        } else {
            for (field, m, n, k, ld, offset) in [
                (Glm5NextKdaEntry::gemv, 1, 65, 264, 264, 0),
                (Glm5NextKdaEntry::gemv, 1, 40, 263, 263, 0),
                (Glm5NextKdaEntry::gemv, 1, 33, 264, 264, 1),
                (Glm5NextKdaEntry::gemv_batchm, 2, 65, 264, 264, 0),
                (Glm5NextKdaEntry::gemv_batchm, 7, 40, 100, 100, 1),
                (Glm5NextKdaEntry::gemv_batchm, 16, 33, 264, 264, 0),
                // Strided rows: 16-byte loads (ld % 8 == 0), then element by element.
                (Glm5NextKdaEntry::gemv_batchm, 5, 65, 264, 272, 0),
                (Glm5NextKdaEntry::gemv_batchm, 3, 40, 264, 267, 0),
                // The GEMM's tensor-core path (k % 8 == 0, aligned) past one 128-row tile, packed
                // and strided, and on its 64-row tile (m ≤ 64) over two tile columns, strided; its
                // scalar path (k % 8 != 0, unaligned, or ld % 8 != 0).
                (Glm5NextKdaEntry::gemm, 64, 130, 264, 272, 0),
                (Glm5NextKdaEntry::gemm, 17, 65, 100, 100, 0),
                (Glm5NextKdaEntry::gemm, 65, 40, 72, 72, 1),
                (Glm5NextKdaEntry::gemm, 1, 33, 264, 264, 0),
                (Glm5NextKdaEntry::gemm, 130, 65, 264, 264, 0),
                (Glm5NextKdaEntry::gemm, 130, 65, 264, 280, 0),
                (Glm5NextKdaEntry::gemm, 40, 33, 72, 75, 0),
                // The scalar path's last K tile one column wide (k ≡ 1 mod its 32-column tiles).
                (Glm5NextKdaEntry::gemm, 17, 40, 97, 97, 0),
            ] {
                cases.push(Self::dense(field, (m, n, k), ld, offset, seed)?);
            }
        }
        // The GEMVs over a K long enough for 5 chunks (of 8) a lane in every K part a block splits
        // K into but the last, which gets one round of 32 chunks and a chunk more (k = 4,104 with
        // 4 parts): past the weight loads a lane keeps in flight (3, 2 and 1 steps ahead at
        // m ≤ 4, ≤ 8, ≤ 16; the single-row loop unrolled by 4), as at the model's k = 4,096.
        // The shorter k above end before the loads ahead are ever used.
        let long_k = 8 * (32 * (5 * (GEMV_K_PARTS - 1) + 1) + 1);
        for (field, m, pad) in [
            (Glm5NextKdaEntry::gemv, 1, 0),
            (Glm5NextKdaEntry::gemv_batchm, 3, 0),
            (Glm5NextKdaEntry::gemv_batchm, 8, 8),
            (Glm5NextKdaEntry::gemv_batchm, 16, 0),
        ] {
            cases.push(Self::dense(field, (m, 33, long_k), long_k + pad, 0, seed)?);
        }
        // Split K: tensor-core ranges of strided rows, the scalar path (odd k, unaligned), two
        // rows of tiles, and more splits than K tiles (the last ranges empty).
        for (m, n, k, ld, splits, offset) in [
            (17, 65, 264, 272, 3, 0),
            (40, 33, 263, 263, 4, 1),
            (130, 129, 264, 264, 2, 0),
            (5, 40, 72, 72, 5, 0),
        ] {
            cases.push(Self::split_k((m, n, k), ld, splits, offset, seed)?);
        }
        Ok(cases)
    }

    /// The same case with every buffer argument a view `elements` elements into its buffer,
    /// poison before it: 1 puts every pointer off 16-byte alignment, which a safe launch may do,
    /// so each kernel's path for unaligned operands runs.
    pub fn with_offset(mut self, elements: usize) -> KernelCase {
        self.offset = elements;
        self
    }

    /// The same case launched on a grid of `blocks` blocks, all in x (its block shape kept): for the
    /// grid-stride kernels, fewer blocks than items makes each block loop, which reaches what a
    /// block does between two of its items (the norms' shared partial sums reused, the GEMM's
    /// pipeline stages refilled, the prefill conv's later token tiles).
    pub fn with_blocks(mut self, blocks: u32) -> KernelCase {
        self.launch.grid = (blocks.max(1), 1, 1);
        self
    }

    /// Runs the case on `gpu` and on `reference` (the CPU reference backend, say) and compares
    /// every written buffer: one comparison per buffer, in parameter order.
    pub fn compare(
        &self,
        gpu: (&dyn GpuBackend, &Glm5NextKdaKernels),
        reference: (&dyn GpuBackend, &Glm5NextKdaKernels),
    ) -> Result<Vec<Comparison>, BackendError> {
        let want = self.run(reference.0, reference.1)?;
        let got = self.run(gpu.0, gpu.1)?;
        Ok(got
            .into_iter()
            .zip(&want)
            .map(|(got, want)| Comparison { output: got.name, check: got.check, result: got.compare(want) })
            .collect())
    }

    /// The table field this case launches.
    pub fn field(&self) -> &'static str {
        self.entry.field()
    }

    /// The table entry this case launches.
    pub fn table_entry(&self) -> Glm5NextKdaEntry {
        self.entry
    }

    /// The manifest entry this case launches: module, entry point, signature.
    pub fn entry(&self) -> &'static KernelEntry {
        self.entry.entry()
    }

    /// The token count the case was built for.
    pub fn tokens(&self) -> u32 {
        self.tokens
    }

    /// The arguments, in the kernel's parameter order.
    pub fn args(&self) -> &[CaseArg] {
        &self.args
    }

    /// The buffer argument called `name`.
    pub fn buffer(&self, name: &str) -> Option<&BufferArg> {
        self.args.iter().find_map(|arg| match arg {
            CaseArg::Buffer(buffer) if buffer.name == name => Some(buffer),
            _ => None,
        })
    }

    /// The value of the `u32` argument called `name`.
    fn u32_arg(&self, name: &str) -> Option<u32> {
        self.args.iter().find_map(|arg| match arg {
            CaseArg::U32 { name: found, value } if *found == name => Some(*value),
            _ => None,
        })
    }

    /// The launch geometry, from [`launch`].
    pub fn launch_geometry(&self) -> LaunchGeometry {
        self.launch
    }

    /// The case's kernel in a resolved table; `None` for an optional entry the target lacks.
    pub fn kernel(&self, kernels: &Glm5NextKdaKernels) -> Option<KernelHandle> {
        kernels.handle(self.entry)
    }

    /// The bytes one launch must move at least: each input read once, each output written once,
    /// each in/out buffer read and written once (padding neither).
    pub fn bytes_moved(&self) -> u64 {
        let bytes = |len: usize, dtype: DType| (len * dtype.size()) as u64;
        self.args
            .iter()
            .map(|arg| match arg {
                CaseArg::Buffer(BufferArg { data, access, moved, .. }) => match access {
                    Access::Read | Access::Write(_) => bytes(*moved, data.dtype()),
                    Access::ReadWrite(_) => 2 * bytes(*moved, data.dtype()),
                },
                CaseArg::Slice { data, range, .. } => bytes(range.len(), data.dtype()),
                CaseArg::U32 { .. } | CaseArg::F32 { .. } => 0,
            })
            .sum()
    }

    /// Uploads the arguments to `gpu`.
    pub fn prepare(&self, gpu: &dyn GpuBackend) -> Result<PreparedCase, BackendError> {
        let slots = self
            .args
            .iter()
            .map(|arg| {
                let offset = self.offset;
                Ok(match arg {
                    CaseArg::Buffer(buffer) => PreparedArg::View {
                        buffer: buffer.data.upload_at(gpu, offset)?,
                        range: offset..offset + buffer.data.len(),
                        writable: buffer.access != Access::Read,
                    },
                    CaseArg::Slice { data, range, .. } => PreparedArg::View {
                        buffer: data.upload_at(gpu, offset)?,
                        range: offset + range.start..offset + range.end,
                        writable: false,
                    },
                    CaseArg::U32 { value, .. } => PreparedArg::U32(*value),
                    CaseArg::F32 { value, .. } => PreparedArg::F32(*value),
                })
            })
            .collect::<Result<_, BackendError>>()?;
        Ok(PreparedCase { slots })
    }

    /// Checks that the arguments are the parameters of the case's entry in `kernels.toml`: the
    /// same names in the same order, each of its parameter's kind, element type and access. A
    /// case that drifted from the manifest is an error naming the entry and the parameter.
    pub fn check_params(&self) -> Result<(), BackendError> {
        let entry = *self.entry.entry();
        let params =
            entry.signature.ok_or_else(|| BackendError::NoSignature { entry: Box::new(entry) })?.params;
        for (index, param) in params.iter().enumerate() {
            match self.args.get(index) {
                Some(arg) if arg.name() == param.name && arg.fits(param.kind) => {}
                found => {
                    return Err(BackendError::Argument {
                        entry: Box::new(entry),
                        param: param.name,
                        expected: format!("the case argument `{} {}`", param.kind, param.name),
                        found: found.map_or_else(|| "none".to_owned(), |arg| format!("`{arg}`")),
                    });
                }
            }
        }
        if self.args.len() > params.len() {
            let expected = params.iter().map(|param| format!("{} {}", param.kind, param.name));
            return Err(BackendError::ArgumentCount {
                entry: Box::new(entry),
                expected: format!("{} ({})", params.len(), expected.collect::<Vec<_>>().join(", ")),
                found: self.args.len(),
            });
        }
        Ok(())
    }

    /// Launches the kernel once on `prepared` (which [`KernelCase::prepare`] made on the same
    /// `gpu`); in/out buffers carry over from launch to launch. The arguments are checked against
    /// the entry's parameters first ([`KernelCase::check_params`]), then by the backend against
    /// its whole contract; an optional entry the target lacks is [`BackendError::Absent`].
    pub fn launch(
        &self,
        gpu: &dyn GpuBackend,
        kernels: &Glm5NextKdaKernels,
        prepared: &mut PreparedCase,
    ) -> Result<(), BackendError> {
        self.check_params()?;
        let kernel = self.kernel(kernels).ok_or(BackendError::Absent { entry: Box::new(*self.entry()) })?;
        let mut args: Vec<KernelArg<'_>> = prepared.slots.iter_mut().map(PreparedArg::arg).collect();
        gpu.launch(kernel, self.launch, &mut args)
    }

    /// Every buffer the kernel writes (in/out ones included), downloaded from `prepared`, in
    /// parameter order.
    pub fn outputs(
        &self,
        gpu: &dyn GpuBackend,
        prepared: &PreparedCase,
    ) -> Result<Vec<HostOutput>, BackendError> {
        self.args
            .iter()
            .zip(&prepared.slots)
            .filter_map(|(arg, slot)| match (arg, slot) {
                (CaseArg::Buffer(buffer), PreparedArg::View { buffer: device, range, writable: true }) => {
                    Some((buffer, device, range))
                }
                _ => None,
            })
            .map(|(buffer, device, range)| {
                let check = match buffer.access {
                    Access::Write(check) | Access::ReadWrite(check) => check,
                    Access::Read => Check::Exact,
                };
                Ok(HostOutput {
                    name: buffer.name,
                    data: buffer.data.download_range(gpu, device, range.clone())?,
                    check,
                    used: buffer.used,
                })
            })
            .collect()
    }

    /// Uploads, launches once, and downloads every written buffer.
    pub fn run(
        &self,
        gpu: &dyn GpuBackend,
        kernels: &Glm5NextKdaKernels,
    ) -> Result<Vec<HostOutput>, BackendError> {
        let mut prepared = self.prepare(gpu)?;
        self.launch(gpu, kernels, &mut prepared)?;
        self.outputs(gpu, &prepared)
    }

    /// For a `gemv_batchm` case: the `gemv` case of its row `row` (that row of `x`, the same
    /// weight), whose output must be bit-identical to that row of the batched output. `None` for
    /// another case or a row past `m`.
    pub fn gemv_row(&self, row: u32) -> Option<KernelCase> {
        if self.entry != Glm5NextKdaEntry::gemv_batchm {
            return None;
        }
        let (m, n, k) = (self.u32_arg("m")?, self.u32_arg("n")?, self.u32_arg("k")?);
        let ld = self.u32_arg("ldx")? as usize;
        let (x, w) = (self.buffer("x")?.data.as_bf16()?, self.buffer("w")?.data.as_bf16()?);
        let x = x.get(row as usize * ld..)?.get(..k as usize).filter(|_| row < m)?;
        Some(KernelCase {
            entry: Glm5NextKdaEntry::gemv,
            launch: launch::gemv(1, n),
            args: dense_args(GEMV, x.to_vec(), w.to_vec(), None, n, k),
            tokens: 1,
            offset: self.offset,
        })
    }
}
