//! The emulated build: every manifest entry compiled as plain C++ from the same `kernels/*.cu`,
//! against the emulator's shim, into a shared library that kda-runtime's emulation backend loads
//! (or the sanitizer driver, with a sanitizer compiled in).
//!
//! What the compiles and links are is the emulator's ([`kda_emu::toolchain`]: one library per
//! entry, its `__shared__` storage gathered by a linker script); this module decides what to
//! build from the manifest, runs at most `jobs` compiles at a time, caches each like nvcc's
//! modules (the command and the contents of every file the compiler read), and locates each
//! failure in the manifest.
//!
//! Each entry's unit also carries the build's checks of that entry (those nvcc's unit carries):
//! an entry the module does not declare and `params` the kernel's C types contradict are
//! reported as nvcc's build reports them (`` `m::e` is not in kernels/m.cu, which exports ...``,
//! ``m::e parameter 1 `n`: the manifest declares ...``), not as the compiler's errors.

use std::path::{Path, PathBuf};
use std::process::Command;

pub use kda_emu::Sanitizer;
use kda_emu::toolchain::{EntryFiles, LINKER_SCRIPT, unit_source};
use kda_emu::{DeviceLimits, Toolchain, shim};

use super::cache::{Fingerprint, Record, parse_dependencies};
use super::problem::{Problem, is_error, listed_at};
use super::scan::{Linkage, scan_file};
use super::{BuildError, EntryProblem, ProblemKind, jobs, prove, write};
use crate::Manifest;

/// What an emulated build makes and how.
#[derive(Clone, Debug, Default)]
pub struct Emulation {
    /// The sanitizer compiled into the libraries, if any.
    pub sanitizer: Option<Sanitizer>,
    /// Directories the emulated build alone searches for headers, before the emulator's shim and
    /// the kernels' own: stand-ins a crate wants the emulator to see where its sources include
    /// what only nvcc has. nvcc never sees them, so they cannot shadow CUDA's headers there.
    pub include_dirs: Vec<PathBuf>,
}

/// One entry's emulated library.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmulatedLibrary {
    /// The module, `kernels/<module>.cu`.
    pub module: String,
    /// The kernel's `extern "C"` name.
    pub entry: String,
    /// The shared library.
    pub path: PathBuf,
    /// The sanitizer compiled into it, the build's: a sanitized library runs only in the driver.
    pub sanitizer: Option<Sanitizer>,
}

/// What the emulated build of every entry left.
#[derive(Debug, Default)]
pub(super) struct Emulated {
    pub libraries: Vec<EmulatedLibrary>,
    /// The driver executable, built with the same flags (see `kda_emu_driver.cpp`).
    pub driver: Option<PathBuf>,
    pub problems: Vec<Problem>,
    /// `module::entry` of each library compiled in this run (the others came from the cache).
    pub recompiled: Vec<String>,
}

/// The compiles of one emulated build.
pub(super) struct EmulatedCompiler<'a> {
    pub manifest: &'a Manifest,
    pub manifest_name: &'a str,
    /// `OUT_DIR/emu` or `OUT_DIR/emu-<sanitizer>`.
    pub out_dir: PathBuf,
    /// The kernels directory and the include directories.
    pub include_dirs: Vec<PathBuf>,
    /// The kernels directory as the build was given it, which messages name modules' files by.
    pub kernels_dir: &'a Path,
    pub emulation: &'a Emulation,
    pub jobs: usize,
}

/// One entry to compile: where the manifest first lists it, every listing of it (whose checks
/// its unit carries), and its module's source.
struct Unit<'m> {
    entry: &'m crate::Entry,
    listings: Vec<&'m crate::Entry>,
    source: PathBuf,
}

impl EmulatedCompiler<'_> {
    /// Compiles every entry of the manifest whose module has a source (`modules`), the runtime
    /// once, and links a library per entry.
    pub fn build(&self, modules: &[(String, PathBuf)]) -> Result<Emulated, BuildError> {
        let mut emulated = Emulated::default();
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| BuildError::Io { path, source }
        };
        std::fs::create_dir_all(&self.out_dir).map_err(io(&self.out_dir))?;
        let shim_dir = shim::write_all(&self.out_dir, &DeviceLimits::SM_90).map_err(io(&self.out_dir))?;
        let toolchain = match self.toolchain(&shim_dir) {
            Ok(toolchain) => toolchain,
            Err(why) => {
                emulated.problems.push(Problem::Emulation {
                    listed_at: self.manifest_name.to_owned(),
                    path: PathBuf::from("kernels"),
                    diagnostics: format!("no C++ compiler for the emulated kernels: {why}"),
                });
                return Ok(emulated);
            }
        };
        let script = self.out_dir.join("kda_emu_shared.ld");
        write(&script, LINKER_SCRIPT)?;
        let runtime = self.out_dir.join("kda_emu_runtime.o");
        let runtime_source = shim_dir.join(shim::RUNTIME);
        if let Err(diagnostics) = self.compile_cached(&toolchain, &runtime_source, &runtime)? {
            // The shim itself does not build with this compiler: nothing can be emulated.
            emulated.problems.push(Problem::Emulation {
                listed_at: self.manifest_name.to_owned(),
                path: runtime_source,
                diagnostics,
            });
            return Ok(emulated);
        }
        emulated.driver = match self.build_driver(&toolchain, &shim_dir)? {
            Ok(driver) => Some(driver),
            Err(diagnostics) => {
                emulated.problems.push(Problem::Emulation {
                    listed_at: self.manifest_name.to_owned(),
                    path: shim_dir.join(shim::DRIVER),
                    diagnostics,
                });
                None
            }
        };
        let units = self.units(modules);
        let results =
            jobs::run_bounded(self.jobs, &units, |unit| self.build_unit(&toolchain, &script, &runtime, unit));
        // A module that does not compile fails each of its entries' units with the same first
        // error, in its own source: reported once, at its first entry.
        let mut module_errors: Vec<(PathBuf, String)> = Vec::new();
        for (unit, result) in units.iter().zip(results) {
            let (entry, module) = (&unit.entry.entry, &unit.entry.module);
            match result? {
                Ok((path, recompiled)) => {
                    if recompiled {
                        emulated.recompiled.push(format!("{module}::{entry}"));
                    }
                    emulated.libraries.push(EmulatedLibrary {
                        module: module.clone(),
                        entry: entry.clone(),
                        path,
                        sanitizer: self.emulation.sanitizer,
                    });
                }
                Err(diagnostics) => {
                    for problem in self.unit_problems(unit, diagnostics) {
                        if let Problem::Emulation { path, diagnostics, .. } = &problem {
                            let first = diagnostics.lines().find(|line| is_error(line)).unwrap_or_default();
                            let key = (path.clone(), first.to_owned());
                            if module_errors.contains(&key) {
                                continue;
                            }
                            module_errors.push(key);
                        }
                        emulated.problems.push(problem);
                    }
                }
            }
        }
        Ok(emulated)
    }

    /// What the compiler's `diagnostics` for `unit` say is wrong: the failed checks of its entry,
    /// as nvcc's build words them, else the compiler's own errors.
    fn unit_problems(&self, unit: &Unit<'_>, diagnostics: String) -> Vec<Problem> {
        let checks = prove::entry_check_failures(&diagnostics, self.manifest_name, &unit.listings);
        if checks.undeclared
            && let Some(missing) = self.missing_entry(unit)
        {
            return vec![Problem::Entry(missing)];
        }
        if !checks.signature.is_empty() {
            return checks.signature.into_iter().map(Problem::Signature).collect();
        }
        vec![Problem::Emulation {
            listed_at: listed_at(self.manifest_name, unit.entry),
            path: unit.source.clone(),
            diagnostics,
        }]
    }

    /// `unit`'s entry as missing from its module, naming the kernels the module exports, unless
    /// a scan of the source finds a kernel of that name: then the compiler's errors say why it
    /// did not see it (a syntax error in its declaration, say).
    fn missing_entry(&self, unit: &Unit<'_>) -> Option<EntryProblem> {
        let scan = scan_file(&unit.source).ok()?;
        let entry = unit.entry;
        if scan.kernels.iter().any(|kernel| kernel.name == entry.entry) {
            return None;
        }
        let exported = scan
            .kernels
            .iter()
            .filter(|kernel| kernel.linkage == Linkage::C && kernel.template.is_none())
            .map(|kernel| kernel.name.clone())
            .collect();
        Some(EntryProblem {
            listed_at: listed_at(self.manifest_name, entry),
            file: self.kernels_dir.join(format!("{}.cu", entry.module)).display().to_string(),
            symbol: format!("{}::{}", entry.module, entry.entry),
            kind: ProblemKind::Missing(exported),
        })
    }

    /// The emulator's toolchain with this build's sanitizer, its include directories (the
    /// emulator-only ones, the shim's, then the kernels') and the manifest's defines.
    fn toolchain(&self, shim_dir: &Path) -> Result<Toolchain, String> {
        let include_dirs = self
            .emulation
            .include_dirs
            .iter()
            .map(PathBuf::as_path)
            .chain(std::iter::once(shim_dir))
            .chain(self.include_dirs.iter().map(PathBuf::as_path));
        let defines =
            self.manifest.defines.iter().map(|define| (define.name.as_str(), define.value.to_string()));
        Toolchain::new(self.emulation.sanitizer, include_dirs, defines)
    }

    /// Compiles and links the driver, which runs one launch of a library per process.
    fn build_driver(
        &self,
        toolchain: &Toolchain,
        shim_dir: &Path,
    ) -> Result<Result<PathBuf, String>, BuildError> {
        let object = self.out_dir.join("kda_emu_driver.o");
        let driver = self.out_dir.join("kda_emu_driver");
        if let Err(diagnostics) = self.compile_cached(toolchain, &shim_dir.join(shim::DRIVER), &object)? {
            return Ok(Err(diagnostics));
        }
        Ok(run(toolchain.link_driver(&object, &driver), &driver)?.map(|()| driver))
    }

    /// Every `(module, entry)` of the manifest once, in manifest order, with its listings and its
    /// module's source.
    fn units<'m>(&'m self, modules: &[(String, PathBuf)]) -> Vec<Unit<'m>> {
        let sources: std::collections::HashMap<&str, &PathBuf> =
            modules.iter().map(|(module, source)| (module.as_str(), source)).collect();
        let mut units: Vec<Unit<'m>> = Vec::new();
        // Its index in `units`, by `(module, entry)`: a manifest may list 100,000 entries.
        let mut index: std::collections::HashMap<(&str, &str), usize> = std::collections::HashMap::new();
        for entry in self.manifest.tables.iter().flat_map(|table| &table.entries) {
            let Some(source) = sources.get(entry.module.as_str()) else { continue };
            match index.entry((entry.module.as_str(), entry.entry.as_str())) {
                std::collections::hash_map::Entry::Occupied(at) => units[*at.get()].listings.push(entry),
                std::collections::hash_map::Entry::Vacant(at) => {
                    at.insert(units.len());
                    units.push(Unit { entry, listings: vec![entry], source: (*source).clone() });
                }
            }
        }
        units
    }

    /// Compiles and links one entry's library unless its record is current; its path and
    /// whether it was rebuilt, or the compiler's messages.
    fn build_unit(
        &self,
        toolchain: &Toolchain,
        script: &Path,
        runtime: &Path,
        unit: &Unit<'_>,
    ) -> Result<Result<(PathBuf, bool), String>, BuildError> {
        let (module, entry) = (&unit.entry.module, &unit.entry.entry);
        let files = EntryFiles::new(&self.out_dir, module, entry);
        // Unreadable, the module is included as it is, and its compile says why it cannot be read.
        let source_text = std::fs::read_to_string(&unit.source).ok();
        let mut text = unit_source(module, entry, &unit.source, source_text.as_deref(), &files.unit);
        text.push_str(&prove::entry_checks(self.manifest_name, &unit.listings));
        write(&files.unit, &text)?;
        let record_path = self.out_dir.join(format!("{module}.{entry}.kda-cache"));
        let mut command = toolchain.describe();
        command.push(text);
        command.push(runtime.display().to_string());
        command.push(LINKER_SCRIPT.to_owned());
        let fingerprint = Fingerprint::of_command(&command.iter().map(String::as_str).collect::<Vec<_>>());
        let runtime_fingerprint = fingerprint.with_files(&[runtime.to_owned()]);
        if let Some(command) = runtime_fingerprint
            && Record::read(&record_path).is_some_and(|record| record.is_current(command))
            && files.library.is_file()
        {
            return Ok(Ok((files.library, false)));
        }
        let _ = std::fs::remove_file(&record_path);
        let module_dir = unit.source.parent().unwrap_or(Path::new("."));
        let compile =
            toolchain.compile_entry(module_dir, &files.unit, &files.object, Some(&files.dependencies));
        if let Err(diagnostics) = run(compile, &files.unit)? {
            return Ok(Err(diagnostics));
        }
        let link = toolchain.link_library(&files.object, runtime, script, &files.library);
        if let Err(diagnostics) = run(link, &files.library)? {
            return Ok(Err(diagnostics));
        }
        let read = parse_dependencies(&super::read(&files.dependencies)?);
        if let Some(command) = runtime_fingerprint
            && let Some(fingerprint) = command.with_files(&read)
        {
            Record { fingerprint, files: read, resources: Vec::new() }
                .write(&record_path)
                .map_err(|source| BuildError::Io { path: record_path, source })?;
        }
        Ok(Ok((files.library, true)))
    }

    /// Compiles `source` into `object` unless a record says the same command already compiled
    /// the same contents of `source` and of every header it read.
    fn compile_cached(
        &self,
        toolchain: &Toolchain,
        source: &Path,
        object: &Path,
    ) -> Result<Result<(), String>, BuildError> {
        let record_path = object.with_extension("kda-cache");
        let dependencies = object.with_extension("d");
        let command =
            Fingerprint::of_command(&toolchain.describe().iter().map(String::as_str).collect::<Vec<_>>());
        if object.is_file() && Record::read(&record_path).is_some_and(|record| record.is_current(command)) {
            return Ok(Ok(()));
        }
        let _ = std::fs::remove_file(&record_path);
        let compiled = run(toolchain.compile(source, object, Some(&dependencies)), source)?;
        if compiled.is_ok() {
            let files = parse_dependencies(&super::read(&dependencies)?);
            if let Some(fingerprint) = command.with_files(&files) {
                Record { fingerprint, files, resources: Vec::new() }
                    .write(&record_path)
                    .map_err(|source| BuildError::Io { path: record_path, source })?;
            }
        }
        Ok(compiled)
    }
}

/// Runs a compile or link: `Ok(Err(messages))` when it fails, `Err` when it cannot start.
fn run(mut command: Command, what: &Path) -> Result<Result<(), String>, BuildError> {
    let output = command.output().map_err(|source| BuildError::Io { path: what.to_owned(), source })?;
    if output.status.success() {
        return Ok(Ok(()));
    }
    let mut messages = String::from_utf8_lossy(&output.stderr).into_owned();
    messages.push_str(&String::from_utf8_lossy(&output.stdout));
    Ok(Err(messages.trim_end().to_owned()))
}
