//! Looking one entry point up, and telling "not found" from "failed".

use crate::{BackendError, GpuBackend, KernelEntry, KernelHandle};

/// Why a `module::entry` lookup returned no handle.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    /// The target does not carry the module (not built for it, not registered on it).
    #[error("module `{module}` is not built for this target")]
    ModuleNotCarried {
        /// The module.
        module: String,
    },
    /// The module is carried but has no such entry point.
    #[error("module `{module}` has no entry point `{entry}`")]
    EntryNotInModule {
        /// The module.
        module: String,
        /// The entry point that is not in it.
        entry: String,
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
    #[error("looking up `{module}::{entry}` failed: {source}")]
    Failed {
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
    /// Whether the target simply lacks the entry, as opposed to failing to look it up.
    pub fn is_not_found(&self) -> bool {
        matches!(self, LookupError::ModuleNotCarried { .. } | LookupError::EntryNotInModule { .. })
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
