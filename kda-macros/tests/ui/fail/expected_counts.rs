//! Counts the crate relies on, checked against the manifest where the assumption is written.
use kda_runtime::KernelTable;

#[derive(KernelTable)]
#[kernel_table(manifest = "../pass/kernels.toml", table = "small_model", entry_points = 2, required = 2, optional = 0)]
pub struct SmallModel;

fn main() {}
