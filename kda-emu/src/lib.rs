//! The CUDA emulator of kda: a crate's unchanged `.cu` kernels compiled as C++ and run on host
//! threads, one OS thread per CUDA thread, so kernels can be tested where no GPU is.
//!
//! In layers, as cudarc is:
//!
//! - **sys**, the C++ in `cpp/`: the device API that stands in for CUDA's (`kda_emu.h`, with
//!   `cuda_bf16.h`), the runtime that schedules blocks, barriers, warp collectives, `cp.async`
//!   and the tensor-core gathers (`kda_emu_runtime.cpp`), its C ABI (`kda_abi.h`), and the
//!   sanitizer driver that runs one launch per process (`kda_emu_driver.cpp`);
//! - the constants both sides share, defined here once and written into the generated
//!   `kda_emu_config.h`: the ABI ([`abi`]), the driver's wire format ([`wire`]) and the device's
//!   limits ([`DeviceLimits`]);
//! - the **toolchain** that compiles a module's unit once and links each entry's library from it
//!   ([`toolchain`]), which kda-build's emulated build drives (caching, problems located in the
//!   manifest);
//! - the **raw** layer that opens a library and calls its ABI ([`library`], feature `load`), and
//!   what a failed launch reports through it and through the driver ([`Fault`]).
//!
//! The safe backends over it, `EmuBackend` (in process, or through the driver for kernels built
//! with a sanitizer) and `DriverBackend` (a driver the caller names), are kda-runtime's (feature
//! `emulation`), beside its other backends and under the same launch checks. `docs/emulator.md` describes what is emulated and how.

pub mod abi;
mod device;
pub mod fault;
#[cfg(feature = "load")]
pub mod library;
mod sanitizer;
pub mod shim;
pub mod toolchain;
pub mod wire;

pub use device::DeviceLimits;
pub use fault::{Fault, FaultKind};
pub use sanitizer::Sanitizer;
pub use toolchain::Toolchain;
