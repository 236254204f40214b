//! Compiles `kernels/*.cu` with nvcc, checks them against `kernels.toml`, and generates the Rust
//! that `src/lib.rs` includes: the kernel images and the `[defines]`. Without nvcc it warns and
//! embeds no image (the CPU backend still runs everything).

fn main() -> Result<(), kda_build::cuda::BuildError> {
    kda_build::cuda::KernelBuild::from_env()?.run().map(drop)
}
