//! An entry whose reach depends on data: its typed launcher is `unsafe`, what kda can check is
//! still checked, a safe launch of it is refused, and a handle that is not its own is refused.
use kda_runtime::cpu::CpuBackend;
use kda_runtime::{BackendError, GpuBackend, GpuBackendExt, KernelTable, LaunchGeometry};

#[derive(KernelTable)]
#[kernel_table(manifest = "trusted.toml")]
pub struct Gather;

fn main() {
    let gpu = CpuBackend::new()
        .with_kernel(gather::rows::ENTRY, |mut args| {
            let (n, d) = (args.scalar::<u32>(3)? as usize, args.scalar::<u32>(4)? as usize);
            let (ids, src) = (args.slice::<u32>(0)?.to_vec(), args.slice::<f32>(1)?.to_vec());
            let out = args.slice_mut::<f32>(2)?;
            for (row, &id) in ids[..n].iter().enumerate() {
                let id = id as usize;
                out[row * d..(row + 1) * d].copy_from_slice(&src[id * d..(id + 1) * d]);
            }
            Ok(())
        })
        .with_kernel(gather::copy::ENTRY, |_| Ok(()));
    let kernels = GatherKernels::resolve(&gpu).unwrap();
    let geometry = LaunchGeometry { grid: (1, 1, 1), block: (32, 1, 1), shared_mem_bytes: 0 };
    let ids = gpu.upload(&[2u32, 0]).unwrap();
    let src = gpu.upload(&[0.0f32, 1.0, 10.0, 11.0, 20.0, 21.0]).unwrap();
    let mut out = gpu.zeros::<f32>(4).unwrap();

    let args = gather::rows { ids: ids.view().into(), src: src.view().into(), out: out.view_mut().into(), n: 2, d: 2 };
    // SAFETY: ids 2 and 0 are rows of the three-row `src`.
    unsafe { kernels.launch_rows(&gpu, geometry, args) }.unwrap();
    assert_eq!(gpu.download::<f32>(&out).unwrap(), [20.0, 21.0, 0.0, 1.0]);

    // What kda can check still is: an output shorter than `n * d`.
    let mut short = gpu.zeros::<f32>(3).unwrap();
    let args = gather::rows { ids: ids.view().into(), src: src.view().into(), out: short.view_mut().into(), n: 2, d: 2 };
    // SAFETY: as above; the launch is refused before it runs.
    let error = unsafe { kernels.launch_rows(&gpu, geometry, args) }.unwrap_err();
    assert!(matches!(error, BackendError::Argument { param: "out", .. }), "{error}");

    // A safe launch of the entry is refused, naming the parameter and the condition.
    let args = &mut [ids.view().into(), src.view().into(), out.view_mut().into(), 2u32.into(), 2u32.into()];
    let error = gpu.launch(kernels.rows, geometry, args).unwrap_err();
    assert!(matches!(error, BackendError::Trusted { param: "src", .. }), "{error}");
    assert!(error.to_string().contains("depends on data kda cannot check"), "{error}");

    // A table whose public field was overwritten with another entry's handle: refused.
    let forged = GatherKernels { rows: kernels.copy, ..kernels };
    let args = gather::rows { ids: ids.view().into(), src: src.view().into(), out: out.view_mut().into(), n: 2, d: 2 };
    // SAFETY: as the first launch; the handle is refused before anything runs.
    let error = unsafe { forged.launch_rows(&gpu, geometry, args) }.unwrap_err();
    assert!(matches!(error, BackendError::ForeignResource { .. }), "{error}");
}
