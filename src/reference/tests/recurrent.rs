//! kda_recurrent_decode_bf16 and its _regs twin, and the f64 token recurrence the chunk tests
//! share.

use half::bf16;

use super::gate::RawGate;
use super::*;

/// Inputs of `t` tokens of `h` heads of dim `d`, as the block produces them: q and k
/// L2-normalised then rounded to bf16, v bf16, the forget gate's raw inputs, and a non-zero
/// initial state.
pub(super) struct KdaInputs {
    pub(super) q: Vec<bf16>,
    pub(super) k: Vec<bf16>,
    pub(super) v: Vec<bf16>,
    pub(super) gate: RawGate,
    pub(super) state: Vec<f32>,
}

impl KdaInputs {
    /// Under the bounded gate law.
    pub(super) fn new(seed: u64, t: usize, h: usize, d: usize) -> Self {
        Self::with_law(seed, t, h, d, 0)
    }

    /// Under gate law `law` (0 bounded, 1 softplus).
    pub(super) fn with_law(seed: u64, t: usize, h: usize, d: usize, law: u32) -> Self {
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
            gate: RawGate::random(&mut rng, (t, h, d), law),
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
    let (gate, beta) = (inputs.gate.gates64(h, d), inputs.gate.betas64());
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

/// Which of the two recurrent entries a decode step launches.
#[derive(Clone, Copy, Debug)]
pub(super) enum Recurrent {
    /// `recurrent`.
    Plain,
    /// `recurrent_regs`.
    Regs,
}

/// The decode step of token `tau` through `variant` on a state holding `state`, the output
/// zeroed: the state and the output after it.
fn try_step(
    variant: Recurrent,
    inputs: &KdaInputs,
    state: &[f32],
    tau: usize,
    sizes: [usize; 2],
    scale: f32,
) -> Launched<(Vec<f32>, Vec<f32>)> {
    let [h, d] = sizes;
    let rows = tau * h * d..(tau + 1) * h * d;
    let dev = Device::new();
    let packed: Vec<bf16> =
        [&inputs.q, &inputs.k, &inputs.v].iter().flat_map(|x| x[rows.clone()].to_vec()).collect();
    let (qkv, slot) = (dev.up(&packed), dev.up(&[0u32]));
    let raw = &inputs.gate;
    let (g_raw, b_raw) = (dev.up(&raw.g_raw[rows]), dev.up(&raw.b_raw[tau * h..(tau + 1) * h]));
    let (dt_bias, a_log) = (dev.up(&raw.dt_bias), dev.up(&raw.a_log));
    let (mut state, mut out) = (dev.up(state), dev.up(&vec![0.0f32; h * d]));
    let [h, d] = u32s(sizes);
    let geometry = launch::recurrent(h, d, 1);
    // The two entries take the same arguments, each in a struct of its own.
    macro_rules! args {
        ($entry:ident) => {
            // A batch of one, the state a pool of one slot.
            glm5next_kda::$entry {
                qkv: qkv.view().into(),
                g_raw: g_raw.view().into(),
                dt_bias: dt_bias.view().into(),
                a_log: a_log.view().into(),
                b_raw: b_raw.view().into(),
                pool: state.view_mut().into(),
                slot: slot.view().into(),
                out: out.view_mut().into(),
                b: 1,
                slots: 1,
                h,
                d,
                ldb: h,
                law: raw.law,
                scale,
                lower_bound: raw.lower_bound,
            }
        };
    }
    let result = match variant {
        Recurrent::Plain => dev.kernels.launch_recurrent(&dev.gpu, geometry, args!(recurrent)),
        Recurrent::Regs => dev.kernels.launch_recurrent_regs(&dev.gpu, geometry, args!(recurrent_regs)),
    };
    Launched { result, written: (dev.down(&state), dev.down(&out)) }
}

/// `t` decode steps through `variant`: the `[t, h, d]` outputs and the final state.
pub(super) fn decode_steps(
    variant: Recurrent,
    inputs: &KdaInputs,
    t: usize,
    h: usize,
    d: usize,
) -> (Vec<f32>, Vec<f32>) {
    let mut state = inputs.state.clone();
    let mut out = Vec::with_capacity(t * h * d);
    for tau in 0..t {
        let (next, step_out) = try_step(variant, inputs, &state, tau, [h, d], scale(d)).ok();
        out.extend(step_out);
        state = next;
    }
    (out, state)
}

/// `values.len()` rows of `d` channels, each `values[i]` in channel 0 and zero elsewhere: a
/// hand case of `d = 1` embedded in a head dim the kernels take.
pub(super) fn first_channel(values: &[f32], d: usize) -> Vec<f32> {
    values.iter().flat_map(|&x| std::iter::once(x).chain(std::iter::repeat_n(0.0, d - 1))).collect()
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn recurrent_matches_the_f64_recurrence_for_every_head_dim_and_gate_law() {
    for ((t, h, d), law) in [((4, 2, 32), 0), ((3, 2, 32), 1), ((2, 1, 64), 1), ((2, 1, 128), 0)] {
        let inputs = KdaInputs::with_law(30 + d as u64 + u64::from(law), t, h, d, law);
        let (out, state) = decode_steps(Recurrent::Plain, &inputs, t, h, d);
        let (want_out, want_state) = recurrence64(&inputs, t, h, d);
        assert_close(&format!("recurrent out, d = {d}, law {law}"), &out, &want_out, 1e-5);
        assert_close(&format!("recurrent state, d = {d}, law {law}"), &state, &want_state, 1e-5);
    }
}

#[test]
fn recurrent_regs_is_bit_identical_to_recurrent() {
    let (t, h, d) = (3, 2, 32);
    for law in [0, 1] {
        let inputs = KdaInputs::with_law(35, t, h, d, law);
        let (out, state) = decode_steps(Recurrent::Plain, &inputs, t, h, d);
        let (regs_out, regs_state) = decode_steps(Recurrent::Regs, &inputs, t, h, d);
        assert_eq!(bits(&out), bits(&regs_out), "law {law}");
        assert_eq!(bits(&state), bits(&regs_state), "law {law}");
    }
}

#[test]
fn recurrent_hand_case() {
    // In channel 0, d = 1 alone, no decay: S' = 2, δ = 0.5·(3 − 2·1) = 0.5, S = 2 + 1·0.5 = 2.5,
    // out = 2.5·1. The other channels stay 0 (v is 0 there, so δ is too).
    let d = 32;
    let inputs = KdaInputs {
        q: bf16s(&first_channel(&[1.0], d)),
        k: bf16s(&first_channel(&[1.0], d)),
        v: bf16s(&first_channel(&[3.0], d)),
        gate: RawGate::channel_zero(0.0, &[0.0], d),
        state: first_channel(&[2.0], d * d),
    };
    let (state, out) = try_step(Recurrent::Plain, &inputs, &inputs.state, 0, [1, d], 1.0).ok();
    assert_eq!(state, first_channel(&[2.5], d * d));
    assert_eq!(out, first_channel(&[2.5], d));
}

#[test]
fn recurrent_refuses_a_short_state_and_an_unsupported_head_dim() {
    let (h, d) = (2, 32);
    let inputs = KdaInputs::new(36, 1, h, d);
    let short = &inputs.state[1..];
    let reason = try_step(Recurrent::Regs, &inputs, short, 0, [h, d], scale(d))
        .refused(&(short.to_vec(), vec![0.0; h * d]));
    assert_eq!(
        reason,
        "`glm5next_kda.recurrent_regs.pool`: expected at least 2048 elements (`slots*h*d*d`), found a view of 2047 elements"
    );
    let (h, d) = (1, 16);
    let inputs = KdaInputs::new(37, 1, h, d);
    let reason = try_step(Recurrent::Plain, &inputs, &inputs.state, 0, [h, d], scale(d))
        .refused(&(inputs.state.clone(), vec![0.0; h * d]));
    let refusal = "`glm5next_kda.recurrent`: the launch does not meet `d == 32 || d == 64 || d == 128`";
    assert!(reason.starts_with(refusal), "{reason}");
}

#[test]
fn recurrent_refuses_an_unknown_gate_law() {
    let (h, d) = (2, 32);
    let mut inputs = KdaInputs::new(38, 1, h, d);
    inputs.gate.law = 2;
    let reason = try_step(Recurrent::Regs, &inputs, &inputs.state, 0, [h, d], scale(d))
        .refused(&(inputs.state.clone(), vec![0.0; h * d]));
    let refusal = "`glm5next_kda.recurrent_regs`: the launch does not meet `law <= 1` (b = 1, slots = 1, h = 2, d = 32, ldb = 2, law = 2, ";
    assert!(reason.starts_with(refusal), "{reason}");
}
