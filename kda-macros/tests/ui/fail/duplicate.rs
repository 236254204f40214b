use kda_runtime::KernelTable;

#[derive(KernelTable)]
#[kernel_table(manifest = "duplicate.toml")]
pub struct Duplicate;

fn main() {}
