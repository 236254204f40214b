use kda_runtime::KernelTable;

#[derive(KernelTable)]
#[kernel_table(manifest = "several_errors.toml")]
pub struct SeveralErrors;

fn main() {}
