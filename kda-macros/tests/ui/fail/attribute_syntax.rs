use kda_runtime::KernelTable;

#[derive(KernelTable)]
#[kernel_table(manifest)]
pub struct NoValue;

#[derive(KernelTable)]
#[kernel_table(manifest = kernels_toml)]
pub struct NotAString;

#[derive(KernelTable)]
#[kernel_table(name = "Two Words")]
pub struct BadName;

fn main() {}
