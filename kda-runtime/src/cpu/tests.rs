use half::bf16;

use super::*;
use crate::fixtures::{AXPY, EMPTY, contents, signed};
use crate::{DType, DeviceBuffer, GpuBackendExt, View, ViewMut, try_kernel};

/// `blas::noop` and `other::noop`: no parameters.
const NOOP: KernelEntry = signed("blas", "noop", &EMPTY);
const OTHER_NOOP: KernelEntry = signed("other", "noop", &EMPTY);
/// `blas::scale`, `y[i] *= factor`, whose manifest line gives no `params`.
const SCALE: KernelEntry = KernelEntry::named("blas", "scale");

/// `y[i] += a·x[i]` for `i < n` as far as the buffers go, then an error where `n` exceeds them:
/// a kernel that trusts its `n`, so only the signature check keeps a short buffer from a launch.
fn axpy(mut args: CpuArgs<'_>) -> Result<(), KernelError> {
    let x = args.const_f32(0)?;
    let y = args.mut_f32(1)?;
    let n = args.u32(2)? as usize;
    let a = args.f32(3)?;
    y.iter_mut().zip(x).take(n).for_each(|(y, x)| *y += a * x);
    if x.len() < n || y.len() < n {
        return Err(format!("n = {n} exceeds the buffers").into());
    }
    Ok(())
}

fn scale(mut args: CpuArgs<'_>) -> Result<(), KernelError> {
    let (y, factor) = (args.mut_f32(0)?, args.f32(1)?);
    y.iter_mut().for_each(|y| *y *= factor);
    Ok(())
}

fn gpu() -> CpuBackend {
    CpuBackend::new()
        .with_kernel(&AXPY, axpy)
        .with_kernel(&NOOP, |_| Ok(()))
        .with_kernel(&OTHER_NOOP, |_| Ok(()))
        .with_kernel(&SCALE, scale)
}

fn geometry() -> LaunchGeometry {
    LaunchGeometry::linear(4, 128)
}

/// The buffers of an `axpy` launch: `x = [1, 2, 3, 4]`, `y = [10, 20, 30, 40]`, and bf16 ones of
/// the same length for the wrong element type.
struct Buffers {
    x: DeviceBuffer,
    y: DeviceBuffer,
    x_bf16: DeviceBuffer,
}

/// The CPU backend with the kernels of [`gpu`], the handle of `blas::axpy`, and its buffers.
struct Axpy {
    gpu: CpuBackend,
    kernel: KernelHandle,
    buffers: Buffers,
}

impl Axpy {
    fn new() -> Self {
        Self::on(gpu())
    }

    /// On `gpu`, which carries `blas::axpy`.
    fn on(gpu: CpuBackend) -> Self {
        let kernel = gpu.lookup(&AXPY).unwrap();
        let buffers = Buffers {
            x: gpu.upload(&[1.0f32, 2.0, 3.0, 4.0]).unwrap(),
            y: gpu.upload(&[10.0f32, 20.0, 30.0, 40.0]).unwrap(),
            x_bf16: gpu.upload(&[bf16::ONE; 4]).unwrap(),
        };
        Self { gpu, kernel, buffers }
    }

    /// Launches `axpy` at `geometry` with the arguments `args` makes of the buffers.
    fn launch(
        &mut self,
        geometry: LaunchGeometry,
        args: impl for<'a> FnOnce(&'a mut Buffers) -> Vec<KernelArg<'a>>,
    ) -> Result<(), BackendError> {
        self.gpu.launch(self.kernel, geometry, &mut args(&mut self.buffers))
    }

    /// The error of a launch that must be refused; asserts it changed no buffer.
    #[track_caller]
    fn refused(
        &mut self,
        geometry: LaunchGeometry,
        args: impl for<'a> FnOnce(&'a mut Buffers) -> Vec<KernelArg<'a>>,
    ) -> BackendError {
        let before = self.contents();
        let error = self.launch(geometry, args).expect_err("the launch should be refused");
        assert_eq!(self.contents(), before, "{error}");
        error
    }

    fn contents(&self) -> Vec<Vec<u8>> {
        let Buffers { x, y, x_bf16 } = &self.buffers;
        contents(&self.gpu, &[x, y, x_bf16])
    }

    fn y(&self) -> Vec<f32> {
        self.gpu.download(&self.buffers.y).unwrap()
    }
}

/// The arguments of `axpy`, in order.
fn axpy_args<'a>(x: View<'a>, y: ViewMut<'a>, n: u32, a: f32) -> Vec<KernelArg<'a>> {
    vec![x.into(), y.into(), n.into(), a.into()]
}

/// `x`, `y`, `n = 4`, `a = 0.5`: arguments `axpy` accepts.
fn good(buffers: &mut Buffers) -> Vec<KernelArg<'_>> {
    axpy_args(buffers.x.view(), buffers.y.view_mut(), 4, 0.5)
}

/// `good` with argument `index` replaced by what `arg` makes of `x` and `x_bf16`.
fn replaced<'a>(
    buffers: &'a mut Buffers,
    index: usize,
    arg: impl FnOnce(&'a DeviceBuffer, &'a DeviceBuffer) -> KernelArg<'a>,
) -> Vec<KernelArg<'a>> {
    let Buffers { x, y, x_bf16 } = buffers;
    let (x, x_bf16) = (&*x, &*x_bf16);
    let mut args = axpy_args(x.view(), y.view_mut(), 4, 0.5);
    args[index] = arg(x, x_bf16);
    args
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
    assert!(gpu.lookup(&AXPY).is_ok());
    assert!(matches!(
        gpu.lookup(&KernelEntry::named("norm", "axpy")),
        Err(LookupError::ModuleNotCarried { module, .. }) if module == "norm"
    ));
    let gemm = KernelEntry::named("blas", "gemm");
    assert!(matches!(
        gpu.lookup(&gemm),
        Err(LookupError::EntryNotInModule { module, entry, .. }) if module == "blas" && entry == "gemm"
    ));
    assert_eq!(try_kernel(&gpu, &gemm).unwrap(), None);
}

#[test]
fn kernels_of_two_crates_with_one_name_are_carried_apart_by_namespace() {
    // Two crates' `blas::scale`: one scales by the factor, the other by twice the factor.
    const OURS: KernelEntry = KernelEntry { namespace: "ours@1.0.0:kernels.toml", ..SCALE };
    const THEIRS: KernelEntry = KernelEntry { namespace: "theirs@2.1.0:kernels.toml", ..SCALE };
    let gpu = CpuBackend::new().with_kernel(&OURS, scale).with_kernel(&THEIRS, |mut args| {
        let (y, factor) = (args.mut_f32(0)?, args.f32(1)?);
        y.iter_mut().for_each(|y| *y *= 2.0 * factor);
        Ok(())
    });
    let (ours, theirs) = (gpu.lookup(&OURS).unwrap(), gpu.lookup(&THEIRS).unwrap());
    assert_ne!(ours, theirs);
    let mut y = gpu.upload(&[1.0f32, 2.0]).unwrap();
    for kernel in [ours, theirs] {
        // SAFETY: the CPU backend checks every argument as it binds it.
        unsafe { gpu.launch_unchecked(kernel, geometry(), &mut [(&mut y).into(), 3.0f32.into()]) }.unwrap();
    }
    assert_eq!(gpu.download::<f32>(&y).unwrap(), [18.0, 36.0]);
    // Neither is the kernel of the empty namespace, and the error says which one was asked for.
    let error = gpu.lookup(&SCALE).unwrap_err();
    assert_eq!(error.to_string(), "module `blas` is not built for this target");
    let elsewhere = KernelEntry { namespace: "other@0.1.0:kernels.toml", ..SCALE };
    let error = gpu.lookup(&elsewhere).unwrap_err();
    assert_eq!(error.to_string(), "module `blas` of `other@0.1.0:kernels.toml` is not built for this target");
    let absent = KernelEntry { entry: "axpy", ..OURS };
    let error = gpu.lookup(&absent).unwrap_err();
    assert_eq!(error.to_string(), "module `blas` of `ours@1.0.0:kernels.toml` has no entry point `axpy`");
    assert!(format!("{gpu:?}").contains("blas::scale (theirs@2.1.0:kernels.toml)"), "{gpu:?}");
    // Emulating a target without the kernel goes by name, in every namespace.
    let gpu = gpu.without("blas", "scale");
    assert!(!gpu.has_module("blas"));
    assert!(gpu.lookup(&OURS).is_err() && gpu.lookup(&THEIRS).is_err());
}

#[test]
fn without_removes_an_entry_then_the_emptied_module() {
    let gpu = gpu().without("blas", "noop");
    assert!(gpu.has_module("blas"));
    assert!(matches!(gpu.lookup(&NOOP), Err(LookupError::EntryNotInModule { .. })));
    let gpu = gpu.without("other", "noop").without("absent", "noop");
    assert!(!gpu.has_module("other"));
    assert!(matches!(gpu.lookup(&OTHER_NOOP), Err(LookupError::ModuleNotCarried { .. })));
    assert!(gpu.lookup(&AXPY).is_ok());
}

#[test]
fn a_handle_issued_before_without_is_refused_after_it() {
    let gpu = gpu();
    let noop = gpu.lookup(&OTHER_NOOP).unwrap();
    let gpu = gpu.without("other", "noop");
    assert!(matches!(
        gpu.launch(noop, geometry(), &mut []),
        Err(BackendError::UnknownHandle { index, .. }) if index == noop.index()
    ));
    // Registering it again issues a new, working handle.
    let gpu = gpu.with_kernel(&OTHER_NOOP, |_| Ok(()));
    let again = gpu.lookup(&OTHER_NOOP).unwrap();
    assert_ne!(again, noop);
    gpu.launch(again, geometry(), &mut []).unwrap();
}

#[test]
fn a_registered_kernel_computes() {
    let mut axpy = Axpy::new();
    axpy.launch(geometry(), good).unwrap();
    assert_eq!(axpy.y(), [10.5, 21.0, 31.5, 42.0]);
}

#[test]
fn slices_give_the_kernel_their_elements_only() {
    let mut axpy = Axpy::new();
    axpy.launch(geometry(), |b| axpy_args(b.x.slice(1..3), b.y.slice_mut(2..4), 2, 1.0)).unwrap();
    assert_eq!(axpy.y(), [10.0, 20.0, 32.0, 43.0]);
}

#[test]
fn registering_an_entry_again_replaces_it() {
    let mut axpy = Axpy::on(gpu().with_kernel(&AXPY, |_| Err("replaced".into())));
    let error = axpy.launch(geometry(), good).unwrap_err();
    assert!(error.to_string().contains("replaced"), "{error}");
}

#[test]
fn a_writable_buffer_may_fill_a_const_parameter() {
    let mut axpy = Axpy::new();
    axpy.launch(geometry(), |b| vec![b.x.view_mut().into(), b.y.view_mut().into(), 1u32.into(), 1f32.into()])
        .unwrap();
    assert_eq!(axpy.y(), [11.0, 20.0, 30.0, 40.0]);
}

#[test]
fn refused_launches_change_no_buffer() {
    let mut axpy = Axpy::new();
    let param = |error: BackendError| match error {
        BackendError::Argument { entry, param, .. } if *entry == AXPY => param,
        other => panic!("expected an argument error of `axpy`, got {other:?}"),
    };
    let few = axpy.refused(geometry(), |b| good(b).into_iter().take(3).collect());
    assert!(matches!(few, BackendError::ArgumentCount { found: 3, .. }), "{few:?}");
    // A wrong scalar kind, element type, access; views shorter than `n`.
    assert_eq!(param(axpy.refused(geometry(), |b| replaced(b, 2, |_, _| 4i32.into()))), "n");
    assert_eq!(param(axpy.refused(geometry(), |b| replaced(b, 0, |_, bf16| bf16.view().into()))), "x");
    assert_eq!(param(axpy.refused(geometry(), |b| replaced(b, 2, |_, _| 5u32.into()))), "x");
    let read_only_y =
        axpy.refused(geometry(), |b| vec![b.x.view().into(), b.y.view().into(), 4u32.into(), 1f32.into()]);
    assert_eq!(param(read_only_y), "y");
    assert_eq!(param(axpy.refused(geometry(), |b| axpy_args(b.x.view(), b.y.slice_mut(0..3), 4, 1.0))), "y");
    let wide = LaunchGeometry::linear(4, 2048);
    let requirement = axpy.refused(wide, good);
    assert!(
        matches!(requirement, BackendError::Requirement { requirement: "block.x <= 1024", .. }),
        "{requirement:?}"
    );
}

#[test]
fn a_slice_outside_its_buffer_is_refused_at_launch() {
    let mut axpy = Axpy::new();
    // Four elements, as `n` asks, but from element 2 of 4: the signature check cannot see it.
    let past_x = axpy.refused(geometry(), |b| replaced(b, 0, |x, _| x.slice(2..6).into()));
    assert!(
        matches!(past_x, BackendError::SliceOutOfBounds { ref range, len: 4 } if *range == (2..6)),
        "{past_x:?}"
    );
    let past_y = axpy.refused(geometry(), |b| axpy_args(b.x.view(), b.y.slice_mut(3..7), 4, 1.0));
    assert!(matches!(past_y, BackendError::SliceOutOfBounds { len: 4, .. }), "{past_y:?}");
    #[allow(clippy::reversed_empty_ranges, reason = "a reversed range is what the launch must refuse")]
    let reversed = axpy.refused(geometry(), |b| axpy_args(b.x.view(), b.y.slice_mut(3..1), 0, 1.0));
    assert!(matches!(reversed, BackendError::SliceOutOfBounds { .. }), "{reversed:?}");
}

#[test]
fn an_entry_without_a_signature_runs_only_unchecked() {
    let gpu = gpu();
    let kernel = gpu.lookup(&SCALE).unwrap();
    let mut y = gpu.upload(&[1.0f32, 2.0]).unwrap();
    let safe = gpu.launch(kernel, geometry(), &mut [(&mut y).into(), 3f32.into()]);
    assert!(matches!(safe, Err(BackendError::NoSignature { ref entry }) if **entry == SCALE), "{safe:?}");
    assert_eq!(gpu.download::<f32>(&y).unwrap(), [1.0, 2.0]);
    // SAFETY: the CPU backend checks views and the kernel reads its arguments through checked
    // accessors; `scale` takes exactly these.
    unsafe { gpu.launch_unchecked(kernel, geometry(), &mut [(&mut y).into(), 3f32.into()]) }.unwrap();
    assert_eq!(gpu.download::<f32>(&y).unwrap(), [3.0, 6.0]);
}

#[test]
fn an_unchecked_launch_skips_the_signature_but_not_ownership() {
    let mut axpy = Axpy::new();
    let (kernel, gpu) = (axpy.kernel, &axpy.gpu);
    let Buffers { x, y, .. } = &mut axpy.buffers;
    // SAFETY: the CPU backend bounds-checks views and `axpy` stops at the end of its buffers.
    let short =
        unsafe { gpu.launch_unchecked(kernel, geometry(), &mut axpy_args(x.view(), y.view_mut(), 5, 1.0)) };
    // The kernel ran, and wrote, before it noticed: what the signature check is there to prevent.
    match short {
        Err(BackendError::Launch { module, entry, reason }) => {
            assert_eq!([module, entry, reason], ["blas", "axpy", "n = 5 exceeds the buffers"]);
        }
        other => panic!("expected a launch error, got {other:?}"),
    }
    assert_eq!(axpy.y(), [11.0, 22.0, 33.0, 44.0]);
    let other = CpuBackend::new();
    let mut foreign = other.upload(&[1.0f32; 4]).unwrap();
    let args = &mut axpy_args(axpy.buffers.x.view(), foreign.view_mut(), 4, 1.0);
    // SAFETY: as above; the foreign buffer is refused before the kernel runs.
    let refused = unsafe { gpu.launch_unchecked(kernel, geometry(), args) };
    assert!(matches!(refused, Err(BackendError::ForeignResource { .. })), "{refused:?}");
    assert_eq!(other.download::<f32>(&foreign).unwrap(), [1.0; 4]);
}

#[test]
fn a_buffer_of_another_backend_is_refused() {
    let gpu = gpu();
    let other = CpuBackend::new();
    let x = gpu.upload(&[1.0f32]).unwrap();
    let mut y = other.upload(&[1.0f32]).unwrap();
    let kernel = gpu.lookup(&AXPY).unwrap();
    let error =
        gpu.launch(kernel, geometry(), &mut [(&x).into(), (&mut y).into(), 1u32.into(), 1.0f32.into()]);
    // Named by the buffer's id and the backend that allocated it, not by a debug dump.
    let named = format!("device buffer {} (allocated by {})", y.id(), y.backend());
    assert!(matches!(&error, Err(BackendError::ForeignResource { what, .. }) if *what == named), "{error:?}");
    let message = error.unwrap_err().to_string();
    assert!(message.contains("does not belong to backend #") && !message.contains("BackendId"), "{message}");
    assert_eq!(other.download::<f32>(&y).unwrap(), [1.0]);
}

#[test]
fn a_handle_of_another_backend_or_unknown_index_is_refused() {
    // Same registrations, so the foreign handle's index is valid here too: only its backend differs.
    let twin = gpu();
    let gpu = gpu();
    let foreign = twin.lookup(&NOOP).unwrap();
    assert_eq!(foreign.index(), gpu.lookup(&NOOP).unwrap().index());
    assert!(matches!(gpu.launch(foreign, geometry(), &mut []), Err(BackendError::ForeignResource { .. })));
    let own = gpu.lookup(&AXPY).unwrap();
    let unknown = KernelHandle::new(own.backend(), 99);
    assert!(matches!(
        gpu.launch(unknown, geometry(), &mut []),
        Err(BackendError::UnknownHandle { index: 99, .. })
    ));
}

#[test]
fn a_kernel_asking_for_the_wrong_argument_gets_an_error() {
    let entry = |name| KernelEntry::named("k", name);
    let gpu = CpuBackend::new()
        .with_kernel(&entry("wrong_kind"), |mut args| args.f32(0).map(drop))
        .with_kernel(&entry("out_of_range"), |mut args| args.u32(1).map(drop))
        .with_kernel(&entry("twice"), |mut args| {
            args.mut_f32(0)?;
            args.mut_f32(0).map(drop)
        })
        .with_kernel(&entry("shared_twice"), |mut args| {
            let (a, b) = (args.const_f32(0)?, args.const_f32(0)?);
            let (i, j) = (args.i32(1)?, args.i32(1)?);
            assert_eq!((a.len(), b.len(), i, j, args.len()), (1, 1, -3, -3, 2));
            Ok(())
        });
    let run = |name, args: &mut [KernelArg<'_>]| {
        let kernel = gpu.lookup(&entry(name)).unwrap();
        // SAFETY: the CPU backend checks views and the kernels read their arguments through
        // checked accessors, so a wrong argument list is an `Err`.
        unsafe { gpu.launch_unchecked(kernel, geometry(), args) }.map_err(|e| e.to_string())
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
    assert_eq!(buffer.dtype(), DType::Bf16);
    assert_eq!(gpu.download::<bf16>(&buffer).unwrap(), data);
    let mut short = [0u8; 2];
    assert!(matches!(gpu.copy_to_host(&buffer, &mut short), Err(BackendError::SizeMismatch { .. })));
}
