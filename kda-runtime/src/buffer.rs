//! Device buffers: typed, sized, owned by one backend, freed on drop.

use std::any::Any;
use std::fmt;

use std::ops::Range;

use crate::{BackendId, KernelArg};

/// The element type of a device buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// `half::bf16`.
    Bf16,
    /// `f32`.
    F32,
}

impl DType {
    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::Bf16 => 2,
            DType::F32 => 4,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DType::Bf16 => "bf16",
            DType::F32 => "f32",
        })
    }
}

/// A host element type a device buffer can hold.
pub trait Element: bytemuck::Pod + Send + Sync {
    /// Its device element type.
    const DTYPE: DType;
}

impl Element for half::bf16 {
    const DTYPE: DType = DType::Bf16;
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
}

/// A backend's memory behind a [`DeviceBuffer`]; dropping it frees the memory.
///
/// Backends downcast it back to their own type (through `Any`) when the buffer comes back to them.
pub trait BufferStorage: Any + Send + Sync {}

/// Memory on a backend, `len` elements of `dtype`. Dropping it frees the memory.
pub struct DeviceBuffer {
    backend: BackendId,
    dtype: DType,
    len: usize,
    storage: Box<dyn BufferStorage>,
}

impl DeviceBuffer {
    /// Wraps `storage` that `backend` allocated for `len` elements of `dtype`.
    pub fn new(backend: BackendId, dtype: DType, len: usize, storage: Box<dyn BufferStorage>) -> Self {
        Self { backend, dtype, len, storage }
    }

    /// The backend that owns the memory.
    pub fn backend(&self) -> BackendId {
        self.backend
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The size in bytes.
    pub fn byte_len(&self) -> usize {
        self.len * self.dtype.size()
    }

    /// Elements `range` of this buffer as a read-only kernel argument. Backends refuse a range
    /// that does not lie inside the buffer.
    pub fn slice(&self, range: Range<usize>) -> KernelArg<'_> {
        KernelArg::Slice(self, range)
    }

    /// The backend's storage, if it is an `S`.
    pub fn storage<S: BufferStorage>(&self) -> Option<&S> {
        (&*self.storage as &dyn Any).downcast_ref()
    }

    /// The backend's storage, mutably, if it is an `S`.
    pub fn storage_mut<S: BufferStorage>(&mut self) -> Option<&mut S> {
        (&mut *self.storage as &mut dyn Any).downcast_mut()
    }
}

impl fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("backend", &self.backend)
            .field("dtype", &self.dtype)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}
