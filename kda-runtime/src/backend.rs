//! The backend trait: what a model needs from a GPU (or the CPU standing in for one).

use std::ops::Range;
use std::time::{Duration, Instant};

use crate::{BackendError, DType, DeviceBuffer, Element, KernelHandle, LookupError};

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
#[derive(Debug)]
pub enum KernelArg<'a> {
    /// A buffer the kernel only reads (`const T*`).
    Buffer(&'a DeviceBuffer),
    /// A buffer the kernel writes (`T*`).
    BufferMut(&'a mut DeviceBuffer),
    /// Elements `range` of a buffer the kernel only reads: the `pointer + offset` a GPU kernel
    /// gets for part of a buffer. Made by [`DeviceBuffer::slice`].
    Slice(&'a DeviceBuffer, Range<usize>),
    /// A `u32` scalar.
    U32(u32),
    /// An `i32` scalar.
    I32(i32),
    /// An `f32` scalar.
    F32(f32),
}

impl<'a> From<&'a DeviceBuffer> for KernelArg<'a> {
    fn from(buffer: &'a DeviceBuffer) -> Self {
        KernelArg::Buffer(buffer)
    }
}

impl<'a> From<&'a mut DeviceBuffer> for KernelArg<'a> {
    fn from(buffer: &'a mut DeviceBuffer) -> Self {
        KernelArg::BufferMut(buffer)
    }
}

impl From<u32> for KernelArg<'_> {
    fn from(value: u32) -> Self {
        KernelArg::U32(value)
    }
}

impl From<i32> for KernelArg<'_> {
    fn from(value: i32) -> Self {
        KernelArg::I32(value)
    }
}

impl From<f32> for KernelArg<'_> {
    fn from(value: f32) -> Self {
        KernelArg::F32(value)
    }
}

/// A device that carries kernel modules and runs them: CUDA, the CPU reference, or a test fake.
///
/// Object safe, so model code takes `&dyn GpuBackend` and runs unchanged on every backend.
/// Handles and buffers are valid only on the backend that issued them.
pub trait GpuBackend: Send + Sync {
    /// What this backend is, for reports and error messages ("CUDA device 0 (NVIDIA H200, sm_90)").
    fn describe(&self) -> String;

    /// Whether this target carries `module` at all (built for it, registered on it).
    fn has_module(&self, module: &str) -> bool;

    /// Looks `module::entry` up. "Not found" (module not carried, entry not in it) is told apart
    /// from a failure (a module that fails to load, a driver error): see [`LookupError`].
    fn lookup(&self, module: &str, entry: &str) -> Result<KernelHandle, LookupError>;

    /// Allocates `len` zeroed elements of `dtype`; dropping the buffer frees them.
    fn alloc(&self, dtype: DType, len: usize) -> Result<DeviceBuffer, BackendError>;

    /// Copies `src` (exactly `dst.byte_len()` bytes) into `dst`.
    fn copy_to_device(&self, src: &[u8], dst: &mut DeviceBuffer) -> Result<(), BackendError>;

    /// Copies `src` into `dst` (exactly `src.byte_len()` bytes).
    fn copy_to_host(&self, src: &DeviceBuffer, dst: &mut [u8]) -> Result<(), BackendError>;

    /// Copies buffer `src` into buffer `dst` on the device; both must have the same byte size.
    fn copy_on_device(&self, src: &DeviceBuffer, dst: &mut DeviceBuffer) -> Result<(), BackendError>;

    /// Launches `kernel` with `geometry` and `args`, in the kernel's parameter order.
    fn launch(
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
}

/// Typed transfers on any backend, built on the byte-level methods of [`GpuBackend`].
pub trait GpuBackendExt: GpuBackend {
    /// A new buffer holding a copy of `data`.
    fn upload<T: Element>(&self, data: &[T]) -> Result<DeviceBuffer, BackendError> {
        let mut buffer = self.alloc(T::DTYPE, data.len())?;
        self.copy_to_device(bytemuck::cast_slice(data), &mut buffer)?;
        Ok(buffer)
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
