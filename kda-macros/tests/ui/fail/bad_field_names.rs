use kda_runtime::KernelTable;

#[derive(KernelTable)]
#[kernel_table(manifest = "bad_field_names.toml")]
pub struct BadFieldNames;

fn main() {}
