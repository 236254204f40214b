//! `name` renames the generated struct; `table` picks a table whatever the type is called.
use kda_runtime::KernelTable;
use kda_runtime::record::RecordingBackend;

#[derive(KernelTable)]
#[kernel_table(manifest = "kernels.toml", table = "small_model", name = "SmallHandles")]
pub struct Small;

fn main() {
    assert_eq!(SmallHandles::ENTRY_POINTS, 3);
    assert_eq!(<Small as KernelTable>::ENTRIES[0].field, "gemm");
    let gpu = RecordingBackend::new().with_table::<Small>().without("dense_gemv_bf16_batchm", "dense_gemv_bf16_batchm");
    let handles: SmallHandles = <Small as KernelTable>::resolve(&gpu).unwrap();
    assert_eq!(handles.gemv_batchm, None);
}
