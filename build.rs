//! Compiles `kernels/*.cu` with nvcc, checks every entry of `kernels.toml` against the compiled
//! kernels, and generates the Rust that embeds the images and the manifest's `[defines]`
//! (`kda_build::cuda`; `src/kernels.rs` includes it). Without nvcc it warns and embeds no image;
//! `KDA_REQUIRE_NVCC=1` makes that an error. With this crate's feature `emulation`, every entry
//! is also built as C++ for the emulator (`EMULATED_KERNELS`): `from_env` sees the feature.

fn main() -> Result<(), kda_build::cuda::BuildError> {
    // nvcc's defaults (`-O3`, products contracted into FMAs): the bit-identical kernel pairs write
    // every multiply-add as an explicit `__fmaf_rn`, which no `--fmad` setting changes.
    kda_build::cuda::KernelBuild::from_env()?.run().map(drop)
}
