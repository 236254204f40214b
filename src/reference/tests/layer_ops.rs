//! kda_gate_bf16 and the kda_layer_ops kernels.

use half::bf16;

use super::*;

fn gate_args(g_raw: &[bf16], dt_bias: &[f32], a_log: &[f32], t: usize, law: u32) -> Vec<Arg> {
    let (h, hd) = (a_log.len(), dt_bias.len());
    vec![
        Arg::Bf16(g_raw.to_vec()),
        Arg::F32(dt_bias.to_vec()),
        Arg::F32(a_log.to_vec()),
        Arg::F32Mut(vec![0.0; t * hd]),
        Arg::U32(t as u32),
        Arg::U32(h as u32),
        Arg::U32((hd / h) as u32),
        Arg::U32(law),
        Arg::Scalar(-5.0),
    ]
}

fn gate(g_raw: &[bf16], dt_bias: &[f32], a_log: &[f32], t: usize, law: u32) -> Vec<f32> {
    launch("kda_gate", "kda_gate_bf16", gate_args(g_raw, dt_bias, a_log, t, law)).remove(0).f32()
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
    let reason = refusal("kda_gate", "kda_gate_bf16", gate_args(&g_raw, &[0.0; 4], &[0.0; 2], 2, 2));
    assert_eq!(reason, "law = 2 is neither 0 (bounded) nor 1 (softplus)");
    let reason = refusal("kda_gate", "kda_gate_bf16", gate_args(&g_raw, &[0.0; 4], &[0.0; 2], 3, 0));
    assert_eq!(reason, "`g_raw [t, h, d]` holds 8 elements, needs 3×2×2 = 12");
}

#[test]
fn sigmoid_matches_f64() {
    let x = Rng::new(21).bf16s(100, -8.0, 8.0);
    let args = vec![Arg::Bf16(x.clone()), Arg::F32Mut(vec![0.0; 100]), Arg::U32(100)];
    let y = launch("kda_layer_ops", "kda_sigmoid_bf16_f32", args).remove(0).f32();
    let want: Vec<f64> = x.iter().map(|x| sigmoid64(x.to_f64())).collect();
    assert_relative("sigmoid", &y, &want, 1e-6);
}

#[test]
fn o_norm_is_a_sigmoid_gated_rms_norm_per_head() {
    let (rows, d) = (6, 32);
    let mut rng = Rng::new(22);
    let x = rng.f32s(rows * d, -0.2, 0.2);
    let gate = rng.bf16s(rows * d, -3.0, 3.0);
    let weight = rng.bf16s(d, 0.5, 1.5);
    let args = vec![
        Arg::F32(x.clone()),
        Arg::Bf16(gate.clone()),
        Arg::Bf16(weight.clone()),
        Arg::Bf16Mut(vec![bf16::ZERO; rows * d]),
        Arg::U32(rows as u32),
        Arg::U32(d as u32),
        Arg::Scalar(1e-5),
    ];
    let out = launch("kda_layer_ops", "kda_o_norm_gated_bf16", args).remove(0).bf16();
    let x = widen_f32(&x);
    let want: Vec<f64> = (0..rows * d)
        .map(|i| {
            let head = &x[i / d * d..][..d];
            let mean = head.iter().map(|x| x * x).sum::<f64>() / d as f64;
            x[i] / (mean + 1e-5).sqrt() * weight[i % d].to_f64() * sigmoid64(gate[i].to_f64())
        })
        .collect();
    assert_bf16_rounded("o_norm", &out, &want);
}

#[test]
fn fill_writes_the_first_n() {
    let args = vec![Arg::F32Mut(vec![1.0; 5]), Arg::U32(3), Arg::Scalar(7.5)];
    let out = launch("kda_layer_ops", "kda_fill_f32", args).remove(0).f32();
    assert_eq!(out, [7.5, 7.5, 7.5, 1.0, 1.0]);
    let args = vec![Arg::F32Mut(vec![1.0; 2]), Arg::U32(3), Arg::Scalar(0.0)];
    let reason = refusal("kda_layer_ops", "kda_fill_f32", args);
    assert_eq!(reason, "`dst [n]` holds 2 elements, needs 3");
}

fn bf16s(values: &[f32]) -> Vec<bf16> {
    values.iter().map(|&x| bf16::from_f32(x)).collect()
}

#[test]
fn pack_interleaves_and_split_widens_back() {
    let (t, qkv) = (2, 2);
    let (q, k, v) =
        (bf16s(&[1.0, 2.0, 3.0, 4.0]), bf16s(&[5.0, 6.0, 7.0, 8.0]), bf16s(&[9.0, 10.0, 11.0, 12.0]));
    let args = vec![
        Arg::Bf16(q),
        Arg::Bf16(k),
        Arg::Bf16(v),
        Arg::Bf16Mut(vec![bf16::ZERO; 3 * t * qkv]),
        Arg::U32(t as u32),
        Arg::U32(qkv as u32),
    ];
    let packed = launch("kda_layer_ops", "kda_pack_qkv_bf16", args).remove(0).bf16();
    let want = [1.0, 2.0, 5.0, 6.0, 9.0, 10.0, 3.0, 4.0, 7.0, 8.0, 11.0, 12.0];
    assert_eq!(packed, bf16s(&want));

    // Split into buffers one row longer than t: the pad row stays as it was.
    let pad = |x: f32| Arg::F32Mut(vec![x; (t + 1) * qkv]);
    let args =
        vec![Arg::Bf16(packed), pad(-1.0), pad(-2.0), pad(-3.0), Arg::U32(t as u32), Arg::U32(qkv as u32)];
    let parts: Vec<Vec<f32>> =
        launch("kda_layer_ops", "kda_split_widen", args).into_iter().map(Out::f32).collect();
    assert_eq!(parts[0], [1.0, 2.0, 3.0, 4.0, -1.0, -1.0]);
    assert_eq!(parts[1], [5.0, 6.0, 7.0, 8.0, -2.0, -2.0]);
    assert_eq!(parts[2], [9.0, 10.0, 11.0, 12.0, -3.0, -3.0]);
}

#[test]
fn split_and_pack_refuse_short_buffers() {
    let args = vec![
        Arg::Bf16(vec![bf16::ZERO; 12]),
        Arg::F32Mut(vec![0.0; 4]),
        Arg::F32Mut(vec![0.0; 3]),
        Arg::F32Mut(vec![0.0; 4]),
        Arg::U32(2),
        Arg::U32(2),
    ];
    let reason = refusal("kda_layer_ops", "kda_split_widen", args);
    assert_eq!(reason, "`k [t, qkv]` holds 3 elements, needs 2×2 = 4");
    let args = vec![
        Arg::Bf16(vec![bf16::ZERO; 4]),
        Arg::Bf16(vec![bf16::ZERO; 4]),
        Arg::Bf16(vec![bf16::ZERO; 4]),
        Arg::Bf16Mut(vec![bf16::ZERO; 11]),
        Arg::U32(2),
        Arg::U32(2),
    ];
    let reason = refusal("kda_layer_ops", "kda_pack_qkv_bf16", args);
    assert_eq!(reason, "`dst [t, 3·qkv]` holds 11 elements, needs 2×3×2 = 12");
}
