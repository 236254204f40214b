//! `kda_recurrent::kda_recurrent_decode_bf16` and `kda_recurrent_decode_bf16_regs`: one decode
//! step of the gated delta rule for each of a batch of sequences, all heads, each state in its
//! slot of a pool. Both run every state column through [`update_column`],
//! which is what makes them bit-identical.

use half::bf16;
use kda_runtime::cpu::{CpuArgs, CpuBackend, KernelError};
use rayon::prelude::*;

use super::kda_gate::{ForgetGate, GateArgs};
use super::{batch_slots, pool_rows, require};
use crate::kernels::glm5next_kda;

pub(super) fn register(gpu: CpuBackend) -> CpuBackend {
    gpu.with_kernel(glm5next_kda::recurrent::ENTRY, |args| decode(args, Column::InPlace))
        .with_kernel(glm5next_kda::recurrent_regs::ENTRY, |args| decode(args, Column::Staged))
}

/// How a variant reaches a state column: where the CUDA kernels differ (global memory twice, or
/// once, the column held in registers between), with the arithmetic left identical.
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

/// `qkv [b, 3·h·d], g_raw [b, h, d], dt_bias [h·d], a_log [h], b_raw [b, h] (rows ldb apart),
/// pool [slots, h, d, d], slot [b], out [b, h, d], b, slots, h, d, ldb, law, scale, lower_bound`:
/// row r's state in pool slot `slot[r]`; a row without a slot (see [`batch_slots`]) writes
/// nothing.
fn decode(mut args: CpuArgs<'_>, column: Column) -> Result<(), KernelError> {
    let qkv = args.const_bf16(0)?;
    let (pool, slot, out) = (args.mut_f32(5)?, args.const_u32(6)?, args.mut_f32(7)?);
    let (b, slots) = (args.u32(8)? as usize, args.u32(9)? as usize);
    let (h, d) = (args.u32(10)? as usize, args.u32(11)? as usize);
    let gate_args = GateArgs { buffers: 1, ldb: 12, law: 13, lower_bound: 15 };
    let forget = ForgetGate::read(&mut args, gate_args, (b, h, d))?;
    let scale = args.f32(14)?;
    require("qkv [b, 3, h, d]", qkv.len(), &[b, 3, h, d])?;
    require("pool [slots, h, d, d]", pool.len(), &[slots, h, d, d])?;
    require("out [b, h, d]", out.len(), &[b, h, d])?;
    let rows = batch_slots(slot, b, slots)?;
    let (hd, hdd) = (h * d, h * d * d);
    let states = pool_rows(&mut pool[..slots * hdd], hdd, &rows);
    // One work item per (row, head): its state, its output and where its inputs are.
    let items: Vec<_> = states
        .into_iter()
        .zip(out[..b * hd].chunks_mut(hd.max(1)))
        .enumerate()
        .filter_map(|(row, (state, out))| Some((row, state?, out)))
        .flat_map(|(row, state, out)| {
            state
                .chunks_mut((d * d).max(1))
                .zip(out.chunks_mut(d.max(1)))
                .enumerate()
                .map(move |(head, (state, out))| (row, head, state, out))
        })
        .collect();
    items.into_par_iter().for_each(|(row, head, state, out)| {
        let packed = &qkv[row * 3 * hd..][..3 * hd];
        let at = head * d..(head + 1) * d;
        let step = Step {
            decay: forget.log_decays(row, head).into_iter().map(f32::exp).collect(),
            k: widen(&packed[hd..][at.clone()]),
            q_scaled: packed[at.clone()].iter().map(|q| q.to_f32() * scale).collect(),
            beta: forget.beta(row, head),
        };
        let v = widen(&packed[2 * hd..][at]);
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
    });
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
