//! The runtime side of kda: kernel handles, the [`KernelTable`] trait that `#[derive(KernelTable)]`
//! implements, the [`GpuBackend`] trait every backend implements, and the errors of resolving a
//! table on a backend; the kernel images a crate's build embeds ([`ImageSet`], included with
//! [`include_kernels!`]) and the [module cache](modules) that backends load them through.
//!
//! Every kernel is looked up by `(namespace, module, entry)`, the namespace naming the crate and
//! manifest it comes from ([`KernelEntry::namespace`]), so one backend carries several crates'
//! kernels without two `gemm` modules colliding.
//!
//! A model crate depends on this crate alone: the derive is re-exported here, and the code it
//! generates names only `::kda_runtime` paths.
//!
//! ```
//! use kda_runtime::testing::FakeBackend;
//! use kda_runtime::{GpuBackend, try_kernel};
//!
//! use kda_runtime::KernelEntry;
//!
//! let gpu = FakeBackend::new().with_kernel("gemm", "dense_gemm_bf16");
//! assert!(gpu.lookup(&KernelEntry::named("gemm", "dense_gemm_bf16")).is_ok());
//! // "Not found" is the only failure an optional kernel turns into `None`.
//! assert_eq!(try_kernel(&gpu, &KernelEntry::named("gemm", "dense_gemm_f32")).unwrap(), None);
//! ```

mod backend;
mod buffer;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "emulation")]
pub mod emu;
mod entry;
mod error;
pub mod graph;
mod handle;
pub mod host;
mod image;
mod lookup;
pub mod modules;
pub mod profile;
mod registry;
pub mod replay;
mod resolve;
pub mod signature;
mod stream;
mod table;
pub mod testing;

pub use backend::{GpuBackend, GpuBackendExt, KernelArg, LaunchGeometry};
pub use buffer::{BufferStorage, DType, DeviceBuffer, Element, View, ViewMut};
pub use entry::KernelEntry;
pub use error::BackendError;
pub use graph::{BoundBuffer, DeviceGraph, GraphBindings};
pub use handle::{BackendId, KernelHandle};
pub use image::{
    BuiltEntry, CudaArch, EmulatedLibrary, EmulatedModule, EmulatedSet, ImageCoverage, ImageSet, Incompatibility,
    KernelImage, PtxImage,
};
pub use lookup::{LookupError, try_kernel};
pub use resolve::{ResolveError, ResolveProblem, Resolver};
pub use signature::Signature;
pub use table::KernelTable;

/// Derives the kernel table of a marker type from a manifest; see the crate `kda-macros`.
pub use kda_macros::KernelTable;

pub use half::bf16;
