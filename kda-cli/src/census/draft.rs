//! The `kernels.toml` lines `kda census` drafts for the kernels it found stated: one table named
//! after the folder, one entry per kernel, each field named after its entry.
//!
//! The types are the kernel's own, so the build's nvcc check accepts them as drafted. The extents
//! are not in C, so each is a guess that parses, which the entry's comment says how it was made:
//!
//! - a strided layout, where the kernel takes an element count and a rank (and no other integer)
//!   before a `const` integer layout, its first buffer, and `const` inputs after it (`size_t
//!   numel, size_t num_dims, const size_t* info, const T* inp, T* out`): the layout holds the
//!   dims, then each input's strides (`info[2 * num_dims]`), the first input reaches
//!   `strided(info, num_dims)`, the second `strided(info, num_dims, 2)` (its strides the second
//!   run after the dims), and so on, and what the kernel writes is `numel`;
//! - else every buffer is the kernel's one element count (an integer scalar named `n`, `numel`,
//!   `size`, ..., or its only integer scalar);
//! - else, and for the bytes of a `void` buffer, `?` with a `safety` condition that says TODO: the
//!   launcher is `unsafe` until someone states the extent.

use std::collections::HashSet;
use std::fmt::Write;
use std::path::Path;

use kda_build::manifest::{DType, is_c_identifier, is_rust_field_name};

use super::Census;
use super::ctype::Stated;

/// Names of an integer scalar that counts the elements a kernel touches.
const SIZE_NAMES: &[&str] = &[
    "n",
    "numel",
    "size",
    "len",
    "length",
    "count",
    "num_elements",
    "n_elements",
    "nelements",
    "elem_count",
];

/// Names of an integer scalar that counts the dims of a strided layout.
const RANK_NAMES: &[&str] = &["num_dims", "ndims", "ndim", "n_dims", "rank"];

/// The tables a manifest reserves, which a folder's name cannot be.
const RESERVED_TABLES: &[&str] = &["defines", "build"];

/// The drafted `kernels.toml` of the census's stated kernels, or `None` where none is.
pub fn manifest(census: &Census) -> Option<String> {
    let mut fields = HashSet::new();
    let mut entries = String::new();
    for (file, kernel) in census.kernels() {
        let Ok(stated) = &kernel.outcome else { continue };
        let kernel = &kernel.kernel;
        let entry = kernel.entry();
        let spelled = entry_field(&entry);
        let field = unique(&mut fields, &field_name(&spelled), &format!("{}_{spelled}", file.module));
        let mut params = Vec::new();
        let mut names = HashSet::new();
        for (index, (param, stated)) in kernel.params.iter().zip(stated).enumerate() {
            let written = param.name.as_deref().map(field_name).unwrap_or_default();
            let name = unique(&mut names, &written, &format!("arg{index}"));
            params.push(Param { name, stated: *stated, extent: String::new(), safety: None });
        }
        let how = draft_extents(&mut params);
        let source = match &kernel.macro_name {
            Some(name) => format!("{}:{}, {name}", file.path, kernel.line),
            None => format!("{}:{}", file.path, kernel.line),
        };
        let _ = writeln!(entries, "# {source}{}", how.comment(&params));
        let _ = write!(
            entries,
            "{field} = {{ module = {}, entry = {},\n    params = {}",
            quote(&file.module),
            quote(&entry),
            quote(&params.iter().map(Param::declaration).collect::<Vec<_>>().join(", "))
        );
        let conditions: Vec<String> = params
            .iter()
            .filter_map(|param| Some(format!("{} = {}", param.name, quote(param.safety.as_deref()?))))
            .collect();
        if !conditions.is_empty() {
            let _ = write!(entries, ",\n    safety = {{ {} }}", conditions.join(", "));
        }
        entries.push_str(" }\n");
    }
    if fields.is_empty() {
        return None;
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Drafted by `kda census`: {} of the {} kernels it found. The types are the kernels' own; each\n\
         # extent is a draft, made as its comment says: check it against the kernel.",
        fields.len(),
        census.kernels().count()
    );
    let _ = writeln!(out, "[{}]\n{entries}", table_name(&census.folder));
    Some(out)
}

/// The table's name: the folder's, as a Rust identifier.
pub fn table_name(folder: &Path) -> String {
    let canonical = std::fs::canonicalize(folder).unwrap_or_else(|_| folder.to_owned());
    let name = canonical.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    let mut table: String =
        name.chars().map(|ch| if ch.is_ascii_alphanumeric() { ch } else { '_' }).collect();
    if table.starts_with(|first: char| first.is_ascii_digit()) {
        table.insert(0, '_');
    }
    if RESERVED_TABLES.contains(&table.as_str()) || !is_rust_field_name(&table) {
        table.push_str("_kernels");
    }
    if is_rust_field_name(&table) { table } else { "kernels".to_owned() }
}

/// A name the manifest takes for a field or a parameter: `name` itself where it is a C
/// identifier and no Rust keyword, else `name_`, else nothing.
fn field_name(name: &str) -> String {
    [name.to_owned(), format!("{name}_")]
        .into_iter()
        .find(|candidate| is_c_identifier(candidate) && is_rust_field_name(candidate))
        .unwrap_or_default()
}

/// An entry as a field's name: a template instantiation's arguments joined to its name by `_`
/// (`max_each<float>`: `max_each_float`).
fn entry_field(entry: &str) -> String {
    let words: Vec<&str> = entry
        .split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
        .filter(|word| !word.is_empty())
        .collect();
    words.join("_")
}

/// `wanted`, or where it is empty or taken `fallback`, or `fallback_2`, `fallback_3`, ...; marked
/// taken.
fn unique(taken: &mut HashSet<String>, wanted: &str, fallback: &str) -> String {
    let name = [wanted.to_owned(), fallback.to_owned()]
        .into_iter()
        .chain((2..).map(|suffix| format!("{fallback}_{suffix}")))
        .find(|candidate| !candidate.is_empty() && !taken.contains(candidate))
        .unwrap_or_default();
    taken.insert(name.clone());
    name
}

/// One drafted parameter.
struct Param {
    name: String,
    stated: Stated,
    /// A buffer's extent, as the manifest writes it.
    extent: String,
    /// A buffer's `safety` condition, where its extent is `?`.
    safety: Option<String>,
}

impl Param {
    fn declaration(&self) -> String {
        match self.stated {
            Stated::Scalar(kind) => format!("{kind} {}", self.name),
            Stated::Buffer { element, constant } => {
                let constness = if constant { "const " } else { "" };
                format!("{constness}{element} {}[{}]", self.name, self.extent)
            }
        }
    }

    fn is_integer_scalar(&self) -> bool {
        matches!(self.stated, Stated::Scalar(kind) if kind.is_integer() && kind.dtype() != DType::Bool)
    }

    fn is_buffer(&self) -> bool {
        matches!(self.stated, Stated::Buffer { .. })
    }

    fn is_input(&self) -> bool {
        matches!(self.stated, Stated::Buffer { constant: true, .. })
    }

    fn is_void(&self) -> bool {
        matches!(self.stated, Stated::Buffer { element: DType::Void, .. })
    }

    /// The extent `?`, with a `safety` condition that asks for the extent or the caller's
    /// guarantee.
    fn todo(&mut self) {
        let what = if self.is_void() { "bytes" } else { "elements" };
        self.extent = "?".to_owned();
        self.safety = Some(format!(
            "TODO (kda census): state the extent of `{}`, the {what} the kernel may touch, or what the caller \
             guarantees",
            self.name
        ));
    }
}

/// How an entry's extents were drafted.
enum Extents {
    /// A strided layout, the buffer's name.
    Layout(String),
    /// The kernel's one element count, its name.
    Count(String),
    /// Unknown: `?` with a TODO.
    Unknown,
}

impl Extents {
    /// The rest of the comment above the entry.
    fn comment(&self, params: &[Param]) -> String {
        if !params.iter().any(Param::is_buffer) {
            return String::new();
        }
        let todo =
            params.iter().any(|param| param.safety.as_deref().is_some_and(|text| text.starts_with("TODO")));
        let rest = if todo { "; each `?` is named in `safety` until its extent is stated" } else { "" };
        match self {
            Extents::Layout(layout) => {
                format!(": `{layout}` read as the dims, then each input's strides; check the extents{rest}")
            }
            Extents::Count(count) => format!(": every extent is `{count}`: check them{rest}"),
            Extents::Unknown => format!(": extents unknown to the census{rest}"),
        }
    }
}

/// Sets the extent of each buffer of `params` and says how.
fn draft_extents(params: &mut [Param]) -> Extents {
    let integers: Vec<String> =
        params.iter().filter(|param| param.is_integer_scalar()).map(|param| param.name.clone()).collect();
    let named = |is: &dyn Fn(&str) -> bool| -> Vec<String> {
        integers.iter().filter(|name| is(&name.to_ascii_lowercase())).cloned().collect()
    };
    let counts = named(&|name| SIZE_NAMES.contains(&name) || name.ends_with("_numel"));
    let ranks = named(&|name| RANK_NAMES.contains(&name));
    let count = match (counts.as_slice(), integers.as_slice()) {
        ([count], _) | ([], [count]) => Some(count.clone()),
        _ => None,
    };
    let layout = params.iter().position(Param::is_buffer).filter(|&at| {
        let element = match params[at].stated {
            Stated::Buffer { element, constant: true } => element,
            _ => return false,
        };
        element.is_integer() && element != DType::Bool
    });
    if let (Some(count), Some(layout), [rank]) = (&count, layout, ranks.as_slice()) {
        let inputs: Vec<usize> = (layout + 1..params.len()).filter(|&at| params[at].is_input()).collect();
        let all_typed = inputs.iter().all(|&at| !params[at].is_void());
        // Another integer before the layout may size a part of it (the dims a reduction sums).
        let before: Vec<&str> = params[..layout]
            .iter()
            .filter(|param| param.is_integer_scalar())
            .map(|param| param.name.as_str())
            .collect();
        let just_count_and_rank =
            before.len() == 2 && before.contains(&count.as_str()) && before.contains(&rank.as_str());
        if just_count_and_rank && !inputs.is_empty() && all_typed {
            return strided(params, layout, &inputs, rank, count);
        }
    }
    match count {
        Some(count) => fill(params, count),
        None => {
            params.iter_mut().filter(|param| param.is_buffer()).for_each(Param::todo);
            Extents::Unknown
        }
    }
}

/// The extents of a kernel whose first buffer, `params[layout]`, holds the dims of a strided
/// layout and then the strides of each of its `inputs`.
fn strided(params: &mut [Param], layout: usize, inputs: &[usize], rank: &str, count: &str) -> Extents {
    let layout_name = params[layout].name.clone();
    params[layout].extent = format!("{} * {rank}", inputs.len() + 1);
    params[inputs[0]].extent = format!("strided({layout_name}, {rank})");
    for (part, &at) in inputs.iter().enumerate().skip(1) {
        params[at].extent = format!("strided({layout_name}, {rank}, {})", part + 1);
    }
    for param in params.iter_mut().filter(|param| param.is_buffer() && !param.is_input()) {
        if param.is_void() {
            param.todo();
        } else {
            param.extent = count.to_owned();
        }
    }
    Extents::Layout(layout_name)
}

/// Every buffer's extent `count` (a `void` one's `?`, its bytes unknown).
fn fill(params: &mut [Param], count: String) -> Extents {
    for param in params.iter_mut().filter(|param| param.is_buffer()) {
        if param.is_void() {
            param.todo();
        } else {
            param.extent.clone_from(&count);
        }
    }
    Extents::Count(count)
}

/// `text` as a TOML basic string.
fn quote(text: &str) -> String {
    let mut quoted = String::from("\"");
    for ch in text.chars() {
        match ch {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            ch if ch.is_control() => {
                let _ = write!(quoted, "\\u{:04X}", u32::from(ch));
            }
            ch => quoted.push(ch),
        }
    }
    quoted.push('"');
    quoted
}
