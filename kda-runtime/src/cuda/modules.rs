//! The kernel images a CUDA backend carries, each loaded once on first lookup, and the table of
//! functions its handles index.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use cudarc::driver::sys::cudaError_enum;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;

use crate::{BackendError, KernelImage, LookupError};

/// Modules by name, loaded lazily and at most once; functions by handle index.
pub(super) struct ModuleCache {
    context: Arc<CudaContext>,
    /// One cell per embedded image: `OnceLock` lets one thread load it while others wait, so a
    /// module is never loaded twice, even under contention.
    modules: HashMap<&'static str, (KernelImage, OnceLock<Loaded>)>,
    functions: RwLock<Functions>,
}

/// A module as its first lookup left it: loaded, or the driver's error.
type Loaded = Result<Arc<CudaModule>, String>;

#[derive(Default)]
struct Functions {
    by_name: HashMap<(String, String), u32>,
    table: Vec<Arc<CudaFunction>>,
}

impl ModuleCache {
    pub(super) fn new(context: Arc<CudaContext>, images: &'static [KernelImage]) -> Self {
        let modules = images.iter().map(|image| (image.module, (*image, OnceLock::new()))).collect();
        Self { context, modules, functions: RwLock::default() }
    }

    pub(super) fn carries(&self, module: &str) -> bool {
        self.modules.contains_key(module)
    }

    /// The handle index of `module::entry`, loading the module if this is its first lookup.
    pub(super) fn lookup(&self, module: &str, entry: &str, device: &str) -> Result<u32, LookupError> {
        let key = (module.to_owned(), entry.to_owned());
        if let Some(index) = self.functions.read().unwrap_or_else(PoisonError::into_inner).by_name.get(&key) {
            return Ok(*index);
        }
        let Some((image, cell)) = self.modules.get(module) else {
            return Err(LookupError::ModuleNotCarried { module: module.to_owned() });
        };
        let failed = |operation: String, message: String| LookupError::Failed {
            module: module.to_owned(),
            entry: entry.to_owned(),
            source: BackendError::Driver { operation, source: message.into() },
        };
        let loaded = cell.get_or_init(|| {
            // `from_binary` copies the image into a heap buffer, aligned as the driver needs.
            self.context
                .load_module(Ptx::from_binary(image.fatbin.to_vec()))
                .map_err(|error| format!("{error:?}"))
        });
        let loaded = loaded.as_ref().map_err(|error| {
            failed(
                format!("loading module `{module}` ({} bytes) on {device}", image.fatbin.len()),
                error.clone(),
            )
        })?;
        // cudarc turns the name into a C string and panics on an interior NUL; no kernel has one.
        if entry.contains('\0') {
            return Err(LookupError::EntryNotInModule { module: module.to_owned(), entry: entry.to_owned() });
        }
        let function = match loaded.load_function(entry) {
            Ok(function) => function,
            Err(error) if error.0 == cudaError_enum::CUDA_ERROR_NOT_FOUND => {
                return Err(LookupError::EntryNotInModule {
                    module: module.to_owned(),
                    entry: entry.to_owned(),
                });
            }
            Err(error) => {
                return Err(failed(format!("finding `{module}::{entry}` on {device}"), format!("{error:?}")));
            }
        };
        let mut functions = self.functions.write().unwrap_or_else(PoisonError::into_inner);
        // Another thread may have resolved the same entry meanwhile: keep one handle per entry.
        if let Some(index) = functions.by_name.get(&key) {
            return Ok(*index);
        }
        let index = functions.table.len() as u32;
        functions.table.push(Arc::new(function));
        functions.by_name.insert(key, index);
        Ok(index)
    }

    /// The function behind handle index `index`.
    pub(super) fn function(&self, index: u32) -> Option<Arc<CudaFunction>> {
        self.functions.read().unwrap_or_else(PoisonError::into_inner).table.get(index as usize).cloned()
    }
}
