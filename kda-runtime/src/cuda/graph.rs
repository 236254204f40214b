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

use std::sync::{Arc, Mutex, PoisonError};

use cudarc::driver::CudaGraph;
use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};

use super::{CudaBackend, StreamKey};
use crate::{BackendError, DeviceGraph, GpuBackend};

/// A captured graph, with the module cache whose functions it launches kept loaded.
struct CudaDeviceGraph {
    graph: Mutex<SendGraph>,
    _modules: Arc<super::ModuleCache<super::CudaLoader>>,
    description: String,
}

/// A [`CudaGraph`] that may move between threads.
struct SendGraph(CudaGraph);

// SAFETY: a CUDA graph and its executable are driver handles, valid on any thread of the process
// (the driver binds the context on each call: `CudaGraph::launch` binds it); what the driver asks
// is that no two threads use one graph at once, which the `Mutex` around every `SendGraph`
// (`CudaDeviceGraph::graph`) ensures.
unsafe impl Send for SendGraph {}

impl DeviceGraph for CudaDeviceGraph {
    unsafe fn launch(&self) -> Result<(), BackendError> {
        let graph = self.graph.lock().unwrap_or_else(PoisonError::into_inner);
        graph.0.launch().map_err(|source| BackendError::Driver {
            operation: format!("launching a graph on {}", self.description),
            source: Box::new(source),
        })
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
    let capturing = CudaBackend {
        id: gpu.id,
        stream: context.per_thread_stream(),
        key: StreamKey::fresh(),
        modules: Arc::clone(&gpu.modules),
    };
    let mode = CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    capturing.stream.begin_capture(mode).map_err(|e| gpu.driver("beginning a capture", e))?;
    let issued = work(&capturing);
    // A capture begun must end, whatever `work` did.
    let ended = capturing.stream.end_capture(CUgraphInstantiate_flags(0));
    issued?;
    let graph = ended.map_err(|e| gpu.driver("ending a capture", e))?;
    Ok(graph.map(|graph| {
        Box::new(CudaDeviceGraph {
            graph: Mutex::new(SendGraph(graph)),
            _modules: Arc::clone(&gpu.modules),
            description: gpu.description().to_owned(),
        }) as Box<dyn DeviceGraph>
    }))
}
