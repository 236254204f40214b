use kda_runtime::KernelTable;

#[derive(KernelTable)]
#[kernel_table(manifest = "missing_fields.toml")]
pub struct MissingFields;

fn main() {}
