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
//! kernels.launch_fill(&gpu, geometry, glm5next_kda::fill { dst: dst.view_mut(), n: 3, value: 0.5 })?;
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
mod norm;
#[cfg(test)]
mod tests;

use kda_runtime::cpu::{CpuBackend, KernelError};
use rayon::prelude::*;

/// A CPU backend carrying all 16 entries of `[glm5next_kda]`, run by the reference kernels.
///
/// Use [`CpuBackend::without`] on it to emulate a target that lacks the optional entries.
pub fn backend() -> CpuBackend {
    let modules: [fn(CpuBackend) -> CpuBackend; 8] = [
        gemm::register,
        gemv::register,
        causal_conv1d::register,
        norm::register,
        kda_gate::register,
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

/// `sqrt(Σ x² + eps)`, the divisor of the per-head L2 normalisation (eps inside the root), with
/// the squares summed in ascending order.
fn l2_norm(values: impl IntoIterator<Item = f32>, eps: f32) -> f32 {
    let sum = values.into_iter().fold(0.0, |acc, x| acc + x * x);
    (sum + eps).sqrt()
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

/// The first `rows` rows of `width` elements of `data`, in parallel. Yields nothing when either is
/// 0 (where `par_chunks_mut(0)` would panic). The caller has checked `data` with [`require`].
fn par_rows_mut<T: Send>(
    data: &mut [T],
    rows: usize,
    width: usize,
) -> impl IndexedParallelIterator<Item = &mut [T]> {
    data[..rows * width].par_chunks_mut(width.max(1))
}
