//! What the `kda` command runs, apart from its argument parsing: the manifest listing, the
//! emulated run of a crate's kernels and the census of a folder of CUDA sources. A library so
//! that tests reach it.

// Only `emulate::build` is `unsafe`, and says why.
#![deny(unsafe_code)]

pub mod census;
pub mod emulate;
pub mod listing;
