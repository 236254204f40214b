//! The CPU backend: host memory, and kernels that are Rust functions registered against table
//! entries, whose signatures come from the manifest.
//!
//! It knows nothing of any model: a model crate registers its reference kernels into it. Safe
//! launches are checked against the entry's signature before the kernel runs, as on every
//! backend, so a wrong argument list is an error naming the parameter, never a panic or a misread
//! buffer.
//!
//! ```
//! use kda_runtime::cpu::{CpuArgs, CpuBackend, KernelError};
//! use kda_runtime::signature::{Access, Extent, KernelParam, Op, ParamKind, ScalarKind, Signature};
//! use kda_runtime::{DType, GpuBackend, GpuBackendExt, KernelEntry, LaunchGeometry};
//!
//! const SCALE: KernelEntry = KernelEntry {
//!     signature: Some(&Signature {
//!         params: &[
//!             KernelParam {
//!                 name: "data",
//!                 kind: ParamKind::Buffer {
//!                     dtype: DType::F32,
//!                     access: Access::Write,
//!                     extent: Extent { text: "n", program: &[Op::Scalar(1)], trust: None },
//!                     nullable: false,
//!                 },
//!             },
//!             KernelParam { name: "n", kind: ParamKind::Scalar(ScalarKind::U32) },
//!             KernelParam { name: "factor", kind: ParamKind::Scalar(ScalarKind::F32) },
//!         ],
//!         requires: &[],
//!     }),
//!     ..KernelEntry::named("ops", "scale")
//! };
//!
//! fn scale(mut args: CpuArgs<'_>) -> Result<(), KernelError> {
//!     let (data, n, factor) = (args.mut_f32(0)?, args.u32(1)? as usize, args.f32(2)?);
//!     data[..n].iter_mut().for_each(|x| *x *= factor);
//!     Ok(())
//! }
//!
//! let gpu = CpuBackend::new().with_kernel(&SCALE, scale);
//! let mut data = gpu.upload(&[1.0f32, 2.0])?;
//! let kernel = gpu.lookup(&SCALE)?;
//! let geometry = LaunchGeometry::linear(2, 256);
//! gpu.launch(kernel, geometry, &mut [(&mut data).into(), 2u32.into(), 3.0f32.into()])?;
//! assert_eq!(gpu.download::<f32>(&data)?, [3.0, 6.0]);
//! // Three elements of a two-element buffer: refused before the kernel runs.
//! let refused = gpu.launch(kernel, geometry, &mut [(&mut data).into(), 3u32.into(), 3.0f32.into()]);
//! assert!(refused.unwrap_err().to_string().contains("at least 3 elements"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod args;

use std::fmt;

pub use args::{CpuArg, CpuArgs, KernelError};

use crate::host::HostMemory;
use crate::registry::KernelRegistry;
use crate::signature::{self, Access, ParamKind};
use crate::{
    BackendError, BackendId, GpuBackend, KernelArg, KernelEntry, KernelHandle, LaunchGeometry, LookupError,
};

type KernelFn = dyn Fn(CpuArgs<'_>) -> Result<(), KernelError> + Send + Sync;

/// A registered kernel: the function that runs it (its signature is its entry's).
struct CpuKernel {
    function: Box<KernelFn>,
}

/// A backend that runs registered Rust functions on host memory.
///
/// Built by value: [`CpuBackend::with_kernel`] adds an entry, [`CpuBackend::without`] removes one
/// to emulate a target that lacks it. The launch geometry is checked against the entry's
/// requirements and otherwise ignored: a CPU kernel covers its whole problem in one call
/// (parallelising internally as it sees fit), so grid and block sizes have nothing to select. Launches run synchronously, so
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

    /// Also carries `entry`, run by `function`; launches are checked against the entry's
    /// signature. Registering an entry again replaces its function.
    pub fn with_kernel<F>(mut self, entry: &KernelEntry, function: F) -> Self
    where
        F: Fn(CpuArgs<'_>) -> Result<(), KernelError> + Send + Sync + 'static,
    {
        self.kernels.insert(*entry, CpuKernel { function: Box::new(function) });
        self
    }

    /// No longer carries `module::entry`; a module left with no entry is no longer carried, and
    /// handles issued for the entry are refused from now on.
    pub fn without(mut self, module: &str, entry: &str) -> Self {
        self.kernels.remove(module, entry);
        self
    }

    /// Turns the launch arguments into what the kernel sees: views become host slices of their
    /// element type (a read-only parameter gets a shared slice even from a mutable view).
    fn bind<'s>(
        &self,
        entry: &KernelEntry,
        args: &'s mut [KernelArg<'_>],
    ) -> Result<Vec<CpuArg<'s>>, BackendError> {
        let read_only = |index: usize| {
            entry
                .signature
                .and_then(|signature| signature.params.get(index))
                .is_some_and(|param| matches!(param.kind, ParamKind::Buffer { access: Access::Read, .. }))
        };
        args.iter_mut()
            .enumerate()
            .map(|(index, arg)| {
                let bound = self.bind_one(arg)?;
                Ok(if read_only(index) { bound.into_shared() } else { bound })
            })
            .collect()
    }

    fn bind_one<'s>(&self, arg: &'s mut KernelArg<'_>) -> Result<CpuArg<'s>, BackendError> {
        Ok(match arg {
            KernelArg::Read(view) => {
                let range = view.checked_byte_range()?;
                CpuArg::Const(view.dtype(), &self.memory.storage(view.buffer())?.bytes()[range])
            }
            KernelArg::Write(view) => {
                let (range, dtype) = (view.checked_byte_range()?, view.dtype());
                CpuArg::Mut(dtype, &mut self.memory.storage_mut(view.buffer_mut())?.bytes_mut()[range])
            }
            KernelArg::Scalar(scalar) => CpuArg::Scalar(*scalar),
            KernelArg::Null => CpuArg::Null,
            KernelArg::Borrowed(borrowed) => return Err(crate::borrowed::refused(borrowed, self.describe())),
        })
    }

    /// Binds `args` and runs the kernel behind `kernel`, checked against its signature or not.
    fn run(
        &self,
        kernel: KernelHandle,
        geometry: &LaunchGeometry,
        args: &mut [KernelArg<'_>],
        checked: bool,
    ) -> Result<(), BackendError> {
        let registered = self.kernels.get(kernel, &self.describe())?;
        let entry = &registered.entry;
        if checked {
            signature::check(entry, geometry, args)?;
        }
        let bound = self.bind(entry, args)?;
        (registered.kernel.function)(CpuArgs::new(bound)).map_err(|error| BackendError::Launch {
            module: entry.module.to_owned(),
            entry: entry.entry.to_owned(),
            reason: error.to_string(),
        })
    }
}

impl GpuBackend for CpuBackend {
    fn describe(&self) -> String {
        "CPU reference backend".to_owned()
    }

    fn has_module(&self, module: &str) -> bool {
        self.kernels.has_module(module)
    }

    fn lookup(&self, entry: &KernelEntry) -> Result<KernelHandle, LookupError> {
        self.kernels.lookup(entry)
    }

    fn is_handle_of(&self, kernel: KernelHandle, entry: &KernelEntry) -> bool {
        self.kernels.is_handle_of(kernel, entry)
    }

    fn alloc(&self, dtype: crate::DType, len: usize) -> Result<crate::DeviceBuffer, BackendError> {
        self.memory.alloc(dtype, len)
    }

    crate::host::host_copy_methods!(memory);

    /// Checks `args` against the entry's signature, then runs the kernel to completion on this
    /// thread (and whatever threads the kernel itself uses). `geometry` is checked against the
    /// entry's requirements, then ignored: a CPU kernel covers its whole problem in one call.
    fn launch(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        self.run(kernel, &geometry, args, true)
    }

    /// Runs the kernel without the signature check. Nothing here relies on the caller's
    /// promises: views are bounds-checked as they become slices and the kernel reads its
    /// arguments through checked accessors, so a wrong argument list is an `Err` here too.
    unsafe fn launch_unchecked(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        self.run(kernel, &geometry, args, false)
    }

    fn synchronize(&self) -> Result<(), BackendError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
