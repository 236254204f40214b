//! A launch that does not match the kernel's params does not compile: an argument missing, a
//! scalar for a buffer, a shared borrow where the kernel writes.
use kda_runtime::cpu::CpuBackend;
use kda_runtime::{GpuBackendExt, LaunchGeometry};

#[derive(kda_runtime::KernelTable)]
#[kernel_table(manifest = "launcher_arguments.toml")]
pub struct LauncherArguments;

fn main() {
    let gpu = CpuBackend::new();
    let kernels = LauncherArgumentsKernels::resolve(&gpu).unwrap();
    let geometry = LaunchGeometry::linear(1, 32);
    let mut data = gpu.upload(&[1.0f32]).unwrap();
    let factor = gpu.upload(&[2.0f32]).unwrap();

    let missing = launcher_arguments::scale { data: data.view_mut().into(), factor: factor.view().into() };
    let _ = kernels.launch_scale(&gpu, geometry, missing);

    let scalar = launcher_arguments::scale { data: data.view_mut().into(), factor: 2.0f32, n: 1 };
    let _ = kernels.launch_scale(&gpu, geometry, scalar);

    let shared = launcher_arguments::scale { data: data.view().into(), factor: factor.view().into(), n: 1 };
    let _ = kernels.launch_scale(&gpu, geometry, shared);
}
