//! `kda_chunk::kda_chunk_prepare` and `kda_chunk::kda_chunk_scan`: the chunked (WY) form of the
//! gated delta rule for prefill. `prepare` computes everything that does not depend on the carried
//! state, per (chunk, head), the in-chunk attention `aqk` and the decayed q and k included; `scan`
//! walks each head's chunks in order through the state.
//!
//! Every decay is taken in the difference form `exp(gc_i − gc_j)` with `j ≤ i`, an exponent ≤ 0:
//! splitting it into `exp(gc_i)·exp(−gc_j)` overflows f32 over a chunk.

use kda_runtime::cpu::{CpuArgs, CpuBackend, KernelError};
use rayon::prelude::*;

use super::kda_gate::{ForgetGate, GateArgs};
use super::{par_rows_mut, require};
use crate::kernels::glm5next_kda;

pub(super) fn register(gpu: CpuBackend) -> CpuBackend {
    gpu.with_kernel(glm5next_kda::chunk_prepare::ENTRY, kda_chunk_prepare)
        .with_kernel(glm5next_kda::chunk_scan::ENTRY, kda_chunk_scan)
}

/// The geometry both kernels take as their four integer arguments: `t` tokens, `h` heads of dim
/// `d`, chunks of `c`, over position-major `[t_pad, h, d]` tensors.
#[derive(Clone, Copy)]
struct Layout {
    t: usize,
    h: usize,
    d: usize,
    c: usize,
    /// `⌈t/c⌉·c`.
    t_pad: usize,
}

impl Layout {
    /// The four integers from argument `first` on.
    fn read(args: &mut CpuArgs<'_>, first: usize) -> Result<Self, KernelError> {
        let (t, h) = (args.u32(first)? as usize, args.u32(first + 1)? as usize);
        let (d, c) = (args.u32(first + 2)? as usize, args.u32(first + 3)? as usize);
        if c == 0 {
            return Err(KernelError::new("chunk size c must be at least 1"));
        }
        let t_pad = t.div_ceil(c) * c;
        Ok(Self { t, h, d, c, t_pad })
    }

    /// Checks that buffer `name` holds a `[t_pad, h, d]` tensor.
    fn require(&self, name: &str, len: usize) -> Result<(), KernelError> {
        require(name, len, &[self.t_pad, self.h, self.d])
    }

    fn chunks(&self) -> usize {
        self.t_pad / self.c
    }

    /// How many positions of `chunk` are real tokens (`< t`); the rest are padding.
    fn real(&self, chunk: usize) -> usize {
        self.c.min(self.t - chunk * self.c)
    }

    /// Checks that buffer `sdec` holds one `[chunks, h, d]` decay row per (chunk, head).
    fn require_sdec(&self, len: usize) -> Result<(), KernelError> {
        require("sdec [chunks, h, d]", len, &[self.chunks(), self.h, self.d])
    }

    /// Checks that buffer `name` holds the `[chunks, h, c, c]` in-chunk attention.
    fn require_aqk(&self, len: usize) -> Result<(), KernelError> {
        require("aqk [chunks, h, c, c]", len, &[self.chunks(), self.h, self.c, self.c])
    }

    /// The `[c, c]` block of (chunk, head) in `aqk`.
    fn aqk_block(&self, chunk: usize, head: usize) -> std::ops::Range<usize> {
        let at = (chunk * self.h + head) * self.c * self.c;
        at..at + self.c * self.c
    }

    /// Row `(position, head)` of a `[t_pad, h, d]` tensor.
    fn row<'a>(&self, data: &'a [f32], position: usize, head: usize) -> &'a [f32] {
        &data[(position * self.h + head) * self.d..][..self.d]
    }
}

/// `q, k, v [t_pad, h, d], g_raw [t, h, d], dt_bias [h·d], a_log [h], b_raw [t, h] (rows ldb
/// apart), u, w [t_pad, h, d], aqk [chunks, h, c, c], qdec, kdec [t_pad, h, d], sdec [chunks, h,
/// d], t, h, d, c, ldb, law, scale, lower_bound`. Positions ≥ t are read as 0 whatever the buffers
/// hold, so the padding neither moves the cumulative gates nor leaks into the outputs; every
/// position of the outputs is written.
fn kda_chunk_prepare(mut args: CpuArgs<'_>) -> Result<(), KernelError> {
    let (q, k, v) = (args.const_f32(0)?, args.const_f32(1)?, args.const_f32(2)?);
    let (u, w, aqk) = (args.mut_f32(7)?, args.mut_f32(8)?, args.mut_f32(9)?);
    let (qdec, kdec, sdec) = (args.mut_f32(10)?, args.mut_f32(11)?, args.mut_f32(12)?);
    let layout = Layout::read(&mut args, 13)?;
    let gate_args = GateArgs { buffers: 3, ldb: 17, law: 18, lower_bound: 20 };
    let forget = ForgetGate::read(&mut args, gate_args, (layout.t, layout.h, layout.d))?;
    let scale = args.f32(19)?;
    for (name, len) in [
        ("q [t_pad, h, d]", q.len()),
        ("k [t_pad, h, d]", k.len()),
        ("v [t_pad, h, d]", v.len()),
        ("u [t_pad, h, d]", u.len()),
        ("w [t_pad, h, d]", w.len()),
        ("qdec [t_pad, h, d]", qdec.len()),
        ("kdec [t_pad, h, d]", kdec.len()),
    ] {
        layout.require(name, len)?;
    }
    layout.require_aqk(aqk.len())?;
    layout.require_sdec(sdec.len())?;
    let Layout { h, d, c, .. } = layout;
    let inputs = PrepareInputs { layout, q, k, v, forget, scale };
    // A chunk's rows are contiguous in every output: chunks in parallel, and within one, heads
    // in parallel into small blocks that are then copied to their strided rows.
    let chunk_len = c * h * d;
    let chunks = layout.chunks();
    let rows = par_rows_mut(u, chunks, chunk_len)
        .zip(par_rows_mut(w, chunks, chunk_len))
        .zip(par_rows_mut(qdec, chunks, chunk_len))
        .zip(par_rows_mut(kdec, chunks, chunk_len));
    rows.zip(par_rows_mut(aqk, chunks, h * c * c))
        .zip(par_rows_mut(sdec, chunks, h * d))
        .enumerate()
        .for_each(|(chunk, (((((u, w), qdec), kdec), aqk), sdec))| {
            let blocks: Vec<Prepared> =
                (0..h).into_par_iter().map(|head| inputs.block(chunk, head)).collect();
            for (block, (aqk, sdec)) in
                blocks.iter().zip(aqk.chunks_mut(c * c).zip(sdec.chunks_mut(d.max(1))))
            {
                aqk.copy_from_slice(&block.aqk);
                sdec.copy_from_slice(&block.sdec);
            }
            for (head, block) in blocks.iter().enumerate() {
                for i in 0..c {
                    let (at, local) = ((i * h + head) * d, i * d);
                    let rows = [
                        (&mut *u, &block.u),
                        (&mut *w, &block.w),
                        (&mut *qdec, &block.qdec),
                        (&mut *kdec, &block.kdec),
                    ];
                    for (to, from) in rows {
                        to[at..at + d].copy_from_slice(&from[local..local + d]);
                    }
                }
            }
        });
    Ok(())
}

struct PrepareInputs<'a> {
    layout: Layout,
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    forget: ForgetGate<'a>,
    scale: f32,
}

/// One (chunk, head) of `prepare`'s outputs: `[c, d]` each, its `[c, c]` attention and its `[d]`
/// closing decay.
struct Prepared {
    u: Vec<f32>,
    w: Vec<f32>,
    aqk: Vec<f32>,
    qdec: Vec<f32>,
    kdec: Vec<f32>,
    sdec: Vec<f32>,
}

impl PrepareInputs<'_> {
    /// Computes `u`, `w`, `aqk`, `qdec`, `kdec` and `sdec` of one chunk of one head.
    fn block(&self, chunk: usize, head: usize) -> Prepared {
        let Layout { d, c, .. } = self.layout;
        let real = self.layout.real(chunk);
        let zeros = vec![0.0; d];
        let row = |data: &[f32], i: usize| -> Vec<f32> {
            if i < real { self.layout.row(data, chunk * c + i, head).to_vec() } else { zeros.clone() }
        };
        let k: Vec<Vec<f32>> = (0..c).map(|i| row(self.k, i)).collect();
        let v: Vec<Vec<f32>> = (0..c).map(|i| row(self.v, i)).collect();
        let beta: Vec<f32> =
            (0..c).map(|i| if i < real { self.forget.beta(chunk * c + i, head) } else { 0.0 }).collect();

        // gc[i] = Σ_{p ≤ i} gate[p], one accumulator per channel; the padding adds nothing.
        let mut gc = Vec::with_capacity(c * d);
        let mut acc = vec![0.0f32; d];
        for i in 0..c {
            if i < real {
                let gates = self.forget.log_decays(chunk * c + i, head);
                acc.iter_mut().zip(gates).for_each(|(acc, g)| *acc += g);
            }
            gc.extend_from_slice(&acc);
        }
        let gc_row = |i: usize| &gc[i * d..(i + 1) * d];

        // A[i][j] = −β_i Σ_d k[i,d]·k[j,d]·exp(gc[i,d] − gc[j,d]) for j < i, 0 elsewhere; and
        // aqk[i][j] = Σ_d (q[i,d]·scale)·k[j,d]·exp(gc[i,d] − gc[j,d]) for j ≤ i < real, over the
        // same exponentials.
        let mut a = vec![0.0f32; c * c];
        let mut aqk = vec![0.0f32; c * c];
        for i in 0..real {
            let q_scaled: Vec<f32> = row(self.q, i).iter().map(|q| q * self.scale).collect();
            for j in 0..=i {
                // One accumulator each, in ascending d; each exponential serves both sums.
                let (mut attention, mut keys) = (0.0f32, 0.0f32);
                for x in 0..d {
                    let decay = (gc_row(i)[x] - gc_row(j)[x]).exp();
                    attention += q_scaled[x] * k[j][x] * decay;
                    keys += k[i][x] * k[j][x] * decay;
                }
                aqk[i * c + j] = attention;
                if j < i {
                    a[i * c + j] = -beta[i] * keys;
                }
            }
        }
        // Forward substitution, row i from the final rows < i: A[i][j] += Σ_{j<m<i} A[i][m]·A[m][j]
        // (A[m][j] is 0 for m ≤ j). Row i can be updated in place in ascending j: entry j reads
        // only entries m > j of its row, which still hold their original values.
        for i in 1..c {
            for j in 0..i {
                let sum = (j + 1..i).fold(0.0, |acc, m| acc + a[i * c + m] * a[m * c + j]);
                a[i * c + j] += sum;
            }
        }
        // The unit diagonal makes A = (I + L)⁻¹; it was 0 during the substitution.
        (0..c).for_each(|i| a[i * c + i] = 1.0);

        // u[i] = Σ_{j≤i} A[i][j]·β_j·v[j], w[i] = Σ_{j≤i} A[i][j]·β_j·k[j]·exp(gc[j]).
        let k_decay: Vec<f32> = gc.iter().map(|g| g.exp()).collect();
        let mut u = vec![0.0f32; c * d];
        let mut w = vec![0.0f32; c * d];
        for i in 0..c {
            let (u_i, w_i) = (&mut u[i * d..(i + 1) * d], &mut w[i * d..(i + 1) * d]);
            for j in 0..=i {
                let coef = a[i * c + j] * beta[j];
                for x in 0..d {
                    u_i[x] += coef * v[j][x];
                    w_i[x] += coef * k[j][x] * k_decay[j * d + x];
                }
            }
        }
        // What the scan multiplies with the state: qdec[i] = (q[i]·scale)·exp(gc[i]) and
        // kdec[i] = k[i]·exp(gc[last] − gc[i]) for i < real (0 past t), and the state's closing
        // decay sdec = exp(gc[last]), `last` the last real position.
        let last = gc_row(real - 1);
        let mut qdec = vec![0.0f32; c * d];
        let mut kdec = vec![0.0f32; c * d];
        for i in 0..real {
            let (q_i, g_i) = (row(self.q, i), gc_row(i));
            for x in 0..d {
                qdec[i * d + x] = q_i[x] * self.scale * g_i[x].exp();
                kdec[i * d + x] = k[i][x] * (last[x] - g_i[x]).exp();
            }
        }
        let sdec = last.iter().map(|g| g.exp()).collect();
        Prepared { u, w, aqk, qdec, kdec, sdec }
    }
}

/// `qdec, kdec [t_pad, h, d], sdec [chunks, h, d], u, w [t_pad, h, d], aqk [chunks, h, c, c],
/// state [h, d, d], out [t_pad, h, d], t, h, d, c`: `prepare`'s outputs. Rows `< t` of `out` are
/// written; positions ≥ t are never read.
fn kda_chunk_scan(mut args: CpuArgs<'_>) -> Result<(), KernelError> {
    let (qdec, kdec, sdec) = (args.const_f32(0)?, args.const_f32(1)?, args.const_f32(2)?);
    let (u, w, aqk) = (args.const_f32(3)?, args.const_f32(4)?, args.const_f32(5)?);
    let (state, out) = (args.mut_f32(6)?, args.mut_f32(7)?);
    let layout = Layout::read(&mut args, 8)?;
    for (name, len) in [
        ("qdec [t_pad, h, d]", qdec.len()),
        ("kdec [t_pad, h, d]", kdec.len()),
        ("u [t_pad, h, d]", u.len()),
        ("w [t_pad, h, d]", w.len()),
        ("out [t_pad, h, d]", out.len()),
    ] {
        layout.require(name, len)?;
    }
    let Layout { h, d, .. } = layout;
    require("state [h, d, d]", state.len(), &[h, d, d])?;
    layout.require_sdec(sdec.len())?;
    layout.require_aqk(aqk.len())?;
    let inputs = ScanInputs { layout, qdec, kdec, sdec, u, w, aqk };
    // Heads are independent and each walks its chunks in order: chunks in sequence, and within
    // one, heads in parallel (each owning its state rows).
    for chunk in 0..layout.chunks() {
        let rows: Vec<Vec<f32>> = par_rows_mut(state, h, d * d)
            .enumerate()
            .map(|(head, state)| inputs.chunk(chunk, head, state))
            .collect();
        for (head, rows) in rows.iter().enumerate() {
            for (i, row) in rows.chunks(d.max(1)).enumerate() {
                let at = ((chunk * layout.c + i) * h + head) * d;
                out[at..at + d].copy_from_slice(row);
            }
        }
    }
    Ok(())
}

struct ScanInputs<'a> {
    layout: Layout,
    qdec: &'a [f32],
    kdec: &'a [f32],
    sdec: &'a [f32],
    u: &'a [f32],
    w: &'a [f32],
    aqk: &'a [f32],
}

impl ScanInputs<'_> {
    /// Runs chunk `chunk` of `head` against its `[d, d]` state, then updates the state; returns
    /// the chunk's real output rows, `[real, d]`.
    fn chunk(&self, chunk: usize, head: usize, state: &mut [f32]) -> Vec<f32> {
        let Layout { h, d, c, .. } = self.layout;
        let real = self.layout.real(chunk);
        let at = |data, i| self.layout.row(data, chunk * c + i, head);
        let aqk = &self.aqk[self.layout.aqk_block(chunk, head)];
        // vnew[i] = u[i] − Σ_k w[i,k]·S[k], accumulated along k for every column at once.
        let vnew: Vec<Vec<f32>> = (0..real)
            .map(|i| {
                let sum = rows_combination(state, d, at(self.w, i).iter().copied());
                at(self.u, i).iter().zip(sum).map(|(u, s)| u - s).collect()
            })
            .collect();
        let mut out = Vec::with_capacity(real * d);
        for i in 0..real {
            // Σ_k qdec[i,k]·S[k], with the state from before this chunk.
            let inter = rows_combination(state, d, at(self.qdec, i).iter().copied());
            // Σ_{j≤i} aqk[i,j]·vnew[j]: `prepare`'s in-chunk attention.
            let intra = aqk[i * c..][..=i].iter().copied();
            let local = combination(vnew.iter().map(Vec::as_slice), intra, d);
            out.extend(inter.iter().zip(&local).map(|(inter, local)| inter + local));
        }
        // S[k] ← S[k]·sdec[k] + Σ_{i<real} kdec[i,k]·vnew[i].
        let closing = &self.sdec[(chunk * h + head) * d..][..d];
        for (x, state_row) in state.chunks_mut(d.max(1)).enumerate() {
            let coefs = (0..real).map(|i| at(self.kdec, i)[x]);
            let update = combination(vnew.iter().map(Vec::as_slice), coefs, d);
            state_row.iter_mut().zip(update).for_each(|(s, update)| *s = *s * closing[x] + update);
        }
        out
    }
}

/// `Σ_r coef_r·rows[r]` over `d`-wide rows, one accumulator per column, rows in ascending order.
fn combination<'r>(
    rows: impl Iterator<Item = &'r [f32]>,
    coefs: impl Iterator<Item = f32>,
    d: usize,
) -> Vec<f32> {
    let mut acc = vec![0.0f32; d];
    for (row, coef) in rows.zip(coefs) {
        acc.iter_mut().zip(row).for_each(|(acc, x)| *acc += coef * x);
    }
    acc
}

/// [`combination`] over the `d` rows of a `[d, d]` state: `Σ_k coef_k·S[k]`.
fn rows_combination(state: &[f32], d: usize, coefs: impl Iterator<Item = f32>) -> Vec<f32> {
    combination(state.chunks(d.max(1)), coefs, d)
}
