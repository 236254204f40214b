//! The KDA block on the CPU reference backend: one decode step, chunked prefill of a prompt, and
//! the per-token loop over the same prompt, at the `tiny` and `mid` presets (tokens/s through
//! divan's item counter; the prefill / per-token ratio is the speedup of the chunked form).
//!
//! `cargo bench --bench block`

use divan::counter::ItemsCount;
use kda::block::Glm5NextKdaBlock;
use kda::geometry::KdaGeometry;
use kda::weights::{HostWeights, synthetic_hidden};
use kda_runtime::GpuBackendExt;
use kda_runtime::cpu::CpuBackend;

const PROMPT: usize = 128;
const PRESETS: [&str; 2] = ["tiny", "mid"];

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
