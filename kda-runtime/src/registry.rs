//! The kernels a host-side backend carries, by `(module, entry)`, and the handles it issues for
//! them: shared by the CPU backend and the test fake.

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
    /// module → entry → index into `kernels`.
    modules: BTreeMap<&'static str, BTreeMap<&'static str, u32>>,
    /// index → the kernel; `None` once removed, so a handle issued before the removal is refused
    /// instead of still launching it.
    kernels: Vec<Option<Registered<K>>>,
}

impl<K> KernelRegistry<K> {
    /// An empty registry issuing handles of `backend`.
    pub fn new(backend: BackendId) -> Self {
        Self { backend, modules: BTreeMap::new(), kernels: Vec::new() }
    }

    /// Carries `entry` with `kernel`, replacing what was registered under its `module::entry`.
    pub fn insert(&mut self, entry: KernelEntry, kernel: K) {
        let next = u32::try_from(self.kernels.len()).unwrap_or(u32::MAX);
        let index = *self.modules.entry(entry.module).or_default().entry(entry.entry).or_insert(next);
        let registered = Some(Registered { entry, kernel, equal_seen: AtomicPtr::default() });
        match self.kernels.get_mut(index as usize) {
            Some(slot) => *slot = registered,
            None => self.kernels.push(registered),
        }
    }

    /// No longer carries `module::entry`; a module left with no entry is no longer carried.
    pub fn remove(&mut self, module: &str, entry: &str) {
        if let Some(entries) = self.modules.get_mut(module) {
            if let Some(index) = entries.remove(entry) {
                self.kernels[index as usize] = None;
            }
            if entries.is_empty() {
                self.modules.remove(module);
            }
        }
    }

    /// Whether any entry of `module` is carried.
    pub fn has_module(&self, module: &str) -> bool {
        self.modules.contains_key(module)
    }

    /// The handle of `entry`, or which of module and entry is not carried, or that the kernel was
    /// registered with another signature.
    pub fn lookup(&self, entry: &KernelEntry) -> Result<KernelHandle, LookupError> {
        let entries = self
            .modules
            .get(entry.module)
            .ok_or_else(|| LookupError::ModuleNotCarried { module: entry.module.to_owned() })?;
        let index = *entries.get(entry.entry).ok_or_else(|| LookupError::EntryNotInModule {
            module: entry.module.to_owned(),
            entry: entry.entry.to_owned(),
        })?;
        if let Some(registered) = self.kernels.get(index as usize).and_then(Option::as_ref)
            && !registered.takes(entry.signature)
        {
            return Err(LookupError::SignatureMismatch {
                entry: Box::new(*entry),
                reason: format!("the kernel is carried for `{}` with other parameters", registered.entry.path()),
            });
        }
        Ok(KernelHandle::new(self.backend, index))
    }

    /// The kernel behind `handle`, if this registry issued it and still carries the kernel.
    pub fn get(&self, handle: KernelHandle, backend: &str) -> Result<&Registered<K>, BackendError> {
        if handle.backend() != self.backend {
            return Err(BackendError::ForeignResource { what: handle.to_string(), backend: backend.to_owned() });
        }
        self.kernels
            .get(handle.index() as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| BackendError::UnknownHandle { backend: backend.to_owned(), index: handle.index() })
    }

    /// Every carried `module::entry`, by module then entry.
    pub fn names(&self) -> impl Iterator<Item = String> + '_ {
        self.modules
            .iter()
            .flat_map(|(module, entries)| entries.keys().map(move |entry| format!("{module}::{entry}")))
    }
}
