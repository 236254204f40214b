//! Device graphs: the launches of a step captured once ([`GpuBackend::capture`]) and run again as
//! one unit, and the buffers they bind.
//!
//! A graph holds the addresses of the buffers its launches were captured on, so launching it is
//! `unsafe`: those buffers must be alive, and the written ones borrowed by nobody else. Safe code
//! launches graphs through [`CapturedList`](crate::replay::CapturedList), which checks the buffers
//! it is given against the graph's own [`bindings`](DeviceGraph::bindings), recorded by the
//! backend's [`Capture`] as each launch was captured, never against what the caller says the
//! graph is. A graph that some backend of the caller's making hands back in place of the one its
//! `work` captured still names the buffers it was captured on, so it launches only on them.

use std::sync::{Mutex, PoisonError};

use crate::{BackendError, DType, DeviceBuffer, GpuBackend, KernelArg, KernelHandle, LaunchGeometry};

/// Launches captured by [`GpuBackend::capture`], replayable as one unit (a CUDA graph): the
/// launch overhead of a whole step paid once. A graph keeps alive the code it runs, not the
/// buffers it touches.
pub trait DeviceGraph: Send + Sync {
    /// The buffers the captured launches read and write, by [`DeviceBuffer::id`], as the
    /// backend's [`Capture`] saw them.
    fn bindings(&self) -> &GraphBindings;

    /// Runs the captured launches again, in order, with the arguments they were captured with,
    /// after the work other streams issued earlier on the buffers it binds, as a launch of them
    /// would (see [`GpuBackend::new_stream`]).
    ///
    /// # Safety
    ///
    /// - every buffer [`bindings`](Self::bindings) names as read is in `read` or `written`, and
    ///   every one it names as written is in `written`, each with the element type and length the
    ///   bindings give it ([`GraphBindings::are_covered_by`]): alive, as the graph holds their
    ///   addresses;
    /// - no other view of a written buffer is in use until the launches finish (the borrows the
    ///   captured launches held hold again), which `written`'s exclusive borrows give the caller.
    unsafe fn launch(
        &self,
        read: &[&DeviceBuffer],
        written: &mut [&mut DeviceBuffer],
    ) -> Result<(), BackendError>;
}

/// The buffers a graph's launches bind, by [`DeviceBuffer::id`] (ids are never reused, so an id
/// names one buffer for the life of the process), each with the element type and length it had
/// when captured.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GraphBindings {
    /// Buffers the launches read and never write.
    pub reads: Vec<BoundBuffer>,
    /// Buffers a launch writes.
    pub writes: Vec<BoundBuffer>,
}

/// A buffer a graph binds, as it was when captured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BoundBuffer {
    /// Its [`DeviceBuffer::id`].
    pub id: u64,
    /// Its element type.
    pub dtype: DType,
    /// Its length in elements.
    pub len: usize,
}

impl BoundBuffer {
    fn of(buffer: &DeviceBuffer) -> Self {
        Self { id: buffer.id(), dtype: buffer.dtype(), len: buffer.len() }
    }

    /// Whether `buffer` is this one, with the same shape.
    fn is(&self, buffer: &DeviceBuffer) -> bool {
        *self == Self::of(buffer)
    }
}

impl GraphBindings {
    /// Notes the buffers of one launch's `args`.
    fn note(&mut self, args: &[KernelArg<'_>]) {
        for arg in args {
            match arg {
                KernelArg::Read(view) => insert(&mut self.reads, BoundBuffer::of(view.buffer())),
                KernelArg::Write(view) => insert(&mut self.writes, BoundBuffer::of(view.buffer())),
                _ => {}
            }
        }
        // A buffer written anywhere in the graph is a written one.
        let writes = &self.writes;
        self.reads.retain(|read| !writes.iter().any(|write| write.id == read.id));
    }

    /// Whether `read` and `written` hold every buffer these bindings name, of the shape it was
    /// captured with, the written ones among `written`: what [`DeviceGraph::launch`] needs of its
    /// arguments.
    pub fn are_covered_by(&self, read: &[&DeviceBuffer], written: &[&mut DeviceBuffer]) -> bool {
        let in_written = |bound: &BoundBuffer| written.iter().any(|buffer| bound.is(buffer));
        let in_read = |bound: &BoundBuffer| read.iter().any(|buffer| bound.is(buffer));
        self.writes.iter().all(in_written)
            && self.reads.iter().all(|bound| in_read(bound) || in_written(bound))
    }
}

fn insert(bound: &mut Vec<BoundBuffer>, buffer: BoundBuffer) {
    if !bound.iter().any(|known| known.id == buffer.id) {
        bound.push(buffer);
    }
}

/// The allocation and copy methods of [`GpuBackend`] for a wrapper that records launches and
/// refuses everything else, each an `Err` from the wrapper's own `refuse(what)`.
macro_rules! refused_memory_methods {
    () => {
        fn alloc(&self, _: $crate::DType, _: usize) -> Result<$crate::DeviceBuffer, $crate::BackendError> {
            Err(self.refuse("an allocation"))
        }

        fn copy_to_device(&self, _: &[u8], _: &mut $crate::DeviceBuffer) -> Result<(), $crate::BackendError> {
            Err(self.refuse("a copy"))
        }

        fn copy_to_host(&self, _: &$crate::DeviceBuffer, _: &mut [u8]) -> Result<(), $crate::BackendError> {
            Err(self.refuse("a copy"))
        }

        fn upload_const_bytes(
            &self,
            _: $crate::DType,
            _: &[u8],
        ) -> Result<$crate::ConstBuffer, $crate::BackendError> {
            Err(self.refuse("an allocation"))
        }

        fn copy_on_device(
            &self,
            _: $crate::View<'_>,
            _: $crate::ViewMut<'_>,
        ) -> Result<(), $crate::BackendError> {
            Err(self.refuse("a copy"))
        }
    };
}
pub(crate) use refused_memory_methods;

/// The backend a capture hands its `work`: launches go through to the capturing backend, checked
/// as always, and what each binds is noted for the graph's [`GraphBindings`]; everything else a
/// graph cannot hold (allocations, copies, synchronization, unchecked launches, whose buffers no
/// signature bounds) is refused.
pub struct Capture<'g> {
    gpu: &'g dyn GpuBackend,
    bindings: Mutex<GraphBindings>,
}

impl<'g> Capture<'g> {
    /// A capture issuing on `gpu`, which is capturing.
    pub fn new(gpu: &'g dyn GpuBackend) -> Self {
        Self { gpu, bindings: Mutex::new(GraphBindings::default()) }
    }

    /// What the captured launches bind.
    pub fn finish(self) -> GraphBindings {
        self.bindings.into_inner().unwrap_or_else(PoisonError::into_inner)
    }

    fn refuse(&self, what: &str) -> BackendError {
        BackendError::Replay(format!("{what} while capturing a graph: a graph holds launches only"))
    }
}

impl GpuBackend for Capture<'_> {
    fn describe(&self) -> String {
        format!("{} (capturing)", self.gpu.describe())
    }

    crate::forward::forwarded_methods!(gpu: has_module, lookup, is_handle_of);

    refused_memory_methods!();

    fn launch(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        if let Some(KernelArg::Borrowed(borrowed)) =
            args.iter().find(|arg| matches!(arg, KernelArg::Borrowed(_)))
        {
            return Err(self.refuse(&format!("a launch on {}", borrowed.describe())));
        }
        self.gpu.launch(kernel, geometry, args)?;
        self.bindings.lock().unwrap_or_else(PoisonError::into_inner).note(args);
        Ok(())
    }

    /// Refused: a graph's buffers are bound by checked launches only.
    unsafe fn launch_unchecked(
        &self,
        _: KernelHandle,
        _: LaunchGeometry,
        _: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        Err(self.refuse("an unchecked launch"))
    }

    fn synchronize(&self) -> Result<(), BackendError> {
        Err(self.refuse("a synchronization"))
    }
}
