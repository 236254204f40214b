use kda_runtime::KernelTable;

#[derive(KernelTable)]
#[kernel_table(manifest = "bad_symbols.toml")]
pub struct BadSymbols;

fn main() {}
