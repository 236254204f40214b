use kda_runtime::KernelTable;

#[derive(KernelTable)]
#[kernel_table(manifest = "params_float_extent.toml")]
pub struct ParamsFloatExtent;

fn main() {}
