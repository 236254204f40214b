//! The Rust reference kernels of the `[glm5next_kda]` table, registered into a
//! [`CpuBackend`] against the table's entries (`crate::kernels::glm5next_kda::<field>::ENTRY`),
//! so each takes the arguments of its entry's `params` in `kernels.toml`, in order, with the math
//! of `docs/kernels.md`.
//!
//! They are what the CUDA kernels are measured against, so they favour a defined operation order
//! over speed: every f32 sum is one accumulator in ascending index order, as the ABI documents it.
//! Rayon splits work only across independent outputs (rows, heads, chunks), which leaves each
//! output's operations, and so its bits, unchanged.
//!
//! A launch arrives already checked against the manifest: the backend refuses a wrong argument,
//! a view shorter than its extent or an unmet `requires` before a kernel runs. Every kernel still
//! checks the sizes it can see and refuses a launch whose buffers are too short instead of
//! panicking, as a defence in depth (against an unchecked launch, or an extent in the manifest
//! that is looser than what the kernel touches).
//!
//! ```
//! use kda::kernels::{Glm5NextKdaKernels, glm5next_kda};
//! use kda_runtime::{GpuBackendExt, LaunchGeometry};
//!
//! let gpu = kda::reference::backend();
//! let kernels = Glm5NextKdaKernels::resolve(&gpu)?;
//! let mut dst = gpu.zeros::<f32>(3)?;
//! let geometry = LaunchGeometry::linear(3, 256);
//! kernels.launch_fill(&gpu, geometry, glm5next_kda::fill { dst: dst.view_mut().into(), n: 3, value: 0.5 })?;
//! assert_eq!(gpu.download::<f32>(&dst)?, [0.5; 3]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod causal_conv1d;
mod gemm;
pub mod gemv;
mod kda_chunk;
mod kda_gate;
mod kda_layer_ops;
mod kda_recurrent;
#[cfg(test)]
mod tests;

use std::borrow::Cow;

use half::bf16;
use kda_runtime::cpu::{CpuBackend, KernelError};
use rayon::prelude::*;

/// A CPU backend carrying all 13 entries of `[glm5next_kda]`, run by the reference kernels.
///
/// Use [`CpuBackend::without`] on it to emulate a target that lacks the optional entries.
pub fn backend() -> CpuBackend {
    let modules: [fn(CpuBackend) -> CpuBackend; 6] = [
        gemm::register,
        gemv::register,
        causal_conv1d::register,
        kda_chunk::register,
        kda_recurrent::register,
        kda_layer_ops::register,
    ];
    modules.into_iter().fold(CpuBackend::new(), |gpu, register| register(gpu))
}

/// `σ(x) = 1/(1+e^{-x})`.
fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// `silu(x) = x·σ(x)`.
fn silu(x: f32) -> f32 {
    x * sigmoid(x)
}

/// Checks that the buffer described by `name` (its shape written in, e.g. "a [m, k]") holds the
/// `dims` tensor. Longer buffers are fine: a kernel reads and writes the prefix it is told about.
fn require(name: &str, len: usize, dims: &[usize]) -> Result<(), KernelError> {
    let needed = dims.iter().try_fold(1usize, |acc, &dim| acc.checked_mul(dim));
    let shape = || {
        let factors = dims.iter().map(ToString::to_string).collect::<Vec<_>>();
        factors.join("×")
    };
    match needed {
        None => Err(KernelError::new(format!("`{name}` of {} elements overflows usize", shape()))),
        Some(needed) if len < needed => Err(KernelError::new(if dims.len() > 1 {
            format!("`{name}` holds {len} elements, needs {} = {needed}", shape())
        } else {
            format!("`{name}` holds {len} elements, needs {needed}")
        })),
        Some(_) => Ok(()),
    }
}

/// The `rows` rows of `width` elements that lie `ld` apart in `data` (a column range of a wider
/// matrix, as a kernel's strided operand takes it), packed one after another; borrowed where they
/// already are. Refuses `ld < width` (rows that overlap) and a `data` that ends before the last
/// row does.
fn packed_rows<'a>(
    name: &str,
    data: &'a [bf16],
    (rows, width, ld): (usize, usize, usize),
) -> Result<Cow<'a, [bf16]>, KernelError> {
    if ld < width {
        return Err(KernelError::new(format!("`{name}`: rows {ld} apart cannot hold {width} elements each")));
    }
    let Some(last) = rows.checked_sub(1) else { return Ok(Cow::Borrowed(&[])) };
    let needed = last.checked_mul(ld).and_then(|start| start.checked_add(width));
    match needed {
        Some(needed) if data.len() >= needed => Ok(if ld == width {
            Cow::Borrowed(&data[..rows * width])
        } else {
            Cow::Owned((0..rows).flat_map(|row| &data[row * ld..][..width]).copied().collect())
        }),
        _ => Err(KernelError::new(format!(
            "`{name}` holds {} elements, too few for {rows} rows of {width}, {ld} apart",
            data.len()
        ))),
    }
}

/// The first `rows` rows of `width` elements of `data`, in parallel. Yields nothing when either is
/// 0 (where `par_chunks_mut(0)` would panic). The caller has checked `data` with [`require`].
fn par_rows_mut<T: Send>(
    data: &mut [T],
    rows: usize,
    width: usize,
) -> impl IndexedParallelIterator<Item = &mut [T]> {
    data[..rows * width].par_chunks_mut(width.max(1))
}

/// The pool slot of each of the `b` rows of a batched decode step, as the CUDA kernels'
/// `batch_slot` finds it: `None` for an index outside the pool of `slots` sequences or one an
/// earlier row already names (such a row writes nothing).
fn batch_slots(slot: &[u32], b: usize, slots: usize) -> Result<Vec<Option<usize>>, KernelError> {
    require("slot [b]", slot.len(), &[b])?;
    let mut seen = vec![false; slots];
    Ok(slot[..b]
        .iter()
        .map(|&s| {
            let s = s as usize;
            (s < slots && !std::mem::replace(&mut seen[s], true)).then_some(s)
        })
        .collect())
}

/// The state of each row's slot in `pool` (`slot_len` elements per slot), as disjoint mutable
/// slices: `rows` comes from [`batch_slots`], which names each slot at most once.
fn pool_rows<'a, T>(pool: &'a mut [T], slot_len: usize, rows: &[Option<usize>]) -> Vec<Option<&'a mut [T]>> {
    let mut slots: Vec<Option<&mut [T]>> = pool.chunks_exact_mut(slot_len.max(1)).map(Some).collect();
    rows.iter().map(|row| row.and_then(|s| slots[s].take())).collect()
}
