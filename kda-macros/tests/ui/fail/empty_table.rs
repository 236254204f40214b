use kda_runtime::KernelTable;

#[derive(KernelTable)]
#[kernel_table(manifest = "empty_table.toml")]
pub struct EmptyTable;

fn main() {}
