//! Per-kernel code matches on the entry enum: an entry the manifest no longer has (renamed from
//! `gemv` to `gemv_batchm` here) is a compile error where the code names it, and a match that
//! leaves an entry out is one too.
use kda_runtime::KernelTable;

#[derive(KernelTable)]
#[kernel_table(manifest = "../pass/kernels.toml")]
pub struct SmallModel;

fn peak(entry: SmallModelEntry) -> f64 {
    match entry {
        SmallModelEntry::gemm | SmallModelEntry::gemv => 989.0,
        SmallModelEntry::recurrent => 67.0,
    }
}

fn flops(entry: SmallModelEntry) -> u64 {
    match entry {
        SmallModelEntry::gemm => 2,
        SmallModelEntry::recurrent => 7,
    }
}

fn main() {
    let _ = (peak(SmallModelEntry::gemm), flops(SmallModelEntry::gemm));
}
