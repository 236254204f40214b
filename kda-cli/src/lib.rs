//! What the `kda` command runs, apart from its argument parsing: the manifest listing. A library
//! so that tests reach it.

#![forbid(unsafe_code)]

pub mod listing;
