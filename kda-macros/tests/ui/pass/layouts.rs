//! A strided input's extent is its layout's reach: a transposed view and a broadcast row launch
//! on exactly the elements they address, a shorter input is refused, and a layout the host does
//! not know (a plain upload) is refused with the way to make it known.
use kda_runtime::cpu::CpuBackend;
use kda_runtime::{BackendError, GpuBackendExt, KernelTable, LaunchGeometry};

#[derive(KernelTable)]
#[kernel_table(manifest = "layouts.toml")]
pub struct Unary;

fn main() {
    let gpu = CpuBackend::new().with_kernel(unary::neg::ENTRY, |mut args| {
        let (numel, rank) = (args.scalar::<u64>(0)? as usize, args.scalar::<u64>(1)? as usize);
        let (info, inp) = (args.slice::<u64>(2)?.to_vec(), args.slice::<f32>(3)?.to_vec());
        let (dims, strides) = info.split_at(rank);
        let out = args.slice_mut::<f32>(4)?;
        for (i, out) in out[..numel].iter_mut().enumerate() {
            let (mut rest, mut offset) = (i, 0);
            for axis in (0..rank).rev() {
                offset += (rest % dims[axis] as usize) * strides[axis] as usize;
                rest /= dims[axis] as usize;
            }
            *out = -inp[offset];
        }
        Ok(())
    });
    let kernels = UnaryKernels::resolve(&gpu).unwrap();
    let geometry = LaunchGeometry { grid: (1, 1, 1), block: (32, 1, 1), shared_mem_bytes: 0 };
    // A 2 × 3 input stored column-major: dims [2, 3], strides [1, 2]; it reaches all 6 elements.
    let transposed = gpu.upload_const(&[2u64, 3, 1, 2]).unwrap();
    let inp = gpu.upload(&[1.0f32, 4.0, 2.0, 5.0, 3.0, 6.0]).unwrap();
    let mut out = gpu.zeros::<f32>(6).unwrap();
    let args = unary::neg { numel: 6, num_dims: 2, info: transposed.view().into(), inp: inp.view().into(), out: out.view_mut().into() };
    kernels.launch_neg(&gpu, geometry, args).unwrap();
    assert_eq!(gpu.download::<f32>(&out).unwrap(), [-1.0, -2.0, -3.0, -4.0, -5.0, -6.0]);

    // One row broadcast over 2: strides [0, 1] reach 3 elements, so a 3-element input launches.
    let broadcast = gpu.upload_const(&[2u64, 3, 0, 1]).unwrap();
    let row = gpu.upload(&[1.0f32, 2.0, 3.0]).unwrap();
    let args = unary::neg { numel: 6, num_dims: 2, info: broadcast.view().into(), inp: row.view().into(), out: out.view_mut().into() };
    kernels.launch_neg(&gpu, geometry, args).unwrap();
    assert_eq!(gpu.download::<f32>(&out).unwrap(), [-1.0, -2.0, -3.0, -1.0, -2.0, -3.0]);

    // The transposed layout over the 3-element row: it would read past it. Refused.
    let args = unary::neg { numel: 6, num_dims: 2, info: transposed.view().into(), inp: row.view().into(), out: out.view_mut().into() };
    let error = kernels.launch_neg(&gpu, geometry, args).unwrap_err();
    assert!(matches!(error, BackendError::Argument { param: "inp", .. }), "{error}");
    assert!(error.to_string().contains("at least 6 elements"), "{error}");

    // The same layout uploaded as a plain buffer, which a kernel could have rewritten: refused.
    let plain = gpu.upload(&[2u64, 3, 1, 2]).unwrap();
    let args = unary::neg { numel: 6, num_dims: 2, info: plain.view().into(), inp: inp.view().into(), out: out.view_mut().into() };
    let error = kernels.launch_neg(&gpu, geometry, args).unwrap_err().to_string();
    assert!(error.contains("`upload_const`"), "{error}");
}
