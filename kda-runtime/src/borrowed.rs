//! Memory a launch borrows from its owner instead of a kda buffer: [`Borrowed`], and the aliasing
//! check of a launch's device addresses.

use std::fmt;
use std::marker::PhantomData;

use crate::{BackendError, DType, KernelArg};

/// Device memory borrowed for one launch instead of a kda buffer: an engine's cudarc slice or view
/// (feature `cuda`), or a device address of the caller's own allocator, with its element type,
/// length and whether the kernel may write it. Every backend checks a launch of it as of a view
/// ([`signature::check`](crate::signature::check)); only the CUDA backend of the memory's context
/// then launches on it, the CPU and emulation backends refuse it, and the recording backend
/// records it. Made through [`In`](crate::In) and [`Out`](crate::Out) only.
///
/// # Ordering and aliasing
///
/// A cudarc slice's launch is ordered as cudarc orders a launch of its own on that slice, by the
/// slice's read and write events, where its context tracks them (`DevicePtr::device_ptr` before the
/// launch, the returned guard dropped after it): the engine's rules for its memory stay its rules.
/// A device address is ordered by nothing but the stream: its `unsafe` constructor's caller vouches
/// for the rest. Borrowed cudarc memory cannot alias a written argument: a written slice or view
/// is borrowed exclusively (`&mut`), and two slices are two allocations. Device addresses can, so a
/// launch refuses a written one that overlaps another argument's address range.
pub struct Borrowed<'a> {
    dtype: DType,
    len: usize,
    pub(crate) memory: Memory<'a>,
}

/// Where borrowed memory is.
pub(crate) enum Memory<'a> {
    /// A device address of the caller's allocator, which it vouched for.
    Address { address: u64, writable: bool, lifetime: PhantomData<&'a mut ()> },
    /// An engine's cudarc slice or view, read.
    #[cfg(feature = "cuda")]
    Read(&'a dyn crate::cuda::ReadableMemory),
    /// An engine's cudarc slice or view, written.
    #[cfg(feature = "cuda")]
    Write(crate::cuda::Exclusive<'a>),
}

impl<'a> Borrowed<'a> {
    /// Memory at a device address, which the caller vouched for.
    pub(crate) fn raw(dtype: DType, address: u64, len: usize, writable: bool) -> Self {
        Self { dtype, len, memory: Memory::Address { address, writable, lifetime: PhantomData } }
    }

    /// Memory of `dtype` and `len` elements.
    #[cfg(feature = "cuda")]
    pub(crate) fn new(dtype: DType, len: usize, memory: Memory<'a>) -> Self {
        Self { dtype, len, memory }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the kernel may write it: borrowed exclusively.
    pub fn is_writable(&self) -> bool {
        match &self.memory {
            Memory::Address { writable, .. } => *writable,
            #[cfg(feature = "cuda")]
            Memory::Read(_) => false,
            #[cfg(feature = "cuda")]
            Memory::Write(_) => true,
        }
    }

    /// Its device address, where it is known without asking the driver (memory at a device
    /// address), for the aliasing and alignment checks.
    pub(crate) fn address(&self) -> Option<u64> {
        #[cfg_attr(not(feature = "cuda"), allow(irrefutable_let_patterns))]
        let Memory::Address { address, .. } = self.memory else { return None };
        Some(address)
    }

    /// The device addresses it spans, where they are known without asking the driver (memory at
    /// a device address), for the aliasing check.
    fn address_range(&self) -> Option<(u64, u64)> {
        let address = self.address()?;
        let bytes = self.dtype.bytes(self.len).and_then(|bytes| u64::try_from(bytes).ok())?;
        Some((address, address.saturating_add(bytes)))
    }

    /// What it is, for messages: "memory at device address 0x7f00 (4 f32 elements)".
    pub fn describe(&self) -> String {
        let what = match &self.memory {
            Memory::Address { address, .. } => format!("memory at device address {address:#x}"),
            #[cfg(feature = "cuda")]
            Memory::Read(_) | Memory::Write(_) => "a cudarc slice".to_owned(),
        };
        format!("{what} ({} {} elements)", self.len, self.dtype)
    }
}

impl fmt::Debug for Borrowed<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

/// The error of a backend that launches on no borrowed memory: only the CUDA backend of the
/// memory's context does.
pub(crate) fn refused(borrowed: &Borrowed<'_>, backend: String) -> BackendError {
    BackendError::ForeignResource { what: borrowed.describe(), backend }
}

/// The first pair of arguments, by position, of which one is written and both lie at device
/// addresses that overlap: what a launch refuses.
pub(crate) fn overlapping(args: &[KernelArg<'_>]) -> Option<(usize, usize)> {
    let spans: Vec<(usize, (u64, u64), bool)> = args
        .iter()
        .enumerate()
        .filter_map(|(index, arg)| match arg {
            KernelArg::Borrowed(borrowed) => Some((index, borrowed.address_range()?, borrowed.is_writable())),
            _ => None,
        })
        .collect();
    spans.iter().enumerate().find_map(|(position, &(first, (start, end), writable))| {
        spans[position + 1..].iter().find_map(|&(second, (other_start, other_end), other_writable)| {
            let overlap = start < other_end && other_start < end;
            (overlap && (writable || other_writable)).then_some((first, second))
        })
    })
}

#[cfg(test)]
mod tests {
    use crate::cpu::CpuBackend;
    use crate::fixtures::AXPY;
    use crate::graph::Capture;
    use crate::record::{RecordedArg, RecordingBackend};
    use crate::{BackendError, DType, GpuBackend, GpuBackendExt, In, KernelArg, LaunchGeometry, Out};

    /// `n` f32 elements at `address`, read and written.
    fn at(address: u64, n: usize) -> (KernelArg<'static>, KernelArg<'static>) {
        // SAFETY: no backend of these tests dereferences a device address: the fake records it,
        // the others refuse it.
        unsafe {
            (In::<f32>::from_device_ptr(address, n).into(), Out::<f32>::from_device_ptr(address, n).into())
        }
    }

    fn axpy_args(x: KernelArg<'static>, y: KernelArg<'static>, n: u32) -> [KernelArg<'static>; 4] {
        [x, y, n.into(), 1.0f32.into()]
    }

    const GEOMETRY: LaunchGeometry =
        LaunchGeometry { grid: (1, 1, 1), block: (32, 1, 1), shared_mem_bytes: 0 };

    #[test]
    fn borrowed_memory_is_checked_like_a_view_on_the_fake_and_recorded_as_a_buffer() {
        let gpu = RecordingBackend::new().with_entry(&AXPY);
        let axpy = gpu.lookup(&AXPY).unwrap();
        let (x, _) = at(0x1000, 4);
        let (_, short) = at(0x2000, 3);
        let refused = gpu.launch(axpy, GEOMETRY, &mut axpy_args(x, short, 4));
        assert!(matches!(refused, Err(BackendError::Argument { param: "y", .. })), "{refused:?}");
        // SAFETY: as in `at`.
        let halves = unsafe { In::<crate::bf16>::from_device_ptr(0x1000, 4) };
        let (_, y) = at(0x2000, 4);
        let refused = gpu.launch(axpy, GEOMETRY, &mut axpy_args(halves.into(), y, 4));
        assert!(
            refused.as_ref().is_err_and(|error| error.to_string().contains("f32 elements")),
            "{refused:?}"
        );
        assert!(gpu.launches().is_empty());

        let ((x, _), (_, y)) = (at(0x1000, 4), at(0x2000, 4));
        gpu.launch(axpy, GEOMETRY, &mut axpy_args(x, y, 4)).unwrap();
        let buffer = |writable| RecordedArg::Buffer { dtype: DType::F32, len: 4, writable };
        assert_eq!(gpu.launches()[0].args[..2], [buffer(false), buffer(true)]);
    }

    #[test]
    fn a_written_address_overlapping_another_argument_is_refused() {
        let gpu = RecordingBackend::new().with_entry(&AXPY);
        let axpy = gpu.lookup(&AXPY).unwrap();
        // `y` starts at `x`'s last element: 4 bytes in common.
        let ((x, _), (_, y)) = (at(0x1000, 4), at(0x100c, 4));
        let refused = gpu.launch(axpy, GEOMETRY, &mut axpy_args(x, y, 4));
        assert!(
            matches!(refused, Err(BackendError::Aliased { written: "y", other: "x", .. })),
            "{refused:?}"
        );
        assert!(gpu.launches().is_empty());
        // Adjacent, not overlapping: launched.
        let ((x, _), (_, y)) = (at(0x1000, 4), at(0x1010, 4));
        gpu.launch(axpy, GEOMETRY, &mut axpy_args(x, y, 4)).unwrap();
        assert_eq!(gpu.launches().len(), 1);
    }

    #[test]
    fn backends_that_are_not_cuda_refuse_borrowed_memory_after_the_checks() {
        let gpu = CpuBackend::new().with_kernel(&AXPY, |_| panic!("the kernel ran on borrowed memory"));
        let axpy = gpu.lookup(&AXPY).unwrap();
        let x = gpu.zeros::<f32>(4).unwrap();
        let (_, y) = at(0x2000, 4);
        let refused = gpu.launch(axpy, GEOMETRY, &mut [x.view().into(), y, 4u32.into(), 1.0f32.into()]);
        let Err(BackendError::ForeignResource { what, .. }) = refused else { panic!("{refused:?}") };
        assert_eq!(what, "memory at device address 0x2000 (4 f32 elements)");
    }

    #[test]
    fn a_capture_refuses_borrowed_memory() {
        let gpu = RecordingBackend::new().with_entry(&AXPY);
        let axpy = gpu.lookup(&AXPY).unwrap();
        let capture = Capture::new(&gpu);
        let ((x, _), (_, y)) = (at(0x1000, 4), at(0x2000, 4));
        let refused = capture.launch(axpy, GEOMETRY, &mut axpy_args(x, y, 4));
        assert!(
            matches!(refused, Err(BackendError::Replay(ref reason)) if reason.contains("0x1000")),
            "{refused:?}"
        );
        assert!(gpu.launches().is_empty());
    }

    /// A typed argument of a longer borrow is one of a shorter borrow (covariance), as a view is:
    /// a test that fails by not compiling.
    #[test]
    fn typed_arguments_are_covariant_in_their_borrow() {
        fn shorten<'short, 'long: 'short>(
            input: In<'long, f32>,
            output: Out<'long, f32>,
        ) -> [KernelArg<'short>; 2] {
            let (input, output): (In<'short, f32>, Out<'short, f32>) = (input, output);
            [input.into(), output.into()]
        }
        // SAFETY: as in `at`.
        let typed =
            unsafe { (In::<f32>::from_device_ptr(0x1000, 1), Out::<f32>::from_device_ptr(0x2000, 1)) };
        assert_eq!(shorten(typed.0, typed.1).len(), 2);
    }
}
