//! The GLM-5.3-Flash KDA block: decode and chunked prefill, launched through
//! [`Glm5NextKdaKernels`]' typed launchers on any backend (`docs/kernels.md`, "The block").
//!
//! Every size the block computes is checked: the token count is bounded by
//! [`KdaGeometry::max_tokens`] before anything is allocated, a state must be one this block made
//! for its geometry, and the weights must have the geometry's shapes. Past those checks every
//! launch is checked again against the manifest's params, so no input can make a kernel write
//! outside its buffers.

mod pool;
mod replay;
mod workspace;

use kda_runtime::{
    BackendError, DType, DeviceBuffer, GpuBackend, GpuBackendExt, KernelHandle, ResolveError, View, ViewMut,
};

use crate::geometry::{CONV_WIDTH, GeometryError, KdaGeometry};
use crate::kernels::{Glm5NextKdaKernels, glm5next_kda as args};
use crate::launch;
use crate::ops::{StridedRows, dense_mm_bf16_into, dense_mm_kernel};
use crate::weights::{DeviceWeights, HostWeights, InputProjection, WeightsError};

pub use pool::{KdaState, KdaStatePool, SlotError};
pub use replay::DecodeReplay;
use workspace::{DecodeScratch, FrontEnd};

/// Why the block could not be built or run.
#[derive(Debug, thiserror::Error)]
pub enum BlockError {
    /// The geometry is not one the kernels run, or a token count is beyond it.
    #[error("invalid geometry: {0}")]
    Geometry(#[from] GeometryError),
    /// The weights do not have the geometry's shapes.
    #[error(transparent)]
    Weights(#[from] WeightsError),
    /// The backend lacks required kernels, or a lookup failed.
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    /// A copy or launch failed.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The input is not a whole number of `hidden`-wide bf16 rows.
    #[error("the block input must be {expected}, got {found}")]
    Input {
        /// What was needed.
        expected: String,
        /// What was passed.
        found: String,
    },
    /// A slot a step or prefill names cannot be used.
    #[error(transparent)]
    Slot(#[from] SlotError),
    /// A state made by another block or for another geometry.
    #[error("this state was made for {found}, not for this block ({expected})")]
    State {
        /// This block's geometry.
        expected: String,
        /// The state's.
        found: String,
    },
}

/// The buffers of one batched decode step that the caller owns: the input rows, their slots and
/// the output rows.
struct DecodeRows<'a> {
    /// `[B, hidden]` bf16.
    hidden: View<'a>,
    /// `[B]` u32: the pool slot of each row.
    slot: View<'a>,
    /// `[B, hidden]` bf16.
    out: ViewMut<'a>,
}

/// A KDA layer on a backend: its geometry, resolved kernels and weights.
pub struct Glm5NextKdaBlock<'g> {
    gpu: &'g dyn GpuBackend,
    kernels: Glm5NextKdaKernels,
    geometry: KdaGeometry,
    weights: DeviceWeights,
}

/// `a · b · ...` as a kernel's `u32` size, or the geometry error naming `what`.
fn size(what: &'static str, factors: &[u32]) -> Result<u32, GeometryError> {
    let value = factors.iter().try_fold(1u64, |acc, &f| acc.checked_mul(u64::from(f))).unwrap_or(u64::MAX);
    u32::try_from(value).map_err(|_| GeometryError::Overflow { what, value })
}

/// `a · b · ...` elements of a buffer.
fn elements(what: &'static str, factors: &[u32]) -> Result<usize, GeometryError> {
    // A kernel's sizes are u32, so a buffer it can address holds at most 2^32 - 1 elements.
    size(what, factors).map(|n| n as usize)
}

impl<'g> Glm5NextKdaBlock<'g> {
    /// Checks `geometry` and the shapes of `weights`, resolves the kernel table on `gpu` and
    /// uploads the weights.
    pub fn new(
        gpu: &'g dyn GpuBackend,
        geometry: KdaGeometry,
        weights: &HostWeights,
    ) -> Result<Self, BlockError> {
        geometry.validate()?;
        weights.check(&geometry)?;
        let kernels = Glm5NextKdaKernels::resolve(gpu)?;
        let weights = weights.upload(gpu)?;
        Ok(Self { gpu, kernels, geometry, weights })
    }

    /// The resolved kernels.
    pub fn kernels(&self) -> &Glm5NextKdaKernels {
        &self.kernels
    }

    /// The layer's geometry.
    pub fn geometry(&self) -> &KdaGeometry {
        &self.geometry
    }

    /// The recurrent kernel decode uses: `recurrent_regs` where the target has it.
    pub fn decode_kernel(&self) -> KernelHandle {
        self.kernels.recurrent_regs.unwrap_or(self.kernels.recurrent)
    }

    /// A pool of `capacity` free sequence slots, on this block's backend for its geometry.
    pub fn new_pool(&self, capacity: u32) -> Result<KdaStatePool, BlockError> {
        KdaStatePool::new(self.gpu, self.geometry, capacity)
    }

    /// A free slot of `pool`, now holding a fresh sequence: zero conv window, zero recurrent
    /// state, whatever a released sequence left there.
    pub fn acquire(&self, pool: &mut KdaStatePool) -> Result<u32, BlockError> {
        self.check_pool(pool)?;
        let slot = pool.take_free()?;
        let (conv, recurrent) = pool.slot_mut(slot)?;
        for view in [conv, recurrent] {
            let n = size("one slot's state", &[view.len() as u32])?;
            self.kernels.launch_fill(
                self.gpu,
                launch::elementwise(n),
                args::fill { dst: view.into(), n, value: 0.0 },
            )?;
        }
        Ok(slot)
    }

    /// A copy of `pool`: the same capacity, the same sequences in the same slots, stepping
    /// independently from now on (a snapshot of a batch, or two runs from one prefill).
    pub fn copy_pool(&self, pool: &KdaStatePool) -> Result<KdaStatePool, BlockError> {
        self.check_pool(pool)?;
        pool.duplicate(self.gpu)
    }

    /// A fresh sequence on its own: zero conv window, zero recurrent state.
    pub fn new_state(&self) -> Result<KdaState, BlockError> {
        let mut pool = self.new_pool(1)?;
        pool.take_free()?;
        Ok(KdaState { pool })
    }

    /// One token: `hidden` is `[hidden]` bf16; returns `[hidden]` bf16 and advances `state`. The
    /// batched step with a batch of one.
    pub fn decode_step(
        &self,
        state: &mut KdaState,
        hidden: &DeviceBuffer,
    ) -> Result<DeviceBuffer, BlockError> {
        let t = self.tokens(hidden)?;
        if t != 1 {
            return Err(BlockError::Input { expected: "one token".to_owned(), found: format!("{t} tokens") });
        }
        self.decode_batch(&mut state.pool, &[0], hidden)
    }

    /// One token for each of `slots.len()` sequences of `pool`: `hidden` is `[B, hidden]` bf16,
    /// row r the token of the sequence in `slots[r]`; returns `[B, hidden]` bf16 and advances those
    /// sequences. The projections read each weight once for the whole batch. The slots must be
    /// held and distinct (checked before anything runs); the slots not named are not touched.
    ///
    /// Each call allocates its buffers; a [`DecodeReplay`] runs the same launches on buffers it
    /// keeps.
    pub fn decode_batch(
        &self,
        pool: &mut KdaStatePool,
        slots: &[u32],
        hidden: &DeviceBuffer,
    ) -> Result<DeviceBuffer, BlockError> {
        let b = self.check_decode(pool, slots, hidden, launch::MAX_DECODE_BATCH)?;
        let slot = self.gpu.upload(slots)?;
        let mut scratch = DecodeScratch::new(self.gpu, &self.geometry, b, self.partials_len(b))?;
        let mut out = self.gpu.alloc(DType::Bf16, hidden.len())?;
        let rows = DecodeRows { hidden: hidden.view(), slot: slot.view(), out: out.view_mut() };
        self.decode_into(self.gpu, rows, &mut scratch, pool)?;
        Ok(out)
    }

    /// A recorder and replayer of this block's batched decode step for up to `max_batch`
    /// sequences (at most [`launch::MAX_DECODE_BATCH`]): see [`DecodeReplay`].
    pub fn decode_replay(&self, max_batch: u32) -> Result<DecodeReplay<'_, 'g>, BlockError> {
        DecodeReplay::new(self, max_batch)
    }

    /// Checks one batched step before anything runs: the pool is this block's, `hidden` holds one
    /// token for each of the slots (at most `max_batch`), and the slots are held and distinct.
    /// Returns the batch size.
    fn check_decode(
        &self,
        pool: &KdaStatePool,
        slots: &[u32],
        hidden: &DeviceBuffer,
        max_batch: u32,
    ) -> Result<u32, BlockError> {
        self.check_pool(pool)?;
        let b = self.tokens(hidden)?;
        if b as usize != slots.len() || b > max_batch {
            return Err(BlockError::Input {
                expected: format!("one token for each of the {} slots (at most {max_batch})", slots.len()),
                found: format!("{b} tokens"),
            });
        }
        pool.check_step(slots)?;
        Ok(b)
    }

    /// The launches of one batched decode step on `gpu`, over every row of `rows.slot` (a row whose
    /// slot is outside the pool is skipped by the stateful kernels): what a [`DecodeReplay`]
    /// records.
    fn decode_into(
        &self,
        gpu: &dyn GpuBackend,
        rows: DecodeRows<'_>,
        scratch: &mut DecodeScratch,
        pool: &mut KdaStatePool,
    ) -> Result<(), BlockError> {
        let g = self.geometry;
        let (qkv, dim, capacity) = (g.qkv(), g.conv_dim(), pool.capacity());
        let b = size("B", &[rows.slot.len() as u32])?;
        self.front_end(gpu, rows.hidden, b, &mut scratch.front)?;
        let front = &scratch.front;
        let (conv_pool, recurrent_pool) = pool.buffers_mut();
        let x = InputProjection::Qkv.outputs(&g, &front.projected);
        self.kernels.launch_conv_decode(
            gpu,
            launch::conv_decode(dim, g.head_dim, b),
            args::conv_decode {
                pool: conv_pool.view_mut().into(),
                slot: rows.slot.clone().into(),
                x: x.view.into(),
                weight: self.weights.conv.view().into(),
                out: scratch.conv_out.view_mut().into(),
                b,
                slots: capacity,
                dim,
                ldx: x.ld,
                width: CONV_WIDTH,
                qk_channels: 2 * qkv,
                head_dim: g.head_dim,
                eps: g.l2_eps,
            },
        )?;
        let ForgetGate { g_raw, dt_bias, a_log, b_raw, ldb, law, lower_bound } = self.forget_gate(front);
        let geometry = launch::recurrent(g.heads, g.head_dim, b);
        // The two kernels are one contract (bit-identical, same params), each with its own
        // argument struct: the one holding each state column in registers where the target has it.
        macro_rules! step {
            ($entry:ident) => {
                args::$entry {
                    qkv: scratch.conv_out.view().into(),
                    g_raw: g_raw.into(),
                    dt_bias: dt_bias.into(),
                    a_log: a_log.into(),
                    b_raw: b_raw.into(),
                    pool: recurrent_pool.view_mut().into(),
                    slot: rows.slot.into(),
                    out: scratch.core.view_mut().into(),
                    b,
                    slots: capacity,
                    h: g.heads,
                    d: g.head_dim,
                    ldb,
                    law,
                    scale: g.scale(),
                    lower_bound,
                }
            };
        }
        match self.kernels.recurrent_regs {
            Some(_) => self.kernels.launch_recurrent_regs(gpu, geometry, step!(recurrent_regs))?,
            None => self.kernels.launch_recurrent(gpu, geometry, step!(recurrent))?,
        }
        let gated = (scratch.core.view(), scratch.front.out_gate.view());
        self.back_end(gpu, gated, b, (&mut scratch.normed, &mut scratch.front.partials), rows.out)
    }

    /// `t ≥ 1` tokens of one sequence at once through the chunked form: `hidden` is `[t, hidden]`
    /// bf16; returns `[t, hidden]` bf16 and leaves `state` where `t` decode steps would.
    pub fn prefill(&self, state: &mut KdaState, hidden: &DeviceBuffer) -> Result<DeviceBuffer, BlockError> {
        self.prefill_slot(&mut state.pool, 0, hidden)
    }

    /// [`Self::prefill`] of the sequence in `slot` of `pool`, which must be held; the other slots
    /// are not touched.
    pub fn prefill_slot(
        &self,
        pool: &mut KdaStatePool,
        slot: u32,
        hidden: &DeviceBuffer,
    ) -> Result<DeviceBuffer, BlockError> {
        self.check_pool(pool)?;
        let (conv_state, recurrent_state) = pool.slot_mut(slot)?;
        let t = self.tokens(hidden)?;
        let (gpu, g) = (self.gpu, self.geometry);
        let (qkv, t_pad) = (g.qkv(), g.padded(t)?);
        let mut front = FrontEnd::new(gpu, &g, t, self.partials_len(t))?;
        self.front_end(gpu, hidden.view(), t, &mut front)?;

        // The chunked form's buffers have `t_pad` rows, whole chunks; the chunk kernels take t and
        // neither read the rows past it nor (but for prepare, as if their inputs were zero) write
        // them. Each buffer is written before it is read: no zero-fill.
        let padded = elements("t_pad·qkv", &[t_pad, qkv])?;
        let written = |len| gpu.alloc_for_write(DType::F32, len);
        let (mut q, mut k, mut v) = (written(padded)?, written(padded)?, written(padded)?);
        let x = InputProjection::Qkv.outputs(&g, &front.projected);
        self.kernels.launch_conv_prefill(
            gpu,
            launch::conv_prefill(qkv, g.head_dim, t),
            args::conv_prefill {
                state: conv_state.into(),
                x: x.view.into(),
                weight: self.weights.conv.view().into(),
                q: q.view_mut().into(),
                k: k.view_mut().into(),
                v: v.view_mut().into(),
                t,
                qkv,
                ldx: x.ld,
                width: CONV_WIDTH,
                head_dim: g.head_dim,
                eps: g.l2_eps,
            },
        )?;
        let (mut u, mut w) = (written(padded)?, written(padded)?);
        let (mut qdec, mut kdec) = (written(padded)?, written(padded)?);
        let mut aqk = written(elements("t_pad·H·C", &[t_pad, g.heads, g.chunk])?)?;
        let mut sdec = written(elements("t_pad/C·qkv", &[t_pad / g.chunk, qkv])?)?;
        let ForgetGate { g_raw, dt_bias, a_log, b_raw, ldb, law, lower_bound } = self.forget_gate(&front);
        self.kernels.launch_chunk_prepare(
            gpu,
            launch::chunk_prepare(t_pad / g.chunk, g.heads),
            args::chunk_prepare {
                q: q.view().into(),
                k: k.view().into(),
                v: v.view().into(),
                g_raw: g_raw.into(),
                dt_bias: dt_bias.into(),
                a_log: a_log.into(),
                b_raw: b_raw.into(),
                u: u.view_mut().into(),
                w: w.view_mut().into(),
                aqk: aqk.view_mut().into(),
                qdec: qdec.view_mut().into(),
                kdec: kdec.view_mut().into(),
                sdec: sdec.view_mut().into(),
                t,
                h: g.heads,
                d: g.head_dim,
                c: g.chunk,
                ldb,
                law,
                scale: g.scale(),
                lower_bound,
            },
        )?;
        let mut core = written(padded)?;
        self.kernels.launch_chunk_scan(
            gpu,
            launch::chunk_scan(g.heads, g.head_dim),
            args::chunk_scan {
                qdec: qdec.view().into(),
                kdec: kdec.view().into(),
                sdec: sdec.view().into(),
                u: u.view().into(),
                w: w.view().into(),
                aqk: aqk.view().into(),
                state: recurrent_state.into(),
                out: core.view_mut().into(),
                t,
                h: g.heads,
                d: g.head_dim,
                c: g.chunk,
            },
        )?;
        let mut normed = gpu.alloc_for_write(DType::Bf16, elements("t·qkv", &[t, qkv])?)?;
        let mut out = gpu.alloc_for_write(DType::Bf16, hidden.len())?;
        let gated = (core.view(), front.out_gate.view());
        self.back_end(gpu, gated, t, (&mut normed, &mut front.partials), out.view_mut())?;
        Ok(out)
    }

    /// The projections of `t` rows of the block input into `front`, shared by decode and prefill.
    fn front_end(
        &self,
        gpu: &dyn GpuBackend,
        hidden: View<'_>,
        t: u32,
        front: &mut FrontEnd,
    ) -> Result<(), BlockError> {
        let g = self.geometry;
        let (qkv, d) = (g.qkv(), g.head_dim);
        let w = &self.weights;
        let partials = &mut front.partials;
        let mut mm = |x: StridedRows<'_>, weight: View<'_>, y: ViewMut<'_>, n: u32, k: u32| {
            dense_mm_bf16_into(gpu, &self.kernels, x, weight, y, (t, n, k), partials)
        };
        // One product over the stacked weight reads the block input once for all six
        // projections; each consumer reads its columns of the rows in place.
        let hidden = StridedRows { view: hidden, ld: g.hidden };
        let stacked = InputProjection::stacked_width(&g);
        mm(hidden, w.input_proj.view(), front.projected.view_mut(), stacked, g.hidden)?;
        let [gate_down, out_gate_down] = [InputProjection::GateDown, InputProjection::OutGateDown]
            .map(|projection| projection.outputs(&g, &front.projected));
        mm(gate_down, w.f_b.view(), front.g_raw.view_mut(), qkv, d)?;
        mm(out_gate_down, w.g_b.view(), front.out_gate.view_mut(), qkv, d)?;
        Ok(())
    }

    /// The forget gate's inputs in `front` and the weights, as the stateful kernels take them.
    fn forget_gate<'a>(&'a self, front: &'a FrontEnd) -> ForgetGate<'a> {
        let g = self.geometry;
        let b_raw = InputProjection::Beta.outputs(&g, &front.projected);
        ForgetGate {
            g_raw: front.g_raw.view(),
            dt_bias: self.weights.dt_bias.view(),
            a_log: self.weights.a_log.view(),
            b_raw: b_raw.view,
            ldb: b_raw.ld,
            law: g.gate_law.code(),
            lower_bound: g.gate_law.lower_bound(),
        }
    }

    /// The gated output norm of `t` rows of the core output (`gated`: the core output and the
    /// output gate) into `normed`, then the output projection into `out` (its split-K partial
    /// sums, if it splits, in `partials`).
    fn back_end(
        &self,
        gpu: &dyn GpuBackend,
        (core, out_gate): (View<'_>, View<'_>),
        t: u32,
        (normed, partials): (&mut DeviceBuffer, &mut DeviceBuffer),
        out: ViewMut<'_>,
    ) -> Result<(), BlockError> {
        let g = self.geometry;
        let rows = size("t·H", &[t, g.heads])?;
        self.kernels.launch_o_norm(
            gpu,
            launch::norm(rows),
            args::o_norm {
                x: core.into(),
                gate: out_gate.into(),
                weight: self.weights.o_norm.view().into(),
                out: normed.view_mut().into(),
                rows,
                d: g.head_dim,
                eps: g.norm_eps,
            },
        )?;
        let o_proj = self.weights.o_proj.view();
        let normed = StridedRows { view: normed.view(), ld: g.qkv() };
        Ok(dense_mm_bf16_into(gpu, &self.kernels, normed, o_proj, out, (t, g.hidden, g.qkv()), partials)?)
    }

    /// The `(n, k)` of the layer's dense products: the stacked projections of the block input,
    /// f_b, g_b and o_proj.
    fn dense_shapes(&self) -> [(u32, u32); 4] {
        let g = self.geometry;
        let (stacked, qkv) = (InputProjection::stacked_width(&g), g.qkv());
        [(stacked, g.hidden), (qkv, g.head_dim), (qkv, g.head_dim), (g.hidden, qkv)]
    }

    /// f32 elements of split-K partial sums the dense products of a call of `t` rows need on
    /// this table: the most any of them takes (0 where none splits K).
    pub(super) fn partials_len(&self, t: u32) -> usize {
        let partials = |(n, k)| dense_mm_kernel(&self.kernels, (t, n, k)).partials(t, n);
        self.dense_shapes().into_iter().map(partials).max().unwrap_or(0)
    }

    /// The number of tokens in a block input, at most [`KdaGeometry::max_tokens`].
    fn tokens(&self, hidden: &DeviceBuffer) -> Result<u32, BlockError> {
        let width = self.geometry.hidden as usize;
        if hidden.dtype() != DType::Bf16 || hidden.is_empty() || !hidden.len().is_multiple_of(width) {
            return Err(BlockError::Input {
                expected: format!("bf16 rows of {width} values"),
                found: format!("{} {} values", hidden.len(), hidden.dtype()),
            });
        }
        Ok(self.geometry.check_tokens(hidden.len() / width)?)
    }

    /// Refuses a pool (or state) this block did not make: another geometry, or another backend.
    fn check_pool(&self, pool: &KdaStatePool) -> Result<(), BlockError> {
        let same_backend = pool.conv().backend() == self.weights.conv.backend();
        if *pool.geometry() != self.geometry || !same_backend {
            let backend = if same_backend { "" } else { " on another backend" };
            return Err(BlockError::State {
                expected: self.geometry.to_string(),
                found: format!("{}{backend}", pool.geometry()),
            });
        }
        Ok(())
    }
}

/// The forget gate's arguments of `chunk_prepare` and the recurrent kernels: the raw
/// projections, the weights and the law they apply to them.
struct ForgetGate<'a> {
    g_raw: View<'a>,
    dt_bias: View<'a>,
    a_log: View<'a>,
    b_raw: View<'a>,
    ldb: u32,
    law: u32,
    lower_bound: f32,
}
