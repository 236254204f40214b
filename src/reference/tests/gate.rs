//! The forget gate's raw inputs, which `chunk_prepare` and the recurrent kernels take, and the
//! gate laws in f64 for the recurrence the tests compare them with.

use half::bf16;

use super::*;

/// The forget gate's raw inputs of `t` tokens of `h` heads of dim `d`: the gate's up projection
/// `g_raw [t, h, d]`, per-channel biases `dt_bias [h·d]`, per-head rates `a_log [h]`, β's
/// projection `b_raw [t, h]` (packed), and the law (0 bounded, 1 softplus) with its bound.
#[derive(Clone)]
pub(super) struct RawGate {
    pub(super) g_raw: Vec<bf16>,
    pub(super) dt_bias: Vec<f32>,
    pub(super) a_log: Vec<f32>,
    pub(super) b_raw: Vec<bf16>,
    pub(super) law: u32,
    pub(super) lower_bound: f32,
}

impl RawGate {
    /// Pre-activations `e^{a_log}·(g_raw + dt_bias)` within about [−6.1, −1.2], where either law
    /// decays a step by between 0.01 and 1.5 in the log, and β = σ(b_raw) in (0.04, 0.96).
    pub(super) fn random(rng: &mut Rng, (t, h, d): (usize, usize, usize), law: u32) -> Self {
        Self {
            g_raw: rng.bf16s(t * h * d, -0.5, 0.5),
            dt_bias: rng.f32s(h * d, -5.0, -1.5),
            a_log: rng.f32s(h, -0.2, 0.2),
            b_raw: rng.bf16s(t * h, -3.0, 3.0),
            law,
            lower_bound: -5.0,
        }
    }

    /// One head of `d` channels over `b_raw.len()` tokens, under the bounded law: log-decay `gate`
    /// in channel 0 and 0 in the others, exactly, and β = σ(b_raw). (At pre-activation 0 the law
    /// gives lower_bound·σ(0) = lower_bound / 2; at −200 it gives 0, as e^200 overflows f32.)
    pub(super) fn channel_zero(gate: f32, b_raw: &[f32], d: usize) -> Self {
        let mut dt_bias = vec![-200.0; d];
        dt_bias[0] = 0.0;
        Self {
            g_raw: vec![bf16::ZERO; b_raw.len() * d],
            dt_bias,
            a_log: vec![0.0],
            b_raw: bf16s(b_raw),
            law: 0,
            lower_bound: 2.0 * gate,
        }
    }

    /// The `[t, h, d]` log-decays in f64.
    pub(super) fn gates64(&self, h: usize, d: usize) -> Vec<f64> {
        let lower_bound = f64::from(self.lower_bound);
        let gate = |(i, g): (usize, &bf16)| {
            let channel = i % (h * d);
            let rate = f64::from(self.a_log[channel / d]).exp();
            let x = g.to_f64() + f64::from(self.dt_bias[channel]);
            match self.law {
                0 => lower_bound * sigmoid64(rate * x),
                _ => -rate * x.exp().ln_1p(),
            }
        };
        self.g_raw.iter().enumerate().map(gate).collect()
    }

    /// The `[t, h]` betas in f64.
    pub(super) fn betas64(&self) -> Vec<f64> {
        self.b_raw.iter().map(|b| sigmoid64(b.to_f64())).collect()
    }
}
