//! The launcher of an entry with `safety` conditions is an `unsafe fn`: calling it outside
//! `unsafe` does not compile.
use kda_runtime::cpu::CpuBackend;
use kda_runtime::{GpuBackendExt, KernelTable, LaunchGeometry};

#[derive(KernelTable)]
#[kernel_table(manifest = "../pass/trusted.toml")]
pub struct Gather;

fn main() {
    let gpu = CpuBackend::new();
    let kernels = GatherKernels::resolve(&gpu).unwrap();
    let geometry = LaunchGeometry { grid: (1, 1, 1), block: (32, 1, 1), shared_mem_bytes: 0 };
    let (ids, src, mut out) = (gpu.upload(&[0u32]).unwrap(), gpu.upload(&[1.0f32]).unwrap(), gpu.zeros::<f32>(1).unwrap());
    let args = gather::rows { ids: ids.view().into(), src: src.view().into(), out: out.view_mut().into(), n: 1, d: 1 };
    let _ = kernels.launch_rows(&gpu, geometry, args);
}
