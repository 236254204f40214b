//! What the device test suites share: the CUDA one (tests/gpu.rs) and the emulated one
//! (tests/emulated.rs) run the same launch cases and block runs against the CPU reference, each
//! on its own backend, with the tolerances of `docs/kernels.md`.
#![allow(dead_code)] // each suite uses its own part

pub mod decode;

use kda::cases::parity::{BlockComparison, compare_block};
use kda::cases::{HostOutput, KernelCase};
use kda::geometry::{CONV_WIDTH, KdaGeometry};
use kda::kernels::{Glm5NextKdaEntry, Glm5NextKdaKernels, glm5next_kda as args};
use kda::launch;
use kda::rng::SplitMix64;
use kda::weights::bf16_vec;
use kda_runtime::cpu::CpuBackend;
use kda_runtime::{GpuBackend, GpuBackendExt, bf16};

/// The seed of every case's inputs.
pub const SEED: u64 = 2024;

pub fn reference() -> (CpuBackend, Glm5NextKdaKernels) {
    let gpu = kda::reference::backend();
    let kernels = Glm5NextKdaKernels::resolve(&gpu).unwrap();
    (gpu, kernels)
}

pub fn tiny() -> KdaGeometry {
    KdaGeometry::tiny()
}

/// Runs every launch case at `geometry` for each of `tokens` on `gpu` and on the reference,
/// prints each written buffer's figures, and returns a line per buffer outside its tolerance
/// (a launch that fails counts as one).
pub fn parity(
    gpu: &dyn GpuBackend,
    kernels: &Glm5NextKdaKernels,
    name: &str,
    geometry: KdaGeometry,
    tokens: &[u32],
) -> (usize, Vec<String>) {
    let (mut compared, mut failures) = (0, Vec::new());
    for &t in tokens {
        let cases = KernelCase::all(&geometry, t, SEED).unwrap_or_else(|error| panic!("{name}: {error}"));
        for case in cases {
            let what = format!("{name:<13} t = {t:<4} {:<15}", case.field());
            let (count, failed) = compare_case(gpu, kernels, &what, &case);
            compared += count;
            failures.extend(failed);
        }
    }
    (compared, failures)
}

/// One case on `gpu` against the reference: the buffers compared, and a line per failure.
pub fn compare_case(
    gpu: &dyn GpuBackend,
    kernels: &Glm5NextKdaKernels,
    what: &str,
    case: &KernelCase,
) -> (usize, Vec<String>) {
    let (cpu, cpu_kernels) = reference();
    let comparisons = match case.compare((gpu, kernels), (&cpu, &cpu_kernels)) {
        Ok(comparisons) => comparisons,
        Err(error) => {
            println!("{what} FAILED to run: {error}");
            return (0, vec![format!("{what}: {error}")]);
        }
    };
    let mut failures = Vec::new();
    for comparison in &comparisons {
        let what = format!("{what} {:<6}", comparison.output);
        match &comparison.result {
            Ok(measured) => println!("{what} ok    [{}] {measured}", comparison.check),
            Err(mismatch) => {
                println!("{what} FAIL  [{}] {mismatch}", comparison.check);
                failures.push(format!("{what} [{}]: {mismatch}", comparison.check));
            }
        }
    }
    (comparisons.len(), failures)
}

/// Every case of every run on `gpu` within its tolerance of the reference.
pub fn assert_parity(
    gpu: &dyn GpuBackend,
    kernels: &Glm5NextKdaKernels,
    runs: &[(&str, KdaGeometry, &[u32])],
) {
    let (mut compared, mut failures) = (0, Vec::new());
    for &(name, geometry, tokens) in runs {
        println!("{name}: {geometry}");
        let (count, failed) = parity(gpu, kernels, name, geometry, tokens);
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

/// The bits of `output`, after checking it is something: finite and not all zero.
pub fn checked_bits(what: &str, output: &HostOutput) -> Vec<u32> {
    assert!(output.data.is_finite() && !output.data.is_all_zero(), "{what}: not finite, or all zero");
    output.data.bits()
}

pub fn differing(a: &[u32], b: &[u32]) -> usize {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).filter(|(a, b)| a != b).count()
}

/// Each row of a batched GEMV of `m` rows on `gpu` equals the GEMV of that row, bit for bit.
pub fn assert_batchm_rows_are_gemv(
    gpu: &dyn GpuBackend,
    kernels: &Glm5NextKdaKernels,
    name: &str,
    geometry: KdaGeometry,
    m: u32,
) {
    let batchm = KernelCase::new(Glm5NextKdaEntry::gemv_batchm, &geometry, m, SEED).unwrap();
    let what = format!("{name} m = {m}");
    let batched = checked_bits(&what, &batchm.run(gpu, kernels).unwrap()[0]);
    let n = batched.len() / m as usize;
    let mut wrong = 0;
    for i in 0..m {
        let row = batchm.gemv_row(i).unwrap();
        let what = format!("{what}, gemv of row {i}");
        let single = checked_bits(&what, &row.run(gpu, kernels).unwrap()[0]);
        let i = i as usize;
        wrong += differing(&single, &batched[i * n..(i + 1) * n]);
    }
    println!("{what}: batchm vs gemv per row, {wrong} of {} values differ", batched.len());
    assert_eq!(wrong, 0, "{what}: batched GEMV rows are not bit-identical to the GEMV");
}

/// Four decode steps of `recurrent` and `recurrent_regs` on the same inputs, the state carried
/// in place, agree bit for bit after each.
pub fn assert_recurrent_pair_identical(
    gpu: &dyn GpuBackend,
    kernels: &Glm5NextKdaKernels,
    name: &str,
    geometry: KdaGeometry,
) {
    let plain = KernelCase::new(Glm5NextKdaEntry::recurrent, &geometry, 1, SEED).unwrap();
    let regs = KernelCase::new(Glm5NextKdaEntry::recurrent_regs, &geometry, 1, SEED).unwrap();
    assert_eq!(plain.args(), regs.args(), "the two cases must launch on the same inputs");
    let (mut plain_args, mut regs_args) = (plain.prepare(gpu).unwrap(), regs.prepare(gpu).unwrap());
    for step in 1..=4 {
        plain.launch(gpu, kernels, &mut plain_args).unwrap();
        regs.launch(gpu, kernels, &mut regs_args).unwrap();
        let plain_out = plain.outputs(gpu, &plain_args).unwrap();
        let regs_out = regs.outputs(gpu, &regs_args).unwrap();
        for (a, b) in plain_out.iter().zip(&regs_out) {
            let what = format!("{name} step {step} `{}`", a.name);
            let wrong = differing(&checked_bits(&what, a), &checked_bits(&what, b));
            println!("{what}: recurrent_regs vs recurrent, {wrong} of {} values differ", a.data.len());
            assert_eq!(wrong, 0, "{what}: recurrent_regs is not bit-identical to recurrent");
        }
    }
}

/// A prefill conv of `t` tokens against `t` decode conv steps of one sequence on `gpu`, from the
/// same window: the two entries run each token of a head through one function, so q, k and v must
/// be the decode outputs widened, bit for bit, and the two windows must end equal.
pub fn assert_prefill_conv_is_decode_conv(
    gpu: &dyn GpuBackend,
    kernels: &Glm5NextKdaKernels,
    name: &str,
    geometry: KdaGeometry,
    t: u32,
) {
    let (qkv, dim, head_dim, eps) = (geometry.qkv(), geometry.conv_dim(), geometry.head_dim, geometry.l2_eps);
    let (rows, channels) = (t as usize, dim as usize);
    let mut rng = SplitMix64::new(SEED);
    let window = rng.uniform_vec(channels * CONV_WIDTH as usize, 1.0);
    let x = bf16_vec(&rng.uniform_vec(rows * channels, 2.0));
    let weight = gpu.upload(&bf16_vec(&rng.uniform_vec(channels * CONV_WIDTH as usize, 0.5))).unwrap();

    let mut state = gpu.upload(&window).unwrap();
    let inputs = gpu.upload(&x).unwrap();
    let [mut q, mut k, mut v] = [(); 3].map(|_| gpu.zeros::<f32>(rows * qkv as usize).unwrap());
    let prefill = args::conv_prefill {
        state: state.view_mut().into(),
        x: inputs.view().into(),
        weight: weight.view().into(),
        q: q.view_mut().into(),
        k: k.view_mut().into(),
        v: v.view_mut().into(),
        t,
        qkv,
        ldx: dim,
        width: CONV_WIDTH,
        head_dim,
        eps,
    };
    kernels.launch_conv_prefill(gpu, launch::conv_prefill(qkv, head_dim, t), prefill).unwrap();
    let parts: Vec<Vec<f32>> = [&q, &k, &v].iter().map(|part| gpu.download(part).unwrap()).collect();

    let (mut pool, slot) = (gpu.upload(&window).unwrap(), gpu.upload(&[0u32]).unwrap());
    let mut out = gpu.zeros::<bf16>(channels).unwrap();
    for (tau, token) in x.chunks(channels).enumerate() {
        let token = gpu.upload(token).unwrap();
        let step = args::conv_decode {
            pool: pool.view_mut().into(),
            slot: slot.view().into(),
            x: token.view().into(),
            weight: weight.view().into(),
            out: out.view_mut().into(),
            b: 1,
            slots: 1,
            dim,
            ldx: dim,
            width: CONV_WIDTH,
            qk_channels: 2 * qkv,
            head_dim,
            eps,
        };
        kernels.launch_conv_decode(gpu, launch::conv_decode(dim, head_dim, 1), step).unwrap();
        let decoded: Vec<bf16> = gpu.download(&out).unwrap();
        for (index, (part, decoded)) in parts.iter().zip(decoded.chunks(qkv as usize)).enumerate() {
            let want: Vec<u32> = decoded.iter().map(|x| x.to_f32().to_bits()).collect();
            let got: Vec<u32> =
                part[tau * qkv as usize..][..qkv as usize].iter().map(|x| x.to_bits()).collect();
            let wrong = differing(&got, &want);
            assert_eq!(
                wrong,
                0,
                "{name}, token {tau} of {t}: {wrong} {} values differ",
                ["q", "k", "v"][index]
            );
        }
    }
    let [prefilled, decoded]: [Vec<f32>; 2] = [&state, &pool].map(|window| gpu.download(window).unwrap());
    assert!(
        prefilled.iter().zip(&decoded).all(|(a, b)| a.to_bits() == b.to_bits()),
        "{name}: the windows differ"
    );
    println!("{name}, t = {t}: the prefill conv is {t} decode conv steps, bit for bit");
}

/// The block on `gpu` and on the reference, at each geometry, over `tokens` tokens of which the
/// first go through the `prompts` prefills: outputs and final states within the ABI's bound.
pub fn assert_block_agrees(
    gpu: &dyn GpuBackend,
    runs: &[(&str, KdaGeometry)],
    prompts: &[usize],
    tokens: usize,
) {
    let mut failures = Vec::new();
    for &(name, geometry) in runs {
        let comparisons = compare_block(gpu, geometry, SEED, prompts, tokens)
            .unwrap_or_else(|error| panic!("{name}: the block did not run: {error}"));
        let decoded = tokens - prompts.iter().sum::<usize>();
        for BlockComparison { what, check, result } in comparisons {
            let what = format!("{name}: block, prefill {prompts:?} + {decoded} decode, {what}");
            match result {
                Ok(measured) => println!("{what}: ok [{check}] {measured}"),
                Err(mismatch) => {
                    println!("{what}: FAIL [{check}] {mismatch}");
                    failures.push(format!("{what}: {mismatch}"));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "the block on {} disagrees with the reference:\n{}",
        gpu.describe(),
        failures.join("\n")
    );
}
