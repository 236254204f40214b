//! Launch lists: the fixed launches of a step, recorded once and replayed without the host work
//! that chose them (dispatch, sizes, buffer planning) and without allocating.
//!
//! A recording is bound to two lists of buffers: `shared` ones the step only reads (weights) and
//! `exclusive` ones it may write (a workspace, a state pool). [`LaunchRecorder`] is a backend
//! that forwards to the real one, runs the step once and notes each launch with its views named
//! by their place in those lists; it refuses allocations and copies, so what it records is the
//! whole step. [`LaunchList::replay`] binds the same places to buffers of the same sizes (the same
//! buffers, or another pool's) and issues the launches again, each one checked against its
//! kernel's signature like any other launch.

use std::ops::Range;
use std::sync::{Mutex, MutexGuard};

use crate::{BackendError, DType, DeviceBuffer, GpuBackend, KernelArg, KernelHandle, LaunchGeometry, Scalar};

/// Where a recorded view points: a place in the recording's buffer lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// `shared[i]`, read only.
    Shared(usize),
    /// `exclusive[i]`.
    Exclusive(usize),
}

/// One argument of a recorded launch.
#[derive(Clone, Debug, PartialEq)]
enum ListedArg {
    /// Elements `range` of the buffer at `place`, written by the kernel where `writable`.
    View {
        place: Place,
        range: Range<usize>,
        writable: bool,
    },
    Scalar(Scalar),
    /// A null pointer for a `nullable` buffer.
    Null,
}

/// One launch of a list.
#[derive(Clone, Debug)]
struct ListedLaunch {
    kernel: KernelHandle,
    geometry: LaunchGeometry,
    args: Vec<ListedArg>,
}

/// The element type and length of each bound buffer: what a replay must bind again.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Shapes {
    shared: Vec<(DType, usize)>,
    exclusive: Vec<(DType, usize)>,
}

impl Shapes {
    fn of<'a>(
        shared: impl IntoIterator<Item = &'a DeviceBuffer>,
        exclusive: impl IntoIterator<Item = &'a DeviceBuffer>,
    ) -> Self {
        let shape = |buffer: &DeviceBuffer| (buffer.dtype(), buffer.len());
        Self {
            shared: shared.into_iter().map(shape).collect(),
            exclusive: exclusive.into_iter().map(shape).collect(),
        }
    }
}

/// The launches of one step, replayable on the backend that recorded them.
#[derive(Clone, Debug)]
pub struct LaunchList {
    launches: Vec<ListedLaunch>,
    shapes: Shapes,
}

impl LaunchList {
    /// The number of launches.
    pub fn len(&self) -> usize {
        self.launches.len()
    }

    /// Whether the list launches nothing.
    pub fn is_empty(&self) -> bool {
        self.launches.is_empty()
    }

    /// Issues the recorded launches on `gpu`, in order, with the recorded geometry and scalars
    /// and each view on the buffer now in its place: `shared` and `exclusive` must hold buffers
    /// of the element types and lengths the recording was bound to (an `Err` before anything is
    /// launched otherwise). Allocates no device memory. Every launch is checked against its
    /// signature, so a replay is as safe as the launches it repeats.
    pub fn replay(
        &self,
        gpu: &dyn GpuBackend,
        shared: &[&DeviceBuffer],
        exclusive: &mut [&mut DeviceBuffer],
    ) -> Result<(), BackendError> {
        let bound = Shapes::of(shared.iter().copied(), exclusive.iter().map(|b| &**b));
        if bound != self.shapes {
            return Err(BackendError::Replay(format!(
                "bound to {:?}, the recording to {:?}",
                bound, self.shapes
            )));
        }
        for launch in &self.launches {
            let mut args = bind(&launch.args, shared, exclusive)?;
            gpu.launch(launch.kernel, launch.geometry, &mut args)?;
        }
        Ok(())
    }
}

impl LaunchList {
    /// The list's launches on these bindings, captured into one device graph where `gpu` has
    /// graphs ([`GpuBackend::capture`]; `Ok(None)` elsewhere, with nothing launched). The
    /// bindings are checked as [`LaunchList::replay`] checks them, and every launch against its
    /// signature as it is captured; capturing runs nothing.
    pub fn capture(
        &self,
        gpu: &dyn GpuBackend,
        shared: &[&DeviceBuffer],
        exclusive: &mut [&mut DeviceBuffer],
    ) -> Result<Option<CapturedList>, BackendError> {
        let bound = Bound::of(shared, exclusive);
        let graph = gpu.capture(&mut |capturing| self.replay(capturing, shared, exclusive))?;
        Ok(graph.map(|graph| CapturedList { graph, bound }))
    }
}

/// A [`LaunchList`] captured into a device graph, bound to the buffers it was captured on.
pub struct CapturedList {
    graph: Box<dyn crate::DeviceGraph>,
    bound: Bound,
}

/// The ids of the buffers a capture was bound to, each list apart: a buffer bound exclusive is
/// never taken for one bound shared.
#[derive(Debug, PartialEq, Eq)]
struct Bound {
    shared: Vec<u64>,
    exclusive: Vec<u64>,
}

impl Bound {
    fn of(shared: &[&DeviceBuffer], exclusive: &[&mut DeviceBuffer]) -> Self {
        Self {
            shared: shared.iter().map(|b| b.id()).collect(),
            exclusive: exclusive.iter().map(|b| b.id()).collect(),
        }
    }

    fn matches(&self, shared: &[&DeviceBuffer], exclusive: &[&mut DeviceBuffer]) -> bool {
        self.shared.iter().copied().eq(shared.iter().map(|b| b.id()))
            && self.exclusive.iter().copied().eq(exclusive.iter().map(|b| b.id()))
    }
}

impl CapturedList {
    /// Whether `shared` and `exclusive` are the buffers the graph was captured on, in order, each
    /// in the list it was captured in.
    pub fn is_bound_to(&self, shared: &[&DeviceBuffer], exclusive: &[&mut DeviceBuffer]) -> bool {
        self.bound.matches(shared, exclusive)
    }

    /// Runs the captured launches again on the buffers they were captured on, which must be
    /// `shared` and `exclusive` (an `Err` before anything runs otherwise: see
    /// [`CapturedList::is_bound_to`]).
    pub fn launch(
        &self,
        shared: &[&DeviceBuffer],
        exclusive: &mut [&mut DeviceBuffer],
    ) -> Result<(), BackendError> {
        if !self.is_bound_to(shared, exclusive) {
            return Err(BackendError::Replay(
                "a graph bound to other buffers than it was captured on".to_owned(),
            ));
        }
        // The graph's own bindings, not the list's: a backend's `capture` may have handed back a
        // graph of other launches than this list's.
        if !self.graph.bindings().are_covered_by(shared, exclusive) {
            return Err(BackendError::Replay(
                "the captured graph uses buffers this launch does not bind (or of another shape than \
                 captured), or writes one bound shared"
                    .to_owned(),
            ));
        }
        // SAFETY: `DeviceGraph::launch` needs every buffer its bindings name among the buffers it
        // is given, the written ones among `exclusive`, and each of the shape it was captured
        // with: `are_covered_by` just checked that (the graph's launches were
        // checked against their signatures on these buffers when captured). `shared` borrows its
        // buffers and `exclusive` borrows its buffers mutably for the whole call, so they are
        // alive and no other view of a written one is in use. Buffer ids are never reused
        // (`DeviceBuffer::id`), so equal ids are the captured buffers themselves.
        unsafe { self.graph.launch(shared, exclusive) }
    }
}

/// The arguments of one launch on the buffers now bound. A recorded launch writes each exclusive
/// buffer through one view at most and never reads one it writes (the borrows of the recorded
/// launch ruled both out), so each written buffer is lent once, the rest shared.
fn bind<'a>(
    recorded: &[ListedArg],
    shared: &[&'a DeviceBuffer],
    exclusive: &'a mut [&mut DeviceBuffer],
) -> Result<Vec<KernelArg<'a>>, BackendError> {
    let written = |index: usize| {
        recorded
            .iter()
            .any(|arg| matches!(arg, ListedArg::View { place: Place::Exclusive(i), writable: true, .. } if *i == index))
    };
    let mut lent: Vec<Option<&'a mut DeviceBuffer>> = Vec::with_capacity(exclusive.len());
    let mut read: Vec<Option<&'a DeviceBuffer>> = Vec::with_capacity(exclusive.len());
    for (index, buffer) in exclusive.iter_mut().enumerate() {
        let buffer: &'a mut DeviceBuffer = buffer;
        if written(index) {
            lent.push(Some(buffer));
            read.push(None);
        } else {
            lent.push(None);
            read.push(Some(buffer));
        }
    }
    let misuse =
        |place: Place| BackendError::Replay(format!("{place:?} is written and read, or written twice"));
    recorded
        .iter()
        .map(|arg| {
            Ok(match arg {
                ListedArg::View { place: Place::Shared(i), range, .. } => {
                    KernelArg::Read(shared[*i].slice(range.clone()))
                }
                ListedArg::View { place: place @ Place::Exclusive(i), range, writable: true } => {
                    KernelArg::Write(lent[*i].take().ok_or_else(|| misuse(*place))?.slice_mut(range.clone()))
                }
                ListedArg::View { place: place @ Place::Exclusive(i), range, writable: false } => {
                    KernelArg::Read(read[*i].ok_or_else(|| misuse(*place))?.slice(range.clone()))
                }
                ListedArg::Scalar(scalar) => KernelArg::Scalar(*scalar),
                ListedArg::Null => KernelArg::Null,
            })
        })
        .collect()
}

/// A backend that runs a step on `gpu` and records its launches into a [`LaunchList`].
///
/// Pass it where the step takes its backend; lookups, launches and synchronisation go through to
/// `gpu`. Allocations and copies are refused: a step that needs them cannot be replayed as a
/// list (its buffers belong in the bound workspace, its copies outside the recording).
pub struct LaunchRecorder<'g> {
    gpu: &'g dyn GpuBackend,
    shared: Vec<u64>,
    exclusive: Vec<u64>,
    shapes: Shapes,
    launches: Mutex<Vec<ListedLaunch>>,
}

impl<'g> LaunchRecorder<'g> {
    /// A recorder on `gpu` whose views may name the buffers of `shared` (read only) and
    /// `exclusive`, by their place in these lists.
    pub fn new(gpu: &'g dyn GpuBackend, shared: &[&DeviceBuffer], exclusive: &[&DeviceBuffer]) -> Self {
        Self {
            gpu,
            shared: shared.iter().map(|b| b.id()).collect(),
            exclusive: exclusive.iter().map(|b| b.id()).collect(),
            shapes: Shapes::of(shared.iter().copied(), exclusive.iter().copied()),
            launches: Mutex::new(Vec::new()),
        }
    }

    /// The launches recorded so far, as a list.
    pub fn finish(self) -> LaunchList {
        let launches = self.launches.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
        LaunchList { launches, shapes: self.shapes }
    }

    fn log(&self) -> MutexGuard<'_, Vec<ListedLaunch>> {
        self.launches.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn record(&self, arg: &KernelArg<'_>) -> Result<ListedArg, BackendError> {
        let view = |id: u64, range: Range<usize>, writable: bool| {
            let place = match (
                self.shared.iter().position(|&s| s == id),
                self.exclusive.iter().position(|&e| e == id),
            ) {
                (_, Some(index)) => Place::Exclusive(index),
                (Some(_), None) if writable => {
                    return Err(BackendError::Replay("a launch writes a buffer bound as shared".to_owned()));
                }
                (Some(index), None) => Place::Shared(index),
                (None, None) => {
                    return Err(BackendError::Replay(
                        "a launch uses a buffer the recording is not bound to".to_owned(),
                    ));
                }
            };
            Ok(ListedArg::View { place, range, writable })
        };
        match arg {
            KernelArg::Read(v) => view(v.buffer().id(), v.range(), false),
            KernelArg::Write(v) => view(v.buffer().id(), v.range(), true),
            KernelArg::Scalar(scalar) => Ok(ListedArg::Scalar(*scalar)),
            KernelArg::Null => Ok(ListedArg::Null),
            KernelArg::Borrowed(_) => Err(BackendError::Replay(
                "a launch uses borrowed memory, which a recording cannot bind".to_owned(),
            )),
        }
    }

    fn refuse(&self, what: &str) -> BackendError {
        BackendError::Replay(format!("{what} while recording: a recorded step must not need it"))
    }
}

impl GpuBackend for LaunchRecorder<'_> {
    fn describe(&self) -> String {
        format!("{} (recording)", self.gpu.describe())
    }

    crate::forward::forwarded_methods!(gpu: has_module, lookup, is_handle_of, synchronize);

    crate::graph::refused_memory_methods!();

    fn launch(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        let recorded = args.iter().map(|arg| self.record(arg)).collect::<Result<Vec<_>, _>>()?;
        self.gpu.launch(kernel, geometry, args)?;
        self.log().push(ListedLaunch { kernel, geometry, args: recorded });
        Ok(())
    }

    /// Refused: a replay checks every launch against its signature, which this entry lacks.
    unsafe fn launch_unchecked(
        &self,
        _: KernelHandle,
        _: LaunchGeometry,
        _: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        Err(self.refuse("an unchecked launch"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::CpuBackend;
    use crate::fixtures::AXPY;
    use crate::record::RecordingBackend;
    use crate::{GpuBackendExt, LaunchGeometry};
    use crate::{View, ViewMut};

    /// `y[i] += a·x[i]`.
    fn axpy_backend() -> CpuBackend {
        CpuBackend::new().with_kernel(&AXPY, |mut args| {
            let (x, n, a) = (args.const_f32(0)?, args.u32(2)? as usize, args.f32(3)?);
            let y = args.mut_f32(1)?;
            y.iter_mut().zip(x).take(n).for_each(|(y, x)| *y += a * x);
            Ok(())
        })
    }

    /// Records `y += 2·x[0..2]` into `y[0..2]`, then `y += x` over all of `y`.
    fn record_two_axpys(gpu: &CpuBackend, x: &DeviceBuffer, y: &mut DeviceBuffer) -> LaunchList {
        let axpy = gpu.lookup(&AXPY).unwrap();
        let recorder = LaunchRecorder::new(gpu, &[x], &[y]);
        let geometry = LaunchGeometry::linear(4, 128);
        let n = y.len() as u32;
        recorder
            .launch(
                axpy,
                geometry,
                &mut [x.slice(0..2).into(), y.slice_mut(0..2).into(), 2u32.into(), 2f32.into()],
            )
            .unwrap();
        recorder
            .launch(axpy, geometry, &mut [x.view().into(), y.view_mut().into(), n.into(), 1f32.into()])
            .unwrap();
        recorder.finish()
    }

    #[test]
    fn a_replay_repeats_the_recorded_launches_on_the_buffers_bound_now() {
        let gpu = axpy_backend();
        let x = gpu.upload(&[1.0f32, 2.0, 3.0, 4.0]).unwrap();
        let mut y = gpu.zeros::<f32>(4).unwrap();
        let list = record_two_axpys(&gpu, &x, &mut y);
        assert_eq!(list.len(), 2);
        // The recording ran the step once.
        assert_eq!(gpu.download::<f32>(&y).unwrap(), [3.0, 6.0, 3.0, 4.0]);
        list.replay(&gpu, &[&x], &mut [&mut y]).unwrap();
        assert_eq!(gpu.download::<f32>(&y).unwrap(), [6.0, 12.0, 6.0, 8.0]);
        // Other buffers of the same shapes take the recorded places.
        let other_x = gpu.upload(&[10.0f32, 0.0, 0.0, 1.0]).unwrap();
        let mut other_y = gpu.zeros::<f32>(4).unwrap();
        list.replay(&gpu, &[&other_x], &mut [&mut other_y]).unwrap();
        assert_eq!(gpu.download::<f32>(&other_y).unwrap(), [30.0, 0.0, 0.0, 1.0]);
        assert_eq!(gpu.download::<f32>(&y).unwrap(), [6.0, 12.0, 6.0, 8.0], "the first y untouched");
    }

    #[test]
    fn a_replay_bound_to_other_shapes_launches_nothing() {
        let gpu = axpy_backend();
        let x = gpu.upload(&[1.0f32, 2.0, 3.0, 4.0]).unwrap();
        let mut y = gpu.zeros::<f32>(4).unwrap();
        let list = record_two_axpys(&gpu, &x, &mut y);
        let before = gpu.download::<f32>(&y).unwrap();
        let mut short = gpu.zeros::<f32>(2).unwrap();
        let words = gpu.zeros::<u32>(4).unwrap();
        let refusals = [
            list.replay(&gpu, &[&x], &mut [&mut short]),
            list.replay(&gpu, &[&words], &mut [&mut y]),
            list.replay(&gpu, &[], &mut [&mut y]),
            list.replay(&gpu, &[&x, &x], &mut [&mut y]),
        ];
        for refused in refusals {
            assert!(matches!(refused, Err(BackendError::Replay(_))), "{refused:?}");
        }
        assert_eq!(gpu.download::<f32>(&y).unwrap(), before);
        assert_eq!(gpu.download::<f32>(&short).unwrap(), [0.0, 0.0]);
    }

    #[test]
    fn a_captured_list_launches_only_on_the_buffers_it_was_captured_on() {
        let gpu = RecordingBackend::new().with_entry(&AXPY).with_graphs();
        let axpy = gpu.lookup(&AXPY).unwrap();
        let x = gpu.upload(&[1.0f32, 2.0]).unwrap();
        let (mut y, mut other_y) = (gpu.zeros::<f32>(2).unwrap(), gpu.zeros::<f32>(2).unwrap());
        let recorder = LaunchRecorder::new(&gpu, &[&x], &[&y]);
        let geometry = LaunchGeometry::linear(2, 128);
        recorder
            .launch(axpy, geometry, &mut [x.view().into(), y.view_mut().into(), 2u32.into(), 1f32.into()])
            .unwrap();
        let list = recorder.finish();
        let recorded = gpu.launches();

        let captured =
            list.capture(&gpu, &[&x], &mut [&mut y]).unwrap().expect("the recording backend has graphs");
        assert_eq!(gpu.launches(), recorded, "a capture launches nothing");
        assert!(captured.is_bound_to(&[&x], &[&mut y]) && !captured.is_bound_to(&[&x], &[&mut other_y]));
        let refused = captured.launch(&[&x], &mut [&mut other_y]);
        assert!(matches!(refused, Err(BackendError::Replay(_))), "{refused:?}");
        assert_eq!(gpu.graph_launches(), 0);
        captured.launch(&[&x], &mut [&mut y]).unwrap();
        assert_eq!(gpu.graph_launches(), 1);
        assert_eq!(gpu.launches()[recorded.len()..], recorded[..], "the graph's launches are the list's");
        // Without graphs there is nothing to capture.
        let plain = RecordingBackend::new().with_entry(&AXPY);
        let (x, mut y) = (plain.upload(&[1.0f32, 2.0]).unwrap(), plain.zeros::<f32>(2).unwrap());
        assert!(list.capture(&plain, &[&x], &mut [&mut y]).unwrap().is_none());
        assert!(plain.launches().is_empty());
    }

    #[test]
    fn a_recording_refuses_what_a_replay_could_not_repeat() {
        let gpu = axpy_backend();
        let axpy = gpu.lookup(&AXPY).unwrap();
        let x = gpu.upload(&[1.0f32, 2.0]).unwrap();
        let mut y = gpu.zeros::<f32>(2).unwrap();
        let mut unbound = gpu.zeros::<f32>(2).unwrap();
        let geometry = LaunchGeometry::linear(2, 128);
        let recorder = LaunchRecorder::new(&gpu, &[&x, &y], &[]);
        let launch = |x: View<'_>, y: ViewMut<'_>| {
            recorder.launch(axpy, geometry, &mut [x.into(), y.into(), 2u32.into(), 1f32.into()])
        };
        // Writing a shared buffer, and a buffer outside the recording.
        assert!(matches!(launch(x.view(), y.view_mut()), Err(BackendError::Replay(_))));
        assert!(matches!(launch(x.view(), unbound.view_mut()), Err(BackendError::Replay(_))));
        assert!(matches!(recorder.alloc(DType::F32, 4), Err(BackendError::Replay(_))));
        assert!(matches!(recorder.copy_to_device(&[0; 8], &mut unbound), Err(BackendError::Replay(_))));
        // SAFETY: refused before anything runs; the CPU backend would check the arguments anyway.
        let unchecked = unsafe { recorder.launch_unchecked(axpy, geometry, &mut []) };
        assert!(matches!(unchecked, Err(BackendError::Replay(_))));
        assert!(recorder.finish().is_empty());
        assert_eq!(gpu.download::<f32>(&y).unwrap(), [0.0, 0.0], "nothing refused ran");
        assert_eq!(gpu.download::<f32>(&unbound).unwrap(), [0.0, 0.0]);
    }
}
