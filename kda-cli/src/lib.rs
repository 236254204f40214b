//! What the `kda` command runs, apart from its argument parsing: the manifest listing and the
//! emulated run of a crate's kernels. A library so that tests reach it.

// Only `emulate::build` is `unsafe`, and says why.
#![deny(unsafe_code)]

pub mod emulate;
pub mod listing;
