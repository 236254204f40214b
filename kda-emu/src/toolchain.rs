//! How kernels are compiled and linked for the emulator: the C++ compiler `cc` finds, the
//! emulator's flags, the generated unit of one entry, and the linker script that gathers its
//! `__shared__` storage. The caller (kda-build's emulated build) decides what to compile, caches
//! it and reports problems; this module owns what the commands are.
//!
//! One library per entry, not per module: the unit of an entry includes its module and registers
//! that one kernel, and the link drops every other kernel (`--gc-sections`). What is left of the
//! module's static storage is exactly that kernel's `__shared__` memory, which [`LINKER_SCRIPT`]
//! gathers into the section `kda_emu_shared`: the runtime fills it with NaN bytes before each
//! block and measures it against the device's limit. Under AddressSanitizer the sanitizer's table
//! of globals keeps every kernel's variables of the module, each followed by a redzone; the
//! runtime then fills the variables only and leaves the limit to the other builds.
//!
//! The flags after `cc`'s: `-ffp-contract=off`, so that each `a * b + c` rounds twice as on the
//! GPU with `--fmad=false`, and one optimisation level for every profile. ELF platforms only (the
//! linker script and `dlopen`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Sanitizer;

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
/// named as C identifiers, which `.bss._ZZ…` are not. Entry objects must be named `*.entry.o`.
pub const LINKER_SCRIPT: &str = "SECTIONS\n{\n  kda_emu_shared : {\n    HIDDEN(__start_kda_emu_shared = .);\n    *.entry.o(.bss._ZZ* .data._ZZ* .bss._ZL* .data._ZL*)\n    HIDDEN(__stop_kda_emu_shared = .);\n  }\n}\nINSERT AFTER .bss;\n";

/// The compiler and flags of one emulated build.
#[derive(Clone, Debug)]
pub struct Toolchain {
    compiler: cc::Tool,
    flags: Vec<String>,
    sanitizer: Option<Sanitizer>,
}

impl Toolchain {
    /// The C++ compiler `cc` would use for this target (outside a build script: for the host),
    /// with the emulator's flags, `sanitizer`'s, `include_dirs` in search order (the shim's
    /// directory among them, before the kernels' own: its `<cuda_bf16.h>` stands for CUDA's) and
    /// `defines` as `-DNAME=VALUE`. `Err` says why there is no compiler.
    pub fn new<'a>(
        sanitizer: Option<Sanitizer>,
        include_dirs: impl IntoIterator<Item = &'a Path>,
        defines: impl IntoIterator<Item = (&'a str, String)>,
    ) -> Result<Self, String> {
        let mut build = cc::Build::new();
        build.cpp(true).cargo_metadata(false).warnings(false).debug(false).opt_level(2);
        if std::env::var_os("TARGET").is_none() {
            let host = format!("{}-unknown-{}-gnu", std::env::consts::ARCH, std::env::consts::OS);
            build.target(&host).host(&host);
        }
        let compiler = build.try_get_compiler().map_err(|error| error.to_string())?;
        let flags = BASE_FLAGS
            .iter()
            .chain(Sanitizer::compile_flags(sanitizer))
            .map(|flag| (*flag).to_owned())
            .chain(include_dirs.into_iter().map(|dir| format!("-I{}", dir.display())))
            .chain(defines.into_iter().map(|(name, value)| format!("-D{name}={value}")))
            .collect();
        Ok(Self { compiler, flags, sanitizer })
    }

    /// The compiler's path and every flag, as words for a cache's fingerprint of a compile.
    pub fn describe(&self) -> Vec<String> {
        std::iter::once(self.compiler.path().display().to_string())
            .chain(self.compiler.args().iter().map(|arg| arg.to_string_lossy().into_owned()))
            .chain(self.flags.iter().cloned())
            .collect()
    }

    /// Compiles `source` into `object`, writing the headers it read as a make rule to
    /// `dependencies` if given.
    pub fn compile(&self, source: &Path, object: &Path, dependencies: Option<&Path>) -> Command {
        let mut command = self.compiler.to_command();
        command.args(&self.flags);
        if let Some(dependencies) = dependencies {
            command.arg("-MD").arg("-MF").arg(dependencies);
        }
        command.arg("-c").arg(source).arg("-o").arg(object);
        command
    }

    /// Links one entry's object (named `*.entry.o`) and the runtime's into a shared library,
    /// `script` holding [`LINKER_SCRIPT`].
    pub fn link_library(&self, entry: &Path, runtime: &Path, script: &Path, library: &Path) -> Command {
        let mut command = Command::new(self.compiler.path());
        command
            .args(["-shared", "-pthread", "-Wl,--gc-sections"])
            .arg(format!("-Wl,-T,{}", script.display()))
            .args(Sanitizer::compile_flags(self.sanitizer))
            .arg("-o")
            .arg(library)
            .arg(entry)
            .arg(runtime);
        command
    }

    /// Links the driver's object into the driver executable.
    pub fn link_driver(&self, object: &Path, driver: &Path) -> Command {
        let mut command = Command::new(self.compiler.path());
        command
            .arg("-pthread")
            .args(Sanitizer::compile_flags(self.sanitizer))
            .arg("-o")
            .arg(driver)
            .arg(object)
            .arg("-ldl");
        command
    }
}

/// The generated unit of one entry: the shim, the module's source, the entry's registration.
pub fn unit_source(module: &str, entry: &str, source: &Path) -> String {
    format!(
        "// Generated by kda-emu: the emulated kernel `{module}::{entry}`.\n#include \"kda_emu.h\"\n#include \"{}\"\nKDA_EMU_ENTRY({entry})\n",
        source.display(),
    )
}

/// The files one entry's build makes in `dir`: its unit, object, dependency rule and library.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryFiles {
    /// The generated unit ([`unit_source`]).
    pub unit: PathBuf,
    /// The unit's object, named as [`LINKER_SCRIPT`] expects.
    pub object: PathBuf,
    /// The headers the unit read, as a make rule.
    pub dependencies: PathBuf,
    /// The shared library.
    pub library: PathBuf,
}

impl EntryFiles {
    /// The files of `module::entry` in `dir`.
    pub fn new(dir: &Path, module: &str, entry: &str) -> Self {
        let stem = format!("{module}.{entry}");
        Self {
            unit: dir.join(format!("{stem}.entry.cpp")),
            object: dir.join(format!("{stem}.entry.o")),
            dependencies: dir.join(format!("{stem}.d")),
            library: dir.join(format!("lib{stem}.so")),
        }
    }
}
