use super::*;
use crate::fixtures::{AXPY, AXPY_SIGNATURE, EMPTY, signed};
use crate::{GpuBackendExt, ResolveError, Resolver, try_kernel};

/// A table of one required signed entry and one optional unsigned one.
struct Blas;

/// `blas::noop`, without a signature.
const NOOP: KernelEntry = KernelEntry { required: false, ..KernelEntry::named("blas", "noop") };

impl KernelTable for Blas {
    type Kernels = (KernelHandle, Option<KernelHandle>);
    const NAME: &'static str = "test";
    const ENTRIES: &'static [KernelEntry] = &[AXPY, NOOP];

    fn resolve(gpu: &dyn GpuBackend) -> Result<Self::Kernels, ResolveError> {
        let mut resolver = Resolver::new(gpu, Self::NAME, "kernels.toml");
        let axpy = resolver.required(&AXPY);
        let noop = resolver.optional(&NOOP);
        resolver.finish(axpy.map(|axpy| (axpy, noop)))
    }
}

fn geometry() -> LaunchGeometry {
    LaunchGeometry::linear(4, 128)
}

#[test]
fn table_entries_launch_checked_and_only_accepted_launches_are_recorded() {
    let gpu = RecordingBackend::new().with_table::<Blas>();
    let (axpy, noop) = Blas::resolve(&gpu).unwrap();
    assert!(noop.is_some());
    let x = gpu.zeros::<f32>(4).unwrap();
    let mut y = gpu.zeros::<f32>(4).unwrap();
    let short =
        gpu.launch(axpy, geometry(), &mut [x.view().into(), y.view_mut().into(), 5u32.into(), 1f32.into()]);
    assert!(matches!(short, Err(BackendError::Argument { param: "x", .. })), "{short:?}");
    assert!(gpu.launches().is_empty());

    gpu.launch(axpy, geometry(), &mut [x.slice(1..3).into(), y.view_mut().into(), 2u32.into(), 1f32.into()])
        .unwrap();
    let buffer = |len, writable| RecordedArg::Buffer { dtype: DType::F32, len, writable };
    let expected = RecordedLaunch {
        stream: 0,
        module: "blas".into(),
        entry: "axpy".into(),
        geometry: geometry(),
        args: vec![buffer(2, false), buffer(4, true), RecordedArg::from(2u32), RecordedArg::from(1.0f32)],
    };
    assert_eq!(gpu.launches(), [expected]);
    assert_eq!(gpu.launched(), ["blas::axpy"]);
}

#[test]
fn entries_without_a_signature_need_launch_unchecked() {
    let gpu = RecordingBackend::new().with_kernel("blas", "noop");
    let noop = gpu.lookup(&NOOP).unwrap();
    let safe = gpu.launch(noop, geometry(), &mut [7u32.into()]);
    assert!(
        matches!(safe, Err(BackendError::NoSignature { ref entry }) if entry.entry == "noop"),
        "{safe:?}"
    );
    assert!(gpu.launches().is_empty());
    // SAFETY: the recording backend runs nothing; it only records the launch.
    unsafe { gpu.launch_unchecked(noop, geometry(), &mut [7u32.into(), (-1i32).into(), 9u64.into()]) }
        .unwrap();
    assert_eq!(
        gpu.launches()[0].args,
        [RecordedArg::from(7u32), RecordedArg::from(-1i32), RecordedArg::from(9u64)]
    );
}

#[test]
fn a_slice_outside_its_buffer_is_refused_even_unchecked() {
    let gpu = RecordingBackend::new().with_table::<Blas>();
    let axpy = gpu.lookup(&AXPY).unwrap();
    let x = gpu.zeros::<f32>(4).unwrap();
    let mut y = gpu.zeros::<f32>(4).unwrap();
    // Four elements, as the extent asks, but starting at element 2 of 4.
    let checked = gpu.launch(
        axpy,
        geometry(),
        &mut [x.slice(2..6).into(), y.view_mut().into(), 4u32.into(), 1f32.into()],
    );
    assert!(matches!(checked, Err(BackendError::SliceOutOfBounds { ref range, len: 4 }) if *range == (2..6)));
    // SAFETY: the recording backend runs nothing; it only records the launch.
    let unchecked = unsafe { gpu.launch_unchecked(axpy, geometry(), &mut [x.slice(2..6).into()]) };
    assert!(matches!(unchecked, Err(BackendError::SliceOutOfBounds { .. })), "{unchecked:?}");
    assert!(gpu.launches().is_empty());
}

/// `y += x` with `axpy` on `gpu`, over four elements.
fn add(gpu: &dyn GpuBackend, axpy: KernelHandle, x: &DeviceBuffer, y: &mut DeviceBuffer) {
    gpu.launch(axpy, geometry(), &mut [x.view().into(), y.view_mut().into(), 4u32.into(), 1f32.into()])
        .unwrap();
}

/// The stream each launch so far was issued on.
fn launch_streams(gpu: &RecordingBackend) -> Vec<usize> {
    gpu.launches().iter().map(|launch| launch.stream).collect()
}

#[test]
fn a_buffer_written_on_one_stream_is_waited_for_before_another_reads_it() {
    let gpu = RecordingBackend::new().with_table::<Blas>();
    let axpy = gpu.lookup(&AXPY).unwrap();
    let (a, b) = (gpu.new_stream().unwrap(), gpu.new_stream().unwrap());
    assert_eq!(a.lookup(&AXPY).unwrap(), axpy, "one device, one handle");
    let x = a.upload(&[1.0f32; 4]).unwrap();
    let mut y = a.zeros::<f32>(4).unwrap();
    let mut z = b.zeros::<f32>(4).unwrap();
    add(&*a, axpy, &x, &mut y);
    assert_eq!(gpu.waits(), []);
    add(&*b, axpy, &y, &mut z);
    assert_eq!(gpu.waits(), [RecordedWait { waiter: 2, on: 1, buffer: y.id() }]);
    assert_eq!(launch_streams(&gpu), [1, 2]);
    // The backend itself is stream 0; a stream opened from a stream is the next one.
    add(&gpu, axpy, &x, &mut z);
    let c = b.new_stream().unwrap();
    add(&*c, axpy, &x, &mut y);
    assert_eq!(launch_streams(&gpu), [1, 2, 0, 3]);
}

#[test]
fn streams_that_only_read_a_shared_buffer_do_not_wait_for_each_other() {
    let gpu = RecordingBackend::new().with_table::<Blas>();
    let axpy = gpu.lookup(&AXPY).unwrap();
    let weights = gpu.upload(&[0.5f32; 4]).unwrap();
    let (a, b) = (gpu.new_stream().unwrap(), gpu.new_stream().unwrap());
    let (mut y_a, mut y_b) = (a.zeros::<f32>(4).unwrap(), b.zeros::<f32>(4).unwrap());
    for _ in 0..3 {
        add(&*a, axpy, &weights, &mut y_a);
        add(&*b, axpy, &weights, &mut y_b);
    }
    // Each stream waits once for the upload on stream 0, and never for the other.
    let upload = |waiter| RecordedWait { waiter, on: 0, buffer: weights.id() };
    assert_eq!(gpu.waits(), [upload(1), upload(2)]);
    assert_eq!(launch_streams(&gpu), [1, 2, 1, 2, 1, 2]);
}

#[test]
fn a_write_after_a_read_on_another_stream_waits_for_it() {
    let gpu = RecordingBackend::new().with_table::<Blas>();
    let axpy = gpu.lookup(&AXPY).unwrap();
    let (a, b) = (gpu.new_stream().unwrap(), gpu.new_stream().unwrap());
    let mut x = a.upload(&[1.0f32; 4]).unwrap();
    let mut y = b.zeros::<f32>(4).unwrap();
    add(&*b, axpy, &x, &mut y);
    a.write(&[2.0f32; 4], &mut x).unwrap();
    let wait = |waiter, on| RecordedWait { waiter, on, buffer: x.id() };
    assert_eq!(gpu.waits(), [wait(2, 1), wait(1, 2)]);
    // A copy on the device reads and writes as a launch does.
    a.copy_on_device(y.view(), x.view_mut()).unwrap();
    assert_eq!(gpu.waits()[2..], [RecordedWait { waiter: 1, on: 2, buffer: y.id() }]);
}

#[test]
fn launches_on_one_stream_need_no_wait() {
    let gpu = RecordingBackend::new().with_table::<Blas>();
    let axpy = gpu.lookup(&AXPY).unwrap();
    let a = gpu.new_stream().unwrap();
    let (mut x, mut y) = (a.upload(&[1.0f32; 4]).unwrap(), a.zeros::<f32>(4).unwrap());
    for _ in 0..2 {
        add(&*a, axpy, &x, &mut y);
        add(&*a, axpy, &y, &mut x);
    }
    assert_eq!(a.download::<f32>(&x).unwrap(), [1.0; 4], "the recording backend computes nothing");
    assert_eq!(gpu.waits(), []);
    assert_eq!(launch_streams(&gpu), [1; 4]);
}

#[test]
fn another_signature_is_a_failed_lookup_never_an_absent_kernel() {
    const WRONG: KernelEntry = signed("blas", "axpy", &EMPTY);
    let gpu = RecordingBackend::new().with_table::<Blas>();
    let mismatch = try_kernel(&gpu, &WRONG).unwrap_err();
    assert!(matches!(mismatch, LookupError::SignatureMismatch { ref entry, .. } if **entry == WRONG));
    assert!(!mismatch.is_not_found());
    assert!(mismatch.to_string().contains("carried for `test.axpy` with other parameters"), "{mismatch}");
    // An equal signature, spelled out again, is the same contract.
    const SAME: crate::Signature =
        crate::Signature { params: AXPY_SIGNATURE.params, requires: AXPY_SIGNATURE.requires };
    assert_eq!(gpu.lookup(&signed("blas", "axpy", &SAME)).unwrap(), gpu.lookup(&AXPY).unwrap());
}
