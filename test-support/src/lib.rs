//! Test and benchmark code shared by several packages of this workspace, never shipped
//! (`publish = false`): each package names it as a dev-dependency instead of including another
//! package's files with `#[path]`.
//!
//! - [`fuzz`]: the manifest fuzzer (seeded input generator, the parser's checks, a parallel
//!   runner, the per-stage report), run on every front end by `kda-build/tests/fuzz_manifest.rs`
//!   and `kda-cli/tests/fuzz_list.rs`; its generator's pieces also feed
//!   `kda-build/tests/manifest_props.rs`.
//! - [`manifests`]: manifests generated for tests and benchmarks (the derive's UI tests and its
//!   expansion benchmark).
//! - `emulator` (feature `emulator`): fixture kernels built for the emulator at test time, for
//!   kda-emu's tests and the model's tests of its device helpers.

// Only `emulator::emulated_set` is `unsafe`, and says why.
#![deny(unsafe_code)]

#[cfg(feature = "emulator")]
pub mod emulator;
pub mod fuzz;
pub mod manifests;
