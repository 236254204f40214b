//! The kernel tables of this crate, each derived from its table in `kernels.toml`.

use kda_runtime::KernelTable;

/// GLM-5.3-Flash "Kimi Delta Attention" block: the 13 kernels of decode and chunked prefill
/// (table `[glm5next_kda]`; parameters in `kernels.toml`, math in `docs/kernels.md`). The derive
/// also generates the module [`glm5next_kda`] of the kernels' argument structs and a
/// `launch_<field>` method per kernel.
#[derive(KernelTable)]
pub struct Glm5NextKda;

mod compiled {
    kda_runtime::include_kernels!();
}

/// The same kernels built for the emulator (feature `emulation`), for an emulation backend.
#[cfg(feature = "emulation")]
pub use compiled::EMULATED_KERNELS;
/// The CUDA images of this crate's kernels, for a CUDA backend to carry.
pub use compiled::KERNEL_IMAGES;
/// The manifest's `[defines]`, the constants the kernels are compiled with.
pub use compiled::defines;
/// What ptxas reported for each kernel of `KERNEL_IMAGES` at build time: registers, spills,
/// stack frame, static shared memory, per SASS target.
pub use compiled::resources;

/// The manifest the tables were derived from, as compiled into this crate.
pub const MANIFEST: &str = include_str!("../kernels.toml");

/// The manifest's name, as the derive and its messages call it.
pub const MANIFEST_NAME: &str = "kernels.toml";
