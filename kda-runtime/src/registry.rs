//! The kernels a host-side backend carries, by `(namespace, module, entry)`, and the handles it
//! issues for them: shared by the CPU backend and the recording backend.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicPtr, Ordering};

use crate::{BackendError, BackendId, KernelEntry, KernelHandle, LookupError, Signature};

/// One registered kernel: the entry it was registered for and what the backend keeps with it.
#[derive(Debug)]
pub(crate) struct Registered<K> {
    /// The entry, with the signature launches are checked against.
    pub entry: KernelEntry,
    pub kernel: K,
    /// A signature at another address found equal to the entry's: one table's signature may be
    /// copied per codegen unit, and comparing it by value at every lookup would cost more than
    /// the lookup itself.
    equal_seen: AtomicPtr<Signature>,
}

impl<K> Registered<K> {
    /// Whether `signature` is the contract this kernel was registered for. A kernel registered
    /// without one takes any (its launches can only be unchecked).
    fn takes(&self, signature: Option<&'static Signature>) -> bool {
        let (Some(registered), Some(asked)) = (self.entry.signature, signature) else {
            return self.entry.signature.is_none();
        };
        let address = std::ptr::from_ref(asked).cast_mut();
        if std::ptr::eq(registered, asked) || self.equal_seen.load(Ordering::Relaxed) == address {
            return true;
        }
        let equal = registered == asked;
        if equal {
            self.equal_seen.store(address, Ordering::Relaxed);
        }
        equal
    }
}

/// Kernels by name and by handle index.
#[derive(Debug)]
pub(crate) struct KernelRegistry<K> {
    backend: BackendId,
    /// (namespace, module) → entry → index into `kernels`.
    modules: BTreeMap<(&'static str, &'static str), BTreeMap<&'static str, u32>>,
    /// index → the kernel; `None` once removed, so a handle issued before the removal is refused
    /// instead of still launching it.
    kernels: Vec<Option<Registered<K>>>,
}

impl<K> KernelRegistry<K> {
    /// An empty registry issuing handles of `backend`.
    pub fn new(backend: BackendId) -> Self {
        Self { backend, modules: BTreeMap::new(), kernels: Vec::new() }
    }

    /// Carries `entry` with `kernel`, replacing what was registered under its namespace,
    /// module and entry point.
    pub fn insert(&mut self, entry: KernelEntry, kernel: K) {
        let next = u32::try_from(self.kernels.len()).unwrap_or(u32::MAX);
        let module = self.modules.entry((entry.namespace, entry.module)).or_default();
        let index = *module.entry(entry.entry).or_insert(next);
        let registered = Some(Registered { entry, kernel, equal_seen: AtomicPtr::default() });
        match self.kernels.get_mut(index as usize) {
            Some(slot) => *slot = registered,
            None => self.kernels.push(registered),
        }
    }

    /// No longer carries `module::entry`, in any namespace; a module left with no entry is no
    /// longer carried.
    pub fn remove(&mut self, module: &str, entry: &str) {
        let kernels = &mut self.kernels;
        self.modules.retain(|&(_, name), entries| {
            if name == module
                && let Some(index) = entries.remove(entry)
            {
                kernels[index as usize] = None;
            }
            !entries.is_empty()
        });
    }

    /// Whether any entry of a module named `module` is carried, in any namespace.
    pub fn has_module(&self, module: &str) -> bool {
        self.modules.keys().any(|&(_, name)| name == module)
    }

    /// The handle of `entry`, or which of module and entry is not carried, or that the kernel was
    /// registered with another signature.
    pub fn lookup(&self, entry: &KernelEntry) -> Result<KernelHandle, LookupError> {
        let entries = self
            .modules
            .get(&(entry.namespace, entry.module))
            .ok_or_else(|| LookupError::module_not_carried(entry))?;
        let index = *entries.get(entry.entry).ok_or_else(|| LookupError::entry_not_in_module(entry))?;
        if let Some(registered) = self.kernels.get(index as usize).and_then(Option::as_ref)
            && !registered.takes(entry.signature)
        {
            return Err(LookupError::SignatureMismatch {
                entry: Box::new(*entry),
                reason: format!(
                    "the kernel is carried for `{}` with other parameters",
                    registered.entry.path()
                ),
            });
        }
        Ok(KernelHandle::new(self.backend, index))
    }

    /// Whether `handle` is what [`lookup`](Self::lookup) gives for `entry`, without looking it up:
    /// this registry issued it, and the kernel at its index is carried under `entry`'s names and
    /// takes its signature.
    pub fn is_handle_of(&self, handle: KernelHandle, entry: &KernelEntry) -> bool {
        let registered = self.kernels.get(handle.index() as usize).and_then(Option::as_ref);
        handle.backend() == self.backend
            && registered.is_some_and(|registered| {
                registered.entry.names() == entry.names() && registered.takes(entry.signature)
            })
    }

    /// The kernel behind `handle`, if this registry issued it and still carries the kernel.
    pub fn get(&self, handle: KernelHandle, backend: &str) -> Result<&Registered<K>, BackendError> {
        if handle.backend() != self.backend {
            return Err(BackendError::ForeignResource {
                what: handle.to_string(),
                backend: backend.to_owned(),
            });
        }
        self.kernels
            .get(handle.index() as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| BackendError::UnknownHandle { backend: backend.to_owned(), index: handle.index() })
    }

    /// Every carried `module::entry`, followed by its namespace where it has one, by namespace,
    /// module and entry.
    pub fn names(&self) -> impl Iterator<Item = String> + '_ {
        self.modules.iter().flat_map(|((namespace, module), entries)| {
            entries.keys().map(move |entry| match *namespace {
                "" => format!("{module}::{entry}"),
                namespace => format!("{module}::{entry} ({namespace})"),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{AXPY, AXPY_SIGNATURE, EMPTY, signed};
    use crate::signature::{KernelParam, ScalarKind};

    /// A registry carrying `blas::axpy` (signed) and `blas::noop` (unsigned), kernels named by
    /// strings.
    fn registry() -> KernelRegistry<&'static str> {
        let mut registry = KernelRegistry::new(BackendId::fresh());
        registry.insert(AXPY, "axpy");
        registry.insert(KernelEntry::named("blas", "noop"), "noop");
        registry
    }

    /// A copy of `signature` at an address of its own.
    fn copy_of(signature: &Signature) -> &'static Signature {
        Box::leak(Box::new(*signature))
    }

    #[test]
    fn another_signature_is_a_mismatch_not_an_absent_kernel() {
        let registry = registry();
        for asked in [signed("blas", "axpy", &EMPTY), KernelEntry::named("blas", "axpy")] {
            let error = registry.lookup(&asked).unwrap_err();
            assert!(
                matches!(&error, LookupError::SignatureMismatch { entry, .. } if **entry == asked),
                "{error:?}"
            );
            assert!(!error.is_not_found());
            assert!(error.to_string().contains("carried for `test.axpy` with other parameters"), "{error}");
        }
        // A kernel carried without a signature takes any lookup (its launches stay unchecked).
        assert!(registry.lookup(&signed("blas", "noop", &AXPY_SIGNATURE)).is_ok());
        assert!(registry.lookup(&KernelEntry::named("blas", "noop")).is_ok());
    }

    #[test]
    fn an_equal_signature_at_another_address_is_the_same_contract() {
        let registry = registry();
        let handle = registry.lookup(&AXPY).unwrap();
        let (first, second) = (copy_of(&AXPY_SIGNATURE), copy_of(&AXPY_SIGNATURE));
        assert!(!std::ptr::eq(first, second));
        // Twice each, so the address remembered as equal is both set and used, and replaced.
        for signature in [first, first, second, second, first] {
            assert_eq!(registry.lookup(&signed("blas", "axpy", signature)).unwrap(), handle);
        }
        // Remembering an equal address lets no other contract through: not one parameter fewer,
        // nor `n` as a `u64`.
        let mut wider_n = AXPY_SIGNATURE.params.to_vec();
        wider_n[2] = KernelParam::scalar("n", ScalarKind::U64);
        let others = [
            Signature { params: &AXPY_SIGNATURE.params[..3], ..AXPY_SIGNATURE },
            Signature { params: wider_n.leak(), ..AXPY_SIGNATURE },
        ];
        for other in others {
            let error = registry.lookup(&signed("blas", "axpy", copy_of(&other)));
            assert!(matches!(error, Err(LookupError::SignatureMismatch { .. })), "{error:?}");
        }
        assert_eq!(registry.lookup(&signed("blas", "axpy", first)).unwrap(), handle);
    }

    #[test]
    fn handles_belong_to_the_registry_that_issued_them() {
        let (ours, theirs) = (registry(), registry());
        let (own, foreign) = (ours.lookup(&AXPY).unwrap(), theirs.lookup(&AXPY).unwrap());
        // Same index, other backend: not the same handle, and refused.
        assert_eq!(own.index(), foreign.index());
        assert_ne!(own, foreign);
        assert!(own.backend() < foreign.backend(), "ids grow");
        assert_eq!(ours.get(own, "ours").unwrap().kernel, "axpy");
        let refused = ours.get(foreign, "ours").unwrap_err();
        assert!(
            matches!(&refused, BackendError::ForeignResource { backend, .. } if backend == "ours"),
            "{refused:?}"
        );
        let unknown = ours.get(KernelHandle::new(own.backend(), 2), "ours");
        assert!(matches!(unknown, Err(BackendError::UnknownHandle { index: 2, .. })), "{unknown:?}");
    }

    #[test]
    fn a_handle_is_the_handle_of_exactly_the_entries_whose_lookup_gives_it() {
        let (mut ours, theirs) = (registry(), registry());
        let noop = KernelEntry::named("blas", "noop");
        let copy = signed("blas", "axpy", copy_of(&AXPY_SIGNATURE));
        let (axpy, noop_handle) = (ours.lookup(&AXPY).unwrap(), ours.lookup(&noop).unwrap());
        let foreign = theirs.lookup(&AXPY).unwrap();
        assert!(ours.is_handle_of(axpy, &AXPY) && ours.is_handle_of(axpy, &copy));
        assert!(!ours.is_handle_of(noop_handle, &AXPY), "another entry's handle");
        assert!(!ours.is_handle_of(foreign, &AXPY), "another registry's handle");
        assert!(!ours.is_handle_of(axpy, &signed("blas", "axpy", &EMPTY)), "another contract");
        // Every pairing answers as a lookup does.
        let asked = [
            AXPY,
            copy,
            signed("blas", "axpy", &EMPTY),
            KernelEntry { namespace: "other@1.0.0:kernels.toml", ..AXPY },
            noop,
            signed("blas", "noop", &AXPY_SIGNATURE),
        ];
        for handle in [axpy, noop_handle, foreign, KernelHandle::new(axpy.backend(), 7)] {
            for entry in &asked {
                let looked_up = ours.lookup(entry).ok() == Some(handle);
                assert_eq!(ours.is_handle_of(handle, entry), looked_up, "{handle} for {entry:?}");
            }
        }
        ours.remove("blas", "axpy");
        assert!(!ours.is_handle_of(axpy, &AXPY), "a retired handle");
    }

    #[test]
    fn inserting_again_keeps_the_handle_and_removing_retires_it() {
        let mut registry = registry();
        let axpy = registry.lookup(&AXPY).unwrap();
        registry.insert(AXPY, "axpy, again");
        assert_eq!(registry.lookup(&AXPY).unwrap(), axpy);
        assert_eq!(registry.get(axpy, "test").unwrap().kernel, "axpy, again");
        registry.insert(KernelEntry::named("other", "noop"), "other noop");
        assert_eq!(registry.names().collect::<Vec<_>>(), ["blas::axpy", "blas::noop", "other::noop"]);

        registry.remove("blas", "axpy");
        assert!(matches!(registry.get(axpy, "test"), Err(BackendError::UnknownHandle { .. })));
        assert!(matches!(registry.lookup(&AXPY), Err(LookupError::EntryNotInModule { .. })));
        registry.remove("blas", "noop");
        assert!(!registry.has_module("blas"));
        registry.insert(AXPY, "axpy, back");
        let back = registry.lookup(&AXPY).unwrap();
        assert_ne!(back, axpy);
        assert_eq!(registry.get(back, "test").unwrap().kernel, "axpy, back");
    }

    #[test]
    fn backend_ids_strictly_increase_and_never_repeat_across_threads() {
        let ids = std::thread::scope(|scope| {
            let threads =
                (0..4).map(|_| scope.spawn(|| (0..1000).map(|_| BackendId::fresh()).collect::<Vec<_>>()));
            threads.collect::<Vec<_>>().into_iter().map(|thread| thread.join().unwrap()).collect::<Vec<_>>()
        });
        for ids in &ids {
            assert!(ids.windows(2).all(|pair| pair[0] < pair[1]));
        }
        let mut all = ids.concat();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 4000);
    }
}
