//! The in-process executor: a module is its entries' libraries, opened together (kda-emu's raw
//! layer) on the first lookup of one of them; an entry's kernel is checked against the entry's
//! signature by the parameter types its library reports; a launch calls the library.

use std::ffi::c_void;
use std::sync::Arc;

use kda_emu::library::{EntryIndex, Library};

use super::{Executor, c_type, c_type_of, fault_reason, scalar_bits, windows};
use crate::host::{HostMemory, HostStorage};
use crate::modules::{LoadError, ModuleLoader, Resolved};
use crate::{
    BackendError, DType, EmulatedModule, EmulatedSet, KernelArg, KernelEntry, LaunchGeometry, LookupError,
    Signature,
};

/// The alignment the emulator needs of every buffer, so that a kernel's 16-byte vector path is
/// taken exactly where it would be on a GPU (whose allocations are 256-byte aligned).
const BUFFER_ALIGNMENT: usize = 16;

/// Runs each launch in this process, on the emulated libraries it opens.
#[derive(Clone, Copy, Debug)]
pub struct InProcess;

/// A module's open libraries, one per entry.
pub struct EmuModule {
    libraries: Vec<(&'static str, Arc<Library>)>,
}

/// One kernel ready to launch: its library and its index there.
#[derive(Clone)]
pub struct EmuFunction {
    pub(super) library: Arc<Library>,
    index: EntryIndex,
    /// The kernel's parameter types, for launches without a signature.
    params: Arc<[String]>,
}

/// What the emulator stands for, in messages.
const DEVICE: &str = "the CUDA emulator (kernels as C++ on host threads)";

impl ModuleLoader for InProcess {
    type Set = EmulatedSet;
    type Module = EmuModule;
    type Function = EmuFunction;

    fn device(&self) -> &str {
        DEVICE
    }

    fn load(&self, module: &'static EmulatedModule) -> Result<EmuModule, LoadError> {
        let libraries = module
            .libraries
            .iter()
            .map(|library| {
                // SAFETY: the path is one the emulated build wrote, as `EmulatedSet::new`'s
                // caller guaranteed: an emulated library, whose initialisers only register its
                // kernel.
                unsafe { Library::open(library.path) }.map(|open| (library.entry, Arc::new(open))).map_err(
                    |message| LoadError::Driver {
                        operation: format!(
                            "opening the emulated `{}::{}` ({})",
                            module.module, library.entry, library.path
                        ),
                        message,
                    },
                )
            })
            .collect::<Result<_, _>>()?;
        Ok(EmuModule { libraries })
    }

    fn function(&self, module: &EmuModule, entry: &KernelEntry, _: &str) -> Result<EmuFunction, LookupError> {
        let Some((_, library)) = module.libraries.iter().find(|(name, _)| *name == entry.entry) else {
            return Err(LookupError::entry_not_in_module(entry));
        };
        let index = library.find(entry.entry).ok_or_else(|| LookupError::entry_not_in_module(entry))?;
        let params: Arc<[String]> = library.params(index).into();
        if let Some(signature) = entry.signature {
            // A library built from other sources than the manifest describes fails here, at
            // resolve, instead of reading its arguments as the wrong types at launch.
            compare(signature, &params)
                .map_err(|reason| LookupError::SignatureMismatch { entry: Box::new(*entry), reason })?;
        }
        Ok(EmuFunction { library: Arc::clone(library), index, params })
    }
}

/// Whether the kernel's parameter types are the signature's, exactly and in order.
fn compare(signature: &Signature, params: &[String]) -> Result<(), String> {
    if signature.params.len() != params.len() {
        return Err(format!(
            "the emulated kernel takes {} parameters ({}), the signature declares {}",
            params.len(),
            params.join(", "),
            signature.params.len()
        ));
    }
    for (param, found) in signature.params.iter().zip(params) {
        let expected = c_type(&param.kind);
        if expected != *found {
            return Err(format!(
                "parameter `{}` is `{found}` in the kernel, `{expected}` in the signature",
                param.name
            ));
        }
    }
    Ok(())
}

impl Executor for InProcess {
    /// Checks that `args` fill the kernel's C parameters kind for kind (what the library
    /// reports, so this holds with or without a signature), then runs the launch, each view cut to
    /// its extent where the launch was checked (whole otherwise): the runtime stages it at that
    /// size with a guard page after it, so an access past it is the launch's `Err`.
    unsafe fn run(
        &self,
        memory: &HostMemory,
        kernel: &Resolved<EmuFunction>,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
        seed: u64,
        extents: Option<&[Option<u64>]>,
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
            let (given, value) = bind(memory, arg, param)?;
            if given != *param {
                return Err(failed(format!(
                    "argument {index} is `{given}` where the kernel takes `{param}`"
                )));
            }
            values.push(value);
        }
        // The bytes of each view the kernel may reach (its window), 0 for a scalar.
        let sizes: Vec<u64> = args
            .iter()
            .zip(windows(args, extents)?)
            .map(|(arg, window)| {
                let size = match arg {
                    KernelArg::Read(view) => view.dtype().size(),
                    KernelArg::Write(view) => view.dtype().size(),
                    KernelArg::Scalar(_) | KernelArg::Null | KernelArg::Borrowed(_) => 0,
                };
                window.map_or(0, |window| (window.len() * size) as u64)
            })
            .collect();
        // One pointer per value, all from one borrow of `values`, which is not touched again.
        let base = values.as_mut_ptr();
        // SAFETY: `index < values.len()`, so each pointer stays inside the vector.
        let pointers: Vec<(*mut c_void, u64)> = (0..values.len())
            .zip(sizes)
            .map(|(index, size)| (unsafe { base.add(index) }.cast::<c_void>(), size))
            .collect();
        let LaunchGeometry { grid, block, shared_mem_bytes } = geometry;
        // SAFETY: `pointers[i].0` points to a value of the C type of parameter i: the library
        // reported the kernel's parameter types (its C++ compiler deduced them from the kernel's
        // declaration) and each argument was just matched against them, a view as a pointer to
        // its first element, a scalar as a value of its exact width in `values`. Views lie inside
        // their buffers (`bind` checked the range) and hold their `pointers[i].1` bytes: `windows`
        // cut each to at most the view. A library loaded in process
        // has no sanitizer (a Rust binary cannot carry one), so its runtime copies those bytes of
        // each view in and the written ones back and the kernel touches only the copies;
        // what it touches is also within the views as the launch contract requires (for a
        // checked launch `signature::extents` proved each view at least its extent, for an
        // unchecked one the caller guarantees it). Buffers the kernel writes come as `ViewMut`s,
        // which borrow their buffer exclusively for as long as `args` lives, so nothing else reads
        // or writes them during the call; read-only views are never written (their parameters
        // are `const`, and the runtime copies back only the others). The runtime runs the launch
        // to completion before returning and keeps no pointer.
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
        launched.map_err(|fault| failed(fault_reason(&fault, &kernel.entry)))
    }

    fn write_fill(&self) -> Option<u8> {
        Some(0xFF)
    }
}

/// One argument as the kernel receives it: its C type and its value's bits (a view's element
/// pointer, or the scalar).
fn bind(memory: &HostMemory, arg: &mut KernelArg<'_>, param: &str) -> Result<(String, u64), BackendError> {
    let given = c_type_of(arg, param);
    let bits = match arg {
        KernelArg::Read(view) => {
            let range = view.checked_range()?;
            let bytes = memory.storage(view.buffer())?.bytes();
            element_pointer(bytes.as_ptr(), bytes.len(), view.dtype(), range.start)?
        }
        KernelArg::Write(view) => {
            let (range, dtype) = (view.checked_range()?, view.dtype());
            let storage: &mut HostStorage = memory.storage_mut(view.buffer_mut())?;
            let bytes = storage.bytes_mut();
            element_pointer(bytes.as_mut_ptr(), bytes.len(), dtype, range.start)?
        }
        scalar => scalar_bits(scalar).unwrap_or_default(),
    };
    Ok((given, bits))
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
