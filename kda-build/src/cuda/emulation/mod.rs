//! The emulated build: every manifest entry compiled as plain C++ from the same `kernels/*.cu`,
//! against the emulator's shim, into a shared library that kda-runtime's emulation backend loads
//! (or the sanitizer driver, with a sanitizer compiled in).
//!
//! What the compiles and links are is the emulator's ([`kda_emu::toolchain`]: each module
//! compiled once, one library per entry linked from it, its `__shared__` storage gathered by a
//! linker script); this module decides what to build from the manifest, runs at most `jobs`
//! modules at a time, caches each compile like nvcc's modules (the command and the contents of
//! every file the compiler read) and each link (the command and the contents of the objects),
//! and locates each failure in the manifest.
//!
//! A module's unit also carries the build's checks of its entries (those nvcc's unit carries): an
//! entry the module does not declare and `params` the kernel's C types contradict are reported as
//! nvcc's build reports them (`` `m::e` is not in kernels/m.cu, which exports ...``, ``m::e
//! parameter 1 `n`: the manifest declares ...``), not as the compiler's errors. The module is then
//! compiled once more without those entries, so the others still get their libraries.

use std::collections::{HashMap, HashSet, hash_map};
use std::path::{Path, PathBuf};
use std::process::Command;

pub use kda_emu::Sanitizer;
use kda_emu::toolchain::{LINKER_SCRIPT, ModuleFiles, entry_library, unit_source};
use kda_emu::{DeviceLimits, Toolchain, shim};

use super::cache::{Fingerprint, Record, parse_dependencies};
use super::problem::{Problem, is_error, listed_at};
use super::scan::{Linkage, SourceScan, scan_file};
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
    /// The modules compiled in this run (the others came from the cache).
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

/// One module to compile: its name, its source, and each of its entries once, in manifest order.
struct Module<'m> {
    name: &'m str,
    source: PathBuf,
    entries: Vec<Listed<'m>>,
}

/// One entry of a module: where the manifest first lists it, every listing of it (whose checks
/// its module's unit carries), and its position among the manifest's entries, which orders the
/// libraries and problems.
struct Listed<'m> {
    entry: &'m crate::Entry,
    listings: Vec<&'m crate::Entry>,
    position: usize,
}

/// What the emulated build of one module left: its libraries and problems, each with its entry's
/// position in the manifest, and whether the module was compiled (not taken from the cache).
#[derive(Default)]
struct BuiltModule {
    libraries: Vec<(usize, EmulatedLibrary)>,
    problems: Vec<(usize, Problem)>,
    compiled: bool,
}

impl EmulatedCompiler<'_> {
    /// Compiles every module of the manifest that has a source (`modules`) once, the runtime
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
        let dependencies = runtime.with_extension("d");
        let compile = toolchain.compile(&runtime_source, &runtime, Some(&dependencies));
        if let Err(diagnostics) =
            self.compile_cached(compile, &runtime, &dependencies, None, &runtime_source)?
        {
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
        let linked = Linked { toolchain: &toolchain, runtime: &runtime, script: &script };
        let modules = self.modules(modules);
        let results = jobs::run_bounded(self.jobs, &modules, |module| self.build_module(&linked, module));
        let (mut libraries, mut problems) = (Vec::new(), Vec::new());
        for (module, result) in modules.iter().zip(results) {
            let built = result?;
            if built.compiled {
                emulated.recompiled.push(module.name.to_owned());
            }
            libraries.extend(built.libraries);
            problems.extend(built.problems);
        }
        // In the manifest's order of entries, whichever module each is of.
        libraries.sort_by_key(|(position, _)| *position);
        problems.sort_by_key(|(position, _)| *position);
        emulated.libraries = libraries.into_iter().map(|(_, library)| library).collect();
        emulated.problems.extend(problems.into_iter().map(|(_, problem)| problem));
        Ok(emulated)
    }

    /// Compiles `module` once with every entry's registration and checks and links each entry's
    /// library. When some entries' checks fail (a kernel the module lacks, `params` its C types
    /// contradict), those are reported and the module is compiled once more without them, so
    /// that each entry whose every listing holds still gets its library, as nvcc's build keeps
    /// the image of a module whatever its other entries are.
    fn build_module(&self, linked: &Linked<'_>, module: &Module<'_>) -> Result<BuiltModule, BuildError> {
        let mut built = BuiltModule::default();
        let mut kept: Vec<&Listed<'_>> = module.entries.iter().collect();
        // A compile error in the module fails every entry with the same first error: reported
        // once, at the first entry it fails.
        let mut reported_errors: Vec<String> = Vec::new();
        loop {
            match self.compile_module(linked.toolchain, module, &kept)? {
                Ok(compiled) => {
                    built.compiled |= compiled;
                    break;
                }
                Err(rejected) => {
                    let (failed, problems) = self.module_problems(module, &kept, &rejected);
                    built.compiled = true;
                    for (position, problem) in problems {
                        if let Problem::Emulation { diagnostics, .. } = &problem {
                            let first = diagnostics.lines().find(|line| is_error(line)).unwrap_or_default();
                            if reported_errors.iter().any(|reported| reported == first) {
                                continue;
                            }
                            reported_errors.push(first.to_owned());
                        }
                        built.problems.push((position, problem));
                    }
                    let before = kept.len();
                    kept.retain(|listed| !failed.contains(&listed.position));
                    // Nothing left to build, or nothing the checks can take away: the module
                    // itself does not compile.
                    if kept.is_empty() || kept.len() == before {
                        return Ok(built);
                    }
                }
            }
        }
        let object = ModuleFiles::new(&self.out_dir, module.name).object;
        let inputs = [object.clone(), linked.runtime.to_owned(), linked.script.to_owned()];
        for listed in kept {
            let entry = &listed.entry.entry;
            let library = entry_library(&self.out_dir, module.name, entry);
            let link = linked.toolchain.link_library(&object, entry, linked.runtime, linked.script, &library);
            match self.link_cached(link, &library, &inputs)? {
                Ok(()) => built.libraries.push((
                    listed.position,
                    EmulatedLibrary {
                        module: module.name.to_owned(),
                        entry: entry.clone(),
                        path: library,
                        sanitizer: self.emulation.sanitizer,
                    },
                )),
                Err(diagnostics) => built.problems.push((
                    listed.position,
                    Problem::Emulation {
                        listed_at: listed_at(self.manifest_name, listed.entry),
                        path: module.source.clone(),
                        diagnostics,
                    },
                )),
            }
        }
        Ok(built)
    }

    /// What the compiler's rejection of the unit of `module` registering `kept` says is wrong:
    /// the positions of the entries to build without, and the problems, each at its entry's
    /// position: the failed checks, as nvcc's build words them, else the compiler's own errors,
    /// at the entry whose instantiation the first is about (which is left out) or at the
    /// module's first entry.
    fn module_problems(
        &self,
        module: &Module<'_>,
        kept: &[&Listed<'_>],
        rejected: &Rejected,
    ) -> (HashSet<usize>, Vec<(usize, Problem)>) {
        let diagnostics = &rejected.diagnostics;
        // Each listing checked, with the entry it lists, in the order the unit numbers them.
        let owners: Vec<&Listed<'_>> =
            kept.iter().flat_map(|listed| listed.listings.iter().map(move |_| *listed)).collect();
        let listings: Vec<&crate::Entry> =
            kept.iter().flat_map(|listed| listed.listings.iter().copied()).collect();
        let checks = prove::entry_check_failures(diagnostics, self.manifest_name, &listings);
        let (mut failed, mut problems) = (HashSet::new(), Vec::new());
        let mut unexplained = None;
        // Read once for all the entries the unit lacks; unreadable, the compiler's errors say why.
        let scan = if checks.undeclared.is_empty() { None } else { scan_file(&module.source).ok() };
        for listing in checks.undeclared {
            let Some(&listed) = owners.get(listing) else { continue };
            if !failed.insert(listed.position) {
                continue;
            }
            match scan.as_ref().and_then(|scan| self.missing_entry(scan, listed.entry)) {
                Some(missing) => problems.push((listed.position, Problem::Entry(missing))),
                None => unexplained = unexplained.or(Some(listed)),
            }
        }
        for (listing, problem) in checks.signature {
            let Some(&listed) = owners.get(listing) else { continue };
            failed.insert(listed.position);
            problems.push((listed.position, Problem::Signature(problem)));
        }
        if failed.is_empty()
            && let Some(named) = rejected.first_named
        {
            failed.insert(named);
        }
        if problems.is_empty() || unexplained.is_some() {
            let at = |position| kept.iter().copied().find(|listed| listed.position == position);
            let listed = unexplained.or(rejected.first_named.and_then(at)).or(kept.first().copied());
            if let Some(listed) = listed {
                problems.push((
                    listed.position,
                    Problem::Emulation {
                        listed_at: listed_at(self.manifest_name, listed.entry),
                        path: module.source.clone(),
                        diagnostics: diagnostics.to_owned(),
                    },
                ));
            }
        }
        (failed, problems)
    }

    /// `entry` as missing from its module, naming the kernels the module exports, unless `scan`,
    /// the module's, finds a kernel of that name: then the compiler's errors say why it did not
    /// see it (a syntax error in its declaration, say).
    fn missing_entry(&self, scan: &SourceScan, entry: &crate::Entry) -> Option<EntryProblem> {
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
        let source = shim_dir.join(shim::DRIVER);
        let dependencies = object.with_extension("d");
        let compile = toolchain.compile(&source, &object, Some(&dependencies));
        if let Err(diagnostics) = self.compile_cached(compile, &object, &dependencies, None, &source)? {
            return Ok(Err(diagnostics));
        }
        Ok(run(toolchain.link_driver(&object, &driver), &driver)?.map(|()| driver))
    }

    /// Every module of `modules` (those with a source, in manifest order) with each of its
    /// entries once, in manifest order, with its listings.
    fn modules<'m>(&'m self, modules: &'m [(String, PathBuf)]) -> Vec<Module<'m>> {
        let mut built: Vec<Module<'m>> = modules
            .iter()
            .map(|(name, source)| Module { name, source: source.clone(), entries: Vec::new() })
            .collect();
        let module_index: HashMap<&str, usize> =
            modules.iter().enumerate().map(|(index, (name, _))| (name.as_str(), index)).collect();
        // Where each entry is, by `(module, entry)`: a manifest may list 100,000 entries.
        let mut listed: HashMap<(&str, &str), (usize, usize)> = HashMap::new();
        let mut position = 0;
        for entry in self.manifest.tables.iter().flat_map(|table| &table.entries) {
            let Some(&module) = module_index.get(entry.module.as_str()) else { continue };
            match listed.entry((entry.module.as_str(), entry.entry.as_str())) {
                hash_map::Entry::Occupied(at) => {
                    let (module, index) = *at.get();
                    built[module].entries[index].listings.push(entry);
                }
                hash_map::Entry::Vacant(at) => {
                    at.insert((module, built[module].entries.len()));
                    built[module].entries.push(Listed { entry, listings: vec![entry], position });
                    position += 1;
                }
            }
        }
        built
    }

    /// Compiles the unit of `module` that registers and checks the entries `kept`, unless a
    /// record says the same command already compiled the same contents of every file it read;
    /// whether it compiled, or the compiler's messages.
    fn compile_module(
        &self,
        toolchain: &Toolchain,
        module: &Module<'_>,
        kept: &[&Listed<'_>],
    ) -> Result<Result<bool, Rejected>, BuildError> {
        let files = ModuleFiles::new(&self.out_dir, module.name);
        // Unreadable, the module is included as it is, and its compile says why it cannot be read.
        let source_text = std::fs::read_to_string(&module.source).ok();
        let entries: Vec<&str> = kept.iter().map(|listed| listed.entry.entry.as_str()).collect();
        let unit = unit_source(module.name, &entries, &module.source, source_text.as_deref(), &files.unit);
        let mut text = unit.text;
        let listings: Vec<&crate::Entry> =
            kept.iter().flat_map(|listed| listed.listings.iter().copied()).collect();
        text.push_str(&prove::entry_checks(self.manifest_name, &listings));
        write(&files.unit, &text)?;
        let module_dir = module.source.parent().unwrap_or(Path::new("."));
        let compile =
            toolchain.compile_module(module_dir, &files.unit, &files.object, Some(&files.dependencies));
        let compiled =
            self.compile_cached(compile, &files.object, &files.dependencies, Some(&text), &files.unit)?;
        Ok(compiled.map_err(|diagnostics| {
            let registrations = unit.registration_line..unit.registration_line + kept.len();
            let first_named = lines_named(&diagnostics, &files.unit)
                .into_iter()
                .filter(|line| registrations.contains(line))
                .find_map(|line| kept.get(line - unit.registration_line))
                .map(|listed| listed.position);
            Rejected { diagnostics, first_named }
        }))
    }

    /// Runs `compile`, which writes `object` and the make rule of what it read to `dependencies`,
    /// unless a record says the same command (and `unit`, the text of a generated unit it
    /// compiles) already compiled the same contents of every file it read; whether it compiled,
    /// or the compiler's messages. `source` names what failed to start.
    fn compile_cached(
        &self,
        compile: Command,
        object: &Path,
        dependencies: &Path,
        unit: Option<&str>,
        source: &Path,
    ) -> Result<Result<bool, String>, BuildError> {
        let record_path = object.with_extension("kda-cache");
        let mut words = command_words(&compile);
        words.extend(unit.map(str::to_owned));
        let command = Fingerprint::of_command(&words.iter().map(String::as_str).collect::<Vec<_>>());
        if object.is_file() && Record::read(&record_path).is_some_and(|record| record.is_current(command)) {
            return Ok(Ok(false));
        }
        let _ = std::fs::remove_file(&record_path);
        if let Err(diagnostics) = run(compile, source)? {
            return Ok(Err(diagnostics));
        }
        let files = parse_dependencies(&super::read(dependencies)?);
        if let Some(fingerprint) = command.with_files(&files) {
            Record { fingerprint, files, resources: Vec::new() }
                .write(&record_path)
                .map_err(|source| BuildError::Io { path: record_path, source })?;
        }
        Ok(Ok(true))
    }

    /// Runs `link`, which writes `library` from `inputs`, unless a record says the same command
    /// already linked the same contents of them: a module compiled again to the same object
    /// links nothing again.
    fn link_cached(
        &self,
        link: Command,
        library: &Path,
        inputs: &[PathBuf],
    ) -> Result<Result<(), String>, BuildError> {
        // Beside the library, named after all of it: `lib<module>.<entry>` may be another
        // module's name.
        let mut record_path = library.as_os_str().to_owned();
        record_path.push(".kda-cache");
        let record_path = PathBuf::from(record_path);
        let words = command_words(&link);
        let command = Fingerprint::of_command(&words.iter().map(String::as_str).collect::<Vec<_>>());
        if library.is_file() && Record::read(&record_path).is_some_and(|record| record.is_current(command)) {
            return Ok(Ok(()));
        }
        let _ = std::fs::remove_file(&record_path);
        if let Err(diagnostics) = run(link, library)? {
            return Ok(Err(diagnostics));
        }
        if let Some(fingerprint) = command.with_files(inputs) {
            Record { fingerprint, files: inputs.to_vec(), resources: Vec::new() }
                .write(&record_path)
                .map_err(|source| BuildError::Io { path: record_path, source })?;
        }
        Ok(Ok(()))
    }
}

/// A module's unit the compiler rejected.
struct Rejected {
    diagnostics: String,
    /// The position of the entry whose registration is the first the messages name: the first
    /// error is then that entry's, an instantiation it names that does not compile (GCC's
    /// "required from here" comes before the error, Clang's "requested here" after it, before
    /// the next).
    first_named: Option<usize>,
}

/// The lines of `unit` that the compiler's `diagnostics` name (`<unit>:<line>:`), in order.
fn lines_named(diagnostics: &str, unit: &Path) -> Vec<usize> {
    let prefix = format!("{}:", unit.display());
    diagnostics
        .match_indices(&prefix)
        .filter_map(|(at, _)| {
            let rest = &diagnostics[at + prefix.len()..];
            let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
            rest[..digits].parse().ok()
        })
        .collect()
}

/// What every entry's link takes besides its module's object.
struct Linked<'a> {
    toolchain: &'a Toolchain,
    runtime: &'a Path,
    script: &'a Path,
}

/// `command`'s program and arguments, as words for a cache's fingerprint.
fn command_words(command: &Command) -> Vec<String> {
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|word| word.to_string_lossy().into_owned())
        .collect()
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
