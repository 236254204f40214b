//! One manifest entry per kernel for all its element types: a handle and a launcher per variant,
//! and one launcher generic over the declared types (`tests/ui/fail/variants.rs`: no other).
use kda_runtime::cpu::CpuBackend;
use kda_runtime::{BackendError, GpuBackendExt, KernelTable, LaunchGeometry, f16};

#[derive(KernelTable)]
#[kernel_table(manifest = "variants.toml")]
pub struct Elementwise;

fn main() {
    assert_eq!((ElementwiseKernels::ENTRY_POINTS, ElementwiseKernels::OPTIONAL_ENTRY_POINTS), (5, 3));
    let gpu = CpuBackend::new()
        .with_kernel(elementwise::affine_f32::ENTRY, |mut args| {
            let (n, mul) = (args.scalar::<u64>(0)? as usize, args.scalar::<f32>(3)?);
            let x = args.slice::<f32>(1)?.to_vec();
            args.slice_mut::<f32>(2)?[..n].iter_mut().zip(&x).for_each(|(y, x)| *y = x * mul);
            Ok(())
        })
        .with_kernel(elementwise::affine_f16::ENTRY, |mut args| {
            let (n, mul) = (args.scalar::<u64>(0)? as usize, args.scalar::<f16>(3)?);
            let x = args.slice::<f16>(1)?.to_vec();
            args.slice_mut::<f16>(2)?[..n].iter_mut().zip(&x).for_each(|(y, x)| *y = *x * mul);
            Ok(())
        })
        .with_kernel(elementwise::copy_u8::ENTRY, |mut args| {
            let src = args.slice::<u8>(0)?.to_vec();
            args.slice_mut::<u8>(1)?.copy_from_slice(&src);
            Ok(())
        })
        .with_kernel(elementwise::copy_i64::ENTRY, |mut args| {
            let src = args.slice::<i64>(0)?.to_vec();
            args.slice_mut::<i64>(1)?.copy_from_slice(&src);
            Ok(())
        });
    let kernels = ElementwiseKernels::resolve(&gpu).unwrap();
    // The target lacks the bf16 variant only.
    assert!(kernels.affine_f32.is_some() && kernels.affine_f16.is_some() && kernels.affine_bf16.is_none());
    let geometry = LaunchGeometry { grid: (1, 1, 1), block: (32, 1, 1), shared_mem_bytes: 0 };

    // The generic launcher picks the variant from the type of `mul`.
    let x = gpu.upload(&[f16::from_f32(1.5), f16::from_f32(-2.0)]).unwrap();
    let mut y = gpu.zeros::<f16>(2).unwrap();
    let args = elementwise::affine { n: 2, x: x.view().into(), y: y.view_mut().into(), mul: f16::from_f32(2.0) };
    kernels.launch_affine(&gpu, geometry, args).unwrap();
    assert_eq!(gpu.download::<f16>(&y).unwrap(), [f16::from_f32(3.0), f16::from_f32(-4.0)]);
    let x = gpu.upload(&[1.5f32, -2.0]).unwrap();
    let mut y = gpu.zeros::<f32>(2).unwrap();
    kernels.launch_affine(&gpu, geometry, elementwise::affine { n: 2, x: x.view().into(), y: y.view_mut().into(), mul: 3.0f32 }).unwrap();
    assert_eq!(gpu.download::<f32>(&y).unwrap(), [4.5, -6.0]);
    // Views of another element type than the variant's: refused, as for any launch.
    let error = kernels
        .launch_affine(&gpu, geometry, elementwise::affine { n: 2, x: x.view().into(), y: y.view_mut().into(), mul: f16::ONE })
        .unwrap_err();
    assert!(matches!(error, BackendError::Argument { param: "x", .. }), "{error}");
    // The variant the target lacks: an `Err` naming it.
    let args = elementwise::affine { n: 2, x: x.view().into(), y: y.view_mut().into(), mul: kda_runtime::bf16::ONE };
    let error = kernels.launch_affine(&gpu, geometry, args).unwrap_err();
    assert!(matches!(&error, BackendError::Absent { entry } if entry.entry == "affine_bf16"), "{error}");

    // No scalar of type `T`: the type is named.
    let src = gpu.upload(&[7i64, -8, 9]).unwrap();
    let mut dst = gpu.zeros::<i64>(3).unwrap();
    kernels.launch_copy::<i64>(&gpu, geometry, elementwise::copy { src: src.view().into(), dst: dst.view_mut().into(), n: 3 }).unwrap();
    assert_eq!(gpu.download::<i64>(&dst).unwrap(), [7, -8, 9]);
    // And each variant still has its own launcher.
    let bytes = gpu.upload(&[1u8, 2]).unwrap();
    let mut out = gpu.zeros::<u8>(2).unwrap();
    kernels.launch_copy_u8(&gpu, geometry, elementwise::copy_u8 { src: bytes.view().into(), dst: out.view_mut().into(), n: 2 }).unwrap();
    assert_eq!(gpu.download::<u8>(&out).unwrap(), [1, 2]);
}
