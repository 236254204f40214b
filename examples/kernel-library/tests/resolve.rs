//! The library's table on a target without the bf16 scatter-add (an architecture before sm_80,
//! where `indexing.cu` declares no such kernel): the variant is optional, so the table resolves,
//! reports it absent by name, and its launches are refused while the f32 variant's run.

use kda_example_library::{KernelLibrary, KernelLibraryEntry, KernelLibraryKernels, kernel_library};
use kda_runtime::record::RecordingBackend;
use kda_runtime::{BackendError, Element, GpuBackendExt, LaunchGeometry, bf16, try_kernel};

#[test]
fn a_target_without_an_optional_variant_resolves_and_names_it_absent() {
    assert_eq!(
        KernelLibraryKernels::OPTIONAL_ENTRY_POINTS,
        1,
        "scatter_add_bf16 alone is optional: the f32 variant stays required"
    );
    let gpu = RecordingBackend::new().with_table::<KernelLibrary>().without("indexing", "scatter_add_bf16");
    let kernels = KernelLibraryKernels::resolve(&gpu).unwrap_or_else(|error| panic!("{error}"));
    assert!(kernels.scatter_add_bf16.is_none());
    // What a resolution report lists: each entry the target lacks, by its field (one per variant).
    let absent: Vec<&str> = KernelLibraryEntry::ALL
        .iter()
        .filter(|entry| try_kernel(&gpu, entry.entry()).unwrap_or_else(|error| panic!("{error}")).is_none())
        .map(|entry| entry.field())
        .collect();
    assert_eq!(absent, ["scatter_add_bf16"]);

    let error = launch_scatter_add(&gpu, &kernels, bf16::ONE).unwrap_err();
    assert!(matches!(error, BackendError::Absent { .. }), "{error}");
    assert!(error.to_string().contains("scatter_add_bf16"), "{error}");
    assert!(gpu.launched().is_empty());
    launch_scatter_add(&gpu, &kernels, 1.0f32).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(gpu.launched(), ["indexing::scatter_add_f32"]);
}

/// scatter_add of `T` on the recording backend: 4 rows of 2 `value`s into 2 rows.
fn launch_scatter_add<T: Element + kernel_library::scatter_add_type>(
    gpu: &RecordingBackend,
    kernels: &KernelLibraryKernels,
    value: T,
) -> Result<(), BackendError> {
    let (ids, src) = (gpu.upload(&[0u32, 1, 0, 1]).unwrap(), gpu.upload(&[value; 8]).unwrap());
    let mut dst = gpu.zeros::<T>(4).unwrap();
    let args = kernel_library::scatter_add {
        ids: ids.view().into(),
        src: src.view().into(),
        dst: dst.view_mut().into(),
        n: 4,
        d: 2,
    };
    // SAFETY: every id is a row of `dst` (2 rows of 2); the recording backend computes nothing.
    unsafe { kernels.launch_scatter_add::<T>(gpu, LaunchGeometry::linear(4, 32), args) }
}
