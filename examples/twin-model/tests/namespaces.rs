//! Two crates with a module `scale` exporting `scale_f32`, with different contracts, in one
//! backend: each crate's kernels live in the namespace of its manifest, on the CPU backend and in
//! the module cache of the backends that load images alike.

use std::sync::atomic::{AtomicUsize, Ordering};

use kda_example::{ScaleModel, ScaleModelKernels, scale_model};
use kda_example_twin::{TwinModel, TwinModelKernels, twin_model};
use kda_runtime::modules::{DuplicateModule, LoadError, ModuleCache, ModuleLoader};
use kda_runtime::{
    BackendError, BuiltEntry, GpuBackendExt, ImageCoverage, ImageSet, KernelEntry, KernelImage, KernelTable,
    LaunchGeometry, LookupError,
};

/// `kda-example`'s `scale` and the twin's `triple`: both `scale::scale_f32`.
const OURS: &KernelEntry = scale_model::scale::ENTRY;
const THEIRS: &KernelEntry = twin_model::triple::ENTRY;

#[test]
fn one_cpu_backend_runs_each_crates_own_scale() -> Result<(), BackendError> {
    let gpu = kda_example_twin::with_reference(kda_example::reference::cpu_backend());
    let ours = ScaleModelKernels::resolve(&gpu).expect("kda-example's table resolves");
    let theirs = TwinModelKernels::resolve(&gpu).expect("the twin's table resolves");
    assert_ne!(ours.scale, theirs.triple);
    let geometry = LaunchGeometry::linear(3, 256);
    let mut x = gpu.upload(&[1.0f32, 2.0, 3.0])?;
    ours.launch_scale(&gpu, geometry, scale_model::scale { x: x.view_mut().into(), n: 3, factor: 2.0 })?;
    assert_eq!(gpu.download::<f32>(&x)?, [2.0, 4.0, 6.0]);
    theirs.launch_triple(&gpu, geometry, twin_model::triple { x: x.view_mut().into(), n: 3 })?;
    assert_eq!(kda_example_twin::defines::FACTOR, 3);
    assert_eq!(gpu.download::<f32>(&x)?, [6.0, 12.0, 18.0]);
    Ok(())
}

/// Both crates' kernels themselves, each `scale_f32` of its own `kernels/scale.cu`, on one
/// emulated backend: the same launches as on the CPU, the same results.
#[cfg(feature = "emulation")]
#[test]
fn one_emulated_backend_runs_each_crates_own_cuda_scale() -> Result<(), BackendError> {
    let gpu = kda_runtime::emu::EmuBackend::new(&[
        &kda_example::EMULATED_KERNELS,
        &kda_example_twin::EMULATED_KERNELS,
    ])?;
    let ours = ScaleModelKernels::resolve(&gpu).expect("kda-example's table resolves");
    let theirs = TwinModelKernels::resolve(&gpu).expect("the twin's table resolves");
    let geometry = LaunchGeometry::linear(3, 256);
    let mut x = gpu.upload(&[1.0f32, 2.0, 3.0])?;
    ours.launch_scale(&gpu, geometry, scale_model::scale { x: x.view_mut().into(), n: 3, factor: 2.0 })?;
    assert_eq!(gpu.download::<f32>(&x)?, [2.0, 4.0, 6.0]);
    theirs.launch_triple(&gpu, geometry, twin_model::triple { x: x.view_mut().into(), n: 3 })?;
    assert_eq!(gpu.download::<f32>(&x)?, [6.0, 12.0, 18.0]);
    Ok(())
}

#[test]
fn entries_are_in_the_namespace_of_their_package_and_manifest() {
    // Both packages take the workspace's version.
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(OURS.namespace, format!("kda-example@{version}:kernels.toml"));
    assert_eq!(THEIRS.namespace, format!("kda-example-twin@{version}:kernels.toml"));
    assert_eq!((OURS.module, OURS.entry), (THEIRS.module, THEIRS.entry));
    assert!(ScaleModel::ENTRIES.iter().all(|entry| entry.namespace == OURS.namespace));
    assert!(TwinModel::ENTRIES.iter().all(|entry| entry.namespace == THEIRS.namespace));
}

#[test]
fn each_crates_images_are_in_its_tables_namespace() {
    assert_eq!(kda_example::KERNEL_IMAGES.namespace(), OURS.namespace);
    assert_eq!(kda_example_twin::KERNEL_IMAGES.namespace(), THEIRS.namespace);
}

/// A loader the test controls: a module is the image it was loaded from, a function that image
/// and the entry point asked for; it counts its loads.
#[derive(Default)]
struct Recording {
    loads: AtomicUsize,
}

impl ModuleLoader for Recording {
    type Set = ImageSet;
    type Module = &'static KernelImage;
    type Function = (&'static KernelImage, &'static str);

    fn device(&self) -> &str {
        "the test's loader"
    }

    fn load(&self, image: &'static KernelImage) -> Result<Self::Module, LoadError> {
        self.loads.fetch_add(1, Ordering::Relaxed);
        Ok(image)
    }

    fn function(
        &self,
        module: &Self::Module,
        entry: &KernelEntry,
        _: &str,
    ) -> Result<Self::Function, LookupError> {
        Ok((*module, entry.entry))
    }
}

/// A crate's image set as the cache is given it. Built without nvcc, a crate embeds no image:
/// then a stand-in in the crate's own namespace, with one `scale` image whose bytes are that
/// namespace and which proves `entry`'s signature, so the cache still holds two `scale`s to tell
/// apart by the real crates' namespaces.
fn carried(set: &'static ImageSet, entry: &KernelEntry) -> &'static ImageSet {
    if !set.images().is_empty() {
        return set;
    }
    let coverage = ImageCoverage { sass: &[], ptx: None };
    let entries = Box::leak(Box::new([BuiltEntry {
        entry: entry.entry,
        symbol: entry.entry,
        signature: entry.signature,
    }]));
    let fatbin = set.namespace().as_bytes();
    let images = Box::leak(Box::new([KernelImage { module: "scale", fatbin, coverage, entries }]));
    // SAFETY: `Recording` loads and launches nothing: it hands the image back.
    Box::leak(Box::new(unsafe { ImageSet::from_build(set.namespace(), images, None) }))
}

/// The image of `module` in `set`.
fn image(set: &'static ImageSet, module: &str) -> &'static KernelImage {
    set.images().iter().find(|image| image.module == module).expect("the set carries the module")
}

#[test]
fn one_module_cache_loads_each_crates_own_scale_image() -> Result<(), LookupError> {
    let (ours, theirs) =
        (carried(&kda_example::KERNEL_IMAGES, OURS), carried(&kda_example_twin::KERNEL_IMAGES, THEIRS));
    let cache =
        ModuleCache::new(Recording::default(), &[ours, theirs]).expect("two namespaces do not collide");
    let (our_index, their_index) = (cache.lookup(OURS)?, cache.lookup(THEIRS)?);
    assert_ne!(our_index, their_index);
    let function = |index| cache.function(index).expect("an issued index").function;
    let ((our_image, _), (their_image, _)) = (function(our_index), function(their_index));
    assert!(std::ptr::eq(our_image, image(ours, "scale")));
    assert!(std::ptr::eq(their_image, image(theirs, "scale")));
    assert_ne!(our_image.fatbin, their_image.fatbin);
    // Looked up again: the same indices, and no module loaded twice.
    assert_eq!((cache.lookup(OURS)?, cache.lookup(THEIRS)?), (our_index, their_index));
    assert_eq!(cache.loader().loads.load(Ordering::Relaxed), 2);
    Ok(())
}

#[test]
fn distinct_sets_in_one_namespace_are_refused() {
    let ours = carried(&kda_example::KERNEL_IMAGES, OURS);
    // The same set twice is carried once.
    assert!(ModuleCache::new(Recording::default(), &[ours, ours]).is_ok());
    // A copy at another address claims the same modules of the same namespace.
    let copy: &'static ImageSet = Box::leak(Box::new(*ours));
    let refused = ModuleCache::new(Recording::default(), &[ours, copy]).err().expect("a duplicate namespace");
    let first = ours.images()[0].module;
    assert_eq!(refused, DuplicateModule { namespace: OURS.namespace, module: first, sets: (0, 1) });
}
