//! The kernel images a CUDA backend carries, each loaded once on first lookup, and the table of
//! functions its handles index.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use cudarc::driver::sys::{self, cudaError_enum};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;

use crate::signature::{ParamSlot, compare_layout};
use crate::{BackendError, KernelEntry, KernelImage, LookupError};

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

/// A function ready to launch, with the entry whose signature its layout was checked against.
#[derive(Clone)]
pub(super) struct Resolved {
    pub function: Arc<CudaFunction>,
    pub entry: KernelEntry,
}

#[derive(Default)]
struct Functions {
    /// By the entry's module, name and signature: one handle per distinct contract.
    by_entry: HashMap<(&'static str, &'static str, Option<&'static crate::Signature>), u32>,
    table: Vec<Resolved>,
}

impl ModuleCache {
    pub(super) fn new(context: Arc<CudaContext>, images: &'static [KernelImage]) -> Self {
        let modules = images.iter().map(|image| (image.module, (*image, OnceLock::new()))).collect();
        Self { context, modules, functions: RwLock::default() }
    }

    pub(super) fn carries(&self, module: &str) -> bool {
        self.modules.contains_key(module)
    }

    /// The handle index of `kernel`, loading its module if this is the module's first lookup,
    /// and checking the loaded function's parameter layout against the entry's signature.
    pub(super) fn lookup(&self, kernel: &KernelEntry, device: &str) -> Result<u32, LookupError> {
        let (module, entry) = (kernel.module, kernel.entry);
        let key = (module, entry, kernel.signature);
        if let Some(index) = self.functions.read().unwrap_or_else(PoisonError::into_inner).by_entry.get(&key)
        {
            return Ok(*index);
        }
        let Some((image, cell)) = self.modules.get(module) else {
            return Err(LookupError::ModuleNotCarried { module: module.to_owned() });
        };
        let failed = |operation: String, message: String| LookupError::Failed {
            module: module.to_owned(),
            entry: entry.to_owned(),
            source: Box::new(BackendError::Driver { operation, source: message.into() }),
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
        if let Some(signature) = kernel.signature {
            // A stale image (built from other sources than the manifest describes) fails here,
            // at resolve, instead of reading garbage parameters at launch.
            let layout = param_layout(&function).map_err(|error| {
                failed(format!("reading the parameters of `{module}::{entry}` on {device}"), error)
            })?;
            compare_layout(signature, &layout)
                .map_err(|reason| LookupError::SignatureMismatch { entry: Box::new(*kernel), reason })?;
        }
        let mut functions = self.functions.write().unwrap_or_else(PoisonError::into_inner);
        // Another thread may have resolved the same entry meanwhile: keep one handle per entry.
        if let Some(index) = functions.by_entry.get(&key) {
            return Ok(*index);
        }
        let index = u32::try_from(functions.table.len()).map_err(|_| {
            failed(format!("resolving `{module}::{entry}`"), "2^32 functions resolved".to_owned())
        })?;
        functions.table.push(Resolved { function: Arc::new(function), entry: *kernel });
        functions.by_entry.insert(key, index);
        Ok(index)
    }

    /// The function behind handle index `index`, and its entry.
    pub(super) fn function(&self, index: u32) -> Option<Resolved> {
        self.functions.read().unwrap_or_else(PoisonError::into_inner).table.get(index as usize).cloned()
    }
}

/// The most parameters a kernel can have: CUDA's parameter buffer is 32,764 bytes, at least 1
/// byte each.
const MAX_PARAMS: usize = 32_764;

/// Offset and size of each parameter of `function`, from `cuFuncGetParamInfo`.
fn param_layout(function: &CudaFunction) -> Result<Vec<ParamSlot>, String> {
    let cu_function = function.cu_function();
    // A driver without the symbol makes cudarc's lazy loader panic: keep that an `Err`.
    std::panic::catch_unwind(|| {
        let mut layout = Vec::new();
        for index in 0..MAX_PARAMS {
            let (mut offset, mut size) = (0usize, 0usize);
            // SAFETY: `cu_function` is a live function of a loaded module (`function` borrows
            // the module through its `Arc`), and the two out-pointers point to locals.
            let status = unsafe { sys::cuFuncGetParamInfo(cu_function, index, &mut offset, &mut size) };
            match status {
                cudaError_enum::CUDA_SUCCESS => layout.push(ParamSlot { offset, size }),
                // Past the last parameter.
                cudaError_enum::CUDA_ERROR_INVALID_VALUE => return Ok(layout),
                other => return Err(format!("cuFuncGetParamInfo({index}) failed: {other:?}")),
            }
        }
        Err(format!("the kernel reports more than {MAX_PARAMS} parameters"))
    })
    .map_err(|_| "the CUDA driver lacks cuFuncGetParamInfo (CUDA 12.4 or newer needed)".to_owned())
    .and_then(std::convert::identity)
}
