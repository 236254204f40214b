//! CUDA graphs: the launches of a step captured once ([`GpuBackend::capture`]) and launched as one
//! unit.
//!
//! The backend issues on the legacy default stream, which cannot be captured; a capture runs on
//! the calling thread's per-thread default stream instead, and the graph launches there. That
//! stream is a blocking one, so the legacy stream and it are ordered both ways without events:
//! a graph runs after what the backend issued before it and before what it issues after. While
//! the device has a stream of its own open, cudarc's event tracking would make captured launches
//! wait for events recorded outside the capture, which a capture refuses: then there is no graph
//! and the caller replays the launches one by one.
//!
//! A graph captured before a stream was opened may be launched after: streams of their own are
//! non-blocking, so nothing orders them with the per-thread stream implicitly. A graph launch is
//! therefore ordered like a kernel launch, by the events of the buffers its
//! [`bindings`](DeviceGraph::bindings) name: it waits for their writes (and, for the buffers it
//! writes, their reads on other streams), and records its reads and writes for later work.

use std::sync::{Arc, Mutex, PoisonError};

use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaGraph, CudaStream, DevicePtr, DevicePtrMut};

use super::{CudaBackend, CudaStorage, StreamKey, StreamRole};
use crate::graph::{BoundBuffer, Capture};
use crate::{BackendError, BackendId, DeviceBuffer, DeviceGraph, GpuBackend, GraphBindings};

/// A captured graph, with the module cache whose functions it launches kept loaded.
struct CudaDeviceGraph {
    graph: Mutex<SendGraph>,
    _modules: Arc<super::ModuleCache<super::CudaLoader>>,
    /// The backend whose buffers it binds.
    backend: BackendId,
    /// The per-thread default stream it launches on, and its key among the buffers' readers.
    stream: Arc<CudaStream>,
    key: StreamKey,
    bindings: GraphBindings,
    description: String,
}

/// A [`CudaGraph`] that may move between threads.
struct SendGraph(CudaGraph);

// SAFETY: a CUDA graph and its executable are driver handles, valid on any thread of the process
// (the driver binds the context on each call: `CudaGraph::launch` binds it); what the driver asks
// is that no two threads use one graph at once, which the `Mutex` around every `SendGraph`
// (`CudaDeviceGraph::graph`) ensures.
unsafe impl Send for SendGraph {}

impl CudaDeviceGraph {
    fn driver(&self, operation: &str, error: cudarc::driver::DriverError) -> BackendError {
        BackendError::Driver {
            operation: format!("{operation} on {}", self.description),
            source: Box::new(error),
        }
    }

    /// The storage of `buffer` if it is this backend's.
    fn own<'b>(&self, buffer: &'b DeviceBuffer) -> Result<&'b CudaStorage, BackendError> {
        let own = (buffer.backend() == self.backend).then(|| buffer.storage()).flatten();
        own.ok_or_else(|| self.foreign(buffer))
    }

    /// The storage of `buffer`, mutably, if it is this backend's.
    fn own_mut<'b>(&self, buffer: &'b mut DeviceBuffer) -> Result<&'b mut CudaStorage, BackendError> {
        let foreign = self.foreign(buffer);
        if buffer.backend() != self.backend {
            return Err(foreign);
        }
        buffer.storage_mut().ok_or(foreign)
    }

    fn foreign(&self, buffer: &DeviceBuffer) -> BackendError {
        BackendError::ForeignResource {
            what: format!("buffer {} bound to a graph", buffer.id()),
            backend: self.description.clone(),
        }
    }
}

/// Whether `bound` names `buffer`.
fn names(bound: &[BoundBuffer], buffer: &DeviceBuffer) -> bool {
    bound.iter().any(|bound| bound.id == buffer.id())
}

impl DeviceGraph for CudaDeviceGraph {
    fn bindings(&self) -> &GraphBindings {
        &self.bindings
    }

    unsafe fn launch(
        &self,
        read: &[&DeviceBuffer],
        written: &mut [&mut DeviceBuffer],
    ) -> Result<(), BackendError> {
        let graph = self.graph.lock().unwrap_or_else(PoisonError::into_inner);
        let (stream, key) = (&*self.stream, self.key);
        // Ordered as a kernel launch of the same buffers is (module `cuda`, Streams): for each
        // buffer it reads, `DevicePtr::device_ptr` waits for the buffer's write and returns the
        // guard that records its read event when dropped; for each it writes, the reads on other
        // streams are waited for, then `DevicePtrMut::device_ptr_mut` waits for its read and
        // write and returns the guard that records its write event. The guards drop after the
        // graph is enqueued.
        let mut guards = Vec::with_capacity(self.bindings.reads.len() + self.bindings.writes.len());
        let mut readers = Vec::with_capacity(self.bindings.reads.len());
        for buffer in written.iter_mut() {
            if names(&self.bindings.writes, buffer) {
                let storage = self.own_mut(buffer)?;
                storage
                    .reads
                    .wait(stream, Some(key))
                    .map_err(|e| self.driver("waiting for reads on other streams", e))?;
                guards.push(storage.bytes.device_ptr_mut(stream).1);
            } else if names(&self.bindings.reads, buffer) {
                let storage = self.own(buffer)?;
                guards.push(storage.bytes.device_ptr(stream).1);
                readers.push(&storage.reads);
            }
        }
        for buffer in read.iter().filter(|buffer| names(&self.bindings.reads, buffer)) {
            let storage = self.own(buffer)?;
            guards.push(storage.bytes.device_ptr(stream).1);
            readers.push(&storage.reads);
        }
        let launched = graph.0.launch().map_err(|e| self.driver("launching a graph", e));
        drop(guards);
        for reads in readers {
            reads.read(key, stream).map_err(|e| self.driver("recording a read", e))?;
        }
        launched
    }
}

/// [`GpuBackend::capture`] on `gpu`: see the module's documentation.
pub(super) fn capture(
    gpu: &CudaBackend,
    work: &mut dyn FnMut(&dyn GpuBackend) -> Result<(), BackendError>,
) -> Result<Option<Box<dyn DeviceGraph>>, BackendError> {
    let context = &gpu.modules.loader().context;
    if context.is_managing_stream_synchronization() || gpu.stream != context.default_stream() {
        return Ok(None);
    }
    let stream = context.per_thread_stream();
    let capturing =
        CudaBackend::issuing(gpu.id, gpu.memory, stream, Arc::clone(&gpu.modules), StreamRole::OwnCapture);
    let mode = CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    capturing.stream.begin_capture(mode).map_err(|e| gpu.driver("beginning a capture", e))?;
    let capture = Capture::new(&capturing);
    let issued = work(&capture);
    // A capture begun must end, whatever `work` did.
    let ended = capturing.stream.end_capture(CUgraphInstantiate_flags(0));
    issued?;
    let graph = ended.map_err(|e| gpu.driver("ending a capture", e))?;
    let bindings = capture.finish();
    Ok(graph.map(|graph| {
        Box::new(CudaDeviceGraph {
            graph: Mutex::new(SendGraph(graph)),
            _modules: Arc::clone(&gpu.modules),
            backend: gpu.memory,
            stream: Arc::clone(&capturing.stream),
            key: capturing.key,
            bindings,
            description: gpu.description().to_owned(),
        }) as Box<dyn DeviceGraph>
    }))
}
