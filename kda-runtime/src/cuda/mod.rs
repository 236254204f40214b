//! The CUDA backend (feature `cuda`): device memory, the kernel images of one or more crates'
//! builds, each module loaded once on its first lookup (through the [module cache](crate::modules),
//! after checking that the image carries code for the device and driver), and launches through
//! `cudarc`.
//!
//! It never panics on a machine without a GPU: [`CudaBackend::new`] checks that libcuda can be
//! loaded before any other driver call and returns [`BackendError::Unavailable`] otherwise.
//!
//! # Streams
//!
//! [`CudaBackend::on_stream`] issues on the caller's stream, in the caller's context, and shares
//! its module cache and handles with every backend on that context (module `shared`). Buffers it
//! allocates are ordered between streams as below only where the context tracks events
//! (`CudaContext::is_event_tracking`, which an engine may have turned off): where it does not, each
//! backend's buffers are its own (`CudaBackend::memory`), and no other stream uses them. Where
//! they are shared, dropping the backend joins the caller's stream into the default stream, so
//! that what the default stream does with them after the caller drops its stream (the last one,
//! after which cudarc waits for no event) still comes after the stream's work.
//!
//! The backend [`CudaBackend::new`] opens issues on the context's default stream;
//! [`GpuBackend::new_stream`] opens a stream of its own (`CudaContext::new_stream`, a
//! non-blocking stream: nothing orders it with the default stream implicitly), sharing the
//! module cache and the backend id. Buffers are ordered between streams by cudarc's event
//! tracking, which this backend never turns off (`CudaContext::is_event_tracking`, true from
//! `CudaContext::new`; its context is its own, and nothing calls
//! `CudaContext::disable_event_tracking`), and which acts while the context has a stream of its
//! own open (`CudaContext::is_managing_stream_synchronization`):
//! - `CudaStream::alloc` gives each `CudaSlice` a read and a write `CudaEvent`;
//! - a kernel argument: `PushKernelArg<&CudaView>` for `LaunchArgs` makes `LaunchArgs::launch`
//!   wait for the slice's write event and record its read event after the launch;
//!   `PushKernelArg<&mut CudaViewMut>` makes it wait for both and record the write event;
//! - copies: `CudaStream::memcpy_htod` takes its destination through
//!   `DevicePtrMut::device_ptr_mut` (wait for both events, record the write event),
//!   `CudaStream::memcpy_dtoh` its source through `DevicePtr::device_ptr` (wait for the write
//!   event, record the read event), `CudaStream::memcpy_dtod` both (one context), and so does
//!   the zero-fill of `CudaStream::alloc_zeros` (`CudaStream::memset_zeros`);
//! - the free: `Drop for CudaSlice` makes the allocating stream wait for both events before
//!   freeing on it;
//! - the first stream opened (`CudaContext::new_stream`) synchronizes the context, so what was
//!   issued before events were recorded has finished.
//!
//! A slice's one read event holds only its latest read, so reads on several streams are also
//! kept per stream, and waited for by writes and the free (module `reads`). A stream dropped is joined
//! into the default stream (`CudaStream::join`): dropping the last open stream ends the tracking
//! (`Drop for CudaStream`), after which only the default stream issues, and it must come after
//! the work of the streams it no longer tracks.

mod borrowed;
mod graph;
mod launch;
mod modules;
mod reads;
mod shared;

use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cudarc::driver::sys::CUstreamCaptureStatus;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, CudaViewMut, DevicePtrMut, DriverError};

use crate::modules::{ModuleCache, Resolved};
use crate::{
    BackendError, BackendId, BufferStorage, ConstBuffer, DType, DeviceBuffer, Element, GpuBackend, ImageSet,
    KernelArg, KernelEntry, KernelHandle, LaunchGeometry, LookupError, View, ViewMut, signature,
};
pub(crate) use borrowed::{Exclusive, ReadableMemory};
use modules::CudaLoader;
use reads::{Reads, StreamKey};

/// A CUDA device, as one of its streams, and the kernel images it can load: the default stream
/// for the backend [`CudaBackend::new`] opens, a stream of its own for each one that
/// [`GpuBackend::new_stream`] opens (see [Streams](self#streams)).
pub struct CudaBackend {
    /// What the handles it issues name: shared by every backend of its module cache.
    id: BackendId,
    /// What the buffers it allocates name: the `id` where the context orders buffers between
    /// streams by events, one per stream where it does not (see [Streams](self#streams)).
    memory: BackendId,
    stream: Arc<CudaStream>,
    /// The stream, as the reads of buffers name it.
    key: StreamKey,
    /// Shared by every stream of the device.
    modules: Arc<ModuleCache<CudaLoader>>,
    /// Whose the stream is, which decides what a capture on it takes and whether dropping the
    /// backend joins it into the default stream.
    role: StreamRole,
    /// How many calls of [`CudaBackend::admitting_own_buffers`] are running: while one is, a
    /// graph of the caller's takes launches on this backend's buffers and copies between them.
    admitting: AtomicUsize,
}

/// Whose stream a backend issues on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum StreamRole {
    /// The context's default stream ([`CudaBackend::new`]) or the caller's
    /// ([`CudaBackend::on_stream`]): a caller's stream is joined into the default stream when
    /// the backend drops only where its buffers are shared by events (see `Drop for
    /// CudaBackend`), and a capture on it is the caller's, which takes borrowed memory only (but
    /// see [`CudaBackend::admitting_own_buffers`]).
    Given,
    /// A stream kda opened ([`GpuBackend::new_stream`]): joined into the default stream when the
    /// backend drops, so what is issued there later runs after it.
    Opened,
    /// The per-thread stream capturing a graph of kda's own ([`GpuBackend::capture`], which binds
    /// its buffers): joined as an opened one, and every operation on kda's buffers is captured.
    OwnCapture,
}

/// A function ready to launch, with the entry whose signature its layout was checked against.
type CudaKernel = Resolved<Arc<modules::LoadedFunction>>;

/// Device memory behind a [`DeviceBuffer`]: `len` elements of `dtype` in bytes (at least one),
/// freed when dropped, and their reads on each stream. Private, so no code outside this module
/// makes one or changes one's shape.
struct CudaStorage {
    dtype: DType,
    len: usize,
    /// Dropped by `Drop for CudaStorage` alone, which may leave it allocated.
    bytes: ManuallyDrop<CudaSlice<u8>>,
    reads: Reads,
}

impl BufferStorage for CudaStorage {
    fn dtype(&self) -> DType {
        self.dtype
    }

    fn len(&self) -> usize {
        self.len
    }
}

impl Drop for CudaStorage {
    /// Makes the allocating stream wait for the reads on every stream, then frees the memory on
    /// it (`Drop for CudaSlice`). While that stream is capturing a graph of the caller's, the
    /// memory stays allocated (it leaks): the free would be captured as a node of the caller's
    /// graph, which may free only what the graph allocated, and would run at each replay.
    fn drop(&mut self) {
        let stream = self.bytes.stream();
        let status = stream.capture_status();
        if status.is_ok_and(|status| status != CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE) {
            return;
        }
        stream.context().record_err(self.reads.wait(stream, None));
        // SAFETY: `bytes` is dropped here once, in the storage's own drop, and never used after.
        unsafe { ManuallyDrop::drop(&mut self.bytes) };
    }
}

/// Whether the CUDA driver library can be used: where kda-runtime has cudarc load it at run time
/// (its default `cuda-dynamic-loading`), whether it opens; where an engine's cudarc choice links
/// it, it is there, or the binary would not have started.
fn driver_library_present() -> Result<(), BackendError> {
    #[cfg(feature = "cuda-dynamic-loading")]
    // SAFETY: only tries to open the driver library; no driver function is called.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(unavailable(
            "the CUDA driver library (libcuda.so) is not installed on this machine".to_owned(),
        ));
    }
    Ok(())
}

impl CudaBackend {
    /// Device `ordinal`, carrying the modules of `sets`, each crate's in its namespace (a module
    /// without an image is "not built for this target"). An `Err`, never a panic, where there is
    /// no driver, no such device, or the device cannot be used; and where two distinct sets carry
    /// one module of one namespace ([`BackendError::DuplicateModule`]; the same set given twice is
    /// carried once).
    pub fn new(ordinal: usize, sets: &[&'static ImageSet]) -> Result<Self, BackendError> {
        // First: a duplicate is the caller's mistake on any machine, GPU or not.
        crate::modules::check_sets(sets)?;
        driver_library_present()?;
        // A broken driver library (a stub without some symbol) makes cudarc panic: keep that an Err.
        let loader = std::panic::catch_unwind(|| open_device(ordinal)).map_err(|_| {
            unavailable("the CUDA driver library is incomplete (a symbol is missing)".to_owned())
        })??;
        let stream = loader.context.default_stream();
        let modules = Arc::new(ModuleCache::new(loader, sets)?);
        let id = BackendId::fresh();
        Ok(Self::issuing(id, id, stream, modules, StreamRole::Given))
    }

    /// A backend over a context and stream the caller owns (an engine's), carrying the modules of
    /// `sets`: launches and copies issue on `stream`, and nothing of the context is changed. The
    /// modules are loaded into the context once, on their first lookup, and shared by every
    /// backend `on_stream` makes on that context with the same sets while one of them lives, so a
    /// table resolved on one is valid on all of them, whatever their stream, and resolving it
    /// again finds every module loaded. Launches take the engine's memory
    /// ([`In`](crate::In)/[`Out`](crate::Out) from its cudarc slices); buffers this backend
    /// allocates are its own, used on other streams of the context only where the context orders
    /// them by events (`CudaContext::is_event_tracking`, see [Streams](self#streams)).
    ///
    /// An `Err` where two distinct sets carry one module of one namespace, or the device cannot
    /// be described (no compute capability, no driver version).
    pub fn on_stream(stream: Arc<CudaStream>, sets: &[&'static ImageSet]) -> Result<Self, BackendError> {
        crate::modules::check_sets(sets)?;
        let context = Arc::clone(stream.context());
        let (id, modules) = shared::modules(&context, sets, || {
            let loader = describe_context(context.clone(), context.ordinal())?;
            Ok(Arc::new(ModuleCache::new(loader, sets)?))
        })?;
        Ok(Self::issuing(id, memory_id(&context, id), stream, modules, StreamRole::Given))
    }

    /// A backend issuing on `stream` in the role `role`, with handles of `id` and buffers of
    /// `memory`.
    fn issuing(
        id: BackendId,
        memory: BackendId,
        stream: Arc<CudaStream>,
        modules: Arc<ModuleCache<CudaLoader>>,
        role: StreamRole,
    ) -> Self {
        Self { id, memory, stream, key: StreamKey::fresh(), modules, role, admitting: AtomicUsize::new(0) }
    }

    /// Whether `context` is this backend's (the same driver context: two cudarc handles of one
    /// device's primary context are one).
    fn is_own_context(&self, context: &CudaContext) -> bool {
        context.cu_ctx() == self.modules.loader().context.cu_ctx()
    }

    /// The stream this backend issues on, for work of the caller's own through cudarc (the
    /// [`cudarc`] kda is built with): a vendor library bound to it, or copies of
    /// the caller's slices. Work issued there is ordered with this backend's launches and copies
    /// by the stream itself.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// `buffer`'s elements as a cudarc view, for one piece of work of the caller's own on this
    /// backend's stream (a collective of an engine's NCCL communicator made on [`Self::stream`], a
    /// vendor library's call): `work` gets the stream and the view, borrowed no longer than the
    /// call, and what it returns is returned. An `Err`, and `work` is not called, where this
    /// backend did not allocate `buffer` or its element type is not `T`.
    ///
    /// The view is ordered with the buffer's other uses as this backend's own writes are (see
    /// [Streams](self#streams)): before `work`, the stream waits for the buffer's reads on other
    /// streams; after, it records the buffer's write event, which every later use of the buffer,
    /// on any stream, and its free wait for (also when `work` panics: the panic goes on after).
    ///
    /// # Safety
    ///
    /// Every access `work` issues to the view is on the stream it is given (this backend's). On
    /// another stream, an access would be ordered neither after the reads this call waits for nor
    /// before the write event it records, and a read there that cudarc's one read event forgets (a
    /// read on a third stream re-records it) would be ordered with neither later writes nor the
    /// free.
    pub unsafe fn with_view_mut<T: Element, R>(
        &self,
        buffer: &mut DeviceBuffer,
        work: impl FnOnce(&Arc<CudaStream>, &mut CudaViewMut<'_, T>) -> R,
    ) -> Result<R, BackendError> {
        if buffer.dtype() != T::DTYPE {
            return Err(BackendError::DTypeMismatch { expected: T::DTYPE, found: buffer.dtype() });
        }
        let storage = self.storage_mut(buffer)?;
        self.outside_callers_capture("a buffer lent as a cudarc view")?;
        self.before_write(&storage.reads)?;
        let len = storage.len;
        // SAFETY: `transmute_mut` reinterprets the buffer's bytes as `len` elements of `T`:
        // - they are within the allocation: `device_buffer` allocated `dtype.bytes(len)` bytes (at
        //   least one) for this `dtype`, which is `T::DTYPE`, whose elements are `size_of::<T>()`
        //   bytes (the table of `Element`);
        // - cuMemAlloc aligns an allocation to at least 256 bytes, enough for any `T`;
        // - every bit pattern is a `T` (`Element: Pod`), so whatever the device holds, a copy of
        //   these elements to the host is valid values.
        let mut view = unsafe { storage.bytes.transmute_mut::<T>(len) }
            .ok_or(BackendError::TooLarge { dtype: T::DTYPE, len })?;
        // A panic in `work` still leaves the event after what it issued, since the buffer outlives
        // the unwinding.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(&self.stream, &mut view)));
        // The write event recorded after the work (cudarc's `SyncOnDrop`, as the pointer's guard
        // drops), whether or not `work` wrote through cudarc's tracked calls.
        drop(storage.bytes.device_ptr_mut(&self.stream));
        Ok(result.unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    }

    /// The number of CUDA devices, or why there are none.
    pub fn device_count() -> Result<usize, BackendError> {
        driver_library_present()?;
        std::panic::catch_unwind(CudaContext::device_count)
            .map_err(|_| {
                unavailable("the CUDA driver library is incomplete (a symbol is missing)".to_owned())
            })?
            .map(|count| usize::try_from(count).unwrap_or(0))
            .map_err(|error| unavailable(format!("cuInit failed: {error:?}")))
    }

    /// Whether the backend carries a compiled image of `module` in `namespace` (lookups in a
    /// carried module can still fail, when the image does not load on this device).
    pub fn carries(&self, namespace: &str, module: &str) -> bool {
        self.modules.carries(namespace, module)
    }

    /// The device's compute capability, `(9, 0)` for sm_90.
    pub fn compute_capability(&self) -> (u32, u32) {
        self.modules.loader().capability
    }

    /// The CUDA version the driver supports, `(13, 0)` for CUDA 13.0 (`cuDriverGetVersion`): the
    /// newest toolkit whose PTX it can compile.
    pub fn driver_version(&self) -> (u32, u32) {
        self.modules.loader().driver
    }

    fn description(&self) -> &str {
        &self.modules.loader().description
    }

    fn storage<'b>(&self, buffer: &'b DeviceBuffer) -> Result<&'b CudaStorage, BackendError> {
        if buffer.backend() != self.memory {
            return Err(self.foreign_buffer(buffer));
        }
        buffer.storage().ok_or_else(|| self.foreign_buffer(buffer))
    }

    fn storage_mut<'b>(&self, buffer: &'b mut DeviceBuffer) -> Result<&'b mut CudaStorage, BackendError> {
        if buffer.backend() != self.memory {
            return Err(self.foreign_buffer(buffer));
        }
        let foreign = self.foreign_buffer(buffer);
        buffer.storage_mut().ok_or(foreign)
    }

    /// Refuses `what`, an operation on kda's own memory, while the stream is capturing a graph of
    /// the caller's (`CudaStream::begin_capture`): the capture would record it (an allocation, a
    /// copy from or to host memory borrowed for the call only, a launch), the caller's replays
    /// would repeat it unseen by the buffers' ordering by events, and those events cannot be waited
    /// for inside a capture. Borrowed memory is the caller's to order, in a capture as outside one.
    fn outside_callers_capture(&self, what: &str) -> Result<(), BackendError> {
        if self.role == StreamRole::OwnCapture {
            return Ok(());
        }
        let status = self
            .stream
            .capture_status()
            .map_err(|error| self.driver("asking for the capture status", error))?;
        if status == CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE {
            return Ok(());
        }
        Err(BackendError::InCallersCapture {
            operation: what.to_owned(),
            backend: self.description().to_owned(),
        })
    }

    /// [`Self::outside_callers_capture`] for `what`, a launch on this backend's buffers or a copy
    /// between them, which a graph of the caller's takes while [`Self::admitting_own_buffers`]
    /// runs.
    fn admitted_in_callers_capture(&self, what: &str) -> Result<(), BackendError> {
        if self.admitting.load(Ordering::Acquire) > 0 {
            return Ok(());
        }
        self.outside_callers_capture(what)
    }

    /// Runs `work` with this backend's buffers admitted into a graph the caller captures on its
    /// stream (`CudaStream::begin_capture`): while `work` runs, a launch on them and a copy between
    /// them are captured as the caller's own launches are, where they are otherwise refused
    /// ([`BackendError::InCallersCapture`]). An allocation and a copy from or to the host are
    /// still refused: the capture would keep an address of memory the replays do not own, or of
    /// host memory borrowed for the call only. Outside a capture, `work` runs as it would anyway.
    /// This is how an engine captures a step of a model built on kda (its weights, its state and
    /// its workspace in kda buffers) into a graph of its own.
    ///
    /// An `Err`, and `work` is not called, where the backend's buffers are ordered between
    /// streams by events ([`BackendError::OrderedByEvents`]): a capture can neither wait for
    /// events recorded outside it nor leave events its replays record. The engine turns event
    /// tracking off (`CudaContext::disable_event_tracking`) before it makes the backend
    /// [`on_stream`](Self::on_stream), as it does for its own captured slices; then the
    /// backend's buffers are its own (every other backend refuses them), so everything issued on
    /// them, to their free, is on this one stream, in order with the graph's launches there.
    ///
    /// # Safety
    ///
    /// For each graph captured on this backend's stream while `work` runs, as long as the graph
    /// exists, the caller guarantees:
    /// - it is launched on this backend's stream only (cudarc's `CudaGraph::launch` launches on
    ///   the stream it was captured on);
    /// - it is not launched after a buffer that a launch or copy on this backend named while
    ///   `work` ran (on any thread) is dropped or its storage replaced: the graph holds the
    ///   buffers' device addresses, not the buffers, and a launch after the free would reach freed
    ///   memory.
    pub unsafe fn admitting_own_buffers<R>(&self, work: impl FnOnce() -> R) -> Result<R, BackendError> {
        let context = &self.modules.loader().context;
        if self.memory == self.id || context.is_event_tracking() {
            return Err(BackendError::OrderedByEvents { backend: self.description().to_owned() });
        }
        /// Ends the admission when `work` returns or unwinds.
        struct Admission<'a>(&'a AtomicUsize);
        impl Drop for Admission<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::Release);
            }
        }
        self.admitting.fetch_add(1, Ordering::AcqRel);
        let _admission = Admission(&self.admitting);
        Ok(work())
    }

    /// Before a write of a buffer on this stream: waits for its reads on the other streams.
    fn before_write(&self, reads: &Reads) -> Result<(), BackendError> {
        reads
            .wait(&self.stream, Some(self.key))
            .map_err(|e| self.driver("waiting for reads on other streams", e))
    }

    /// After a read of a buffer was issued on this stream: notes it for later writes and the free.
    fn after_read(&self, reads: &Reads) -> Result<(), BackendError> {
        reads.read(self.key, &self.stream).map_err(|e| self.driver("recording a read", e))
    }

    /// The function behind `kernel`, if this backend issued it.
    fn resolved(&self, kernel: KernelHandle) -> Result<CudaKernel, BackendError> {
        self.modules.resolved(self.id, self.description(), kernel)
    }

    /// `buffer` refused: named by its id and the backend that allocated it.
    fn foreign_buffer(&self, buffer: &DeviceBuffer) -> BackendError {
        self.foreign(&format!("device buffer {} (allocated by {})", buffer.id(), buffer.backend()))
    }

    fn foreign(&self, what: &str) -> BackendError {
        BackendError::ForeignResource { what: what.to_owned(), backend: self.description().to_owned() }
    }

    fn driver(&self, operation: &str, error: DriverError) -> BackendError {
        BackendError::Driver {
            operation: format!("{operation} on {}", self.description()),
            source: Box::new(error),
        }
    }

    /// A buffer of `len` elements of `dtype` over the bytes `allocate` gets on this backend's
    /// stream (at least one: cuMemAlloc refuses zero bytes, so an empty buffer still owns one).
    fn device_buffer(
        &self,
        dtype: DType,
        len: usize,
        allocate: impl FnOnce(&Arc<CudaStream>, usize) -> Result<CudaSlice<u8>, DriverError>,
    ) -> Result<DeviceBuffer, BackendError> {
        let bytes = dtype.bytes(len).ok_or(BackendError::TooLarge { dtype, len })?;
        self.outside_callers_capture("an allocation")?;
        let bytes =
            allocate(&self.stream, bytes.max(1)).map_err(|e| self.driver("allocating device memory", e))?;
        DeviceBuffer::new(
            self.memory,
            Box::new(CudaStorage { dtype, len, bytes: ManuallyDrop::new(bytes), reads: Reads::default() }),
        )
    }
}

/// The id the buffers of a backend on `context` carry: `shared`, the id of the buffers of its
/// other streams, where the context orders buffers between streams by events; one of its own
/// where it does not (see [Streams](self#streams)).
fn memory_id(context: &CudaContext, shared: BackendId) -> BackendId {
    if context.is_event_tracking() { shared } else { BackendId::fresh() }
}

fn unavailable(reason: String) -> BackendError {
    BackendError::Unavailable { backend: "CUDA".to_owned(), reason }
}

/// The loader of device `ordinal`: its context, capability, driver version and description.
fn open_device(ordinal: usize) -> Result<CudaLoader, BackendError> {
    let count =
        CudaContext::device_count().map_err(|error| unavailable(format!("cuInit failed: {error:?}")))?;
    if count <= 0 {
        return Err(unavailable("the driver reports no CUDA device".to_owned()));
    }
    if ordinal >= count as usize {
        return Err(unavailable(format!("there is no CUDA device {ordinal}: the driver reports {count}")));
    }
    let context =
        CudaContext::new(ordinal).map_err(|error| unavailable(format!("device {ordinal}: {error:?}")))?;
    describe_context(context, ordinal)
}

/// The loader of `context`, device `ordinal`.
fn describe_context(context: Arc<CudaContext>, ordinal: usize) -> Result<CudaLoader, BackendError> {
    let name = context.name().unwrap_or_else(|_| "unknown device".to_owned());
    let capability = context
        .compute_capability()
        .ok()
        .and_then(|(major, minor)| Some((u32::try_from(major).ok()?, u32::try_from(minor).ok()?)))
        .ok_or_else(|| unavailable(format!("device {ordinal} ({name}) reports no compute capability")))?;
    let (major, minor) = capability;
    let description = format!("CUDA device {ordinal} ({name}, sm_{major}{minor})");
    Ok(CudaLoader { context, capability, driver: driver_version()?, description })
}

/// The CUDA version the driver supports, as (major, minor).
fn driver_version() -> Result<(u32, u32), BackendError> {
    let mut version = 0;
    // SAFETY: `cuDriverGetVersion` writes one `int` through its pointer, which points to a local;
    // it needs no context and no prior `cuInit`. Called inside `new`'s `catch_unwind`, so a driver
    // library without the symbol is an `Err`, not a panic.
    let status = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) };
    match (status, u32::try_from(version)) {
        // `1000 * major + 10 * minor`: 13000 is CUDA 13.0.
        (cudarc::driver::sys::cudaError_enum::CUDA_SUCCESS, Ok(version)) => {
            Ok((version / 1000, version % 1000 / 10))
        }
        (status, _) => Err(unavailable(format!("cuDriverGetVersion failed: {status:?} (version {version})"))),
    }
}

impl GpuBackend for CudaBackend {
    fn describe(&self) -> String {
        self.description().to_owned()
    }

    fn has_module(&self, module: &str) -> bool {
        self.modules.has_module(module)
    }

    fn lookup(&self, entry: &KernelEntry) -> Result<KernelHandle, LookupError> {
        self.modules.lookup(entry).map(|index| KernelHandle::new(self.id, index))
    }

    fn is_handle_of(&self, kernel: KernelHandle, entry: &KernelEntry) -> bool {
        self.modules.is_handle_of(self.id, kernel, entry)
    }

    fn alloc(&self, dtype: DType, len: usize) -> Result<DeviceBuffer, BackendError> {
        self.device_buffer(dtype, len, |stream, bytes| stream.alloc_zeros::<u8>(bytes))
    }

    fn alloc_for_write(&self, dtype: DType, len: usize) -> Result<DeviceBuffer, BackendError> {
        // A `bool` is 0 or 1, which unset memory need not be: zeroed, as `alloc` leaves it.
        if dtype == DType::Bool {
            return self.alloc(dtype, len);
        }
        // SAFETY: cudarc's `alloc` is unsafe only because it leaves the memory unset. These bytes
        // are never a Rust value: the host sees them only through `copy_to_host`, as bytes, into
        // elements of which every bit pattern is valid (every element type but `bool`, zeroed
        // above), so unset memory reads as arbitrary values, which is
        // `GpuBackend::alloc_for_write`'s contract, not as undefined behaviour.
        self.device_buffer(dtype, len, |stream, bytes| unsafe { stream.alloc::<u8>(bytes) })
    }

    fn copy_to_device(&self, src: &[u8], dst: &mut DeviceBuffer) -> Result<(), BackendError> {
        crate::buffer::check_elements(dst.dtype(), src)?;
        let expected = dst.byte_len();
        if src.len() != expected {
            return Err(BackendError::SizeMismatch { expected, found: src.len() });
        }
        if src.is_empty() {
            return Ok(());
        }
        let storage = self.storage_mut(dst)?;
        self.outside_callers_capture("a copy to the device")?;
        self.before_write(&storage.reads)?;
        let mut target = storage.bytes.slice_mut(..expected);
        self.stream.memcpy_htod(src, &mut target).map_err(|e| self.driver("copying to the device", e))
    }

    fn upload_const_bytes(&self, dtype: DType, contents: &[u8]) -> Result<ConstBuffer, BackendError> {
        ConstBuffer::upload(self, dtype, contents)
    }

    fn copy_to_host(&self, src: &DeviceBuffer, dst: &mut [u8]) -> Result<(), BackendError> {
        let expected = src.byte_len();
        if dst.len() != expected {
            return Err(BackendError::SizeMismatch { expected, found: dst.len() });
        }
        if dst.is_empty() {
            return Ok(());
        }
        let storage = self.storage(src)?;
        self.outside_callers_capture("a copy to the host")?;
        self.stream
            .memcpy_dtoh(&storage.bytes.slice(..expected), dst)
            .map_err(|e| self.driver("copying to the host", e))?;
        self.after_read(&storage.reads)?;
        self.synchronize()
    }

    fn copy_on_device(&self, src: View<'_>, mut dst: ViewMut<'_>) -> Result<(), BackendError> {
        let (from, to) = crate::host::check_copy(&src, &dst)?;
        if from.is_empty() {
            return Ok(());
        }
        let source = self.storage(src.buffer())?;
        let target = self.storage_mut(dst.buffer_mut())?;
        self.admitted_in_callers_capture("a copy on the device")?;
        self.before_write(&target.reads)?;
        self.stream
            .memcpy_dtod(&source.bytes.slice(from), &mut target.bytes.slice_mut(to))
            .map_err(|e| self.driver("copying on the device", e))?;
        self.after_read(&source.reads)
    }

    fn launch(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        let resolved = self.resolved(kernel)?;
        signature::check(&resolved.entry, &geometry, args)?;
        // SAFETY: `launch_unchecked`'s conditions hold:
        // - `signature::check` just proved the argument count, each argument's kind, element type
        //   and access, every view at least as long as its extent at these scalar values, and
        //   every requirement of the entry (block shape, supported sizes) at this geometry;
        // - the kernel takes exactly the signature's C types: `CudaLoader::function` compared the
        //   loaded function's parameter layout (`cuFuncGetParamInfo`) with the signature when the
        //   cache issued this handle, and the build step (`kda_build::cuda`) checked the exact C types
        //   of the compiled source against the manifest with nvcc;
        // - the extents are what the kernel touches: that is the manifest's contract for the
        //   kernel, the one fact the kernel's author states and the reference kernels are tested
        //   against.
        unsafe { launch::launch(self, &resolved, geometry, args) }
    }

    unsafe fn launch_unchecked(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        let resolved = self.resolved(kernel)?;
        // SAFETY: the caller upholds `launch_unchecked`'s contract, which is `launch::launch`'s.
        unsafe { launch::launch(self, &resolved, geometry, args) }
    }

    fn synchronize(&self) -> Result<(), BackendError> {
        self.stream.synchronize().map_err(|e| self.driver("synchronizing", e))
    }

    /// Times `work` with CUDA events recorded on the stream around it.
    fn time(&self, work: &mut dyn FnMut() -> Result<(), BackendError>) -> Result<Duration, BackendError> {
        // Events made without flags cannot time (cudarc defaults to CU_EVENT_DISABLE_TIMING).
        let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        let record = || self.stream.record_event(timing).map_err(|e| self.driver("recording an event", e));
        let start = record()?;
        work()?;
        let end = record()?;
        end.synchronize().map_err(|e| self.driver("waiting for an event", e))?;
        let milliseconds = start.elapsed_ms(&end).map_err(|e| self.driver("reading an event", e))?;
        Ok(Duration::from_secs_f64(f64::from(milliseconds) / 1e3))
    }

    /// A CUDA graph, captured on the calling thread's per-thread stream, while the device has no
    /// stream of its own open (see the module `graph`).
    fn capture(
        &self,
        work: &mut dyn FnMut(&dyn GpuBackend) -> Result<(), BackendError>,
    ) -> Result<Option<Box<dyn crate::DeviceGraph>>, BackendError> {
        graph::capture(self, work)
    }

    /// A stream of its own on the device's context (`CudaContext::new_stream`), with this
    /// backend's id and module cache. Opening the first one waits for the device to finish what
    /// was issued so far.
    fn new_stream(&self) -> Result<Box<dyn GpuBackend + '_>, BackendError> {
        let stream =
            self.modules.loader().context.new_stream().map_err(|e| self.driver("opening a stream", e))?;
        let context = &self.modules.loader().context;
        let memory = memory_id(context, self.memory);
        Ok(Box::new(Self::issuing(self.id, memory, stream, Arc::clone(&self.modules), StreamRole::Opened)))
    }
}

impl Drop for CudaBackend {
    /// A stream other than the default one is joined into the default stream, if its work may
    /// touch buffers other streams use: whatever is issued there later runs after the stream's
    /// work, even once no stream is left open to track buffers. That is a stream of its own
    /// ([`GpuBackend::new_stream`], a capture's), and a caller's stream
    /// ([`CudaBackend::on_stream`]) whose buffers are shared by events with the context's other
    /// streams: the caller may drop that stream as soon as this backend is gone, and when it was
    /// the last stream open, cudarc stops waiting for buffers' events (`Drop for CudaSlice`
    /// frees without waiting where the context no longer manages streams), so a free or a read on
    /// the default stream would not wait for a write still running there. Where the buffers are
    /// the backend's own (event tracking off) every use of them, to the free, is on its stream,
    /// in order, and nothing is joined; nor is a stream capturing a graph of the caller's, into
    /// which the join would be captured.
    fn drop(&mut self) {
        let context = &self.modules.loader().context;
        let default = context.default_stream();
        if self.stream == default {
            return;
        }
        let shares_buffers = self.role != StreamRole::Given || self.memory == self.id;
        let capturing = self
            .stream
            .capture_status()
            .ok()
            .is_none_or(|status| status != CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE);
        if shares_buffers && !(self.role == StreamRole::Given && capturing) {
            context.record_err(default.join(&self.stream));
        }
    }
}
