//! What nvcc built of the library where it was present at build time (CI sets `NVCC` and
//! `KDA_REQUIRE_NVCC=1`): an image per module carrying every entry of the manifest, each proved
//! with the entry's signature, the C++ template instantiations under the mangled names the build
//! found in the images.

use kda_example_library::{KERNEL_IMAGES, KernelLibraryKernels};

#[test]
fn with_nvcc_every_entry_is_proved_and_each_template_instantiation_is_found_under_its_mangled_name() {
    let Some(nvcc) = option_env!("NVCC") else {
        // Without nvcc the set carries no image, and says why.
        assert!(KERNEL_IMAGES.images().is_empty(), "images without nvcc");
        assert!(KERNEL_IMAGES.missing().is_some(), "no reason for the missing images");
        return;
    };
    for entry in &KernelLibraryKernels::ENTRIES {
        let image = KERNEL_IMAGES.image(entry.module).unwrap_or_else(|| {
            panic!("no image of `{}` from {nvcc}: {:?}", entry.module, KERNEL_IMAGES.missing())
        });
        let built = image
            .entries
            .iter()
            .find(|built| built.entry == entry.entry)
            .unwrap_or_else(|| panic!("`{}` not among the entries of `{}`", entry.entry, entry.module));
        assert_eq!(built.signature, entry.signature, "`{}` proved with another signature", entry.entry);
        if entry.entry.contains('<') {
            // A template instantiation has no C name: the build found its mangled one.
            assert!(built.symbol.starts_with("_Z"), "`{}` exported as `{}`", entry.entry, built.symbol);
        } else {
            assert_eq!(built.symbol, entry.entry);
        }
    }
}
