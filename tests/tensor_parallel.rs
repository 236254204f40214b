//! The KDA block split across ranks by heads (`kda::tensor_parallel`) on the CPU reference: N
//! shard blocks run separately, their outputs summed on the host, against the unsharded block, at
//! 64 heads of 32 for N = 1, 2, 4 and 8; and the splits that do not exist refused.
//!
//! The figures are printed (run with `--nocapture`).

use half::bf16;
use kda::block::{Glm5NextKdaBlock, KdaState};
use kda::compare::Agreement;
use kda::geometry::{CONV_WIDTH, GeometryError, KdaGeometry};
use kda::tensor_parallel::{HeadShard, ShardError};
use kda::weights::{HostWeights, WeightsError, synthetic_hidden};
use kda_runtime::{GpuBackend, GpuBackendExt};

/// The block's bound (`docs/kernels.md`, "Tolerances"): relative RMS of its bf16 outputs.
const BLOCK_BOUND: f64 = 1e-2;

/// Tokens of the prefill; a decode step follows for each of [`DECODE_STEPS`].
const PROMPT: usize = 6;
const DECODE_STEPS: usize = 2;

/// 64 heads of 32 over the smallest width of the presets (`tiny`'s 64, chunk 32).
fn layer() -> KdaGeometry {
    KdaGeometry { heads: 64, ..KdaGeometry::tiny() }
}

/// What one block gives for the prompt and the decode steps: the outputs of each call (widened to
/// f32) and the state left at the end.
struct Run {
    /// `[PROMPT, hidden]`, then `[hidden]` for each decode step.
    outputs: Vec<Vec<f32>>,
    /// f32 `[3·qkv, W]`.
    conv: Vec<f32>,
    /// f32 `[H, D, D]`.
    recurrent: Vec<f32>,
}

fn run(gpu: &dyn GpuBackend, geometry: KdaGeometry, weights: &HostWeights, tokens: &[bf16]) -> Run {
    let block = Glm5NextKdaBlock::new(gpu, geometry, weights).unwrap();
    let mut state: KdaState = block.new_state().unwrap();
    let width = geometry.hidden as usize;
    let (prompt, steps) = tokens.split_at(PROMPT * width);
    let widen = |out: kda_runtime::DeviceBuffer| -> Vec<f32> {
        gpu.download::<bf16>(&out).unwrap().iter().map(|x| x.to_f32()).collect()
    };
    let mut outputs = vec![widen(block.prefill(&mut state, &gpu.upload(prompt).unwrap()).unwrap())];
    for token in steps.chunks_exact(width) {
        outputs.push(widen(block.decode_step(&mut state, &gpu.upload(token).unwrap()).unwrap()));
    }
    Run {
        outputs,
        conv: gpu.download(state.conv()).unwrap(),
        recurrent: gpu.download(state.recurrent()).unwrap(),
    }
}

fn widen(values: &[f32]) -> Vec<f64> {
    values.iter().map(|&x| f64::from(x)).collect()
}

/// Rank `rank` of `ranks` holds heads `rank·H/ranks ..`: its recurrent state is that run of
/// `[D, D]` matrices of the whole state, and its conv window those heads' channels of each of
/// q, k and v, in that order.
fn expected_state(whole: &Run, layer: &KdaGeometry, rank: usize, ranks: usize) -> (Vec<f32>, Vec<f32>) {
    let (d, qkv, width) = (layer.head_dim as usize, layer.qkv() as usize, CONV_WIDTH as usize);
    let heads = layer.heads as usize / ranks;
    let per_rank = heads * d * d;
    let recurrent = whole.recurrent[rank * per_rank..(rank + 1) * per_rank].to_vec();
    let channels = heads * d;
    let conv = (0..3)
        .flat_map(|part| {
            let first = part * qkv + rank * channels;
            &whole.conv[first * width..(first + channels) * width]
        })
        .copied()
        .collect();
    (conv, recurrent)
}

#[test]
fn shards_run_apart_and_summed_on_the_host_equal_the_whole_block() {
    let layer = layer();
    let weights = HostWeights::synthetic(&layer, 71);
    let tokens = synthetic_hidden(&layer, PROMPT + DECODE_STEPS, 72);
    let gpu = kda::reference::backend();
    let whole = run(&gpu, layer, &weights, &tokens);
    for ranks in [1u32, 2, 4, 8] {
        let shards = HeadShard::all(&layer, ranks).unwrap();
        let runs: Vec<Run> = shards
            .iter()
            .map(|shard| run(&gpu, shard.geometry(), &shard.weights(&weights).unwrap(), &tokens))
            .collect();
        for (call, expected) in whole.outputs.iter().enumerate() {
            // The all-reduce: each output the f32 sum of the ranks' partial outputs.
            let mut summed = vec![0.0f32; expected.len()];
            for partial in &runs {
                for (sum, x) in summed.iter_mut().zip(&partial.outputs[call]) {
                    *sum += x;
                }
            }
            let what = format!("{ranks} ranks, call {call}");
            let agreement = Agreement::of(&widen(&summed), &widen(expected))
                .unwrap_or_else(|| panic!("{what}: nothing meaningful to compare"));
            eprintln!(
                "{what}: relative RMS {:.3e}, guarded max relative {:.3e} over {} values",
                agreement.relative_rms, agreement.max_relative, agreement.elements
            );
            assert!(agreement.relative_rms <= BLOCK_BOUND, "{what}: {agreement:?}");
            if ranks == 1 {
                // One rank is the whole layer: the same launches on the same weights.
                assert_eq!(&summed, expected, "{what}: one rank differs from the whole block");
            }
        }
        // Nothing mixes heads before o_proj, and on the reference each head's sums do not depend
        // on the others': each rank's state is its heads' slice of the whole, bit for bit.
        for (rank, partial) in runs.iter().enumerate() {
            let (conv, recurrent) = expected_state(&whole, &layer, rank, ranks as usize);
            assert_eq!(partial.conv, conv, "rank {rank} of {ranks}: conv window");
            assert_eq!(partial.recurrent, recurrent, "rank {rank} of {ranks}: recurrent state");
        }
    }
}

#[test]
fn a_split_that_does_not_exist_is_an_err() {
    let layer = layer();
    let cases = [
        (0, 0, ShardError::NoRanks),
        (8, 8, ShardError::Rank { rank: 8, ranks: 8 }),
        (u32::MAX, 2, ShardError::Rank { rank: u32::MAX, ranks: 2 }),
        (0, 3, ShardError::Heads { heads: 64, ranks: 3 }),
        (0, 128, ShardError::Heads { heads: 64, ranks: 128 }),
        (0, u32::MAX, ShardError::Heads { heads: 64, ranks: u32::MAX }),
    ];
    for (rank, ranks, expected) in cases {
        assert_eq!(HeadShard::new(&layer, rank, ranks), Err(expected), "rank {rank} of {ranks}");
    }
    assert_eq!(HeadShard::all(&layer, 0), Err(ShardError::NoRanks));
    let unrunnable = KdaGeometry { chunk: 16, ..layer };
    assert_eq!(HeadShard::new(&unrunnable, 0, 2), Err(ShardError::Geometry(GeometryError::Chunk(16))));
    // Weights of another layer are refused, naming the first weight whose shape is wrong.
    let other = HostWeights::synthetic(&KdaGeometry::tiny(), 3);
    let shard = HeadShard::new(&layer, 1, 2).unwrap();
    let error = shard.weights(&other).unwrap_err();
    assert!(matches!(error, ShardError::Weights(WeightsError { name: "q_proj", .. })), "{error:?}");
    assert!(error.to_string().contains("q_proj"), "{error}");
}
