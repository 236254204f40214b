//! `norm::l2_norm_bf16`: in-place per-head L2 normalisation of bf16 rows (the prefill's q and k).

use half::bf16;
use kda_runtime::cpu::{CpuArgs, CpuBackend, KernelError};
use rayon::prelude::*;

use super::{l2_norm, par_rows_mut, require};
use crate::kernels::glm5next_kda;

pub(super) fn register(gpu: CpuBackend) -> CpuBackend {
    gpu.with_kernel(glm5next_kda::l2::ENTRY, l2_norm_bf16)
}

/// `data, rows, row_stride, heads, head_dim, eps`: the `heads·head_dim` values at the start of
/// each row, head by head, `x ← bf16(x / sqrt(Σ x² + eps))`.
fn l2_norm_bf16(mut args: CpuArgs<'_>) -> Result<(), KernelError> {
    let data = args.mut_bf16(0)?;
    let (rows, row_stride) = (args.u32(1)? as usize, args.u32(2)? as usize);
    let (heads, head_dim) = (args.u32(3)? as usize, args.u32(4)? as usize);
    let eps = args.f32(5)?;
    let width = heads.checked_mul(head_dim).filter(|&width| head_dim > 0 && width <= row_stride).ok_or_else(
        || {
            KernelError::new(format!(
                "heads = {heads} of head_dim = {head_dim} (≥ 1) must fit in row_stride = \
                 {row_stride}"
            ))
        },
    )?;
    require("data [rows, row_stride]", data.len(), &[rows, row_stride])?;
    par_rows_mut(data, rows, row_stride).for_each(|row| {
        for head in row[..width].chunks_mut(head_dim) {
            let norm = l2_norm(head.iter().map(|x| x.to_f32()), eps);
            head.iter_mut().for_each(|x| *x = bf16::from_f32(x.to_f32() / norm));
        }
    });
    Ok(())
}
