//! Device buffers: typed, sized, owned by one backend, freed on drop.

use std::any::Any;
use std::fmt;

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{BackendError, BackendId, GpuBackend};

pub use kda_types::DType;

/// A host element type a device buffer can hold.
pub trait Element: bytemuck::Pod + Send + Sync {
    /// Its device element type.
    const DTYPE: DType;
}

macro_rules! elements {
    ($($ty:ty => $dtype:ident),* $(,)?) => {$(
        impl Element for $ty {
            const DTYPE: DType = DType::$dtype;
        }
    )*};
}

// `bool` has no `Element`: a byte other than 0 or 1 is no `bool`, and a kernel may write one.
elements!(
    half::bf16 => Bf16, f32 => F32, u32 => U32, half::f16 => F16, f64 => F64, i8 => I8, u8 => U8,
    i16 => I16, u16 => U16, i32 => I32, i64 => I64, u64 => U64, Fp8E4M3 => Fp8E4M3, Fp8E5M2 => Fp8E5M2,
);

/// An fp8 value in the OCP E4M3 format (`__nv_fp8_e4m3`), as its bits: kda carries and copies
/// fp8 buffers; arithmetic on them is the kernels'.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(transparent)]
pub struct Fp8E4M3(pub u8);

/// An fp8 value in the OCP E5M2 format (`__nv_fp8_e5m2`), as its bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(transparent)]
pub struct Fp8E5M2(pub u8);

/// A backend's memory behind a [`DeviceBuffer`]; dropping it frees the memory.
///
/// The storage is the one owner of its element type and length: a buffer asks its storage each
/// time, so replacing the storage (through [`DeviceBuffer::storage_mut`]) can never leave the
/// buffer describing memory it no longer has. Backends downcast it back to their own type
/// (through `Any`) when the buffer comes back to them, and dereference only their own types, whose
/// `dtype` and `len` are the memory they hold.
pub trait BufferStorage: Any + Send + Sync {
    /// The element type of the memory.
    fn dtype(&self) -> DType;
    /// The number of elements the memory holds.
    fn len(&self) -> usize;

    /// Whether the memory holds no element.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Memory on a backend: elements of one [`DType`], as many as its storage holds. Dropping it frees
/// the memory.
pub struct DeviceBuffer {
    id: u64,
    backend: BackendId,
    storage: Box<dyn BufferStorage>,
    /// A copy of the contents, kept by a [`ConstBuffer`], which nothing writes after its upload.
    mirror: Option<Box<[u8]>>,
}

impl DeviceBuffer {
    /// Wraps `storage` that `backend` allocated; an error where its byte size overflows `usize`
    /// (no backend could have allocated it).
    pub fn new(backend: BackendId, storage: Box<dyn BufferStorage>) -> Result<Self, BackendError> {
        let (dtype, len) = (storage.dtype(), storage.len());
        dtype.bytes(len).ok_or(BackendError::TooLarge { dtype, len })?;
        // 2^64 buffers are out of reach, so ids do not repeat.
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        Ok(Self { id, backend, storage, mirror: None })
    }

    /// A number no other buffer of this process has: what a [recording](crate::replay) names a
    /// buffer by.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The backend that owns the memory.
    pub fn backend(&self) -> BackendId {
        self.backend
    }

    /// The element type, as the storage holds it.
    pub fn dtype(&self) -> DType {
        self.storage.dtype()
    }

    /// The number of elements, as the storage holds them.
    pub fn len(&self) -> usize {
        self.storage.len()
    }

    /// Whether the buffer holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The size in bytes (`usize::MAX` for a storage of another backend that reports more).
    pub fn byte_len(&self) -> usize {
        // A backend's own storage holds memory, whose size fits `usize`; only a foreign storage
        // could report more, and no backend dereferences a foreign storage.
        self.dtype().bytes(self.len()).unwrap_or(usize::MAX)
    }

    /// The whole buffer, read only.
    pub fn view(&self) -> View<'_> {
        View { buffer: self, range: 0..self.len() }
    }

    /// Elements `range` of the buffer, read only: the `pointer + offset` a kernel gets for part of
    /// a buffer. Launches refuse a range that does not lie inside the buffer.
    pub fn slice(&self, range: Range<usize>) -> View<'_> {
        View { buffer: self, range }
    }

    /// The whole buffer, for a kernel that writes it.
    pub fn view_mut(&mut self) -> ViewMut<'_> {
        let range = 0..self.len();
        ViewMut { buffer: self, range }
    }

    /// Elements `range` of the buffer, for a kernel that writes them. Launches refuse a range that
    /// does not lie inside the buffer.
    pub fn slice_mut(&mut self, range: Range<usize>) -> ViewMut<'_> {
        ViewMut { buffer: self, range }
    }

    /// The backend's storage, if it is an `S`.
    pub fn storage<S: BufferStorage>(&self) -> Option<&S> {
        (&*self.storage as &dyn Any).downcast_ref()
    }

    /// The backend's storage, mutably, if it is an `S`. Replacing it replaces what the buffer is:
    /// its element type and length are the new storage's.
    pub fn storage_mut<S: BufferStorage>(&mut self) -> Option<&mut S> {
        (&mut *self.storage as &mut dyn Any).downcast_mut()
    }
}

impl fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("backend", &self.backend)
            .field("dtype", &self.dtype())
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

/// A read-only view of elements of a device buffer: what a `const T*` parameter takes.
#[derive(Clone, Debug)]
pub struct View<'a> {
    buffer: &'a DeviceBuffer,
    range: Range<usize>,
}

/// A mutable view of elements of a device buffer: what a `T*` parameter takes. It borrows the
/// buffer exclusively, so no other view of it exists during the launch.
#[derive(Debug)]
pub struct ViewMut<'a> {
    buffer: &'a mut DeviceBuffer,
    range: Range<usize>,
}

/// The accessors both views have: a view is a buffer and an element range of it.
macro_rules! view_accessors {
    () => {
        /// The viewed elements.
        pub fn range(&self) -> Range<usize> {
            self.range.clone()
        }

        /// The number of viewed elements.
        pub fn len(&self) -> usize {
            self.range.len()
        }

        /// Whether the view holds no element.
        pub fn is_empty(&self) -> bool {
            self.range.is_empty()
        }

        /// The element type.
        pub fn dtype(&self) -> DType {
            self.buffer.dtype()
        }

        /// The range, if it lies inside the buffer.
        pub fn checked_range(&self) -> Result<Range<usize>, BackendError> {
            checked_range(self.buffer, &self.range)
        }

        /// The viewed bytes of the buffer, if the range lies inside it.
        pub fn checked_byte_range(&self) -> Result<Range<usize>, BackendError> {
            let size = self.buffer.dtype().size();
            let range = self.checked_range()?;
            // Inside a buffer whose storage holds it, so its byte size fits `usize`; checked all
            // the same, as a foreign storage may report any length.
            match (range.start.checked_mul(size), range.end.checked_mul(size)) {
                (Some(start), Some(end)) => Ok(start..end),
                _ => Err(BackendError::TooLarge { dtype: self.buffer.dtype(), len: range.end }),
            }
        }
    };
}

impl<'a> View<'a> {
    /// The viewed buffer.
    pub fn buffer(&self) -> &'a DeviceBuffer {
        self.buffer
    }

    /// The viewed bytes as the host knows them: for a view of a [`ConstBuffer`], whose contents
    /// are its upload's; `None` for any other buffer, or a range outside the buffer.
    pub fn host_known(&self) -> Option<&'a [u8]> {
        let mirror = self.buffer.mirror.as_deref()?;
        mirror.get(self.checked_byte_range().ok()?)
    }

    view_accessors!();
}

impl ViewMut<'_> {
    /// The viewed buffer.
    pub fn buffer(&self) -> &DeviceBuffer {
        self.buffer
    }

    /// The viewed buffer, mutably.
    pub fn buffer_mut(&mut self) -> &mut DeviceBuffer {
        self.buffer
    }

    view_accessors!();
}

impl<'a> From<&'a DeviceBuffer> for View<'a> {
    fn from(buffer: &'a DeviceBuffer) -> Self {
        buffer.view()
    }
}

impl<'a> From<&'a mut DeviceBuffer> for View<'a> {
    fn from(buffer: &'a mut DeviceBuffer) -> Self {
        buffer.view()
    }
}

impl<'a> From<ViewMut<'a>> for View<'a> {
    /// The same elements, read only (as C passes `T*` for `const T*`).
    fn from(view: ViewMut<'a>) -> Self {
        View { buffer: view.buffer, range: view.range }
    }
}

impl<'a> From<&'a mut DeviceBuffer> for ViewMut<'a> {
    fn from(buffer: &'a mut DeviceBuffer) -> Self {
        buffer.view_mut()
    }
}

/// A device buffer whose contents the host also knows, because nothing writes it after its upload
/// ([`GpuBackendExt::upload_const`](crate::GpuBackendExt::upload_const)): what a launch check
/// reads when a kernel's reach depends on a buffer's contents (a layout of dims and strides,
/// `strided(info, rank)` in an extent). It lends only read-only views, so no launch or copy of
/// safe code writes it, and the host's copy stays its contents.
#[derive(Debug)]
pub struct ConstBuffer {
    buffer: DeviceBuffer,
}

impl ConstBuffer {
    /// A new buffer of `dtype` on `gpu` holding `contents`, for the `upload_const_bytes` of this
    /// crate's backends alone: `gpu`'s `alloc` and `copy_to_device` must be this crate's own code
    /// (never forwarded to a backend of the caller's), so that the memory holds exactly the
    /// bytes kept as the host's copy, which launch checks read in its place.
    pub(crate) fn upload(
        gpu: &(impl GpuBackend + ?Sized),
        dtype: DType,
        contents: &[u8],
    ) -> Result<Self, BackendError> {
        let size = dtype.size();
        if !contents.len().is_multiple_of(size) {
            return Err(BackendError::SizeMismatch {
                expected: contents.len().next_multiple_of(size),
                found: contents.len(),
            });
        }
        let mut buffer = gpu.alloc(dtype, contents.len() / size)?;
        gpu.copy_to_device(contents, &mut buffer)?;
        buffer.mirror = Some(contents.into());
        Ok(Self { buffer })
    }

    /// The whole buffer, read only.
    pub fn view(&self) -> View<'_> {
        self.buffer.view()
    }

    /// Elements `range` of the buffer, read only.
    pub fn slice(&self, range: Range<usize>) -> View<'_> {
        self.buffer.slice(range)
    }

    /// The device buffer, read only.
    pub fn buffer(&self) -> &DeviceBuffer {
        &self.buffer
    }
}

impl<'a> From<&'a ConstBuffer> for View<'a> {
    fn from(buffer: &'a ConstBuffer) -> Self {
        buffer.view()
    }
}

/// Refuses host bytes, for elements of `dtype`, that hold a byte which is no element. Every bit
/// pattern is an element of every [`DType`] but `bool`, which is 0 or 1: a kernel that reads
/// another byte as a `bool` has undefined behaviour, and one that indexes with it reaches past
/// what its extent allows. Every backend of this crate checks what `copy_to_device` is given.
pub(crate) fn check_elements(dtype: DType, bytes: &[u8]) -> Result<(), BackendError> {
    if dtype != DType::Bool {
        return Ok(());
    }
    match bytes.iter().position(|&byte| byte > 1) {
        Some(index) => Err(BackendError::InvalidElement { dtype, index, byte: bytes[index] }),
        None => Ok(()),
    }
}

fn checked_range(buffer: &DeviceBuffer, range: &Range<usize>) -> Result<Range<usize>, BackendError> {
    let len = buffer.len();
    if range.start <= range.end && range.end <= len {
        Ok(range.clone())
    } else {
        Err(BackendError::SliceOutOfBounds { range: range.clone(), len })
    }
}
