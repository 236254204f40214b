use kda_runtime::KernelTable;

#[derive(KernelTable)]
#[kernel_table(manifest = "params_overflow.toml")]
pub struct ParamsOverflow;

fn main() {}
