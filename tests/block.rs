//! `Glm5NextKdaBlock` on the CPU reference backend, measured against an independent f64 model of
//! the ABI's math (`support/f64_kda.rs`): decode and chunked prefill against the exact block,
//! prefill + decode against decode alone, the chunked form and its mutants, the fallback kernels,
//! and the errors the block returns.
//!
//! Tolerances are those of `docs/kernels.md` ("Tolerances"); the measured numbers are printed (run with
//! `--nocapture`) so that a drift toward a bound shows before it fails.

use half::bf16;
use kda::block::{BlockError, Glm5NextKdaBlock, KdaState};
use kda::cases::parity::head_dim_64;
use kda::compare::Agreement;
use kda::geometry::{CONV_WIDTH, GateLaw, GeometryError, KdaGeometry};
use kda::rng::SplitMix64;
use kda::weights::{HostWeights, WeightsError, synthetic_hidden};
use kda_runtime::cpu::CpuBackend;
use kda_runtime::record::RecordingBackend;
use kda_runtime::{BackendId, BufferStorage, DType, DeviceBuffer, GpuBackend, GpuBackendExt};

#[path = "support/f64_kda.rs"]
mod f64_kda;

use f64_kda::{Law, Mutant, Sequence};

/// The ABI's whole-block bound against f64 without intermediate rounding (and against per-token
/// decode for chunked prefill on any backend).
const BLOCK_VS_F64: f64 = 1e-2;

/// Chunked prefill against per-token decode on the reference, which rounds q, k and v the same way
/// on both paths and whose dense products do not depend on the kernel: the two differ only where
/// the chunked form reassociates f32 sums, measured at most 4.7e-7 on the state and 2.6e-5 on the
/// bf16 outputs (a few roundings flipped). Rounding q and k twice in prefill, once in decode, as
/// an earlier prefill did, gave about 5e-3 on the outputs.
const PREFILL_VS_DECODE: f64 = 1e-4;

/// The conv window holds the bf16 projections widened to f32; the f64 block holds them unrounded.
/// Round-to-nearest bf16 is within 2⁻⁹ relative per element, so within 2⁻⁹ in relative RMS; the
/// f32 accumulation of the projection adds next to nothing.
const CONV_STATE_VS_F64: f64 = 1.0 / 512.0 * 1.05;

fn tiny() -> KdaGeometry {
    KdaGeometry::tiny()
}

fn tiny_softplus() -> KdaGeometry {
    KdaGeometry { gate_law: GateLaw::Softplus, ..KdaGeometry::tiny() }
}

fn widen(values: &[bf16]) -> Vec<f64> {
    values.iter().map(|x| f64::from(x.to_f32())).collect()
}

fn widen32(values: &[f32]) -> Vec<f64> {
    values.iter().map(|&x| f64::from(x)).collect()
}

/// The f64 block with the same (bf16-valued) weights as `weights`.
fn f64_block(geometry: &KdaGeometry, weights: &HostWeights) -> f64_kda::Block {
    let law = match geometry.gate_law {
        GateLaw::Bounded { lower_bound } => Law::Bounded(f64::from(lower_bound)),
        GateLaw::Softplus => Law::Softplus,
    };
    f64_kda::Block {
        shape: f64_kda::Shape {
            hidden: geometry.hidden as usize,
            h: geometry.heads as usize,
            d: geometry.head_dim as usize,
            width: CONV_WIDTH as usize,
            law,
            l2_eps: 1e-6,
            norm_eps: 1e-5,
        },
        weights: f64_kda::Weights {
            q_proj: widen(&weights.q_proj),
            k_proj: widen(&weights.k_proj),
            v_proj: widen(&weights.v_proj),
            conv: widen(&weights.conv),
            f_a: widen(&weights.f_a),
            f_b: widen(&weights.f_b),
            dt_bias: widen32(&weights.dt_bias),
            a_log: widen32(&weights.a_log),
            b_proj: widen(&weights.b_proj),
            g_a: widen(&weights.g_a),
            g_b: widen(&weights.g_b),
            o_norm: widen(&weights.o_norm),
            o_proj: widen(&weights.o_proj),
        },
    }
}

/// The state of a sequence on the host: conv window and recurrent state.
#[derive(Clone, Debug, PartialEq)]
struct HostState {
    conv: Vec<f32>,
    recurrent: Vec<f32>,
}

fn host_state(gpu: &dyn GpuBackend, state: &KdaState) -> HostState {
    HostState {
        conv: gpu.download(state.conv()).unwrap(),
        recurrent: gpu.download(state.recurrent()).unwrap(),
    }
}

/// `hidden [t, hidden]` one decode step at a time: the outputs `[t, hidden]`.
fn decode(
    block: &Glm5NextKdaBlock<'_>,
    gpu: &dyn GpuBackend,
    state: &mut KdaState,
    hidden: &[bf16],
) -> Vec<bf16> {
    let width = block.geometry().hidden as usize;
    let mut outputs = Vec::with_capacity(hidden.len());
    for token in hidden.chunks_exact(width) {
        let out = block.decode_step(state, &gpu.upload(token).unwrap()).unwrap();
        outputs.extend(gpu.download::<bf16>(&out).unwrap());
    }
    outputs
}

/// `hidden [t, hidden]` in one chunked prefill: the outputs `[t, hidden]`.
fn prefill(
    block: &Glm5NextKdaBlock<'_>,
    gpu: &dyn GpuBackend,
    state: &mut KdaState,
    hidden: &[bf16],
) -> Vec<bf16> {
    let out = block.prefill(state, &gpu.upload(hidden).unwrap()).unwrap();
    gpu.download(&out).unwrap()
}

/// The agreement of `result` with `reference`, refusing a comparison that means nothing (empty,
/// mismatched, all-zero or non-finite reference, non-finite result), and printing it.
fn agreement(what: &str, result: &[f64], reference: &[f64]) -> Agreement {
    let agreement = Agreement::of(result, reference).unwrap_or_else(|| {
        panic!("{what}: nothing meaningful to compare ({} vs {} values)", result.len(), reference.len())
    });
    eprintln!(
        "{what}: relative RMS {:.3e}, guarded max relative {:.3e} over {} values",
        agreement.relative_rms, agreement.max_relative, agreement.elements
    );
    agreement
}

fn assert_within(what: &str, result: &[f64], reference: &[f64], bound: f64) -> f64 {
    let measured = agreement(what, result, reference).relative_rms;
    assert!(measured <= bound, "{what}: relative RMS {measured:.3e} exceeds {bound:.1e}");
    measured
}

/// `state [h, d, d]` with each head's matrix transposed: what a V-major layout would hold.
fn transposed(state: &[f64], d: usize) -> Vec<f64> {
    let mut out = state.to_vec();
    for (head, src) in out.chunks_exact_mut(d * d).zip(state.chunks_exact(d * d)) {
        for k in 0..d {
            for v in 0..d {
                head[v * d + k] = src[k * d + v];
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The block against the f64 block.

/// Decode (per token) and prefill (chunked, t not a multiple of C) of 40 tokens against the exact
/// f64 block: outputs and recurrent state within the ABI's 1e-2, conv window within bf16 rounding.
fn check_against_f64(geometry: KdaGeometry, seed: u64) {
    const T: usize = 40;
    let name = format!("{geometry}");
    let gpu = kda::reference::backend();
    let weights = HostWeights::synthetic(&geometry, seed);
    let block = Glm5NextKdaBlock::new(&gpu, geometry, &weights).unwrap();
    let hidden = synthetic_hidden(&geometry, T, seed + 1);

    let exact = f64_block(&geometry, &weights);
    let mut exact_state = exact.new_state();
    let exact_out = exact.run(&mut exact_state, &widen(&hidden));
    let d = geometry.head_dim as usize;
    // The bound discriminates: a block that forgets to decay is far off.
    let mut no_decay = exact.clone();
    no_decay.shape.law = Law::NoDecay;
    let no_decay_out = no_decay.run(&mut no_decay.new_state(), &widen(&hidden));
    let missing_decay =
        agreement(&format!("{name}: f64 block without decay vs f64"), &no_decay_out, &exact_out);
    assert!(missing_decay.relative_rms > 10.0 * BLOCK_VS_F64);

    for path in ["decode", "prefill"] {
        let mut state = block.new_state().unwrap();
        let out = match path {
            "decode" => decode(&block, &gpu, &mut state, &hidden),
            _ => prefill(&block, &gpu, &mut state, &hidden),
        };
        assert_eq!(out.len(), T * geometry.hidden as usize);
        let host = host_state(&gpu, &state);
        assert_within(&format!("{name}: {path} outputs vs f64"), &widen(&out), &exact_out, BLOCK_VS_F64);
        let recurrent = widen32(&host.recurrent);
        assert_within(
            &format!("{name}: {path} recurrent state vs f64"),
            &recurrent,
            &exact_state.recurrent,
            BLOCK_VS_F64,
        );
        // The bound discriminates: the same state read V-major is far off.
        let wrong_layout = agreement(
            &format!("{name}: {path} recurrent state, transposed, vs f64"),
            &transposed(&recurrent, d),
            &exact_state.recurrent,
        );
        assert!(wrong_layout.relative_rms > 10.0 * BLOCK_VS_F64);
        assert_within(
            &format!("{name}: {path} conv state vs f64"),
            &widen32(&host.conv),
            &exact_state.conv,
            CONV_STATE_VS_F64,
        );
    }
}

#[test]
fn decode_and_prefill_match_the_f64_block_bounded_gate() {
    check_against_f64(tiny(), 11);
}

#[test]
fn decode_and_prefill_match_the_f64_block_softplus_gate() {
    check_against_f64(tiny_softplus(), 12);
}

#[test]
fn decode_and_prefill_match_the_f64_block_head_dim_64_chunk_64() {
    check_against_f64(head_dim_64(), 13);
}

// ---------------------------------------------------------------------------------------------
// Chunked prefill + decode against decode alone.

/// `warm` decode steps, a prefill of `t`, `n` decode steps; against `warm + t + n` decode steps.
/// Outputs and recurrent state within [`PREFILL_VS_DECODE`]; the conv window bit-exact after the
/// prefill and at the end.
fn check_prefill_then_decode(geometry: KdaGeometry, warm: usize, t: usize, n: usize) {
    let name = format!("{geometry}, warm {warm}, t {t}, n {n}");
    let gpu = kda::reference::backend();
    let weights = HostWeights::synthetic(&geometry, 21);
    let block = Glm5NextKdaBlock::new(&gpu, geometry, &weights).unwrap();
    let width = geometry.hidden as usize;
    let hidden = synthetic_hidden(&geometry, warm + t + n, 22 + t as u64);
    let (head, rest) = hidden.split_at(warm * width);
    let (middle, tail) = rest.split_at(t * width);

    // Reference: decode only, with the state after warm + t kept.
    let mut state = block.new_state().unwrap();
    let mut decoded = decode(&block, &gpu, &mut state, head);
    decoded.extend(decode(&block, &gpu, &mut state, middle));
    let decoded_mid = host_state(&gpu, &state);
    decoded.extend(decode(&block, &gpu, &mut state, tail));
    let decoded_end = host_state(&gpu, &state);

    // Warm decode, chunked prefill, decode.
    let mut state = block.new_state().unwrap();
    let mut chunked = decode(&block, &gpu, &mut state, head);
    chunked.extend(prefill(&block, &gpu, &mut state, middle));
    let chunked_mid = host_state(&gpu, &state);
    chunked.extend(decode(&block, &gpu, &mut state, tail));
    let chunked_end = host_state(&gpu, &state);

    assert_eq!(chunked.len(), decoded.len());
    assert_eq!(&chunked[..warm * width], &decoded[..warm * width], "{name}: the warm-up decodes differ");
    let prefilled = warm * width..(warm + t) * width;
    assert_within(
        &format!("{name}: prefill outputs vs decode"),
        &widen(&chunked[prefilled.clone()]),
        &widen(&decoded[prefilled]),
        PREFILL_VS_DECODE,
    );
    if n > 0 {
        let after = (warm + t) * width..;
        assert_within(
            &format!("{name}: decode outputs after prefill vs decode"),
            &widen(&chunked[after.clone()]),
            &widen(&decoded[after]),
            PREFILL_VS_DECODE,
        );
    }
    let d = geometry.head_dim as usize;
    for (when, ours, theirs) in
        [("after prefill", &chunked_mid, &decoded_mid), ("at the end", &chunked_end, &decoded_end)]
    {
        let reference = widen32(&theirs.recurrent);
        assert_within(
            &format!("{name}: recurrent state {when} vs decode"),
            &widen32(&ours.recurrent),
            &reference,
            PREFILL_VS_DECODE,
        );
        let wrong_layout = agreement(
            &format!("{name}: recurrent state {when}, transposed, vs decode"),
            &transposed(&widen32(&ours.recurrent), d),
            &reference,
        );
        assert!(wrong_layout.relative_rms > 10.0 * BLOCK_VS_F64);
        assert!(
            ours.conv.iter().map(|x| x.to_bits()).eq(theirs.conv.iter().map(|x| x.to_bits())),
            "{name}: conv state {when} differs from decode's"
        );
    }
    // The conv window really moved: it holds the last W inputs of the sequence, not zeros.
    assert!(chunked_end.conv.iter().any(|&x| x != 0.0));
}

#[test]
fn prefill_then_decode_matches_decode_t45_not_a_multiple_of_the_chunk() {
    check_prefill_then_decode(tiny(), 0, 45, 8);
}

#[test]
fn prefill_then_decode_matches_decode_t64_whole_chunks() {
    check_prefill_then_decode(tiny(), 0, 64, 8);
}

#[test]
fn prefill_then_decode_matches_decode_t1() {
    check_prefill_then_decode(tiny(), 0, 1, 8);
}

#[test]
fn prefill_from_a_carried_state_matches_decode() {
    // Two tokens in: the prefill's conv keeps the old window's tail (t < W) and carries S in.
    check_prefill_then_decode(tiny(), 2, 3, 4);
    check_prefill_then_decode(tiny(), 5, 33, 4);
}

#[test]
fn prefill_then_decode_matches_decode_softplus_and_head_dim_64() {
    check_prefill_then_decode(tiny_softplus(), 1, 45, 4);
    check_prefill_then_decode(head_dim_64(), 0, 100, 4);
}

// ---------------------------------------------------------------------------------------------
// The f64 chunked form against the f64 recurrence, and its mutants.

/// How the log-decays of a random sequence are drawn.
#[derive(Clone, Copy, Debug)]
enum Gates {
    /// A gate law on `g_raw` uniform in ±3, per-channel `dt_bias` in ±1, per-head `a_log` in ±0.5.
    Law(Law),
    /// Mild decays uniform in `[-0.3, -0.005)`.
    Mild,
}

/// A random sequence of `t` tokens: q and k L2-normalised per head, v in ±1, β = σ(±2).
fn random_sequence(t: usize, h: usize, d: usize, gates: Gates, seed: u64) -> Sequence {
    let mut rng = SplitMix64::new(seed);
    let mut uniform = |len: usize, bound: f32| -> Vec<f64> { widen32(&rng.uniform_vec(len, bound)) };
    let mut q = uniform(t * h * d, 1.0);
    let mut k = uniform(t * h * d, 1.0);
    f64_kda::l2_heads(&mut q, d, 1e-6);
    f64_kda::l2_heads(&mut k, d, 1e-6);
    let v = uniform(t * h * d, 1.0);
    let beta = uniform(t * h, 2.0).into_iter().map(f64_kda::sigmoid).collect();
    let gate = match gates {
        Gates::Law(law) => {
            let g_raw = uniform(t * h * d, 3.0);
            let dt_bias = uniform(h * d, 1.0);
            let a_log = uniform(h, 0.5);
            (0..t * h * d)
                .map(|i| f64_kda::gate(law, g_raw[i], dt_bias[i % (h * d)], a_log[(i / d) % h]))
                .collect()
        }
        Gates::Mild => uniform(t * h * d, 0.1475).into_iter().map(|x| x - 0.1525).collect(),
    };
    Sequence { t, h, d, q, k, v, gate, beta }
}

fn random_state(h: usize, d: usize, seed: u64) -> Vec<f64> {
    widen32(&SplitMix64::new(seed).uniform_vec(h * d * d, 0.5))
}

#[test]
fn the_f64_chunked_form_is_the_f64_recurrence() {
    const H: usize = 2;
    const D: usize = 32;
    let cases = [Law::Bounded(-5.0), Law::Softplus]
        .into_iter()
        .flat_map(|law| [1, 31, 32, 45, 100].into_iter().flat_map(move |t| [32, 64].map(|c| (law, t, c))));
    for (case, (law, t, c)) in cases.enumerate() {
        let seq = random_sequence(t, H, D, Gates::Law(law), 100 + case as u64);
        assert!(
            seq.gate.iter().all(|&g| g <= 0.0) && seq.gate.iter().any(|&g| g < -1.0),
            "the gates must decay"
        );
        let s0 = random_state(H, D, 200 + case as u64);
        let mut s_rec = s0.clone();
        let want = f64_kda::recurrent(&seq, &mut s_rec);
        let mut s_chunk = s0.clone();
        let got = f64_kda::chunked(&seq, &mut s_chunk, c, Mutant::None);
        let what = format!("{law:?}, t {t}, C {c}");
        assert_within(&format!("{what}: chunked outputs vs recurrence"), &got, &want, 1e-10);
        assert_within(&format!("{what}: chunked state vs recurrence"), &s_chunk, &s_rec, 1e-10);
    }
}

#[test]
fn each_mutant_of_the_chunked_form_moves_the_answer() {
    const H: usize = 2;
    const D: usize = 32;
    const C: usize = 32;
    // Two chunks, the second padded; a carried state so that every term is exercised.
    let seq = random_sequence(45, H, D, Gates::Mild, 300);
    let s0 = random_state(H, D, 301);
    let mut s_rec = s0.clone();
    let want = f64_kda::recurrent(&seq, &mut s_rec);

    let mut s = s0.clone();
    let got = f64_kda::chunked(&seq, &mut s, C, Mutant::None);
    assert_within("unmutated chunked outputs vs recurrence", &got, &want, 1e-10);
    assert_within("unmutated chunked state vs recurrence", &s, &s_rec, 1e-10);

    for mutant in
        [Mutant::PerHeadDecay, Mutant::ExpSignFlip, Mutant::TriangleFlip, Mutant::UpdateBeforeOutput]
    {
        let mut s = s0.clone();
        let got = f64_kda::chunked(&seq, &mut s, C, mutant);
        let moved = agreement(&format!("{mutant:?} outputs vs recurrence"), &got, &want).relative_rms;
        agreement(&format!("{mutant:?} state vs recurrence"), &s, &s_rec);
        assert!(moved > 1e-4, "{mutant:?} moves the outputs by only {moved:.3e}");
    }
}

#[test]
fn the_f64_recurrence_decays_along_k_and_reads_the_updated_state() {
    // One head, D = 2, by hand: S = [[1, 2], [3, 4]] (S[k][v]), g = (ln ½, 0), k = (1, 0),
    // v = (1, 1), β = ½, q = (0, 1)·√2 so that q·scale = (0, 1).
    let mut s = vec![1.0, 2.0, 3.0, 4.0];
    let q = [0.0, 2f64.sqrt()];
    let out =
        f64_kda::recurrent_step(&mut s, &q, &[1.0, 0.0], &[1.0, 1.0], &[0.5f64.ln(), 0.0], &[0.5], 1, 2);
    // Decay row k = 0 by ½: [[0.5, 1], [3, 4]]; Sᵀk = (0.5, 1); δ = ½·((1, 1) − (0.5, 1)) = (0.25, 0);
    // S = [[0.75, 1], [3, 4]]; out = Sᵀ(0, 1) = (3, 4).
    let close = |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12);
    assert!(close(&s, &[0.75, 1.0, 3.0, 4.0]), "state {s:?}");
    assert!(close(&out, &[3.0, 4.0]), "out {out:?}");
}

// ---------------------------------------------------------------------------------------------
// Fallback kernels.

/// Prefill of `t` tokens then decode of a few: outputs and states, bit for bit.
fn run_bits(gpu: &CpuBackend, geometry: KdaGeometry, t: usize) -> (Vec<u16>, HostState) {
    let weights = HostWeights::synthetic(&geometry, 31);
    let block = Glm5NextKdaBlock::new(gpu, geometry, &weights).unwrap();
    let width = geometry.hidden as usize;
    let hidden = synthetic_hidden(&geometry, t + 5, 32 + t as u64);
    let mut state = block.new_state().unwrap();
    let mut out = prefill(&block, gpu, &mut state, &hidden[..t * width]);
    out.extend(decode(&block, gpu, &mut state, &hidden[t * width..]));
    (out.iter().map(|x| x.to_bits()).collect(), host_state(gpu, &state))
}

#[test]
fn the_fallbacks_for_the_optional_kernels_give_the_same_bits() {
    let geometry = tiny();
    let weights = HostWeights::synthetic(&geometry, 31);
    let full = kda::reference::backend();
    let no_batchm = kda::reference::backend().without("dense_gemv_bf16_batchm", "dense_gemv_bf16_batchm");
    let no_regs = kda::reference::backend().without("kda_recurrent", "kda_recurrent_decode_bf16_regs");
    // The fallbacks are really taken.
    let kernels = |gpu: &CpuBackend| *Glm5NextKdaBlock::new(gpu, geometry, &weights).unwrap().kernels();
    assert!(kernels(&full).gemv_batchm.is_some() && kernels(&full).recurrent_regs.is_some());
    assert!(kernels(&no_batchm).gemv_batchm.is_none() && kernels(&no_batchm).recurrent_regs.is_some());
    assert!(kernels(&no_regs).recurrent_regs.is_none() && kernels(&no_regs).gemv_batchm.is_some());
    let regs_block = Glm5NextKdaBlock::new(&no_regs, geometry, &weights).unwrap();
    assert_eq!(regs_block.decode_kernel(), regs_block.kernels().recurrent);

    for t in [2, 9, 16, 17] {
        let (want_out, want_state) = run_bits(&full, geometry, t);
        assert!(want_out.iter().any(|&x| x != 0) && want_state.recurrent.iter().any(|&x| x != 0.0));
        for (what, gpu) in [("without gemv_batchm", &no_batchm), ("without recurrent_regs", &no_regs)] {
            let (out, state) = run_bits(gpu, geometry, t);
            assert!(out == want_out, "{what}, t {t}: the outputs differ");
            assert!(
                state.conv.iter().map(|x| x.to_bits()).eq(want_state.conv.iter().map(|x| x.to_bits())),
                "{what}, t {t}: the conv state differs"
            );
            assert!(
                state
                    .recurrent
                    .iter()
                    .map(|x| x.to_bits())
                    .eq(want_state.recurrent.iter().map(|x| x.to_bits())),
                "{what}, t {t}: the recurrent state differs"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Errors.

#[test]
fn geometries_the_kernels_cannot_run_are_refused_by_the_block() {
    let gpu = kda::reference::backend();
    let tiny = tiny();
    let weights = HostWeights::synthetic(&tiny, 41);
    for (geometry, expected) in [
        (KdaGeometry { head_dim: 48, ..tiny }, GeometryError::HeadDim(48)),
        (KdaGeometry { chunk: 16, ..tiny }, GeometryError::Chunk(16)),
        (KdaGeometry { heads: 0, ..tiny }, GeometryError::Zero("heads")),
        (
            KdaGeometry { gate_law: GateLaw::Bounded { lower_bound: 0.0 }, ..tiny },
            GeometryError::LowerBound(0.0),
        ),
    ] {
        match Glm5NextKdaBlock::new(&gpu, geometry, &weights) {
            Err(BlockError::Geometry(found)) => assert_eq!(found, expected),
            Err(other) => panic!("{geometry}: expected {expected}, got {other}"),
            Ok(_) => panic!("{geometry}: accepted"),
        }
    }
}

#[test]
fn a_backend_missing_a_required_kernel_is_refused() {
    let gpu = kda::reference::backend().without("kda_chunk", "kda_chunk_scan");
    let weights = HostWeights::synthetic(&tiny(), 42);
    assert!(matches!(Glm5NextKdaBlock::new(&gpu, tiny(), &weights), Err(BlockError::Resolve(_))));
}

#[test]
fn wrong_inputs_are_errors_and_leave_the_state_alone() {
    let gpu = kda::reference::backend();
    let geometry = tiny();
    let width = geometry.hidden as usize;
    let weights = HostWeights::synthetic(&geometry, 43);
    let block = Glm5NextKdaBlock::new(&gpu, geometry, &weights).unwrap();
    let mut state = block.new_state().unwrap();
    // A state that is not all zero, so that a stray write would show.
    let hidden = synthetic_hidden(&geometry, 3, 44);
    prefill(&block, &gpu, &mut state, &hidden);
    let before = host_state(&gpu, &state);
    assert!(before.recurrent.iter().any(|&x| x != 0.0));

    let short = gpu.upload(&hidden[..width - 1]).unwrap();
    let ragged = gpu.upload(&hidden[..width + 1]).unwrap();
    let two = gpu.upload(&hidden[..2 * width]).unwrap();
    let empty = gpu.alloc(DType::Bf16, 0).unwrap();
    let floats = gpu.alloc(DType::F32, width).unwrap();
    for (what, input) in
        [("short", &short), ("ragged", &ragged), ("two tokens", &two), ("empty", &empty), ("f32", &floats)]
    {
        let result = block.decode_step(&mut state, input);
        assert!(matches!(result, Err(BlockError::Input { .. })), "decode_step, {what}: {result:?}");
    }
    for (what, input) in [("short", &short), ("ragged", &ragged), ("empty", &empty), ("f32", &floats)] {
        let result = block.prefill(&mut state, input);
        assert!(matches!(result, Err(BlockError::Input { .. })), "prefill, {what}: {result:?}");
    }
    assert_eq!(host_state(&gpu, &state), before, "a refused input changed the state");
}

#[test]
fn a_state_of_another_geometry_or_backend_is_refused_and_nothing_is_written() {
    let gpu = kda::reference::backend();
    let (tiny, other) = (tiny(), head_dim_64());
    let block = Glm5NextKdaBlock::new(&gpu, tiny, &HostWeights::synthetic(&tiny, 45)).unwrap();
    let other_block = Glm5NextKdaBlock::new(&gpu, other, &HostWeights::synthetic(&other, 46)).unwrap();
    let mut foreign = other_block.new_state().unwrap();
    let before = host_state(&gpu, &foreign);
    let hidden = gpu.upload(&synthetic_hidden(&tiny, 1, 47)).unwrap();
    for result in [block.decode_step(&mut foreign, &hidden), block.prefill(&mut foreign, &hidden)] {
        let error = result.unwrap_err();
        assert!(matches!(error, BlockError::State { .. }), "{error}");
        assert!(error.to_string().contains("4 heads") || error.to_string().contains("64"), "{error}");
    }
    assert_eq!(host_state(&gpu, &foreign), before);

    // Same geometry, another backend: refused by the state check, not by a launch.
    let elsewhere = kda::reference::backend();
    let twin = Glm5NextKdaBlock::new(&elsewhere, tiny, &HostWeights::synthetic(&tiny, 45)).unwrap();
    let mut state = twin.new_state().unwrap();
    assert!(matches!(block.decode_step(&mut state, &hidden), Err(BlockError::State { .. })));
}

/// Memory that was never allocated: `0` bf16 elements claimed, only the length ever looked at.
struct NoMemory(usize);

impl BufferStorage for NoMemory {
    fn dtype(&self) -> DType {
        DType::Bf16
    }

    fn len(&self) -> usize {
        self.0
    }
}

#[test]
fn more_tokens_than_the_kernels_sizes_hold_are_refused_before_anything_is_allocated() {
    let gpu = RecordingBackend::new().with_table::<kda::kernels::Glm5NextKda>();
    let geometry = tiny();
    let block = Glm5NextKdaBlock::new(&gpu, geometry, &HostWeights::synthetic(&geometry, 48)).unwrap();
    let mut state = block.new_state().unwrap();
    let allocated = gpu.allocations();
    let tokens = geometry.max_tokens() as usize + 1;
    // The length of such an input is all the block may look at: claim it without the memory.
    let hidden =
        DeviceBuffer::new(BackendId::fresh(), Box::new(NoMemory(tokens * geometry.hidden as usize))).unwrap();
    let error = block.prefill(&mut state, &hidden).unwrap_err();
    let BlockError::Geometry(GeometryError::TooManyTokens { tokens: found, max }) = error else {
        panic!("{error}")
    };
    assert_eq!((found, max), (tokens, geometry.max_tokens()));
    assert_eq!(gpu.allocations(), allocated, "nothing may be allocated for a refused call");
    assert!(gpu.launches().is_empty());
}

#[test]
fn weights_of_the_wrong_shape_are_refused() {
    let gpu = kda::reference::backend();
    let geometry = tiny();
    let mut weights = HostWeights::synthetic(&geometry, 49);
    weights.o_proj.pop();
    let Err(BlockError::Weights(error)) = Glm5NextKdaBlock::new(&gpu, geometry, &weights) else {
        panic!("a short o_proj was accepted")
    };
    let expected =
        WeightsError { name: "o_proj", shape: "[hidden, qkv]", expected: 64 * 64, found: 64 * 64 - 1 };
    assert_eq!(error, expected);
    // The weights of another geometry are refused the same way.
    let other = HostWeights::synthetic(&head_dim_64(), 50);
    assert!(matches!(Glm5NextKdaBlock::new(&gpu, geometry, &other), Err(BlockError::Weights(_))));
}
