//! `kda_layer_ops`: the small kernels around the KDA core: the gated output norm and the fill.

use half::bf16;
use kda_runtime::cpu::{CpuArgs, CpuBackend, KernelError};
use rayon::prelude::*;

use super::{par_rows_mut, require, sigmoid};
use crate::kernels::glm5next_kda;

pub(super) fn register(gpu: CpuBackend) -> CpuBackend {
    gpu.with_kernel(glm5next_kda::o_norm::ENTRY, kda_o_norm_gated_bf16)
        .with_kernel(glm5next_kda::fill::ENTRY, kda_fill_f32)
}

/// `x [rows, d] f32, gate [rows, d], weight [d], out [rows, d], rows, d, eps`: per head (row),
/// `r = 1/sqrt(mean(x²) + eps)`, `out = bf16(((x·r)·w)·σ(gate))`.
fn kda_o_norm_gated_bf16(mut args: CpuArgs<'_>) -> Result<(), KernelError> {
    let (x, gate, weight) = (args.const_f32(0)?, args.const_bf16(1)?, args.const_bf16(2)?);
    let out = args.mut_bf16(3)?;
    let (rows, d) = (args.u32(4)? as usize, args.u32(5)? as usize);
    let eps = args.f32(6)?;
    require("x [rows, d]", x.len(), &[rows, d])?;
    require("gate [rows, d]", gate.len(), &[rows, d])?;
    require("weight [d]", weight.len(), &[d])?;
    require("out [rows, d]", out.len(), &[rows, d])?;
    par_rows_mut(out, rows, d).enumerate().for_each(|(row, out)| {
        let x = &x[row * d..][..d];
        let gate = &gate[row * d..][..d];
        let sum = x.iter().fold(0.0, |acc, x| acc + x * x);
        let r = 1.0 / (sum / d as f32 + eps).sqrt();
        for (i, out) in out.iter_mut().enumerate() {
            let value = x[i] * r * weight[i].to_f32() * sigmoid(gate[i].to_f32());
            *out = bf16::from_f32(value);
        }
    });
    Ok(())
}

/// `dst, n, value`: `dst[i] = value`.
fn kda_fill_f32(mut args: CpuArgs<'_>) -> Result<(), KernelError> {
    let (dst, n, value) = (args.mut_f32(0)?, args.u32(1)? as usize, args.f32(2)?);
    require("dst [n]", dst.len(), &[n])?;
    dst[..n].fill(value);
    Ok(())
}
