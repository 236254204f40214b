use kda_runtime::KernelTable;

#[derive(KernelTable)]
#[kernel_table(manifest = "unknown_key.toml")]
pub struct UnknownKey;

fn main() {}
