//! The emulated build: every manifest entry compiled as plain C++ from the same `kernels/*.cu`,
//! against the emulator's shim (`kda-build/emu`), into a shared library that kda-runtime's
//! emulation backend loads (or the sanitizer driver, with a sanitizer compiled in).
//!
//! One library per entry, not per module: the unit of an entry includes its module and registers
//! that one kernel, and the link drops every other kernel (`--gc-sections`). What is left of the
//! module's static storage is exactly that kernel's `__shared__` memory, which a linker script
//! gathers into the section `kda_emu_shared`: the runtime fills it with NaN bytes before each
//! block and measures it against the device's limit. Under AddressSanitizer the sanitizer's table
//! of globals keeps every kernel's variables of the module, each followed by a redzone; the
//! runtime then fills the variables only and leaves the limit to the other builds.
//!
//! The C++ compiler is the one `cc` finds (`CXX`, else the platform's), with `cc`'s flags and
//! then the emulator's: `-ffp-contract=off`, so that each `a * b + c` rounds twice as on the GPU
//! with `--fmad=false`, and one optimisation level for every profile. Entries are compiled at
//! most `jobs` at a time and cached like nvcc's modules (the command and the contents of every
//! file the compiler read). ELF platforms only (the linker script and `dlopen`).

mod sanitizer;
mod shim;

use std::path::{Path, PathBuf};
use std::process::Command;

pub use sanitizer::Sanitizer;

use super::cache::{Fingerprint, Record, parse_dependencies};
use super::problem::{Problem, listed_at};
use super::{BuildError, jobs, write};
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

/// The flags of every emulated unit, after `cc`'s.
const BASE_FLAGS: [&str; 9] = [
    "-std=c++17",
    "-fPIC",
    "-fvisibility=hidden",
    "-ffunction-sections",
    "-fdata-sections",
    "-ffp-contract=off",
    "-fno-fast-math",
    "-Wno-unknown-pragmas",
    "-pthread",
];

/// Where the static storage of an entry's unit goes: its `__shared__` variables, function-local
/// (`_ZZ`) and namespace-scope (`_ZL`) statics. The runtime's own statics are in another object.
/// The bounds are defined here: ld provides `__start_`/`__stop_` symbols only for input sections
/// named as C identifiers, which `.bss._ZZ…` are not.
const LINKER_SCRIPT: &str = "SECTIONS\n{\n  kda_emu_shared : {\n    HIDDEN(__start_kda_emu_shared = .);\n    *.entry.o(.bss._ZZ* .data._ZZ* .bss._ZL* .data._ZL*)\n    HIDDEN(__stop_kda_emu_shared = .);\n  }\n}\nINSERT AFTER .bss;\n";

/// The compiles of one emulated build.
pub(super) struct EmulatedCompiler<'a> {
    pub manifest: &'a Manifest,
    pub manifest_name: &'a str,
    /// `OUT_DIR/emu` or `OUT_DIR/emu-<sanitizer>`.
    pub out_dir: PathBuf,
    /// The kernels directory and the include directories.
    pub include_dirs: Vec<PathBuf>,
    pub emulation: &'a Emulation,
    pub jobs: usize,
}

/// One entry to compile: where the manifest lists it, its module's source and its name.
struct Unit<'m> {
    entry: &'m crate::Entry,
    source: PathBuf,
}

impl EmulatedCompiler<'_> {
    /// Compiles every entry of the manifest whose module has a source (`modules`), the runtime
    /// once, and links a library per entry.
    pub fn build(&self, modules: &[(String, PathBuf)]) -> Result<Emulated, BuildError> {
        let mut emulated = Emulated::default();
        let compiler = match cxx() {
            Ok(compiler) => compiler,
            Err(why) => {
                let at = self.manifest_name.to_owned();
                emulated.problems.push(Problem::Emulation {
                    listed_at: at,
                    path: PathBuf::from("kernels"),
                    diagnostics: format!("no C++ compiler for the emulated kernels: {why}"),
                });
                return Ok(emulated);
            }
        };
        std::fs::create_dir_all(&self.out_dir)
            .map_err(|source| BuildError::Io { path: self.out_dir.clone(), source })?;
        let shim_dir = shim::write_all(&self.out_dir)?;
        let script = self.out_dir.join("kda_emu_shared.ld");
        write(&script, LINKER_SCRIPT)?;
        let flags = self.flags(&shim_dir);
        let runtime = self.out_dir.join("kda_emu_runtime.o");
        let runtime_source = shim_dir.join("kda_emu_runtime.cpp");
        if let Err(diagnostics) = self.compile_cached(&compiler, &flags, &runtime_source, &runtime)? {
            // The shim itself does not build with this compiler: nothing can be emulated.
            emulated.problems.push(Problem::Emulation {
                listed_at: self.manifest_name.to_owned(),
                path: runtime_source,
                diagnostics,
            });
            return Ok(emulated);
        }
        emulated.driver = match self.build_driver(&compiler, &flags, &shim_dir)? {
            Ok(driver) => Some(driver),
            Err(diagnostics) => {
                emulated.problems.push(Problem::Emulation {
                    listed_at: self.manifest_name.to_owned(),
                    path: shim_dir.join("kda_emu_driver.cpp"),
                    diagnostics,
                });
                None
            }
        };
        let units = self.units(modules);
        let results = jobs::run_bounded(self.jobs, &units, |unit| {
            self.build_unit(&compiler, &flags, &script, &runtime, unit)
        });
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
                    });
                }
                Err(diagnostics) => emulated.problems.push(Problem::Emulation {
                    listed_at: listed_at(self.manifest_name, unit.entry),
                    path: unit.source.clone(),
                    diagnostics,
                }),
            }
        }
        Ok(emulated)
    }

    /// Compiles and links the driver, which runs one launch of a library per process.
    fn build_driver(
        &self,
        compiler: &cc::Tool,
        flags: &[String],
        shim_dir: &Path,
    ) -> Result<Result<PathBuf, String>, BuildError> {
        let object = self.out_dir.join("kda_emu_driver.o");
        let driver = self.out_dir.join("kda_emu_driver");
        if let Err(diagnostics) =
            self.compile_cached(compiler, flags, &shim_dir.join("kda_emu_driver.cpp"), &object)?
        {
            return Ok(Err(diagnostics));
        }
        let mut link = Command::new(compiler.path());
        link.arg("-pthread")
            .args(Sanitizer::compile_flags(self.emulation.sanitizer))
            .arg("-o")
            .arg(&driver)
            .arg(&object)
            .arg("-ldl");
        Ok(run(link, &driver)?.map(|()| driver))
    }

    /// Every `(module, entry)` of the manifest once, in manifest order, with its module's source.
    fn units<'m>(&'m self, modules: &[(String, PathBuf)]) -> Vec<Unit<'m>> {
        let mut seen = std::collections::HashSet::new();
        let sources: std::collections::HashMap<&str, &PathBuf> =
            modules.iter().map(|(module, source)| (module.as_str(), source)).collect();
        self.manifest
            .tables
            .iter()
            .flat_map(|table| &table.entries)
            .filter(|entry| seen.insert((entry.module.as_str(), entry.entry.as_str())))
            .filter_map(|entry| {
                let source = sources.get(entry.module.as_str())?;
                Some(Unit { entry, source: (*source).clone() })
            })
            .collect()
    }

    /// The emulator's flags after `cc`'s: the base, the sanitizer's, the include directories (the
    /// shim's first: its `<cuda_bf16.h>` stands for CUDA's) and the manifest's defines.
    fn flags(&self, shim_dir: &Path) -> Vec<String> {
        let sanitizer = self.emulation.sanitizer;
        BASE_FLAGS
            .iter()
            .map(|flag| (*flag).to_owned())
            .chain(Sanitizer::compile_flags(sanitizer).iter().map(|flag| (*flag).to_owned()))
            .chain(
                self.emulation
                    .include_dirs
                    .iter()
                    .map(PathBuf::as_path)
                    .chain(std::iter::once(shim_dir))
                    .chain(self.include_dirs.iter().map(PathBuf::as_path))
                    .map(|dir| format!("-I{}", dir.display())),
            )
            .chain(self.manifest.defines.iter().map(|define| format!("-D{}={}", define.name, define.value)))
            .collect()
    }

    /// Compiles and links one entry's library unless its record is current; its path and
    /// whether it was rebuilt, or the compiler's messages.
    fn build_unit(
        &self,
        compiler: &cc::Tool,
        flags: &[String],
        script: &Path,
        runtime: &Path,
        unit: &Unit<'_>,
    ) -> Result<Result<(PathBuf, bool), String>, BuildError> {
        let stem = format!("{}.{}", unit.entry.module, unit.entry.entry);
        let source = self.out_dir.join(format!("{stem}.entry.cpp"));
        let text = unit_text(unit);
        write(&source, &text)?;
        let object = self.out_dir.join(format!("{stem}.entry.o"));
        let library = self.out_dir.join(format!("lib{stem}.so"));
        let record_path = self.out_dir.join(format!("{stem}.kda-cache"));
        let mut command = described(compiler, flags);
        command.push(text);
        command.push(runtime.display().to_string());
        command.push(LINKER_SCRIPT.to_owned());
        let fingerprint = Fingerprint::of_command(&command.iter().map(String::as_str).collect::<Vec<_>>());
        let runtime_fingerprint = fingerprint.with_files(&[runtime.to_owned()]);
        if let Some(command) = runtime_fingerprint
            && Record::read(&record_path).is_some_and(|record| record.is_current(command))
            && library.is_file()
        {
            return Ok(Ok((library, false)));
        }
        let _ = std::fs::remove_file(&record_path);
        let dependencies = self.out_dir.join(format!("{stem}.d"));
        let mut compile = compiler_command(compiler, flags);
        compile.arg("-MD").arg("-MF").arg(&dependencies).arg("-c").arg(&source).arg("-o").arg(&object);
        if let Err(diagnostics) = run(compile, &source)? {
            return Ok(Err(diagnostics));
        }
        let mut link = Command::new(compiler.path());
        link.args(["-shared", "-pthread", "-Wl,--gc-sections"])
            .arg(format!("-Wl,-T,{}", script.display()))
            .args(Sanitizer::compile_flags(self.emulation.sanitizer))
            .arg("-o")
            .arg(&library)
            .arg(&object)
            .arg(runtime);
        if let Err(diagnostics) = run(link, &library)? {
            return Ok(Err(diagnostics));
        }
        let files = parse_dependencies(&super::read(&dependencies)?);
        if let Some(command) = runtime_fingerprint
            && let Some(fingerprint) = command.with_files(&files)
        {
            Record { fingerprint, files, resources: Vec::new() }
                .write(&record_path)
                .map_err(|source| BuildError::Io { path: record_path, source })?;
        }
        Ok(Ok((library, true)))
    }

    /// Compiles `source` into `object` unless `object` is newer than a record of the same
    /// command and contents.
    fn compile_cached(
        &self,
        compiler: &cc::Tool,
        flags: &[String],
        source: &Path,
        object: &Path,
    ) -> Result<Result<(), String>, BuildError> {
        let record_path = object.with_extension("kda-cache");
        let mut command = described(compiler, flags);
        command.push(super::read(source)?);
        let fingerprint = Fingerprint::of_command(&command.iter().map(String::as_str).collect::<Vec<_>>());
        if object.is_file() && Record::read(&record_path).is_some_and(|record| record.is_current(fingerprint))
        {
            return Ok(Ok(()));
        }
        let mut compile = compiler_command(compiler, flags);
        compile.arg("-c").arg(source).arg("-o").arg(object);
        let compiled = run(compile, source)?;
        if compiled.is_ok() {
            Record { fingerprint, files: Vec::new(), resources: Vec::new() }
                .write(&record_path)
                .map_err(|source| BuildError::Io { path: record_path, source })?;
        }
        Ok(compiled)
    }
}

/// The generated unit of one entry: the shim, the module, the entry's registration.
fn unit_text(unit: &Unit<'_>) -> String {
    format!(
        "// Generated by kda-build: the emulated kernel `{}::{}`.\n#include \"kda_emu.h\"\n#include \"{}\"\nKDA_EMU_ENTRY({})\n",
        unit.entry.module,
        unit.entry.entry,
        unit.source.display(),
        unit.entry.entry
    )
}

/// The C++ compiler `cc` would use for this target (outside a build script: for the host).
fn cxx() -> Result<cc::Tool, String> {
    let mut build = cc::Build::new();
    build.cpp(true).cargo_metadata(false).warnings(false).debug(false).opt_level(2);
    if std::env::var_os("TARGET").is_none() {
        let host = format!("{}-unknown-{}-gnu", std::env::consts::ARCH, std::env::consts::OS);
        build.target(&host).host(&host);
    }
    build.try_get_compiler().map_err(|error| error.to_string())
}

/// `cc`'s command for the compiler (its path, flags and environment), then `flags`.
fn compiler_command(compiler: &cc::Tool, flags: &[String]) -> Command {
    let mut command = compiler.to_command();
    command.args(flags);
    command
}

/// The compiler's path and every flag of a compile, as a cache fingerprint's command.
fn described(compiler: &cc::Tool, flags: &[String]) -> Vec<String> {
    std::iter::once(compiler.path().display().to_string())
        .chain(compiler.args().iter().map(|arg| arg.to_string_lossy().into_owned()))
        .chain(flags.iter().cloned())
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
