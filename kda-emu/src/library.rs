//! The raw layer (feature `load`): one emulated library (a shared object the emulated build
//! made) and the C ABI its runtime exports ([`crate::abi`]), each call wrapped in a function
//! that is safe where the ABI makes it so. A launch stays `unsafe`: what its arguments point to is
//! the caller's to guarantee (kda-runtime's emulation backend does, from the launch contract).

use std::ffi::{CStr, CString, c_int, c_uint, c_void};

use crate::abi::{
    ABI_VERSION, AbiVersionFn, FaultSizeFn, FindFn, LaunchFn, ParamsFn, RawFault, StaticSharedFn,
};
use crate::fault::Fault;

/// An open emulated library and its entry points.
pub struct Library {
    launch: LaunchFn,
    find: FindFn,
    params: ParamsFn,
    static_shared: StaticSharedFn,
    /// Kept open as long as the function pointers above are used.
    _library: libloading::Library,
}

/// One kernel of a library: its index in the library's registry.
#[derive(Clone, Copy, Debug)]
pub struct EntryIndex(c_int);

impl Library {
    /// Opens the library at `path` and checks its ABI version.
    ///
    /// # Safety
    ///
    /// `path` is a library the emulated build made ([`crate::toolchain`]): loading runs its
    /// initialisers, and any other library's may do anything.
    pub unsafe fn open(path: &str) -> Result<Self, String> {
        // SAFETY: the caller guarantees an emulated library, whose initialisers are the
        // emulator's runtime's, which call the registration of its one entry (kda_emu_runtime.cpp,
        // the generated unit): they only fill the library's own registry.
        let library = unsafe { libloading::Library::new(path) }.map_err(|error| error.to_string())?;
        // SAFETY: each symbol is looked up with the type `kda_abi.h` declares for it, and the
        // pointers are used only while `library` (moved into the result) stays open.
        unsafe {
            let version: AbiVersionFn = *library.get(b"kda_emu_abi_version\0").map_err(|e| e.to_string())?;
            let found = version();
            if found != ABI_VERSION {
                return Err(format!("emulator ABI version {found}, expected {ABI_VERSION}: rebuild it"));
            }
            let fault_size: FaultSizeFn = *library.get(b"kda_emu_fault_size\0").map_err(|e| e.to_string())?;
            let (theirs, ours) = (fault_size(), std::mem::size_of::<RawFault>());
            if usize::try_from(theirs) != Ok(ours) {
                return Err(format!(
                    "the library's fault record is {theirs} bytes, this loader's {ours}: rebuild it"
                ));
            }
            Ok(Self {
                launch: *library.get(b"kda_emu_launch\0").map_err(|e| e.to_string())?,
                find: *library.get(b"kda_emu_find\0").map_err(|e| e.to_string())?,
                params: *library.get(b"kda_emu_params\0").map_err(|e| e.to_string())?,
                static_shared: *library.get(b"kda_emu_static_shared_bytes\0").map_err(|e| e.to_string())?,
                _library: library,
            })
        }
    }

    /// The registered kernel called `name`, if the library has it.
    pub fn find(&self, name: &str) -> Option<EntryIndex> {
        let name = CString::new(name).ok()?;
        // SAFETY: `name` is a NUL-terminated string that outlives the call; the runtime only
        // compares it with its registered names.
        let index = unsafe { (self.find)(name.as_ptr()) };
        (index >= 0).then_some(EntryIndex(index))
    }

    /// The kernel's parameter types as the C++ compiler saw them: `["const bf16*", "u32"]`.
    pub fn params(&self, entry: EntryIndex) -> Vec<String> {
        // SAFETY: `entry` came from `find` on this library; the runtime returns a pointer to a
        // NUL-terminated string it owns for the library's lifetime (or NULL).
        let text = unsafe { (self.params)(entry.0) };
        if text.is_null() {
            return Vec::new();
        }
        // SAFETY: non-null, NUL-terminated, alive while the library is open (see above).
        let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
        text.split(',').filter(|part| !part.is_empty()).map(str::to_owned).collect()
    }

    /// The static `__shared__` bytes of the library's kernel.
    pub fn static_shared_bytes(&self) -> u64 {
        // SAFETY: takes no argument and reads the linker's section bounds.
        unsafe { (self.static_shared)() }
    }

    /// Runs every block of a launch; the runtime's fault when it fails. Each argument is a pointer
    /// to its value and, for a buffer, the bytes of its view the kernel may reach (0 for a
    /// scalar): without a sanitizer the runtime stages each view at that size between guards and
    /// checks the kernel's loads and stores against it, so an access outside it, either side, is
    /// the launch's [`FaultKind::OutOfBounds`](crate::FaultKind::OutOfBounds) fault, and a fault of
    /// the kernel's own (a division by zero, an access the processor refuses, a trap) its
    /// [`FaultKind::Kernel`](crate::FaultKind::Kernel) fault, the process left running.
    ///
    /// # Safety
    ///
    /// For each `(value, size)` of `args`, `value` points to a live value of the C type of the
    /// kernel's parameter at that position (for a buffer, a pointer to at least `size` bytes,
    /// readable, writable where the kernel writes, holding every element the kernel touches at
    /// these arguments and geometry where the runtime does not stage it (under a sanitizer), not
    /// aliased by anything Rust reads or writes during the call), for as long as the call runs.
    pub unsafe fn launch(
        &self,
        entry: EntryIndex,
        args: &[(*mut c_void, u64)],
        grid: [u32; 3],
        block: [u32; 3],
        dynamic_shared: u32,
        seed: u64,
    ) -> Result<(), Fault> {
        let mut fault = RawFault::new();
        let count = c_uint::try_from(args.len()).map_err(|_| {
            let message = format!("{} arguments", args.len());
            Fault { kind: crate::FaultKind::Refused, place: None, access: None, message }
        })?;
        let (values, sizes): (Vec<*mut c_void>, Vec<u64>) = args.iter().copied().unzip();
        // SAFETY: the caller guarantees the arguments and that each view holds its size; `values`
        // and `sizes` have one entry per argument, as the runtime reads them; `grid` and `block`
        // are three values each as the ABI reads them; `fault` is a record of the layout the
        // library reported at open. The runtime catches every C++ exception, so none unwinds into
        // Rust.
        let status = unsafe {
            (self.launch)(
                entry.0,
                values.as_ptr(),
                sizes.as_ptr(),
                count,
                grid.as_ptr(),
                block.as_ptr(),
                dynamic_shared,
                seed,
                &mut *fault,
            )
        };
        if status == 0 { Ok(()) } else { Err(fault.to_fault()) }
    }
}
