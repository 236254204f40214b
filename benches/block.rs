//! The KDA block on the CPU reference backend: one decode step, chunked prefill of a prompt, and
//! the per-token loop over the same prompt, at the `tiny` and `mid` presets (tokens/s through
//! divan's item counter; the prefill / per-token ratio is the speedup of the chunked form); and
//! B sequences decoded at `mid`, B single-sequence steps against one batched step and one replayed
//! step (the ratio is what batching buys).
//!
//! `cargo bench --bench block`

use divan::counter::ItemsCount;
use kda::block::{Glm5NextKdaBlock, KdaState, KdaStatePool};
use kda::geometry::KdaGeometry;
use kda::weights::{HostWeights, synthetic_hidden};
use kda_runtime::GpuBackendExt;
use kda_runtime::cpu::CpuBackend;

const PROMPT: usize = 128;
const PRESETS: [&str; 2] = ["tiny", "mid"];
/// Sequences per batched step, at `mid`.
const BATCHES: [usize; 2] = [8, 64];

fn main() {
    divan::main();
}

/// The backend, a block on it and a prompt for `preset`.
fn setup(preset: &str) -> (CpuBackend, KdaGeometry, HostWeights, Vec<half::bf16>) {
    let geometry = KdaGeometry::preset(preset).unwrap();
    let weights = HostWeights::synthetic(&geometry, 1);
    (kda::reference::backend(), geometry, weights, synthetic_hidden(&geometry, PROMPT, 2))
}

#[divan::bench(args = PRESETS)]
fn decode_step(bencher: divan::Bencher, preset: &str) {
    let (gpu, geometry, weights, prompt) = setup(preset);
    let block = Glm5NextKdaBlock::new(&gpu, geometry, &weights).unwrap();
    let mut state = block.new_state().unwrap();
    let token = gpu.upload(&prompt[..geometry.hidden as usize]).unwrap();
    bencher.counter(ItemsCount::new(1usize)).bench_local(|| block.decode_step(&mut state, &token).unwrap());
}

#[divan::bench(args = PRESETS)]
fn chunked_prefill(bencher: divan::Bencher, preset: &str) {
    let (gpu, geometry, weights, prompt) = setup(preset);
    let block = Glm5NextKdaBlock::new(&gpu, geometry, &weights).unwrap();
    let prompt = gpu.upload(&prompt).unwrap();
    bencher
        .counter(ItemsCount::new(PROMPT))
        .with_inputs(|| block.new_state().unwrap())
        .bench_local_refs(|state| block.prefill(state, &prompt).unwrap());
}

#[divan::bench(args = PRESETS)]
fn per_token_prefill(bencher: divan::Bencher, preset: &str) {
    let (gpu, geometry, weights, prompt) = setup(preset);
    let block = Glm5NextKdaBlock::new(&gpu, geometry, &weights).unwrap();
    let tokens: Vec<_> =
        prompt.chunks(geometry.hidden as usize).map(|row| gpu.upload(row).unwrap()).collect();
    bencher.counter(ItemsCount::new(PROMPT)).with_inputs(|| block.new_state().unwrap()).bench_local_refs(
        |state| {
            for token in &tokens {
                block.decode_step(state, token).unwrap();
            }
        },
    );
}

/// A block at `mid`, a pool of `b` fresh sequences and one token for each.
fn batch_setup(
    gpu: &CpuBackend,
    b: usize,
) -> (Glm5NextKdaBlock<'_>, KdaStatePool, Vec<u32>, Vec<half::bf16>) {
    let geometry = KdaGeometry::mid();
    let block = Glm5NextKdaBlock::new(gpu, geometry, &HostWeights::synthetic(&geometry, 1)).unwrap();
    let mut pool = block.new_pool(b as u32).unwrap();
    let slots = (0..b).map(|_| block.acquire(&mut pool).unwrap()).collect();
    (block, pool, slots, synthetic_hidden(&geometry, b, 3))
}

#[divan::bench(args = BATCHES)]
fn single_sequence_steps(bencher: divan::Bencher, b: usize) {
    let gpu = kda::reference::backend();
    let (block, _, _, hidden) = batch_setup(&gpu, b);
    let mut states: Vec<KdaState> = (0..b).map(|_| block.new_state().unwrap()).collect();
    let tokens: Vec<_> =
        hidden.chunks(block.geometry().hidden as usize).map(|row| gpu.upload(row).unwrap()).collect();
    bencher.counter(ItemsCount::new(b)).bench_local(|| {
        for (state, token) in states.iter_mut().zip(&tokens) {
            block.decode_step(state, token).unwrap();
        }
    });
}

#[divan::bench(args = BATCHES)]
fn batched_step(bencher: divan::Bencher, b: usize) {
    let gpu = kda::reference::backend();
    let (block, mut pool, slots, hidden) = batch_setup(&gpu, b);
    let hidden = gpu.upload(&hidden).unwrap();
    bencher
        .counter(ItemsCount::new(b))
        .bench_local(|| block.decode_batch(&mut pool, &slots, &hidden).unwrap());
}

#[divan::bench(args = BATCHES)]
fn replayed_step(bencher: divan::Bencher, b: usize) {
    let gpu = kda::reference::backend();
    let (block, mut pool, slots, hidden) = batch_setup(&gpu, b);
    let hidden = gpu.upload(&hidden).unwrap();
    let mut replay = block.decode_replay(b as u32).unwrap();
    replay.prepare(&mut pool, b as u32).unwrap();
    bencher.counter(ItemsCount::new(b)).bench_local(|| {
        replay.decode(&mut pool, &slots, &hidden).unwrap();
    });
}
