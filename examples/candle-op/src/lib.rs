//! Candle custom ops whose CUDA forward launches this crate's own kernels through kda, on candle's
//! stream and candle's memory: what a candle extension crate (flash-attn, layer-norm) does with its
//! hand-written kernels, with kda's typed, checked launches in place of raw pointers.
//!
//! - [`silu_mul()`]: a [`CustomOp2`](candle_core::CustomOp2), the SwiGLU gate `silu(gate) · up` of
//!   two tensors in one kernel.
//! - [`weighted_sum()`]: `a·x + b·y + c·z + w` of four tensors in one kernel: a
//!   [`CustomOp3`](candle_core::CustomOp3) over three, the fourth carried in the op, as candle's
//!   extension crates carry what does not fit the trait.
//!
//! Each op's `cuda_fwd` takes candle's slices (`CudaStorage::as_cuda_slice`), makes a kda backend
//! on candle's stream (`CudaBackend::on_stream`: no context of its own; modules load once per
//! context), resolves the table, allocates the output with candle, launches, and wraps the output
//! as candle's storage. Its `cpu_fwd` computes the same in Rust. Both take f32 and bf16 tensors,
//! contiguous (at any offset), of one shape.

mod cpu;
mod cuda;
mod operands;
pub mod silu_mul;
pub mod weighted_sum;

pub use silu_mul::{SiluMul, silu_mul};
pub use weighted_sum::{WeightedSum, weighted_sum};

/// This crate's kernels (table `[candle_ops]` of `kernels.toml`): the derive generates the handles
/// struct [`CandleOpsKernels`], the module [`candle_ops`] of argument structs, and a generic
/// `launch_<field>::<T>` per kernel, for the element types its `variants` declare.
#[derive(kda_runtime::KernelTable)]
pub struct CandleOps;

mod compiled {
    kda_runtime::include_kernels!();
}

/// The CUDA images of this crate's kernels (none when nvcc was absent at build time).
pub use compiled::KERNEL_IMAGES;
/// The manifest's `[defines]`, the constants the kernels are compiled with.
pub use compiled::defines;
