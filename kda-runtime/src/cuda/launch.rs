//! Turning [`KernelArg`]s into a cudarc launch.

use cudarc::driver::sys::CUfunction_attribute_enum;
use cudarc::driver::{CudaFunction, CudaSlice, CudaView, LaunchConfig, PushKernelArg};

use super::CudaBackend;
use crate::{BackendError, KernelArg, LaunchGeometry};

/// Dynamic shared memory a kernel gets without opting in.
const DEFAULT_SHARED_MEMORY: u32 = 48 * 1024;

/// An argument ready to push: device memory borrowed for the launch, or a scalar.
enum Prepared<'a> {
    Shared(&'a CudaSlice<u8>),
    Exclusive(&'a mut CudaSlice<u8>),
    View(CudaView<'a, u8>),
    U32(u32),
    I32(i32),
    F32(f32),
}

/// Launches `function` with `args` on the backend's stream.
pub(super) fn launch(
    gpu: &CudaBackend,
    function: &CudaFunction,
    geometry: LaunchGeometry,
    args: &mut [KernelArg<'_>],
) -> Result<(), BackendError> {
    let mut prepared = args.iter_mut().map(|arg| prepare(gpu, arg)).collect::<Result<Vec<_>, _>>()?;
    if geometry.shared_mem_bytes > DEFAULT_SHARED_MEMORY {
        function
            .set_attribute(
                CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                geometry.shared_mem_bytes as i32,
            )
            .map_err(|error| gpu.driver("raising the dynamic shared memory limit", error))?;
    }
    let mut builder = gpu.stream.launch_builder(function);
    for arg in &mut prepared {
        match arg {
            Prepared::Shared(slice) => builder.arg(*slice),
            Prepared::Exclusive(slice) => builder.arg(&mut **slice),
            Prepared::View(view) => builder.arg(&*view),
            Prepared::U32(value) => builder.arg(&*value),
            Prepared::I32(value) => builder.arg(&*value),
            Prepared::F32(value) => builder.arg(&*value),
        };
    }
    let config = LaunchConfig {
        grid_dim: geometry.grid,
        block_dim: geometry.block,
        shared_mem_bytes: geometry.shared_mem_bytes,
    };
    // SAFETY: every argument is the device memory or scalar the caller passed in the kernel's
    // parameter order; buffers are this backend's, slices lie inside their buffers, and
    // `KernelArg` borrows keep them alive and unaliased for the launch.
    unsafe { builder.launch(config) }.map(drop).map_err(|error| gpu.driver("launching a kernel", error))
}

fn prepare<'a>(gpu: &CudaBackend, arg: &'a mut KernelArg<'_>) -> Result<Prepared<'a>, BackendError> {
    Ok(match arg {
        KernelArg::Buffer(buffer) => Prepared::Shared(&gpu.storage(buffer)?.bytes),
        KernelArg::BufferMut(buffer) => Prepared::Exclusive(&mut gpu.storage_mut(buffer)?.bytes),
        KernelArg::Slice(buffer, range) => {
            crate::host::check_range(buffer, range)?;
            let size = buffer.dtype().size();
            Prepared::View(gpu.storage(buffer)?.bytes.slice(range.start * size..range.end * size))
        }
        KernelArg::U32(value) => Prepared::U32(*value),
        KernelArg::I32(value) => Prepared::I32(*value),
        KernelArg::F32(value) => Prepared::F32(*value),
    })
}
