//! The backend trait: what a model needs from a GPU (or the CPU standing in for one).

use std::time::{Duration, Instant};

use crate::borrowed::Borrowed;
use crate::signature::ScalarKind;
use crate::{
    BackendError, ConstBuffer, DType, DeviceBuffer, DeviceGraph, Element, KernelEntry, KernelHandle,
    LookupError, View, ViewMut,
};
use crate::{Scalar, ScalarValue};

/// Grid and block dimensions of a launch, and its dynamic shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaunchGeometry {
    /// Blocks in x, y, z.
    pub grid: (u32, u32, u32),
    /// Threads per block in x, y, z.
    pub block: (u32, u32, u32),
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
}

impl LaunchGeometry {
    /// A one-dimensional launch covering `n` items with `block` threads per block.
    pub fn linear(n: u32, block: u32) -> Self {
        Self { grid: (n.div_ceil(block).max(1), 1, 1), block: (block, 1, 1), shared_mem_bytes: 0 }
    }
}

/// One argument of a kernel launch, in the kernel's parameter order.
///
/// Model code does not build these by hand: the launchers the derive generates take named,
/// typed arguments and turn them into this list. It is what backends receive.
#[derive(Debug)]
pub enum KernelArg<'a> {
    /// Elements of a buffer the kernel only reads (`const T*`).
    Read(View<'a>),
    /// Elements of a buffer the kernel writes (`T*`).
    Write(ViewMut<'a>),
    /// A value passed by copy, of any scalar kind.
    Scalar(Scalar),
    /// A null pointer, for a buffer parameter the manifest declares `nullable`: the kernel takes
    /// it as absent (no bias, "in place").
    Null,
    /// Memory borrowed from its owner, an engine's cudarc slice or a device address (through
    /// [`In`](crate::In) and [`Out`](crate::Out)): only the CUDA backend of its context launches on
    /// it.
    Borrowed(Borrowed<'a>),
}

impl KernelArg<'_> {
    /// The scalar kind this argument fills, if it is a scalar.
    pub fn scalar_kind(&self) -> Option<ScalarKind> {
        match self {
            KernelArg::Scalar(scalar) => Some(scalar.kind()),
            KernelArg::Read(_) | KernelArg::Write(_) | KernelArg::Null | KernelArg::Borrowed(_) => None,
        }
    }

    /// A buffer argument's element type, length and whether the kernel may write it.
    pub fn view(&self) -> Option<(DType, usize, bool)> {
        match self {
            KernelArg::Read(view) => Some((view.dtype(), view.len(), false)),
            KernelArg::Write(view) => Some((view.dtype(), view.len(), true)),
            KernelArg::Borrowed(borrowed) => Some((borrowed.dtype(), borrowed.len(), borrowed.is_writable())),
            _ => None,
        }
    }

    /// The argument as a parameter kind would spell it: `const bf16[12]`, `f32[4]`, `u32`.
    pub fn describe(&self) -> String {
        match (self, self.view()) {
            (KernelArg::Null, _) => "a null pointer".to_owned(),
            (KernelArg::Borrowed(borrowed), _) => borrowed.describe(),
            (_, Some((dtype, len, false))) => format!("a read-only view `const {dtype}[{len}]`"),
            (_, Some((dtype, len, true))) => format!("a mutable view `{dtype}[{len}]`"),
            (_, None) => format!("a `{}` scalar", self.scalar_kind().map_or("?", ScalarKind::name)),
        }
    }

    /// A scalar's value, for messages.
    pub(crate) fn describe_value(&self) -> String {
        match self {
            KernelArg::Scalar(scalar) => scalar.to_string(),
            KernelArg::Read(_) | KernelArg::Write(_) | KernelArg::Null | KernelArg::Borrowed(_) => {
                self.describe()
            }
        }
    }
}

impl<'a> From<View<'a>> for KernelArg<'a> {
    fn from(view: View<'a>) -> Self {
        KernelArg::Read(view)
    }
}

impl<'a> From<ViewMut<'a>> for KernelArg<'a> {
    fn from(view: ViewMut<'a>) -> Self {
        KernelArg::Write(view)
    }
}

impl<'a> From<Option<View<'a>>> for KernelArg<'a> {
    /// A view, or a null pointer for a `nullable` parameter.
    fn from(view: Option<View<'a>>) -> Self {
        view.map_or(KernelArg::Null, KernelArg::Read)
    }
}

impl<'a> From<Option<ViewMut<'a>>> for KernelArg<'a> {
    /// A view, or a null pointer for a `nullable` parameter.
    fn from(view: Option<ViewMut<'a>>) -> Self {
        view.map_or(KernelArg::Null, KernelArg::Write)
    }
}

impl<'a> From<&'a DeviceBuffer> for KernelArg<'a> {
    fn from(buffer: &'a DeviceBuffer) -> Self {
        KernelArg::Read(buffer.view())
    }
}

impl<'a> From<&'a mut DeviceBuffer> for KernelArg<'a> {
    fn from(buffer: &'a mut DeviceBuffer) -> Self {
        KernelArg::Write(buffer.view_mut())
    }
}

impl<T: ScalarValue> From<T> for KernelArg<'_> {
    fn from(value: T) -> Self {
        KernelArg::Scalar(Scalar::new(value))
    }
}

impl From<Scalar> for KernelArg<'_> {
    fn from(scalar: Scalar) -> Self {
        KernelArg::Scalar(scalar)
    }
}

/// A device that carries kernel modules and runs them: CUDA, the CPU reference, the emulator, or the recording dry run.
///
/// Object safe, so model code takes `&dyn GpuBackend` and runs unchanged on every backend.
/// Handles and buffers are valid only on the backend that issued them, and on its
/// [streams](GpuBackend::new_stream).
pub trait GpuBackend: Send + Sync {
    /// What this backend is, for reports and error messages ("CUDA device 0 (NVIDIA H200, sm_90)").
    fn describe(&self) -> String;

    /// Whether this target carries a module named `module` at all (built for it, registered on
    /// it), in any namespace.
    fn has_module(&self, module: &str) -> bool;

    /// Looks `entry` up, by its namespace, module and entry point. "Not found" (module not
    /// carried, entry not in it) is told apart from a failure (a module that fails to load or has
    /// no code for this device, a driver error, a kernel whose parameters disagree with the
    /// entry's signature): see [`LookupError`]. The handle remembers the entry, so its
    /// launches are checked against the entry's signature.
    fn lookup(&self, entry: &KernelEntry) -> Result<KernelHandle, LookupError>;

    /// Whether `kernel` is the handle [`lookup`](Self::lookup) gives for `entry`: what
    /// [`launch_trusting`](crate::launch_trusting) proves before it checks a launch against
    /// `entry`'s signature, on every launch. It answers as a lookup would, so it is as trusted as
    /// `lookup` is. The default looks `entry` up again; a backend that keeps the entry each handle
    /// was issued for compares with that instead, which costs a fraction of a lookup.
    fn is_handle_of(&self, kernel: KernelHandle, entry: &KernelEntry) -> bool {
        self.lookup(entry).ok() == Some(kernel)
    }

    /// Allocates `len` zeroed elements of `dtype`; dropping the buffer frees them. A size whose
    /// bytes overflow, or that the device cannot hold, is an `Err`.
    fn alloc(&self, dtype: DType, len: usize) -> Result<DeviceBuffer, BackendError>;

    /// Allocates `len` elements of `dtype` whose contents are unspecified, for a buffer a kernel
    /// writes whole before anything reads it: it spares [`Self::alloc`]'s zero-fill (on a device,
    /// a pass over the memory). A backend may leave the memory as it was or fill it with a poison
    /// (the emulator fills it with NaN, so that a read before the write shows). Reading it first
    /// reads arbitrary values, never undefined behaviour: every bit pattern is a valid element of
    /// every [`DType`] but `bool`, whose elements a backend leaves 0 or 1 (the emulator's poison
    /// is `true`). By default, [`Self::alloc`].
    fn alloc_for_write(&self, dtype: DType, len: usize) -> Result<DeviceBuffer, BackendError> {
        self.alloc(dtype, len)
    }

    /// Copies `src` (exactly `dst.byte_len()` bytes) into `dst`. Bytes that are no element of
    /// `dst`'s type (a `bool` other than 0 or 1) are refused ([`BackendError::InvalidElement`]).
    fn copy_to_device(&self, src: &[u8], dst: &mut DeviceBuffer) -> Result<(), BackendError>;

    /// A new buffer of `dtype` holding `contents` (whole elements), which nothing writes
    /// afterwards: the memory behind a [`ConstBuffer`], whose contents a launch check reads on the
    /// host (a layout of dims and strides that an extent's `strided` reads). Typed:
    /// [`GpuBackendExt::upload_const`].
    ///
    /// Only this crate's backends make one, with their own allocation and copy, so that the bytes
    /// a check reads are the bytes the kernel will: a backend of the caller's making could copy
    /// other bytes than it is given. Such a backend forwards this call to the backend whose memory
    /// it uses; by default it makes none ([`BackendError::Unavailable`]).
    fn upload_const_bytes(&self, dtype: DType, contents: &[u8]) -> Result<ConstBuffer, BackendError> {
        let _ = (dtype, contents);
        Err(BackendError::Unavailable {
            backend: self.describe(),
            reason: "only kda's own backends make a ConstBuffer (a launch check trusts its device bytes \
                     to be its host copy): forward `upload_const_bytes` to the backend whose memory \
                     this one uses"
                .to_owned(),
        })
    }

    /// Copies `src` into `dst` (exactly `src.byte_len()` bytes).
    fn copy_to_host(&self, src: &DeviceBuffer, dst: &mut [u8]) -> Result<(), BackendError>;

    /// Copies the elements `src` views into the elements `dst` views, on the device: both views of
    /// one element type and length, inside their buffers (a whole buffer is `buffer.view()`).
    fn copy_on_device(&self, src: View<'_>, dst: ViewMut<'_>) -> Result<(), BackendError>;

    /// Launches `kernel` with `geometry` and `args`, in the kernel's parameter order, after
    /// checking them against the signature of the entry the handle was looked up for
    /// ([`signature::check`](crate::signature::check)): a wrong count, kind, element type or
    /// access, a view shorter than its extent or a failed requirement is an `Err` and nothing
    /// reaches the device. An entry without a signature is refused: see
    /// [`GpuBackend::launch_unchecked`].
    fn launch(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError>;

    /// Launches `kernel` without checking `args` against any signature, for entries the manifest
    /// gives no `params`. The handle and the buffers must still be this backend's, and views must
    /// lie inside their buffers (those are checked).
    ///
    /// # Safety
    ///
    /// On a device that runs the kernel natively, the caller guarantees what the signature check
    /// would otherwise prove, because a kernel trusts its arguments:
    /// - `args` has exactly the kernel's parameters, in order, each of the C type the kernel's
    ///   code declares (a device pointer for a view, the scalar's exact width and type), whatever
    ///   the entry the handle was looked up for says: no backend can see a parameter's C type
    ///   at launch;
    /// - every view holds at least the elements the kernel reads or writes through it at these
    ///   scalar values and this geometry, of the element type the kernel declares;
    /// - every view is aligned as the kernel's code reads it: a kernel that loads 16 bytes at a
    ///   time (vector loads, `cp.async`) needs its views to start at offsets that keep those
    ///   loads aligned (a buffer's own start is 256-byte aligned on CUDA; a slice starts where
    ///   its first element is). The checked [`launch`](Self::launch) proves only the alignment
    ///   of the parameter's type (its element's size, 16 bytes for `void`); a wider read of a
    ///   typed parameter is the kernel's contract in either case;
    /// - `geometry.shared_mem_bytes` is at least the dynamic shared memory the kernel uses at
    ///   this geometry and these scalars;
    /// - every buffer the kernel writes is passed as [`KernelArg::Write`];
    /// - `geometry` is one the kernel supports (a block shape it checks and silently refuses
    ///   writes nothing, which is a bug but not undefined behaviour).
    unsafe fn launch_unchecked(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError>;

    /// Waits until every launch and copy issued so far has finished.
    fn synchronize(&self) -> Result<(), BackendError>;

    /// How long the device spends on what `work` issues. The default times it on the host
    /// between two synchronizations; a GPU backend measures on the device (CUDA events).
    fn time(&self, work: &mut dyn FnMut() -> Result<(), BackendError>) -> Result<Duration, BackendError> {
        self.synchronize()?;
        let start = Instant::now();
        work()?;
        self.synchronize()?;
        Ok(start.elapsed())
    }

    /// Another stream of this device: a backend that issues its work in a queue of its own, so
    /// that it proceeds while this backend's work does (two batches, or a prefill and a decode
    /// step, at once). Open one per concurrent piece of work, and drive each from its own thread
    /// if the host side should overlap too.
    ///
    /// The stream is the same device: it has this backend's [`BackendId`](crate::BackendId), so
    /// it takes the handles this backend looked up and the buffers it allocated (and this backend
    /// takes the stream's), and it shares the loaded modules. Work on different streams is
    /// ordered only where it uses a common buffer, so that every stream sees what issue order
    /// promises:
    /// - a launch or copy that reads or writes a buffer runs after every write to it issued
    ///   earlier on any stream of the device (a buffer's zero-fill is a write on the stream that
    ///   allocated it);
    /// - one that writes a buffer also runs after every read of it issued earlier on another
    ///   stream;
    /// - a buffer is freed, when dropped, after every use of it on any stream.
    ///
    /// "Earlier" is host order: the call that issued one returned before the other was made.
    /// [`synchronize`](Self::synchronize) and [`time`](Self::time) cover the work of the backend
    /// they are called on, that stream's alone. Dropping a stream does not wait for its work,
    /// which stays ordered before whatever uses its buffers later.
    ///
    /// The default opens no queue: the stream issues into this backend's own, in the order of
    /// the calls, which is the order the rule asks for. That is right, and costs nothing, for
    /// backends that run every launch and copy to completion before returning (the CPU reference,
    /// the emulators): there is nothing to overlap. A backend whose work runs asynchronously
    /// (CUDA) opens a queue of its own and orders buffers between queues itself.
    fn new_stream(&self) -> Result<Box<dyn GpuBackend + '_>, BackendError> {
        Ok(Box::new(crate::stream::InOrder(self)))
    }

    /// Captures the launches `work` issues, on the backend it is handed, into a [`DeviceGraph`]
    /// that runs them again as one unit, where this backend has graphs; `Ok(None)` without running
    /// `work` where it has none, which is the default. The launches are checked as always, and a
    /// capture does not run them: launching the graph does. `work` issues launches only: the
    /// backend it is handed refuses allocations, copies, synchronization and unchecked launches
    /// ([`Capture`](crate::graph::Capture) records what each launch binds for the graph's
    /// [`bindings`](DeviceGraph::bindings)).
    ///
    /// Safe code launches a graph through [`LaunchList::capture`](crate::replay::LaunchList::capture),
    /// which binds it to the buffers it was captured on.
    fn capture(
        &self,
        work: &mut dyn FnMut(&dyn GpuBackend) -> Result<(), BackendError>,
    ) -> Result<Option<Box<dyn DeviceGraph>>, BackendError> {
        let _ = work;
        Ok(None)
    }
}

/// Typed transfers on any backend, built on the byte-level methods of [`GpuBackend`].
pub trait GpuBackendExt: GpuBackend {
    /// A new buffer holding a copy of `data`.
    fn upload<T: Element>(&self, data: &[T]) -> Result<DeviceBuffer, BackendError> {
        let mut buffer = self.alloc(T::DTYPE, data.len())?;
        self.copy_to_device(bytemuck::cast_slice(data), &mut buffer)?;
        Ok(buffer)
    }

    /// A new buffer holding a copy of `data` that nothing writes afterwards, whose contents the
    /// launch check can read: a layout of dims and strides that an extent's `strided` reads
    /// ([`GpuBackend::upload_const_bytes`], which only this crate's backends answer).
    fn upload_const<T: Element>(&self, data: &[T]) -> Result<ConstBuffer, BackendError> {
        self.upload_const_bytes(T::DTYPE, bytemuck::cast_slice(data))
    }

    /// A new zeroed buffer of `len` elements of `T`.
    fn zeros<T: Element>(&self, len: usize) -> Result<DeviceBuffer, BackendError> {
        self.alloc(T::DTYPE, len)
    }

    /// Copies `data` into the existing buffer `dst`, which must hold `data.len()` elements of `T`.
    fn write<T: Element>(&self, data: &[T], dst: &mut DeviceBuffer) -> Result<(), BackendError> {
        check_dtype(T::DTYPE, dst.dtype())?;
        self.copy_to_device(bytemuck::cast_slice(data), dst)
    }

    /// The contents of `src`, which must hold elements of `T`.
    fn download<T: Element>(&self, src: &DeviceBuffer) -> Result<Vec<T>, BackendError> {
        check_dtype(T::DTYPE, src.dtype())?;
        let mut host = vec![T::zeroed(); src.len()];
        self.copy_to_host(src, bytemuck::cast_slice_mut(&mut host))?;
        Ok(host)
    }
}

impl<B: GpuBackend + ?Sized> GpuBackendExt for B {}

fn check_dtype(expected: DType, found: DType) -> Result<(), BackendError> {
    if expected == found { Ok(()) } else { Err(BackendError::DTypeMismatch { expected, found }) }
}
