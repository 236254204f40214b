//! `causal_conv1d::causal_conv1d_update_l2norm` (decode: one token of a batch of sequences) and
//! `causal_conv1d::causal_conv1d_prefill_l2norm_split` (t tokens of one sequence, split into q,
//! k and v): the depthwise causal conv with SiLU, carrying a `[dim, W]` state of the last W
//! inputs, then the per-head L2 norm of the q and k channels.

use half::bf16;
use kda_runtime::cpu::{CpuArgs, CpuBackend, KernelError};
use rayon::prelude::*;

use super::{batch_slots, packed_rows, par_rows_mut, pool_rows, require, silu};
use crate::kernels::glm5next_kda;

pub(super) fn register(gpu: CpuBackend) -> CpuBackend {
    gpu.with_kernel(glm5next_kda::conv_decode::ENTRY, causal_conv1d_update_l2norm)
        .with_kernel(glm5next_kda::conv_prefill::ENTRY, causal_conv1d_prefill_l2norm_split)
}

/// `pool, slot, x, weight, out, b, slots, dim, ldx, width, qk_channels, head_dim, eps`: one token
/// for each of `b` rows (x's `ldx` apart), row r's window in pool slot `slot[r]` (`[slots, dim, W]`; a row without a
/// slot, see [`batch_slots`], writes nothing), then each `head_dim` group of the first
/// `qk_channels` channels divided by `sqrt(Σ y² + eps)` before the single bf16 rounding.
fn causal_conv1d_update_l2norm(mut args: CpuArgs<'_>) -> Result<(), KernelError> {
    let (pool, slot) = (args.mut_f32(0)?, args.const_u32(1)?);
    let (x, weight, out) = (args.const_bf16(2)?, args.const_bf16(3)?, args.mut_bf16(4)?);
    let (b, slots) = (args.u32(5)? as usize, args.u32(6)? as usize);
    let (dim, ldx, width) = (args.u32(7)? as usize, args.u32(8)? as usize, args.u32(9)? as usize);
    let (qk_channels, head_dim) = (args.u32(10)? as usize, args.u32(11)? as usize);
    let eps = args.f32(12)?;
    if head_dim == 0 || !qk_channels.is_multiple_of(head_dim) || qk_channels > dim {
        return Err(KernelError::new(format!(
            "qk_channels = {qk_channels} must be a multiple of head_dim = {head_dim} (≥ 1) \
             and at most dim = {dim}"
        )));
    }
    require("pool [slots, dim, width]", pool.len(), &[slots, dim, width])?;
    let x = packed_rows("x [b, dim], rows ldx apart", x, (b, dim, ldx))?;
    require("out [b, dim]", out.len(), &[b, dim])?;
    let rows = batch_slots(slot, b, slots)?;
    let states = pool_rows(&mut pool[..slots * dim * width], dim * width, &rows);
    let launches = states.into_iter().zip(x.chunks(dim.max(1))).zip(out[..b * dim].chunks_mut(dim.max(1)));
    for ((state, x), out) in launches {
        let Some(state) = state else { continue };
        ConvLaunch::new(state, x, weight, out, dim, width, 1)?
            .run(|y| l2_heads(&mut y[..qk_channels], head_dim, eps));
    }
    Ok(())
}

/// `state, x, weight, q, k, v, t, qkv, ldx, width, head_dim, eps`: t tokens of packed q | k | v
/// rows (`x [t, 3·qkv]`, rows `ldx` apart) in order, each q and k head normalised as in decode and rounded once, then
/// widened exactly into `q, k, v [t, qkv]` f32; their rows ≥ t are untouched.
fn causal_conv1d_prefill_l2norm_split(mut args: CpuArgs<'_>) -> Result<(), KernelError> {
    let (state, x, weight) = (args.mut_f32(0)?, args.const_bf16(1)?, args.const_bf16(2)?);
    let parts = [args.mut_f32(3)?, args.mut_f32(4)?, args.mut_f32(5)?];
    let (t, qkv) = (args.u32(6)? as usize, args.u32(7)? as usize);
    let (ldx, width) = (args.u32(8)? as usize, args.u32(9)? as usize);
    let (head_dim, eps) = (args.u32(10)? as usize, args.f32(11)?);
    if head_dim == 0 || !qkv.is_multiple_of(head_dim) {
        return Err(KernelError::new(format!(
            "qkv = {qkv} must be a multiple of head_dim = {head_dim} (≥ 1)"
        )));
    }
    for (name, part) in ["q [t, qkv]", "k [t, qkv]", "v [t, qkv]"].iter().zip(&parts) {
        require(name, part.len(), &[t, qkv])?;
    }
    let dim = 3 * qkv;
    let x = packed_rows("x [t, 3·qkv], rows ldx apart", x, (t, dim, ldx))?;
    let mut packed = vec![bf16::ZERO; t * dim];
    ConvLaunch::new(state, &x, weight, &mut packed, dim, width, t)?
        .run(|y| l2_heads(&mut y[..2 * qkv], head_dim, eps));
    for (index, part) in parts.into_iter().enumerate() {
        par_rows_mut(part, t, qkv).enumerate().for_each(|(row, dst)| {
            let src = &packed[row * dim + index * qkv..][..qkv];
            dst.iter_mut().zip(src).for_each(|(d, s)| *d = s.to_f32());
        });
    }
    Ok(())
}

/// The per-head L2 normalisation: each `head_dim` group of `y` divided by `sqrt(Σ y² + eps)`
/// over the group (eps inside the root), the squares summed in ascending order.
fn l2_heads(y: &mut [f32], head_dim: usize, eps: f32) {
    for head in y.chunks_mut(head_dim) {
        let norm = (head.iter().fold(0.0, |acc, y| acc + y * y) + eps).sqrt();
        head.iter_mut().for_each(|y| *y /= norm);
    }
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

    /// Computes each token's `silu(conv)` row in f32, lets `finish` adjust it (the L2 norm of the
    /// q and k heads), rounds it once into `out`, then leaves the last W inputs in the state.
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
