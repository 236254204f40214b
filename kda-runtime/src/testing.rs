//! Test doubles: [`FakeBackend`] carries exactly the kernels a test lists, can make a module fail,
//! and records every lookup and launch so tests can assert which kernel a dispatch chose, and,
//! across its streams, which waits the ordering of buffers between streams requires.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::graph::Capture;
use crate::host::HostMemory;
use crate::registry::KernelRegistry;
use crate::signature::{self, Access};
use crate::stream::StreamOrder;
use crate::{
    BackendError, BackendId, DType, DeviceBuffer, DeviceGraph, GpuBackend, GraphBindings, KernelArg,
    KernelEntry, KernelHandle, KernelTable, LaunchGeometry, LookupError, View, ViewMut,
};

/// A launch as [`FakeBackend`] saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct FakeLaunch {
    /// The stream it was issued on: 0 for the fake itself, then 1, 2, ... for its streams in the
    /// order they were opened ([`GpuBackend::new_stream`]).
    pub stream: usize,
    /// The launched kernel's module.
    pub module: String,
    /// The launched kernel's entry point.
    pub entry: String,
    /// The launch geometry.
    pub geometry: LaunchGeometry,
    /// The arguments, described.
    pub args: Vec<FakeArg>,
}

/// A launch argument as [`FakeBackend`] saw it.
#[derive(Clone, Debug, PartialEq)]
pub enum FakeArg {
    /// A device buffer: its element type, length and whether the kernel could write it.
    Buffer {
        /// Element type.
        dtype: DType,
        /// Elements.
        len: usize,
        /// Passed as a mutable view.
        writable: bool,
    },
    /// A `u32` scalar.
    U32(u32),
    /// An `i32` scalar.
    I32(i32),
    /// A `u64` scalar.
    U64(u64),
    /// An `f32` scalar.
    F32(f32),
}

/// A wait between two streams of a [`FakeBackend`] that the ordering of a buffer required before
/// a launch, copy or allocation on `waiter` used it (see [`GpuBackend::new_stream`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FakeWait {
    /// The stream that waited, numbered as [`FakeLaunch::stream`].
    pub waiter: usize,
    /// The stream whose earlier use of the buffer it waited for.
    pub on: usize,
    /// The buffer, by [`DeviceBuffer::id`].
    pub buffer: u64,
}

#[derive(Default)]
struct Record {
    lookups: Vec<(String, String)>,
    launches: Vec<FakeLaunch>,
    allocations: usize,
    /// The streams opened so far.
    streams: usize,
    order: StreamOrder,
    waits: Vec<FakeWait>,
    /// The launches of the capture in progress, if one is.
    capturing: Option<Vec<FakeLaunch>>,
    /// How many graphs were captured.
    captures: usize,
    /// How many times a captured graph was launched.
    graph_launches: usize,
}

impl Record {
    /// Notes that `stream` uses each buffer of `uses` as it says, recording first the waits that
    /// takes.
    fn order(&mut self, stream: usize, uses: impl IntoIterator<Item = (u64, Access)>) {
        for (buffer, access) in uses {
            for on in self.order.access(stream, buffer, access) {
                self.waits.push(FakeWait { waiter: stream, on, buffer });
            }
        }
    }
}

/// A backend that carries the kernels it is told to and computes nothing: launches are checked
/// (handle and buffers must be its own, and safe launches against the entry's signature, as on
/// every backend) and recorded. Memory is real host memory, so copies
/// round-trip.
///
/// Its [streams](GpuBackend::new_stream) share its kernels, memory and record: each launch is
/// recorded with the stream it was issued on, and each wait between streams that the ordering of
/// buffers requires ([`FakeBackend::waits`]) as it would be issued on a device with queues.
///
/// Kernels are carried by `(namespace, module, entry)`, as on every backend: a table's entries
/// ([`FakeBackend::with_table`], [`FakeBackend::with_entry`]) in their manifest's namespace, a
/// kernel named by [`FakeBackend::with_kernel`] in the empty namespace of
/// [`KernelEntry::named`]. Emulating a target that lacks a kernel ([`FakeBackend::without`],
/// [`FakeBackend::failing_module`]) goes by name, in every namespace.
///
/// ```
/// use kda_runtime::testing::FakeBackend;
/// use kda_runtime::{GpuBackend, KernelEntry, LookupError};
///
/// let gpu = FakeBackend::new()
///     .with_kernel("gemm", "dense_gemm_bf16")
///     .failing_module("kda_recurrent", "image built for sm_100");
/// let lookup = |module, entry| gpu.lookup(&KernelEntry::named(module, entry));
/// assert!(matches!(lookup("gemm", "dense_gemm_f32"), Err(LookupError::EntryNotInModule { .. })));
/// assert!(matches!(lookup("kda_layer_ops", "kda_fill_f32"), Err(LookupError::ModuleNotCarried { .. })));
/// assert!(matches!(lookup("kda_recurrent", "kda_recurrent_decode_bf16"), Err(LookupError::Failed { .. })));
/// ```
pub struct FakeBackend {
    memory: HostMemory,
    kernels: KernelRegistry<()>,
    /// module → the message its lookups fail with, in every namespace.
    failing: HashMap<String, String>,
    /// Shared with the graphs it captures, which record their launches here.
    record: Arc<Mutex<Record>>,
    /// Whether [`GpuBackend::capture`] makes graphs.
    graphs: bool,
}

impl Default for FakeBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeBackend {
    /// A backend that carries nothing.
    pub fn new() -> Self {
        let id = BackendId::fresh();
        Self {
            memory: HostMemory::new(id),
            kernels: KernelRegistry::new(id),
            failing: HashMap::new(),
            record: Arc::default(),
            graphs: false,
        }
    }

    /// Also carries `module::entry` in the empty namespace (the lookups of
    /// [`KernelEntry::named`] find it), without a signature (only unchecked launches run it).
    pub fn with_kernel(self, module: &'static str, entry: &'static str) -> Self {
        self.with_entry(&KernelEntry::named(module, entry))
    }

    /// Also carries `entry`, in its namespace, launched against its signature.
    pub fn with_entry(mut self, entry: &KernelEntry) -> Self {
        self.kernels.insert(*entry, ());
        self
    }

    /// Also carries every entry of the table `T`.
    pub fn with_table<T: KernelTable>(self) -> Self {
        T::ENTRIES.iter().fold(self, |gpu, entry| gpu.with_entry(entry))
    }

    /// No longer carries `module::entry`, in any namespace; a module left with no entry is no
    /// longer carried.
    pub fn without(mut self, module: &str, entry: &str) -> Self {
        self.kernels.remove(module, entry);
        self
    }

    /// Lookups in `module`, in any namespace, fail with `message`, as a module that does not
    /// load would.
    pub fn failing_module(mut self, module: &str, message: &str) -> Self {
        self.failing.insert(module.to_owned(), message.to_owned());
        self
    }

    /// Every lookup so far, as `(module, entry)`, in order.
    pub fn lookups(&self) -> Vec<(String, String)> {
        self.record().lookups.clone()
    }

    /// Every launch so far, on any stream, in order.
    pub fn launches(&self) -> Vec<FakeLaunch> {
        self.record().launches.clone()
    }

    /// Every wait between streams so far, in order: what a launch, copy or allocation waited for
    /// before it used a buffer (launches and copies name the buffers they read or write; an
    /// allocation writes its buffer's zeros).
    pub fn waits(&self) -> Vec<FakeWait> {
        self.record().waits.clone()
    }

    /// Also captures graphs, as a CUDA device does: a [capture](GpuBackend::capture) records the
    /// launches it checks without launching them, and each launch of its graph records them
    /// again, as launches, on stream 0.
    pub fn with_graphs(mut self) -> Self {
        self.graphs = true;
        self
    }

    /// How many graphs were captured.
    pub fn captures(&self) -> usize {
        self.record().captures
    }

    /// How many times a captured graph was launched.
    pub fn graph_launches(&self) -> usize {
        self.record().graph_launches
    }

    /// The number of buffers allocated so far.
    pub fn allocations(&self) -> usize {
        self.record().allocations
    }

    /// The launched kernels so far, as `module::entry`, in order.
    pub fn launched(&self) -> Vec<String> {
        let record = self.record();
        record.launches.iter().map(|l| format!("{}::{}", l.module, l.entry)).collect()
    }

    fn record(&self) -> MutexGuard<'_, Record> {
        // A test that panicked while holding the lock left a consistent record behind.
        self.record.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn describe_arg(&self, arg: &KernelArg<'_>) -> Result<FakeArg, BackendError> {
        Ok(match arg {
            KernelArg::Read(view) => {
                self.memory.storage(view.buffer())?;
                view.checked_range()?;
                FakeArg::Buffer { dtype: view.dtype(), len: view.len(), writable: false }
            }
            KernelArg::Write(view) => {
                self.memory.storage(view.buffer())?;
                view.checked_range()?;
                FakeArg::Buffer { dtype: view.dtype(), len: view.len(), writable: true }
            }
            KernelArg::U32(value) => FakeArg::U32(*value),
            KernelArg::I32(value) => FakeArg::I32(*value),
            KernelArg::U64(value) => FakeArg::U64(*value),
            KernelArg::F32(value) => FakeArg::F32(*value),
        })
    }

    /// Records a launch on `stream`, checked against the entry's signature or not, after the
    /// waits its buffers take.
    fn record_launch(
        &self,
        stream: usize,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &[KernelArg<'_>],
        checked: bool,
    ) -> Result<(), BackendError> {
        let registered = self.kernels.get(kernel, &self.describe())?;
        if checked {
            signature::check(&registered.entry, &geometry, args)?;
        }
        let described = args.iter().map(|arg| self.describe_arg(arg)).collect::<Result<_, _>>()?;
        let uses = args.iter().filter_map(|arg| match arg {
            KernelArg::Read(view) => Some((view.buffer().id(), Access::Read)),
            KernelArg::Write(view) => Some((view.buffer().id(), Access::Write)),
            _ => None,
        });
        let launch = FakeLaunch {
            stream,
            module: registered.entry.module.to_owned(),
            entry: registered.entry.entry.to_owned(),
            geometry,
            args: described,
        };
        let mut record = self.record();
        match &mut record.capturing {
            Some(captured) => captured.push(launch),
            None => {
                record.order(stream, uses);
                record.launches.push(launch);
            }
        }
        Ok(())
    }

    /// Allocates on `stream`: the buffer's zero-fill is a write there.
    fn alloc_on(&self, stream: usize, dtype: DType, len: usize) -> Result<DeviceBuffer, BackendError> {
        self.record().allocations += 1;
        let buffer = self.memory.alloc(dtype, len)?;
        self.record().order(stream, [(buffer.id(), Access::Write)]);
        Ok(buffer)
    }

    /// [`GpuBackend::copy_to_device`] on `stream`: a write of `dst`.
    fn copy_to_device_on(
        &self,
        stream: usize,
        src: &[u8],
        dst: &mut DeviceBuffer,
    ) -> Result<(), BackendError> {
        self.memory.copy_to_device(src, dst)?;
        self.record().order(stream, [(dst.id(), Access::Write)]);
        Ok(())
    }

    /// [`GpuBackend::copy_to_host`] on `stream`: a read of `src`.
    fn copy_to_host_on(&self, stream: usize, src: &DeviceBuffer, dst: &mut [u8]) -> Result<(), BackendError> {
        self.memory.copy_to_host(src, dst)?;
        self.record().order(stream, [(src.id(), Access::Read)]);
        Ok(())
    }

    /// [`GpuBackend::copy_on_device`] on `stream`: a read of `src`'s buffer, a write of `dst`'s.
    fn copy_on_device_on(&self, stream: usize, src: View<'_>, dst: ViewMut<'_>) -> Result<(), BackendError> {
        let uses = [(src.buffer().id(), Access::Read), (dst.buffer().id(), Access::Write)];
        self.memory.copy_on_device(src, dst)?;
        self.record().order(stream, uses);
        Ok(())
    }
}

impl GpuBackend for FakeBackend {
    fn describe(&self) -> String {
        "fake backend (test double)".to_owned()
    }

    fn has_module(&self, module: &str) -> bool {
        self.kernels.has_module(module) || self.failing.contains_key(module)
    }

    fn lookup(&self, entry: &KernelEntry) -> Result<KernelHandle, LookupError> {
        let (module, name) = (entry.module, entry.entry);
        self.record().lookups.push((module.to_owned(), name.to_owned()));
        if let Some(message) = self.failing.get(module) {
            let source = BackendError::Driver {
                operation: format!("loading module `{module}`"),
                source: message.clone().into(),
            };
            return Err(LookupError::failed(entry, source));
        }
        self.kernels.lookup(entry)
    }

    fn alloc(&self, dtype: DType, len: usize) -> Result<DeviceBuffer, BackendError> {
        self.alloc_on(0, dtype, len)
    }

    fn copy_to_device(&self, src: &[u8], dst: &mut DeviceBuffer) -> Result<(), BackendError> {
        self.copy_to_device_on(0, src, dst)
    }

    fn copy_to_host(&self, src: &DeviceBuffer, dst: &mut [u8]) -> Result<(), BackendError> {
        self.copy_to_host_on(0, src, dst)
    }

    fn copy_on_device(&self, src: View<'_>, dst: ViewMut<'_>) -> Result<(), BackendError> {
        self.copy_on_device_on(0, src, dst)
    }

    fn launch(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        self.record_launch(0, kernel, geometry, args, true)
    }

    /// Records the launch without the signature check; nothing runs, so nothing here relies on
    /// the caller's promises.
    unsafe fn launch_unchecked(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        self.record_launch(0, kernel, geometry, args, false)
    }

    fn synchronize(&self) -> Result<(), BackendError> {
        Ok(())
    }

    /// A graph of the launches `work` issues on the fake itself, where it was made
    /// [`FakeBackend::with_graphs`].
    fn capture(
        &self,
        work: &mut dyn FnMut(&dyn GpuBackend) -> Result<(), BackendError>,
    ) -> Result<Option<Box<dyn DeviceGraph>>, BackendError> {
        if !self.graphs {
            return Ok(None);
        }
        self.record().capturing = Some(Vec::new());
        let capture = Capture::new(self);
        let issued = work(&capture);
        let launches = {
            let mut record = self.record();
            record.captures += 1;
            record.capturing.take().unwrap_or_default()
        };
        issued?;
        let bindings = capture.finish();
        Ok(Some(Box::new(FakeGraph { record: Arc::clone(&self.record), launches, bindings })))
    }

    /// A stream of the fake, numbered from 1 in the order opened, sharing its kernels, memory and
    /// record.
    fn new_stream(&self) -> Result<Box<dyn GpuBackend + '_>, BackendError> {
        let mut record = self.record();
        record.streams += 1;
        Ok(Box::new(FakeStream { fake: self, index: record.streams }))
    }
}

/// A graph a [`FakeBackend`] captured: its launches, recorded again at each launch.
struct FakeGraph {
    record: Arc<Mutex<Record>>,
    launches: Vec<FakeLaunch>,
    bindings: GraphBindings,
}

impl DeviceGraph for FakeGraph {
    fn bindings(&self) -> &GraphBindings {
        &self.bindings
    }

    /// Records the captured launches; nothing runs, so nothing relies on the caller's promises.
    unsafe fn launch(&self, _: &[&DeviceBuffer], _: &mut [&mut DeviceBuffer]) -> Result<(), BackendError> {
        let mut record = self.record.lock().unwrap_or_else(PoisonError::into_inner);
        record.graph_launches += 1;
        record.launches.extend(self.launches.iter().cloned());
        Ok(())
    }
}

/// A stream of a [`FakeBackend`]: the fake, with what it issues recorded on stream `index`.
struct FakeStream<'a> {
    fake: &'a FakeBackend,
    index: usize,
}

impl GpuBackend for FakeStream<'_> {
    fn describe(&self) -> String {
        format!("{}, stream {}", self.fake.describe(), self.index)
    }

    fn has_module(&self, module: &str) -> bool {
        self.fake.has_module(module)
    }

    fn lookup(&self, entry: &KernelEntry) -> Result<KernelHandle, LookupError> {
        self.fake.lookup(entry)
    }

    fn alloc(&self, dtype: DType, len: usize) -> Result<DeviceBuffer, BackendError> {
        self.fake.alloc_on(self.index, dtype, len)
    }

    fn copy_to_device(&self, src: &[u8], dst: &mut DeviceBuffer) -> Result<(), BackendError> {
        self.fake.copy_to_device_on(self.index, src, dst)
    }

    fn copy_to_host(&self, src: &DeviceBuffer, dst: &mut [u8]) -> Result<(), BackendError> {
        self.fake.copy_to_host_on(self.index, src, dst)
    }

    fn copy_on_device(&self, src: View<'_>, dst: ViewMut<'_>) -> Result<(), BackendError> {
        self.fake.copy_on_device_on(self.index, src, dst)
    }

    fn launch(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        self.fake.record_launch(self.index, kernel, geometry, args, true)
    }

    /// As on the fake itself: nothing runs.
    unsafe fn launch_unchecked(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        self.fake.record_launch(self.index, kernel, geometry, args, false)
    }

    fn synchronize(&self) -> Result<(), BackendError> {
        self.fake.synchronize()
    }

    fn new_stream(&self) -> Result<Box<dyn GpuBackend + '_>, BackendError> {
        self.fake.new_stream()
    }
}

/// Builders for the hand-written signatures of this crate's unit tests, and the entries several
/// of them share.
#[cfg(test)]
pub(crate) mod fixtures {
    use crate::signature::{Access, KernelParam, LaunchDim, Op, Requirement, ScalarKind};
    use crate::{DType, DeviceBuffer, GpuBackend, KernelEntry, Signature};

    /// A `const dtype[text]` parameter, `program` being `text` in postfix order.
    pub const fn read(
        name: &'static str,
        dtype: DType,
        text: &'static str,
        program: &'static [Op],
    ) -> KernelParam {
        KernelParam::buffer(name, dtype, Access::Read, text, program)
    }

    /// A `dtype[text]` parameter, `program` being `text` in postfix order.
    pub const fn write(
        name: &'static str,
        dtype: DType,
        text: &'static str,
        program: &'static [Op],
    ) -> KernelParam {
        KernelParam::buffer(name, dtype, Access::Write, text, program)
    }

    /// The entry `module::entry` of the table `test`, launched against `signature`.
    pub const fn signed(
        module: &'static str,
        entry: &'static str,
        signature: &'static Signature,
    ) -> KernelEntry {
        KernelEntry { table: "test", signature: Some(signature), ..KernelEntry::named(module, entry) }
    }

    /// No parameters, no requirements.
    pub const EMPTY: Signature = Signature { params: &[], requires: &[] };

    /// `y[i] += a·x[i]` for `i < n`, launched with at most 1024 threads per block.
    pub const AXPY_SIGNATURE: Signature = Signature {
        params: &[
            read("x", DType::F32, "n", &[Op::Scalar(2)]),
            write("y", DType::F32, "n", &[Op::Scalar(2)]),
            KernelParam::scalar("n", ScalarKind::U32),
            KernelParam::scalar("a", ScalarKind::F32),
        ],
        requires: &[Requirement::new(
            "block.x <= 1024",
            &[Op::Launch(LaunchDim::BlockX), Op::Literal(1024), Op::Le],
        )],
    };

    /// `blas::axpy` with [`AXPY_SIGNATURE`].
    pub const AXPY: KernelEntry = signed("blas", "axpy", &AXPY_SIGNATURE);

    /// The bytes of each of `buffers`, to show a refused launch changed none of them.
    pub fn contents(gpu: &dyn GpuBackend, buffers: &[&DeviceBuffer]) -> Vec<Vec<u8>> {
        let download = |buffer: &&DeviceBuffer| {
            let mut bytes = vec![0; buffer.byte_len()];
            gpu.copy_to_host(buffer, &mut bytes).unwrap();
            bytes
        };
        buffers.iter().map(download).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{AXPY, AXPY_SIGNATURE, EMPTY, signed};
    use super::*;
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
        let gpu = FakeBackend::new().with_table::<Blas>();
        let (axpy, noop) = Blas::resolve(&gpu).unwrap();
        assert!(noop.is_some());
        let x = gpu.zeros::<f32>(4).unwrap();
        let mut y = gpu.zeros::<f32>(4).unwrap();
        let short = gpu.launch(
            axpy,
            geometry(),
            &mut [x.view().into(), y.view_mut().into(), 5u32.into(), 1f32.into()],
        );
        assert!(matches!(short, Err(BackendError::Argument { param: "x", .. })), "{short:?}");
        assert!(gpu.launches().is_empty());

        gpu.launch(
            axpy,
            geometry(),
            &mut [x.slice(1..3).into(), y.view_mut().into(), 2u32.into(), 1f32.into()],
        )
        .unwrap();
        let buffer = |len, writable| FakeArg::Buffer { dtype: DType::F32, len, writable };
        let expected = FakeLaunch {
            stream: 0,
            module: "blas".into(),
            entry: "axpy".into(),
            geometry: geometry(),
            args: vec![buffer(2, false), buffer(4, true), FakeArg::U32(2), FakeArg::F32(1.0)],
        };
        assert_eq!(gpu.launches(), [expected]);
        assert_eq!(gpu.launched(), ["blas::axpy"]);
    }

    #[test]
    fn entries_without_a_signature_need_launch_unchecked() {
        let gpu = FakeBackend::new().with_kernel("blas", "noop");
        let noop = gpu.lookup(&NOOP).unwrap();
        let safe = gpu.launch(noop, geometry(), &mut [7u32.into()]);
        assert!(
            matches!(safe, Err(BackendError::NoSignature { ref entry }) if entry.entry == "noop"),
            "{safe:?}"
        );
        assert!(gpu.launches().is_empty());
        // SAFETY: the fake runs nothing; it only records the launch.
        unsafe { gpu.launch_unchecked(noop, geometry(), &mut [7u32.into(), (-1i32).into(), 9u64.into()]) }
            .unwrap();
        assert_eq!(gpu.launches()[0].args, [FakeArg::U32(7), FakeArg::I32(-1), FakeArg::U64(9)]);
    }

    #[test]
    fn a_slice_outside_its_buffer_is_refused_even_unchecked() {
        let gpu = FakeBackend::new().with_table::<Blas>();
        let axpy = gpu.lookup(&AXPY).unwrap();
        let x = gpu.zeros::<f32>(4).unwrap();
        let mut y = gpu.zeros::<f32>(4).unwrap();
        // Four elements, as the extent asks, but starting at element 2 of 4.
        let checked = gpu.launch(
            axpy,
            geometry(),
            &mut [x.slice(2..6).into(), y.view_mut().into(), 4u32.into(), 1f32.into()],
        );
        assert!(
            matches!(checked, Err(BackendError::SliceOutOfBounds { ref range, len: 4 }) if *range == (2..6))
        );
        // SAFETY: the fake runs nothing; it only records the launch.
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
    fn launch_streams(gpu: &FakeBackend) -> Vec<usize> {
        gpu.launches().iter().map(|launch| launch.stream).collect()
    }

    #[test]
    fn a_buffer_written_on_one_stream_is_waited_for_before_another_reads_it() {
        let gpu = FakeBackend::new().with_table::<Blas>();
        let axpy = gpu.lookup(&AXPY).unwrap();
        let (a, b) = (gpu.new_stream().unwrap(), gpu.new_stream().unwrap());
        assert_eq!(a.lookup(&AXPY).unwrap(), axpy, "one device, one handle");
        let x = a.upload(&[1.0f32; 4]).unwrap();
        let mut y = a.zeros::<f32>(4).unwrap();
        let mut z = b.zeros::<f32>(4).unwrap();
        add(&*a, axpy, &x, &mut y);
        assert_eq!(gpu.waits(), []);
        add(&*b, axpy, &y, &mut z);
        assert_eq!(gpu.waits(), [FakeWait { waiter: 2, on: 1, buffer: y.id() }]);
        assert_eq!(launch_streams(&gpu), [1, 2]);
        // The fake itself is stream 0; a stream opened from a stream is the next one.
        add(&gpu, axpy, &x, &mut z);
        let c = b.new_stream().unwrap();
        add(&*c, axpy, &x, &mut y);
        assert_eq!(launch_streams(&gpu), [1, 2, 0, 3]);
    }

    #[test]
    fn streams_that_only_read_a_shared_buffer_do_not_wait_for_each_other() {
        let gpu = FakeBackend::new().with_table::<Blas>();
        let axpy = gpu.lookup(&AXPY).unwrap();
        let weights = gpu.upload(&[0.5f32; 4]).unwrap();
        let (a, b) = (gpu.new_stream().unwrap(), gpu.new_stream().unwrap());
        let (mut y_a, mut y_b) = (a.zeros::<f32>(4).unwrap(), b.zeros::<f32>(4).unwrap());
        for _ in 0..3 {
            add(&*a, axpy, &weights, &mut y_a);
            add(&*b, axpy, &weights, &mut y_b);
        }
        // Each stream waits once for the upload on stream 0, and never for the other.
        let upload = |waiter| FakeWait { waiter, on: 0, buffer: weights.id() };
        assert_eq!(gpu.waits(), [upload(1), upload(2)]);
        assert_eq!(launch_streams(&gpu), [1, 2, 1, 2, 1, 2]);
    }

    #[test]
    fn a_write_after_a_read_on_another_stream_waits_for_it() {
        let gpu = FakeBackend::new().with_table::<Blas>();
        let axpy = gpu.lookup(&AXPY).unwrap();
        let (a, b) = (gpu.new_stream().unwrap(), gpu.new_stream().unwrap());
        let mut x = a.upload(&[1.0f32; 4]).unwrap();
        let mut y = b.zeros::<f32>(4).unwrap();
        add(&*b, axpy, &x, &mut y);
        a.write(&[2.0f32; 4], &mut x).unwrap();
        let wait = |waiter, on| FakeWait { waiter, on, buffer: x.id() };
        assert_eq!(gpu.waits(), [wait(2, 1), wait(1, 2)]);
        // A copy on the device reads and writes as a launch does.
        a.copy_on_device(y.view(), x.view_mut()).unwrap();
        assert_eq!(gpu.waits()[2..], [FakeWait { waiter: 1, on: 2, buffer: y.id() }]);
    }

    #[test]
    fn launches_on_one_stream_need_no_wait() {
        let gpu = FakeBackend::new().with_table::<Blas>();
        let axpy = gpu.lookup(&AXPY).unwrap();
        let a = gpu.new_stream().unwrap();
        let (mut x, mut y) = (a.upload(&[1.0f32; 4]).unwrap(), a.zeros::<f32>(4).unwrap());
        for _ in 0..2 {
            add(&*a, axpy, &x, &mut y);
            add(&*a, axpy, &y, &mut x);
        }
        assert_eq!(a.download::<f32>(&x).unwrap(), [1.0; 4], "the fake computes nothing");
        assert_eq!(gpu.waits(), []);
        assert_eq!(launch_streams(&gpu), [1; 4]);
    }

    #[test]
    fn another_signature_is_a_failed_lookup_never_an_absent_kernel() {
        const WRONG: KernelEntry = signed("blas", "axpy", &EMPTY);
        let gpu = FakeBackend::new().with_table::<Blas>();
        let mismatch = try_kernel(&gpu, &WRONG).unwrap_err();
        assert!(matches!(mismatch, LookupError::SignatureMismatch { ref entry, .. } if **entry == WRONG));
        assert!(!mismatch.is_not_found());
        assert!(mismatch.to_string().contains("carried for `test.axpy` with other parameters"), "{mismatch}");
        // An equal signature, spelled out again, is the same contract.
        const SAME: crate::Signature =
            crate::Signature { params: AXPY_SIGNATURE.params, requires: AXPY_SIGNATURE.requires };
        assert_eq!(gpu.lookup(&signed("blas", "axpy", &SAME)).unwrap(), gpu.lookup(&AXPY).unwrap());
    }
}
