use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::Duration;

use super::*;
use crate::fixtures::{AXPY_SIGNATURE, EMPTY};
use crate::{CudaArch, ImageCoverage};

const NO_CODE: ImageCoverage = ImageCoverage { sass: &[], ptx: None };

/// What the build proved of every module: `a` under two signatures (two tables list it), `b`
/// without one, and a template instantiation exported under its mangled name.
const PROVED: &[BuiltEntry] = &[
    BuiltEntry { entry: "a", symbol: "a", signature: Some(&AXPY_SIGNATURE) },
    BuiltEntry { entry: "a", symbol: "a", signature: Some(&EMPTY) },
    BuiltEntry { entry: "b", symbol: "b", signature: None },
    BuiltEntry { entry: "c<float>", symbol: "_Z1cIfEvv", signature: None },
];

const fn image(module: &'static str) -> KernelImage {
    KernelImage { module, fatbin: &[], coverage: NO_CODE, entries: PROVED }
}

/// A set as the build would write it. The test loader loads no code, so any set is safe to it.
const fn set(
    namespace: &'static str,
    images: &'static [KernelImage],
    missing: Option<&'static str>,
) -> ImageSet {
    // SAFETY: `Recording` loads nothing and launches nothing.
    unsafe { ImageSet::from_build(namespace, images, missing) }
}

static OURS: ImageSet =
    set("ours@0.1.0:kernels.toml", &[image("gemm"), image("norm"), image("broken"), image("sm100")], None);
static THEIRS: ImageSet = set("theirs@2.0.0:kernels.toml", &[image("gemm")], None);
/// Built without nvcc: carries nothing.
static NONE_BUILT: ImageSet = set("bare@0.1.0:kernels.toml", &[], Some("nvcc was not found"));

/// Why `broken` does not load, and `sm100`'s coverage, which does not run on the test's device.
const BROKEN: &str = "CUDA_ERROR_INVALID_IMAGE";
const SM100_ONLY: ImageCoverage = ImageCoverage { sass: &[CudaArch::new(10, 0)], ptx: None };

/// A loader that counts its loads per image, sleeps inside each to widen any race, fails
/// `broken` and finds `sm100` incompatible; every module has the entry points `a` and `b`.
#[derive(Default)]
struct Recording {
    /// Loads per image, by the image's address (one per `(namespace, module)`).
    loads: Mutex<BTreeMap<usize, usize>>,
    functions: AtomicUsize,
}

impl Recording {
    fn loads_of(&self, image: &'static KernelImage) -> usize {
        self.loads.lock().unwrap().get(&std::ptr::from_ref(image).addr()).copied().unwrap_or(0)
    }

    fn total_loads(&self) -> usize {
        self.loads.lock().unwrap().values().sum()
    }
}

impl ModuleLoader for Recording {
    type Set = ImageSet;
    type Module = &'static str;
    /// The module and the symbol the function was found under.
    type Function = (&'static str, String);

    fn device(&self) -> &str {
        "CUDA device 0 (NVIDIA H200, sm_90)"
    }

    fn load(&self, image: &'static KernelImage) -> Result<&'static str, LoadError> {
        *self.loads.lock().unwrap().entry(std::ptr::from_ref(image).addr()).or_default() += 1;
        std::thread::sleep(Duration::from_millis(20));
        match image.module {
            "broken" => Err(LoadError::Driver {
                operation: format!("loading module `{}`", image.module),
                message: BROKEN.to_owned(),
            }),
            "sm100" => Err(SM100_ONLY.loadable_on((9, 0), (13, 0)).unwrap_err().into()),
            module => Ok(module),
        }
    }

    fn function(
        &self,
        module: &&'static str,
        entry: &KernelEntry,
        symbol: &str,
    ) -> Result<Self::Function, LookupError> {
        self.functions.fetch_add(1, Ordering::Relaxed);
        match symbol {
            "a" | "b" | "_Z1cIfEvv" => Ok((module, symbol.to_owned())),
            _ => Err(LookupError::entry_not_in_module(entry)),
        }
    }
}

/// `module::entry` of `set`'s namespace.
fn entry(set: &ImageSet, module: &'static str, entry: &'static str) -> KernelEntry {
    KernelEntry { namespace: set.namespace(), ..KernelEntry::named(module, entry) }
}

fn cache() -> ModuleCache<Recording> {
    ModuleCache::new(Recording::default(), &[&OURS, &THEIRS, &NONE_BUILT]).unwrap()
}

#[test]
fn threads_released_together_load_each_module_once_and_share_handle_indices() {
    const THREADS: usize = 64;
    let cache = cache();
    let entries = [
        entry(&OURS, "gemm", "a"),
        entry(&OURS, "gemm", "b"),
        entry(&OURS, "norm", "a"),
        entry(&THEIRS, "gemm", "a"),
    ];
    let barrier = Barrier::new(THREADS);
    let indices: Vec<Vec<u32>> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..THREADS)
            .map(|thread| {
                let (cache, barrier, entries) = (&cache, &barrier, &entries);
                scope.spawn(move || {
                    barrier.wait();
                    // Each thread in its own order, so every entry is somebody's first lookup.
                    let mut indices = vec![0; entries.len()];
                    for step in 0..entries.len() {
                        let which = (thread + step) % entries.len();
                        indices[which] = cache.lookup(&entries[which]).unwrap();
                    }
                    indices
                })
            })
            .collect();
        threads.into_iter().map(|thread| thread.join().unwrap()).collect()
    });
    let loader = cache.loader();
    for image in [&OURS.images()[0], &OURS.images()[1], &THEIRS.images()[0]] {
        assert_eq!(loader.loads_of(image), 1, "{}", image.module);
    }
    assert_eq!(loader.total_loads(), 3);
    assert!(indices.iter().all(|these| *these == indices[0]), "{indices:?}");
    let mut distinct = indices[0].clone();
    distinct.sort();
    assert_eq!(distinct, [0, 1, 2, 3], "one index per entry, no index skipped");
    for (entry, index) in entries.iter().zip(&indices[0]) {
        let resolved = cache.function(*index).unwrap();
        assert_eq!(resolved.entry, *entry);
        assert_eq!(resolved.function, (entry.module, entry.entry.to_owned()));
    }
}

#[test]
fn a_failed_load_is_kept_and_answered_again_without_loading_again() {
    let cache = cache();
    let broken = entry(&OURS, "broken", "a");
    for _ in 0..3 {
        let error = cache.lookup(&broken).unwrap_err();
        assert!(!error.is_not_found());
        assert_eq!(
            error.to_string(),
            "looking up `broken::a` of `ours@0.1.0:kernels.toml` failed: loading module `broken` on CUDA \
             device 0 (NVIDIA H200, sm_90) failed: CUDA_ERROR_INVALID_IMAGE"
        );
    }
    // Another entry of the module gets the same answer from the same, single load.
    assert!(matches!(cache.lookup(&entry(&OURS, "broken", "b")), Err(LookupError::Failed { .. })));
    assert_eq!(cache.loader().loads_of(&OURS.images()[2]), 1);
    assert_eq!(cache.loader().functions.load(Ordering::Relaxed), 0);
}

#[test]
fn an_incompatible_image_is_kept_as_such_naming_the_module_device_and_code() {
    let cache = cache();
    for name in ["a", "b", "a"] {
        let error = cache.lookup(&entry(&OURS, "sm100", name)).unwrap_err();
        let LookupError::Incompatible { ref namespace, ref module, ref device, ref reason } = error else {
            panic!("{error:?}");
        };
        assert_eq!((namespace.as_str(), module.as_str()), (OURS.namespace(), "sm100"));
        assert_eq!(device, "CUDA device 0 (NVIDIA H200, sm_90)");
        assert_eq!(**reason, Incompatibility::NoCode { device: CudaArch::new(9, 0), image: SM100_ONLY });
        assert!(!error.is_not_found(), "an image built for other devices is no reason to fall back");
        assert_eq!(
            error.to_string(),
            "module `sm100` of `ours@0.1.0:kernels.toml` does not load on CUDA device 0 (NVIDIA H200, sm_90): \
             no SASS for sm_90 and no PTX it can use: the image carries SASS for sm_100 only"
        );
    }
    assert_eq!(cache.loader().loads_of(&OURS.images()[3]), 1);
}

#[test]
fn two_sets_modules_of_one_name_are_told_apart_by_namespace() {
    let cache = cache();
    let ours = cache.lookup(&entry(&OURS, "gemm", "a")).unwrap();
    let theirs = cache.lookup(&entry(&THEIRS, "gemm", "a")).unwrap();
    assert_ne!(ours, theirs);
    assert_eq!(cache.loader().loads_of(&OURS.images()[0]), 1);
    assert_eq!(cache.loader().loads_of(&THEIRS.images()[0]), 1);
    assert!(cache.carries(THEIRS.namespace(), "gemm"));
    assert!(!cache.carries(THEIRS.namespace(), "norm"));
    assert!(cache.has_module("norm"));
    // Neither is the `gemm` of a namespace the cache was not given, nor of the empty one.
    for namespace in [NONE_BUILT.namespace(), ""] {
        let elsewhere = KernelEntry { namespace, ..KernelEntry::named("gemm", "a") };
        let error = cache.lookup(&elsewhere).unwrap_err();
        assert!(matches!(error, LookupError::ModuleNotCarried { .. }), "{error:?}");
    }
    let absent = cache.lookup(&entry(&THEIRS, "gemm", "c")).unwrap_err();
    assert_eq!(absent.to_string(), "module `gemm` of `theirs@2.0.0:kernels.toml` has no entry point `c`");
    assert!(absent.is_not_found());
}

#[test]
fn a_template_instantiation_is_loaded_under_the_symbol_the_build_found() {
    let cache = cache();
    let index = cache.lookup(&entry(&OURS, "gemm", "c<float>")).unwrap();
    assert_eq!(cache.function(index).unwrap().function, ("gemm", "_Z1cIfEvv".to_owned()));
}

#[test]
fn one_index_per_distinct_signature_of_an_entry_point() {
    let cache = cache();
    let plain = entry(&OURS, "gemm", "a");
    let signed = KernelEntry { signature: Some(&AXPY_SIGNATURE), ..plain };
    let other = KernelEntry { signature: Some(&EMPTY), ..plain };
    let same = KernelEntry { signature: Some(Box::leak(Box::new(AXPY_SIGNATURE))), ..plain };
    let indices = [plain, signed, other, same].map(|entry| cache.lookup(&entry).unwrap());
    assert_eq!(indices, [0, 1, 2, 1], "an equal signature at another address is the same contract");
    assert_eq!(cache.function(2).unwrap().entry.signature, Some(&EMPTY));
    assert!(cache.function(3).is_none());
    // The handle keeps the build's signature, not the caller's equal copy.
    let kept = cache.function(1).unwrap().entry.signature.unwrap();
    assert!(std::ptr::eq(kept, &AXPY_SIGNATURE));
}

#[test]
fn a_handle_is_the_handle_of_exactly_the_entries_whose_lookup_gives_it() {
    let (cache, ours, theirs) = (cache(), BackendId::fresh(), BackendId::fresh());
    let plain = entry(&OURS, "gemm", "a");
    let signed = KernelEntry { signature: Some(&AXPY_SIGNATURE), ..plain };
    let copy = KernelEntry { signature: Some(Box::leak(Box::new(AXPY_SIGNATURE))), ..plain };
    let asked = [
        plain,
        signed,
        copy,
        KernelEntry { signature: Some(&EMPTY), ..plain },
        entry(&OURS, "gemm", "b"),
        entry(&OURS, "norm", "a"),
        entry(&THEIRS, "gemm", "a"),
    ];
    let issued = asked.map(|entry| KernelHandle::new(ours, cache.lookup(&entry).unwrap()));
    assert!(cache.is_handle_of(ours, issued[1], &signed) && cache.is_handle_of(ours, issued[1], &copy));
    assert!(
        !cache.is_handle_of(ours, issued[0], &signed),
        "the same entry point's handle for another contract"
    );
    assert!(!cache.is_handle_of(ours, issued[5], &plain), "the same entry point in another module");
    assert!(!cache.is_handle_of(ours, issued[6], &plain), "the same module in another namespace");
    assert!(!cache.is_handle_of(theirs, issued[1], &signed), "another backend's handle");
    // Every pairing answers as a lookup does, an index never issued included.
    for handle in issued.into_iter().chain([KernelHandle::new(ours, 99)]) {
        for entry in &asked {
            let looked_up = cache.lookup(entry).ok() == Some(handle.index());
            assert_eq!(cache.is_handle_of(ours, handle, entry), looked_up, "{handle} for {entry}");
        }
    }
}

#[test]
fn a_signature_the_build_did_not_prove_does_not_resolve() {
    let cache = cache();
    let forged = Box::leak(Box::new(Signature { requires: &[], ..AXPY_SIGNATURE }));
    for entry in [
        KernelEntry { signature: Some(forged), ..entry(&OURS, "gemm", "a") },
        KernelEntry { signature: Some(&AXPY_SIGNATURE), ..entry(&OURS, "gemm", "b") },
    ] {
        match cache.lookup(&entry) {
            Err(LookupError::SignatureMismatch { reason, .. }) => {
                assert!(reason.contains("not the one the build proved"), "{reason}")
            }
            other => panic!("{entry} resolved with a signature the build did not prove: {other:?}"),
        }
    }
    // A kernel the module lacks is absent, whatever signature it is asked for with.
    let absent = KernelEntry { signature: Some(&AXPY_SIGNATURE), ..entry(&OURS, "gemm", "c") };
    assert!(cache.lookup(&absent).unwrap_err().is_not_found());
}

#[test]
fn one_module_in_two_distinct_sets_is_an_error_naming_both() {
    static AGAIN: ImageSet = set("ours@0.1.0:kernels.toml", &[image("norm")], None);
    let error = ModuleCache::new(Recording::default(), &[&THEIRS, &OURS, &AGAIN]).err().unwrap();
    assert_eq!(error, DuplicateModule { namespace: OURS.namespace(), module: "norm", sets: (1, 2) });
    assert_eq!(
        error.to_string(),
        "image sets 1 and 2 (in the order given) both carry module `norm` of `ours@0.1.0:kernels.toml`: \
         pass each crate's `KERNEL_IMAGES` once"
    );
    // One set listing a module twice is refused the same way.
    static TWICE: ImageSet = set("twice@0.1.0:kernels.toml", &[image("gemm"), image("gemm")], None);
    let error = ModuleCache::new(Recording::default(), &[&TWICE]).err().unwrap();
    assert_eq!(error.sets, (0, 0));
    assert_eq!(
        error.to_string(),
        "image set 0 (in the order given) carries module `gemm` of `twice@0.1.0:kernels.toml` twice"
    );
}

#[test]
fn the_same_set_given_twice_is_carried_once() {
    let cache = ModuleCache::new(Recording::default(), &[&OURS, &THEIRS, &OURS]).unwrap();
    let gemm = entry(&OURS, "gemm", "a");
    assert_eq!(cache.lookup(&gemm).unwrap(), 0);
    assert_eq!(cache.loader().total_loads(), 1);
}
