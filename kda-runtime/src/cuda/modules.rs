//! The CUDA loader of the [module cache](crate::modules): an image becomes a `cudarc` module
//! once its coverage says the device can run it, and an entry's function is checked against the
//! entry's signature (`cuFuncGetParamInfo`) when it is found.

use std::sync::{Arc, Mutex};

use cudarc::driver::sys::{self, cudaError_enum};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;

use crate::modules::{LoadError, ModuleLoader};
use crate::signature::{ParamSlot, compare_layout};
use crate::{BackendError, ImageSet, KernelEntry, KernelImage, LookupError};

/// Loads images into one device's context.
pub(super) struct CudaLoader {
    pub(super) context: Arc<CudaContext>,
    /// The device's compute capability.
    pub(super) capability: (u32, u32),
    /// The CUDA version the driver supports (`cuDriverGetVersion`).
    pub(super) driver: (u32, u32),
    /// The device, for messages: "CUDA device 0 (NVIDIA H200, sm_90)".
    pub(super) description: String,
}

impl ModuleLoader for CudaLoader {
    type Set = ImageSet;
    type Module = Arc<CudaModule>;
    type Function = Arc<LoadedFunction>;

    fn device(&self) -> &str {
        &self.description
    }

    fn load(&self, image: &'static KernelImage) -> Result<Arc<CudaModule>, LoadError> {
        // Checked first: the driver's own answer for an image without usable code is a bare
        // CUDA_ERROR_NO_BINARY_FOR_GPU, which says neither what the image carries nor what to fix.
        image.coverage.loadable_on(self.capability, self.driver)?;
        // `from_binary` copies the image into a heap buffer, aligned as the driver needs.
        self.context.load_module(Ptx::from_binary(image.fatbin.to_vec())).map_err(|error| LoadError::Driver {
            operation: format!("loading module `{}` ({} bytes)", image.module, image.fatbin.len()),
            message: format!("{error:?}"),
        })
    }

    fn function(
        &self,
        module: &Arc<CudaModule>,
        kernel: &KernelEntry,
        symbol: &str,
    ) -> Result<Arc<LoadedFunction>, LookupError> {
        let (name, entry, device) = (kernel.module, kernel.entry, &self.description);
        let failed = |operation: String, message: String| {
            LookupError::failed(kernel, BackendError::Driver { operation, source: message.into() })
        };
        // cudarc turns the name into a C string and panics on an interior NUL; no kernel has one.
        if symbol.contains('\0') {
            return Err(LookupError::entry_not_in_module(kernel));
        }
        let function = match module.load_function(symbol) {
            Ok(function) => function,
            Err(error) if error.0 == cudaError_enum::CUDA_ERROR_NOT_FOUND => {
                return Err(LookupError::entry_not_in_module(kernel));
            }
            Err(error) => {
                return Err(failed(format!("finding `{name}::{entry}` on {device}"), format!("{error:?}")));
            }
        };
        if let Some(signature) = kernel.signature {
            // A stale image (built from other sources than the manifest describes) fails here,
            // at resolve, instead of reading garbage parameters at launch.
            let layout = param_layout(&function).map_err(|error| {
                failed(format!("reading the parameters of `{name}::{entry}` on {device}"), error)
            })?;
            compare_layout(signature, &layout)
                .map_err(|reason| LookupError::SignatureMismatch { entry: Box::new(*kernel), reason })?;
        }
        Ok(Arc::new(LoadedFunction { function, dynamic_shared_limit: Mutex::new(DEFAULT_SHARED_MEMORY) }))
    }
}

/// Dynamic shared memory a kernel gets without opting in.
pub(super) const DEFAULT_SHARED_MEMORY: u32 = 48 * 1024;

/// A function of a loaded module, and the dynamic shared memory it has been allowed so far.
pub(super) struct LoadedFunction {
    pub function: CudaFunction,
    /// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` as last raised. Only ever raised, under
    /// this lock: a launch that asked for more than another must not find the limit lowered
    /// under it by that other launch, which a plain set before each launch allowed.
    pub dynamic_shared_limit: Mutex<u32>,
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
