//! The CUDA kernels against the CPU reference, on a GPU: every kernel of `[glm5next_kda]` on its
//! launch case (`kda::cases`) at small geometries and at GLM-5.3-Flash, within the tolerances of
//! `docs/kernels.md`; the bit-identities the ABI promises on one backend (batched GEMV rows and the
//! GEMV, the two recurrent kernels); and the whole block, prefill then decode.
//!
//! Every test needs a CUDA device, so every test is ignored: `scripts/gpu-check.sh` runs them on a
//! GPU machine (`--include-ignored`). Without a usable device a test panics with the backend's
//! reason ("no GPU: ..."). The measured figures are printed, so the run log records how close
//! each output came to its bound; run with `--nocapture` to see them.
#![cfg(feature = "cuda")]

use kda::block::Glm5NextKdaBlock;
use kda::cases::{Check, HostData, HostOutput, KernelCase};
use kda::geometry::{GateLaw, KdaGeometry};
use kda::kernels::{Glm5NextKdaKernels, KERNEL_IMAGES};
use kda::weights::{HostWeights, synthetic_hidden};
use kda_runtime::cpu::CpuBackend;
use kda_runtime::cuda::CudaBackend;
use kda_runtime::{GpuBackend, GpuBackendExt, bf16};

/// The seed of every case's inputs.
const SEED: u64 = 2024;

/// The ABI's bound for the whole block against the f32 reference.
const BLOCK_BOUND: f64 = 2e-3;

/// The CUDA backend on device 0 with its resolved table, or a panic that says why there is none.
fn cuda() -> (CudaBackend, Glm5NextKdaKernels) {
    if let Some(why) = KERNEL_IMAGES.missing {
        panic!("no CUDA kernel images in this test binary: {why}");
    }
    let gpu = CudaBackend::new(0, &[&KERNEL_IMAGES]).unwrap_or_else(|error| panic!("no GPU: {error}"));
    let kernels = Glm5NextKdaKernels::resolve(&gpu).unwrap_or_else(|error| panic!("{error}"));
    // Every module is built for the target, so the optional entries must resolve too.
    assert!(
        kernels.gemv_batchm.is_some() && kernels.recurrent_smem.is_some(),
        "an optional entry is missing on {}",
        gpu.describe()
    );
    println!("on {}", gpu.describe());
    (gpu, kernels)
}

fn reference() -> (CpuBackend, Glm5NextKdaKernels) {
    let gpu = kda::reference::backend();
    let kernels = Glm5NextKdaKernels::resolve(&gpu).unwrap();
    (gpu, kernels)
}

fn tiny() -> KdaGeometry {
    KdaGeometry::tiny()
}

/// Head dim 64, chunks of 64.
fn d64() -> KdaGeometry {
    KdaGeometry { hidden: 96, heads: 2, head_dim: 64, chunk: 64, ..tiny() }
}

/// Head dim 128, chunks of 64 (GLM-5.3-Flash's heads), two of them.
fn d128() -> KdaGeometry {
    KdaGeometry { hidden: 256, heads: 2, head_dim: 128, chunk: 64, ..tiny() }
}

/// Runs every launch case at `geometry` for each of `tokens` on `gpu` and on the reference,
/// prints each written buffer's figures, and returns a line per buffer outside its tolerance
/// (a launch that fails counts as one).
fn parity(
    gpu: &dyn GpuBackend,
    kernels: &Glm5NextKdaKernels,
    name: &str,
    geometry: KdaGeometry,
    tokens: &[u32],
) -> (usize, Vec<String>) {
    let (cpu, cpu_kernels) = reference();
    let (mut compared, mut failures) = (0, Vec::new());
    for &t in tokens {
        let cases = KernelCase::all(&geometry, t, SEED).unwrap_or_else(|error| panic!("{name}: {error}"));
        for case in cases {
            let what = format!("{name:<13} t = {t:<4} {:<15}", case.field());
            let want =
                case.run(&cpu, &cpu_kernels).unwrap_or_else(|error| panic!("{what} on the CPU: {error}"));
            let got = match case.run(gpu, kernels) {
                Ok(got) => got,
                Err(error) => {
                    println!("{what} FAILED to run: {error}");
                    failures.push(format!("{what}: {error}"));
                    continue;
                }
            };
            assert_eq!(got.len(), want.len(), "{what}");
            for (got, want) in got.iter().zip(&want) {
                compared += 1;
                let what = format!("{what} {:<6}", got.name);
                match got.compare(want) {
                    Ok(measured) => println!("{what} ok    [{}] {measured}", got.check),
                    Err(mismatch) => {
                        println!("{what} FAIL  [{}] {mismatch}", got.check);
                        failures.push(format!("{what} [{}]: {mismatch}", got.check));
                    }
                }
            }
        }
    }
    (compared, failures)
}

fn assert_parity(runs: &[(&str, KdaGeometry, &[u32])]) {
    let (gpu, kernels) = cuda();
    let (mut compared, mut failures) = (0, Vec::new());
    for &(name, geometry, tokens) in runs {
        println!("{name}: {geometry}");
        let (count, failed) = parity(&gpu, &kernels, name, geometry, tokens);
        compared += count;
        failures.extend(failed);
    }
    assert!(compared > 0, "nothing compared");
    assert!(
        failures.is_empty(),
        "{} of {compared} outputs outside their tolerance:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
#[ignore = "needs a GPU: run by scripts/gpu-check.sh"]
fn every_kernel_matches_the_reference_at_small_geometries() {
    let softplus = KdaGeometry { gate_law: GateLaw::Softplus, ..tiny() };
    // t not a multiple of C (7, 45, 77, 100), exactly one chunk (32), a single token (1).
    assert_parity(&[
        ("tiny", tiny(), &[1, 7, 32, 45, 100]),
        ("tiny-softplus", softplus, &[45]),
        ("d64", d64(), &[1, 77]),
        ("d128", d128(), &[1, 70]),
    ]);
}

#[test]
#[ignore = "needs a GPU: run by scripts/gpu-check.sh"]
fn every_kernel_matches_the_reference_at_glm5_flash() {
    // Two whole chunks, a partial second chunk, and one token (decode kernels take one anyway).
    assert_parity(&[("glm5-flash", KdaGeometry::glm5_flash(), &[128, 100, 1])]);
}

/// The bits of `output`, after checking it is something: finite and not all zero.
fn checked_bits(what: &str, output: &HostOutput) -> Vec<u32> {
    assert!(output.data.is_finite() && !output.data.is_all_zero(), "{what}: not finite, or all zero");
    output.data.bits()
}

fn differing(a: &[u32], b: &[u32]) -> usize {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).filter(|(a, b)| a != b).count()
}

#[test]
#[ignore = "needs a GPU: run by scripts/gpu-check.sh"]
fn gemv_batchm_rows_are_bit_identical_to_gemv() {
    let (gpu, kernels) = cuda();
    for (name, geometry) in [("tiny", tiny()), ("d128", d128()), ("glm5-flash", KdaGeometry::glm5_flash())] {
        for m in [2, 5, 16] {
            let batchm = KernelCase::new("gemv_batchm", &geometry, m, SEED).unwrap();
            let what = format!("{name} m = {m}");
            let batched = checked_bits(&what, &batchm.run(&gpu, &kernels).unwrap()[0]);
            let n = batched.len() / m as usize;
            let mut wrong = 0;
            for i in 0..m {
                let row = batchm.gemv_row(i).unwrap();
                let what = format!("{what}, gemv of row {i}");
                let single = checked_bits(&what, &row.run(&gpu, &kernels).unwrap()[0]);
                let i = i as usize;
                wrong += differing(&single, &batched[i * n..(i + 1) * n]);
            }
            println!("{what}: batchm vs gemv per row, {wrong} of {} values differ", batched.len());
            assert_eq!(wrong, 0, "{what}: batched GEMV rows are not bit-identical to the GEMV");
        }
    }
}

#[test]
#[ignore = "needs a GPU: run by scripts/gpu-check.sh"]
fn recurrent_smem_is_bit_identical_to_recurrent() {
    let (gpu, kernels) = cuda();
    for (name, geometry) in [("tiny", tiny()), ("d64", d64()), ("glm5-flash", KdaGeometry::glm5_flash())] {
        let plain = KernelCase::new("recurrent", &geometry, 1, SEED).unwrap();
        let smem = KernelCase::new("recurrent_smem", &geometry, 1, SEED).unwrap();
        assert_eq!(plain.args(), smem.args(), "the two cases must launch on the same inputs");
        let (mut plain_args, mut smem_args) = (plain.prepare(&gpu).unwrap(), smem.prepare(&gpu).unwrap());
        // Four steps on the same inputs, the state carried in place from step to step.
        for step in 1..=4 {
            plain.launch(&gpu, &kernels, &mut plain_args).unwrap();
            smem.launch(&gpu, &kernels, &mut smem_args).unwrap();
            let plain_out = plain.outputs(&gpu, &plain_args).unwrap();
            let smem_out = smem.outputs(&gpu, &smem_args).unwrap();
            for (a, b) in plain_out.iter().zip(&smem_out) {
                let what = format!("{name} step {step} `{}`", a.name);
                let wrong = differing(&checked_bits(&what, a), &checked_bits(&what, b));
                println!("{what}: recurrent_smem vs recurrent, {wrong} of {} values differ", a.data.len());
                assert_eq!(wrong, 0, "{what}: recurrent_smem is not bit-identical to recurrent");
            }
        }
    }
}

/// What a run of the block leaves: its outputs and the state after them.
struct BlockRun {
    outputs: Vec<bf16>,
    conv: Vec<f32>,
    recurrent: Vec<f32>,
}

/// `hidden` through the block on `gpu`: a chunked prefill of 100 tokens, a second one of 5 on
/// the carried state (5 rows: the batched GEMV), then one decode step per remaining token.
fn run_block(
    gpu: &dyn GpuBackend,
    geometry: KdaGeometry,
    weights: &HostWeights,
    hidden: &[bf16],
) -> BlockRun {
    let block = Glm5NextKdaBlock::new(gpu, geometry, weights).unwrap_or_else(|error| panic!("{error}"));
    let mut state = block.new_state().unwrap();
    let width = geometry.hidden as usize;
    let mut outputs = Vec::with_capacity(hidden.len());
    let (first, second) = hidden.split_at(100 * width);
    let (second, tokens) = second.split_at(5 * width);
    for prompt in [first, second] {
        let out = block.prefill(&mut state, &gpu.upload(prompt).unwrap()).unwrap();
        outputs.extend(gpu.download::<bf16>(&out).unwrap());
    }
    for token in tokens.chunks_exact(width) {
        let out = block.decode_step(&mut state, &gpu.upload(token).unwrap()).unwrap();
        outputs.extend(gpu.download::<bf16>(&out).unwrap());
    }
    BlockRun {
        outputs,
        conv: gpu.download(state.conv()).unwrap(),
        recurrent: gpu.download(state.recurrent()).unwrap(),
    }
}

#[test]
#[ignore = "needs a GPU: run by scripts/gpu-check.sh"]
fn the_block_agrees_with_the_reference() {
    let (gpu, _) = cuda();
    let cpu = kda::reference::backend();
    let mut failures = Vec::new();
    for (name, geometry) in [("tiny", tiny()), ("glm5-flash", KdaGeometry::glm5_flash())] {
        let weights = HostWeights::synthetic(&geometry, SEED);
        let hidden = synthetic_hidden(&geometry, 113, SEED + 1);
        let got = run_block(&gpu, geometry, &weights, &hidden);
        let want = run_block(&cpu, geometry, &weights, &hidden);
        let pairs = [
            ("outputs", HostData::Bf16(got.outputs), HostData::Bf16(want.outputs)),
            ("conv state", HostData::F32(got.conv), HostData::F32(want.conv)),
            ("recurrent state", HostData::F32(got.recurrent), HostData::F32(want.recurrent)),
        ];
        for (what, got, want) in pairs {
            let what = format!("{name}: block, 100 + 5 prefill + 8 decode, {what}");
            let check = Check::RelativeRms(BLOCK_BOUND);
            match check.compare(&got, &want, want.len()) {
                Ok(measured) => println!("{what}: ok [{check}] {measured}"),
                Err(mismatch) => {
                    println!("{what}: FAIL [{check}] {mismatch}");
                    failures.push(format!("{what}: {mismatch}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "the block on CUDA disagrees with the reference:\n{}", failures.join("\n"));
}
