//! The buffers one call of the block writes between its input and its output, allocated for a
//! number of rows: by each prefill for its tokens, and once per recorded decode step for the
//! rows of its dispatch class, so that a replay allocates nothing.

use kda_runtime::{DType, DeviceBuffer, GpuBackend};

use super::{BlockError, elements};
use crate::geometry::KdaGeometry;
use crate::weights::InputProjection;

/// The products of the block input that the stateful part reads, for `t` rows.
pub(super) struct FrontEnd {
    /// `[t, 3·qkv + 2·D + H]` bf16: the projections of the block input, each row one product's
    /// over the stacked weight ([`InputProjection::outputs`]).
    pub(super) projected: DeviceBuffer,
    /// `[t, qkv]` bf16: the gate's up projection, before the gate law (which the stateful
    /// kernels apply as they read it).
    pub(super) g_raw: DeviceBuffer,
    /// `[t, qkv]` bf16: the output gate.
    pub(super) out_gate: DeviceBuffer,
    /// f32: the split-K partial sums of the call's dense products (the back end's too), as long
    /// as the longest of them needs (`Glm5NextKdaBlock::partials_len`; empty where none splits).
    pub(super) partials: DeviceBuffer,
}

impl FrontEnd {
    /// The buffers of `t` rows, with `partials` f32 elements of split-K partial sums.
    pub(super) fn new(
        gpu: &dyn GpuBackend,
        g: &KdaGeometry,
        t: u32,
        partials: usize,
    ) -> Result<Self, BlockError> {
        let qkv = g.qkv();
        // Every buffer is written before it is read, so none needs a zero-fill.
        let bf16 = |what, width| {
            Ok::<_, BlockError>(gpu.alloc_for_write(DType::Bf16, elements(what, &[t, width])?)?)
        };
        Ok(Self {
            projected: bf16("t·(3·qkv + 2·D + H)", InputProjection::stacked_width(g))?,
            g_raw: bf16("t·qkv", qkv)?,
            out_gate: bf16("t·qkv", qkv)?,
            partials: gpu.alloc_for_write(DType::F32, partials)?,
        })
    }

    fn buffers_mut(&mut self) -> [&mut DeviceBuffer; 4] {
        let Self { projected, g_raw, out_gate, partials } = self;
        [projected, g_raw, out_gate, partials]
    }
}

/// Everything a batched decode step of `rows` rows writes besides its output and the pool.
pub(super) struct DecodeScratch {
    pub(super) front: FrontEnd,
    /// `[rows, 3·qkv]` bf16: the conv output, q and k L2-normed.
    pub(super) conv_out: DeviceBuffer,
    /// `[rows, qkv]` f32: the recurrent step's output.
    pub(super) core: DeviceBuffer,
    /// `[rows·H, D]` bf16: the gated output norm.
    pub(super) normed: DeviceBuffer,
}

impl DecodeScratch {
    /// The buffers of a step of `rows` rows, with `partials` f32 elements of split-K partial sums.
    pub(super) fn new(
        gpu: &dyn GpuBackend,
        g: &KdaGeometry,
        rows: u32,
        partials: usize,
    ) -> Result<Self, BlockError> {
        let (qkv, dim) = (g.qkv(), g.conv_dim());
        Ok(Self {
            front: FrontEnd::new(gpu, g, rows, partials)?,
            conv_out: gpu.alloc(DType::Bf16, elements("B·3·qkv", &[rows, dim])?)?,
            core: gpu.alloc(DType::F32, elements("B·qkv", &[rows, qkv])?)?,
            normed: gpu.alloc(DType::Bf16, elements("B·qkv", &[rows, qkv])?)?,
        })
    }

    /// Every buffer, for a recording's exclusive bindings.
    pub(super) fn buffers_mut(&mut self) -> impl Iterator<Item = &mut DeviceBuffer> {
        let Self { front, conv_out, core, normed } = self;
        front.buffers_mut().into_iter().chain([conv_out, core, normed])
    }
}
