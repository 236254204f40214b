//! The GLM-5 Next KDA model crate: its kernel table, derived from `kernels.toml`, the dense-product
//! dispatch, the KDA block that runs decode and chunked prefill through the table, and the
//! command-line reports built on it.

#![forbid(unsafe_code)]

pub mod bench;
pub mod block;
pub mod cases;
pub mod compare;
pub mod geometry;
pub mod job;
pub mod kernels;
pub mod launch;
pub mod listing;
pub mod ops;
pub mod reference;
pub mod report;
pub mod rng;
pub mod weights;
