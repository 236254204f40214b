//! The whole block against the CPU reference: the same run (chunked prefills on a carried state,
//! then decode steps) on a backend and on the reference, its outputs and final states compared
//! within the block's bound. The device suites (`tests/gpu.rs`, `tests/emulated.rs`) and
//! `kda-block emulate` all run it, and report its comparisons each in their own way.

use kda_runtime::{GpuBackend, GpuBackendExt, bf16};

use super::{Check, HostData, Measurement, Mismatch};
use crate::block::{BlockError, Glm5NextKdaBlock};
use crate::geometry::KdaGeometry;
use crate::weights::{HostWeights, synthetic_hidden};

/// The bound on the whole block against the f32 reference, for its outputs and both final states
/// (`docs/kernels.md`, "Tolerances"), as a relative RMS.
pub const BLOCK_BOUND: f64 = 2e-3;

/// Head dim 64, chunks of 64: [`KdaGeometry::tiny`] at the other chunk size and the next head dim
/// the kernels take.
pub fn head_dim_64() -> KdaGeometry {
    KdaGeometry { hidden: 96, heads: 2, head_dim: 64, chunk: 64, ..KdaGeometry::tiny() }
}

/// Head dim 128 (GLM-5.3-Flash's heads), chunks of 64, two heads.
pub fn head_dim_128() -> KdaGeometry {
    KdaGeometry { hidden: 256, heads: 2, head_dim: 128, chunk: 64, ..KdaGeometry::tiny() }
}

/// What a run of the block leaves: its outputs and the state after them.
pub struct BlockRun {
    /// Every token's output, in order.
    pub outputs: Vec<bf16>,
    /// The conv state after the last token.
    pub conv: Vec<f32>,
    /// The recurrent state after the last token.
    pub recurrent: Vec<f32>,
}

/// `hidden` through the block on `gpu`: a chunked prefill of each of `prompts` tokens in turn on
/// the carried state (a prompt longer than what is left takes what is left), then one decode step
/// per remaining token.
pub fn run_block(
    gpu: &dyn GpuBackend,
    geometry: KdaGeometry,
    weights: &HostWeights,
    hidden: &[bf16],
    prompts: &[usize],
) -> Result<BlockRun, BlockError> {
    let block = Glm5NextKdaBlock::new(gpu, geometry, weights)?;
    let mut state = block.new_state()?;
    let width = geometry.hidden as usize;
    let mut outputs = Vec::with_capacity(hidden.len());
    let mut rest = hidden;
    for &tokens in prompts {
        let (prompt, after) = rest.split_at((tokens * width).min(rest.len()));
        outputs.extend(gpu.download::<bf16>(&block.prefill(&mut state, &gpu.upload(prompt)?)?)?);
        rest = after;
    }
    for token in rest.chunks_exact(width) {
        outputs.extend(gpu.download::<bf16>(&block.decode_step(&mut state, &gpu.upload(token)?)?)?);
    }
    Ok(BlockRun { outputs, conv: gpu.download(state.conv())?, recurrent: gpu.download(state.recurrent())? })
}

/// One buffer of a block run on a backend compared with the reference's.
pub struct BlockComparison {
    /// `outputs`, `conv state` or `recurrent state`.
    pub what: &'static str,
    /// The check applied: [`BLOCK_BOUND`] as a relative RMS.
    pub check: Check,
    /// What it measured, or how it failed.
    pub result: Result<Measurement, Mismatch>,
}

/// `tokens` synthetic tokens (seeded by `seed`, as are the weights) through the block at
/// `geometry` on `gpu` and on the CPU reference, the first of them in the `prompts` prefills:
/// the comparison of its outputs, conv state and recurrent state, in that order.
pub fn compare_block(
    gpu: &dyn GpuBackend,
    geometry: KdaGeometry,
    seed: u64,
    prompts: &[usize],
    tokens: usize,
) -> Result<[BlockComparison; 3], BlockError> {
    let weights = HostWeights::synthetic(&geometry, seed);
    let hidden = synthetic_hidden(&geometry, tokens, seed + 1);
    let got = run_block(gpu, geometry, &weights, &hidden, prompts)?;
    let want = run_block(&crate::reference::backend(), geometry, &weights, &hidden, prompts)?;
    let check = Check::RelativeRms(BLOCK_BOUND);
    let compare = |what, got: HostData, want: HostData| BlockComparison {
        what,
        check,
        result: check.compare(&got, &want, want.len()),
    };
    Ok([
        compare("outputs", HostData::Bf16(got.outputs), HostData::Bf16(want.outputs)),
        compare("conv state", HostData::F32(got.conv), HostData::F32(want.conv)),
        compare("recurrent state", HostData::F32(got.recurrent), HostData::F32(want.recurrent)),
    ])
}
