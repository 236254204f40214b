//! The kda side of the ops' `cuda_fwd`: a backend on candle's stream with the table resolved, an
//! operand as a view of candle's slice, and the launch over a shape's elements.

use candle_core::cuda_backend::{CudaDType, CudaDevice};
use candle_core::{CudaStorage, Error, Layout, Result, Shape};
use kda_runtime::cuda::CudaBackend;
use kda_runtime::cudarc::driver::CudaView;
use kda_runtime::{KernelTable, LaunchGeometry};

use crate::defines::BLOCK;
use crate::operands::contiguous_range;
use crate::{CandleOps, KERNEL_IMAGES};

/// A kda backend on `device`'s stream (candle's context and stream, none of kda's own) and this
/// crate's table resolved on it. Cheap after the first call on a context: the modules load once per
/// context, and every backend on it shares them.
pub(crate) fn kernels(device: &CudaDevice) -> Result<(CudaBackend, <CandleOps as KernelTable>::Kernels)> {
    let gpu = CudaBackend::on_stream(device.cuda_stream(), &[&KERNEL_IMAGES]).map_err(Error::wrap)?;
    let kernels = CandleOps::resolve(&gpu).map_err(Error::wrap)?;
    Ok((gpu, kernels))
}

/// The elements of the contiguous operand `name` (`layout` in `storage`), as a view of candle's
/// slice.
pub(crate) fn elements<'a, T: CudaDType>(name: &str, storage: &'a CudaStorage, layout: &Layout) -> Result<CudaView<'a, T>> {
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
