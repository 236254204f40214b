//! The forget gate as a per-channel log-decay `g ≤ 0`, under either law, and beta, the sigmoid of
//! the b projection. They have no kernel of their own: the kernels that consume them
//! (`kda_chunk_prepare` at prefill, the recurrent pair at decode) take the raw projections and
//! apply the laws where they read them, all through [`ForgetGate`].

use std::borrow::Cow;

use half::bf16;
use kda_runtime::cpu::{CpuArgs, KernelError};

use super::{packed_rows, require, sigmoid};

/// The gate law, argument `law` of its kernels.
#[derive(Clone, Copy)]
enum Law {
    /// `law = 0`, GLM-5.3-Flash: `lower_bound · σ(e^{a_log} · x)`.
    Bounded { lower_bound: f32 },
    /// `law = 1`, Kimi-Linear-48B: `−e^{a_log} · softplus(x)`.
    Softplus,
}

impl Law {
    /// The gate of pre-activation `x = g_raw + dt_bias` on a head of rate `e^{a_log}`.
    fn gate(self, rate: f32, x: f32) -> f32 {
        match self {
            Law::Bounded { lower_bound } => lower_bound * sigmoid(rate * x),
            // Above 20, ln(1 + e^x) equals x in f32, and e^x would overflow further up. `ln_1p`
            // keeps ln(1 + e^x) accurate where e^x is tiny and 1 + e^x would round to 1.
            Law::Softplus => {
                let softplus = if x > 20.0 { x } else { x.exp().ln_1p() };
                -rate * softplus
            }
        }
    }
}

/// Where a kernel's gate arguments sit: the first of its four buffers (`g_raw`, `dt_bias`,
/// `a_log`, `b_raw`, in that order) and its scalars `ldb`, `law` and `lower_bound`.
pub(super) struct GateArgs {
    pub(super) buffers: usize,
    pub(super) ldb: usize,
    pub(super) law: usize,
    pub(super) lower_bound: usize,
}

/// The raw gate inputs of one launch, over `rows` rows of `h` heads of `d` channels: `g_raw
/// [rows, h, d]`, `dt_bias [h·d]`, `a_log [h]`, `b_raw [rows, h]` (rows `ldb` apart in the
/// buffer), and the law.
pub(super) struct ForgetGate<'a> {
    g_raw: &'a [bf16],
    dt_bias: &'a [f32],
    a_log: &'a [f32],
    /// Packed `[rows, h]`.
    b_raw: Cow<'a, [bf16]>,
    law: Law,
    h: usize,
    d: usize,
}

impl<'a> ForgetGate<'a> {
    /// Takes the gate arguments at `at` of a launch over `(rows, h, d)`, refusing an unknown law
    /// and buffers too short for them.
    pub(super) fn read(
        args: &mut CpuArgs<'a>,
        at: GateArgs,
        (rows, h, d): (usize, usize, usize),
    ) -> Result<Self, KernelError> {
        let (g_raw, dt_bias) = (args.const_bf16(at.buffers)?, args.const_f32(at.buffers + 1)?);
        let (a_log, b_raw) = (args.const_f32(at.buffers + 2)?, args.const_bf16(at.buffers + 3)?);
        let ldb = args.u32(at.ldb)? as usize;
        let law = match args.u32(at.law)? {
            0 => Law::Bounded { lower_bound: args.f32(at.lower_bound)? },
            1 => Law::Softplus,
            other => {
                return Err(KernelError::new(format!(
                    "law = {other} is neither 0 (bounded) nor 1 (softplus)"
                )));
            }
        };
        require("g_raw [t, h, d]", g_raw.len(), &[rows, h, d])?;
        require("dt_bias [h·d]", dt_bias.len(), &[h, d])?;
        require("a_log [h]", a_log.len(), &[h])?;
        let b_raw = packed_rows("b_raw [t, h], rows ldb apart", b_raw, (rows, h, ldb))?;
        Ok(Self { g_raw, dt_bias, a_log, b_raw, law, h, d })
    }

    /// The `d` log-decays of `head` in `row`.
    pub(super) fn log_decays(&self, row: usize, head: usize) -> Vec<f32> {
        let (d, rate) = (self.d, self.a_log[head].exp());
        let channels = head * d..(head + 1) * d;
        let g_raw = &self.g_raw[row * self.h * d..][channels.clone()];
        g_raw
            .iter()
            .zip(&self.dt_bias[channels])
            .map(|(g, bias)| self.law.gate(rate, g.to_f32() + bias))
            .collect()
    }

    /// β of `head` in `row`.
    pub(super) fn beta(&self, row: usize, head: usize) -> f32 {
        sigmoid(self.b_raw[row * self.h + head].to_f32())
    }
}
