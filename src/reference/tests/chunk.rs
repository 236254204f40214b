//! kda_chunk_prepare + kda_chunk_scan against the token recurrence (f64 and the recurrent kernel).

use super::recurrent::{KdaInputs, decode_steps, recurrence64, scale};
use super::*;

/// What prepare and scan leave behind.
struct Chunked {
    gc: Vec<f32>,
    u: Vec<f32>,
    w: Vec<f32>,
    out: Vec<f32>,
    state: Vec<f32>,
}

/// `[t, …]` rows padded to `[t_pad, …]` with `fill`.
fn padded(values: impl IntoIterator<Item = f32>, t_pad_len: usize, fill: f32) -> Vec<f32> {
    let mut values: Vec<f32> = values.into_iter().collect();
    values.resize(t_pad_len, fill);
    values
}

/// Runs prepare then scan over `t` tokens in chunks of `c`, every input's pad positions (and the
/// output's) filled with `fill`.
fn chunked(inputs: &KdaInputs, t: usize, h: usize, d: usize, c: usize, fill: f32) -> Chunked {
    let t_pad = t.div_ceil(c) * c;
    let (len, beta_len) = (t_pad * h * d, t_pad * h);
    let widen = |x: &[bf16]| padded(x.iter().map(|x| x.to_f32()), len, fill);
    let (q, k, v) = (widen(&inputs.q), widen(&inputs.k), widen(&inputs.v));
    let gate = padded(inputs.gate.iter().copied(), len, fill);
    let beta = padded(inputs.beta.iter().copied(), beta_len, fill);
    let dims = || [t, h, d, c].map(|x| Arg::U32(x as u32));
    let mut prepare = vec![
        Arg::F32(k.clone()),
        Arg::F32(v),
        Arg::F32(gate),
        Arg::F32(beta),
        Arg::F32Mut(vec![fill; len]),
        Arg::F32Mut(vec![fill; len]),
        Arg::F32Mut(vec![fill; len]),
    ];
    prepare.extend(dims());
    let mut outs = launch("kda_chunk", "kda_chunk_prepare", prepare).into_iter().map(Out::f32);
    let (gc, u, w) = (outs.next().unwrap(), outs.next().unwrap(), outs.next().unwrap());
    let mut scan = vec![
        Arg::F32(q),
        Arg::F32(k),
        Arg::F32(gc.clone()),
        Arg::F32(u.clone()),
        Arg::F32(w.clone()),
        Arg::F32Mut(inputs.state.clone()),
        Arg::F32Mut(vec![fill; len]),
    ];
    scan.extend(dims());
    scan.push(Arg::Scalar(scale(d)));
    let mut outs = launch("kda_chunk", "kda_chunk_scan", scan).into_iter().map(Out::f32);
    let (state, out) = (outs.next().unwrap(), outs.next().unwrap());
    Chunked { gc, u, w, out, state }
}

#[test]
fn chunked_prefill_matches_the_f64_recurrence() {
    for (t, h, d, c) in [(45, 2, 32, 16), (45, 2, 32, 32), (11, 1, 64, 8), (9, 1, 128, 8)] {
        let inputs = KdaInputs::new(40 + c as u64 + d as u64, t, h, d);
        let result = chunked(&inputs, t, h, d, c, 0.0);
        let (want_out, want_state) = recurrence64(&inputs, t, h, d);
        let what = format!("t = {t}, d = {d}, c = {c}");
        assert_close(&format!("chunk out, {what}"), &result.out[..t * h * d], &want_out, 1e-5);
        assert_close(&format!("chunk state, {what}"), &result.state, &want_state, 1e-5);
    }
}

#[test]
fn chunked_prefill_matches_the_recurrent_kernel() {
    let (t, h, d) = (45, 2, 32);
    let inputs = KdaInputs::new(50, t, h, d);
    let (out, state) = decode_steps("kda_recurrent_decode_bf16", &inputs, t, h, d);
    for c in [16, 32] {
        let result = chunked(&inputs, t, h, d, c, 0.0);
        let what = format!("c = {c}");
        assert_close(
            &format!("chunk vs recurrent out, {what}"),
            &result.out[..t * h * d],
            &widen_f32(&out),
            1e-5,
        );
        assert_close(&format!("chunk vs recurrent state, {what}"), &result.state, &widen_f32(&state), 1e-5);
    }
}

#[test]
fn chunk_padding_is_never_read() {
    let (t, h, d, c) = (45, 2, 32, 32);
    let inputs = KdaInputs::new(51, t, h, d);
    let clean = chunked(&inputs, t, h, d, c, 0.0);
    let poisoned = chunked(&inputs, t, h, d, c, 7.5);
    let real = t * h * d;
    let bits = |x: &[f32]| x.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    // Prepare writes every position, the padding as if its inputs were 0.
    assert_eq!(bits(&clean.gc), bits(&poisoned.gc));
    assert_eq!(bits(&clean.u), bits(&poisoned.u));
    assert_eq!(bits(&clean.w), bits(&poisoned.w));
    assert_eq!(bits(&clean.state), bits(&poisoned.state));
    assert_eq!(bits(&clean.out[..real]), bits(&poisoned.out[..real]));
    // Scan writes only the real rows.
    assert!(poisoned.out[real..].iter().all(|&x| x == 7.5));
}

#[test]
fn chunk_prepare_hand_case() {
    // One head, d = 1, two tokens, k = 1, no decay, β = (0.5, 0.25), v = (2, 4):
    // A = [[1, 0], [−β₁, 1]]; u = (β₀v₀, −β₁β₀v₀ + β₁v₁) = (1, 0.75); w = (β₀, −β₁β₀ + β₁) = (0.5, 0.125).
    let inputs = KdaInputs {
        q: vec![bf16::ONE; 2],
        k: vec![bf16::ONE; 2],
        v: vec![bf16::from_f32(2.0), bf16::from_f32(4.0)],
        gate: vec![0.0; 2],
        beta: vec![0.5, 0.25],
        state: vec![0.0],
    };
    let result = chunked(&inputs, 2, 1, 1, 2, 0.0);
    assert_eq!(result.gc, [0.0, 0.0]);
    assert_eq!(result.u, [1.0, 0.75]);
    assert_eq!(result.w, [0.5, 0.125]);
}

#[test]
fn chunk_kernels_refuse_bad_sizes() {
    let (t, h, d) = (3, 1, 2);
    let buffer = |len: usize| Arg::F32(vec![0.0; len]);
    let prepare = |c: u32, beta_len: usize| {
        let mut args = vec![buffer(8), buffer(8), buffer(8), buffer(beta_len)];
        args.extend((0..3).map(|_| Arg::F32Mut(vec![0.0; 8])));
        args.extend([t, h, d].map(|x| Arg::U32(x as u32)));
        args.push(Arg::U32(c));
        args
    };
    let reason = refusal("kda_chunk", "kda_chunk_prepare", prepare(0, 4));
    assert_eq!(reason, "chunk size c must be at least 1");
    let reason = refusal("kda_chunk", "kda_chunk_prepare", prepare(4, 3));
    assert_eq!(reason, "`beta [t_pad, h]` holds 3 elements, needs 4×1 = 4");
    // t = 3 in chunks of 8 pads to 8 positions: 16 elements, more than the buffers hold.
    let reason = refusal("kda_chunk", "kda_chunk_prepare", prepare(8, 8));
    assert_eq!(reason, "`k [t_pad, h, d]` holds 8 elements, needs 8×1×2 = 16");
    let mut scan: Vec<Arg> = (0..5).map(|_| buffer(8)).collect();
    scan.extend([Arg::F32Mut(vec![0.0; 3]), Arg::F32Mut(vec![0.0; 8])]);
    scan.extend([t, h, d, 4].map(|x| Arg::U32(x as u32)));
    scan.push(Arg::Scalar(1.0));
    let reason = refusal("kda_chunk", "kda_chunk_scan", scan);
    assert_eq!(reason, "`state [h, d, d]` holds 3 elements, needs 1×2×2 = 4");
}
