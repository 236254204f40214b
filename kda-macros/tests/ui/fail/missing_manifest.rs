use kda_runtime::KernelTable;

#[derive(KernelTable)]
#[kernel_table(manifest = "no_such_manifest.toml")]
pub struct MissingManifest;

// Defaulted: `kernels.toml`, which this folder lacks; the error points at the derive.
#[derive(KernelTable)]
pub struct Glm5NextKda;

fn main() {}
