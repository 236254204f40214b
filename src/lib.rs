//! The GLM-5 Next KDA model crate: its kernel table, derived from `kernels.toml`, and the
//! command-line reports built on it.

pub mod kernels;
pub mod listing;
