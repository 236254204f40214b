//! `kda_recurrent::kda_recurrent_decode_bf16` and `kda_recurrent_decode_bf16_smem`: one decode
//! step of the gated delta rule, all heads. Both run every state column through [`update_column`],
//! which is what makes them bit-identical.

use half::bf16;
use kda_runtime::cpu::{CpuArgs, CpuBackend, KernelError};
use rayon::prelude::*;

use super::{par_rows_mut, require};
use crate::kernels::glm5next_kda;

pub(super) fn register(gpu: CpuBackend) -> CpuBackend {
    gpu.with_kernel(glm5next_kda::recurrent::ENTRY, |args| decode(args, Column::InPlace))
        .with_kernel(glm5next_kda::recurrent_smem::ENTRY, |args| decode(args, Column::Staged))
}

/// How a variant reaches a state column: where the CUDA kernels differ (global memory twice, or
/// once through shared memory), with the arithmetic left identical.
#[derive(Clone, Copy)]
enum Column {
    /// Both passes read and write the column in the state itself.
    InPlace,
    /// The column is copied out once, updated in a scratch buffer and copied back once.
    Staged,
}

/// The per-head inputs every column of one step reads, staged once.
struct Step {
    /// `e^{g[k]}`, the decay along k.
    decay: Vec<f32>,
    /// `f32(k[k])`.
    k: Vec<f32>,
    /// `f32(q[k])·scale`.
    q_scaled: Vec<f32>,
    beta: f32,
}

/// `q, k, v [h, d], gate [h, d], beta [h], state [h, d, d], out [h, d], h, d, scale`.
fn decode(mut args: CpuArgs<'_>, column: Column) -> Result<(), KernelError> {
    let (q, k, v) = (args.const_bf16(0)?, args.const_bf16(1)?, args.const_bf16(2)?);
    let (gate, beta) = (args.const_f32(3)?, args.const_f32(4)?);
    let (state, out) = (args.mut_f32(5)?, args.mut_f32(6)?);
    let (h, d) = (args.u32(7)? as usize, args.u32(8)? as usize);
    let scale = args.f32(9)?;
    for (name, len) in [
        ("q [h, d]", q.len()),
        ("k [h, d]", k.len()),
        ("v [h, d]", v.len()),
        ("gate [h, d]", gate.len()),
        ("out [h, d]", out.len()),
    ] {
        require(name, len, &[h, d])?;
    }
    require("beta [h]", beta.len(), &[h])?;
    require("state [h, d, d]", state.len(), &[h, d, d])?;
    par_rows_mut(state, h, d * d).zip(par_rows_mut(out, h, d)).enumerate().for_each(
        |(head, (state, out))| {
            let row = head * d..(head + 1) * d;
            let step = Step {
                decay: gate[row.clone()].iter().map(|g| g.exp()).collect(),
                k: widen(&k[row.clone()]),
                q_scaled: q[row.clone()].iter().map(|q| q.to_f32() * scale).collect(),
                beta: beta[head],
            };
            let v = widen(&v[row]);
            match column {
                Column::InPlace => {
                    for (col, out) in out.iter_mut().enumerate() {
                        *out = update_column(&mut state[col..], d, &step, v[col]);
                    }
                }
                Column::Staged => {
                    let mut scratch = vec![0.0; d];
                    for (col, out) in out.iter_mut().enumerate() {
                        let strided = state[col..].iter().step_by(d);
                        scratch.iter_mut().zip(strided).for_each(|(s, x)| *s = *x);
                        *out = update_column(&mut scratch, 1, &step, v[col]);
                        let strided = state[col..].iter_mut().step_by(d);
                        strided.zip(&scratch).for_each(|(x, s)| *x = *s);
                    }
                }
            }
        },
    );
    Ok(())
}

fn widen(values: &[bf16]) -> Vec<f32> {
    values.iter().map(|x| x.to_f32()).collect()
}

/// Updates one state column `S[·][v]` (element k at `column[k·stride]`) and returns `out[v]`, in
/// the reference order: pass 1 over k ascending decays, stores and accumulates `S'·k`; then
/// `δ = β·(v − Σ)`; pass 2 over k ascending adds `k·δ`, stores and accumulates with `q·scale`.
fn update_column(column: &mut [f32], stride: usize, step: &Step, v: f32) -> f32 {
    let mut kv = 0.0;
    for ((s, decay), k) in column.iter_mut().step_by(stride).zip(&step.decay).zip(&step.k) {
        *s *= decay;
        kv += *s * k;
    }
    let delta = step.beta * (v - kv);
    let mut out = 0.0;
    for ((s, k), q) in column.iter_mut().step_by(stride).zip(&step.k).zip(&step.q_scaled) {
        *s += k * delta;
        out += *s * q;
    }
    out
}
