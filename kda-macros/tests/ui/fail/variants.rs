//! A variant group's generic launcher takes the declared element types only: `copy` is declared
//! for u8 and i64, not i8.
use kda_runtime::cpu::CpuBackend;
use kda_runtime::{GpuBackendExt, KernelTable, LaunchGeometry};

#[derive(KernelTable)]
#[kernel_table(manifest = "../pass/variants.toml")]
pub struct Elementwise;

fn main() {
    let gpu = CpuBackend::new();
    let kernels = ElementwiseKernels::resolve(&gpu).unwrap();
    let geometry = LaunchGeometry { grid: (1, 1, 1), block: (32, 1, 1), shared_mem_bytes: 0 };
    let (src, mut dst) = (gpu.upload(&[1i8]).unwrap(), gpu.zeros::<i8>(1).unwrap());
    let _ = kernels.launch_copy::<i8>(&gpu, geometry, elementwise::copy { src: src.view().into(), dst: dst.view_mut().into(), n: 1 });
}
