//! A second model crate for kda's tests: its `scale` module has the name and entry point of
//! kda-example's, with another contract (`x[i] *= FACTOR`, no factor parameter). Its table and
//! kda-example's resolve side by side on one backend because each crate's kernels live in the
//! namespace of its manifest (`tests/namespaces.rs`).

use kda_runtime::KernelTable;
use kda_runtime::cpu::{CpuArgs, CpuBackend, KernelError};

/// The twin's table (`[twin_model]` of `kernels.toml`).
#[derive(KernelTable)]
pub struct TwinModel;

mod compiled {
    kda_runtime::include_kernels!();
}

/// The same kernel built for the emulator (feature `emulation`).
#[cfg(feature = "emulation")]
pub use compiled::EMULATED_KERNELS;
/// The CUDA images of this crate's kernels (none when nvcc was absent at build time).
pub use compiled::KERNEL_IMAGES;
/// The manifest's `[defines]`.
pub use compiled::defines;

/// `gpu`, also carrying this crate's reference kernel for `triple`.
pub fn with_reference(gpu: CpuBackend) -> CpuBackend {
    gpu.with_kernel(twin_model::triple::ENTRY, triple)
}

/// `x, n`: `x[i] *= FACTOR`.
fn triple(mut args: CpuArgs<'_>) -> Result<(), KernelError> {
    let (x, n) = (args.mut_f32(0)?, args.u32(1)? as usize);
    let len = x.len();
    let x = x.get_mut(..n).ok_or_else(|| format!("`x` holds {len} elements, needs {n}"))?;
    // An exact conversion: the define is a small integer.
    x.iter_mut().for_each(|x| *x *= defines::FACTOR as f32);
    Ok(())
}
