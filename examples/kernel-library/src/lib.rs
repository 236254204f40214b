//! A fixture crate of kernels written as public CUDA kernel libraries write them (macros and C++
//! templates that instantiate a body per element type, `size_t` strided layouts, grid-stride
//! loops, rows counted by the grid, ids the kernels trust, warp votes, atomics, quantized blocks
//! behind `const void*`), stated in a kda manifest: what the manifest, its type check and the
//! emulator must handle for such a library. The tests launch each kernel through its typed
//! launcher against references written there.

use kda_runtime::KernelTable;

/// The library's kernels (table `[kernel_library]` of `kernels.toml`). The derive generates the
/// handles struct [`KernelLibraryKernels`], the module [`kernel_library`] of argument structs,
/// and a `launch_<field>` per entry plus a generic `launch_<group>::<T>` per variant group.
#[derive(KernelTable)]
pub struct KernelLibrary;

mod compiled {
    kda_runtime::include_kernels!();
}

/// The same kernels built for the emulator (feature `emulation`), for
/// `kda_runtime::emu::EmuBackend` to run on host threads.
#[cfg(feature = "emulation")]
pub use compiled::EMULATED_KERNELS;
/// The CUDA images of the library's kernels (none when nvcc was absent at build time), for a CUDA
/// backend to carry.
pub use compiled::KERNEL_IMAGES;
