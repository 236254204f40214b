//! The emulation backend (feature `emulation`): the CUDA kernels themselves, compiled as C++ from
//! the same sources by the build's emulated step (`kda_build::cuda::emulation`), run on host
//! threads. For testing kernels where no GPU is at hand.
//!
//! Each block runs with one OS thread per CUDA thread, the blocks of a grid one at a time in an
//! order shuffled by a seed, so no kernel may rely on block order; `__syncthreads`, warp shuffles
//! and `cp.async` keep their CUDA meaning, and what a kernel does wrong with them (a barrier not
//! every thread reaches, a shuffle with lanes missing, a read of an asynchronous copy before its
//! wait) is a launch `Err` naming the kernel, the block and the thread, never a hang. Shared
//! memory reads as NaN until written. Launches are checked against the manifest's params as on
//! every backend, and each kernel's C parameter types against them when it is looked up.
//!
//! The launch seed is `KDA_EMU_SEED` (or [`EmuBackend::with_seed`]) plus the launch's number; a
//! failing launch reports its seed, so its block order can be replayed.
//!
//! Memory is host memory, as on the CPU backend; a launch's dynamic shared memory is one buffer of
//! its size, NaN bytes before every block. Not emulated: concurrency between blocks, the GPU
//! memory model beyond barriers, and any intrinsic the shim does not declare (the module does not
//! build).

mod driver;
mod loader;

pub use driver::DriverBackend;

use std::ffi::c_void;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::host::{HostMemory, HostStorage};
use crate::modules::{ModuleCache, Resolved};
use crate::signature;
use crate::{
    BackendError, BackendId, DType, DeviceBuffer, EmulatedSet, GpuBackend, KernelArg, KernelEntry,
    KernelHandle, LaunchGeometry, LookupError,
};
use loader::{DEVICE, EmuFunction, EmuLoader};

/// The alignment the emulator needs of every buffer, so that a kernel's 16-byte vector path is
/// taken exactly where it would be on a GPU (whose allocations are 256-byte aligned).
const BUFFER_ALIGNMENT: usize = 16;

/// Runs emulated kernels of one or more crates on host threads.
pub struct EmuBackend {
    id: BackendId,
    memory: HostMemory,
    modules: ModuleCache<EmuLoader>,
    seed: u64,
    launches: AtomicU64,
}

impl fmt::Debug for EmuBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmuBackend").field("id", &self.id).field("seed", &self.seed).finish_non_exhaustive()
    }
}

impl EmuBackend {
    /// A backend carrying the emulated kernels of `sets`, each crate's in its namespace; the seed
    /// from `KDA_EMU_SEED` (decimal or `0x` hex), else a fresh one. Two distinct sets with one
    /// module of one namespace are an `Err`.
    pub fn new(sets: &[&'static EmulatedSet]) -> Result<Self, BackendError> {
        let seed =
            std::env::var("KDA_EMU_SEED").ok().and_then(|text| parse_seed(&text)).unwrap_or_else(fresh_seed);
        let id = BackendId::fresh();
        Ok(Self {
            id,
            memory: HostMemory::new(id),
            modules: ModuleCache::new(EmuLoader, sets)?,
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

    /// The static shared memory of `entry`'s kernel, in bytes (after looking it up).
    pub fn static_shared_bytes(&self, entry: &KernelEntry) -> Result<u64, LookupError> {
        let handle = self.lookup(entry)?;
        let resolved = self.resolved(handle).map_err(|error| LookupError::failed(entry, error))?;
        Ok(resolved.function.library.static_shared_bytes())
    }

    fn resolved(&self, kernel: KernelHandle) -> Result<Resolved<EmuFunction>, BackendError> {
        self.modules.resolved(self.id, &self.describe(), kernel)
    }

    /// Checks that `args` fill the kernel's C parameters kind for kind (what the library
    /// reports, so this holds with or without a signature), then runs the launch.
    ///
    /// # Safety
    ///
    /// Every view holds the elements the kernel touches through it at these scalars and this
    /// geometry (for a checked launch, `signature::check` and the manifest's extents).
    unsafe fn run(
        &self,
        kernel: &Resolved<EmuFunction>,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        let failed = |reason: String| BackendError::Launch {
            module: kernel.entry.module.to_owned(),
            entry: kernel.entry.entry.to_owned(),
            reason,
        };
        let params = &kernel.function.params;
        if params.len() != args.len() {
            return Err(failed(format!(
                "{} arguments for the kernel's {} parameters",
                args.len(),
                params.len()
            )));
        }
        // What each parameter receives, as the bits of its C value: a view's element pointer or
        // a scalar, widened to 64 bits (little-endian, so the value's own bytes come first).
        let mut values = Vec::with_capacity(args.len());
        for (index, (arg, param)) in args.iter_mut().zip(params.iter()).enumerate() {
            let (given, value) = self.bind(arg)?;
            if given != *param {
                return Err(failed(format!(
                    "argument {index} is `{given}` where the kernel takes `{param}`"
                )));
            }
            values.push(value);
        }
        // One pointer per value, all from one borrow of `values`, which is not touched again.
        let base = values.as_mut_ptr();
        // SAFETY: `index < values.len()`, so each pointer stays inside the vector.
        let pointers: Vec<*mut c_void> =
            (0..values.len()).map(|index| unsafe { base.add(index) }.cast::<c_void>()).collect();
        let LaunchGeometry { grid, block, shared_mem_bytes } = geometry;
        let seed = self.seed.wrapping_add(self.launches.fetch_add(1, Ordering::Relaxed));
        // SAFETY: `pointers[i]` points to a value of the C type of parameter i: the library
        // reported the kernel's parameter types (its C++ compiler deduced them from the kernel's
        // declaration) and each argument was just matched against them, a view as a pointer to
        // its first element, a scalar as a value of its exact width in `values`. Views lie inside
        // their buffers (`bind` checked the range) and the caller guarantees they hold what the
        // kernel touches. Buffers the kernel writes come as `ViewMut`s, which borrow their buffer
        // exclusively for as long as `args` lives, so nothing else reads or writes them during the
        // call; read-only views are never written (their parameters are `const`). The runtime
        // runs the launch to completion before returning and keeps no pointer.
        let launched = unsafe {
            kernel.function.library.launch(
                kernel.function.index,
                &pointers,
                [grid.0, grid.1, grid.2],
                [block.0, block.1, block.2],
                shared_mem_bytes,
                seed,
            )
        };
        launched.map_err(failed)
    }

    /// One argument as the kernel receives it: its C type and its value's bits (a view's element
    /// pointer, or the scalar).
    fn bind(&self, arg: &mut KernelArg<'_>) -> Result<(String, u64), BackendError> {
        let given = c_type_of(arg);
        let bits = match arg {
            KernelArg::Read(view) => {
                let range = view.checked_range()?;
                let bytes = self.memory.storage(view.buffer())?.bytes();
                element_pointer(bytes.as_ptr(), bytes.len(), view.dtype(), range.start)?
            }
            KernelArg::Write(view) => {
                let (range, dtype) = (view.checked_range()?, view.dtype());
                let storage: &mut HostStorage = self.memory.storage_mut(view.buffer_mut())?;
                let bytes = storage.bytes_mut();
                element_pointer(bytes.as_mut_ptr(), bytes.len(), dtype, range.start)?
            }
            scalar => scalar_bits(scalar).unwrap_or_default(),
        };
        Ok((given, bits))
    }
}

/// The C type an argument fills, as the emulator's runtime spells parameter types.
fn c_type_of(arg: &KernelArg<'_>) -> String {
    match arg {
        KernelArg::Read(view) => format!("const {}*", view.dtype()),
        KernelArg::Write(view) => format!("{}*", view.dtype()),
        scalar => scalar.scalar_kind().map_or("?", |kind| kind.name()).to_owned(),
    }
}

/// A scalar's bits, widened to 64 (little-endian: the value's own bytes come first).
fn scalar_bits(arg: &KernelArg<'_>) -> Option<u64> {
    Some(match arg {
        KernelArg::U32(value) => u64::from(*value),
        KernelArg::I32(value) => u64::from(value.cast_unsigned()),
        KernelArg::U64(value) => *value,
        KernelArg::F32(value) => u64::from(value.to_bits()),
        KernelArg::Read(_) | KernelArg::Write(_) => return None,
    })
}

/// The address of element `start` of a buffer of `len` bytes at `base`, which must be aligned
/// as a GPU allocation would be for the vector paths (an empty buffer has no address to align).
fn element_pointer(base: *const u8, len: usize, dtype: DType, start: usize) -> Result<u64, BackendError> {
    if len > 0 && !base.addr().is_multiple_of(BUFFER_ALIGNMENT) {
        return Err(BackendError::Unavailable {
            backend: DEVICE.to_owned(),
            reason: format!("a host buffer at {base:p} is not {BUFFER_ALIGNMENT}-byte aligned"),
        });
    }
    // In bounds: `start` is at most the buffer's length (`checked_range`).
    // Exposed, not just computed: the kernel dereferences the address it is handed.
    Ok((base.expose_provenance() + start * dtype.size()) as u64)
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

impl GpuBackend for EmuBackend {
    fn describe(&self) -> String {
        format!("{DEVICE}, block-order seed {:#x}", self.seed)
    }

    fn has_module(&self, module: &str) -> bool {
        self.modules.has_module(module)
    }

    fn lookup(&self, entry: &KernelEntry) -> Result<KernelHandle, LookupError> {
        self.modules.lookup(entry).map(|index| KernelHandle::new(self.id, index))
    }

    fn alloc(&self, dtype: DType, len: usize) -> Result<DeviceBuffer, BackendError> {
        self.memory.alloc(dtype, len)
    }

    /// Filled with NaN (every byte 0xFF), as the emulator fills shared memory: a kernel that reads
    /// the buffer before writing it gets NaN, which the comparisons with the reference catch.
    fn alloc_for_write(&self, dtype: DType, len: usize) -> Result<DeviceBuffer, BackendError> {
        self.memory.alloc_filled(dtype, len, 0xFF)
    }

    crate::host::host_copy_methods!(memory);

    fn launch(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        let resolved = self.resolved(kernel)?;
        signature::check(&resolved.entry, &geometry, args)?;
        // SAFETY: `signature::check` just proved every view at least as long as its extent at
        // these scalar values and every requirement of the entry at this geometry; the extents
        // are what the kernel touches, the manifest's contract for it (the emulated suite and its
        // AddressSanitizer run test exactly that, with buffers of exactly those extents).
        unsafe { self.run(&resolved, geometry, args) }
    }

    unsafe fn launch_unchecked(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        let resolved = self.resolved(kernel)?;
        // SAFETY: the caller upholds `launch_unchecked`'s contract, which includes `run`'s.
        unsafe { self.run(&resolved, geometry, args) }
    }

    fn synchronize(&self) -> Result<(), BackendError> {
        Ok(())
    }
}
