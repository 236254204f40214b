//! The reads of one buffer on each stream of its device: what cudarc's event tracking keeps only
//! for the latest read.
//!
//! cudarc gives each `CudaSlice` one read event, which every read re-records on its own stream
//! (`SyncOnDrop::Record` from `DevicePtr::device_ptr`, and `LaunchArgs::launch` for a `&CudaView`
//! argument). After reads on two streams it holds the second only, so a write on a third stream
//! (`DevicePtrMut::device_ptr_mut`, a `&mut CudaViewMut` argument) would wait for that read and not
//! the first, and so would the free (`Drop for CudaSlice`). [`Reads`] keeps an event per stream,
//! recorded after that stream's latest read of the buffer; writes on other streams and the free
//! wait for all of them. Reads after reads, and everything after a write, cudarc orders itself.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use cudarc::driver::{CudaEvent, CudaStream, DriverError};

/// One stream of a device, as [`Reads`] tells them apart: a number no other stream of this
/// process has, so a stream closed and another opened are never taken for one another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct StreamKey(u64);

impl StreamKey {
    /// A key no stream has had.
    pub(super) fn fresh() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// For one buffer, an event per stream that has read it since streams were tracked, recorded
/// after that stream's latest read.
#[derive(Debug, Default)]
pub(super) struct Reads {
    events: Mutex<Vec<(StreamKey, CudaEvent)>>,
}

impl Reads {
    /// Notes a read of the buffer just issued on `stream` (`key`): the stream's event now
    /// follows it. Nothing while the context tracks no streams (the backend has opened none, so
    /// one queue orders everything; the first stream opened waits for the device to be idle).
    pub(super) fn read(&self, key: StreamKey, stream: &CudaStream) -> Result<(), DriverError> {
        let context = stream.context();
        if !context.is_managing_stream_synchronization() {
            return Ok(());
        }
        let mut events = self.events();
        match events.iter().find(|(reader, _)| *reader == key) {
            Some((_, event)) => event.record(stream),
            None => {
                let event = context.new_event(None)?;
                event.record(stream)?;
                events.push((key, event));
                Ok(())
            }
        }
    }

    /// Makes `stream` wait for the reads noted on every stream but `except`: before a write on
    /// stream `except`, or, with `None`, before the buffer is freed. Every noted read is waited
    /// for, also once the context has stopped managing streams (the streams that read are all
    /// dropped): their work may still be running, and an event outlives its stream.
    pub(super) fn wait(&self, stream: &CudaStream, except: Option<StreamKey>) -> Result<(), DriverError> {
        self.events()
            .iter()
            .filter(|(reader, _)| Some(*reader) != except)
            .try_for_each(|(_, event)| stream.wait(event))
    }

    fn events(&self) -> MutexGuard<'_, Vec<(StreamKey, CudaEvent)>> {
        // Nothing panics while holding the lock; a poisoned list is still a list of events.
        self.events.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
