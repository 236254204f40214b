//! Which entry points a compiled module exports, and whether they are the manifest's.

use std::fmt;
use std::path::Path;

use crate::Manifest;
use crate::cuda::problem::listed_at;
use crate::manifest::{TemplateArg, TemplateId, UnlistedKernels};

/// A manifest entry the compiled kernels do not export under its exact name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryProblem {
    /// `kernels.toml:LINE:COL`.
    pub listed_at: String,
    /// The source file of the module.
    pub file: String,
    /// `module::entry`.
    pub symbol: String,
    /// What is wrong.
    pub kind: ProblemKind,
}

/// How an entry is missing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProblemKind {
    /// Exported, but under a C++-mangled name: the kernel lacks `extern "C"`.
    Mangled(String),
    /// Not exported at all; what the module does export.
    Missing(Vec<String>),
}

impl fmt::Display for EntryProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self { listed_at, file, symbol, kind } = self;
        match kind {
            ProblemKind::Mangled(mangled) => write!(
                f,
                "{listed_at}: `{symbol}` is exported by {file} under the C++-mangled name `{mangled}`: \
                 declare the kernel `extern \"C\"`"
            ),
            ProblemKind::Missing(found) if found.is_empty() => {
                write!(f, "{listed_at}: `{symbol}` is not in {file}, which exports no kernel")
            }
            ProblemKind::Missing(found) => write!(
                f,
                "{listed_at}: `{symbol}` is not in {file}, which exports {}",
                found.iter().map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", ")
            ),
        }
    }
}

/// The kernel entry points of a PTX file: the names of its `.entry` directives.
pub(crate) fn ptx_entries(ptx: &str) -> Vec<String> {
    ptx.lines()
        .filter_map(|line| {
            let after = line.trim_start().strip_prefix(".visible ").unwrap_or(line.trim_start());
            let name = after.strip_prefix(".entry ")?;
            let name = name.split(['(', ' ']).next()?.trim();
            (!name.is_empty()).then(|| name.to_owned())
        })
        .collect()
}

/// The name `entry` is exported under among a module's entry points `names`: the entry itself
/// for an `extern "C"` kernel; for a template instantiation (`scale<float, 128>`), the one name
/// that mangles it under the Itanium C++ ABI nvcc and the host compilers share:
/// `_Z<length><name>I<arguments>E` then the return type `v` and the parameters.
pub(crate) fn exported_symbol<'n>(entry: &str, names: &'n [String]) -> Option<&'n String> {
    match TemplateId::parse(entry) {
        None => names.iter().find(|name| *name == entry),
        Some(Ok(template)) => {
            let mut found = names.iter().filter(|name| mangles(&template, name));
            let first = found.next()?;
            // Overloads of one template with these arguments: no name is the entry's.
            found.next().is_none().then_some(first)
        }
        Some(Err(_)) => None,
    }
}

/// Whether `symbol` is the mangled name of an instantiation of `template` returning `void`.
fn mangles(template: &TemplateId<'_>, symbol: &str) -> bool {
    let head = format!("_Z{}{}I", template.name.len(), template.name);
    let Some(mut rest) = symbol.strip_prefix(&head) else { return false };
    for arg in &template.args {
        let after = match arg {
            TemplateArg::Type(c_type) => rest.strip_prefix(&type_code(c_type)),
            // `L<type><value>E`, the value's type being the template parameter's, which the
            // entry does not name: any builtin type's one letter.
            TemplateArg::Int(value) => {
                let digits =
                    if *value < 0 { format!("n{}", value.unsigned_abs()) } else { value.to_string() };
                rest.strip_prefix('L')
                    .and_then(|rest| rest.strip_prefix(|c: char| c.is_ascii_lowercase()))
                    .and_then(|rest| rest.strip_prefix(digits.as_str()))
                    .and_then(|rest| rest.strip_prefix('E'))
            }
        };
        let Some(after) = after else { return false };
        rest = after;
    }
    rest.starts_with("Ev")
}

/// The Itanium ABI's code for a C type of kda's table: a builtin's letter, or a class's name
/// with its length (`6__half`).
fn type_code(c_type: &str) -> String {
    let builtin = match c_type {
        "float" => "f",
        "double" => "d",
        "bool" => "b",
        "signed char" => "a",
        "unsigned char" => "h",
        "short" => "s",
        "unsigned short" => "t",
        "int" => "i",
        "unsigned int" => "j",
        "long" => "l",
        "unsigned long" => "m",
        "long long" => "x",
        "unsigned long long" => "y",
        class => return format!("{}{class}", class.len()),
    };
    builtin.to_owned()
}

/// The PTX ISA version a PTX file declares (`.version 9.0`): what a driver must know to compile it.
pub(crate) fn ptx_isa(ptx: &str) -> Option<(u32, u32)> {
    let version = ptx.lines().find_map(|line| line.trim().strip_prefix(".version "))?;
    let (major, minor) = version.trim().split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// Checks every manifest entry against `exported` (per module, its entry points): a problem per
/// entry not exported under its exact name; a warning per module that exports kernels no table
/// lists, unless `[build]` says `unlisted_kernels = "allow"`.
pub(crate) fn check_entries(
    manifest: &Manifest,
    manifest_name: &str,
    kernels_dir: &Path,
    exported: &[(String, Vec<String>)],
    warnings: &mut Vec<String>,
) -> Vec<EntryProblem> {
    let mut problems = Vec::new();
    let file = |module: &str| kernels_dir.join(format!("{module}.cu")).display().to_string();
    for table in &manifest.tables {
        for entry in &table.entries {
            let Some((_, names)) = exported.iter().find(|(module, _)| *module == entry.module) else {
                continue;
            };
            if exported_symbol(&entry.entry, names).is_some() {
                continue;
            }
            // A C++ name mangles as `_Z<length><name>` followed by its parameter types.
            let mangled_prefix = format!("{}{}", entry.entry.len(), entry.entry);
            let kind =
                match names.iter().find(|name| name.starts_with("_Z") && name.contains(&mangled_prefix)) {
                    Some(mangled) => ProblemKind::Mangled(mangled.clone()),
                    None => ProblemKind::Missing(names.clone()),
                };
            problems.push(EntryProblem {
                listed_at: listed_at(manifest_name, entry),
                file: file(&entry.module),
                symbol: format!("{}::{}", entry.module, entry.entry),
                kind,
            });
        }
    }
    if manifest.build.unlisted_kernels == UnlistedKernels::Allow {
        return problems;
    }
    for (module, names) in exported {
        let listed = |name: &&String| {
            manifest
                .tables
                .iter()
                .flat_map(|t| &t.entries)
                .any(|e| e.module == *module && exported_symbol(&e.entry, names) == Some(*name))
        };
        let unlisted: Vec<&String> = names.iter().filter(|name| !listed(name)).collect();
        if unlisted.is_empty() {
            continue;
        }
        /// The most kernels a warning names; it counts the rest.
        const NAMED: usize = 5;
        let mut named: Vec<String> = unlisted.iter().take(NAMED).map(|name| format!("`{name}`")).collect();
        if unlisted.len() > NAMED {
            named.push(format!("{} more", unlisted.len() - NAMED));
        }
        let (count, kernels) = match unlisted.len() {
            1 => ("a kernel".to_owned(), "it"),
            n => (format!("{n} kernels"), "them"),
        };
        warnings.push(format!(
            "{} exports {count} no table of {manifest_name} lists ({}); list {kernels}, or set \
             `unlisted_kernels = \"allow\"` under `[build]` if that is intended",
            file(module),
            named.join(", ")
        ));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = "\
//
.version 9.0
.target sm_90
.visible .entry dense_gemm_bf16(
\t.param .u64 dense_gemm_bf16_param_0
)
.entry _Z15dense_gemv_bf16PK13__nv_bfloat16S1_PS_jj(
\t.param .u64 p
)
.visible .entry helper_kernel(
)
.func (.param .b32 r) not_an_entry(
)
";

    fn manifest() -> Manifest {
        Manifest::parse(
            "kernels.toml",
            "[t]\ngemm = { module = \"dense\", entry = \"dense_gemm_bf16\" }\n\
             gemv = { module = \"dense\", entry = \"dense_gemv_bf16\" }\n\
             batchm = { module = \"dense\", entry = \"dense_gemv_bf16_batchm\", optional = true }\n",
        )
        .unwrap()
    }

    #[test]
    fn the_isa_version_is_read_from_the_version_directive() {
        assert_eq!(ptx_isa(PTX), Some((9, 0)));
        assert_eq!(ptx_isa(".target sm_90\n"), None);
    }

    #[test]
    fn a_template_instantiation_is_found_under_the_name_nvcc_mangles_it_to() {
        // nvcc 13.0.88's entries for these instantiations (two overloads of `scale`).
        let names: Vec<String> = [
            "_Z5scaleIfLi128EEvPKT_PS0_jf",
            "_Z5scaleI6__halfLin4EEvPKT_PS1_jf",
            "_Z5scaleIdEvPKT_PS0_j",
            "_Z4fillI13__nv_bfloat16Lm7EEvPT_",
            "_Z5scaleIxLi1EEvPKT_PS0_jf",
            "plain",
        ]
        .map(str::to_owned)
        .into();
        let found = |entry: &str| exported_symbol(entry, &names).map(String::as_str);
        assert_eq!(found("scale<float, 128>"), Some("_Z5scaleIfLi128EEvPKT_PS0_jf"));
        assert_eq!(found("scale<__half, -4>"), Some("_Z5scaleI6__halfLin4EEvPKT_PS1_jf"));
        assert_eq!(found("scale<double>"), Some("_Z5scaleIdEvPKT_PS0_j"));
        assert_eq!(found("fill<__nv_bfloat16,7>"), Some("_Z4fillI13__nv_bfloat16Lm7EEvPT_"));
        assert_eq!(found("scale<long long, 1>"), Some("_Z5scaleIxLi1EEvPKT_PS0_jf"));
        assert_eq!(found("plain"), Some("plain"));
        // Other arguments, another template, a prefix of a name: not exported.
        for absent in ["scale<float, 64>", "scale<float>", "scal<float, 128>", "fill<float, 7>", "pla"] {
            assert_eq!(found(absent), None, "{absent}");
        }
    }

    #[test]
    fn entries_are_read_from_ptx_mangled_or_not() {
        assert_eq!(
            ptx_entries(PTX),
            ["dense_gemm_bf16", "_Z15dense_gemv_bf16PK13__nv_bfloat16S1_PS_jj", "helper_kernel"]
        );
    }

    #[test]
    fn a_mangled_entry_is_reported_with_its_mangled_name_and_a_missing_one_with_what_is_there() {
        let mut warnings = Vec::new();
        let exported = [("dense".to_owned(), ptx_entries(PTX))];
        let problems =
            check_entries(&manifest(), "kernels.toml", Path::new("kernels"), &exported, &mut warnings);
        let messages: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            [
                "kernels.toml:3:1: `dense::dense_gemv_bf16` is exported by kernels/dense.cu under the C++-mangled \
                 name `_Z15dense_gemv_bf16PK13__nv_bfloat16S1_PS_jj`: declare the kernel `extern \"C\"`",
                "kernels.toml:4:1: `dense::dense_gemv_bf16_batchm` is not in kernels/dense.cu, which exports \
                 `dense_gemm_bf16`, `_Z15dense_gemv_bf16PK13__nv_bfloat16S1_PS_jj`, `helper_kernel`",
            ]
        );
        // One line for the module, naming what it exports that no table lists.
        assert_eq!(
            warnings,
            ["kernels/dense.cu exports 2 kernels no table of kernels.toml lists \
              (`_Z15dense_gemv_bf16PK13__nv_bfloat16S1_PS_jj`, `helper_kernel`); list them, or set \
              `unlisted_kernels = \"allow\"` under `[build]` if that is intended"]
        );
    }

    #[test]
    fn a_module_of_many_unlisted_kernels_is_one_warning_naming_five_and_counting_the_rest() {
        let exported = [("dense".to_owned(), (0..80).map(|i| format!("k{i}")).collect::<Vec<_>>())];
        let mut warnings = Vec::new();
        check_entries(&manifest(), "kernels.toml", Path::new("kernels"), &exported, &mut warnings);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with(
                "kernels/dense.cu exports 80 kernels no table of kernels.toml lists (`k0`, `k1`, `k2`, `k3`, `k4`, 75 more)"
            ),
            "{warnings:?}"
        );
        // Said to be intended: nothing.
        let text =
            "[build]\nunlisted_kernels = \"allow\"\n[t]\ngemm = { module = \"dense\", entry = \"k0\" }\n";
        let allowed = Manifest::parse("kernels.toml", text).unwrap();
        let mut warnings = Vec::new();
        check_entries(&allowed, "kernels.toml", Path::new("kernels"), &exported, &mut warnings);
        assert_eq!(warnings, Vec::<String>::new());
    }

    #[test]
    fn a_module_exporting_every_entry_passes() {
        let exported = [(
            "dense".to_owned(),
            vec![
                "dense_gemm_bf16".to_owned(),
                "dense_gemv_bf16".to_owned(),
                "dense_gemv_bf16_batchm".to_owned(),
            ],
        )];
        let mut warnings = Vec::new();
        assert!(
            check_entries(&manifest(), "kernels.toml", Path::new("kernels"), &exported, &mut warnings)
                .is_empty()
        );
        assert!(warnings.is_empty());
    }
}
