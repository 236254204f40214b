use kda_runtime::KernelTable;

#[derive(KernelTable)]
#[kernel_table(manifest = "params_unknown_type.toml")]
pub struct ParamsUnknownType;

fn main() {}
