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

#![forbid(unsafe_code)]

pub mod fuzz;
pub mod manifests;
