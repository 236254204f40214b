//! The code generator behind `#[derive(KernelTable)]`, on `proc_macro2` tokens.
//!
//! Steps, one file each (after thiserror-impl): `attr` reads `#[kernel_table(...)]`,
//! `locate` finds and reads the manifest, `counts` checks the counts the attribute expects,
//! `expand` generates the table, `table` the handles struct with its entries and lookups,
//! `signature` each entry's signature, `launcher` the typed launchers, `variants` a variant
//! group's generic one, `entry_enum` the enum of the entries that per-kernel code matches on, and
//! `fallback` stands in for the table when there is none to generate, so the real error is the
//! only one a user sees.
//!
//! ```text
//! #[derive(KernelTable)]
//! #[kernel_table(manifest = "kernels.toml", table = "my_model", name = "MyModelKernels")]
//! pub struct MyModel;
//! ```
//!
//! Every key is optional: `manifest` defaults to `kernels.toml`, found relative to the crate root
//! or else to the deriving file's folder; `table` to the snake_case of the type's name (a word
//! break before each capital that follows a lowercase letter: `MyModel` → `my_model`);
//! `name` to the type's name + `Kernels`.

mod attr;
mod counts;
mod entry_enum;
mod expand;
mod fallback;
mod launcher;
mod locate;
mod signature;
mod table;
mod tokens;
mod variants;

use std::path::PathBuf;

use proc_macro2::TokenStream;

// The build step embeds each entry's signature beside its image with the derive's own tokens.
#[cfg(feature = "cuda")]
pub(crate) use signature::built_entries;

/// Where the derive is being expanded, which decides where a relative manifest path points.
#[derive(Clone, Debug, Default)]
pub struct DeriveSite {
    /// The deriving crate's root (`CARGO_MANIFEST_DIR`).
    pub crate_root: Option<PathBuf>,
    /// The file holding the derive, absolute (from `proc_macro::Span::local_file`). A manifest
    /// not found under the crate root is looked for beside it, as trybuild cases need.
    pub deriving_file: Option<PathBuf>,
}

/// Expands `#[derive(KernelTable)]` on `input`: the handles struct, its consts and `resolve`,
/// and `impl KernelTable` for the marker; every error as a located `compile_error!`.
pub fn derive_kernel_table(input: TokenStream, site: &DeriveSite) -> TokenStream {
    match syn::parse2::<syn::DeriveInput>(input) {
        Ok(input) => expand::derive(&input, site),
        Err(error) => error.to_compile_error(),
    }
}
