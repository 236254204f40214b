//! Kernel handles: small copyable tokens a backend issues for one `module::entry`.

use std::num::{NonZeroU32, NonZeroU64};
use std::sync::atomic::{AtomicU32, Ordering};

/// Identifies one backend instance, so a handle or buffer is only ever used where it was issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BackendId(NonZeroU32);

impl BackendId {
    /// A fresh id, distinct from every other id handed out by this process (until 2³² of them).
    pub fn fresh() -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(1);
        let raw = NEXT.fetch_add(1, Ordering::Relaxed);
        // Wrapping past u32::MAX lands on 0, which is not a valid id: skip it.
        Self(NonZeroU32::new(raw).unwrap_or(NonZeroU32::MIN))
    }
}

/// A resolved kernel entry point: which backend issued it and that backend's index for it.
///
/// It wraps a non-zero integer, so `Option<KernelHandle>` is as small as the handle and `None` is
/// 0 at the ABI level. A handle is meaningful only to the backend that issued it; backends refuse
/// handles of another backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct KernelHandle(NonZeroU64);

impl KernelHandle {
    /// The handle `backend` issues for its kernel number `index`.
    pub fn new(backend: BackendId, index: u32) -> Self {
        const HIGH_HALF: NonZeroU64 = NonZeroU64::new(1 << 32).unwrap();
        // The non-zero backend id in the high half keeps the whole handle non-zero.
        Self(NonZeroU64::from(backend.0).saturating_mul(HIGH_HALF) | u64::from(index))
    }

    /// The backend that issued this handle.
    pub fn backend(self) -> BackendId {
        let high = (self.0.get() >> 32) as u32;
        // Every handle is built by `new`, whose high half is a non-zero id.
        BackendId(NonZeroU32::new(high).unwrap_or(NonZeroU32::MIN))
    }

    /// The issuing backend's index for the kernel.
    pub fn index(self) -> u32 {
        self.0.get() as u32
    }

    /// The raw non-zero value, as it would cross an FFI boundary.
    pub fn get(self) -> NonZeroU64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_of_handle_is_as_small_as_the_handle() {
        assert_eq!(size_of::<Option<KernelHandle>>(), size_of::<KernelHandle>());
        assert_eq!(size_of::<KernelHandle>(), 8);
    }

    #[test]
    fn a_handle_remembers_its_backend_and_index() {
        let a = BackendId::fresh();
        let b = BackendId::fresh();
        assert_ne!(a, b);
        let handle = KernelHandle::new(b, 7);
        assert_eq!(handle.backend(), b);
        assert_eq!(handle.index(), 7);
        assert_ne!(KernelHandle::new(a, 7), handle);
        assert_eq!(KernelHandle::new(a, u32::MAX).index(), u32::MAX);
    }
}
