//! The GLM-5.3-Flash KDA model crate: its kernel table, derived from `kernels.toml`, the
//! dense-product dispatch, the KDA block that runs decode and chunked prefill through the table,
//! its geometry and weights, its split across ranks by heads, and the CPU reference kernels. Its
//! binary, `kda-block` (`src/bin/kda-block`), runs the main job, the kernel benchmark and the
//! emulated suite; the tool's own `kda` command is the `kda-cli` package.

// `deny`, not `forbid`: the kernel sets the build generates (`kernels::KERNEL_IMAGES`) are made
// with the `unsafe` constructors that vouch for the build's outputs, under their own `allow`.
#![deny(unsafe_code)]

#[cfg(feature = "nccl")]
pub mod all_reduce;
pub mod block;
#[cfg(feature = "cases")]
pub mod cases;
pub mod compare;
pub mod geometry;
pub mod kernels;
pub mod launch;
pub mod ops;
pub mod reference;
pub mod rng;
pub mod tensor_parallel;
pub mod weights;
