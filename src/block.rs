//! The GLM-5.3-Flash KDA block: decode and chunked prefill, launched through
//! [`Glm5NextKdaKernels`] on any backend (`KERNEL-ABI.md`, "The block").

use kda_runtime::{
    BackendError, DType, DeviceBuffer, GpuBackend, KernelArg, KernelHandle, LaunchGeometry, ResolveError,
};

use crate::geometry::{CONV_WIDTH, GeometryError, KdaGeometry};
use crate::kernels::Glm5NextKdaKernels;
use crate::launch;
use crate::ops::dense_mm_bf16;
use crate::weights::{DeviceWeights, HostWeights};

/// Why the block could not be built or run.
#[derive(Debug, thiserror::Error)]
pub enum BlockError {
    /// The geometry is not one the kernels run.
    #[error("invalid geometry: {0}")]
    Geometry(#[from] GeometryError),
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
}

/// One sequence's state between calls: the conv window and the recurrent state.
#[derive(Debug)]
pub struct KdaState {
    /// f32 `[3·qkv, W]`, channel-major, slot `W-1` the newest input.
    pub conv: DeviceBuffer,
    /// f32 `[H, D, D]`, K-major.
    pub recurrent: DeviceBuffer,
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

impl<'g> Glm5NextKdaBlock<'g> {
    /// Checks `geometry`, resolves the kernel table on `gpu` and uploads `weights`.
    pub fn new(
        gpu: &'g dyn GpuBackend,
        geometry: KdaGeometry,
        weights: &HostWeights,
    ) -> Result<Self, BlockError> {
        geometry.validate()?;
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
            conv: self.gpu.alloc(DType::F32, (g.conv_dim() * CONV_WIDTH) as usize)?,
            recurrent: self.gpu.alloc(DType::F32, (g.heads * g.head_dim * g.head_dim) as usize)?,
        })
    }

    /// One token: `hidden` is `[hidden]` bf16; returns `[hidden]` bf16 and advances `state`.
    pub fn decode_step(
        &self,
        state: &mut KdaState,
        hidden: &DeviceBuffer,
    ) -> Result<DeviceBuffer, BlockError> {
        let t = self.tokens(hidden)?;
        if t != 1 {
            return Err(BlockError::Input { expected: "one token".to_owned(), found: format!("{t} tokens") });
        }
        let g = self.geometry;
        let (qkv, dim) = (g.qkv(), g.conv_dim());
        let front = self.front_end(hidden, 1, 1)?;
        let mut conv_out = self.gpu.alloc(DType::Bf16, dim as usize)?;
        self.launch(
            self.kernels.conv_decode,
            launch::conv(dim),
            &mut [
                (&mut state.conv).into(),
                (&front.qkv).into(),
                (&self.weights.conv).into(),
                (&mut conv_out).into(),
                dim.into(),
                CONV_WIDTH.into(),
                (2 * qkv).into(),
                g.head_dim.into(),
                g.l2_eps.into(),
            ],
        )?;
        let mut core = self.gpu.alloc(DType::F32, qkv as usize)?;
        let (q, k, v) = (0..qkv as usize, qkv as usize..2 * qkv as usize, 2 * qkv as usize..dim as usize);
        self.launch(
            self.decode_kernel(),
            launch::recurrent(g.heads, g.head_dim),
            &mut [
                conv_out.slice(q),
                conv_out.slice(k),
                conv_out.slice(v),
                (&front.gate).into(),
                (&front.beta).into(),
                (&mut state.recurrent).into(),
                (&mut core).into(),
                g.heads.into(),
                g.head_dim.into(),
                g.scale().into(),
            ],
        )?;
        self.back_end(&core, &front.out_gate, 1)
    }

    /// `t ≥ 1` tokens at once through the chunked form: `hidden` is `[t, hidden]` bf16; returns
    /// `[t, hidden]` bf16 and leaves `state` where `t` decode steps would.
    pub fn prefill(&self, state: &mut KdaState, hidden: &DeviceBuffer) -> Result<DeviceBuffer, BlockError> {
        let t = self.tokens(hidden)?;
        let g = self.geometry;
        let (qkv, dim, t_pad) = (g.qkv(), g.conv_dim(), g.padded(t));
        let front = self.front_end(hidden, t, t_pad)?;

        let mut conv_out = self.gpu.alloc(DType::Bf16, (t * dim) as usize)?;
        self.launch(
            self.kernels.conv_prefill,
            launch::conv(dim),
            &mut [
                (&mut state.conv).into(),
                (&front.qkv).into(),
                (&self.weights.conv).into(),
                (&mut conv_out).into(),
                dim.into(),
                CONV_WIDTH.into(),
                t.into(),
            ],
        )?;
        self.launch(
            self.kernels.l2,
            launch::norm(t * 2 * g.heads, g.head_dim),
            &mut [
                (&mut conv_out).into(),
                t.into(),
                dim.into(),
                (2 * g.heads).into(),
                g.head_dim.into(),
                g.l2_eps.into(),
            ],
        )?;

        let mut q = self.padded_f32(t, t_pad, qkv)?;
        let mut k = self.padded_f32(t, t_pad, qkv)?;
        let mut v = self.padded_f32(t, t_pad, qkv)?;
        self.launch(
            self.kernels.split_widen,
            launch::elementwise(t * dim),
            &mut [
                (&conv_out).into(),
                (&mut q).into(),
                (&mut k).into(),
                (&mut v).into(),
                t.into(),
                qkv.into(),
            ],
        )?;

        let padded = t_pad as usize * qkv as usize;
        let mut gc = self.gpu.alloc(DType::F32, padded)?;
        let mut u = self.gpu.alloc(DType::F32, padded)?;
        let mut w = self.gpu.alloc(DType::F32, padded)?;
        self.launch(
            self.kernels.chunk_prepare,
            launch::chunk_prepare(t_pad / g.chunk, g.heads),
            &mut [
                (&k).into(),
                (&v).into(),
                (&front.gate).into(),
                (&front.beta).into(),
                (&mut gc).into(),
                (&mut u).into(),
                (&mut w).into(),
                t.into(),
                g.heads.into(),
                g.head_dim.into(),
                g.chunk.into(),
            ],
        )?;
        let mut core = self.gpu.alloc(DType::F32, padded)?;
        self.launch(
            self.kernels.chunk_scan,
            launch::chunk_scan(g.heads, g.head_dim),
            &mut [
                (&q).into(),
                (&k).into(),
                (&gc).into(),
                (&u).into(),
                (&w).into(),
                (&mut state.recurrent).into(),
                (&mut core).into(),
                t.into(),
                g.heads.into(),
                g.head_dim.into(),
                g.chunk.into(),
                g.scale().into(),
            ],
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
        let mut packed = self.gpu.alloc(DType::Bf16, (t * 3 * qkv) as usize)?;
        self.launch(
            self.kernels.pack,
            launch::elementwise(t * 3 * qkv),
            &mut [(&qp).into(), (&kp).into(), (&vp).into(), (&mut packed).into(), t.into(), qkv.into()],
        )?;

        let g_raw = mm(&mm(hidden, &w.f_a, d, g.hidden)?, &w.f_b, qkv, d)?;
        let mut gate = self.padded_f32(t, t_pad, qkv)?;
        self.launch(
            self.kernels.gate,
            launch::elementwise(t * qkv),
            &mut [
                (&g_raw).into(),
                (&w.dt_bias).into(),
                (&w.a_log).into(),
                (&mut gate).into(),
                t.into(),
                heads.into(),
                d.into(),
                g.gate_law.code().into(),
                g.gate_law.lower_bound().into(),
            ],
        )?;
        let b_raw = mm(hidden, &w.b_proj, heads, g.hidden)?;
        let mut beta = self.padded_f32(t, t_pad, heads)?;
        self.launch(
            self.kernels.sigmoid,
            launch::elementwise(t * heads),
            &mut [(&b_raw).into(), (&mut beta).into(), (t * heads).into()],
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
        let rows = t * g.heads;
        let mut normed = self.gpu.alloc(DType::Bf16, (rows * g.head_dim) as usize)?;
        self.launch(
            self.kernels.o_norm,
            launch::norm(rows, g.head_dim),
            &mut [
                core.into(),
                out_gate.into(),
                (&self.weights.o_norm).into(),
                (&mut normed).into(),
                rows.into(),
                g.head_dim.into(),
                g.norm_eps.into(),
            ],
        )?;
        Ok(dense_mm_bf16(self.gpu, &self.kernels, &normed, &self.weights.o_proj, (t, g.hidden, g.qkv()))?)
    }

    /// An f32 buffer of `t_pad` rows of `width` for `t` rows of data. A padded one is zeroed by
    /// `kda_fill_f32` first, so the chunk padding reads as zero however the buffer was obtained.
    fn padded_f32(&self, t: u32, t_pad: u32, width: u32) -> Result<DeviceBuffer, BackendError> {
        let len = t_pad * width;
        let mut buffer = self.gpu.alloc(DType::F32, len as usize)?;
        if t_pad > t {
            self.launch(
                self.kernels.fill,
                launch::elementwise(len),
                &mut [(&mut buffer).into(), len.into(), 0.0f32.into()],
            )?;
        }
        Ok(buffer)
    }

    /// The number of tokens in a block input.
    fn tokens(&self, hidden: &DeviceBuffer) -> Result<u32, BlockError> {
        let width = self.geometry.hidden as usize;
        let expected = || format!("bf16 rows of {width} values");
        if hidden.dtype() != DType::Bf16 || hidden.is_empty() || !hidden.len().is_multiple_of(width) {
            return Err(BlockError::Input {
                expected: expected(),
                found: format!("{} {} values", hidden.len(), hidden.dtype()),
            });
        }
        u32::try_from(hidden.len() / width)
            .map_err(|_| BlockError::Input {
                expected: expected(), found: "more than 2³² tokens".to_owned()
            })
    }

    fn launch(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        self.gpu.launch(kernel, geometry, args)
    }
}
