//! Compiles `kernels/*.cu` with nvcc, checks them against `kernels.toml`, and generates the Rust
//! that `src/lib.rs` includes.

fn main() -> Result<(), kda_build::cuda::BuildError> {
    kda_build::cuda::KernelBuild::from_env()?.run().map(drop)
}
