use kda_runtime::KernelTable;

#[derive(KernelTable)]
#[kernel_table(manifest = "not_tables.toml")]
pub struct NotTables;

fn main() {}
