//! What the `kda` command runs, apart from its argument parsing: the main job, the resolution
//! report, the manifest listing and the kernel benchmark. A library so that tests reach them.

#![forbid(unsafe_code)]

pub mod bench;
pub mod job;
pub mod listing;
pub mod report;
