//! Adding one line to `kernels.toml` (tests/compiletest.rs writes that copy of the one beside
//! this file) adds the field, the count and the lookup, with no other edit.
use kda_runtime::record::RecordingBackend;
use kda_runtime::{KernelEntry, KernelHandle, KernelTable};

#[derive(KernelTable)]
struct SmallModel;

#[derive(KernelTable)]
#[kernel_table(manifest = "../generated/grown.toml", table = "small_model", name = "GrownKernels")]
struct Grown;

fn main() {
    assert_eq!(GrownKernels::ENTRY_POINTS, SmallModelKernels::ENTRY_POINTS + 1);
    assert_eq!(GrownKernels::REQUIRED_ENTRY_POINTS, SmallModelKernels::REQUIRED_ENTRY_POINTS + 1);
    assert_eq!(GrownKernels::OPTIONAL_ENTRY_POINTS, SmallModelKernels::OPTIONAL_ENTRY_POINTS);

    let gpu = RecordingBackend::new().with_table::<Grown>();
    let grown = GrownKernels::resolve(&gpu).unwrap();
    let _: KernelHandle = grown.extra_kernel;
    let last = gpu.lookups().pop().unwrap();
    assert_eq!(last, ("kda_extra".to_owned(), "kda_extra_kernel".to_owned()));

    // A target built from the old manifest lacks it, and resolve says so. (Here the old manifest
    // is another file, so another namespace: its entries are carried in the grown one's, as a
    // build of the old version of the same manifest would carry them.)
    let old_target = SmallModelKernels::ENTRIES.iter().fold(RecordingBackend::new(), |gpu, entry| {
        gpu.with_entry(&KernelEntry { namespace: GrownKernels::NAMESPACE, ..*entry })
    });
    let error = GrownKernels::resolve(&old_target).unwrap_err();
    assert_eq!(error.missing().map(|e| e.field).collect::<Vec<_>>(), ["extra_kernel"]);
}
