//! Every attribute key defaulted: `kernels.toml` (here: beside this file), table `small_model`
//! (the type's name in snake_case), struct `SmallModelKernels`.
use kda_runtime::record::RecordingBackend;
use kda_runtime::{KernelHandle, KernelTable};

#[derive(KernelTable)]
pub struct SmallModel;

fn main() {
    const _: () = assert!(SmallModelKernels::ENTRY_POINTS == 3);
    const _: () = assert!(SmallModelKernels::REQUIRED_ENTRY_POINTS == 2);
    const _: () = assert!(SmallModelKernels::OPTIONAL_ENTRY_POINTS == 1);
    assert_eq!(<SmallModel as KernelTable>::NAME, "small_model");
    assert_eq!(SmallModelKernels::ENTRIES[2].line, 5);
    let gpu = RecordingBackend::new().with_table::<SmallModel>();
    let kernels = SmallModelKernels::resolve(&gpu).unwrap();
    let _: KernelHandle = kernels.gemm;
    let _: Option<KernelHandle> = kernels.gemv_batchm;
    assert!(kernels.gemv_batchm.is_some());

    // The entry enum: one variant per entry, named as its field, in manifest order.
    use SmallModelEntry::{gemm, gemv_batchm, recurrent};
    assert_eq!(SmallModelEntry::ALL, [gemm, gemv_batchm, recurrent]);
    assert_eq!((recurrent.index(), recurrent.field(), recurrent.entry().line), (2, "recurrent", 5));
    assert_eq!(SmallModelEntry::from_field("gemv_batchm"), Some(gemv_batchm));
    assert_eq!(SmallModelEntry::from_field("gemv"), None);
    assert_eq!(kernels.handle(gemm), Some(kernels.gemm));
    assert_eq!(kernels.handle(gemv_batchm), kernels.gemv_batchm);
}
