//! Looking one entry point up, and telling "not found" from "failed".

use std::fmt;

use crate::{BackendError, GpuBackend, Incompatibility, KernelEntry, KernelHandle};

/// Why a `(namespace, module, entry)` lookup returned no handle. Messages name the namespace
/// whenever the entry has one, since a backend may carry a module of the same name for another
/// crate.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    /// The target does not carry the module (not built for it, not registered on it).
    #[error("{} is not built for this target", Module(namespace, module))]
    ModuleNotCarried {
        /// The namespace the module was looked for in.
        namespace: String,
        /// The module.
        module: String,
    },
    /// The module is carried but has no such entry point.
    #[error("{} has no entry point `{entry}`", Module(namespace, module))]
    EntryNotInModule {
        /// The module's namespace.
        namespace: String,
        /// The module.
        module: String,
        /// The entry point that is not in it.
        entry: String,
    },
    /// The module's image carries no code this device can run: built for other architectures,
    /// or PTX too new for the driver. A failure, never "absent": the build must be fixed.
    #[error("{} does not load on {device}: {reason}", Module(namespace, module))]
    Incompatible {
        /// The module's namespace.
        namespace: String,
        /// The module.
        module: String,
        /// The device, as the backend describes it.
        device: String,
        /// What the image carries and why the device cannot use it.
        reason: Box<Incompatibility>,
    },
    /// The kernel is there, but its parameters are not the entry's signature (a stale image, or
    /// a kernel registered for another signature). Never "absent".
    #[error("`{}::{}` does not take the parameters `{}` declares: {reason}", entry.module, entry.entry, entry.path())]
    SignatureMismatch {
        /// The entry looked up.
        entry: Box<KernelEntry>,
        /// What differs.
        reason: String,
    },
    /// The lookup itself failed: the module does not load, the driver failed. Never "absent".
    #[error("looking up `{module}::{entry}`{} failed: {source}", Namespace(namespace))]
    Failed {
        /// The module's namespace.
        namespace: String,
        /// The module.
        module: String,
        /// The entry point.
        entry: String,
        /// The backend's error.
        #[source]
        source: Box<BackendError>,
    },
}

impl LookupError {
    /// Whether the target simply lacks the entry, as opposed to failing to look it up (an
    /// incompatible image is a failure: the build must be fixed, not a fallback chosen).
    pub fn is_not_found(&self) -> bool {
        matches!(self, LookupError::ModuleNotCarried { .. } | LookupError::EntryNotInModule { .. })
    }

    /// "Module not carried" for `entry`.
    pub(crate) fn module_not_carried(entry: &KernelEntry) -> Self {
        LookupError::ModuleNotCarried {
            namespace: entry.namespace.to_owned(),
            module: entry.module.to_owned(),
        }
    }

    /// "Entry not in module" for `entry`.
    pub(crate) fn entry_not_in_module(entry: &KernelEntry) -> Self {
        LookupError::EntryNotInModule {
            namespace: entry.namespace.to_owned(),
            module: entry.module.to_owned(),
            entry: entry.entry.to_owned(),
        }
    }

    /// A failed lookup of `entry`, for `source`.
    pub(crate) fn failed(entry: &KernelEntry, source: BackendError) -> Self {
        LookupError::Failed {
            namespace: entry.namespace.to_owned(),
            module: entry.module.to_owned(),
            entry: entry.entry.to_owned(),
            source: Box::new(source),
        }
    }
}

/// `module `gemm``, or `module `gemm` of `kda@0.1.0:kernels.toml`` where there is a namespace.
struct Module<'a>(&'a str, &'a str);

impl fmt::Display for Module<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "module `{}`{}", self.1, Namespace(self.0))
    }
}

/// ` of `kda@0.1.0:kernels.toml``, or nothing for the empty namespace.
struct Namespace<'a>(&'a str);

impl fmt::Display for Namespace<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() { Ok(()) } else { write!(f, " of `{}`", self.0) }
    }
}

/// Looks up an entry a target may lack: `Ok(None)` only when the backend answers "not found";
/// any other failure stays an error, so a broken kernel image never silently selects a fallback.
#[inline]
pub fn try_kernel(
    gpu: &(impl GpuBackend + ?Sized),
    entry: &KernelEntry,
) -> Result<Option<KernelHandle>, LookupError> {
    match gpu.lookup(entry) {
        Ok(handle) => Ok(Some(handle)),
        Err(error) if error.is_not_found() => Ok(None),
        Err(error) => Err(error),
    }
}
