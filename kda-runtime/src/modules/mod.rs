//! The module cache of a backend that loads kernel images: the images of several crates' image
//! sets by `(namespace, module)`, each loaded at most once, on the first lookup of one of its
//! entries, and one handle index per distinct `(namespace, module, entry, signature)`.
//!
//! A backend brings a [`ModuleLoader`], which turns one image into a module and finds an entry's
//! function in it; the cache does the rest, the same for every such backend: the CUDA backend is
//! a `cudarc` loader of [`ImageSet`]s over it, the emulation backend a `dlopen` loader of
//! [`EmulatedSet`]s (any [`ModuleSet`]).
//!
//! ```
//! use kda_runtime::modules::{LoadError, ModuleCache, ModuleLoader};
//! use kda_runtime::{ImageCoverage, ImageSet, KernelEntry, KernelImage, LookupError};
//!
//! /// Modules as their names, functions as their entry points' names.
//! struct Names;
//!
//! impl ModuleLoader for Names {
//!     type Set = ImageSet;
//!     type Module = &'static str;
//!     type Function = &'static str;
//!
//!     fn device(&self) -> &str {
//!         "a test"
//!     }
//!
//!     fn load(&self, image: &'static KernelImage) -> Result<&'static str, LoadError> {
//!         Ok(image.module)
//!     }
//!
//!     fn function(&self, _: &&'static str, entry: &KernelEntry, _: &str) -> Result<&'static str, LookupError> {
//!         Ok(entry.entry)
//!     }
//! }
//!
//! const NO_CODE: ImageCoverage = ImageCoverage { sass: &[], ptx: None };
//! // SAFETY: this loader loads no code: it hands out names.
//! static OURS: ImageSet = unsafe {
//!     ImageSet::from_build(
//!         "ours@0.1.0:kernels.toml",
//!         &[KernelImage { module: "gemm", fatbin: &[], coverage: NO_CODE, entries: &[] }],
//!         None,
//!     )
//! };
//! let cache = ModuleCache::new(Names, &[&OURS, &OURS])?;
//! let gemm = KernelEntry { namespace: OURS.namespace(), ..KernelEntry::named("gemm", "dense_gemm_bf16") };
//! let index = cache.lookup(&gemm)?;
//! assert_eq!(cache.lookup(&gemm)?, index);
//! assert_eq!(cache.function(index).unwrap().function, "dense_gemm_bf16");
//! // Another crate's `gemm` is not this one.
//! let theirs = KernelEntry { namespace: "theirs@0.1.0:kernels.toml", ..gemm };
//! assert!(matches!(cache.lookup(&theirs), Err(LookupError::ModuleNotCarried { .. })));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::{OnceLock, PoisonError, RwLock};

use crate::image::{exported_symbol, proved_signature};
use crate::{
    BackendError, BackendId, BuiltEntry, EmulatedModule, EmulatedSet, ImageSet, Incompatibility, KernelEntry,
    KernelHandle, KernelImage, LookupError, Signature,
};

/// One crate's loadable modules, by namespace: what a [`ModuleCache`] is built from.
pub trait ModuleSet: Sync + 'static {
    /// One module's loadable form.
    type Image: Sync + 'static;

    /// `<crate>@<version>:<manifest path>`, the namespace the set's tables resolve in.
    fn namespace(&self) -> &'static str;
    /// Its images, one per module.
    fn images(&self) -> &'static [Self::Image];
    /// The module an image holds.
    fn module(image: &Self::Image) -> &'static str;
    /// The entries the build proved in an image, with their signatures: the only signatures a
    /// lookup in it resolves with.
    fn entries(image: &Self::Image) -> &'static [BuiltEntry];
}

impl ModuleSet for ImageSet {
    type Image = KernelImage;

    fn namespace(&self) -> &'static str {
        ImageSet::namespace(self)
    }

    fn images(&self) -> &'static [KernelImage] {
        ImageSet::images(self)
    }

    fn module(image: &KernelImage) -> &'static str {
        image.module
    }

    fn entries(image: &KernelImage) -> &'static [BuiltEntry] {
        image.entries
    }
}

impl ModuleSet for EmulatedSet {
    type Image = EmulatedModule;

    fn namespace(&self) -> &'static str {
        EmulatedSet::namespace(self)
    }

    fn images(&self) -> &'static [EmulatedModule] {
        self.modules()
    }

    fn module(image: &EmulatedModule) -> &'static str {
        image.module
    }

    fn entries(image: &EmulatedModule) -> &'static [BuiltEntry] {
        image.entries
    }
}

/// Whether `sets` can be carried together: no `(namespace, module)` in two distinct sets (or
/// twice in one). A backend checks this before it opens a device, so the mistake is reported as
/// itself wherever it runs.
pub fn check_sets<S: ModuleSet>(sets: &[&'static S]) -> Result<(), DuplicateModule> {
    images_by_module(sets).map(drop)
}

/// Every image of `sets` by `(namespace, module)`; a set given twice counts once.
fn images_by_module<S: ModuleSet>(
    sets: &[&'static S],
) -> Result<Vec<(ModuleKey, &'static S::Image)>, DuplicateModule> {
    // The position of the set each (namespace, module) came from, to name both of a duplicate.
    let mut origin = HashMap::new();
    let mut images = Vec::new();
    for (position, set) in sets.iter().enumerate() {
        if sets[..position].iter().any(|earlier| std::ptr::eq(*earlier, *set)) {
            continue;
        }
        for image in set.images() {
            let key = (set.namespace(), S::module(image));
            match origin.entry(key) {
                Entry::Occupied(first) => {
                    let (namespace, module) = key;
                    return Err(DuplicateModule { namespace, module, sets: (*first.get(), position) });
                }
                Entry::Vacant(vacant) => vacant.insert(position),
            };
            images.push((key, image));
        }
    }
    Ok(images)
}

/// The image type a loader loads.
pub type Image<L> = <<L as ModuleLoader>::Set as ModuleSet>::Image;

/// How a backend turns kernel images into modules and finds functions in them.
pub trait ModuleLoader: Send + Sync {
    /// The sets of images this loader loads from.
    type Set: ModuleSet;
    /// A loaded module.
    type Module: Send + Sync;
    /// A function of a loaded module, ready to launch; cloned out of the cache for each launch.
    type Function: Clone + Send + Sync;

    /// The device the modules are loaded for, as errors name it ("CUDA device 0 (NVIDIA H200,
    /// sm_90)").
    fn device(&self) -> &str;

    /// Loads `image`, or says why it does not load here: its code does not run on this device
    /// ([`LoadError::Incompatible`], checked before anything is loaded), or the driver failed.
    /// The cache calls it at most once per image and keeps the outcome, failures included.
    fn load(&self, image: &'static Image<Self>) -> Result<Self::Module, LoadError>;

    /// The function of `entry` in `module`, exported under `symbol` (the build's name for it:
    /// a template instantiation's mangled name), checked against the entry's signature where the
    /// module can tell its parameters: [`LookupError::EntryNotInModule`] where the module has no
    /// such entry point, [`LookupError::SignatureMismatch`] where its parameters differ,
    /// [`LookupError::Failed`] where finding it failed.
    fn function(
        &self,
        module: &Self::Module,
        entry: &KernelEntry,
        symbol: &str,
    ) -> Result<Self::Function, LookupError>;
}

/// Why a module did not load. Kept by the cache, so every later lookup in the module answers
/// the same without loading it again.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// The image carries no code this device can run.
    #[error(transparent)]
    Incompatible(#[from] Incompatibility),
    /// The driver (or whatever loads the image) failed.
    #[error("{operation} failed: {message}")]
    Driver {
        /// What was being done: "loading module `gemm` (48,512 bytes)".
        operation: String,
        /// The driver's error.
        message: String,
    },
}

/// Two images of one module of one namespace given to one cache: which of its kernels a lookup
/// would find would be a guess.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DuplicateModule {
    /// The namespace.
    pub namespace: &'static str,
    /// The module.
    pub module: &'static str,
    /// The positions, among the sets given, of the set that carried it first and of the one that
    /// carried it again (the same where one set carries it twice).
    pub sets: (usize, usize),
}

impl std::fmt::Display for DuplicateModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self { namespace, module, sets: (first, again) } = self;
        if first == again {
            write!(
                f,
                "image set {first} (in the order given) carries module `{module}` of `{namespace}` twice"
            )
        } else {
            write!(
                f,
                "image sets {first} and {again} (in the order given) both carry module `{module}` of \
                 `{namespace}`: pass each crate's `KERNEL_IMAGES` once"
            )
        }
    }
}

impl std::error::Error for DuplicateModule {}

/// A function the cache issued a handle index for, and the entry it was found for: launches are
/// checked against that entry's signature.
#[derive(Clone, Debug)]
pub struct Resolved<F> {
    /// The loader's function.
    pub function: F,
    /// The entry it was looked up for.
    pub entry: KernelEntry,
}

/// The images of some image sets, their modules loaded lazily and at most once, and the
/// functions found in them by handle index.
pub struct ModuleCache<L: ModuleLoader> {
    loader: L,
    /// One slot per image, by `(namespace, module)`.
    modules: HashMap<ModuleKey, Slot<Image<L>, L::Module>>,
    functions: RwLock<Functions<L::Function>>,
}

/// An image and, once its first lookup loaded it, the outcome. `OnceLock` lets one thread load
/// it while the others asking wait for that outcome: a module is never loaded twice, even under
/// contention.
/// `(namespace, module)`.
type ModuleKey = (&'static str, &'static str);

struct Slot<I: 'static, M> {
    image: &'static I,
    loaded: OnceLock<Result<M, LoadError>>,
}

/// Whether two signatures are one contract, as a [`FunctionKey`] compares them: equal, whether
/// at one address or two (the build's proved copy and a table's).
fn same_contract(a: Option<&Signature>, b: Option<&Signature>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => std::ptr::eq(a, b) || a == b,
        (a, b) => a.is_none() && b.is_none(),
    }
}

/// What a handle index is issued for: one per distinct contract of one entry point.
type FunctionKey = (&'static str, &'static str, &'static str, Option<&'static Signature>);

struct Functions<F> {
    by_key: HashMap<FunctionKey, u32>,
    /// By handle index.
    table: Vec<Resolved<F>>,
}

impl<L: ModuleLoader> ModuleCache<L> {
    /// A cache of the images of `sets`, loading through `loader`. The same set given twice is
    /// carried once; two images of one `(namespace, module)` are an error naming both sets.
    pub fn new(loader: L, sets: &[&'static L::Set]) -> Result<Self, DuplicateModule> {
        let modules = images_by_module(sets)?
            .into_iter()
            .map(|(key, image)| (key, Slot { image, loaded: OnceLock::new() }))
            .collect();
        let functions = Functions { by_key: HashMap::new(), table: Vec::new() };
        Ok(Self { loader, modules, functions: RwLock::new(functions) })
    }

    /// The loader the modules are loaded with.
    pub fn loader(&self) -> &L {
        &self.loader
    }

    /// Whether the cache carries an image of `module` in `namespace` (lookups in it can still
    /// fail, when the image does not load).
    pub fn carries(&self, namespace: &str, module: &str) -> bool {
        self.modules.contains_key(&(namespace, module))
    }

    /// Whether the cache carries an image of a module named `module`, in any namespace.
    pub fn has_module(&self, module: &str) -> bool {
        self.modules.keys().any(|&(_, name)| name == module)
    }

    /// The handle index of `entry`, loading its module if this is the module's first lookup.
    /// The same index for every lookup of one entry point with one signature.
    pub fn lookup(&self, entry: &KernelEntry) -> Result<u32, LookupError> {
        let key = (entry.namespace, entry.module, entry.entry, entry.signature);
        if let Some(index) = self.functions.read().unwrap_or_else(PoisonError::into_inner).by_key.get(&key) {
            return Ok(*index);
        }
        let slot = self
            .modules
            .get(&(entry.namespace, entry.module))
            .ok_or_else(|| LookupError::module_not_carried(entry))?;
        let loaded = slot.loaded.get_or_init(|| self.loader.load(slot.image));
        let module = loaded.as_ref().map_err(|error| self.load_failure(entry, error))?;
        let symbol = exported_symbol(L::Set::entries(slot.image), entry);
        let function = self.loader.function(module, entry, symbol)?;
        // The launches of the handle are checked against the build's signature, never the
        // caller's: a kernel the module has, asked for under a signature the build did not prove
        // for it, does not resolve.
        let signature = proved_signature(L::Set::entries(slot.image), entry)
            .map_err(|reason| LookupError::SignatureMismatch { entry: Box::new(*entry), reason })?;
        let entry = &KernelEntry { signature, ..*entry };
        let mut functions = self.functions.write().unwrap_or_else(PoisonError::into_inner);
        // Another thread may have found the same function meanwhile: keep one index per key.
        if let Some(index) = functions.by_key.get(&key) {
            return Ok(*index);
        }
        let index = u32::try_from(functions.table.len()).map_err(|_| {
            LookupError::failed(
                entry,
                BackendError::Driver {
                    operation: format!(
                        "resolving `{}::{}` on {}",
                        entry.module,
                        entry.entry,
                        self.loader.device()
                    ),
                    source: "2^32 functions resolved already".into(),
                },
            )
        })?;
        functions.table.push(Resolved { function, entry: *entry });
        functions.by_key.insert(key, index);
        Ok(index)
    }

    /// The lookup error of `entry` in a module that did not load, for `error`.
    fn load_failure(&self, entry: &KernelEntry, error: &LoadError) -> LookupError {
        let device = self.loader.device();
        match error {
            LoadError::Incompatible(reason) => LookupError::Incompatible {
                namespace: entry.namespace.to_owned(),
                module: entry.module.to_owned(),
                device: device.to_owned(),
                reason: Box::new(*reason),
            },
            LoadError::Driver { operation, message } => LookupError::failed(
                entry,
                BackendError::Driver {
                    operation: format!("{operation} on {device}"),
                    source: message.clone().into(),
                },
            ),
        }
    }

    /// The function behind handle index `index`, and the entry it was found for.
    pub fn function(&self, index: u32) -> Option<Resolved<L::Function>> {
        self.functions.read().unwrap_or_else(PoisonError::into_inner).table.get(index as usize).cloned()
    }

    /// Whether `kernel` is the handle backend `backend` issues from this cache for `entry`,
    /// without looking it up: the function at its index was looked up under `entry`'s names and a
    /// signature equal to its own (the key [`lookup`](Self::lookup) finds the index by).
    pub fn is_handle_of(&self, backend: BackendId, kernel: KernelHandle, entry: &KernelEntry) -> bool {
        let functions = self.functions.read().unwrap_or_else(PoisonError::into_inner);
        let resolved = functions.table.get(kernel.index() as usize);
        kernel.backend() == backend
            && resolved.is_some_and(|resolved| {
                resolved.entry.names() == entry.names()
                    && same_contract(resolved.entry.signature, entry.signature)
            })
    }

    /// The function behind `kernel`, a handle that backend `backend` (described as `describe`
    /// in errors) issued from this cache: another backend's handle, or an index this cache never
    /// issued, is an `Err`.
    pub fn resolved(
        &self,
        backend: BackendId,
        describe: &str,
        kernel: KernelHandle,
    ) -> Result<Resolved<L::Function>, BackendError> {
        if kernel.backend() != backend {
            return Err(BackendError::ForeignResource {
                what: kernel.to_string(),
                backend: describe.to_owned(),
            });
        }
        self.function(kernel.index()).ok_or_else(|| BackendError::UnknownHandle {
            backend: describe.to_owned(),
            index: kernel.index(),
        })
    }
}

#[cfg(test)]
mod tests;
