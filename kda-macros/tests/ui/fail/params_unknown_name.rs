use kda_runtime::KernelTable;

#[derive(KernelTable)]
#[kernel_table(manifest = "params_unknown_name.toml")]
pub struct ParamsUnknownName;

fn main() {}
