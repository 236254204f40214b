//! A dry-run device: [`RecordingBackend`] carries exactly the kernels it is given, checks every
//! launch as a device backend does, computes nothing, and records every lookup, allocation and
//! launch, and across its streams every wait the ordering of buffers between streams requires.
//!
//! What a model issues is then data: a cost model reads the recorded launches' geometry and
//! arguments (bytes moved per launch, without a GPU), a report shows which kernel a dispatch
//! chose on a target that lacks some, and tests assert both. Making a module fail to load, which
//! only tests want, is behind the `test-util` feature.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::graph::Capture;
use crate::host::HostMemory;
use crate::registry::KernelRegistry;
use crate::signature::{self, Access};
use crate::stream::StreamOrder;
use crate::{
    BackendError, BackendId, ConstBuffer, DType, DeviceBuffer, DeviceGraph, GpuBackend, GraphBindings,
    KernelArg, KernelEntry, KernelHandle, KernelTable, LaunchGeometry, LookupError, View, ViewMut,
};
use crate::{Scalar, ScalarValue};

/// A launch as [`RecordingBackend`] saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedLaunch {
    /// The stream it was issued on: 0 for the backend itself, then 1, 2, ... for its streams in the
    /// order they were opened ([`GpuBackend::new_stream`]).
    pub stream: usize,
    /// The launched kernel's module.
    pub module: String,
    /// The launched kernel's entry point.
    pub entry: String,
    /// The launch geometry.
    pub geometry: LaunchGeometry,
    /// The arguments, described.
    pub args: Vec<RecordedArg>,
}

/// A launch argument as [`RecordingBackend`] saw it.
#[derive(Clone, Debug, PartialEq)]
pub enum RecordedArg {
    /// A device buffer: its element type, length and whether the kernel could write it.
    Buffer {
        /// Element type.
        dtype: DType,
        /// Elements.
        len: usize,
        /// Passed as a mutable view.
        writable: bool,
    },
    /// A scalar.
    Scalar(Scalar),
    /// A null pointer for a `nullable` buffer.
    Null,
}

impl<T: ScalarValue> From<T> for RecordedArg {
    /// The scalar argument `value`, as a launch of it is recorded.
    fn from(value: T) -> Self {
        RecordedArg::Scalar(Scalar::new(value))
    }
}

/// A wait between two streams of a [`RecordingBackend`] that the ordering of a buffer required before
/// a launch, copy or allocation on `waiter` used it (see [`GpuBackend::new_stream`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordedWait {
    /// The stream that waited, numbered as [`RecordedLaunch::stream`].
    pub waiter: usize,
    /// The stream whose earlier use of the buffer it waited for.
    pub on: usize,
    /// The buffer, by [`DeviceBuffer::id`].
    pub buffer: u64,
}

#[derive(Default)]
struct Record {
    lookups: Vec<(String, String)>,
    launches: Vec<RecordedLaunch>,
    allocations: usize,
    /// The streams opened so far.
    streams: usize,
    order: StreamOrder,
    waits: Vec<RecordedWait>,
    /// The launches of the capture in progress, if one is.
    capturing: Option<Vec<RecordedLaunch>>,
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
                self.waits.push(RecordedWait { waiter: stream, on, buffer });
            }
        }
    }
}

/// A backend that carries the kernels it is told to and computes nothing: launches are checked
/// (handle and buffers must be its own, and safe launches against the entry's signature, as on
/// every backend) and recorded. Memory is real host memory, so copies round-trip.
///
/// Its [streams](GpuBackend::new_stream) share its kernels, memory and record: each launch is
/// recorded with the stream it was issued on, and each wait between streams that the ordering of
/// buffers requires ([`RecordingBackend::waits`]) as it would be issued on a device with queues.
///
/// Kernels are carried by `(namespace, module, entry)`, as on every backend: a table's entries
/// ([`RecordingBackend::with_table`], [`RecordingBackend::with_entry`]) in their manifest's
/// namespace, a kernel named by [`RecordingBackend::with_kernel`] in the empty namespace of
/// [`KernelEntry::named`]. A target that lacks a kernel ([`RecordingBackend::without`]) goes by
/// name, in every namespace, as does one whose module fails to load (`failing_module`, with the
/// `test-util` feature).
///
/// ```
/// use kda_runtime::record::RecordingBackend;
/// use kda_runtime::{GpuBackend, KernelEntry, LookupError};
///
/// let gpu = RecordingBackend::new()
///     .with_kernel("gemm", "dense_gemm_bf16")
///     .with_kernel("gemm", "dense_gemm_f32")
///     .without("gemm", "dense_gemm_f32");
/// let lookup = |module, entry| gpu.lookup(&KernelEntry::named(module, entry));
/// assert!(lookup("gemm", "dense_gemm_bf16").is_ok());
/// assert!(matches!(lookup("gemm", "dense_gemm_f32"), Err(LookupError::EntryNotInModule { .. })));
/// assert!(matches!(lookup("kda_layer_ops", "kda_fill_f32"), Err(LookupError::ModuleNotCarried { .. })));
/// assert_eq!(gpu.lookups().len(), 3);
/// ```
pub struct RecordingBackend {
    memory: HostMemory,
    kernels: KernelRegistry<()>,
    /// module → the message its lookups fail with, in every namespace.
    failing: HashMap<String, String>,
    /// Shared with the graphs it captures, which record their launches here.
    record: Arc<Mutex<Record>>,
    /// Whether [`GpuBackend::capture`] makes graphs.
    graphs: bool,
}

impl Default for RecordingBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl RecordingBackend {
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
    #[cfg(feature = "test-util")]
    pub fn failing_module(mut self, module: &str, message: &str) -> Self {
        self.failing.insert(module.to_owned(), message.to_owned());
        self
    }

    /// Every lookup so far, as `(module, entry)`, in order.
    pub fn lookups(&self) -> Vec<(String, String)> {
        self.record().lookups.clone()
    }

    /// Every launch so far, on any stream, in order.
    pub fn launches(&self) -> Vec<RecordedLaunch> {
        self.record().launches.clone()
    }

    /// Every wait between streams so far, in order: what a launch, copy or allocation waited for
    /// before it used a buffer (launches and copies name the buffers they read or write; an
    /// allocation writes its buffer's zeros).
    pub fn waits(&self) -> Vec<RecordedWait> {
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

    fn describe_arg(&self, arg: &KernelArg<'_>) -> Result<RecordedArg, BackendError> {
        Ok(match arg {
            KernelArg::Read(view) => {
                self.memory.storage(view.buffer())?;
                view.checked_range()?;
                RecordedArg::Buffer { dtype: view.dtype(), len: view.len(), writable: false }
            }
            KernelArg::Write(view) => {
                self.memory.storage(view.buffer())?;
                view.checked_range()?;
                RecordedArg::Buffer { dtype: view.dtype(), len: view.len(), writable: true }
            }
            KernelArg::Scalar(scalar) => RecordedArg::Scalar(*scalar),
            KernelArg::Null => RecordedArg::Null,
            // The fake never dereferences memory: it records borrowed memory as a buffer, after
            // the launch's checks, which are every backend's.
            KernelArg::Borrowed(borrowed) => RecordedArg::Buffer {
                dtype: borrowed.dtype(),
                len: borrowed.len(),
                writable: borrowed.is_writable(),
            },
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
        let launch = RecordedLaunch {
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

impl GpuBackend for RecordingBackend {
    fn describe(&self) -> String {
        "recording backend (computes nothing)".to_owned()
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

    /// Answers as `lookup` would, without recording a lookup.
    fn is_handle_of(&self, kernel: KernelHandle, entry: &KernelEntry) -> bool {
        !self.failing.contains_key(entry.module) && self.kernels.is_handle_of(kernel, entry)
    }

    fn alloc(&self, dtype: DType, len: usize) -> Result<DeviceBuffer, BackendError> {
        self.alloc_on(0, dtype, len)
    }

    fn copy_to_device(&self, src: &[u8], dst: &mut DeviceBuffer) -> Result<(), BackendError> {
        self.copy_to_device_on(0, src, dst)
    }

    fn upload_const_bytes(&self, dtype: DType, contents: &[u8]) -> Result<ConstBuffer, BackendError> {
        ConstBuffer::upload(self, dtype, contents)
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

    /// A graph of the launches `work` issues on the backend itself, where it was made
    /// [`RecordingBackend::with_graphs`].
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
        Ok(Some(Box::new(RecordedGraph { record: Arc::clone(&self.record), launches, bindings })))
    }

    /// A stream of the backend, numbered from 1 in the order opened, sharing its kernels, memory and
    /// record.
    fn new_stream(&self) -> Result<Box<dyn GpuBackend + '_>, BackendError> {
        let mut record = self.record();
        record.streams += 1;
        Ok(Box::new(RecordingStream { backend: self, index: record.streams }))
    }
}

/// A graph a [`RecordingBackend`] captured: its launches, recorded again at each launch.
struct RecordedGraph {
    record: Arc<Mutex<Record>>,
    launches: Vec<RecordedLaunch>,
    bindings: GraphBindings,
}

impl DeviceGraph for RecordedGraph {
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

/// A stream of a [`RecordingBackend`]: the backend, with what it issues recorded on stream `index`.
struct RecordingStream<'a> {
    backend: &'a RecordingBackend,
    index: usize,
}

impl GpuBackend for RecordingStream<'_> {
    fn describe(&self) -> String {
        format!("{}, stream {}", self.backend.describe(), self.index)
    }

    crate::forward::forwarded_methods!(backend: has_module, lookup, is_handle_of, synchronize, new_stream);

    fn alloc(&self, dtype: DType, len: usize) -> Result<DeviceBuffer, BackendError> {
        self.backend.alloc_on(self.index, dtype, len)
    }

    fn copy_to_device(&self, src: &[u8], dst: &mut DeviceBuffer) -> Result<(), BackendError> {
        self.backend.copy_to_device_on(self.index, src, dst)
    }

    fn upload_const_bytes(&self, dtype: DType, contents: &[u8]) -> Result<ConstBuffer, BackendError> {
        ConstBuffer::upload(self, dtype, contents)
    }

    fn copy_to_host(&self, src: &DeviceBuffer, dst: &mut [u8]) -> Result<(), BackendError> {
        self.backend.copy_to_host_on(self.index, src, dst)
    }

    fn copy_on_device(&self, src: View<'_>, dst: ViewMut<'_>) -> Result<(), BackendError> {
        self.backend.copy_on_device_on(self.index, src, dst)
    }

    fn launch(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        self.backend.record_launch(self.index, kernel, geometry, args, true)
    }

    /// As on the backend itself: nothing runs.
    unsafe fn launch_unchecked(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        self.backend.record_launch(self.index, kernel, geometry, args, false)
    }
}

#[cfg(test)]
mod tests;
