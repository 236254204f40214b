//! `gemv::dense_gemv_bf16` and `dense_gemv_bf16_batchm::dense_gemv_bf16_batchm`, and the per-row
//! computation they share with `gemm::dense_gemm_bf16`.

use std::borrow::Cow;

use half::bf16;
use kda_runtime::cpu::{CpuArgs, CpuBackend, KernelError};
use rayon::prelude::*;

use super::{packed_rows, require};
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

/// `x, w, y, m, n, k, ldx` with `2 ≤ m ≤ 16`: each row of `y` exactly as `dense_gemv_bf16`
/// computes it.
fn dense_gemv_bf16_batchm(args: CpuArgs<'_>) -> Result<(), KernelError> {
    let launch = RowsLaunch::read(args)?;
    let max = DENSE_GEMV_BATCHM_MAX_M as usize;
    if !(2..=max).contains(&launch.m) {
        return Err(KernelError::new(format!("m = {} is outside 2..={max}", launch.m)));
    }
    launch.run();
    Ok(())
}

/// `y[j] = bf16(Σ_p x[p]·w[j·k + p])` for every `j < y.len()`, with `k = x.len()`.
fn matvec(x: &[bf16], w: &[bf16], y: &mut [bf16]) {
    let n = y.len();
    matmul(x, &w[..n * x.len()], y, 1, n, x.len());
}

/// `c[i][j] = bf16(Σ_p a[i·k + p]·b[j·k + p])` for `i < m`, `j < n`: the one definition of a
/// dense output, so gemv, batchm and gemm rows agree bit for bit.
///
/// Each output keeps one f32 accumulator over ascending `p` (`acc += a·b`: a product and a sum,
/// each rounded), the order the ABI fixes. Speed comes from what leaves every output's sequence of
/// operations unchanged: a task widens [`COLUMNS`] rows of `b` once, transposed so that the
/// accumulators of one input row form a vector, and runs every input row against them, [`ROWS`]
/// rows side by side; so a batch reads and widens each weight once, not once per row.
fn matmul(a: &[bf16], b: &[bf16], c: &mut [bf16], m: usize, n: usize, k: usize) {
    let sums = dot_sums(a, b, m, n, k);
    c[..m * n].par_iter_mut().zip(&sums).for_each(|(c, s)| *c = bf16::from_f32(*s));
}

/// The f32 sums of [`matmul`] before their rounding, `[m, n]`: each one accumulator over
/// ascending `p`.
pub(super) fn dot_sums(a: &[bf16], b: &[bf16], m: usize, n: usize, k: usize) -> Vec<f32> {
    let mut sums = vec![0.0f32; m * n];
    if k == 0 {
        // Empty sums (and no rows to chunk `a` by).
        return sums;
    }
    let a: Vec<f32> = a[..m * k].iter().map(|v| v.to_f32()).collect();
    let blocks: Vec<Vec<f32>> = (0..n.div_ceil(COLUMNS))
        .into_par_iter()
        .map(|block| {
            let columns = COLUMNS.min(n - block * COLUMNS);
            // `panel[p][col]`: column `col` of the block, padded with zero columns to COLUMNS.
            let mut panel = vec![[0.0f32; COLUMNS]; k];
            for (col, row) in b[block * COLUMNS * k..][..columns * k].chunks_exact(k).enumerate() {
                panel.iter_mut().zip(row).for_each(|(lane, w)| lane[col] = w.to_f32());
            }
            let mut out = vec![0.0f32; m * COLUMNS];
            for (rows, sums) in a.chunks(ROWS * k).zip(out.chunks_mut(ROWS * COLUMNS)) {
                accumulate(rows, &panel, sums, k);
            }
            out
        })
        .collect();
    for (block, block_sums) in blocks.iter().enumerate() {
        let first = block * COLUMNS;
        let columns = COLUMNS.min(n - first);
        for (row, block_sums) in sums.chunks_exact_mut(n).zip(block_sums.chunks_exact(COLUMNS)) {
            row[first..first + columns].copy_from_slice(&block_sums[..columns]);
        }
    }
    sums
}

/// The sums of up to [`ROWS`] input rows (`rows`, `k` each) against one widened panel, into
/// `sums` (`COLUMNS` per row): one accumulator per output, ascending `p`.
fn accumulate(rows: &[f32], panel: &[[f32; COLUMNS]], sums: &mut [f32], k: usize) {
    let mut acc = [[0.0f32; COLUMNS]; ROWS];
    let count = rows.len() / k.max(1);
    for (p, lane) in panel.iter().enumerate() {
        for (r, acc) in acc.iter_mut().enumerate().take(count) {
            let x = rows[r * k + p];
            acc.iter_mut().zip(lane).for_each(|(acc, w)| *acc += x * w);
        }
    }
    for (sums, acc) in sums.chunks_exact_mut(COLUMNS).zip(acc) {
        sums.copy_from_slice(&acc);
    }
}

/// Output columns a task computes together: one vector of accumulators per input row.
const COLUMNS: usize = 8;

/// Input rows run side by side against one panel: independent accumulator vectors the CPU
/// overlaps.
const ROWS: usize = 4;

/// A checked `a, b, c, m, n, k, lda` launch (the gemm and batchm signature):
/// `c[m, n] = a[m, k]·b[n, k]ᵀ`, a's rows `lda` apart.
pub(super) struct RowsLaunch<'a> {
    /// a's `m` rows, packed.
    a: Cow<'a, [bf16]>,
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
        let a = packed_rows("a [m, k], rows lda apart", a, (m, k, args.u32(6)? as usize))?;
        require("b [n, k]", b.len(), &[n, k])?;
        require("c [m, n]", c.len(), &[m, n])?;
        Ok(Self { a, b, c, m, n, k })
    }

    /// Computes every row of `c` as a GEMV of the matching row of `a` would.
    pub(super) fn run(self) {
        let Self { a, b, c, m, n, k } = self;
        matmul(&a, &b[..n * k], c, m, n, k);
    }
}
