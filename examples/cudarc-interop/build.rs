//! Compiles `kernels/*.cu` with nvcc, checks them against `kernels.toml`, and generates the Rust
//! that `src/main.rs` includes. Without nvcc it warns and embeds no image.

fn main() -> Result<(), kda_build::cuda::BuildError> {
    kda_build::cuda::KernelBuild::from_env()?.run().map(drop)
}
