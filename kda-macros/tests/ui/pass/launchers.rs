//! Typed launchers: named arguments, views of buffers, the checks at launch, and field names that
//! are prelude names (the derive's locals are hygienic).
use kda_runtime::cpu::CpuBackend;
use kda_runtime::{BackendError, GpuBackendExt, KernelHandle, KernelTable, LaunchGeometry};

#[derive(KernelTable)]
#[kernel_table(manifest = "launchers.toml", entry_points = 5, required = 4, optional = 1)]
pub struct Launchers;

fn main() {
    let gpu = CpuBackend::new()
        .with_kernel(launchers::scale::ENTRY, |mut args| {
            let (data, factor, n) = (args.mut_f32(0)?, args.const_f32(1)?[0], args.u32(2)?);
            data[..n as usize].iter_mut().for_each(|x| *x *= factor);
            Ok(())
        })
        .with_kernel(launchers::None::ENTRY, |_| Ok(()))
        .with_kernel(launchers::Err::ENTRY, |_| Ok(()))
        .with_kernel(&LaunchersKernels::ENTRIES[3], |_| Ok(()));
    let kernels = LaunchersKernels::resolve(&gpu).unwrap();
    let _: Option<KernelHandle> = kernels.Some;
    let _: KernelHandle = kernels.Ok;
    let geometry = LaunchGeometry { grid: (1, 1, 1), block: (32, 1, 1), shared_mem_bytes: 0 };

    let mut data = gpu.upload(&[1.0f32, 2.0, 3.0]).unwrap();
    let factor = gpu.upload(&[2.0f32]).unwrap();
    let args = launchers::scale { data: data.slice_mut(1..3).into(), factor: factor.view().into(), n: 2 };
    kernels.launch_scale(&gpu, geometry, args).unwrap();
    assert_eq!(gpu.download::<f32>(&data).unwrap(), [1.0, 4.0, 6.0]);

    // Three elements through a view of two: refused, naming the parameter, nothing written.
    let args = launchers::scale { data: data.slice_mut(1..3).into(), factor: factor.view().into(), n: 3 };
    let error = kernels.launch_scale(&gpu, geometry, args).unwrap_err();
    assert!(matches!(error, BackendError::Argument { param: "data", .. }), "{error}");
    assert!(error.to_string().starts_with("`launchers.scale.data`: expected at least 3 elements"), "{error}");
    // A block shape the kernel does not take.
    let wide = LaunchGeometry { block: (128, 1, 1), ..geometry };
    let args = launchers::scale { data: data.view_mut().into(), factor: factor.view().into(), n: 3 };
    let error = kernels.launch_scale(&gpu, wide, args).unwrap_err();
    assert!(matches!(error, BackendError::Requirement { requirement: "block.x == 32 || block.x == 64", .. }));
    assert_eq!(gpu.download::<f32>(&data).unwrap(), [1.0, 4.0, 6.0]);

    kernels.launch_None(&gpu, geometry, launchers::None { n: 1 }).unwrap();
    kernels.launch_Err(&gpu, geometry, launchers::Err { big: u64::MAX, signed: -1 }).unwrap();
    let x = gpu.upload(&[kda_runtime::bf16::ONE]).unwrap();
    let absent = kernels.launch_Some(&gpu, geometry, launchers::Some { x: x.view().into(), n: 1 }).unwrap_err();
    assert!(matches!(absent, BackendError::Absent { .. }), "{absent}");
    assert!(<Launchers as KernelTable>::ENTRIES[3].signature.is_none());
}
