//! `gemm::dense_gemm_bf16`: `c[m, n] = a[m, k] · b[n, k]ᵀ`, a's rows `lda` apart, no output
//! stride; and its split-K pair, `gemm::dense_gemm_bf16_splitk` (the f32 sums of each range of K)
//! and `gemm::dense_gemm_splitk_reduce_bf16` (their sum in split order, rounded once).

use half::bf16;
use kda_runtime::cpu::{CpuArgs, CpuBackend, KernelError};
use rayon::prelude::*;

use super::gemv::{RowsLaunch, dot_sums};
use super::{packed_rows, require};
use crate::kernels::defines::GEMM_TILE_K;
use crate::kernels::glm5next_kda;

pub(super) fn register(gpu: CpuBackend) -> CpuBackend {
    gpu.with_kernel(glm5next_kda::gemm::ENTRY, dense_gemm_bf16)
        .with_kernel(glm5next_kda::gemm_splitk::ENTRY, dense_gemm_bf16_splitk)
        .with_kernel(glm5next_kda::gemm_reduce::ENTRY, dense_gemm_splitk_reduce_bf16)
}

/// `a, b, c, m, n, k, lda`. The reference order (one accumulator, ascending p) is the GEMV's, so each
/// output row is the GEMV of its input row; any m.
fn dense_gemm_bf16(args: CpuArgs<'_>) -> Result<(), KernelError> {
    RowsLaunch::read(args)?.run();
    Ok(())
}

/// `a, b, partial, m, n, k, lda, splits`: `partial[s] [m, n]` holds the sums over split s's range
/// of K ([`split_range`]), each one accumulator over ascending p.
fn dense_gemm_bf16_splitk(mut args: CpuArgs<'_>) -> Result<(), KernelError> {
    let (a, b, partial) = (args.const_bf16(0)?, args.const_bf16(1)?, args.mut_f32(2)?);
    let (m, n, k) = (args.u32(3)? as usize, args.u32(4)? as usize, args.u32(5)? as usize);
    let (lda, splits) = (args.u32(6)? as usize, args.u32(7)? as usize);
    if splits == 0 {
        return Err(KernelError::new("splits must be at least 1"));
    }
    packed_rows("a [m, k], rows lda apart", a, (m, k, lda))?;
    require("b [n, k]", b.len(), &[n, k])?;
    require("partial [splits, m, n]", partial.len(), &[splits, m, n])?;
    for (s, slice) in partial[..splits * m * n].chunks_mut((m * n).max(1)).enumerate() {
        let range = split_range(k, splits, s);
        let width = range.len();
        // The range's columns of each row: a's rows lda apart, b's k apart.
        let a_part = packed_rows("a", &a[range.start.min(a.len())..], (m, width, lda))?;
        let b_part = packed_rows("b", &b[range.start.min(b.len())..], (n, width, k))?;
        slice.copy_from_slice(&dot_sums(&a_part, &b_part, m, n, width));
    }
    Ok(())
}

/// `partial, c, m, n, splits`: `c[i] = bf16(((partial[0][i] + partial[1][i]) + …))`, in split order.
fn dense_gemm_splitk_reduce_bf16(mut args: CpuArgs<'_>) -> Result<(), KernelError> {
    let (partial, c) = (args.const_f32(0)?, args.mut_bf16(1)?);
    let (m, n, splits) = (args.u32(2)? as usize, args.u32(3)? as usize, args.u32(4)? as usize);
    require("partial [splits, m, n]", partial.len(), &[splits, m, n])?;
    require("c [m, n]", c.len(), &[m, n])?;
    let count = m * n;
    c[..count].par_iter_mut().enumerate().for_each(|(i, c)| {
        let sum = (1..splits).fold(partial[i], |sum, s| sum + partial[s * count + i]);
        *c = bf16::from_f32(sum);
    });
    Ok(())
}

/// The K columns split `s` of `splits` sums: whole K tiles of [`GEMM_TILE_K`],
/// `cdiv(cdiv(k, GEMM_TILE_K), splits)` of them a split, the last range shorter or empty, ending
/// at k (the CUDA kernel's `split_range`).
pub fn split_range(k: usize, splits: usize, s: usize) -> std::ops::Range<usize> {
    let tile = GEMM_TILE_K as usize;
    let span = k.div_ceil(tile).div_ceil(splits) * tile;
    let begin = (s * span).min(k);
    begin..(begin + span).min(k)
}
