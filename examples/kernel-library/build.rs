//! Compiles `kernels/*.cu` with nvcc, checks every entry of `kernels.toml` against the kernels' C
//! types, and generates the Rust that `src/lib.rs` includes: the kernel images (and, with the
//! feature `emulation`, the emulated libraries). Without nvcc it warns and embeds no image.

fn main() -> Result<(), kda_build::cuda::BuildError> {
    kda_build::cuda::KernelBuild::from_env()?.run().map(drop)
}
