//! A `nullable` buffer is an `Option` in the typed launcher: `None` reaches the kernel as a null
//! pointer, and its extent is checked only for `Some`.
use kda_runtime::cpu::CpuBackend;
use kda_runtime::{BackendError, GpuBackendExt, KernelTable, LaunchGeometry};

#[derive(KernelTable)]
#[kernel_table(manifest = "nullable.toml")]
pub struct Bias;

fn main() {
    let gpu = CpuBackend::new().with_kernel(bias::add::ENTRY, |mut args| {
        let (bias, n) = (args.nullable_slice::<f32>(0)?, args.scalar::<u32>(2)? as usize);
        let y = args.slice_mut::<f32>(1)?;
        for i in 0..n {
            y[i] = 2.0 * y[i] + bias.map_or(0.0, |bias| bias[i]);
        }
        Ok(())
    });
    let kernels = BiasKernels::resolve(&gpu).unwrap();
    let geometry = LaunchGeometry { grid: (1, 1, 1), block: (32, 1, 1), shared_mem_bytes: 0 };
    let bias = gpu.upload(&[0.5f32, -1.0]).unwrap();
    let mut y = gpu.upload(&[1.0f32, 2.0]).unwrap();
    kernels.launch_add(&gpu, geometry, bias::add { bias: Some(bias.view().into()), y: y.view_mut().into(), n: 2 }).unwrap();
    assert_eq!(gpu.download::<f32>(&y).unwrap(), [2.5, 3.0]);
    kernels.launch_add(&gpu, geometry, bias::add { bias: None, y: y.view_mut().into(), n: 2 }).unwrap();
    assert_eq!(gpu.download::<f32>(&y).unwrap(), [5.0, 6.0]);
    // `Some` view is checked as any: one element short of `n`.
    let short = gpu.upload(&[0.5f32]).unwrap();
    let error = kernels.launch_add(&gpu, geometry, bias::add { bias: Some(short.view().into()), y: y.view_mut().into(), n: 2 }).unwrap_err();
    assert!(matches!(error, BackendError::Argument { param: "bias", .. }), "{error}");
}
