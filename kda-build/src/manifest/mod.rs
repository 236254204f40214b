//! The kernel manifest: each top-level table of `kernels.toml` is one kernel table, each of its
//! keys one entry point.
//!
//! ```toml
//! [my_model]
//! gemm        = { module = "gemm", entry = "dense_gemm_bf16" }
//! gemv_batchm = { module = "dense_gemv_bf16_batchm", entry = "dense_gemv_bf16_batchm",
//!                 optional = true, doc = "The batched GEMV." }
//! ```
//!
//! A reserved `[defines]` table holds named integer constants (`DENSE_GEMV_BATCHM_MAX_M = 16`)
//! that the kernels get as `-D` flags and Rust as constants.
//!
//! [`read_manifest`] reads the file (at most [`MAX_MANIFEST_BYTES`], UTF-8), and
//! [`Manifest::parse`] parses it and reports every problem at once, in file order, each at its
//! `LINE:COL` (the first [`MAX_REPORTED_ERRORS`] of them, then how many more).

mod contract;
mod diagnostic;
mod file;
mod ident;
// How generated code names a crate's kernels: the derive's and the build's alone.
#[cfg(feature = "codegen")]
pub(crate) mod namespace;
mod params;
mod parse;
mod template;
mod validate;
mod variants;

pub use contract::{
    BinaryOp, CompareOp, Comparison, DType, Expr, LaunchDim, Op, Param, ParamType, Requirement, ScalarKind,
};
pub use diagnostic::{Diagnostic, LineIndex, Location, MAX_REPORTED_ERRORS, ManifestError};
pub use file::{MAX_MANIFEST_BYTES, ReadError, read_manifest};
#[cfg(feature = "codegen")]
pub(crate) use ident::RESERVED_PREFIX;
use ident::is_rust_keyword;
pub use ident::{is_c_identifier, is_rust_field_name};
pub use template::{TemplateArg, TemplateId};
pub use variants::{AxisValue, Variant};

/// The reserved table of named integer constants shared by the kernels and Rust.
pub(crate) const DEFINES_TABLE: &str = "defines";

/// The reserved table of the build's settings.
pub(crate) const BUILD_TABLE: &str = "build";

/// A parsed and validated manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// The kernel tables, in file order.
    pub tables: Vec<Table>,
    /// The `[defines]`, in file order: passed to nvcc as `-DNAME=VALUE` and generated as Rust
    /// constants, so neither side writes a shared constant twice.
    pub defines: Vec<Define>,
    /// The `[build]` settings.
    pub build: BuildSettings,
}

/// `[build]`: how the build step treats the kernels, beside the tables.
///
/// ```toml
/// [build]
/// unlisted_kernels = "allow"   # a library's modules export more kernels than the tables list
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildSettings {
    /// What the build says of a kernel a module exports and no table lists.
    #[serde(default)]
    pub unlisted_kernels: UnlistedKernels,
}

/// What the build says of exported kernels no table lists.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnlistedKernels {
    /// One warning per module, naming them (the default: a kernel left out by mistake shows).
    #[default]
    Warn,
    /// Nothing: the manifest lists only some of a library's kernels, on purpose.
    Allow,
}

/// One named constant of `[defines]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Define {
    /// A C identifier (and so a Rust constant name).
    pub name: String,
    /// Its value.
    pub value: u32,
    /// Where the name is written.
    pub location: Location,
}

/// One kernel table: a top-level `[name]` table of the manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    /// The table's name, e.g. `my_model`.
    pub name: String,
    /// Where the table's name is written.
    pub location: Location,
    /// Its entries, in file order.
    pub entries: Vec<Entry>,
}

/// One kernel entry point: one line of a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The key: the field of the generated struct.
    pub field: String,
    /// The module, `kernels/<module>.cu`.
    pub module: String,
    /// The exact, unmangled entry point name.
    pub entry: String,
    /// Whether a target may lack it.
    pub optional: bool,
    /// What the kernel does; becomes the field's doc comment.
    pub doc: Option<String>,
    /// The kernel's parameters, in order (`params`); `None` for an entry without a launch
    /// contract, which can only be launched unchecked.
    pub params: Option<Vec<Param>>,
    /// What a launch must satisfy beyond the extents (`requires`); empty without `params`.
    pub requires: Vec<Requirement>,
    /// Which instantiation of its kernel it is, for an entry the manifest's `variants` expanded.
    pub variant: Option<Variant>,
    /// Why `kda emulate` draws no launch of it (`unlaunched`), in the manifest's words: a kernel
    /// whose launches drawn from its contract would test nothing or could not end, an entry without
    /// `params`. The derive and the build ignore it.
    pub unlaunched: Option<String>,
    /// Where the key is written.
    pub location: Location,
}

impl Manifest {
    /// Parses and validates `text`, the contents of the manifest `file` (the name errors show).
    pub fn parse(file: &str, text: &str) -> Result<Manifest, ManifestError> {
        let source = &LineIndex::new(text);
        let mut diagnostics = Vec::new();
        let raw = parse::read(source, &mut diagnostics);
        let contracts = params::read_contracts(source, &raw, &mut diagnostics);
        validate::validate(source, &raw, &mut diagnostics);
        if diagnostics.is_empty() {
            Ok(Manifest {
                tables: raw
                    .tables
                    .into_iter()
                    .zip(contracts)
                    .map(|(table, contracts)| table.into_table(source, contracts))
                    .collect(),
                defines: raw.defines.into_iter().map(|define| parse::into_define(source, define)).collect(),
                build: raw.build,
            })
        } else {
            // File order, whichever step found them, capped once here for every front end.
            Err(ManifestError::new(file, diagnostics))
        }
    }

    /// The `[defines]` of `text` that read well, even when the manifest as a whole does not:
    /// the build step still generates them beside a broken table, so code using the constants
    /// does not add errors of its own to the manifest's (which the derive reports).
    pub fn recover_defines(text: &str) -> Vec<Define> {
        let source = &LineIndex::new(text);
        let raw = parse::read(source, &mut Vec::new());
        let mut defines: Vec<Define> = Vec::new();
        for define in raw.defines {
            let define = parse::into_define(source, define);
            // Only what would compile: validation, which rejects the rest, has not run.
            let valid = is_c_identifier(&define.name) && !is_rust_keyword(&define.name);
            if valid && defines.iter().all(|kept| kept.name != define.name) {
                defines.push(define);
            }
        }
        defines
    }

    /// The table called `name`.
    pub fn table(&self, name: &str) -> Option<&Table> {
        self.tables.iter().find(|table| table.name == name)
    }
}

impl Table {
    /// Entries every target must carry.
    pub fn required_count(&self) -> usize {
        self.entries.iter().filter(|entry| !entry.optional).count()
    }

    /// Entries a target may lack.
    pub fn optional_count(&self) -> usize {
        self.entries.len() - self.required_count()
    }
}
