//! The CPU reference kernels of `[scale_model]`: one Rust function per entry, taking the
//! arguments of its `params` in order, registered into a [`CpuBackend`] against the table's
//! entries.
//!
//! A launch reaches them already checked against the manifest (element types, extents,
//! `requires`), so they index the first `n` elements without checking again; an unchecked launch
//! that breaks the extents makes them refuse with an error rather than panic.

use kda_runtime::cpu::{CpuArgs, CpuBackend, KernelError};

use crate::scale_model;

/// A CPU backend carrying every entry of `[scale_model]`, run by the kernels of this module.
pub fn cpu_backend() -> CpuBackend {
    CpuBackend::new()
        .with_kernel(scale_model::scale::ENTRY, scale)
        .with_kernel(scale_model::axpy::ENTRY, axpy)
        .with_kernel(scale_model::sum_squares::ENTRY, sum_squares)
}

/// `x, n, factor`: `x[i] *= factor`.
fn scale(mut args: CpuArgs<'_>) -> Result<(), KernelError> {
    let (x, n, factor) = (args.mut_f32(0)?, args.u32(1)? as usize, args.f32(2)?);
    require("x", x.len(), n)?;
    x[..n].iter_mut().for_each(|x| *x *= factor);
    Ok(())
}

/// `x, y, n, a`: `y[i] += a·x[i]`.
fn axpy(mut args: CpuArgs<'_>) -> Result<(), KernelError> {
    let (x, y, n, a) = (args.const_f32(0)?, args.mut_f32(1)?, args.u32(2)? as usize, args.f32(3)?);
    require("x", x.len(), n)?;
    require("y", y.len(), n)?;
    y[..n].iter_mut().zip(x).for_each(|(y, x)| *y += a * x);
    Ok(())
}

/// `x, out, n`: `out[0] = Σ x[i]²`, summed in ascending order (the CUDA kernel sums in a tree, so
/// the two agree to rounding).
fn sum_squares(mut args: CpuArgs<'_>) -> Result<(), KernelError> {
    let (x, out, n) = (args.const_f32(0)?, args.mut_f32(1)?, args.u32(2)? as usize);
    require("x", x.len(), n)?;
    require("out", out.len(), 1)?;
    out[0] = x[..n].iter().fold(0.0, |sum, x| sum + x * x);
    Ok(())
}

/// Refuses a launch whose buffer `name` holds fewer than the `needed` elements it is told about.
fn require(name: &str, len: usize, needed: usize) -> Result<(), KernelError> {
    if len < needed {
        return Err(KernelError::new(format!("`{name}` holds {len} elements, needs {needed}")));
    }
    Ok(())
}
