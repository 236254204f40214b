//! `#[derive(KernelTable)]`, a thin shell over `kda_build::codegen`.
//!
//! Use it through `kda_runtime`, which re-exports it; see `kda_build::codegen` for the attribute
//! and the generated API.

#![forbid(unsafe_code)]

use std::path::PathBuf;

use proc_macro::TokenStream;

/// Generates the kernel table of a marker type from a manifest table.
///
/// ```text
/// #[derive(KernelTable)]
/// #[kernel_table(manifest = "kernels.toml", table = "glm5next_kda", name = "Glm5NextKdaKernels")]
/// pub struct Glm5NextKda;
/// ```
///
/// Every key is optional: `manifest` defaults to `kernels.toml` (relative to the crate root, or
/// else to the deriving file's folder), `table` to the snake_case of the type's name, `name` to
/// the type's name + `Kernels`. `entry_points = N, required = N, optional = N` pin the counts the
/// crate relies on: a table that grows past them is a compile error.
///
/// It generates the handles struct (a `KernelHandle` per required entry, an `Option` per optional
/// one, documented by the entry's `doc`), its `ENTRY_POINTS`, `REQUIRED_ENTRY_POINTS`,
/// `OPTIONAL_ENTRY_POINTS`, `ENTRIES` and `NAMESPACE`, `resolve(&dyn GpuBackend)`, a
/// `launch_<field>` per entry with `params`, a module named after the table with each entry's
/// argument struct, the enum `<Marker>Entry` (a variant per entry named as its field, with `ALL`,
/// `index`, `entry`, `field`, `from_field`, and the handles struct's `handle(entry)`) for code
/// that knows something per kernel to match on exhaustively, and `impl KernelTable` for the
/// marker. Every manifest error is a compile error
/// at `kernels.toml:LINE:COL`.
#[proc_macro_derive(KernelTable, attributes(kernel_table))]
pub fn derive_kernel_table(input: TokenStream) -> TokenStream {
    let call_site = proc_macro::Span::call_site();
    let site = kda_build::codegen::DeriveSite {
        crate_root: std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from),
        // Relative to rustc's working directory; absolute under trybuild.
        deriving_file: call_site
            .local_file()
            .map(|file| std::env::current_dir().map(|cwd| cwd.join(&file)).unwrap_or(file)),
    };
    kda_build::codegen::derive_kernel_table(input.into(), &site).into()
}
