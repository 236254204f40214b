//! An example model crate on kda: a manifest of three kernels (`kernels.toml`), their CUDA
//! sources (`kernels/`), the build step that compiles them (`build.rs`), the kernel table derived
//! from the manifest, CPU reference kernels for it, and a model function that launches through
//! the resolved table. The same model code runs on any backend that carries the table.
//!
//! ```
//! use kda_example::{ScaleModelKernels, model, reference};
//! use kda_runtime::GpuBackendExt;
//!
//! let gpu = reference::cpu_backend();
//! let kernels = ScaleModelKernels::resolve(&gpu)?;
//! let x = gpu.upload(&[1.0f32, 2.0])?;
//! let mut y = gpu.upload(&[0.0f32, 1.0])?;
//! // y = 2 · (y + 1·x) = [2, 6], and ‖y‖² = 40.
//! assert_eq!(model::step(&gpu, &kernels, &x, &mut y, 1.0, 2.0)?, 40.0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod model;
pub mod reference;

use kda_runtime::KernelTable;

/// The example model's kernels (table `[scale_model]` of `kernels.toml`). The derive generates
/// the handles struct [`ScaleModelKernels`], the module [`scale_model`] of the kernels' argument
/// structs and entries, and a `launch_<field>` method per kernel.
#[derive(KernelTable)]
pub struct ScaleModel;

mod compiled {
    kda_runtime::include_kernels!();
}

/// The same kernels built for the emulator (feature `emulation`), for
/// `kda_runtime::emu::EmuBackend` to run on host threads: the CUDA sources tested without a GPU.
#[cfg(feature = "emulation")]
pub use compiled::EMULATED_KERNELS;
/// The CUDA images of this crate's kernels (none when nvcc was absent at build time), for a CUDA
/// backend to carry.
pub use compiled::KERNEL_IMAGES;
/// The manifest's `[defines]`, the constants the kernels are compiled with.
pub use compiled::defines;
