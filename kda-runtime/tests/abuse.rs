//! Safe code against the launch contract, on the CPU and recording backends: each test is an attack
//! written with safe public API only, which once reached undefined behaviour (or a panic) and is
//! now refused with an `Err`. The emulator's part is the model crate's `tests/abuse.rs`. Miri runs
//! this file where a nightly toolchain has it (`.ci/run`).

use kda_runtime::cpu::CpuBackend;
use kda_runtime::host::HostStorage;
use kda_runtime::record::RecordingBackend;
use kda_runtime::replay::LaunchRecorder;
use kda_runtime::signature::{Access, KernelParam, Op, ScalarKind, Signature};
use kda_runtime::{
    BackendError, DType, DeviceBuffer, DeviceGraph, GpuBackend, GpuBackendExt, KernelArg, KernelEntry,
    KernelHandle, LaunchGeometry, LookupError, View, ViewMut, bf16,
};

/// `f32 dst[n], u32 n, f32 value`, as a manifest would give `fill`.
const FILL: Signature = Signature {
    params: &[
        KernelParam::buffer("dst", DType::F32, Access::Write, "n", &[Op::Scalar(1)]),
        KernelParam::scalar("n", ScalarKind::U32),
        KernelParam::scalar("value", ScalarKind::F32),
    ],
    requires: &[],
};

const FILL_ENTRY: KernelEntry =
    KernelEntry { table: "abuse", signature: Some(&FILL), ..KernelEntry::named("ops", "fill") };

/// A CPU backend whose `fill` writes `value` into the first `n` elements of `dst`.
fn cpu() -> CpuBackend {
    CpuBackend::new().with_kernel(&FILL_ENTRY, |mut args| {
        let (n, value) = (args.u32(1)? as usize, args.f32(2)?);
        args.mut_f32(0)?[..n].fill(value);
        Ok(())
    })
}

fn fill(
    gpu: &dyn GpuBackend,
    kernel: KernelHandle,
    dst: &mut DeviceBuffer,
    n: u32,
) -> Result<(), BackendError> {
    gpu.launch(kernel, LaunchGeometry::linear(n, 256), &mut [dst.view_mut().into(), n.into(), 1.5f32.into()])
}

#[test]
fn storage_replaced_by_a_shorter_one_shortens_its_buffer() {
    let gpu = cpu();
    let kernel = gpu.lookup(&FILL_ENTRY).unwrap();
    let mut dst = gpu.zeros::<f32>(16_384).unwrap();
    // The buffer still says 16,384 elements to anyone who kept its length: the storage is the one
    // place its length lives, so the launch sees 16.
    *dst.storage_mut::<HostStorage>().unwrap() = HostStorage::from_slice(&[0.0f32; 16]).unwrap();
    assert_eq!(dst.len(), 16);
    let error = fill(&gpu, kernel, &mut dst, 16_384).unwrap_err();
    assert!(error.to_string().contains("a view of 16 elements"), "{error}");
    // Storage of another element type makes a buffer of that type.
    *dst.storage_mut::<HostStorage>().unwrap() = HostStorage::from_slice(&[bf16::ZERO; 16_384]).unwrap();
    assert_eq!(dst.dtype(), DType::Bf16);
    let error = fill(&gpu, kernel, &mut dst, 16_384).unwrap_err();
    assert!(error.to_string().contains("bf16 elements"), "{error}");
    // Within what the storage holds, the launch runs.
    *dst.storage_mut::<HostStorage>().unwrap() = HostStorage::from_slice(&[0.0f32; 16]).unwrap();
    fill(&gpu, kernel, &mut dst, 16).unwrap();
    assert_eq!(gpu.download::<f32>(&dst).unwrap(), [1.5; 16]);
}

#[test]
fn a_signature_made_by_the_caller_is_not_the_one_registered() {
    // `dst` with an extent of 0: a launch checked against it would write past any buffer.
    static WEAK: Signature = Signature {
        params: &[
            KernelParam::buffer("dst", DType::F32, Access::Write, "0", &[Op::Literal(0)]),
            FILL.params[1],
            FILL.params[2],
        ],
        requires: &[],
    };
    let forged = KernelEntry { signature: Some(&WEAK), ..FILL_ENTRY };
    for gpu in
        [Box::new(cpu()) as Box<dyn GpuBackend>, Box::new(RecordingBackend::new().with_entry(&FILL_ENTRY))]
    {
        match gpu.lookup(&forged) {
            Err(LookupError::SignatureMismatch { .. }) => {}
            other => panic!("{}: a forged signature resolved: {other:?}", gpu.describe()),
        }
    }
}

/// The [`GpuBackend`] methods a wrapper of the caller's making forwards to the recording backend
/// in its field `$inner` unchanged (and its unchecked launches refused): each attack below writes
/// only the methods it changes.
macro_rules! forwarded_to_recording {
    ($inner:tt) => {
        fn has_module(&self, module: &str) -> bool {
            self.$inner.has_module(module)
        }
        fn lookup(&self, entry: &KernelEntry) -> Result<KernelHandle, LookupError> {
            self.$inner.lookup(entry)
        }
        fn alloc(&self, dtype: DType, len: usize) -> Result<DeviceBuffer, BackendError> {
            self.$inner.alloc(dtype, len)
        }
        fn copy_to_host(&self, src: &DeviceBuffer, dst: &mut [u8]) -> Result<(), BackendError> {
            self.$inner.copy_to_host(src, dst)
        }
        fn copy_on_device(&self, src: View<'_>, dst: ViewMut<'_>) -> Result<(), BackendError> {
            self.$inner.copy_on_device(src, dst)
        }
        fn launch(
            &self,
            kernel: KernelHandle,
            geometry: LaunchGeometry,
            args: &mut [KernelArg<'_>],
        ) -> Result<(), BackendError> {
            self.$inner.launch(kernel, geometry, args)
        }
        unsafe fn launch_unchecked(
            &self,
            _: KernelHandle,
            _: LaunchGeometry,
            _: &mut [KernelArg<'_>],
        ) -> Result<(), BackendError> {
            Err(BackendError::Replay("not forwarded".to_owned()))
        }
        fn synchronize(&self) -> Result<(), BackendError> {
            self.$inner.synchronize()
        }
    };
}

/// A backend that forwards to a recording backend with graphs, except that its `capture` hands back a graph
/// it captured earlier, of other launches on another buffer, which it then freed.
struct Smuggler {
    recording: RecordingBackend,
    kernel: KernelHandle,
}

impl Smuggler {
    /// The graph of a `fill` of a buffer that is freed when this returns.
    fn stale_graph(&self) -> Result<Option<Box<dyn DeviceGraph>>, BackendError> {
        let mut z = self.recording.zeros::<f32>(64)?;
        self.recording.capture(&mut |gpu| fill(gpu, self.kernel, &mut z, 64))
    }
}

impl GpuBackend for Smuggler {
    forwarded_to_recording!(recording);

    fn describe(&self) -> String {
        "a smuggler".to_owned()
    }
    fn copy_to_device(&self, src: &[u8], dst: &mut DeviceBuffer) -> Result<(), BackendError> {
        self.recording.copy_to_device(src, dst)
    }
    fn capture(
        &self,
        _work: &mut dyn FnMut(&dyn GpuBackend) -> Result<(), BackendError>,
    ) -> Result<Option<Box<dyn DeviceGraph>>, BackendError> {
        self.stale_graph()
    }
}

#[test]
fn a_graph_that_is_not_the_lists_own_does_not_launch() {
    let recording = RecordingBackend::new().with_entry(&FILL_ENTRY).with_graphs();
    let kernel = recording.lookup(&FILL_ENTRY).unwrap();
    let smuggler = Smuggler { recording, kernel };
    // An empty step, recorded and captured: the smuggler hands back the graph of a fill of a
    // buffer that no longer exists.
    let list = LaunchRecorder::new(&smuggler, &[], &[]).finish();
    let captured = list.capture(&smuggler, &[], &mut []).unwrap().expect("the recording backend has graphs");
    let error = captured.launch(&[], &mut []).expect_err("a graph of a freed buffer launched");
    assert!(error.to_string().contains("does not bind"), "{error}");
    assert_eq!(smuggler.recording.graph_launches(), 0);
}

#[test]
fn a_buffer_captured_exclusive_is_not_bound_as_shared() {
    let gpu = RecordingBackend::new().with_entry(&FILL_ENTRY).with_graphs();
    let kernel = gpu.lookup(&FILL_ENTRY).unwrap();
    let mut y = gpu.zeros::<f32>(64).unwrap();
    let recorder = LaunchRecorder::new(&gpu, &[], &[&y]);
    fill(&recorder, kernel, &mut y, 64).unwrap();
    let list = recorder.finish();
    let captured = list.capture(&gpu, &[], &mut [&mut y]).unwrap().expect("the recording backend has graphs");
    // `y`, which the graph writes, passed shared: the same ids in the same order once the two
    // lists are put together, and another borrow of `y` may be alive meanwhile.
    assert!(!captured.is_bound_to(&[&y], &[]));
    let error = captured.launch(&[&y], &mut []).expect_err("a written buffer was bound shared");
    assert!(error.to_string().contains("other buffers"), "{error}");
    captured.launch(&[], &mut [&mut y]).unwrap();
    assert_eq!(gpu.graph_launches(), 1);
}

/// `u32 rank, const u64 info[2 * rank], const f32 x[strided(info, rank)], f32 y[n], u32 n`: a
/// unary op over a strided input, as public kernel libraries write it (`i % dims[axis]`).
const STRIDED: Signature = Signature {
    params: &[
        KernelParam::scalar("rank", ScalarKind::U32),
        KernelParam::buffer(
            "info",
            DType::U64,
            Access::Read,
            "2 * rank",
            &[Op::Literal(2), Op::Scalar(0), Op::Mul],
        ),
        KernelParam::buffer(
            "x",
            DType::F32,
            Access::Read,
            "strided(info, rank)",
            &[Op::Scalar(0), Op::Strided(1, 1)],
        ),
        KernelParam::buffer("y", DType::F32, Access::Write, "n", &[Op::Scalar(4)]),
        KernelParam::scalar("n", ScalarKind::U32),
    ],
    requires: &[],
};

const STRIDED_ENTRY: KernelEntry =
    KernelEntry { table: "abuse", signature: Some(&STRIDED), ..KernelEntry::named("ops", "neg_strided") };

/// A recording backend of the caller's making that forwards everything, except that
/// `copy_to_device` writes other bytes than it is given: through `upload_const` it would make a
/// layout whose host copy says one thing while the memory holds another.
struct Liar(RecordingBackend);

impl GpuBackend for Liar {
    forwarded_to_recording!(0);

    fn describe(&self) -> String {
        "a liar".to_owned()
    }
    /// Strides of 0x80 where the caller wrote 1.
    fn copy_to_device(&self, src: &[u8], dst: &mut DeviceBuffer) -> Result<(), BackendError> {
        let lie: Vec<u8> = src.iter().map(|&byte| if byte == 1 { 0x80 } else { byte }).collect();
        self.0.copy_to_device(&lie, dst)
    }
}

#[test]
fn a_backend_of_the_callers_cannot_make_a_layout_whose_memory_is_not_its_host_copy() {
    let liar = Liar(RecordingBackend::new().with_entry(&STRIDED_ENTRY));
    // dims [2], strides [1] on the host; the lie would put strides [0x80] in memory.
    let error = liar.upload_const(&[2u64, 1]).expect_err("a caller's backend made a ConstBuffer");
    assert!(matches!(error, BackendError::Unavailable { .. }), "{error}");
    assert!(error.to_string().contains("only kda's own backends make a ConstBuffer"), "{error}");
    // Forwarded to the backend whose memory it uses, the upload is that backend's own: the memory
    // holds what the check reads.
    let layout = liar.0.upload_const(&[2u64, 1]).unwrap();
    let mut bytes = [0u8; 16];
    liar.copy_to_host(layout.buffer(), &mut bytes).unwrap();
    assert_eq!(bytes.as_slice(), layout.view().host_known().unwrap());
}

#[test]
fn a_strided_layout_with_a_zero_dim_is_refused_before_the_kernel_divides_by_it() {
    let gpu = RecordingBackend::new().with_entry(&STRIDED_ENTRY);
    let kernel = gpu.lookup(&STRIDED_ENTRY).unwrap();
    let (x, mut y) = (gpu.zeros::<f32>(0).unwrap(), gpu.zeros::<f32>(4).unwrap());
    let launch = |info: &[u64], x: &DeviceBuffer, y: &mut DeviceBuffer| {
        let info = gpu.upload_const(info).unwrap();
        let args = &mut [1u32.into(), info.view().into(), x.view().into(), y.view_mut().into(), 4u32.into()];
        gpu.launch(kernel, LaunchGeometry::linear(4, 32), args)
    };
    // An empty input and `n = 4`: the reach of dims [0] is nothing, and `i % 0` is the kernel's.
    let error = launch(&[0, 1], &x, &mut y).expect_err("a zero dim launched");
    assert!(error.to_string().contains("a dim of 0"), "{error}");
    assert!(gpu.launches().is_empty());
    let x = gpu.zeros::<f32>(4).unwrap();
    launch(&[4, 1], &x, &mut y).unwrap();
}

#[test]
fn a_bool_element_is_0_or_1_wherever_safe_code_writes_one() {
    for gpu in [Box::new(CpuBackend::new()) as Box<dyn GpuBackend>, Box::new(RecordingBackend::new())] {
        let mut flags = gpu.alloc(DType::Bool, 3).unwrap();
        let error = gpu.copy_to_device(&[0, 1, 0x80], &mut flags).expect_err("a bool of 0x80 was copied");
        assert!(
            matches!(error, BackendError::InvalidElement { dtype: DType::Bool, index: 2, byte: 0x80 }),
            "{error}"
        );
        gpu.copy_to_device(&[1, 0, 1], &mut flags).unwrap();
        // Memory a kernel is to write whole, whatever its poison, holds bools.
        let poisoned = gpu.alloc_for_write(DType::Bool, 3).unwrap();
        let mut bytes = [0xAA; 3];
        gpu.copy_to_host(&poisoned, &mut bytes).unwrap();
        assert!(bytes.iter().all(|&byte| byte <= 1), "{}: {bytes:?}", gpu.describe());
    }
    // Host storage made by hand, which a buffer of any backend id can wrap, holds bools too.
    assert_eq!(HostStorage::filled(DType::Bool, 2, 0xFF).unwrap().bytes(), [1, 1]);
    assert_eq!(HostStorage::filled(DType::U8, 2, 0xFF).unwrap().bytes(), [0xFF, 0xFF]);
}

/// `const void blocks[nbytes], u32 nbytes`: quantized blocks the kernel reads as structs.
const BLOCKS: Signature = Signature {
    params: &[
        KernelParam::buffer("blocks", DType::Void, Access::Read, "nbytes", &[Op::Scalar(1)]),
        KernelParam::scalar("nbytes", ScalarKind::U32),
    ],
    requires: &[],
};

const BLOCKS_ENTRY: KernelEntry =
    KernelEntry { table: "abuse", signature: Some(&BLOCKS), ..KernelEntry::named("quant", "dequantize") };

#[test]
fn a_void_view_starts_at_a_multiple_of_16_bytes_or_is_refused() {
    let gpu = RecordingBackend::new().with_entry(&BLOCKS_ENTRY);
    let kernel = gpu.lookup(&BLOCKS_ENTRY).unwrap();
    let blocks = gpu.zeros::<u8>(68).unwrap();
    let launch =
        |view: View<'_>| gpu.launch(kernel, LaunchGeometry::linear(1, 32), &mut [view.into(), 34u32.into()]);
    // One byte in: a struct holding a `__half` at an odd address.
    let error = launch(blocks.slice(1..35)).expect_err("a misaligned void view launched");
    assert!(error.to_string().contains("memory starting at a multiple of 16 bytes"), "{error}");
    assert!(error.to_string().contains("memory starting at byte 1"), "{error}");
    launch(blocks.slice(16..50)).unwrap();
    // Wider elements: a view of u32 starting at its 4th element is byte 16.
    let words = gpu.zeros::<u32>(16).unwrap();
    launch(words.slice(4..16)).unwrap();
    let error = launch(words.slice(1..16)).expect_err("a void view at byte 4 launched");
    assert!(error.to_string().contains("memory starting at byte 4"), "{error}");
    assert_eq!(gpu.launches().len(), 2);
}
