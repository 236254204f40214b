//! `causal_conv1d::causal_conv1d_update_l2norm` (decode: one token, with the q/k L2 norm) and
//! `causal_conv1d::causal_conv1d_update_prefill` (t tokens, no norm): the depthwise causal conv
//! with SiLU, carrying a `[dim, W]` state of the last W inputs.

use half::bf16;
use kda_runtime::cpu::{CpuArgs, CpuBackend, KernelError};
use rayon::prelude::*;

use super::{batch_slots, l2_norm, par_rows_mut, pool_rows, require, silu};
use crate::kernels::glm5next_kda;

pub(super) fn register(gpu: CpuBackend) -> CpuBackend {
    gpu.with_kernel(glm5next_kda::conv_decode::ENTRY, causal_conv1d_update_l2norm)
        .with_kernel(glm5next_kda::conv_prefill::ENTRY, causal_conv1d_update_prefill)
}

/// `pool, slot, x, weight, out, b, slots, dim, width, qk_channels, head_dim, eps`: one token for
/// each of `b` rows, row r's window in pool slot `slot[r]` (`[slots, dim, W]`; a row without a
/// slot, see [`batch_slots`], writes nothing), then each `head_dim` group of the first
/// `qk_channels` channels divided by `sqrt(Σ y² + eps)` before the single bf16 rounding.
fn causal_conv1d_update_l2norm(mut args: CpuArgs<'_>) -> Result<(), KernelError> {
    let (pool, slot) = (args.mut_f32(0)?, args.const_u32(1)?);
    let (x, weight, out) = (args.const_bf16(2)?, args.const_bf16(3)?, args.mut_bf16(4)?);
    let (b, slots) = (args.u32(5)? as usize, args.u32(6)? as usize);
    let (dim, width) = (args.u32(7)? as usize, args.u32(8)? as usize);
    let (qk_channels, head_dim) = (args.u32(9)? as usize, args.u32(10)? as usize);
    let eps = args.f32(11)?;
    if head_dim == 0 || !qk_channels.is_multiple_of(head_dim) || qk_channels > dim {
        return Err(KernelError::new(format!(
            "qk_channels = {qk_channels} must be a multiple of head_dim = {head_dim} (≥ 1) \
             and at most dim = {dim}"
        )));
    }
    require("pool [slots, dim, width]", pool.len(), &[slots, dim, width])?;
    require("x [b, dim]", x.len(), &[b, dim])?;
    require("out [b, dim]", out.len(), &[b, dim])?;
    let rows = batch_slots(slot, b, slots)?;
    let states = pool_rows(&mut pool[..slots * dim * width], dim * width, &rows);
    let launches = states.into_iter().zip(x.chunks(dim.max(1))).zip(out[..b * dim].chunks_mut(dim.max(1)));
    for ((state, x), out) in launches {
        let Some(state) = state else { continue };
        ConvLaunch::new(state, x, weight, out, dim, width, 1)?.run(|y| {
            for head in y[..qk_channels].chunks_mut(head_dim) {
                let norm = l2_norm(head.iter().copied(), eps);
                head.iter_mut().for_each(|y| *y /= norm);
            }
        });
    }
    Ok(())
}

/// `state, x, weight, out, dim, width, t`: t tokens in order, no norm.
fn causal_conv1d_update_prefill(mut args: CpuArgs<'_>) -> Result<(), KernelError> {
    let (state, x) = (args.mut_f32(0)?, args.const_bf16(1)?);
    let (weight, out) = (args.const_bf16(2)?, args.mut_bf16(3)?);
    let (dim, width, t) = (args.u32(4)? as usize, args.u32(5)? as usize, args.u32(6)? as usize);
    ConvLaunch::new(state, x, weight, out, dim, width, t)?.run(|_| {});
    Ok(())
}

/// What both entries run on one sequence: `state [dim, W]`, `x [t, dim]`, `weight [dim, W]`,
/// `out [t, dim]`.
struct ConvLaunch<'a> {
    state: &'a mut [f32],
    x: &'a [bf16],
    weight: &'a [bf16],
    out: &'a mut [bf16],
    dim: usize,
    width: usize,
    t: usize,
}

impl<'a> ConvLaunch<'a> {
    /// Checks the buffers hold `t` tokens of `dim` channels.
    fn new(
        state: &'a mut [f32],
        x: &'a [bf16],
        weight: &'a [bf16],
        out: &'a mut [bf16],
        dim: usize,
        width: usize,
        t: usize,
    ) -> Result<Self, KernelError> {
        if width == 0 {
            return Err(KernelError::new("width must be at least 1"));
        }
        require("state [dim, width]", state.len(), &[dim, width])?;
        require("x [t, dim]", x.len(), &[t, dim])?;
        require("weight [dim, width]", weight.len(), &[dim, width])?;
        require("out [t, dim]", out.len(), &[t, dim])?;
        Ok(Self { state, x, weight, out, dim, width, t })
    }

    /// Computes each token's `silu(conv)` row in f32, lets `finish` adjust it (the decode's L2
    /// norm), rounds it once into `out`, then leaves the last W inputs in the state.
    fn run(self, finish: impl Fn(&mut [f32]) + Sync) {
        let Self { state, x, weight, out, dim, width, t } = self;
        if t == 0 {
            return;
        }
        let state = &mut state[..dim * width];
        let window = Window { old: state.to_vec(), x, dim, width };
        par_rows_mut(out, t, dim).enumerate().for_each(|(tau, row)| {
            let mut y: Vec<f32> = (0..dim)
                .map(|c| {
                    let taps = &weight[c * width..][..width];
                    // a = Σ_s window[s]·w[c][s], tap 0 on the oldest input, ascending s.
                    let a = taps
                        .iter()
                        .enumerate()
                        .fold(0.0, |acc, (s, tap)| acc + window.input(c, tau + s) * tap.to_f32());
                    silu(a)
                })
                .collect();
            finish(&mut y);
            row.iter_mut().zip(&y).for_each(|(out, &y)| *out = bf16::from_f32(y));
        });
        // After t tokens, slot s holds input t − 1 + s of the extended sequence.
        state.par_iter_mut().enumerate().for_each(|(i, slot)| {
            *slot = window.input(i / width, t - 1 + i % width);
        });
    }
}

/// One channel's inputs as a single sequence: the old state's slots 1..W (slot 0 is shifted out
/// unread), then the t new tokens. Token τ's window is positions τ..τ+W, so every token can be
/// computed independently of the shifts that precede it, with the same values the shifting
/// state would hold.
struct Window<'a> {
    old: Vec<f32>,
    x: &'a [bf16],
    dim: usize,
    width: usize,
}

impl Window<'_> {
    /// Position `i` of channel `c`'s extended input sequence.
    fn input(&self, c: usize, i: usize) -> f32 {
        let from_state = self.width - 1;
        if i < from_state {
            self.old[c * self.width + i + 1]
        } else {
            self.x[(i - from_state) * self.dim + c].to_f32()
        }
    }
}
