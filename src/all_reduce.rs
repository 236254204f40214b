//! The all-reduce that joins the ranks of a layer split by heads ([`crate::tensor_parallel`]):
//! each rank's partial output summed, in place, across the ranks of an NCCL communicator (feature
//! `nccl`: cudarc's NCCL bindings), on the rank's CUDA backend, ordered with the block's launches
//! by the backend's stream.
//!
//! The communicator is the engine's, made on the backend's stream
//! ([`CudaBackend::stream`]): `Comm::from_rank(gpu.stream().clone(), rank, ranks, id)`.

use cudarc::nccl::{Comm, NcclType, ReduceOp, result::NcclError};
use kda_runtime::cuda::CudaBackend;
use kda_runtime::{BackendError, DType, DeviceBuffer, Element, bf16};

/// Why an all-reduce did not run, or failed.
#[derive(Debug, thiserror::Error)]
pub enum AllReduceError {
    /// The communicator issues on another stream than the backend's.
    #[error(
        "the NCCL communicator issues on another stream than the backend's: make it on `CudaBackend::stream`"
    )]
    Stream,
    /// The buffer's elements are not ones the all-reduce sums.
    #[error("an all-reduce sums bf16 or f32 partial outputs, not {0}")]
    DType(DType),
    /// The buffer is not the backend's.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// NCCL refused or failed the collective.
    #[error("the NCCL all-reduce failed: {0:?}")]
    Nccl(NcclError),
}

/// `partial` (bf16 or f32, this rank's partial output) replaced by its sum over the ranks of
/// `comm`, issued on `gpu`'s stream after the launches that wrote it. Every rank calls it with a
/// buffer of the same length and element type, as NCCL's collectives require.
pub fn all_reduce_sum(
    gpu: &CudaBackend,
    comm: &Comm,
    partial: &mut DeviceBuffer,
) -> Result<(), AllReduceError> {
    if comm.stream() != *gpu.stream() {
        return Err(AllReduceError::Stream);
    }
    match partial.dtype() {
        DType::Bf16 => sum_in_place::<bf16>(gpu, comm, partial),
        DType::F32 => sum_in_place::<f32>(gpu, comm, partial),
        other => Err(AllReduceError::DType(other)),
    }
}

/// [`all_reduce_sum`] of a buffer of `T`, once the communicator's stream is known to be the
/// backend's.
fn sum_in_place<T: Element + NcclType>(
    gpu: &CudaBackend,
    comm: &Comm,
    partial: &mut DeviceBuffer,
) -> Result<(), AllReduceError> {
    // SAFETY: `with_view_mut` asks that every access to the view be on the stream it gives, the
    // backend's: the one access, the all-reduce, is issued on the communicator's stream
    // (`Comm::all_reduce_in_place` passes `comm.stream` to NCCL), which `all_reduce_sum` checked is
    // the backend's.
    #[allow(unsafe_code)]
    let status = unsafe {
        gpu.with_view_mut::<T, _>(partial, |_, view| comm.all_reduce_in_place(view, &ReduceOp::Sum))
    }?;
    status.map(drop).map_err(AllReduceError::Nccl)
}
