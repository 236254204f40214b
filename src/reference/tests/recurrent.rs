//! kda_recurrent_decode_bf16 and its _smem twin, and the f64 token recurrence the chunk tests
//! share.

use half::bf16;

use super::*;

/// Inputs of `t` tokens of `h` heads of dim `d`, as the block produces them: q and k
/// L2-normalised then rounded to bf16, v bf16, log-decay gates < 0, β in (0, 1), and a non-zero
/// initial state.
pub(super) struct KdaInputs {
    pub(super) q: Vec<bf16>,
    pub(super) k: Vec<bf16>,
    pub(super) v: Vec<bf16>,
    pub(super) gate: Vec<f32>,
    pub(super) beta: Vec<f32>,
    pub(super) state: Vec<f32>,
}

impl KdaInputs {
    pub(super) fn new(seed: u64, t: usize, h: usize, d: usize) -> Self {
        let mut rng = Rng::new(seed);
        let unit_rows = |rng: &mut Rng| -> Vec<bf16> {
            let raw = rng.f32s(t * h * d, -1.0, 1.0);
            raw.chunks(d)
                .flat_map(|row| {
                    let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
                    row.iter().map(move |x| bf16::from_f32(x / norm))
                })
                .collect()
        };
        let q = unit_rows(&mut rng);
        let k = unit_rows(&mut rng);
        Self {
            q,
            k,
            v: rng.bf16s(t * h * d, -1.0, 1.0),
            gate: rng.f32s(t * h * d, -1.5, -0.01),
            beta: rng.f32s(t * h, 0.05, 0.95),
            state: rng.f32s(h * d * d, -0.1, 0.1),
        }
    }
}

pub(super) fn scale(d: usize) -> f32 {
    1.0 / (d as f32).sqrt()
}

/// The ABI recurrence in f64, token by token: `[t, h, d]` outputs and the final `[h, d, d]` state.
pub(super) fn recurrence64(inputs: &KdaInputs, t: usize, h: usize, d: usize) -> (Vec<f64>, Vec<f64>) {
    let (q, k, v) = (widen(&inputs.q), widen(&inputs.k), widen(&inputs.v));
    let (gate, beta) = (widen_f32(&inputs.gate), widen_f32(&inputs.beta));
    let scale = f64::from(scale(d));
    let mut state = widen_f32(&inputs.state);
    let mut out = vec![0.0; t * h * d];
    for tau in 0..t {
        for head in 0..h {
            let row = (tau * h + head) * d;
            let s = &mut state[head * d * d..(head + 1) * d * d];
            for kk in 0..d {
                let alpha = gate[row + kk].exp();
                s[kk * d..(kk + 1) * d].iter_mut().for_each(|x| *x *= alpha);
            }
            let b = beta[tau * h + head];
            let delta: Vec<f64> = (0..d)
                .map(|vv| {
                    let predicted: f64 = (0..d).map(|kk| s[kk * d + vv] * k[row + kk]).sum();
                    b * (v[row + vv] - predicted)
                })
                .collect();
            for kk in 0..d {
                for vv in 0..d {
                    s[kk * d + vv] += k[row + kk] * delta[vv];
                }
            }
            for vv in 0..d {
                out[row + vv] = (0..d).map(|kk| s[kk * d + vv] * q[row + kk] * scale).sum();
            }
        }
    }
    (out, state)
}

fn step_args(inputs: &KdaInputs, state: &[f32], tau: usize, h: usize, d: usize) -> Vec<Arg> {
    let rows = tau * h * d..(tau + 1) * h * d;
    vec![
        Arg::Bf16(inputs.q[rows.clone()].to_vec()),
        Arg::Bf16(inputs.k[rows.clone()].to_vec()),
        Arg::Bf16(inputs.v[rows.clone()].to_vec()),
        Arg::F32(inputs.gate[rows].to_vec()),
        Arg::F32(inputs.beta[tau * h..(tau + 1) * h].to_vec()),
        Arg::F32Mut(state.to_vec()),
        Arg::F32Mut(vec![0.0; h * d]),
        Arg::U32(h as u32),
        Arg::U32(d as u32),
        Arg::Scalar(scale(d)),
    ]
}

/// `t` decode steps through `entry`: the `[t, h, d]` outputs and the final state.
pub(super) fn decode_steps(
    entry: &str,
    inputs: &KdaInputs,
    t: usize,
    h: usize,
    d: usize,
) -> (Vec<f32>, Vec<f32>) {
    let mut state = inputs.state.clone();
    let mut out = Vec::with_capacity(t * h * d);
    for tau in 0..t {
        let mut outs = launch("kda_recurrent", entry, step_args(inputs, &state, tau, h, d));
        out.extend(outs.remove(1).f32());
        state = outs.remove(0).f32();
    }
    (out, state)
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn recurrent_matches_the_f64_recurrence_for_every_head_dim() {
    for (t, h, d) in [(4, 2, 32), (2, 1, 64), (2, 1, 128)] {
        let inputs = KdaInputs::new(30 + d as u64, t, h, d);
        let (out, state) = decode_steps("kda_recurrent_decode_bf16", &inputs, t, h, d);
        let (want_out, want_state) = recurrence64(&inputs, t, h, d);
        assert_close(&format!("recurrent out, d = {d}"), &out, &want_out, 1e-5);
        assert_close(&format!("recurrent state, d = {d}"), &state, &want_state, 1e-5);
    }
}

#[test]
fn recurrent_smem_is_bit_identical_to_recurrent() {
    let (t, h, d) = (3, 2, 32);
    let inputs = KdaInputs::new(35, t, h, d);
    let (out, state) = decode_steps("kda_recurrent_decode_bf16", &inputs, t, h, d);
    let (smem_out, smem_state) = decode_steps("kda_recurrent_decode_bf16_smem", &inputs, t, h, d);
    assert_eq!(bits(&out), bits(&smem_out));
    assert_eq!(bits(&state), bits(&smem_state));
}

#[test]
fn recurrent_hand_case() {
    // d = 1, no decay: S' = 2, δ = 0.5·(3 − 2·1) = 0.5, S = 2 + 1·0.5 = 2.5, out = 2.5·1.
    let inputs = KdaInputs {
        q: vec![bf16::ONE],
        k: vec![bf16::ONE],
        v: vec![bf16::from_f32(3.0)],
        gate: vec![0.0],
        beta: vec![0.5],
        state: vec![2.0],
    };
    let mut args = step_args(&inputs, &inputs.state, 0, 1, 1);
    args[9] = Arg::Scalar(1.0);
    let outs = launch("kda_recurrent", "kda_recurrent_decode_bf16", args);
    assert_eq!(outs.into_iter().map(Out::f32).collect::<Vec<_>>(), [[2.5], [2.5]]);
}

#[test]
fn recurrent_refuses_a_short_state() {
    let (h, d) = (2, 8);
    let inputs = KdaInputs::new(36, 1, h, d);
    let reason = refusal(
        "kda_recurrent",
        "kda_recurrent_decode_bf16_smem",
        step_args(&inputs, &inputs.state[1..], 0, h, d),
    );
    assert_eq!(reason, "`state [h, d, d]` holds 127 elements, needs 2×8×8 = 128");
}
