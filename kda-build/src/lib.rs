//! The build-time side of kda.
//!
//! - [`manifest`]: the `kernels.toml` model, its parser and validator, with every error located
//!   at `FILE:LINE:COL`. Plain library code, shared by the derive, `build.rs` and the CLI.
//! - `cuda` (feature `cuda`, on by default): the build step that compiles `kernels/*.cu` with nvcc, checks every manifest
//!   entry is exported, and generates the Rust that embeds the images and the `[defines]`.
//! - `codegen` (feature `codegen`): the code generator behind `#[derive(KernelTable)]`, working on
//!   `proc_macro2` tokens so it can be tested and benchmarked outside a compiler.

#![forbid(unsafe_code)]

#[cfg(feature = "cuda")]
pub mod cuda;
pub mod manifest;

#[cfg(feature = "codegen")]
pub mod codegen;

pub use manifest::{Define, Diagnostic, Entry, Location, Manifest, ManifestError, Table};
