//! Compiles `kernels/*.cu` with nvcc, checks every entry of `kernels.toml` is exported under its
//! exact name, and generates the Rust that embeds the images and the manifest's `[defines]`
//! (`kda_build::cuda`). Without nvcc it warns and embeds no image; `KDA_REQUIRE_NVCC=1` makes
//! that an error.

fn main() {
    if let Err(error) = kda_build::cuda::KernelBuild::from_env().and_then(|build| build.run()) {
        eprintln!("error: {error}");
        std::process::exit(1);
    }
}
