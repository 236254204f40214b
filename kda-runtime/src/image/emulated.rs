//! The emulated form of a crate's kernels: shared libraries its build compiled from the same
//! sources as C++ against the emulator's shim (`kda_build::cuda::emulation`), which the
//! emulation backend loads. They live in the build's `OUT_DIR`, so a binary that uses them runs
//! where it was built: they are for tests and tools, not for shipping.

use super::BuiltEntry;
use crate::{KernelEntry, Sanitizer};

/// One crate's emulated kernels, as its build listed them: the generated `EMULATED_KERNELS`,
/// with the sanitizer they were built with (`KDA_EMULATOR_SANITIZER`), which decides where they
/// can run: in this process without one, in the driver built with the same flags with one.
///
/// The emulation backends load these libraries into the process (or run the driver) and trust the
/// signatures they carry, so only the build step, or a tool that builds the same way, makes one:
/// both constructors are `unsafe`.
#[derive(Clone, Copy, Debug)]
pub struct EmulatedSet {
    namespace: &'static str,
    modules: &'static [EmulatedModule],
    sanitizer: Option<Sanitizer>,
    driver: Option<&'static str>,
}

impl EmulatedSet {
    /// The set the build step wrote: `namespace`, one module per manifest module in order, the
    /// sanitizer compiled into every library, and the driver built with the same flags.
    ///
    /// # Safety
    ///
    /// Every library path and the driver are files the emulated build of `kda_build` wrote from
    /// the module's sources against the emulator's runtime, all with `sanitizer` compiled in (an
    /// unsanitized library's constructors and its `kda_emu_launch` run in this process when it is
    /// looked up), and each module's [`entries`](EmulatedModule::entries) names a kernel of its
    /// libraries whose C parameters are exactly its signature's.
    pub const unsafe fn from_build(
        namespace: &'static str,
        modules: &'static [EmulatedModule],
        sanitizer: Option<Sanitizer>,
        driver: Option<&'static str>,
    ) -> Self {
        Self { namespace, modules, sanitizer, driver }
    }

    /// A set made at run time (a tool that builds kernels itself): `libraries` as `(module,
    /// entry, path)` in manifest order, grouped by module, each module proving the signatures
    /// that `proved` (the entries of the tables it was built for) give its entry points, all built
    /// with `sanitizer`. Its strings are leaked, as a build's `EMULATED_KERNELS` are static: make
    /// one per build, not per launch.
    ///
    /// # Safety
    ///
    /// As [`EmulatedSet::from_build`]: each path and the driver are what the emulated build wrote
    /// for that module with `sanitizer` compiled in, and every entry of `proved` whose module and
    /// entry point a library has takes exactly the C parameters of its signature.
    pub unsafe fn leak<'a>(
        namespace: &'static str,
        libraries: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
        proved: &[KernelEntry],
        sanitizer: Option<Sanitizer>,
        driver: Option<&str>,
    ) -> &'static EmulatedSet {
        let leak = |text: &str| -> &'static str { Box::leak(text.to_owned().into_boxed_str()) };
        let mut modules: Vec<(&'static str, Vec<EmulatedLibrary>)> = Vec::new();
        for (module, entry, path) in libraries {
            let library = EmulatedLibrary { entry: leak(entry), path: leak(path) };
            match modules.iter_mut().find(|(name, _)| *name == module) {
                Some((_, group)) => group.push(library),
                None => modules.push((leak(module), vec![library])),
            }
        }
        let modules: Vec<EmulatedModule> = modules
            .into_iter()
            .map(|(module, libraries)| {
                let entries: Vec<BuiltEntry> = proved
                    .iter()
                    .filter(|entry| entry.module == module)
                    .filter_map(|entry| {
                        let library = libraries.iter().find(|library| library.entry == entry.entry)?;
                        // The emulator registers a kernel under its entry's own name.
                        Some(BuiltEntry {
                            entry: library.entry,
                            symbol: library.entry,
                            signature: entry.signature,
                        })
                    })
                    .collect();
                EmulatedModule {
                    module,
                    libraries: Box::leak(libraries.into_boxed_slice()),
                    entries: Box::leak(entries.into_boxed_slice()),
                }
            })
            .collect();
        let modules = Box::leak(modules.into_boxed_slice());
        // SAFETY: the caller's guarantee is `from_build`'s.
        Box::leak(Box::new(unsafe {
            EmulatedSet::from_build(namespace, modules, sanitizer, driver.map(leak))
        }))
    }

    /// `<crate>@<version>:<manifest path>`, the namespace its tables resolve in.
    pub const fn namespace(&self) -> &'static str {
        self.namespace
    }

    /// One per module, in manifest order.
    pub const fn modules(&self) -> &'static [EmulatedModule] {
        self.modules
    }

    /// The sanitizer compiled into its libraries and driver, if any: a set with one runs only in
    /// its driver ([`EmuBackend`](crate::emu::EmuBackend) chooses so).
    pub const fn sanitizer(&self) -> Option<Sanitizer> {
        self.sanitizer
    }

    /// The driver built with the same flags, which runs one launch per process
    /// ([`DriverBackend`](crate::emu::DriverBackend)); `None` if it did not build.
    pub const fn driver(&self) -> Option<&'static str> {
        self.driver
    }
}

/// One module's emulated kernels.
#[derive(Clone, Copy, Debug)]
pub struct EmulatedModule {
    /// The module, `kernels/<module>.cu`.
    pub module: &'static str,
    /// One library per entry of the module.
    pub libraries: &'static [EmulatedLibrary],
    /// The manifest's entries of this module, each with the signature the build proved.
    pub entries: &'static [BuiltEntry],
}

/// The emulated library of one entry: the module compiled with that kernel alone registered.
#[derive(Clone, Copy, Debug)]
pub struct EmulatedLibrary {
    /// The kernel's `extern "C"` name.
    pub entry: &'static str,
    /// The shared library's absolute path.
    pub path: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_made_at_run_time_groups_libraries_by_module_in_order() {
        let proved = [KernelEntry::named("conv", "prefill"), KernelEntry::named("gemm", "other")];
        // SAFETY: nothing loads these paths; the test reads the set's grouping only.
        let set = unsafe {
            EmulatedSet::leak(
                "ours@0.1.0:kernels.toml",
                [
                    ("conv", "decode", "/emu/a.so"),
                    ("gemm", "gemm", "/emu/b.so"),
                    ("conv", "prefill", "/emu/c.so"),
                ],
                &proved,
                Some(Sanitizer::Address),
                Some("/emu/driver"),
            )
        };
        let modules: Vec<(&str, Vec<&str>)> = set
            .modules
            .iter()
            .map(|module| (module.module, module.libraries.iter().map(|library| library.entry).collect()))
            .collect();
        assert_eq!(modules, [("conv", vec!["decode", "prefill"]), ("gemm", vec!["gemm"])]);
        assert_eq!(set.modules[0].libraries[1].path, "/emu/c.so");
        // Only the proved entries that a library has are carried as proved.
        let proved =
            |module: &EmulatedModule| module.entries.iter().map(|built| built.entry).collect::<Vec<_>>();
        assert_eq!((proved(&set.modules[0]), proved(&set.modules[1])), (vec!["prefill"], vec![]));
        assert_eq!((set.sanitizer(), set.driver()), (Some(Sanitizer::Address), Some("/emu/driver")));
    }
}
