//! Kernel handles: small copyable tokens a backend issues for one entry.

use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{BackendError, KernelEntry};

/// Identifies one backend instance, so a handle or buffer is only ever used where it was issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BackendId(NonZeroU64);

impl BackendId {
    /// A fresh id, distinct from every other id handed out by this process.
    ///
    /// Ids are never reused: the counter is 64 bits and refuses to wrap (at a billion backends a
    /// second it would last five centuries), so a stale handle can never pass for another
    /// backend's.
    pub fn fresh() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let raw = NEXT
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |next| next.checked_add(1))
            .unwrap_or_else(|_| panic!("2^64 - 1 backend ids handed out: ids are never reused"));
        // The counter starts at 1 and never wraps, so it is never 0.
        Self(NonZeroU64::new(raw).unwrap_or(NonZeroU64::MAX))
    }
}

impl BackendId {
    /// The id's number, for names (a file, a message).
    pub(crate) fn number(self) -> u64 {
        self.0.get()
    }
}

impl std::fmt::Display for BackendId {
    /// `backend #4`, the form messages name a backend by where they know nothing else of it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "backend #{}", self.number())
    }
}

/// A resolved kernel entry point: which backend issued it and that backend's index for it.
///
/// The backend id is non-zero, so `Option<KernelHandle>` is as small as the handle. A handle is
/// meaningful only to the backend that issued it; backends refuse handles of another backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KernelHandle {
    backend: BackendId,
    index: u32,
}

impl KernelHandle {
    /// The handle `backend` issues for its kernel number `index`.
    pub fn new(backend: BackendId, index: u32) -> Self {
        Self { backend, index }
    }

    /// The backend that issued this handle.
    pub fn backend(self) -> BackendId {
        self.backend
    }

    /// The issuing backend's index for the kernel.
    pub fn index(self) -> u32 {
        self.index
    }
}

impl std::fmt::Display for KernelHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "kernel handle {} of {}", self.index, self.backend)
    }
}

/// What a generated launcher reads from its entry's field of the handles struct: a handle, or,
/// for an optional entry, a handle the target may lack. One spelling of the launcher serves both,
/// so the derive writes it once per table, not once per entry.
#[doc(hidden)]
pub trait FieldHandle: Copy {
    /// The handle to launch, or [`BackendError::Absent`] naming `entry()` where there is none.
    fn launch_handle(self, entry: impl FnOnce() -> KernelEntry) -> Result<KernelHandle, BackendError>;
}

impl FieldHandle for KernelHandle {
    #[inline]
    fn launch_handle(self, _: impl FnOnce() -> KernelEntry) -> Result<KernelHandle, BackendError> {
        Ok(self)
    }
}

impl FieldHandle for Option<KernelHandle> {
    #[inline]
    fn launch_handle(self, entry: impl FnOnce() -> KernelEntry) -> Result<KernelHandle, BackendError> {
        self.ok_or_else(|| BackendError::Absent { entry: Box::new(entry()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_of_handle_is_as_small_as_the_handle() {
        assert_eq!(size_of::<Option<KernelHandle>>(), size_of::<KernelHandle>());
        assert_eq!(size_of::<KernelHandle>(), 16);
    }

    #[test]
    fn a_handle_remembers_its_backend_and_index() {
        let a = BackendId::fresh();
        let b = BackendId::fresh();
        assert_ne!(a, b);
        assert!(b > a, "ids only grow");
        let handle = KernelHandle::new(b, 7);
        assert_eq!(handle.backend(), b);
        assert_eq!(handle.index(), 7);
        assert_ne!(KernelHandle::new(a, 7), handle);
        assert_eq!(KernelHandle::new(a, u32::MAX).index(), u32::MAX);
    }
}
