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

impl EmulatedSet {
    /// A set made at run time (a tool that builds kernels itself): `libraries` as `(module,
    /// entry, path)` in manifest order, grouped by module. Its strings are leaked, as a build's
    /// `EMULATED_KERNELS` are static: make one per build, not per launch.
    pub fn leak<'a>(
        namespace: &'static str,
        libraries: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
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
            .map(|(module, libraries)| EmulatedModule {
                module,
                libraries: Box::leak(libraries.into_boxed_slice()),
            })
            .collect();
        Box::leak(Box::new(EmulatedSet {
            namespace,
            modules: Box::leak(modules.into_boxed_slice()),
            driver: driver.map(leak),
        }))
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_made_at_run_time_groups_libraries_by_module_in_order() {
        let set = EmulatedSet::leak(
            "ours@0.1.0:kernels.toml",
            [
                ("conv", "decode", "/emu/a.so"),
                ("gemm", "gemm", "/emu/b.so"),
                ("conv", "prefill", "/emu/c.so"),
            ],
            Some("/emu/driver"),
        );
        let modules: Vec<(&str, Vec<&str>)> = set
            .modules
            .iter()
            .map(|module| (module.module, module.libraries.iter().map(|library| library.entry).collect()))
            .collect();
        assert_eq!(modules, [("conv", vec!["decode", "prefill"]), ("gemm", vec!["gemm"])]);
        assert_eq!(set.modules[0].libraries[1].path, "/emu/c.so");
        assert_eq!(set.driver, Some("/emu/driver"));
    }
}
