//! A table of optional entries only resolves on a backend that carries none of them.
use kda_runtime::KernelTable;
use kda_runtime::record::RecordingBackend;

#[derive(KernelTable)]
#[kernel_table(manifest = "only_optional.toml")]
struct FastPaths;

fn main() {
    assert_eq!(FastPathsKernels::REQUIRED_ENTRY_POINTS, 0);
    assert_eq!(FastPathsKernels::OPTIONAL_ENTRY_POINTS, 2);
    let none = FastPathsKernels::resolve(&RecordingBackend::new()).unwrap();
    assert_eq!((none.batchm, none.smem), (None, None));
    let all = FastPathsKernels::resolve(&RecordingBackend::new().with_table::<FastPaths>()).unwrap();
    assert!(all.batchm.is_some() && all.smem.is_some());
}
