//! `kda_gate::kda_gate_bf16`: the forget gate as a per-channel log-decay `g ≤ 0`, under either law,
//! and beta, the sigmoid of the b projection.

use kda_runtime::cpu::{CpuArgs, CpuBackend, KernelError};
use rayon::prelude::*;

use super::{packed_rows, par_rows_mut, require, sigmoid};
use crate::kernels::glm5next_kda;

pub(super) fn register(gpu: CpuBackend) -> CpuBackend {
    gpu.with_kernel(glm5next_kda::gate::ENTRY, kda_gate_bf16)
}

/// The gate law, argument `law` of the kernel.
#[derive(Clone, Copy)]
enum Law {
    /// `law = 0`, GLM-5.3-Flash: `lower_bound · σ(e^{a_log} · x)`.
    Bounded { lower_bound: f32 },
    /// `law = 1`, Kimi-Linear-48B: `−e^{a_log} · softplus(x)`.
    Softplus,
}

impl Law {
    /// The gate of pre-activation `x = g_raw + dt_bias` on a head with `a_log`.
    fn gate(self, a_log: f32, x: f32) -> f32 {
        match self {
            Law::Bounded { lower_bound } => lower_bound * sigmoid(a_log.exp() * x),
            // Above 20, ln(1 + e^x) equals x in f32, and e^x would overflow further up. `ln_1p`
            // keeps ln(1 + e^x) accurate where e^x is tiny and 1 + e^x would round to 1.
            Law::Softplus => {
                let softplus = if x > 20.0 { x } else { x.exp().ln_1p() };
                -a_log.exp() * softplus
            }
        }
    }
}

/// `g_raw [t, h, d], dt_bias [h·d], a_log [h], b_raw [t, h] (rows ldb apart), gate [t, h, d],
/// beta [t, h], t, h, d, ldb, law, lower_bound`.
fn kda_gate_bf16(mut args: CpuArgs<'_>) -> Result<(), KernelError> {
    let (g_raw, dt_bias, a_log) = (args.const_bf16(0)?, args.const_f32(1)?, args.const_f32(2)?);
    let (b_raw, gate, beta) = (args.const_bf16(3)?, args.mut_f32(4)?, args.mut_f32(5)?);
    let (t, h, d) = (args.u32(6)? as usize, args.u32(7)? as usize, args.u32(8)? as usize);
    let ldb = args.u32(9)? as usize;
    let law = match args.u32(10)? {
        0 => Law::Bounded { lower_bound: args.f32(11)? },
        1 => Law::Softplus,
        other => {
            return Err(KernelError::new(format!("law = {other} is neither 0 (bounded) nor 1 (softplus)")));
        }
    };
    require("g_raw [t, h, d]", g_raw.len(), &[t, h, d])?;
    require("dt_bias [h·d]", dt_bias.len(), &[h, d])?;
    require("a_log [h]", a_log.len(), &[h])?;
    require("gate [t, h, d]", gate.len(), &[t, h, d])?;
    require("beta [t, h]", beta.len(), &[t, h])?;
    let b_raw = packed_rows("b_raw [t, h], rows ldb apart", b_raw, (t, h, ldb))?;
    beta[..t * h].par_iter_mut().zip(&b_raw[..]).for_each(|(beta, b)| *beta = sigmoid(b.to_f32()));
    let row = h * d;
    par_rows_mut(gate, t, row).zip(g_raw[..t * row].par_chunks(row.max(1))).for_each(|(gate, g_raw)| {
        for (channel, (gate, g)) in gate.iter_mut().zip(g_raw).enumerate() {
            *gate = law.gate(a_log[channel / d], g.to_f32() + dt_bias[channel]);
        }
    });
    Ok(())
}
