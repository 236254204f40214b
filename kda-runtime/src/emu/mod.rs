//! The emulation backends (feature `emulation`): the CUDA kernels themselves, compiled as C++ from
//! the same sources by the build's emulated step (kda-emu's toolchain), run on host threads. For
//! testing kernels where no GPU is at hand.
//!
//! Each block runs with one OS thread per CUDA thread, the blocks of a grid one at a time in an
//! order shuffled by a seed, so no kernel may rely on block order; `__syncthreads`, warp shuffles
//! and `cp.async` keep their CUDA meaning, and what a kernel does wrong with them (a barrier not
//! every thread reaches, a shuffle with lanes missing, a read of an asynchronous copy before its
//! wait) is a launch `Err` naming the kernel, the block and the thread, never a hang. Shared
//! memory reads as NaN until written. Launches are checked against the manifest's params as on
//! every backend, and each kernel's C parameter types against them.
//!
//! One backend, [`Emulator`], with two executors: [`InProcess`] runs each launch in this process
//! (kda-emu's raw layer), [`Driver`] in a driver process of its own, where a sanitizer can run.
//! Both keep memory in this process, resolve through the same module cache and number their
//! launches' seeds the same way. [`EmuBackend`], the one a test names, chooses between them by
//! how the sets were built: in process without a sanitizer, through the sets' driver with one
//! (`KDA_EMULATOR_SANITIZER=address|thread`, read by the build), so one test runs both ways
//! unchanged. [`DriverBackend`] runs a driver the caller names.
//!
//! The launch seed is `KDA_EMU_SEED` (or [`Emulator::with_seed`]) plus the launch's number; a
//! failing launch reports its seed, so its block order can be replayed.
//!
//! Memory is host memory, as on the CPU backend; a launch's dynamic shared memory is one buffer of
//! its size, NaN bytes before every block. Not emulated: concurrency between blocks, the GPU
//! memory model beyond barriers, and any intrinsic the shim does not declare (the module does not
//! build).

mod backend;
mod driver;
mod in_process;

pub use backend::EmuBackend;
pub use driver::Driver;
pub use in_process::InProcess;

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use kda_types::ParamCType;

use crate::host::HostMemory;
use crate::modules::{ModuleCache, ModuleLoader, Resolved};
use crate::signature::{Access, ParamKind};
use crate::{
    BackendError, BackendId, DType, DeviceBuffer, EmulatedSet, GpuBackend, KernelArg, KernelEntry,
    KernelHandle, LaunchGeometry, LookupError, signature,
};

/// Runs emulated kernels through a driver the caller names, one process per launch: with a
/// sanitizer compiled into the driver and the libraries, every launch runs sanitized.
/// [`EmuBackend`] runs the sets' own driver where they were built with a sanitizer.
pub type DriverBackend = Emulator<Driver>;

/// How an [`Emulator`] runs a launch: it loads the kernels (as the module cache's loader) and runs
/// one launch of them. Sealed: [`InProcess`] and [`Driver`] are the two.
pub trait Executor: ModuleLoader<Set = EmulatedSet> + sealed::Sealed {
    /// Runs one launch with block-order seed `seed`. `extents` are the buffers' extents of a
    /// checked launch (`signature::extents` accepted it), `None` for an unchecked one. The
    /// emulator has refused borrowed memory before (were one passed, its C type would match no
    /// parameter, which the executors refuse too).
    ///
    /// # Safety
    ///
    /// Without `extents`, every view holds the elements the kernel touches through it at these
    /// scalars and this geometry (`launch_unchecked`'s contract).
    unsafe fn run(
        &self,
        memory: &HostMemory,
        kernel: &Resolved<Self::Function>,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
        seed: u64,
        extents: Option<&[Option<u64>]>,
    ) -> Result<(), BackendError>;

    /// What `alloc_for_write` fills a buffer with, if anything.
    fn write_fill(&self) -> Option<u8>;
}

mod sealed {
    /// Only this module's executors implement [`super::Executor`].
    pub trait Sealed {}
    impl Sealed for super::InProcess {}
    impl Sealed for super::Driver {}
}

/// The emulation backend: host memory, the emulated kernels of one or more crates (each in its
/// namespace), block-order seeds, and an executor that runs the launches.
pub struct Emulator<X: Executor> {
    id: BackendId,
    memory: HostMemory,
    modules: ModuleCache<X>,
    seed: u64,
    launches: AtomicU64,
}

impl<X: Executor> fmt::Debug for Emulator<X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Emulator")
            .field("id", &self.id)
            .field("device", &self.modules.loader().device())
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

impl<X: Executor> Emulator<X> {
    /// A backend running the kernels of `sets` with the executor `executor` makes for its id. Two distinct sets with one module
    /// of one namespace are an `Err`.
    fn with_executor(
        executor: impl FnOnce(BackendId) -> X,
        sets: &[&'static EmulatedSet],
        seed: u64,
    ) -> Result<Self, BackendError> {
        let id = BackendId::fresh();
        Ok(Self {
            id,
            memory: HostMemory::new(id),
            modules: ModuleCache::new(executor(id), sets)?,
            seed,
            launches: AtomicU64::new(0),
        })
    }

    /// The same backend with block orders from `seed`.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The seed the block orders of this backend's launches derive from.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    fn resolved(&self, kernel: KernelHandle) -> Result<Resolved<X::Function>, BackendError> {
        self.modules.resolved(self.id, &self.describe(), kernel)
    }

    /// Refuses borrowed memory, as every backend but CUDA's does: it lies on a device, and the
    /// emulator's memory is this process's.
    fn refuse_borrowed(&self, args: &[KernelArg<'_>]) -> Result<(), BackendError> {
        match args
            .iter()
            .find_map(|arg| if let KernelArg::Borrowed(borrowed) = arg { Some(borrowed) } else { None })
        {
            Some(borrowed) => Err(crate::borrowed::refused(borrowed, self.describe())),
            None => Ok(()),
        }
    }

    /// The next launch's block-order seed.
    fn next_seed(&self) -> u64 {
        self.seed.wrapping_add(self.launches.fetch_add(1, Ordering::Relaxed))
    }
}

impl Emulator<InProcess> {
    /// The static shared memory of `entry`'s kernel, in bytes (after looking it up).
    pub fn static_shared_bytes(&self, entry: &KernelEntry) -> Result<u64, LookupError> {
        let handle = self.lookup(entry)?;
        let resolved = self.resolved(handle).map_err(|error| LookupError::failed(entry, error))?;
        Ok(resolved.function.library.static_shared_bytes())
    }
}

impl Emulator<Driver> {
    /// A backend running `driver` for the kernels of `sets` (all built with the driver's flags);
    /// block orders from `seed` as on [`EmuBackend`]. Sets built with different sanitizers are an
    /// `Err`, as on [`EmuBackend::new`].
    pub fn new(
        driver: impl Into<std::path::PathBuf>,
        sets: &[&'static EmulatedSet],
        seed: u64,
    ) -> Result<Self, BackendError> {
        let (driver, sanitizer) = (driver.into(), backend::common_sanitizer(sets)?);
        Self::with_executor(|id| Driver::new(driver, id, sanitizer), sets, seed)
    }
}

impl<X: Executor> GpuBackend for Emulator<X> {
    fn describe(&self) -> String {
        format!("{}, block-order seed {:#x}", self.modules.loader().device(), self.seed)
    }

    fn has_module(&self, module: &str) -> bool {
        self.modules.has_module(module)
    }

    fn lookup(&self, entry: &KernelEntry) -> Result<KernelHandle, LookupError> {
        self.modules.lookup(entry).map(|index| KernelHandle::new(self.id, index))
    }

    fn is_handle_of(&self, kernel: KernelHandle, entry: &KernelEntry) -> bool {
        self.modules.is_handle_of(self.id, kernel, entry)
    }

    fn alloc(&self, dtype: DType, len: usize) -> Result<DeviceBuffer, BackendError> {
        self.memory.alloc(dtype, len)
    }

    /// Filled as the executor fills it: with NaN (every byte 0xFF) in process, as the emulator
    /// fills shared memory, so a kernel that reads the buffer before writing it gets NaN, which
    /// the comparisons with the reference catch.
    fn alloc_for_write(&self, dtype: DType, len: usize) -> Result<DeviceBuffer, BackendError> {
        match self.modules.loader().write_fill() {
            Some(byte) => self.memory.alloc_filled(dtype, len, byte),
            None => self.memory.alloc(dtype, len),
        }
    }

    crate::host::host_copy_methods!(memory);

    fn launch(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        let resolved = self.resolved(kernel)?;
        let extents = signature::extents(&resolved.entry, &geometry, args)?;
        self.refuse_borrowed(args)?;
        // SAFETY: `signature::extents` just checked the launch (every view at least as long as
        // its extent at these scalar values, every requirement of the entry at this geometry) and
        // the extents go with it.
        unsafe {
            self.modules.loader().run(
                &self.memory,
                &resolved,
                geometry,
                args,
                self.next_seed(),
                Some(&extents),
            )
        }
    }

    unsafe fn launch_unchecked(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        let resolved = self.resolved(kernel)?;
        self.refuse_borrowed(args)?;
        // SAFETY: the caller upholds `launch_unchecked`'s contract, which is `run`'s without
        // extents.
        unsafe { self.modules.loader().run(&self.memory, &resolved, geometry, args, self.next_seed(), None) }
    }

    fn synchronize(&self) -> Result<(), BackendError> {
        Ok(())
    }
}

/// The elements of each view's buffer a launch hands the kernel (the driver sends them, the
/// runtime stages them with a guard page after them): from the view's start, its extent where
/// there is one, else the whole view.
fn windows(
    args: &[KernelArg<'_>],
    extents: Option<&[Option<u64>]>,
) -> Result<Vec<Option<Range<usize>>>, BackendError> {
    args.iter()
        .enumerate()
        .map(|(index, arg)| {
            let range = match arg {
                KernelArg::Read(view) => view.checked_range()?,
                KernelArg::Write(view) => view.checked_range()?,
                // Borrowed memory never reaches an executor (`Emulator::refuse_borrowed`).
                KernelArg::Scalar(_) | KernelArg::Null | KernelArg::Borrowed(_) => return Ok(None),
            };
            let extent = extents.and_then(|extents| extents.get(index).copied().flatten());
            // `check` proved every extent at most the view's length.
            let len = extent.map_or(range.len(), |extent| {
                usize::try_from(extent).map_or(range.len(), |extent| extent.min(range.len()))
            });
            Ok(Some(range.start..range.start + len))
        })
        .collect()
}

/// A failed launch's reason: the runtime's message, the parameter an out-of-bounds access went
/// through named as the entry's signature names it (the runtime knows its position only).
fn fault_reason(fault: &kda_emu::Fault, entry: &KernelEntry) -> String {
    let named = fault.access.as_ref().and_then(|access| {
        let index = access.parameter?;
        let param = entry.signature?.params.get(usize::try_from(index).ok()?)?;
        Some((index, param.name))
    });
    match named {
        Some((index, name)) => {
            fault.message.replacen(&format!("parameter {index},"), &format!("parameter {index} `{name}`,"), 1)
        }
        None => fault.message.clone(),
    }
}

/// The C type an argument fills, as the emulator's runtime spells parameter types, where the
/// kernel's parameter is `param` (its C type as the runtime reports it): a null pointer fills any
/// pointer, and a view of any element type a `void` pointer its access allows (a mutable view a
/// `const void*` too, as C converts `T*` to `const void*`).
fn c_type_of(arg: &KernelArg<'_>, param: &str) -> String {
    let fills_void = match arg {
        KernelArg::Read(_) => param == "const void*",
        KernelArg::Write(_) => param == "void*" || param == "const void*",
        KernelArg::Null => param.ends_with('*'),
        KernelArg::Scalar(_) | KernelArg::Borrowed(_) => false,
    };
    match arg {
        _ if fills_void => param.to_owned(),
        KernelArg::Read(view) => pointer(view.dtype(), false),
        KernelArg::Write(view) => pointer(view.dtype(), true),
        KernelArg::Null => "a null pointer".to_owned(),
        KernelArg::Borrowed(borrowed) => borrowed.describe(),
        scalar => scalar.scalar_kind().map_or("?", |kind| kind.name()).to_owned(),
    }
}

/// The C spelling of a parameter, as the emulator's runtime reports it: `const bf16*`, `u32`.
fn c_type(kind: &ParamKind) -> String {
    let ty = match *kind {
        ParamKind::Buffer { dtype, access, .. } => {
            ParamCType::Pointer { element: dtype, writable: access == Access::Write }
        }
        ParamKind::Scalar(scalar) => ParamCType::Scalar(scalar),
    };
    ty.manifest_spelling().to_string()
}

/// The emulator's runtime's spelling of a pointer parameter: `const bf16*`.
fn pointer(element: DType, writable: bool) -> String {
    ParamCType::Pointer { element, writable }.manifest_spelling().to_string()
}

/// A scalar's bits, widened to 64 (little-endian: the value's own bytes come first).
fn scalar_bits(arg: &KernelArg<'_>) -> Option<u64> {
    match arg {
        KernelArg::Scalar(scalar) => Some(scalar.bits()),
        // A null pointer is the bits of 0.
        KernelArg::Null => Some(0),
        KernelArg::Read(_) | KernelArg::Write(_) | KernelArg::Borrowed(_) => None,
    }
}

fn parse_seed(text: &str) -> Option<u64> {
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

fn fresh_seed() -> u64 {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |t| t.as_nanos());
    (nanos as u64) ^ u64::from(std::process::id()).rotate_left(32)
}
