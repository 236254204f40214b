//! The GLM-5.3-Flash KDA block: decode and chunked prefill, launched through
//! [`Glm5NextKdaKernels`]' typed launchers on any backend (`docs/kernels.md`, "The block").
//!
//! Every size the block computes is checked: the token count is bounded by
//! [`KdaGeometry::max_tokens`] before anything is allocated, a state must be one this block made
//! for its geometry, and the weights must have the geometry's shapes. Past those checks every
//! launch is checked again against the manifest's params, so no input can make a kernel write
//! outside its buffers.

use kda_runtime::{BackendError, DType, DeviceBuffer, GpuBackend, KernelHandle, ResolveError};

use crate::geometry::{CONV_WIDTH, GeometryError, KdaGeometry};
use crate::kernels::{Glm5NextKdaKernels, glm5next_kda as args};
use crate::launch;
use crate::ops::dense_mm_bf16;
use crate::weights::{DeviceWeights, HostWeights, WeightsError};

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
    /// A state made by another block or for another geometry.
    #[error("this state was made for {found}, not for this block ({expected})")]
    State {
        /// This block's geometry.
        expected: String,
        /// The state's.
        found: String,
    },
}

/// One sequence's state between calls: the conv window and the recurrent state, made by
/// [`Glm5NextKdaBlock::new_state`] for that block's geometry and backend and checked on every
/// call, so a state of another shape can never reach a kernel.
///
/// It is the state of one sequence; the fields stay private so that a pool of states, addressed
/// by slot, can take its place behind the same calls.
#[derive(Debug)]
pub struct KdaState {
    geometry: KdaGeometry,
    /// f32 `[3·qkv, W]`, channel-major, slot `W-1` the newest input.
    conv: DeviceBuffer,
    /// f32 `[H, D, D]`, K-major.
    recurrent: DeviceBuffer,
}

impl KdaState {
    /// The conv window: f32 `[3·qkv, W]`, channel-major, slot `W-1` the newest input.
    pub fn conv(&self) -> &DeviceBuffer {
        &self.conv
    }

    /// The recurrent state: f32 `[H, D, D]`, K-major (`S[h][k][v]` at `(h·D + k)·D + v`).
    pub fn recurrent(&self) -> &DeviceBuffer {
        &self.recurrent
    }

    /// The geometry it was made for.
    pub fn geometry(&self) -> &KdaGeometry {
        &self.geometry
    }
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

    /// A fresh sequence: zero conv window, zero recurrent state.
    pub fn new_state(&self) -> Result<KdaState, BlockError> {
        let g = &self.geometry;
        Ok(KdaState {
            geometry: *g,
            conv: self.gpu.alloc(DType::F32, elements("3·qkv·W", &[g.conv_dim(), CONV_WIDTH])?)?,
            recurrent: self.gpu.alloc(DType::F32, elements("H·D·D", &[g.heads, g.head_dim, g.head_dim])?)?,
        })
    }

    /// One token: `hidden` is `[hidden]` bf16; returns `[hidden]` bf16 and advances `state`.
    pub fn decode_step(
        &self,
        state: &mut KdaState,
        hidden: &DeviceBuffer,
    ) -> Result<DeviceBuffer, BlockError> {
        self.check_state(state)?;
        let t = self.tokens(hidden)?;
        if t != 1 {
            return Err(BlockError::Input { expected: "one token".to_owned(), found: format!("{t} tokens") });
        }
        let g = self.geometry;
        let (qkv, dim) = (g.qkv(), g.conv_dim());
        let front = self.front_end(hidden, 1, 1)?;
        let mut conv_out = self.gpu.alloc(DType::Bf16, dim as usize)?;
        self.kernels.launch_conv_decode(
            self.gpu,
            launch::conv(dim),
            args::conv_decode {
                state: state.conv.view_mut(),
                x: front.qkv.view(),
                weight: self.weights.conv.view(),
                out: conv_out.view_mut(),
                dim,
                width: CONV_WIDTH,
                qk_channels: 2 * qkv,
                head_dim: g.head_dim,
                eps: g.l2_eps,
            },
        )?;
        let mut core = self.gpu.alloc(DType::F32, qkv as usize)?;
        let (q, k, v) = (0..qkv as usize, qkv as usize..2 * qkv as usize, 2 * qkv as usize..dim as usize);
        let step = args::recurrent {
            q: conv_out.slice(q),
            k: conv_out.slice(k),
            v: conv_out.slice(v),
            gate: front.gate.view(),
            beta: front.beta.view(),
            state: state.recurrent.view_mut(),
            out: core.view_mut(),
            h: g.heads,
            d: g.head_dim,
            scale: g.scale(),
        };
        let geometry = launch::recurrent(g.heads, g.head_dim);
        // The two kernels are one contract (bit-identical, same params): the shared-memory one
        // where the target has it.
        match self.kernels.recurrent_smem {
            Some(_) => self.kernels.launch_recurrent_smem(self.gpu, geometry, smem_args(step))?,
            None => self.kernels.launch_recurrent(self.gpu, geometry, step)?,
        }
        self.back_end(&core, &front.out_gate, 1)
    }

    /// `t ≥ 1` tokens at once through the chunked form: `hidden` is `[t, hidden]` bf16; returns
    /// `[t, hidden]` bf16 and leaves `state` where `t` decode steps would.
    pub fn prefill(&self, state: &mut KdaState, hidden: &DeviceBuffer) -> Result<DeviceBuffer, BlockError> {
        self.check_state(state)?;
        let t = self.tokens(hidden)?;
        let g = self.geometry;
        let (qkv, dim, t_pad) = (g.qkv(), g.conv_dim(), g.padded(t)?);
        let front = self.front_end(hidden, t, t_pad)?;

        let tokens_by_dim = size("t·3·qkv", &[t, dim])?;
        let mut conv_out = self.gpu.alloc(DType::Bf16, tokens_by_dim as usize)?;
        self.kernels.launch_conv_prefill(
            self.gpu,
            launch::conv(dim),
            args::conv_prefill {
                state: state.conv.view_mut(),
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
                state: state.recurrent.view_mut(),
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

    /// Refuses a state this block did not make: another geometry, or another backend.
    fn check_state(&self, state: &KdaState) -> Result<(), BlockError> {
        let same_backend = state.conv.backend() == self.weights.conv.backend();
        if state.geometry != self.geometry || !same_backend {
            let backend = if same_backend { "" } else { " on another backend" };
            return Err(BlockError::State {
                expected: self.geometry.to_string(),
                found: format!("{}{backend}", state.geometry),
            });
        }
        Ok(())
    }
}

/// The arguments of `recurrent` for `recurrent_smem`, which shares its contract.
fn smem_args(step: args::recurrent<'_>) -> args::recurrent_smem<'_> {
    let args::recurrent { q, k, v, gate, beta, state, out, h, d, scale } = step;
    args::recurrent_smem { q, k, v, gate, beta, state, out, h, d, scale }
}
