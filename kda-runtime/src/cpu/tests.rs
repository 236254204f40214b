use half::bf16;

use super::*;
use crate::{GpuBackendExt, try_kernel};

const AXPY: &[ParamKind] = &[ParamKind::ConstF32, ParamKind::MutF32, ParamKind::U32, ParamKind::F32];

/// `y[i] = a·x[i] + y[i]` for `i < n`, refusing buffers shorter than `n`.
fn axpy(mut args: CpuArgs<'_>) -> Result<(), KernelError> {
    let x = args.const_f32(0)?;
    let y = args.mut_f32(1)?;
    let n = args.u32(2)? as usize;
    let a = args.f32(3)?;
    if x.len() < n || y.len() < n {
        return Err(format!("n = {n} exceeds the buffers").into());
    }
    y[..n].iter_mut().zip(x).for_each(|(y, x)| *y += a * x);
    Ok(())
}

fn gpu() -> CpuBackend {
    CpuBackend::new()
        .with_kernel("blas", "axpy", AXPY, axpy)
        .with_kernel("blas", "noop", &[], |_| Ok(()))
        .with_kernel("other", "noop", &[], |_| Ok(()))
}

fn geometry() -> LaunchGeometry {
    LaunchGeometry::linear(4, 128)
}

/// The reason of a `BackendError::Launch` of `blas::axpy`; panics on any other outcome.
fn launch_refusal(gpu: &CpuBackend, args: &mut [KernelArg<'_>]) -> String {
    let kernel = gpu.lookup("blas", "axpy").unwrap();
    match gpu.launch(kernel, geometry(), args) {
        Err(BackendError::Launch { module, entry, reason }) => {
            assert_eq!((module.as_str(), entry.as_str()), ("blas", "axpy"));
            reason
        }
        other => panic!("expected a launch error, got {other:?}"),
    }
}

#[test]
fn describes_itself_and_synchronizes() {
    let gpu = gpu();
    assert_eq!(gpu.describe(), "CPU reference backend");
    gpu.synchronize().unwrap();
    assert!(format!("{gpu:?}").contains("blas::axpy"));
}

#[test]
fn lookup_tells_a_missing_module_from_a_missing_entry() {
    let gpu = gpu();
    assert!(gpu.has_module("blas"));
    assert!(!gpu.has_module("norm"));
    assert!(gpu.lookup("blas", "axpy").is_ok());
    assert!(matches!(
        gpu.lookup("norm", "axpy"),
        Err(LookupError::ModuleNotCarried { module }) if module == "norm"
    ));
    assert!(matches!(
        gpu.lookup("blas", "gemm"),
        Err(LookupError::EntryNotInModule { module, entry }) if module == "blas" && entry == "gemm"
    ));
    assert_eq!(try_kernel(&gpu, "blas", "gemm").unwrap(), None);
}

#[test]
fn without_removes_an_entry_then_the_emptied_module() {
    let gpu = gpu().without("blas", "noop");
    assert!(gpu.has_module("blas"));
    assert!(matches!(gpu.lookup("blas", "noop"), Err(LookupError::EntryNotInModule { .. })));
    let gpu = gpu.without("other", "noop").without("absent", "noop");
    assert!(!gpu.has_module("other"));
    assert!(matches!(gpu.lookup("other", "noop"), Err(LookupError::ModuleNotCarried { .. })));
    assert!(gpu.lookup("blas", "axpy").is_ok());
}

#[test]
fn a_handle_issued_before_without_is_refused_after_it() {
    let gpu = gpu();
    let noop = gpu.lookup("other", "noop").unwrap();
    let gpu = gpu.without("other", "noop");
    assert!(matches!(
        gpu.launch(noop, geometry(), &mut []),
        Err(BackendError::UnknownHandle { index, .. }) if index == noop.index()
    ));
    // Registering it again issues a new, working handle.
    let gpu = gpu.with_kernel("other", "noop", &[], |_| Ok(()));
    let again = gpu.lookup("other", "noop").unwrap();
    assert_ne!(again, noop);
    gpu.launch(again, geometry(), &mut []).unwrap();
}

#[test]
fn a_registered_kernel_computes() {
    let gpu = gpu();
    let x = gpu.upload(&[1.0f32, 2.0, 3.0]).unwrap();
    let mut y = gpu.upload(&[10.0f32, 20.0, 30.0]).unwrap();
    let kernel = gpu.lookup("blas", "axpy").unwrap();
    gpu.launch(kernel, geometry(), &mut [(&x).into(), (&mut y).into(), 2u32.into(), 0.5f32.into()]).unwrap();
    assert_eq!(gpu.download::<f32>(&y).unwrap(), [10.5, 21.0, 30.0]);
}

#[test]
fn registering_an_entry_again_replaces_it() {
    let gpu = gpu().with_kernel("blas", "axpy", &[], |_| Err("replaced".into()));
    let kernel = gpu.lookup("blas", "axpy").unwrap();
    let error = gpu.launch(kernel, geometry(), &mut []).unwrap_err();
    assert!(error.to_string().contains("replaced"), "{error}");
}

#[test]
fn a_writable_buffer_may_fill_a_const_parameter() {
    let gpu = gpu();
    let mut x = gpu.upload(&[4.0f32]).unwrap();
    let mut y = gpu.upload(&[1.0f32]).unwrap();
    let kernel = gpu.lookup("blas", "axpy").unwrap();
    gpu.launch(kernel, geometry(), &mut [(&mut x).into(), (&mut y).into(), 1u32.into(), 1.0f32.into()])
        .unwrap();
    assert_eq!(gpu.download::<f32>(&y).unwrap(), [5.0]);
}

#[test]
fn a_wrong_argument_count_is_refused() {
    let gpu = gpu();
    let x = gpu.upload(&[1.0f32]).unwrap();
    let mut y = gpu.upload(&[1.0f32]).unwrap();
    let reason = launch_refusal(&gpu, &mut [(&x).into(), (&mut y).into(), 1u32.into()]);
    assert!(reason.contains("expected 4 arguments"), "{reason}");
    assert!(reason.contains("got 3"), "{reason}");
}

#[test]
fn a_read_only_buffer_for_a_written_parameter_is_refused() {
    let gpu = gpu();
    let x = gpu.upload(&[1.0f32]).unwrap();
    let y = gpu.upload(&[1.0f32]).unwrap();
    let reason = launch_refusal(&gpu, &mut [(&x).into(), (&y).into(), 1u32.into(), 1.0f32.into()]);
    assert_eq!(reason, "parameter 1: expected `f32*`, found `const f32*`", "{reason}");
    assert_eq!(gpu.download::<f32>(&y).unwrap(), [1.0]);
}

#[test]
fn a_wrong_scalar_kind_is_refused() {
    let gpu = gpu();
    let x = gpu.upload(&[1.0f32]).unwrap();
    let mut y = gpu.upload(&[1.0f32]).unwrap();
    let reason = launch_refusal(&gpu, &mut [(&x).into(), (&mut y).into(), 1i32.into(), 1.0f32.into()]);
    assert_eq!(reason, "parameter 2: expected `u32`, found `i32`");
}

#[test]
fn a_wrong_dtype_is_refused() {
    let gpu = gpu();
    let x = gpu.upload(&[bf16::ONE]).unwrap();
    let mut y = gpu.upload(&[1.0f32]).unwrap();
    let reason = launch_refusal(&gpu, &mut [(&x).into(), (&mut y).into(), 1u32.into(), 1.0f32.into()]);
    assert_eq!(reason, "parameter 0: expected `const f32*`, found `const bf16*`");
    let x = gpu.upload(&[1.0f32]).unwrap();
    let mut y = gpu.upload(&[bf16::ONE]).unwrap();
    let reason = launch_refusal(&gpu, &mut [(&x).into(), (&mut y).into(), 1u32.into(), 1.0f32.into()]);
    assert_eq!(reason, "parameter 1: expected `f32*`, found `bf16*`");
}

#[test]
fn a_buffer_of_another_backend_is_refused() {
    let gpu = gpu();
    let other = CpuBackend::new();
    let x = gpu.upload(&[1.0f32]).unwrap();
    let mut y = other.upload(&[1.0f32]).unwrap();
    let reason = launch_refusal(&gpu, &mut [(&x).into(), (&mut y).into(), 1u32.into(), 1.0f32.into()]);
    assert!(reason.starts_with("parameter 1: "), "{reason}");
    assert!(reason.contains("another backend"), "{reason}");
    assert_eq!(other.download::<f32>(&y).unwrap(), [1.0]);
}

#[test]
fn a_handle_of_another_backend_or_unknown_index_is_refused() {
    // Same registrations, so the foreign handle's index is valid here too: only its backend differs.
    let twin = gpu();
    let gpu = gpu();
    let foreign = twin.lookup("blas", "axpy").unwrap();
    assert!(matches!(gpu.launch(foreign, geometry(), &mut []), Err(BackendError::ForeignResource { .. })));
    let own = gpu.lookup("blas", "axpy").unwrap();
    let unknown = KernelHandle::new(own.backend(), 99);
    assert!(matches!(
        gpu.launch(unknown, geometry(), &mut []),
        Err(BackendError::UnknownHandle { index: 99, .. })
    ));
}

#[test]
fn a_kernel_error_becomes_a_launch_error() {
    let gpu = gpu();
    let x = gpu.upload(&[1.0f32]).unwrap();
    let mut y = gpu.upload(&[1.0f32]).unwrap();
    let reason = launch_refusal(&gpu, &mut [(&x).into(), (&mut y).into(), 2u32.into(), 1.0f32.into()]);
    assert_eq!(reason, "n = 2 exceeds the buffers");
}

#[test]
fn a_kernel_asking_for_the_wrong_argument_gets_an_error() {
    let gpu = CpuBackend::new()
        .with_kernel("k", "wrong_kind", &[ParamKind::U32], |mut args| args.f32(0).map(drop))
        .with_kernel("k", "out_of_range", &[ParamKind::U32], |mut args| args.u32(1).map(drop))
        .with_kernel("k", "twice", &[ParamKind::MutF32], |mut args| {
            args.mut_f32(0)?;
            args.mut_f32(0).map(drop)
        })
        .with_kernel("k", "shared_twice", &[ParamKind::ConstF32, ParamKind::I32], |mut args| {
            let (a, b) = (args.const_f32(0)?, args.const_f32(0)?);
            let (i, j) = (args.i32(1)?, args.i32(1)?);
            assert_eq!((a.len(), b.len(), i, j, args.len()), (1, 1, -3, -3, 2));
            Ok(())
        });
    let run = |entry: &str, args: &mut [KernelArg<'_>]| {
        let kernel = gpu.lookup("k", entry).unwrap();
        gpu.launch(kernel, geometry(), args).map_err(|e| e.to_string())
    };
    let wrong = run("wrong_kind", &mut [1u32.into()]).unwrap_err();
    assert!(wrong.ends_with("argument 0 is a `u32`, not a `f32`"), "{wrong}");
    let range = run("out_of_range", &mut [1u32.into()]).unwrap_err();
    assert!(range.ends_with("argument 1 asked for, but the launch has 1"), "{range}");
    let mut buffer = gpu.zeros::<f32>(1).unwrap();
    let twice = run("twice", &mut [(&mut buffer).into()]).unwrap_err();
    assert!(twice.ends_with("argument 0 was already taken"), "{twice}");
    let shared = gpu.zeros::<f32>(1).unwrap();
    run("shared_twice", &mut [(&shared).into(), (-3i32).into()]).unwrap();
}

#[test]
fn copies_round_trip_and_check_sizes() {
    let gpu = gpu();
    let data = [bf16::from_f32(1.5), bf16::from_f32(-2.0)];
    let buffer = gpu.upload(&data).unwrap();
    assert_eq!(gpu.download::<bf16>(&buffer).unwrap(), data);
    let mut short = [0u8; 2];
    assert!(matches!(gpu.copy_to_host(&buffer, &mut short), Err(BackendError::SizeMismatch { .. })));
}
