//! How kernels are compiled and linked for the emulator: the C++ compiler `cc` finds, the
//! emulator's flags, the generated unit of one module, and the links of its entries' libraries
//! with the linker script that gathers an entry's `__shared__` storage. The caller (kda-build's
//! emulated build) decides what to compile, caches it and reports problems; this module owns what
//! the commands are.
//!
//! A module is compiled once, into one object; each entry gets a library of its own, linked from
//! that object. The module's unit ([`unit_source`]) defines one registration function per entry
//! (hidden, `extern "C"`, each in its own section, like every function and variable of the unit),
//! and registers none at load time: an entry's link ([`Toolchain::link_library`]) roots that
//! entry's registration alone (`-u`) and names it the runtime's `kda_emu_entry_registration`,
//! which the runtime calls when the library is loaded. `--gc-sections` then drops every other
//! kernel of the module, its registration and its statics. What is left of the module's static
//! storage is exactly that kernel's `__shared__` memory, which [`LINKER_SCRIPT`] gathers into the
//! section `kda_emu_shared`: the runtime fills it with NaN bytes before each block and measures it
//! against the device's limit. Under AddressSanitizer the sanitizer's table of globals keeps every
//! kernel's variables of the module, each followed by a redzone; the runtime then fills the
//! variables only and leaves the limit to the other builds.
//!
//! The flags after `cc`'s: `-ffp-contract=off`, so that each `a * b + c` rounds twice as on the
//! GPU with `--fmad=false`, and one optimisation level for every profile. Without a sanitizer a
//! module's unit is also compiled with UBSan's array bounds check (an index past a `__shared__`
//! array) and with a call of the runtime's before each load and store (`ACCESS_CHECKS`: an access
//! outside a launch's views), whose handlers are the runtime's, and libraries are linked `-z
//! nodelete`: the runtime installs fault handlers (SIGSEGV in its guard pages and a kernel's other
//! faults), which must stay mapped.
//! ELF platforms only (the linker script and `dlopen`).
//!
//! `extern __shared__ T name[];`, CUDA's dynamic shared memory, which the shim's `__shared__` (a
//! static) cannot spell, [`unit_source`] rewrites into a reference to the launch's dynamic shared
//! memory, in a copy of the module's source that keeps every line where it was.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Sanitizer, sanitizer};

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

/// Without a sanitizer, every load and store of a module's unit calls the runtime's check first
/// (KASAN's ABI, which needs no sanitizer runtime: `__asan_load4_noabort(address)` and the like),
/// so that an access outside a view or the dynamic shared memory is caught on either side, at any
/// distance within the launch's mapping: the guard pages alone miss a read before a view.
const ACCESS_CHECKS: [&str; 1] = ["-fsanitize=kernel-address"];
/// The instrumentation's parameters (`--param` to GCC, `-mllvm -` to Clang): every check a call,
/// and no redzones on the stack or around globals, which would need the sanitizer's shadow memory.
const ACCESS_CHECK_PARAMETERS: [&str; 3] =
    ["asan-instrumentation-with-call-threshold=0", "asan-stack=0", "asan-globals=0"];

/// Where the static storage of a module's unit that an entry's library keeps goes: its
/// `__shared__` variables, function-local (`_ZZ`) and namespace-scope (`_ZL`) statics. The
/// runtime's own statics are in another object. The bounds are defined here: ld provides
/// `__start_`/`__stop_` symbols only for input sections named as C identifiers, which `.bss._ZZ…`
/// are not. Module objects must be named `*.module.o` ([`ModuleFiles`]).
pub const LINKER_SCRIPT: &str = "SECTIONS\n{\n  kda_emu_shared : {\n    HIDDEN(__start_kda_emu_shared = .);\n    *.module.o(.bss._ZZ* .data._ZZ* .bss._ZL* .data._ZL*)\n    HIDDEN(__stop_kda_emu_shared = .);\n  }\n}\nINSERT AFTER .bss;\n";

/// The compiler and flags of one emulated build.
#[derive(Clone, Debug)]
pub struct Toolchain {
    compiler: cc::Tool,
    flags: Vec<String>,
    /// The flags a module's unit takes beyond `flags`.
    module_flags: Vec<String>,
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
            .chain(sanitizer::compile_flags(sanitizer))
            .map(|flag| (*flag).to_owned())
            .chain(include_dirs.into_iter().map(|dir| format!("-I{}", dir.display())))
            .chain(defines.into_iter().map(|(name, value)| format!("-D{name}={value}")))
            .collect();
        // Clang's `bounds` adds a check that traps with no handler; `array-bounds` is GCC's `bounds`.
        let bounds = if compiler.is_like_clang() { "-fsanitize=array-bounds" } else { "-fsanitize=bounds" };
        let mut module_flags = Vec::new();
        if sanitizer.is_none() {
            module_flags.push(bounds.to_owned());
            module_flags.extend(ACCESS_CHECKS.map(str::to_owned));
            for parameter in ACCESS_CHECK_PARAMETERS {
                if compiler.is_like_clang() {
                    module_flags.extend(["-mllvm".to_owned(), format!("-{parameter}")]);
                } else {
                    module_flags.extend(["--param".to_owned(), parameter.to_owned()]);
                }
            }
        }
        // GCC reports an error inside a macro's expansion at the macro's definition, the kernel's
        // line only in a note after it; at the expansion instead, a kernel's `asm` (which the
        // shim defines as an undeclared name) is an error at the kernel's own line.
        if compiler.is_like_gnu() {
            module_flags.push("-ftrack-macro-expansion=0".to_owned());
        }
        Ok(Self { compiler, flags, module_flags, sanitizer })
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

    /// Compiles a module's generated unit ([`unit_source`]) as [`Toolchain::compile`] does, with
    /// the flags of a module and `module_dir`, the module's directory, searched for its quoted
    /// includes first, as it is when the unit includes the module rather than carrying it.
    pub fn compile_module(
        &self,
        module_dir: &Path,
        unit: &Path,
        object: &Path,
        dependencies: Option<&Path>,
    ) -> Command {
        let mut command = self.compile(unit, object, dependencies);
        command.args(&self.module_flags).arg("-iquote").arg(module_dir);
        command
    }

    /// Links the library of `entry` (as the manifest names it) from its module's object (named
    /// `*.module.o`, compiled from a unit that registers it) and the runtime's, `script` holding
    /// [`LINKER_SCRIPT`]: the entry's registration is the one root the module's object gives the
    /// link, and the runtime calls it at load time.
    pub fn link_library(
        &self,
        module: &Path,
        entry: &str,
        runtime: &Path,
        script: &Path,
        library: &Path,
    ) -> Command {
        let registration = registration_symbol(entry);
        let mut command = Command::new(self.compiler.path());
        command
            .args(["-shared", "-pthread", "-Wl,--gc-sections", "-Wl,-z,nodelete"])
            .arg(format!("-Wl,-u,{registration}"))
            .arg(format!("-Wl,--defsym={ENTRY_REGISTRATION}={registration}"))
            .arg(format!("-Wl,-T,{}", script.display()))
            .args(sanitizer::compile_flags(self.sanitizer))
            .arg("-o")
            .arg(library)
            .arg(module)
            .arg(runtime);
        command
    }

    /// Links the driver's object into the driver executable.
    pub fn link_driver(&self, object: &Path, driver: &Path) -> Command {
        let mut command = Command::new(self.compiler.path());
        command
            .arg("-pthread")
            .args(sanitizer::compile_flags(self.sanitizer))
            .arg("-o")
            .arg(driver)
            .arg(object)
            .arg("-ldl");
        command
    }
}

/// The generated unit of one module, written to `unit`: the shim, the module's source, the
/// registration of each of `entries` (an `extern "C"` name, or a template instantiation such as
/// `scale<float, 128>`, each under its own name). `text` is the module's source where it could be
/// read: if it declares `extern __shared__` arrays, the unit carries it with each such declaration
/// rewritten ([`rewrite_extern_shared`]) under `#line` directives that keep every line's file and
/// number, so a compiler's message points into the module as it does where the unit includes it.
pub fn unit_source(
    module: &str,
    entries: &[&str],
    source: &Path,
    text: Option<&str>,
    unit: &Path,
) -> ModuleUnit {
    let head =
        format!("// Generated by kda-emu: the emulated kernels of `{module}`.\n#include \"kda_emu.h\"\n");
    let registrations: String = entries.iter().map(|entry| registration(entry) + "\n").collect();
    let (text, registration_line) = match text.and_then(rewrite_extern_shared) {
        Some(rewritten) => {
            let body = format!("{head}#line 1 \"{}\"\n{rewritten}\n", line_file(source));
            // The registrations' own lines in `unit`, after the directive that names them.
            let line = body.lines().count() + 2;
            (format!("{body}#line {line} \"{}\"\n{registrations}", line_file(unit)), line)
        }
        // After the head's two lines and the include.
        None => (format!("{head}#include \"{}\"\n{registrations}", source.display()), 4),
    };
    ModuleUnit { text, registration_line }
}

/// A module's generated unit ([`unit_source`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleUnit {
    /// Its text.
    pub text: String,
    /// The line of the unit, as a compiler's messages number it, that registers the first entry;
    /// the others follow, one a line, in order: a message naming the line of an entry's
    /// registration is about that entry (an instantiation of a template that does not compile).
    pub registration_line: usize,
}

/// The name the runtime calls the registration of the library's one entry by, which an entry's
/// link defines as that entry's [`registration_symbol`] (`kda_emu_runtime.cpp`).
const ENTRY_REGISTRATION: &str = "kda_emu_entry_registration";

/// The function of a module's unit that registers `entry`: `kda_emu_register_` and the entry's
/// [`file_stem`], a C identifier.
fn registration_symbol(entry: &str) -> String {
    format!("kda_emu_register_{}", file_stem(entry))
}

/// The line that defines the registration of `entry` under its own name.
fn registration(entry: &str) -> String {
    format!("KDA_EMU_ENTRY_AS({}, \"{entry}\", {entry})", registration_symbol(entry))
}

/// A path as a `#line` directive's string literal spells it.
fn line_file(path: &Path) -> String {
    path.display().to_string().replace('\\', "\\\\").replace('"', "\\\"")
}

/// `text` with each `extern __shared__ T name[];` (T any type, with or without `__align__(n)` or
/// `alignas(n)`, at namespace or function scope) turned into a reference to the launch's dynamic
/// shared memory, on the declaration's first line, its other lines kept empty so that every line
/// after it keeps its number; `None` where there is none. In CUDA every such array starts at the
/// dynamic shared memory, so declarations of several names alias. The reference is a
/// `thread_local` bound at its first use on each thread: the emulator's threads are new for every
/// launch, whose dynamic shared memory is the same for all its blocks (its alignment is the
/// runtime's, 128 bytes, whatever an `__align__` asks). A declaration of another shape (several
/// names, an initializer) is left as it is, for the compiler to refuse.
pub fn rewrite_extern_shared(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut rewritten = false;
    while let Some(at) = find_extern_shared(rest) {
        let (before, declaration) = rest.split_at(at);
        out.push_str(before);
        let end = declaration.find(';').map_or(declaration.len(), |end| end + 1);
        let (whole, after) = declaration.split_at(end);
        match dynamic_shared_reference(whole) {
            Some(reference) => {
                out.push_str(&reference);
                out.extend(std::iter::repeat_n('\n', whole.matches('\n').count()));
                rewritten = true;
                rest = after;
            }
            None => {
                out.push_str("extern");
                rest = &declaration["extern".len()..];
            }
        }
    }
    out.push_str(rest);
    rewritten.then_some(out)
}

/// Where the next `extern __shared__` starts in `text`, outside comments, string and character
/// literals, each a whole word.
fn find_extern_shared(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let word = |at: usize, word: &str| {
        text[at..].starts_with(word)
            && (at == 0 || !is_name_byte(bytes[at - 1]))
            && bytes.get(at + word.len()).is_none_or(|byte| !is_name_byte(*byte))
    };
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'/' if bytes.get(at + 1) == Some(&b'/') => {
                at = text[at..].find('\n').map_or(bytes.len(), |end| at + end);
            }
            b'/' if bytes.get(at + 1) == Some(&b'*') => {
                at = text[at + 2..].find("*/").map_or(bytes.len(), |end| at + 2 + end + 2);
            }
            quote @ (b'"' | b'\'') => {
                at += 1;
                while at < bytes.len() && bytes[at] != quote && bytes[at] != b'\n' {
                    at += if bytes[at] == b'\\' { 2 } else { 1 };
                }
                at += 1;
            }
            b'e' if word(at, "extern") => {
                let next = at + "extern".len();
                let shared = next + (text[next..].len() - text[next..].trim_start().len());
                if shared > next && word(shared, "__shared__") {
                    return Some(at);
                }
                at = next;
            }
            _ => at += 1,
        }
    }
    None
}

fn is_name_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

/// The reference that stands for `declaration` (`extern __shared__ ... name[];`), if it has that
/// shape.
fn dynamic_shared_reference(declaration: &str) -> Option<String> {
    let inner = declaration.trim_start().strip_prefix("extern")?.trim_start().strip_prefix("__shared__")?;
    let inner = inner.strip_suffix(';')?;
    if inner.contains(['{', '}', '=', ',', ';', '#']) {
        return None;
    }
    let mut specifiers = without_alignment(inner)?;
    specifiers = specifiers.trim_end().strip_suffix(']')?.trim_end().strip_suffix('[')?.trim_end().to_owned();
    let name_start =
        specifiers.rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).map_or(0, |at| at + 1);
    let (element, name) = specifiers.split_at(name_start);
    let element = element.split_whitespace().collect::<Vec<_>>().join(" ");
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) || element.is_empty() {
        return None;
    }
    Some(format!(
        "static thread_local {element} (&{name})[] = *reinterpret_cast<{element} (*)[]>(::kda_emu::dynamic_shared());"
    ))
}

/// `text` without its `__align__(n)` and `alignas(n)`: the dynamic shared memory has the
/// runtime's alignment. `None` where their parentheses do not close.
fn without_alignment(text: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = text;
    loop {
        let found = ["__align__", "alignas"]
            .iter()
            .filter_map(|word| rest.find(word).map(|at| (at, word.len())))
            .min();
        let Some((at, len)) = found else { break };
        out.push_str(&rest[..at]);
        let after = rest[at + len..].trim_start();
        let after = after.strip_prefix('(')?;
        let mut depth = 1;
        let close = after.char_indices().find_map(|(index, c)| {
            depth += match c {
                '(' => 1,
                ')' => -1,
                _ => 0,
            };
            (depth == 0).then_some(index)
        })?;
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Some(out)
}

/// `entry` as part of a file name or a C identifier: itself for an `extern "C"` name; a template
/// instantiation's `<`, `>`, `,` and spaces each become `_` and its code in hex, so that no two
/// instantiations share a stem and no name has a character a shell, a linker script or a C
/// compiler would read.
fn file_stem(entry: &str) -> String {
    entry
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c.to_string()
            } else {
                format!("_{:02x}", u32::from(c))
            }
        })
        .collect()
}

/// The files one module's compile makes in `dir`: its unit, object and dependency rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleFiles {
    /// The generated unit ([`unit_source`]).
    pub unit: PathBuf,
    /// The unit's object, named as [`LINKER_SCRIPT`] expects.
    pub object: PathBuf,
    /// The headers the unit read, as a make rule.
    pub dependencies: PathBuf,
}

impl ModuleFiles {
    /// The files of `module` in `dir`.
    pub fn new(dir: &Path, module: &str) -> Self {
        Self {
            unit: dir.join(format!("{module}.module.cpp")),
            object: dir.join(format!("{module}.module.o")),
            dependencies: dir.join(format!("{module}.module.d")),
        }
    }
}

/// The shared library of `module::entry` in `dir`.
pub fn entry_library(dir: &Path, module: &str, entry: &str) -> PathBuf {
    dir.join(format!("lib{module}.{}.so", file_stem(entry)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const REFERENCE: &str = "(&{name})[] = *reinterpret_cast<{element} (*)[]>(::kda_emu::dynamic_shared());";

    fn reference(element: &str, name: &str) -> String {
        format!(
            "static thread_local {element} {}",
            REFERENCE.replace("{name}", name).replace("{element}", element)
        )
    }

    #[test]
    fn each_extern_shared_array_becomes_a_reference_to_the_dynamic_shared_memory_on_its_own_lines() {
        let source = "struct Pair { float a; };\nextern __shared__ Pair pairs[];\n__global__ void k() {\n    extern __shared__ __align__(16)\n        unsigned char raw[];\n    extern  __shared__ alignas(8) float values [ ];\n}\n";
        let rewritten = rewrite_extern_shared(source).expect("three declarations");
        let lines: Vec<&str> = rewritten.split('\n').collect();
        assert_eq!(lines.len(), source.split('\n').count(), "{rewritten}");
        assert_eq!(lines[1], reference("Pair", "pairs"));
        assert_eq!(lines[3], format!("    {}", reference("unsigned char", "raw")));
        assert_eq!(lines[4], "");
        assert_eq!(lines[5], format!("    {}", reference("float", "values")));
        assert_eq!(lines[6], "}");
    }

    #[test]
    fn comments_literals_and_other_shapes_are_left_as_they_are() {
        assert_eq!(rewrite_extern_shared("// extern __shared__ float a[];\n"), None);
        assert_eq!(rewrite_extern_shared("/* extern __shared__ float a[]; */"), None);
        assert_eq!(rewrite_extern_shared("const char* s = \"extern __shared__ float a[];\";"), None);
        assert_eq!(rewrite_extern_shared("extern __shared__ float a[], b[];"), None);
        assert_eq!(rewrite_extern_shared("extern __shared__ float a[4];"), None);
        assert_eq!(rewrite_extern_shared("my_extern __shared__ float a[];"), None);
        assert_eq!(rewrite_extern_shared("extern __shared__ float a[]"), None);
        assert_eq!(rewrite_extern_shared("extern __shared__ __align__(16 float a[];"), None);
        // One left, the next rewritten.
        let both = rewrite_extern_shared("extern __shared__ int x[], y[];\nextern __shared__ int z[];");
        assert_eq!(both, Some(format!("extern __shared__ int x[], y[];\n{}", reference("int", "z"))));
    }

    #[test]
    fn an_instantiations_library_and_registration_are_named_without_the_characters_of_its_arguments() {
        let library = entry_library(Path::new("/out"), "m", "scale<float, 128>");
        assert_eq!(library, Path::new("/out/libm.scale_3cfloat_2c_20128_3e.so"));
        assert_eq!(entry_library(Path::new("/out"), "m", "e"), Path::new("/out/libm.e.so"));
        assert_eq!(registration_symbol("scale<float, 128>"), "kda_emu_register_scale_3cfloat_2c_20128_3e");
        assert_eq!(registration_symbol("e"), "kda_emu_register_e");
    }

    #[test]
    fn a_unit_carries_a_rewritten_module_under_line_directives_and_includes_any_other() {
        let (source, unit) = (Path::new("/k/m.cu"), Path::new("/out/m.module.cpp"));
        let plain = unit_source("m", &["e"], source, Some("__global__ void e() {}\n"), unit);
        let registered = plain.text.lines().position(|line| line.starts_with("KDA_EMU_ENTRY_AS"));
        assert_eq!(registered, Some(plain.registration_line - 1));
        let plain = plain.text;
        assert!(
            plain.ends_with("#include \"/k/m.cu\"\nKDA_EMU_ENTRY_AS(kda_emu_register_e, \"e\", e)\n"),
            "{plain}"
        );
        // Every entry of the module, a template instantiation under its own spelling.
        let both = unit_source("m", &["e", "scale<float, 128>"], source, None, unit).text;
        assert!(
            both.ends_with(
                "KDA_EMU_ENTRY_AS(kda_emu_register_e, \"e\", e)\nKDA_EMU_ENTRY_AS(\
                 kda_emu_register_scale_3cfloat_2c_20128_3e, \"scale<float, 128>\", scale<float, 128>)\n"
            ),
            "{both}"
        );
        let rewritten =
            unit_source("m", &["e", "f"], source, Some("extern __shared__ float s[];\nvoid e() {}"), unit);
        let unit_text = rewritten.text;
        let lines: Vec<&str> = unit_text.lines().collect();
        assert_eq!(lines[2], "#line 1 \"/k/m.cu\"");
        assert_eq!(lines[3], reference("float", "s"));
        // The directive names the registrations' own lines of the unit.
        let line = lines.iter().position(|line| line.starts_with("KDA_EMU_ENTRY")).unwrap() + 1;
        assert_eq!(line, rewritten.registration_line);
        assert_eq!(lines[line - 2], format!("#line {line} \"/out/m.module.cpp\""));
        assert!(lines[line].starts_with("KDA_EMU_ENTRY_AS(kda_emu_register_f,"), "{unit_text}");
    }
}
