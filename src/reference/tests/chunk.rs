//! kda_chunk_prepare + kda_chunk_scan against the token recurrence (f64 and the recurrent kernel).

use half::bf16;

use super::gate::RawGate;
use super::recurrent::{KdaInputs, Recurrent, decode_steps, first_channel, recurrence64, scale};
use super::*;

/// What prepare and scan leave behind.
struct Chunked {
    u: Vec<f32>,
    w: Vec<f32>,
    aqk: Vec<f32>,
    qdec: Vec<f32>,
    kdec: Vec<f32>,
    sdec: Vec<f32>,
    out: Vec<f32>,
    state: Vec<f32>,
}

/// `[t, …]` rows padded to `[t_pad, …]` with `fill`.
fn padded(values: impl IntoIterator<Item = f32>, t_pad_len: usize, fill: f32) -> Vec<f32> {
    let mut values: Vec<f32> = values.into_iter().collect();
    values.resize(t_pad_len, fill);
    values
}

/// The raw gate of a prepare launch: `gate`'s inputs with `b_raw`'s rows spread `ldb` apart, NaN
/// between them (which the kernel must not read).
struct StridedGate<'a> {
    gate: &'a RawGate,
    b_raw: Vec<bf16>,
    ldb: usize,
}

impl<'a> StridedGate<'a> {
    /// `gate` with the rows of `h` betas `ldb ≥ h` apart.
    fn new(gate: &'a RawGate, h: usize, ldb: usize) -> Self {
        let rows = gate.b_raw.len() / h;
        let mut b_raw = vec![bf16::NAN; rows.saturating_sub(1) * ldb + h];
        for (row, values) in gate.b_raw.chunks_exact(h).enumerate() {
            b_raw[row * ldb..][..h].copy_from_slice(values);
        }
        Self { gate, b_raw, ldb }
    }
}

/// `kda_chunk_prepare` on `q, k, v` and the raw gate (scale `1/√d`), its outputs `u, w, qdec, kdec`
/// each holding `outputs`, `aqk` holding `attention` and `sdec` holding `decay` before the launch;
/// the outputs after it in that order (`aqk` third, `sdec` last).
fn try_prepare(
    inputs: [&[f32]; 3],
    raw: &StridedGate<'_>,
    (outputs, attention, decay): (&[f32], &[f32], &[f32]),
    sizes: [usize; 4],
) -> Launched<[Vec<f32>; 6]> {
    let scale = scale(sizes[2]);
    let [t, h, d, c, ldb] = u32s([sizes[0], sizes[1], sizes[2], sizes[3], raw.ldb]);
    let dev = Device::new();
    let [q, k, v] = inputs.map(|input| dev.up(input));
    let (g_raw, b_raw) = (dev.up(&raw.gate.g_raw), dev.up(&raw.b_raw));
    let (dt_bias, a_log) = (dev.up(&raw.gate.dt_bias), dev.up(&raw.gate.a_log));
    let [mut u, mut w, mut qdec, mut kdec] = [(); 4].map(|()| dev.up(outputs));
    let (mut aqk, mut sdec) = (dev.up(attention), dev.up(decay));
    let args = glm5next_kda::chunk_prepare {
        q: q.view().into(),
        k: k.view().into(),
        v: v.view().into(),
        g_raw: g_raw.view().into(),
        dt_bias: dt_bias.view().into(),
        a_log: a_log.view().into(),
        b_raw: b_raw.view().into(),
        u: u.view_mut().into(),
        w: w.view_mut().into(),
        aqk: aqk.view_mut().into(),
        qdec: qdec.view_mut().into(),
        kdec: kdec.view_mut().into(),
        sdec: sdec.view_mut().into(),
        t,
        h,
        d,
        c,
        ldb,
        law: raw.gate.law,
        scale,
        lower_bound: raw.gate.lower_bound,
    };
    // (`c = 0` must reach the launch's check, not divide by zero here.)
    let geometry = launch::chunk_prepare(t.div_ceil(c.max(1)), h);
    let result = dev.kernels.launch_chunk_prepare(&dev.gpu, geometry, args);
    Launched { result, written: [&u, &w, &aqk, &qdec, &kdec, &sdec].map(|output| dev.down(output)) }
}

/// `kda_chunk_scan` on `qdec, kdec, sdec, u, w, aqk` with a state holding `state` and an output
/// holding `out`: the state and the output after it.
fn try_scan(
    inputs: [&[f32]; 6],
    state: &[f32],
    out: &[f32],
    sizes: [usize; 4],
) -> Launched<(Vec<f32>, Vec<f32>)> {
    let [t, h, d, c] = u32s(sizes);
    let dev = Device::new();
    let [qdec, kdec, sdec, u, w, aqk] = inputs.map(|input| dev.up(input));
    let (mut state, mut out) = (dev.up(state), dev.up(out));
    let args = glm5next_kda::chunk_scan {
        qdec: qdec.view().into(),
        kdec: kdec.view().into(),
        sdec: sdec.view().into(),
        u: u.view().into(),
        w: w.view().into(),
        aqk: aqk.view().into(),
        state: state.view_mut().into(),
        out: out.view_mut().into(),
        t,
        h,
        d,
        c,
    };
    let result = dev.kernels.launch_chunk_scan(&dev.gpu, launch::chunk_scan(h, d), args);
    Launched { result, written: (dev.down(&state), dev.down(&out)) }
}

/// Runs prepare then scan over `t` tokens in chunks of `c`, every input's pad positions (and the
/// outputs') filled with `fill`, b_raw's rows 3 apart more than its `h` values.
fn chunked(inputs: &KdaInputs, t: usize, h: usize, d: usize, c: usize, fill: f32) -> Chunked {
    let t_pad = t.div_ceil(c) * c;
    let len = t_pad * h * d;
    let widen = |x: &[bf16]| padded(x.iter().map(|x| x.to_f32()), len, fill);
    let (q, k, v) = (widen(&inputs.q), widen(&inputs.k), widen(&inputs.v));
    let raw = StridedGate::new(&inputs.gate, h, h + 3);
    let (sizes, poisoned) = ([t, h, d, c], vec![fill; len]);
    let (attention, decay) = (vec![fill; t_pad * h * c], vec![fill; t_pad / c * h * d]);
    let [u, w, aqk, qdec, kdec, sdec] =
        try_prepare([&q, &k, &v], &raw, (&poisoned, &attention, &decay), sizes).ok();
    let (state, out) = try_scan([&qdec, &kdec, &sdec, &u, &w, &aqk], &inputs.state, &poisoned, sizes).ok();
    Chunked { u, w, aqk, qdec, kdec, sdec, out, state }
}

#[test]
fn chunked_prefill_matches_the_f64_recurrence() {
    let shapes = [((45, 2, 32, 32), 0), ((100, 1, 32, 64), 1), ((11, 1, 64, 32), 1), ((9, 1, 128, 64), 0)];
    for ((t, h, d, c), law) in shapes {
        let inputs = KdaInputs::with_law(40 + c as u64 + d as u64, t, h, d, law);
        let result = chunked(&inputs, t, h, d, c, 0.0);
        let (want_out, want_state) = recurrence64(&inputs, t, h, d);
        let what = format!("t = {t}, d = {d}, c = {c}, law {law}");
        assert_close(&format!("chunk out, {what}"), &result.out[..t * h * d], &want_out, 1e-5);
        assert_close(&format!("chunk state, {what}"), &result.state, &want_state, 1e-5);
    }
}

#[test]
fn chunked_prefill_matches_the_recurrent_kernel() {
    let (t, h, d) = (45, 2, 32);
    let inputs = KdaInputs::new(50, t, h, d);
    let (out, state) = decode_steps(Recurrent::Plain, &inputs, t, h, d);
    for c in [32, 64] {
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
    assert_eq!(bits(&clean.u), bits(&poisoned.u));
    assert_eq!(bits(&clean.w), bits(&poisoned.w));
    assert_eq!(bits(&clean.aqk), bits(&poisoned.aqk));
    assert_eq!(bits(&clean.qdec), bits(&poisoned.qdec));
    assert_eq!(bits(&clean.kdec), bits(&poisoned.kdec));
    assert_eq!(bits(&clean.sdec), bits(&poisoned.sdec));
    assert_eq!(bits(&clean.state), bits(&poisoned.state));
    assert_eq!(bits(&clean.out[..real]), bits(&poisoned.out[..real]));
    // Scan writes only the real rows.
    assert!(poisoned.out[real..].iter().all(|&x| x == 7.5));
}

/// The hand cases' inputs: one head of d = 32, two tokens in channel 0 alone (the other channels
/// and the padding are 0), q = k = 1, v = (2, 4), β = (0.5, 1) (σ(0) and σ(100), both exact in
/// f32), and `gate`.
fn hand_inputs(gate: RawGate) -> KdaInputs {
    let d = 32;
    KdaInputs {
        q: bf16s(&first_channel(&[1.0, 1.0], d)),
        k: bf16s(&first_channel(&[1.0, 1.0], d)),
        v: bf16s(&first_channel(&[2.0, 4.0], d)),
        gate,
        state: vec![0.0; d * d],
    }
}

/// β's projections of the hand cases: β = (0.5, 1).
const HAND_B_RAW: [f32; 2] = [0.0, 100.0];

#[test]
fn chunk_prepare_hand_case() {
    // One head, two tokens in channel 0 (d = 1 alone: the other channels and the padding are 0),
    // k = 1, no decay, β = (0.5, 1), v = (2, 4): A = [[1, 0], [−β₁, 1]];
    // u = (β₀v₀, −β₁β₀v₀ + β₁v₁) = (1, 3); w = (β₀, −β₁β₀ + β₁) = (0.5, 0.5);
    // q = 1 too: aqk = scale·q·k = 1/√32 on and below the diagonal of the two rows, 0 elsewhere;
    // qdec = scale·q, kdec = k on those rows and the state's decay 1 in every channel.
    let (d, c) = (32, 32);
    let result = chunked(&hand_inputs(RawGate::channel_zero(0.0, &HAND_B_RAW, d)), 2, 1, d, c, 0.0);
    let chunk = |values: &[f32]| padded(first_channel(values, d), c * d, 0.0);
    assert_eq!(result.u, chunk(&[1.0, 3.0]));
    assert_eq!(result.w, chunk(&[0.5, 0.5]));
    let scale = 1.0 / 32f32.sqrt();
    let mut aqk = vec![0.0; c * c];
    (aqk[0], aqk[c], aqk[c + 1]) = (scale, scale, scale);
    assert_eq!(result.aqk, aqk);
    assert_eq!(result.qdec, chunk(&[scale, scale]));
    assert_eq!(result.kdec, chunk(&[1.0, 1.0]));
    assert_eq!(result.sdec, [1.0; 32]);
}

/// What prepare writes for a hand case (channel 0 of each of its two rows; aqk's entry below the
/// diagonal; the state's decay in channel 0, the others 1), each to within a few ulp of f32.
struct HandPrepared {
    u: [f64; 2],
    w: [f64; 2],
    aqk_below: f64,
    qdec: [f64; 2],
    kdec: [f64; 2],
    sdec: f64,
}

/// Checks a hand case's outputs at d = c = 32 against `want`: every value within 1e-6 of it
/// (relative above 1), where the gates are rounded and expf is not exact.
fn assert_hand_prepared(result: &Chunked, want: HandPrepared) {
    let (d, c) = (32, 32);
    let chunk = |values: [f64; 2]| -> Vec<f64> {
        let mut rows = vec![0.0; c * d];
        values.iter().enumerate().for_each(|(i, &value)| rows[i * d] = value);
        rows
    };
    let near = |what: &str, got: &[f32], want: &[f64]| {
        assert_eq!(got.len(), want.len(), "{what}");
        for (at, (&got, &want)) in got.iter().zip(want).enumerate() {
            assert!(
                (f64::from(got) - want).abs() <= 1e-6 * want.abs().max(1.0),
                "{what}[{at}]: {got} != {want}"
            );
        }
    };
    let scale = 1.0 / 32f64.sqrt();
    near("u", &result.u, &chunk(want.u));
    near("w", &result.w, &chunk(want.w));
    let mut aqk = vec![0.0; c * c];
    (aqk[0], aqk[c], aqk[c + 1]) = (scale, want.aqk_below * scale, scale);
    near("aqk", &result.aqk, &aqk);
    near("qdec", &result.qdec, &chunk(want.qdec.map(|x| x * scale)));
    near("kdec", &result.kdec, &chunk(want.kdec));
    let mut sdec = vec![1.0; d];
    sdec[0] = want.sdec;
    near("sdec", &result.sdec, &sdec);
}

#[test]
fn chunk_prepare_hand_case_with_decay() {
    // The hand case's two tokens, each decaying channel 0 by ½ (gate ln ½; the other channels
    // keep gate 0): cumulative gates (ln ½, ln ¼), held at ln ¼ over the padding.
    // A[1][0] = −β₁·k₁k₀·e^{gc₁−gc₀} = −0.5, so u = (β₀v₀, −0.5·β₀v₀ + β₁v₁) = (1, 3.5) and
    // w = (β₀·e^{gc₀}, −0.5·β₀·e^{gc₀} + β₁·e^{gc₁}) = (0.25, 0.125);
    // aqk = scale·(1 | ½, 1) on and below the diagonal; qdec = scale·(½, ¼);
    // kdec = k·e^{gc_last − gc} = (½, 1); the state's decay ¼ in channel 0, 1 in the others.
    let d = 32;
    let result = chunked(&hand_inputs(RawGate::channel_zero(0.5f32.ln(), &HAND_B_RAW, d)), 2, 1, d, 32, 0.0);
    let want = HandPrepared {
        u: [1.0, 3.5],
        w: [0.25, 0.125],
        aqk_below: 0.5,
        qdec: [0.5, 0.25],
        kdec: [0.5, 1.0],
        sdec: 0.25,
    };
    assert_hand_prepared(&result, want);
}

#[test]
fn chunk_prepare_takes_a_softplus_gate_past_where_e_x_overflows() {
    // Softplus of 100 is 100 (e^100 overflows f32; ln(1 + e^x) taken as written is +inf, and the
    // cumulative gates' differences −inf − (−inf) then NaN). Channel 0's gates are −100 twice:
    // gc = (−100, −200), every decay across them e^{−100} ≈ 4e-44 or less, so u = (β₀v₀, β₁v₁)
    // = (1, 4), w ≈ (0, 0), aqk = scale·(1 | 0, 1), qdec ≈ 0, kdec ≈ (0, 1), the state's decay 0.
    let d = 32;
    let mut gate = RawGate::channel_zero(0.0, &HAND_B_RAW, d);
    (gate.law, gate.g_raw) = (1, bf16s(&first_channel(&[100.0, 100.0], d)));
    let result = chunked(&hand_inputs(gate), 2, 1, d, 32, 0.0);
    let want = HandPrepared {
        u: [1.0, 4.0],
        w: [0.0, 0.0],
        aqk_below: 0.0,
        qdec: [0.0, 0.0],
        kdec: [0.0, 1.0],
        sdec: 0.0,
    };
    assert_hand_prepared(&result, want);
}

#[test]
fn chunk_kernels_refuse_bad_sizes() {
    // t = 3 tokens pad to one chunk of 32.
    let (t, h, d) = (3, 1, 32);
    let len = 32 * h * d;
    let (input, outputs) = (vec![0.5; len], vec![7.5; len]);
    let raw = RawGate::random(&mut Rng::new(52), (t, h, d), 0);
    // (aqk [1 chunk, h, 32, 32] is as long as the others at d = 32.)
    let untouched = [(); 6].map(|()| outputs.clone());
    let prepare = |c: usize, gate: &StridedGate<'_>| {
        try_prepare([&input; 3], gate, (&outputs, &outputs, &outputs), [t, h, d, c]).refused(&untouched)
    };
    let packed = StridedGate::new(&raw, h, h);
    let reason = prepare(16, &packed);
    assert!(
        reason.starts_with("`glm5next_kda.chunk_prepare`: the launch does not meet `c == 32 || c == 64`"),
        "{reason}"
    );
    // c = 0 would divide by zero in the extents: the requirement refuses it first.
    let reason = prepare(0, &packed);
    assert!(
        reason.starts_with("`glm5next_kda.chunk_prepare`: the launch does not meet `c == 32 || c == 64`"),
        "{reason}"
    );
    // b_raw's rows said to lie 2 apart, in a buffer of 3 packed ones.
    let reason = prepare(32, &StridedGate { ldb: 2, ..StridedGate::new(&raw, h, h) });
    assert_eq!(
        reason,
        "`glm5next_kda.chunk_prepare.b_raw`: expected at least 5 elements (`(t-1)*ldb+h`), found a view of 3 elements"
    );
    let reason = prepare(32, &StridedGate { ldb: 0, ..StridedGate::new(&raw, h, h) });
    assert!(reason.contains("does not meet `ldb >= h`"), "{reason}");
    // In chunks of 64, t = 3 pads to 64 positions: more than the buffers hold.
    assert_eq!(
        prepare(64, &packed),
        "`glm5next_kda.chunk_prepare.q`: expected at least 2048 elements (`cdiv(t,c)*c*h*d`), found a view of 1024 elements"
    );
    let short_state = vec![0.5; h * d * d - 1];
    let reason = try_scan([&input; 6], &short_state, &outputs, [t, h, d, 32])
        .refused(&(short_state.clone(), outputs.clone()));
    assert_eq!(
        reason,
        "`glm5next_kda.chunk_scan.state`: expected at least 1024 elements (`h*d*d`), found a view of 1023 elements"
    );
}
