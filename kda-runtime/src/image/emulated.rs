//! The emulated form of a crate's kernels: shared libraries its build compiled from the same
//! sources as C++ against the emulator's shim (`kda_build::cuda::emulation`), which the
//! emulation backend loads. They live in the build's `OUT_DIR`, so a binary that uses them runs
//! where it was built: they are for tests and tools, not for shipping.

/// One crate's emulated kernels, as its build listed them: the generated `EMULATED_KERNELS`.
#[derive(Clone, Copy, Debug)]
pub struct EmulatedSet {
    /// `<crate>@<version>:<manifest path>`, the namespace its tables resolve in.
    pub namespace: &'static str,
    /// One per module, in manifest order.
    pub modules: &'static [EmulatedModule],
    /// The driver built with the same flags, which runs one launch per process
    /// ([`DriverBackend`](crate::emu::DriverBackend)); `None` if it did not build.
    pub driver: Option<&'static str>,
}

/// One module's emulated kernels.
#[derive(Clone, Copy, Debug)]
pub struct EmulatedModule {
    /// The module, `kernels/<module>.cu`.
    pub module: &'static str,
    /// One library per entry of the module.
    pub libraries: &'static [EmulatedLibrary],
}

/// The emulated library of one entry: the module compiled with that kernel alone registered.
#[derive(Clone, Copy, Debug)]
pub struct EmulatedLibrary {
    /// The kernel's `extern "C"` name.
    pub entry: &'static str,
    /// The shared library's absolute path.
    pub path: &'static str,
}
