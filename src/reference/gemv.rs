//! `gemv::dense_gemv_bf16` and `dense_gemv_bf16_batchm::dense_gemv_bf16_batchm`, and the per-row
//! computation they share with `gemm::dense_gemm_bf16`.

use half::bf16;
use kda_runtime::cpu::{CpuArgs, CpuBackend, KernelError};
use rayon::prelude::*;

use super::{par_rows_mut, require};
use crate::kernels::defines::DENSE_GEMV_BATCHM_MAX_M;
use crate::kernels::glm5next_kda;

pub(super) fn register(gpu: CpuBackend) -> CpuBackend {
    gpu.with_kernel(glm5next_kda::gemv::ENTRY, dense_gemv_bf16)
        .with_kernel(glm5next_kda::gemv_batchm::ENTRY, dense_gemv_bf16_batchm)
}

/// `x, w, y, n, k`: `y[j] = bf16(x · w[j])`.
fn dense_gemv_bf16(mut args: CpuArgs<'_>) -> Result<(), KernelError> {
    let (x, w, y) = (args.const_bf16(0)?, args.const_bf16(1)?, args.mut_bf16(2)?);
    let (n, k) = (args.u32(3)? as usize, args.u32(4)? as usize);
    require("x [k]", x.len(), &[k])?;
    require("w [n, k]", w.len(), &[n, k])?;
    require("y [n]", y.len(), &[n])?;
    matvec(&x[..k], w, &mut y[..n]);
    Ok(())
}

/// `x, w, y, m, n, k` with `2 ≤ m ≤ 16`: each row of `y` exactly as `dense_gemv_bf16` computes it.
fn dense_gemv_bf16_batchm(args: CpuArgs<'_>) -> Result<(), KernelError> {
    let launch = RowsLaunch::read(args)?;
    let max = DENSE_GEMV_BATCHM_MAX_M as usize;
    if !(2..=max).contains(&launch.m) {
        return Err(KernelError::new(format!("m = {} is outside 2..={max}", launch.m)));
    }
    launch.run();
    Ok(())
}

/// `y[j] = bf16(Σ_p x[p]·w[j·k + p])` for every `j < y.len()`, with `k = x.len()`: the one
/// definition of a GEMV output row, so gemv, batchm and gemm rows agree bit for bit.
///
/// Each output keeps one f32 accumulator over ascending `p` (`acc += x·w`: a product and a sum, each rounded), the
/// order the ABI fixes. Speed comes from running [`COLUMNS`] such chains side by side, which
/// leaves every output's sequence of operations unchanged.
fn matvec(x: &[bf16], w: &[bf16], y: &mut [bf16]) {
    let k = x.len();
    let x: Vec<f32> = x.iter().map(|v| v.to_f32()).collect();
    y.par_chunks_mut(COLUMNS).enumerate().for_each(|(block, outputs)| {
        let rows = &w[block * COLUMNS * k..][..outputs.len() * k];
        let mut acc = [0.0f32; COLUMNS];
        for (p, &xp) in x.iter().enumerate() {
            for (acc, row) in acc.iter_mut().zip(rows.chunks_exact(k)) {
                *acc += xp * row[p].to_f32();
            }
        }
        for (y, acc) in outputs.iter_mut().zip(acc) {
            *y = bf16::from_f32(acc);
        }
    });
}

/// Output columns a GEMV task computes together (independent accumulators the CPU overlaps).
const COLUMNS: usize = 8;

/// A checked `a, b, c, m, n, k` launch (the gemm and batchm signature): `c[m, n] = a[m, k]·b[n, k]ᵀ`.
pub(super) struct RowsLaunch<'a> {
    a: &'a [bf16],
    b: &'a [bf16],
    c: &'a mut [bf16],
    /// Rows of `a` and `c`.
    pub(super) m: usize,
    n: usize,
    k: usize,
}

impl<'a> RowsLaunch<'a> {
    /// Reads the arguments and checks the buffers hold their tensors.
    pub(super) fn read(mut args: CpuArgs<'a>) -> Result<Self, KernelError> {
        let (a, b, c) = (args.const_bf16(0)?, args.const_bf16(1)?, args.mut_bf16(2)?);
        let (m, n, k) = (args.u32(3)? as usize, args.u32(4)? as usize, args.u32(5)? as usize);
        require("a [m, k]", a.len(), &[m, k])?;
        require("b [n, k]", b.len(), &[n, k])?;
        require("c [m, n]", c.len(), &[m, n])?;
        Ok(Self { a, b, c, m, n, k })
    }

    /// Computes every row of `c` as a GEMV of the matching row of `a`, rows in parallel.
    pub(super) fn run(self) {
        let Self { a, b, c, m, n, k } = self;
        par_rows_mut(c, m, n).enumerate().for_each(|(i, row)| matvec(&a[i * k..][..k], b, row));
    }
}
