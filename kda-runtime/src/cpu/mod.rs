//! The CPU backend: host memory, and kernels that are Rust functions registered under
//! `(module, entry)` with a declared signature.
//!
//! It knows nothing of any model: a model crate registers its reference kernels into it. Launches
//! are checked against the declared signature before the kernel runs, so a wrong argument list is
//! an error naming the parameter, never a panic or a misread buffer.
//!
//! ```
//! use kda_runtime::cpu::{CpuArgs, CpuBackend, KernelError, ParamKind};
//! use kda_runtime::{GpuBackend, GpuBackendExt, KernelArg, LaunchGeometry};
//!
//! fn scale(mut args: CpuArgs<'_>) -> Result<(), KernelError> {
//!     let data = args.mut_f32(0)?;
//!     let factor = args.f32(1)?;
//!     data.iter_mut().for_each(|x| *x *= factor);
//!     Ok(())
//! }
//!
//! let gpu = CpuBackend::new().with_kernel("ops", "scale", &[ParamKind::MutF32, ParamKind::F32], scale);
//! let mut data = gpu.upload(&[1.0f32, 2.0])?;
//! let kernel = gpu.lookup("ops", "scale")?;
//! gpu.launch(kernel, LaunchGeometry::linear(2, 256), &mut [(&mut data).into(), 3.0f32.into()])?;
//! assert_eq!(gpu.download::<f32>(&data)?, [3.0, 6.0]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod args;

use std::fmt;

pub use args::{CpuArg, CpuArgs, KernelError, ParamKind};

use crate::host::{HostMemory, HostStorage, check_range};
use crate::registry::KernelRegistry;
use crate::{
    BackendError, BackendId, DType, DeviceBuffer, GpuBackend, KernelArg, KernelHandle, LaunchGeometry,
    LookupError,
};

type KernelFn = dyn Fn(CpuArgs<'_>) -> Result<(), KernelError> + Send + Sync;

/// A registered kernel: its declared signature and the function that runs it.
struct CpuKernel {
    signature: Vec<ParamKind>,
    function: Box<KernelFn>,
}

/// A backend that runs registered Rust functions on host memory.
///
/// Built by value: [`CpuBackend::with_kernel`] adds an entry, [`CpuBackend::without`] removes one
/// to emulate a target that lacks it. The launch geometry is accepted and ignored: a CPU kernel
/// covers its whole problem in one call (parallelising internally as it sees fit), so grid and
/// block sizes have nothing to select. Launches run synchronously, so
/// [`GpuBackend::synchronize`] has nothing to wait for.
pub struct CpuBackend {
    id: BackendId,
    memory: HostMemory,
    kernels: KernelRegistry<CpuKernel>,
}

impl Default for CpuBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for CpuBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CpuBackend")
            .field("id", &self.id)
            .field("kernels", &self.kernels.names().collect::<Vec<_>>())
            .finish()
    }
}

impl CpuBackend {
    /// A backend that carries no kernel.
    pub fn new() -> Self {
        let id = BackendId::fresh();
        Self { id, memory: HostMemory::new(id), kernels: KernelRegistry::new(id) }
    }

    /// Also carries `module::entry`, run by `function` with arguments matching `signature`.
    /// Registering an entry again replaces its signature and function.
    pub fn with_kernel<F>(mut self, module: &str, entry: &str, signature: &[ParamKind], function: F) -> Self
    where
        F: Fn(CpuArgs<'_>) -> Result<(), KernelError> + Send + Sync + 'static,
    {
        self.kernels.insert(
            module,
            entry,
            CpuKernel { signature: signature.to_vec(), function: Box::new(function) },
        );
        self
    }

    /// No longer carries `module::entry`; a module left with no entry is no longer carried, and
    /// handles issued for the entry are refused from now on.
    pub fn without(mut self, module: &str, entry: &str) -> Self {
        self.kernels.remove(module, entry);
        self
    }

    /// Turns one launch argument into what the kernel sees, if it fits parameter `index` of kind
    /// `kind`.
    fn bind<'s>(
        &self,
        index: usize,
        kind: ParamKind,
        arg: &'s mut KernelArg<'_>,
    ) -> Result<CpuArg<'s>, String> {
        let found = found(arg);
        let mismatch = |found: &str| format!("parameter {index}: expected `{kind}`, found `{found}`");
        let foreign = |error: BackendError| format!("parameter {index}: {error}");
        match (kind, arg) {
            (ParamKind::U32, KernelArg::U32(value)) => Ok(CpuArg::U32(*value)),
            (ParamKind::I32, KernelArg::I32(value)) => Ok(CpuArg::I32(*value)),
            (ParamKind::F32, KernelArg::F32(value)) => Ok(CpuArg::F32(*value)),
            // As in C, a writable buffer may fill a `const T*` parameter.
            (ParamKind::ConstBf16 | ParamKind::ConstF32, KernelArg::Buffer(buffer)) => {
                self.shared(kind, buffer).map_err(foreign)?.ok_or_else(|| mismatch(&found))
            }
            (ParamKind::ConstBf16 | ParamKind::ConstF32, KernelArg::BufferMut(buffer)) => {
                self.shared(kind, buffer).map_err(foreign)?.ok_or_else(|| mismatch(&found))
            }
            (ParamKind::ConstBf16 | ParamKind::ConstF32, KernelArg::Slice(buffer, range)) => {
                check_range(buffer, range).map_err(foreign)?;
                let whole = self.shared(kind, buffer).map_err(foreign)?.ok_or_else(|| mismatch(&found))?;
                Ok(match whole {
                    CpuArg::ConstBf16(data) => CpuArg::ConstBf16(&data[range.clone()]),
                    CpuArg::ConstF32(data) => CpuArg::ConstF32(&data[range.clone()]),
                    other => other,
                })
            }
            (ParamKind::MutBf16 | ParamKind::MutF32, KernelArg::BufferMut(buffer)) => {
                let storage = self.memory.storage_mut(buffer).map_err(foreign)?;
                match (kind, storage) {
                    (ParamKind::MutBf16, HostStorage::Bf16(data)) => Ok(CpuArg::MutBf16(data)),
                    (ParamKind::MutF32, HostStorage::F32(data)) => Ok(CpuArg::MutF32(data)),
                    _ => Err(mismatch(&found)),
                }
            }
            _ => Err(mismatch(&found)),
        }
    }

    /// A `const` view of `buffer` if it is this backend's and holds `kind`'s element type.
    fn shared<'s>(
        &self,
        kind: ParamKind,
        buffer: &'s DeviceBuffer,
    ) -> Result<Option<CpuArg<'s>>, BackendError> {
        Ok(match (kind, self.memory.storage(buffer)?) {
            (ParamKind::ConstBf16, HostStorage::Bf16(data)) => Some(CpuArg::ConstBf16(data)),
            (ParamKind::ConstF32, HostStorage::F32(data)) => Some(CpuArg::ConstF32(data)),
            _ => None,
        })
    }
}

/// A launch argument in the C spelling of the parameter kind it would fill.
fn found(arg: &KernelArg<'_>) -> String {
    let pointer = |dtype: DType, writable: bool| {
        if writable { format!("{dtype}*") } else { format!("const {dtype}*") }
    };
    match arg {
        KernelArg::Buffer(buffer) => pointer(buffer.dtype(), false),
        KernelArg::BufferMut(buffer) => pointer(buffer.dtype(), true),
        KernelArg::Slice(buffer, _) => pointer(buffer.dtype(), false),
        KernelArg::U32(_) => "u32".to_owned(),
        KernelArg::I32(_) => "i32".to_owned(),
        KernelArg::F32(_) => "f32".to_owned(),
    }
}

impl GpuBackend for CpuBackend {
    fn describe(&self) -> String {
        "CPU reference backend".to_owned()
    }

    fn has_module(&self, module: &str) -> bool {
        self.kernels.has_module(module)
    }

    fn lookup(&self, module: &str, entry: &str) -> Result<KernelHandle, LookupError> {
        self.kernels.lookup(module, entry)
    }

    crate::host::host_memory_methods!(memory);

    /// Checks `args` against the kernel's signature, then runs it to completion on this thread
    /// (and whatever threads the kernel itself uses). `geometry` is ignored.
    fn launch(
        &self,
        kernel: KernelHandle,
        _geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        let registered = self.kernels.get(kernel, &self.describe())?;
        let cpu_kernel = &registered.kernel;
        let refused = |reason: String| BackendError::Launch {
            module: registered.module.clone(),
            entry: registered.entry.clone(),
            reason,
        };
        let signature = &cpu_kernel.signature;
        if args.len() != signature.len() {
            let expected = signature.iter().map(ToString::to_string).collect::<Vec<_>>();
            return Err(refused(format!(
                "expected {} arguments ({}), got {}",
                signature.len(),
                expected.join(", "),
                args.len()
            )));
        }
        let bound = args
            .iter_mut()
            .zip(signature)
            .enumerate()
            .map(|(index, (arg, &kind))| self.bind(index, kind, arg))
            .collect::<Result<Vec<_>, _>>()
            .map_err(refused)?;
        (cpu_kernel.function)(CpuArgs::new(bound)).map_err(|error| refused(error.to_string()))
    }

    fn synchronize(&self) -> Result<(), BackendError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
