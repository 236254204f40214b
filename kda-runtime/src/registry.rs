//! The kernels a host-side backend carries, by `(module, entry)`, and the handles it issues for
//! them: shared by the CPU backend and the test fake.

use std::collections::BTreeMap;

use crate::{BackendError, BackendId, KernelHandle, LookupError};

/// One registered kernel: its names and what the backend keeps with it.
#[derive(Debug)]
pub(crate) struct Registered<K> {
    pub module: String,
    pub entry: String,
    pub kernel: K,
}

/// Kernels by name and by handle index.
#[derive(Debug)]
pub(crate) struct KernelRegistry<K> {
    backend: BackendId,
    /// module → entry → index into `kernels`.
    modules: BTreeMap<String, BTreeMap<String, u32>>,
    /// index → the kernel; `None` once removed, so a handle issued before the removal is refused
    /// instead of still launching it.
    kernels: Vec<Option<Registered<K>>>,
}

impl<K> KernelRegistry<K> {
    /// An empty registry issuing handles of `backend`.
    pub fn new(backend: BackendId) -> Self {
        Self { backend, modules: BTreeMap::new(), kernels: Vec::new() }
    }

    /// Carries `module::entry` with `kernel`, replacing what was registered under that name.
    pub fn insert(&mut self, module: &str, entry: &str, kernel: K) {
        let next = u32::try_from(self.kernels.len()).unwrap_or(u32::MAX);
        let index =
            *self.modules.entry(module.to_owned()).or_default().entry(entry.to_owned()).or_insert(next);
        let registered = Some(Registered { module: module.to_owned(), entry: entry.to_owned(), kernel });
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

    /// The handle of `module::entry`, or which of the two is not carried.
    pub fn lookup(&self, module: &str, entry: &str) -> Result<KernelHandle, LookupError> {
        let entries = self
            .modules
            .get(module)
            .ok_or_else(|| LookupError::ModuleNotCarried { module: module.to_owned() })?;
        let index = entries.get(entry).ok_or_else(|| LookupError::EntryNotInModule {
            module: module.to_owned(),
            entry: entry.to_owned(),
        })?;
        Ok(KernelHandle::new(self.backend, *index))
    }

    /// The kernel behind `handle`, if this registry issued it and still carries the kernel.
    pub fn get(&self, handle: KernelHandle, backend: &str) -> Result<&Registered<K>, BackendError> {
        if handle.backend() != self.backend {
            return Err(BackendError::ForeignResource {
                what: format!("kernel handle {:#x}", handle.get()),
                backend: backend.to_owned(),
            });
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
