//! An engine's cudarc memory in a launch the kernel does not take does not compile: a slice of
//! another element type, a shared borrow (or a read-only view) where the kernel writes.
use kda_runtime::cudarc::driver::{CudaSlice, CudaView};
use kda_runtime::{GpuBackend, bf16};

#[derive(kda_runtime::KernelTable)]
#[kernel_table(manifest = "borrowed_memory.toml")]
pub struct BorrowedMemory;

pub fn launch(
    kernels: &BorrowedMemoryKernels,
    gpu: &dyn GpuBackend,
    floats: &CudaSlice<f32>,
    halves: &CudaSlice<bf16>,
    mut out: CudaSlice<f32>,
    view: CudaView<'_, f32>,
) {
    let geometry = kda_runtime::LaunchGeometry::linear(1, 32);
    let wrong_type = borrowed_memory::convert { src: floats.into(), dst: (&mut out).into(), n: 1 };
    let _ = kernels.launch_convert(gpu, geometry, wrong_type);

    let shared = borrowed_memory::convert { src: halves.into(), dst: floats.into(), n: 1 };
    let _ = kernels.launch_convert(gpu, geometry, shared);

    let read_only_view = borrowed_memory::convert { src: halves.into(), dst: (&view).into(), n: 1 };
    let _ = kernels.launch_convert(gpu, geometry, read_only_view);
}

fn main() {}
