use kda_runtime::KernelTable;

#[derive(KernelTable)]
#[kernel_table(manifest = "../pass/kernels.toml", tabel = "small_model")]
pub struct SmallModel;

#[derive(KernelTable)]
#[kernel_table(manifest = "../pass/kernels.toml", manifest = "../pass/kernels.toml")]
pub struct Twice;

fn main() {}
