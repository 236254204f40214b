//! kda_gate_bf16 and the kda_layer_ops kernels.

use half::bf16;

use super::*;

/// What the gate kernel writes: the gates, then beta.
type GateWritten = (Vec<f32>, Vec<f32>);

/// The gate of `t` tokens under `law` (lower bound −5), with `h = a_log.len()` heads of
/// `dt_bias.len() / h` channels, and beta of `b_raw` (rows `ldb` apart), into zeroed outputs.
fn try_gate_beta(
    (g_raw, dt_bias, a_log): (&[bf16], &[f32], &[f32]),
    (b_raw, ldb): (&[bf16], usize),
    t: usize,
    law: u32,
) -> Launched<GateWritten> {
    let (h, hd) = (a_log.len(), dt_bias.len());
    let [t, h, d, ldb] = u32s([t, h, hd / h, ldb]);
    let dev = Device::new();
    let (g_raw, dt_bias, a_log, b_raw) = (dev.up(g_raw), dev.up(dt_bias), dev.up(a_log), dev.up(b_raw));
    let mut gate = dev.up(&vec![0.0f32; t as usize * hd]);
    let mut beta = dev.up(&vec![0.0f32; (t * h) as usize]);
    let args = glm5next_kda::gate {
        g_raw: g_raw.view(),
        dt_bias: dt_bias.view(),
        a_log: a_log.view(),
        b_raw: b_raw.view(),
        gate: gate.view_mut(),
        beta: beta.view_mut(),
        t,
        h,
        d,
        ldb,
        law,
        lower_bound: -5.0,
    };
    let result = dev.kernels.launch_gate(&dev.gpu, launch::elementwise(t * h * d), args);
    Launched { result, written: (dev.down(&gate), dev.down(&beta)) }
}

/// [`try_gate_beta`] with b_raw zero: the gates.
fn try_gate(g_raw: &[bf16], dt_bias: &[f32], a_log: &[f32], t: usize, law: u32) -> Launched<GateWritten> {
    let b_raw = vec![bf16::ZERO; t * a_log.len()];
    try_gate_beta((g_raw, dt_bias, a_log), (&b_raw, a_log.len()), t, law)
}

fn gate(g_raw: &[bf16], dt_bias: &[f32], a_log: &[f32], t: usize, law: u32) -> Vec<f32> {
    try_gate(g_raw, dt_bias, a_log, t, law).ok().0
}

#[test]
fn gate_follows_both_laws_per_head_and_per_channel() {
    let (t, h, d) = (3, 2, 32);
    let mut rng = Rng::new(20);
    let g_raw = rng.bf16s(t * h * d, -4.0, 4.0);
    let dt_bias = rng.f32s(h * d, -1.0, 1.0);
    let a_log = rng.f32s(h, -1.0, 1.0);
    let pre = |i: usize| g_raw[i].to_f64() + f64::from(dt_bias[i % (h * d)]);
    let decay = |i: usize| f64::from(a_log[i % (h * d) / d]).exp();
    let bounded: Vec<f64> = (0..t * h * d).map(|i| -5.0 * sigmoid64(decay(i) * pre(i))).collect();
    let softplus: Vec<f64> = (0..t * h * d).map(|i| -decay(i) * pre(i).exp().ln_1p()).collect();
    assert_relative("bounded gate", &gate(&g_raw, &dt_bias, &a_log, t, 0), &bounded, 1e-6);
    assert_relative("softplus gate", &gate(&g_raw, &dt_bias, &a_log, t, 1), &softplus, 1e-6);
}

#[test]
fn gate_hand_cases() {
    // One head of two channels, a_log = 0 (decay 1).
    let g_raw = [bf16::ZERO, bf16::from_f32(100.0)];
    let dt_bias = [0.0, 0.0];
    // Bounded: −5·σ(0) = −2.5; −5·σ(100) rounds to −5.
    assert_eq!(gate(&g_raw, &dt_bias, &[0.0], 1, 0), [-2.5, -5.0]);
    // Softplus: −ln 2; above 20 softplus(x) = x, so x = 100 gives −100 (and no overflow).
    assert_eq!(gate(&g_raw, &dt_bias, &[0.0], 1, 1), [-std::f32::consts::LN_2, -100.0]);
}

#[test]
fn gate_refuses_an_unknown_law_and_short_buffers() {
    let g_raw = vec![bf16::ZERO; 8];
    let untouched = (vec![0.0; 8], vec![0.0; 4]);
    let reason = try_gate(&g_raw, &[0.0; 4], &[0.0; 2], 2, 2).refused(&untouched);
    let refusal =
        "`glm5next_kda.gate`: the launch does not meet `law <= 1` (t = 2, h = 2, d = 2, ldb = 2, law = 2, ";
    assert!(reason.starts_with(refusal), "{reason}");
    let reason = try_gate(&g_raw, &[0.0; 4], &[0.0; 2], 3, 0).refused(&(vec![0.0; 12], vec![0.0; 6]));
    assert_eq!(
        reason,
        "`glm5next_kda.gate.g_raw`: expected at least 12 elements (`t*h*d`), found a view of 8 elements"
    );
}

#[test]
fn beta_is_the_sigmoid_of_b_raw_read_its_stride_apart() {
    // 25 tokens of 4 heads, rows 7 apart: the 3 between them must not be read.
    let (t, h, ldb) = (25, 4, 7);
    let mut rng = Rng::new(21);
    let b_raw = rng.bf16s((t - 1) * ldb + h, -8.0, 8.0);
    let g_raw = vec![bf16::ZERO; t * h];
    let (gates, beta) = try_gate_beta((&g_raw, &[0.0; 4], &[0.0; 4]), (&b_raw, ldb), t, 0).ok();
    let want: Vec<f64> = (0..t * h).map(|i| sigmoid64(b_raw[i / h * ldb + i % h].to_f64())).collect();
    assert_relative("beta", &beta, &want, 1e-6);
    assert_eq!(gates, vec![-2.5; t * h], "the gates of zero pre-activations");
    let untouched = (vec![0.0; t * h], vec![0.0; t * h]);
    let reason = try_gate_beta((&g_raw, &[0.0; 4], &[0.0; 4]), (&b_raw, h - 1), t, 0).refused(&untouched);
    assert!(reason.contains("does not meet `ldb >= h`"), "{reason}");
}

#[test]
fn o_norm_is_a_sigmoid_gated_rms_norm_per_head() {
    let (rows, d) = (6, 32);
    let mut rng = Rng::new(22);
    let x = rng.f32s(rows * d, -0.2, 0.2);
    let gate = rng.bf16s(rows * d, -3.0, 3.0);
    let weight = rng.bf16s(d, 0.5, 1.5);
    let dev = Device::new();
    let (x_buffer, gate_buffer, weight_buffer) = (dev.up(&x), dev.up(&gate), dev.up(&weight));
    let mut out = dev.up(&vec![bf16::ZERO; rows * d]);
    let [rows_u32, d_u32] = u32s([rows, d]);
    let args = glm5next_kda::o_norm {
        x: x_buffer.view(),
        gate: gate_buffer.view(),
        weight: weight_buffer.view(),
        out: out.view_mut(),
        rows: rows_u32,
        d: d_u32,
        eps: 1e-5,
    };
    dev.kernels.launch_o_norm(&dev.gpu, launch::norm(rows_u32), args).unwrap();
    let x = widen_f32(&x);
    let want: Vec<f64> = (0..rows * d)
        .map(|i| {
            let head = &x[i / d * d..][..d];
            let mean = head.iter().map(|x| x * x).sum::<f64>() / d as f64;
            x[i] / (mean + 1e-5).sqrt() * weight[i % d].to_f64() * sigmoid64(gate[i].to_f64())
        })
        .collect();
    assert_bf16_rounded("o_norm", &dev.down(&out), &want);
}

/// The first `n` elements of a `dst` holding `dst` set to `value`.
fn try_fill(dst: &[f32], n: u32, value: f32) -> Launched<Vec<f32>> {
    let dev = Device::new();
    let mut buffer = dev.up(dst);
    let args = glm5next_kda::fill { dst: buffer.view_mut(), n, value };
    let result = dev.kernels.launch_fill(&dev.gpu, launch::elementwise(n), args);
    Launched { result, written: dev.down(&buffer) }
}

#[test]
fn fill_writes_the_first_n() {
    assert_eq!(try_fill(&[1.0; 5], 3, 7.5).ok(), [7.5, 7.5, 7.5, 1.0, 1.0]);
    let reason = try_fill(&[1.0; 2], 3, 0.0).refused(&vec![1.0; 2]);
    assert_eq!(
        reason,
        "`glm5next_kda.fill.dst`: expected at least 3 elements (`n`), found a view of 2 elements"
    );
}
