//! The CUDA backend where there may be no GPU: it answers with an `Err`, never a panic, and the
//! binary carries an image of every module the table lists (when nvcc was there to build them).
#![cfg(feature = "cuda")]

use kda::kernels::{Glm5NextKdaKernels, KERNEL_IMAGES};
use kda_runtime::BackendError;
use kda_runtime::cuda::CudaBackend;

#[test]
fn the_backend_is_an_err_exactly_where_the_driver_has_no_device() {
    match (CudaBackend::device_count(), CudaBackend::new(0, &[&KERNEL_IMAGES])) {
        (
            Err(BackendError::Unavailable { reason, .. }),
            Err(BackendError::Unavailable { reason: again, .. }),
        ) => {
            assert_eq!(reason, again);
            assert!(reason.contains("libcuda") || reason.contains("cuInit"), "{reason}");
        }
        (Ok(0), Err(BackendError::Unavailable { reason, .. })) => {
            assert!(reason.contains("no CUDA device"), "{reason}")
        }
        (Ok(count), Ok(gpu)) if count > 0 => {
            use kda_runtime::GpuBackend;
            assert!(gpu.describe().starts_with("CUDA device 0 ("), "{}", gpu.describe());
        }
        (count, gpu) => panic!("device_count {count:?} disagrees with new: {:?}", gpu.map(|_| "a backend")),
    }
}

#[test]
fn a_device_that_does_not_exist_is_an_err() {
    assert!(matches!(CudaBackend::new(4096, &[&KERNEL_IMAGES]), Err(BackendError::Unavailable { .. })));
}

#[test]
fn two_sets_carrying_one_module_are_refused_as_such_with_or_without_a_gpu() {
    // Another set of this crate's namespace with its first module: which `gemm` a lookup would
    // find would be a guess. Checked before the device is opened, so a machine without a GPU
    // reports this mistake, not its missing driver.
    // SAFETY: the set is refused (or, without nvcc, carried and never looked up) before any of
    // its images is loaded.
    static AGAIN: kda_runtime::ImageSet = unsafe {
        kda_runtime::ImageSet::from_build(
            KERNEL_IMAGES.namespace(),
            &[kda_runtime::KernelImage {
                module: "gemm",
                fatbin: &[],
                coverage: kda_runtime::ImageCoverage { sass: &[], ptx: None },
                entries: &[],
            }],
            None,
        )
    };
    match CudaBackend::new(0, &[&KERNEL_IMAGES, &AGAIN]) {
        Err(BackendError::DuplicateModule(duplicate)) if !KERNEL_IMAGES.images().is_empty() => {
            assert_eq!((duplicate.module, duplicate.sets), ("gemm", (0, 1)));
        }
        // Built without nvcc: this crate's set is empty, so only `AGAIN` carries `gemm`.
        Err(BackendError::Unavailable { .. }) | Ok(_) if KERNEL_IMAGES.images().is_empty() => {}
        other => panic!("expected a duplicate module, got {:?}", other.map(|_| "a backend")),
    }
}

/// Where `bytes` contains `needle`.
fn contains(bytes: &[u8], needle: &[u8]) -> bool {
    bytes.windows(needle.len()).any(|window| window == needle)
}

#[test]
fn the_embedded_images_cover_every_entry_of_the_table() {
    if let Some(why) = KERNEL_IMAGES.missing() {
        // Built without nvcc (CI builds with it, KDA_REQUIRE_NVCC=1): no image, and why.
        assert!(KERNEL_IMAGES.images().is_empty());
        assert!(why.contains("nvcc"), "{why}");
        return;
    }
    for entry in &Glm5NextKdaKernels::ENTRIES {
        let image = KERNEL_IMAGES
            .image(entry.module)
            .unwrap_or_else(|| panic!("no image of module `{}`", entry.module));
        // Every fatbin starts with the fatbin magic 0xBA55ED50 (little-endian).
        assert_eq!(image.fatbin[..4], [0x50, 0xED, 0x55, 0xBA], "{}", entry.module);
        assert!(
            contains(image.fatbin, entry.entry.as_bytes()),
            "`{}` not in the image of `{}`",
            entry.entry,
            entry.module
        );
    }
}
