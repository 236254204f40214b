//! The translation unit nvcc compiles for a module: the module's source, included, followed by
//! compile-time checks of the parameter count and exact C type of every manifest entry of that
//! module that has `params`, and the instantiation of every template entry.
//!
//! A failed check is an instantiation of an incomplete template whose arguments carry the
//! entry's position among the checked entries ([`checked_entries`] of a module, the listings of
//! an emulated unit), the parameter's position and both types, so nvcc's error text is enough to
//! rebuild the message (`diagnostics`):
//!
//! ```text
//! incomplete type "kda_check::kda_param_mismatch<12, 0, ...>"
//!     (aka "kda_check::kda_param_mismatch<12, 0, const kda_manifest::t_bf16 *, kda_manifest::t_f32 *>")
//! ```
//!
//! The checks compare the function type, so top-level qualifiers (`__restrict__`, `const` on the
//! pointer itself) do not count, while `const` on the element does.
//!
//! The emulated build appends the same checks of the entries a module's C++ unit registers to
//! that unit ([`entry_checks`]), with one more: that the unit declares each entry at all
//! (`kda_entry_missing<LINE, ...>`), which nvcc's build reads from the PTX instead. So a kernel's
//! C types are proved by whichever compiler the build has, with the same messages.

use std::fmt::Write;
use std::path::Path;

use kda_types::DType;

use super::c_type;

use crate::manifest::TemplateId;
use crate::{Entry, Manifest};

/// The checks' machinery, the same in every unit.
///
/// - `kda_type_of(&kernel, 0)` is the kernel's parameter list. Each checked name is also declared
///   in `kda_fallback` as a function returning `kda_absent`, visible through a using-directive:
///   when the module declares the kernel, overload resolution prefers the real one (the `int`
///   overload deduces only from a `void` function); when it does not, the fallback answers
///   `kda_absent` and every check of that entry passes, leaving the missing entry to the PTX
///   entry check, which says what the module does export.
/// - `kda_spell` renames the types the manifest can name to tags (`kda_manifest::t_bf16`), so the
///   error shows canonical manifest names whatever typedef the kernel wrote (`bf16`, `u32`). Its
///   specializations are written from kda-types' table ([`spellings`]), the one the manifest's
///   types come from.
const PRELUDE: &str = r#"
struct __nv_bfloat16;
struct __half;
struct __nv_fp8_e4m3;
struct __nv_fp8_e5m2;
@TAGS@
namespace kda_check {
struct kda_absent { static constexpr int count = -1; };
template <class... A> struct kda_params { static constexpr int count = sizeof...(A); };
template <int I, class P> struct kda_param_at { using type = kda_absent; };
template <class A0, class... A> struct kda_param_at<0, kda_params<A0, A...>> { using type = A0; };
template <int I, class A0, class... A>
struct kda_param_at<I, kda_params<A0, A...>> : kda_param_at<I - 1, kda_params<A...>> {};
template <class T> struct kda_spell { using type = T; };
@SPELLINGS@
template <class T> struct kda_spell<const T> { using type = const typename kda_spell<T>::type; };
template <class T> struct kda_spell<T*> { using type = typename kda_spell<T>::type*; };
template <class... A> kda_params<A...> kda_type_of(void (*)(A...), int);
kda_absent kda_type_of(kda_absent (*)(kda_absent), long);
template <int Entry, int Index, class Declared, class Found> struct kda_param_mismatch;
template <int Entry, int Index, class T> struct kda_param_mismatch<Entry, Index, T, T> { static constexpr bool ok = true; };
template <int Entry, int Index, class T> struct kda_param_mismatch<Entry, Index, T, kda_absent> { static constexpr bool ok = true; };
template <int Entry, class P> struct kda_entry_missing { static constexpr bool ok = true; };
template <int Entry> struct kda_entry_missing<Entry, kda_absent>;
template <int Entry, int Declared, int Found> struct kda_count_mismatch;
template <int Entry, int N> struct kda_count_mismatch<Entry, N, N> { static constexpr bool ok = true; };
template <int Entry, int N> struct kda_count_mismatch<Entry, N, -1> { static constexpr bool ok = true; };
template <int Entry, int Index, class Declared, class P>
using kda_param_check = kda_param_mismatch<Entry, Index, typename kda_spell<Declared>::type,
                                           typename kda_spell<typename kda_param_at<Index, P>::type>::type>;
template <int Entry, int Declared, class P> using kda_count_check = kda_count_mismatch<Entry, Declared, P::count>;
}
"#;

/// The tags of the manifest's type names, and the `kda_spell` specialization of each C type: one
/// per C type of kda-types' table, every spelling of it (`unsigned long` and `unsigned long long`
/// are both `u64`), so the check applies the table's one rule. Every scalar kind is an element
/// type of the same name, so the element types name them all.
fn spellings() -> (String, String) {
    let mut tags = String::from("namespace kda_manifest {");
    let mut specializations = Vec::new();
    for dtype in DType::ALL {
        let name = dtype.name();
        // `t_`: a manifest name may be a C++ keyword (`bool`).
        let _ = write!(tags, " struct t_{name};");
        for c_type in dtype.c_types() {
            specializations.push(format!(
                "template <> struct kda_spell<{c_type}> {{ using type = kda_manifest::t_{name}; }};"
            ));
        }
    }
    tags.push_str(" }");
    (tags, specializations.join("\n"))
}

/// The source of `<module>.kda.cu`: `#include` of `source` (absolute, so the unit compiles from
/// anywhere and headers beside the module are found as before), then the checks of `module`'s
/// entries in `manifest` (named `manifest_name` in the comments).
pub(in crate::cuda) fn translation_unit(
    manifest: &Manifest,
    manifest_name: &str,
    module: &str,
    source: &Path,
) -> String {
    let mut out =
        String::from("// Generated by kda-build: the module, then the checks of its manifest params.\n");
    let _ = writeln!(out, "#include \"{}\"", c_string(&source.display().to_string()));
    // Each template instantiation an entry names is made here, by taking its address, so the
    // module exports it (under its mangled name, which `symbols` finds).
    let instances: Vec<&str> = manifest
        .tables
        .iter()
        .flat_map(|table| &table.entries)
        .filter(|entry| entry.module == module && TemplateId::parse(&entry.entry).is_some())
        .map(|entry| entry.entry.as_str())
        .collect();
    if !instances.is_empty() {
        let addresses: Vec<String> = instances.iter().map(|entry| format!("(void*)&{entry}")).collect();
        let _ = writeln!(out, "[[maybe_unused]] void* const kda_instances[] = {{{}}};", addresses.join(", "));
    }
    out.push_str(&checks(manifest_name, &checked_entries(manifest, module), false));
    out
}

/// The entries of `module` with `params`, in the order a module's checks number them.
pub(super) fn checked_entries<'m>(manifest: &'m Manifest, module: &str) -> Vec<&'m Entry> {
    manifest
        .tables
        .iter()
        .flat_map(|table| &table.entries)
        .filter(|entry| entry.module == module && entry.params.is_some())
        .collect()
}

/// The checks the emulated build appends to a module's unit (after the module and the
/// emulator's registrations of its kernels), for each of `listings`, the manifest's listings of
/// the entries it registers: that the unit declares the entry, and its `params`.
pub(in crate::cuda) fn entry_checks(manifest_name: &str, listings: &[&Entry]) -> String {
    checks(manifest_name, listings, true)
}

/// The machinery and the checks of `entries`: their parameter counts and types where they have
/// `params`, and with `presence`, that each is declared.
fn checks(manifest_name: &str, entries: &[&Entry], presence: bool) -> String {
    if entries.is_empty() {
        return String::new();
    }
    let (tags, spellings) = spellings();
    let mut out = PRELUDE.replace("@TAGS@", &tags).replace("@SPELLINGS@", &spellings);
    out.push_str("namespace kda_fallback {\n");
    // A name the module lacks resolves to the fallback, so the checks report it as absent
    // instead of failing to compile; a template's instantiation has none.
    let mut names: Vec<&str> = entries
        .iter()
        .map(|entry| entry.entry.as_str())
        .filter(|entry| TemplateId::parse(entry).is_none())
        .collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        let _ = writeln!(out, "kda_check::kda_absent {name}(kda_check::kda_absent);");
    }
    out.push_str("}\nnamespace kda_check {\nusing namespace kda_fallback;\n");
    // Checks are numbered by the entry's position in `entries`: variants share a line.
    for (ordinal, entry) in entries.iter().enumerate() {
        let line = entry.location.line;
        let symbol = format!("{}::{}", entry.module, entry.entry);
        let _ = writeln!(out, "// {manifest_name}:{line}: {symbol}");
        let _ = writeln!(out, "using kda_entry_{ordinal} = decltype(kda_type_of(&{}, 0));", entry.entry);
        // A template's instantiation has no fallback: one the module lacks does not compile.
        if presence && TemplateId::parse(&entry.entry).is_none() {
            let _ = writeln!(
                out,
                "static_assert(kda_entry_missing<{ordinal}, kda_entry_{ordinal}>::ok, \"{symbol}: declared\");"
            );
        }
        let Some(params) = &entry.params else { continue };
        // The message is never printed (the incomplete type fails first), but nvcc echoes the
        // source line, so a reader of raw nvcc output sees which entry and parameter it is.
        let _ = writeln!(
            out,
            "static_assert(kda_count_check<{ordinal}, {}, kda_entry_{ordinal}>::ok, \"{symbol}: parameter count\");",
            params.len()
        );
        for (index, param) in params.iter().enumerate() {
            let _ = writeln!(
                out,
                "static_assert(kda_param_check<{ordinal}, {index}, {}, kda_entry_{ordinal}>::ok, \
                 \"{symbol} parameter {index} {}\");",
                c_type(&param.ty).c_spelling(),
                param.name
            );
        }
    }
    out.push_str("}\n");
    out
}

/// `text` inside a C string literal.
fn c_string(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"")
}
