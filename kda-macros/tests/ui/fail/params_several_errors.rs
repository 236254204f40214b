use kda_runtime::KernelTable;

#[derive(KernelTable)]
#[kernel_table(manifest = "params_several_errors.toml")]
pub struct ParamsSeveralErrors;

fn main() {}
