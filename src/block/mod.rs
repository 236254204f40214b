//! The GLM-5.3-Flash KDA block: decode and chunked prefill, launched through
//! [`Glm5NextKdaKernels`]' typed launchers on any backend (`docs/kernels.md`, "The block").
//!
//! Every size the block computes is checked: the token count is bounded by
//! [`KdaGeometry::max_tokens`] before anything is allocated, a state must be one this block made
//! for its geometry, and the weights must have the geometry's shapes. Past those checks every
//! launch is checked again against the manifest's params, so no input can make a kernel write
//! outside its buffers.

mod pool;

use kda_runtime::{BackendError, DType, DeviceBuffer, GpuBackend, GpuBackendExt, KernelHandle, ResolveError};

use crate::geometry::{CONV_WIDTH, GeometryError, KdaGeometry};
use crate::kernels::{Glm5NextKdaKernels, glm5next_kda as args};
use crate::launch;
use crate::ops::dense_mm_bf16;
use crate::weights::{DeviceWeights, HostWeights, WeightsError};

pub use pool::{KdaState, KdaStatePool, SlotError};

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

/// The inputs of the stateful part, from the projections of the block input.
struct FrontEnd {
    /// `[t, 3·qkv]` bf16: q | k | v per token.
    qkv: DeviceBuffer,
    /// `[t_pad, H, D]` f32 log-decays, zero past `t`.
    gate: DeviceBuffer,
    /// `[t_pad, H]` f32, zero past `t`.
    beta: DeviceBuffer,
    /// `[t, qkv]` bf16, the output gate.
    out_gate: DeviceBuffer,
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

    /// The recurrent kernel decode uses: `recurrent_smem` where the target has it.
    pub fn decode_kernel(&self) -> KernelHandle {
        self.kernels.recurrent_smem.unwrap_or(self.kernels.recurrent)
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
                args::fill { dst: view, n, value: 0.0 },
            )?;
        }
        Ok(slot)
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
    pub fn decode_batch(
        &self,
        pool: &mut KdaStatePool,
        slots: &[u32],
        hidden: &DeviceBuffer,
    ) -> Result<DeviceBuffer, BlockError> {
        self.check_pool(pool)?;
        let b = self.tokens(hidden)?;
        if b as usize != slots.len() || b > launch::MAX_DECODE_BATCH {
            return Err(BlockError::Input {
                expected: format!(
                    "one token for each of the {} slots (at most {})",
                    slots.len(),
                    launch::MAX_DECODE_BATCH
                ),
                found: format!("{b} tokens"),
            });
        }
        pool.check_step(slots)?;
        let g = self.geometry;
        let (qkv, dim, capacity) = (g.qkv(), g.conv_dim(), pool.capacity());
        let slot = self.gpu.upload(slots)?;
        let front = self.front_end(hidden, b, b)?;
        let (conv_pool, recurrent_pool) = pool.buffers_mut();
        let mut conv_out = self.gpu.alloc(DType::Bf16, elements("B·3·qkv", &[b, dim])?)?;
        self.kernels.launch_conv_decode(
            self.gpu,
            launch::conv(dim, b),
            args::conv_decode {
                pool: conv_pool.view_mut(),
                slot: slot.view(),
                x: front.qkv.view(),
                weight: self.weights.conv.view(),
                out: conv_out.view_mut(),
                b,
                slots: capacity,
                dim,
                width: CONV_WIDTH,
                qk_channels: 2 * qkv,
                head_dim: g.head_dim,
                eps: g.l2_eps,
            },
        )?;
        let mut core = self.gpu.alloc(DType::F32, elements("B·qkv", &[b, qkv])?)?;
        let step = args::recurrent {
            qkv: conv_out.view(),
            gate: front.gate.view(),
            beta: front.beta.view(),
            pool: recurrent_pool.view_mut(),
            slot: slot.view(),
            out: core.view_mut(),
            b,
            slots: capacity,
            h: g.heads,
            d: g.head_dim,
            scale: g.scale(),
        };
        let geometry = launch::recurrent(g.heads, g.head_dim, b);
        // The two kernels are one contract (bit-identical, same params): the shared-memory one
        // where the target has it.
        match self.kernels.recurrent_smem {
            Some(_) => self.kernels.launch_recurrent_smem(self.gpu, geometry, smem_args(step))?,
            None => self.kernels.launch_recurrent(self.gpu, geometry, step)?,
        }
        self.back_end(&core, &front.out_gate, b)
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
        let g = self.geometry;
        let (qkv, dim, t_pad) = (g.qkv(), g.conv_dim(), g.padded(t)?);
        let front = self.front_end(hidden, t, t_pad)?;

        let tokens_by_dim = size("t·3·qkv", &[t, dim])?;
        let mut conv_out = self.gpu.alloc(DType::Bf16, tokens_by_dim as usize)?;
        self.kernels.launch_conv_prefill(
            self.gpu,
            launch::conv(dim, 1),
            args::conv_prefill {
                state: conv_state,
                x: front.qkv.view(),
                weight: self.weights.conv.view(),
                out: conv_out.view_mut(),
                dim,
                width: CONV_WIDTH,
                t,
            },
        )?;
        let qk_heads = 2 * g.heads;
        self.kernels.launch_l2(
            self.gpu,
            launch::norm(size("t·2·H", &[t, qk_heads])?, g.head_dim),
            args::l2 {
                data: conv_out.view_mut(),
                rows: t,
                row_stride: dim,
                heads: qk_heads,
                head_dim: g.head_dim,
                eps: g.l2_eps,
            },
        )?;

        let mut q = self.padded_f32(t, t_pad, qkv)?;
        let mut k = self.padded_f32(t, t_pad, qkv)?;
        let mut v = self.padded_f32(t, t_pad, qkv)?;
        self.kernels.launch_split_widen(
            self.gpu,
            launch::elementwise(tokens_by_dim),
            args::split_widen {
                src: conv_out.view(),
                q: q.view_mut(),
                k: k.view_mut(),
                v: v.view_mut(),
                t,
                qkv,
            },
        )?;

        let padded = elements("t_pad·qkv", &[t_pad, qkv])?;
        let mut gc = self.gpu.alloc(DType::F32, padded)?;
        let mut u = self.gpu.alloc(DType::F32, padded)?;
        let mut w = self.gpu.alloc(DType::F32, padded)?;
        self.kernels.launch_chunk_prepare(
            self.gpu,
            launch::chunk_prepare(t_pad / g.chunk, g.heads),
            args::chunk_prepare {
                k: k.view(),
                v: v.view(),
                gate: front.gate.view(),
                beta: front.beta.view(),
                gc: gc.view_mut(),
                u: u.view_mut(),
                w: w.view_mut(),
                t,
                h: g.heads,
                d: g.head_dim,
                c: g.chunk,
            },
        )?;
        let mut core = self.gpu.alloc(DType::F32, padded)?;
        self.kernels.launch_chunk_scan(
            self.gpu,
            launch::chunk_scan(g.heads, g.head_dim),
            args::chunk_scan {
                q: q.view(),
                k: k.view(),
                gc: gc.view(),
                u: u.view(),
                w: w.view(),
                state: recurrent_state,
                out: core.view_mut(),
                t,
                h: g.heads,
                d: g.head_dim,
                c: g.chunk,
                scale: g.scale(),
            },
        )?;
        self.back_end(&core, &front.out_gate, t)
    }

    /// The projections of the block input, shared by decode and prefill. Gate and beta get
    /// `t_pad` rows, zero past `t`, for the chunked form.
    fn front_end(&self, hidden: &DeviceBuffer, t: u32, t_pad: u32) -> Result<FrontEnd, BlockError> {
        let g = self.geometry;
        let (qkv, d, heads) = (g.qkv(), g.head_dim, g.heads);
        let w = &self.weights;
        let mm = |x: &DeviceBuffer, weight: &DeviceBuffer, n: u32, k: u32| {
            dense_mm_bf16(self.gpu, &self.kernels, x, weight, (t, n, k))
        };
        let projections = [&w.q_proj, &w.k_proj, &w.v_proj].map(|weight| mm(hidden, weight, qkv, g.hidden));
        let [qp, kp, vp] = projections;
        let (qp, kp, vp) = (qp?, kp?, vp?);
        let packed_len = size("t·3·qkv", &[t, 3, qkv])?;
        let mut packed = self.gpu.alloc(DType::Bf16, packed_len as usize)?;
        self.kernels.launch_pack(
            self.gpu,
            launch::elementwise(packed_len),
            args::pack { q: qp.view(), k: kp.view(), v: vp.view(), dst: packed.view_mut(), t, qkv },
        )?;

        let g_raw = mm(&mm(hidden, &w.f_a, d, g.hidden)?, &w.f_b, qkv, d)?;
        let mut gate = self.padded_f32(t, t_pad, qkv)?;
        self.kernels.launch_gate(
            self.gpu,
            launch::elementwise(size("t·qkv", &[t, qkv])?),
            args::gate {
                g_raw: g_raw.view(),
                dt_bias: w.dt_bias.view(),
                a_log: w.a_log.view(),
                gate: gate.view_mut(),
                t,
                h: heads,
                d,
                law: g.gate_law.code(),
                lower_bound: g.gate_law.lower_bound(),
            },
        )?;
        let b_raw = mm(hidden, &w.b_proj, heads, g.hidden)?;
        let mut beta = self.padded_f32(t, t_pad, heads)?;
        let n = size("t·H", &[t, heads])?;
        self.kernels.launch_sigmoid(
            self.gpu,
            launch::elementwise(n),
            args::sigmoid { x: b_raw.view(), y: beta.view_mut(), n },
        )?;
        let out_gate = mm(&mm(hidden, &w.g_a, d, g.hidden)?, &w.g_b, qkv, d)?;
        Ok(FrontEnd { qkv: packed, gate, beta, out_gate })
    }

    /// The gated output norm and the output projection of `t` rows of `core`.
    fn back_end(
        &self,
        core: &DeviceBuffer,
        out_gate: &DeviceBuffer,
        t: u32,
    ) -> Result<DeviceBuffer, BlockError> {
        let g = self.geometry;
        let rows = size("t·H", &[t, g.heads])?;
        let mut normed = self.gpu.alloc(DType::Bf16, elements("t·qkv", &[rows, g.head_dim])?)?;
        self.kernels.launch_o_norm(
            self.gpu,
            launch::norm(rows, g.head_dim),
            args::o_norm {
                x: core.view(),
                gate: out_gate.view(),
                weight: self.weights.o_norm.view(),
                out: normed.view_mut(),
                rows,
                d: g.head_dim,
                eps: g.norm_eps,
            },
        )?;
        Ok(dense_mm_bf16(self.gpu, &self.kernels, &normed, &self.weights.o_proj, (t, g.hidden, g.qkv()))?)
    }

    /// An f32 buffer of `t_pad` rows of `width` for `t` rows of data. A padded one is zeroed by
    /// `kda_fill_f32` first, so the chunk padding reads as zero however the buffer was obtained.
    fn padded_f32(&self, t: u32, t_pad: u32, width: u32) -> Result<DeviceBuffer, BlockError> {
        let n = size("t_pad·width", &[t_pad, width])?;
        let mut buffer = self.gpu.alloc(DType::F32, n as usize)?;
        if t_pad > t {
            self.kernels.launch_fill(
                self.gpu,
                launch::elementwise(n),
                args::fill { dst: buffer.view_mut(), n, value: 0.0 },
            )?;
        }
        Ok(buffer)
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

/// The arguments of `recurrent` for `recurrent_smem`, which shares its contract.
fn smem_args(step: args::recurrent<'_>) -> args::recurrent_smem<'_> {
    let args::recurrent { qkv, gate, beta, pool, slot, out, b, slots, h, d, scale } = step;
    args::recurrent_smem { qkv, gate, beta, pool, slot, out, b, slots, h, d, scale }
}
