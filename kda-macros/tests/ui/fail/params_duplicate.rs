use kda_runtime::KernelTable;

#[derive(KernelTable)]
#[kernel_table(manifest = "params_duplicate.toml")]
pub struct ParamsDuplicate;

fn main() {}
