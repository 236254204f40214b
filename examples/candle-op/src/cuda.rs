//! The kda side of the ops' `cuda_fwd`: a backend on candle's stream with the table resolved, an
//! operand as a view of candle's slice, and the launch over a shape's elements.

use std::sync::{Arc, Mutex, PoisonError};

use candle_core::cuda_backend::{CudaDType, CudaDevice};
use candle_core::{CudaStorage, Error, Layout, Result, Shape};
use kda_runtime::cuda::CudaBackend;
use kda_runtime::cudarc::driver::CudaView;
use kda_runtime::{KernelTable, LaunchGeometry};

use crate::defines::BLOCK;
use crate::operands::contiguous_range;
use crate::{CandleOps, CandleOpsKernels, KERNEL_IMAGES};

/// This crate's table resolved on each CUDA context the ops have run on, with the backend it was
/// resolved on, kept for the life of the process: a kept backend keeps the context's modules
/// loaded, and a table resolved on one backend of a context is valid on every backend of it.
static RESOLVED: Mutex<Vec<(CudaBackend, CandleOpsKernels)>> = Mutex::new(Vec::new());

/// A kda backend on `device`'s stream (candle's context and stream, none of kda's own) and this
/// crate's table for it: resolved on the first call on the context, found on every later one.
pub(crate) fn kernels(device: &CudaDevice) -> Result<(CudaBackend, CandleOpsKernels)> {
    let stream = device.cuda_stream();
    let context = stream.context();
    // A panic elsewhere while holding the lock left a list whose entries are each whole.
    let mut resolved = RESOLVED.lock().unwrap_or_else(PoisonError::into_inner);
    let found = resolved.iter().find(|(kept, _)| Arc::ptr_eq(kept.stream().context(), context));
    let kernels = match found {
        Some((_, kernels)) => *kernels,
        None => {
            // Kept on the context's default stream, on which it never issues: it holds none of
            // candle's streams.
            let kept =
                CudaBackend::on_stream(context.default_stream(), &[&KERNEL_IMAGES]).map_err(Error::wrap)?;
            let kernels = CandleOps::resolve(&kept).map_err(Error::wrap)?;
            resolved.push((kept, kernels));
            kernels
        }
    };
    drop(resolved);
    let gpu = CudaBackend::on_stream(stream, &[&KERNEL_IMAGES]).map_err(Error::wrap)?;
    Ok((gpu, kernels))
}

/// The elements of the contiguous operand `name` (`layout` in `storage`), as a view of candle's
/// slice.
pub(crate) fn elements<'a, T: CudaDType>(
    name: &str,
    storage: &'a CudaStorage,
    layout: &Layout,
) -> Result<CudaView<'a, T>> {
    Ok(storage.as_cuda_slice::<T>()?.slice(contiguous_range(name, layout)?))
}

/// `shape`'s element count as the kernels' `u32 n`, and a launch of one thread per element (the
/// kernels grid-stride, so that is a sizing choice).
pub(crate) fn linear(op: &str, shape: &Shape) -> Result<(u32, LaunchGeometry)> {
    let count = shape.elem_count();
    let n = u32::try_from(count)
        .map_err(|_| Error::msg(format!("{op}: {count} elements, more than the kernels' u32 counts")))?;
    Ok((n, LaunchGeometry::linear(n, BLOCK)))
}
