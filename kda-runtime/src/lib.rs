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
//! # Getting started
//!
//! A model crate of your own, in six files; the README's quick start is the same crate, and CI
//! builds it from the README's text and runs its test (`tests/quick_start.rs` of the repository).
//!
//! 1. **`Cargo.toml`**: this crate, and kda-build for the build script. Until kda is published,
//!    by `path` (or `git`). The feature `emulation` builds the kernels as C++ for the emulator
//!    too (a C++ compiler, no GPU); `cuda` adds the CUDA backend ([`cuda::CudaBackend`]).
//!
//!    ```toml
//!    [dependencies]
//!    kda-runtime = { path = "../kda/kda-runtime" }   # features = ["cuda"]: launch on a GPU too
//!    [build-dependencies]
//!    kda-build = { path = "../kda/kda-build" }
//!    [features]
//!    default = ["emulation"]
//!    emulation = ["kda-runtime/emulation"]
//!    ```
//!
//! 2. **The manifest**, `kernels.toml` at the crate root: one entry per kernel of
//!    `kernels/<module>.cu`, with its exact `extern "C"` name, its parameters (each manifest type
//!    is one C type: `f32` is `float`, `u32` `unsigned int`, `bf16` `__nv_bfloat16`, ... — the
//!    table is [`DType`]'s) and what a launch must satisfy (`requires`).
//!
//!    ```toml
//!    [scaling]
//!    scale = { module = "scale", entry = "scale_f32", params = "f32 x[n], u32 n, f32 factor" }
//!    ```
//!
//!    ```text
//!    // kernels/scale.cu
//!    extern "C" __global__ void scale_f32(float* x, unsigned n, float factor) {
//!        if (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n) x[i] *= factor;
//!    }
//!    ```
//!
//! 3. **The build**, `build.rs`: compiles the modules with nvcc where there is one (`NVCC`,
//!    `CUDA_HOME`, `PATH`, or the per-user install of the repository's `scripts/install-cuda.sh`)
//!    and, with the feature `emulation`, as C++; proves every entry's name and C parameter types
//!    with whichever compiler it has; and writes the embedding code. A mistake is one compiler
//!    error located at `kernels.toml:LINE:COL` (`KDA_FULL_DIAGNOSTICS=1` shows a compiler's
//!    whole output).
//!
//!    ```text
//!    fn main() -> Result<(), kda_build::cuda::BuildError> {
//!        kda_build::cuda::KernelBuild::from_env()?.run().map(drop)
//!    }
//!    ```
//!
//! 4. **The derive and the images**, in `src/lib.rs` ([`KernelTable`](macro@KernelTable)):
//!
//!    ```text
//!    #[derive(kda_runtime::KernelTable)]
//!    pub struct Scaling; // the table [scaling]: handles ScalingKernels, arguments scaling::*
//!    kda_runtime::include_kernels!(); // KERNEL_IMAGES, defines, EMULATED_KERNELS (emulation)
//!    ```
//!
//! 5. **Resolve and launch**, on any backend: the launch is checked against the build's signature
//!    before anything reaches the device. **Tested on the emulator**, in `tests/emulated.rs`, over
//!    the crate's own kernels ([`EmulatedSet::emulator`]; [`emu::EmuBackend::new`] takes several
//!    crates' sets):
//!
//!    ```text
//!    use kda_runtime::{GpuBackendExt, LaunchGeometry};
//!    let gpu = EMULATED_KERNELS.emulator()?; // or cuda::CudaBackend::new(0, &[&KERNEL_IMAGES])?
//!    let kernels = ScalingKernels::resolve(&gpu)?;
//!    let mut x = gpu.upload(&[1.0f32, 2.0, 3.0])?;
//!    let args = scaling::scale { x: x.view_mut().into(), n: 3, factor: 2.0 };
//!    kernels.launch_scale(&gpu, LaunchGeometry::linear(3, 256), args)?;
//!    assert_eq!(gpu.download::<f32>(&x)?, [2.0, 4.0, 6.0]);
//!    ```
//!
//! 6. **Under the sanitizers**, the same tests, unchanged: `KDA_EMULATOR_SANITIZER=address cargo
//!    test` builds the emulated kernels with AddressSanitizer + UBSan (`thread`: ThreadSanitizer),
//!    the set records it, and [`emu::EmuBackend`] runs each launch in the driver built with it,
//!    every view cut to its extent: an overrun or a race is the launch's `Err`, with the
//!    sanitizer's report.
//!
//! Beyond that: [`cpu::CpuBackend`] runs Rust reference kernels registered against the table's
//! entries; [`emu::DriverBackend`] runs a driver of the caller's choosing, and `kda emulate`
//! (kda-cli) launches every entry of any crate under a sanitizer at the edges its `requires`
//! allow, with no test of the crate's. The repository's `examples/scale-model` is a larger crate
//! built this way. An engine with several GPUs resolves its table once per device, on each
//! device's backend, with [`PerDevice`].
//!
//! # Soundness
//!
//! Safe code cannot cause undefined behaviour through this crate, on any backend, whoever wrote
//! the safe code. The argument, in full:
//!
//! **Trusted, not checked.** What a crate's build step wrote, made into an [`ImageSet`] or
//! [`EmulatedSet`] only through their `unsafe` constructors: the fatbins and emulated libraries,
//! the driver, and the signatures embedded beside them ([`BuiltEntry`]), proved by the build
//! against nvcc's PTX (and, on the emulator, against each library's own report of its C types at
//! lookup). The CUDA driver and cudarc. And the manifest's extents being right for the kernel's
//! code: nothing can check that a kernel touches only `m*k` elements of `a`, nor that it reads a
//! typed parameter no wider than its elements' alignment (a `const bf16*` loaded 16 bytes at a
//! time needs a view starting at a multiple of 16 bytes, which only its author knows); the
//! emulator's sanitizers (`kda-block emulate --sanitizer address|thread`, with its launch fuzz,
//! and `kda emulate`) are what catch a wrong extent, by running the real code at the edges of its
//! views, and the emulator refuses a misaligned `cp.async` or `ldmatrix`.
//!
//! **Checked before anything reaches a device, by this crate's code:**
//! - a handle is the backend's own and was issued by it ([`modules::ModuleCache::resolved`],
//!   [`registry`](cpu::CpuBackend)): a handle made with [`KernelHandle::new`] names either
//!   nothing (refused) or a kernel the backend resolved, checked against that kernel's signature;
//! - a launch's signature is the build's: a lookup resolves only where the entry's signature
//!   equals one the build proved for that entry point, and the handle keeps the build's copy
//!   ([`modules::ModuleCache::lookup`]), so a [`KernelEntry`] with a signature of the caller's
//!   making does not resolve;
//! - every argument against that signature: count, kinds, element types, access, requirements,
//!   extents, and where each buffer starts ([`signature::check`]): at a multiple of its element's
//!   size, of [`signature::VOID_ALIGNMENT`] (16 bytes) for `void`, whose kernel reads structs or
//!   vectors kda cannot see (an engine's cudarc slice, whose address only the launch learns, is
//!   checked by the CUDA backend then); every backend starts a buffer at 16 bytes or more;
//! - the data a check reads on the host in place of the device's: a layout's dims and strides
//!   (`strided(..)` in an extent) are read from a [`ConstBuffer`], whose host copy is its memory's
//!   contents because only this crate's backends make one
//!   ([`GpuBackend::upload_const_bytes`], with their own allocation and copy: a backend of the
//!   caller's making gets an `Err`, and `ConstBuffer` has no public constructor) and it lends
//!   only read-only views; a layout's dims are each at least 1, since a strided kernel takes an
//!   index modulo each of them;
//! - element values a kernel may compute addresses from: a `bool` is 0 or 1 wherever safe code
//!   writes one (`copy_to_device` refuses another byte, write-first memory is 0 or 1, and no
//!   public API lends a `bool` buffer's bytes mutably);
//! - memory borrowed from an engine ([`Borrowed`], made through [`In`] and [`Out`]) is cudarc's own
//!   slices and views only, whose lengths are the memory they hold, of the backend's context
//!   (`cuda::borrowed`); its element type is the typed argument's, and a written one is borrowed
//!   exclusively; the CPU and emulation backends refuse it (the recording fake only records it),
//!   and so does kda's own capture of a graph; a stream capturing a graph of the caller's refuses
//!   kda's own buffers instead, but within the `unsafe` `CudaBackend::admitting_own_buffers`, whose
//!   caller vouches that its graphs outlive none of them;
//! - every buffer is the backend's own, of its own storage type, and every view lies inside its
//!   buffer ([`host::HostMemory`], the CUDA backend's storage, `View::checked_range`); a buffer's
//!   element type and length are its storage's ([`BufferStorage`]), so replacing a storage
//!   through [`DeviceBuffer::storage_mut`] replaces them too, and no view exists meanwhile;
//! - a graph launches only on buffers that cover its own bindings, with the shapes it was captured
//!   with ([`replay::CapturedList::launch`], [`GraphBindings::are_covered_by`]), whatever backend
//!   captured it, and is ordered with other streams' work by the buffers' events;
//! - work on different streams is ordered by buffer ([`GpuBackend::new_stream`]), whatever the
//!   caller drops and when: a CUDA backend on a caller's stream whose buffers other streams use
//!   joins that stream into the default stream when it is dropped, so a read or a free after the
//!   caller drops its stream (and cudarc stops waiting for events) still comes after the stream's
//!   writes (`cuda::CudaBackend`'s `Drop`).
//!
//! **Public constructors and the traits safe code can implement**, and why none breaks this:
//! - [`DeviceBuffer::new`] takes any storage: backends dereference only their own storage
//!   types, whose shape is the memory they hold; another type's storage is a foreign buffer.
//! - [`host::HostStorage`] can be made and cloned by anyone, and wrapped with any backend's id:
//!   its length is its memory, its `bool` elements are 0 or 1 however it is made
//!   ([`host::HostStorage::filled`]), and it lends its bytes mutably only as element types whose
//!   every bit pattern is an element ([`host::HostStorage::slice_mut`]).
//! - [`KernelEntry`]'s fields are public: an entry is a key; its signature must equal the build's.
//! - [`KernelHandle::new`] and [`BackendId::fresh`]: see handles above.
//! - [`GpuBackend`]: this crate calls a backend of the caller's making only through its safe
//!   methods, and trusts nothing it returns in an `unsafe` block or a check: a graph from its
//!   [`capture`](GpuBackend::capture) is checked against the graph's own bindings, recorded by
//!   the capturing backend of this crate ([`graph::Capture`]); a [`ConstBuffer`], whose host copy
//!   a check reads, comes only from this crate's backends, never from the caller's `alloc` and
//!   `copy_to_device` (which could write other bytes than it was given), so a check can read no
//!   other data than the kernel will.
//! - [`DeviceGraph`], [`BufferStorage`], [`modules::ModuleLoader`], [`modules::ModuleSet`]: what an
//!   implementation of the caller's reports is used only by that caller's own backend, or (a
//!   graph's bindings) checked before any `unsafe` call; a graph's `launch` is the caller's code.
//! - [`cpu::CpuBackend::with_kernel`] runs safe Rust on slices of the views.
//! - [`emu::DriverBackend::new`] runs the given driver in a child process; its response is read
//!   with bounds checks and written only into the launch's views. [`emu::EmuBackend::new`] loads
//!   into this process only sets built without a sanitizer (as the sets record), and runs the
//!   others in their driver.
//! - [`In`] and [`Out`] are made from kda's views (checked at launch) or cudarc's own types;
//!   [`Borrowed`] has no public constructor. [`In::from_device_ptr`] and [`Out::from_device_ptr`]
//!   are `unsafe`, as are [`ImageSet::from_build`], [`EmulatedSet::from_build`] and
//!   [`EmulatedSet::leak`]:
//!   their `# Safety` sections say what the caller vouches for.
//!
//! Every `unsafe` block in this crate says what it relies on and which of the code above ensures
//! it; [`GpuBackend::launch_unchecked`]'s `# Safety` lists what its caller guarantees instead.
//!
//! ```
//! use kda_runtime::record::RecordingBackend;
//! use kda_runtime::{GpuBackend, try_kernel};
//!
//! use kda_runtime::KernelEntry;
//!
//! let gpu = RecordingBackend::new().with_kernel("gemm", "dense_gemm_bf16");
//! assert!(gpu.lookup(&KernelEntry::named("gemm", "dense_gemm_bf16")).is_ok());
//! // "Not found" is the only failure an optional kernel turns into `None`.
//! assert_eq!(try_kernel(&gpu, &KernelEntry::named("gemm", "dense_gemm_f32")).unwrap(), None);
//! ```

// These docs link the backends behind the features `cuda` and `emulation`: documented with both
// (docs.rs, CI's `--all-features`), every link is checked; without them, those links have nothing
// to resolve to.
#![cfg_attr(not(all(feature = "cuda", feature = "emulation")), allow(rustdoc::broken_intra_doc_links))]

mod argument;
mod backend;
mod borrowed;
mod buffer;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "emulation")]
pub mod emu;
mod entry;
mod error;
#[cfg(test)]
mod fixtures;
mod forward;
pub mod graph;
mod handle;
pub mod host;
mod image;
mod lookup;
pub mod modules;
pub mod per_device;
pub mod profile;
pub mod record;
mod registry;
pub mod replay;
mod resolve;
mod scalar;
pub mod signature;
mod stream;
mod table;
mod trusted;

pub use argument::{In, Out, Untyped};
pub use backend::{GpuBackend, GpuBackendExt, KernelArg, LaunchGeometry};
pub use borrowed::Borrowed;
pub use buffer::{BufferStorage, ConstBuffer, DType, DeviceBuffer, Element, Fp8E4M3, Fp8E5M2, View, ViewMut};
pub use entry::KernelEntry;
pub use error::BackendError;
pub use graph::{BoundBuffer, DeviceGraph, GraphBindings};
pub use handle::{BackendId, KernelHandle};
// For the launchers `#[derive(KernelTable)]` generates.
#[doc(hidden)]
pub use handle::FieldHandle;
pub use image::{
    BuiltEntry, CudaArch, EmulatedLibrary, EmulatedModule, EmulatedSet, ImageCoverage, ImageSet,
    Incompatibility, KernelImage, PtxImage,
};
pub use lookup::{LookupError, try_kernel};
pub use per_device::{DeviceResolveError, PerDevice};
pub use resolve::{ResolveError, ResolveProblem, Resolver};
pub use scalar::{Scalar, ScalarValue};
pub use signature::Signature;
pub use table::KernelTable;
pub use trusted::launch_trusting;

/// `#[derive(KernelTable)]`: the kernel table of a marker type, generated from a table of the
/// crate's `kernels.toml` (see [Getting started](crate#getting-started) and the derive's own
/// documentation below).
pub use kda_macros::KernelTable;

/// The cudarc this crate is built with, for an engine's own CUDA work beside kda's (see
/// [`cuda::CudaBackend::stream`]).
#[cfg(feature = "cuda")]
pub use cudarc;

pub use half::{bf16, f16};
/// The sanitizers an [`EmulatedSet`] can be built with (`KDA_EMULATOR_SANITIZER`).
pub use kda_types::Sanitizer;
