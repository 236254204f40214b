//! Turning [`KernelArg`]s into a cudarc launch.

use cudarc::driver::sys::CUfunction_attribute_enum;
use cudarc::driver::{CudaView, CudaViewMut, LaunchConfig, PushKernelArg, SyncOnDrop};

use std::sync::PoisonError;

use super::modules::DEFAULT_SHARED_MEMORY;
use super::reads::Reads;
use super::{CudaBackend, CudaKernel};
use crate::borrowed::Memory;
use crate::{BackendError, KernelArg, LaunchGeometry};

/// An argument ready to push: device memory borrowed for the launch, or a scalar.
enum Prepared<'a> {
    /// Memory the kernel reads, and its buffer's reads, to note the launch in.
    View(CudaView<'a, u8>, &'a Reads),
    ViewMut(CudaViewMut<'a, u8>),
    /// Borrowed memory's device address, and the guard cudarc returned with it, which records
    /// the use in the memory's events when dropped, after the launch.
    Borrowed {
        address: u64,
        _guard: Option<SyncOnDrop<'a>>,
    },
    /// A scalar's bits: the driver reads the parameter's size from their address, which on a
    /// little-endian host is the value's own bytes (`Scalar::bits`).
    Scalar(u64),
}

/// Launches `function` with `args` on the backend's stream. Views must be this backend's and lie
/// inside their buffers (checked here). The launch is ordered with the other streams' uses of
/// its buffers (see [Streams](super#streams)).
///
/// # Safety
///
/// The conditions of [`GpuBackend::launch_unchecked`](crate::GpuBackend::launch_unchecked):
/// `args` are the kernel's parameters in order and of its C types, every view holds what the
/// kernel touches through it, and written buffers come as mutable views.
pub(super) unsafe fn launch(
    gpu: &CudaBackend,
    kernel: &CudaKernel,
    geometry: LaunchGeometry,
    args: &mut [KernelArg<'_>],
) -> Result<(), BackendError> {
    let function = &kernel.function.function;
    if args.iter().any(|arg| matches!(arg, KernelArg::Read(_) | KernelArg::Write(_))) {
        gpu.admitted_in_callers_capture("a launch on kda buffers")?;
    }
    let mut prepared = args.iter_mut().map(|arg| prepare(gpu, arg)).collect::<Result<Vec<_>, _>>()?;
    // An engine's cudarc slice has its address only now: aligned as the kernel reads it, or
    // refused before anything is launched (`signature::check` aligned every other argument).
    if let Some(signature) = kernel.entry.signature {
        for (param, arg) in signature.params.iter().zip(&prepared) {
            if let Prepared::Borrowed { address, .. } = arg {
                crate::signature::check_alignment(&kernel.entry, param, *address)?;
            }
        }
    }
    let shared_mem_bytes = i32::try_from(geometry.shared_mem_bytes).map_err(|_| BackendError::Launch {
        module: kernel.entry.module.to_owned(),
        entry: kernel.entry.entry.to_owned(),
        reason: format!(
            "{} bytes of dynamic shared memory is more than any device has",
            geometry.shared_mem_bytes
        ),
    })?;
    if geometry.shared_mem_bytes > DEFAULT_SHARED_MEMORY {
        let mut limit = kernel.function.dynamic_shared_limit.lock().unwrap_or_else(PoisonError::into_inner);
        if *limit < geometry.shared_mem_bytes {
            function
                .set_attribute(
                    CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    shared_mem_bytes,
                )
                .map_err(|error| gpu.driver("raising the dynamic shared memory limit", error))?;
            *limit = geometry.shared_mem_bytes;
        }
    }
    let mut builder = gpu.stream.launch_builder(function);
    for arg in &mut prepared {
        match arg {
            Prepared::View(view, _) => builder.arg(&*view),
            Prepared::ViewMut(view) => builder.arg(view),
            Prepared::Borrowed { address, .. } => builder.arg(&*address),
            Prepared::Scalar(bits) => builder.arg(&*bits),
        };
    }
    let config = LaunchConfig {
        grid_dim: geometry.grid,
        block_dim: geometry.block,
        shared_mem_bytes: geometry.shared_mem_bytes,
    };
    // SAFETY: the caller guarantees the arguments are the kernel's parameters, in order, of its C
    // types, and that every view covers what the kernel touches; `prepare` made each view from a
    // buffer of this backend and a range inside it, and took each borrowed address from a cudarc
    // slice or view of this context (whose length, which `Borrowed` carries, is the memory it
    // holds: `cuda::borrowed` takes cudarc's own types only) or from a caller of
    // `In::from_device_ptr`/`Out::from_device_ptr`, who vouched for it; the `KernelArg` borrows
    // keep the memory alive, and exclusive where the kernel writes, until the launch has been
    // enqueued, and cudarc's guards order it with the borrowed memory's other uses as a cudarc
    // launch is. On the device the launch runs after earlier writes to its buffers on any stream
    // and, where it writes, after earlier reads of them on other streams; later frees, copies and
    // launches run after it: cudarc's event tracking, with `Reads` for reads on several streams
    // (the module's Streams section names the cudarc items).
    unsafe { builder.launch(config) }.map_err(|error| gpu.driver("launching a kernel", error))?;
    prepared.iter().try_for_each(|arg| match arg {
        Prepared::View(_, reads) => gpu.after_read(reads),
        _ => Ok(()),
    })
}

fn prepare<'a>(gpu: &'a CudaBackend, arg: &'a mut KernelArg<'_>) -> Result<Prepared<'a>, BackendError> {
    Ok(match arg {
        KernelArg::Read(view) => {
            let range = view.checked_byte_range()?;
            let storage = gpu.storage(view.buffer())?;
            Prepared::View(storage.bytes.slice(range), &storage.reads)
        }
        KernelArg::Write(view) => {
            let range = view.checked_byte_range()?;
            let storage = gpu.storage_mut(view.buffer_mut())?;
            gpu.before_write(&storage.reads)?;
            Prepared::ViewMut(storage.bytes.slice_mut(range))
        }
        KernelArg::Scalar(scalar) => Prepared::Scalar(scalar.bits()),
        // A device pointer of 0, as CUDA's own null.
        KernelArg::Null => Prepared::Scalar(0),
        KernelArg::Borrowed(borrowed) => {
            let own = match &mut borrowed.memory {
                Memory::Address { .. } => true,
                Memory::Read(memory) => gpu.is_own_context(memory.context()),
                Memory::Write(memory) => gpu.is_own_context(memory.get().context()),
            };
            if !own {
                return Err(gpu.foreign(&format!("{}, of another CUDA context", borrowed.describe())));
            }
            let (address, guard) = match &mut borrowed.memory {
                Memory::Address { address, .. } => (*address, None),
                Memory::Read(memory) => {
                    let (address, guard) = memory.read_on(&gpu.stream);
                    (address, Some(guard))
                }
                Memory::Write(memory) => {
                    let (address, guard) = memory.get().write_on(&gpu.stream);
                    (address, Some(guard))
                }
            };
            Prepared::Borrowed { address, _guard: guard }
        }
    })
}
