//! An engine's cudarc memory fills the typed fields of its element type: slices and views, read
//! and written, and any of them a `void` parameter. Without a GPU, the launch of borrowed memory
//! (a device address) is checked like a view's, then refused by a backend that is not CUDA.
use kda_runtime::cudarc::driver::{CudaSlice, CudaView, CudaViewMut};
use kda_runtime::cpu::CpuBackend;
use kda_runtime::{BackendError, GpuBackend, In, LaunchGeometry, Out, bf16};

#[derive(kda_runtime::KernelTable)]
#[kernel_table(manifest = "borrowed_memory.toml")]
pub struct BorrowedMemory;

/// What an engine writes: its slices and views, as they are.
pub fn launch_on_engine_memory(
    kernels: &BorrowedMemoryKernels,
    gpu: &dyn GpuBackend,
    src: &CudaSlice<bf16>,
    dst: &mut CudaSlice<f32>,
    src_view: &CudaView<'_, bf16>,
    dst_view: &mut CudaViewMut<'_, f32>,
    bytes: &CudaSlice<u8>,
    total: &mut CudaSlice<u32>,
) -> Result<(), BackendError> {
    let geometry = LaunchGeometry::linear(4, 32);
    kernels.launch_convert(gpu, geometry, borrowed_memory::convert { src: src.into(), dst: dst.into(), n: 4 })?;
    let args = borrowed_memory::convert { src: src_view.into(), dst: dst_view.into(), n: 4 };
    kernels.launch_convert(gpu, geometry, args)?;
    kernels.launch_sum(gpu, geometry, borrowed_memory::sum { bytes: bytes.into(), n: 4, total: total.into() })
}

fn main() {
    let gpu = CpuBackend::new().with_kernel(borrowed_memory::convert::ENTRY, |_| Ok(()));
    let kernels = BorrowedMemoryKernels::resolve(&gpu).unwrap();
    let geometry = LaunchGeometry::linear(4, 32);
    // SAFETY: nothing dereferences these addresses: the checks refuse the first launch, and the
    // CPU backend the second.
    let (src, dst, short) = unsafe {
        (In::<bf16>::from_device_ptr(0x1000, 4), Out::<f32>::from_device_ptr(0x2000, 4), Out::<f32>::from_device_ptr(0x2000, 3))
    };
    let error = kernels.launch_convert(&gpu, geometry, borrowed_memory::convert { src, dst: short, n: 4 }).unwrap_err();
    assert!(error.to_string().contains("at least 4 elements"), "{error}");
    // SAFETY: as above.
    let src = unsafe { In::<bf16>::from_device_ptr(0x1000, 4) };
    let error = kernels.launch_convert(&gpu, geometry, borrowed_memory::convert { src, dst, n: 4 }).unwrap_err();
    assert!(matches!(error, BackendError::ForeignResource { .. }), "{error}");
    assert!(error.to_string().contains("memory at device address 0x1000"), "{error}");
}
