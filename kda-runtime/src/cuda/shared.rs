//! The module caches of backends over callers' contexts ([`CudaBackend::on_stream`]): one per
//! context and list of image sets, shared by every such backend while one of them lives, with the
//! backend id the handles it issues carry.
//!
//! [`CudaBackend::on_stream`]: super::CudaBackend::on_stream

use std::sync::{Arc, Mutex, PoisonError, Weak};

use cudarc::driver::CudaContext;

use super::{CudaLoader, ModuleCache};
use crate::{BackendError, BackendId, ImageSet};

/// A cache some backend holds, and what it was made for.
struct Shared {
    /// The cudarc context, by address: while the cache lives it holds the context (its loader
    /// does), so no other context has this address.
    context: usize,
    /// The image sets, by address, in the caller's order.
    sets: Vec<usize>,
    id: BackendId,
    cache: Weak<ModuleCache<CudaLoader>>,
}

static CACHES: Mutex<Vec<Shared>> = Mutex::new(Vec::new());

/// The cache of `context` and `sets` and its backend id: the one a live backend holds, or the
/// one `make` makes (and an id of its own), kept for the next caller.
pub(super) fn modules(
    context: &Arc<CudaContext>,
    sets: &[&'static ImageSet],
    make: impl FnOnce() -> Result<Arc<ModuleCache<CudaLoader>>, BackendError>,
) -> Result<(BackendId, Arc<ModuleCache<CudaLoader>>), BackendError> {
    let key =
        (Arc::as_ptr(context) as usize, sets.iter().map(|set| std::ptr::from_ref(*set) as usize).collect());
    // A panic elsewhere while holding the lock left a list whose entries are each whole.
    let mut caches = CACHES.lock().unwrap_or_else(PoisonError::into_inner);
    // Entries whose backends are all gone: their contexts may be gone too, and their addresses
    // reused.
    caches.retain(|shared| shared.cache.strong_count() > 0);
    let found = caches.iter().find(|shared| (shared.context, &shared.sets) == (key.0, &key.1));
    if let Some(cache) = found.and_then(|shared| Some((shared.id, shared.cache.upgrade()?))) {
        return Ok(cache);
    }
    let (id, cache) = (BackendId::fresh(), make()?);
    caches.push(Shared { context: key.0, sets: key.1, id, cache: Arc::downgrade(&cache) });
    Ok((id, cache))
}
