//! What the `kda` command runs, apart from its argument parsing: the main job and its batched
//! part, the resolution report, the manifest listing, the kernel benchmark, its vendor baseline and its
//! roofline model, and the emulated suite. A library so that tests reach them.

// `deny`, not `forbid`: `kda emulate` vouches, under its own `allow`, for the emulated libraries
// it has just built (`EmulatedSet::leak`).
#![deny(unsafe_code)]

pub mod baseline;
pub mod batch;
pub mod bench;
#[cfg(feature = "emulation")]
pub mod emulate;
pub mod job;
#[cfg(feature = "emulation")]
pub mod launch_fuzz;
pub mod listing;
pub mod report;
pub mod roofline;
