use kda_runtime::KernelTable;

#[derive(KernelTable)]
#[kernel_table(manifest = "wrong_types.toml")]
pub struct WrongTypes;

fn main() {}
