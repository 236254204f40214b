//! Host memory behind [`DeviceBuffer`]s, for backends that compute on the CPU (the CPU reference
//! backend, the recording backend).

use std::fmt;
use std::ops::Range;

use crate::{BackendError, BackendId, BufferStorage, DType, DeviceBuffer, Element, View, ViewMut};

/// The elements of a host-memory buffer: `len` elements of `dtype` in 16-byte-aligned memory, so
/// that a kernel's vector path is taken as on a GPU and every element type can be read in place
/// as its Rust type ([`HostStorage::slice`]).
#[derive(Clone, PartialEq, Eq)]
pub struct HostStorage {
    dtype: DType,
    len: usize,
    /// The bytes, in 16-byte words (`u128`, 16-byte aligned on the 64-bit targets kda runs on);
    /// the last word may hold unused bytes, zero.
    words: Vec<u128>,
}

impl fmt::Debug for HostStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostStorage")
            .field("dtype", &self.dtype)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl BufferStorage for HostStorage {
    fn dtype(&self) -> DType {
        self.dtype
    }

    fn len(&self) -> usize {
        self.len
    }
}

impl HostStorage {
    /// `len` zeroed elements of `dtype`, or an error where the host cannot hold them (instead of
    /// the abort an infallible allocation would be).
    pub fn zeroed(dtype: DType, len: usize) -> Result<Self, BackendError> {
        Self::filled(dtype, len, 0)
    }

    /// `len` elements of `dtype` with every byte `byte` (0xFF: NaN for the float types,
    /// `u32::MAX`), or an error where the host cannot hold them. A `bool` is 0 or 1, so its
    /// elements are `true` for any `byte` but 0.
    pub fn filled(dtype: DType, len: usize, byte: u8) -> Result<Self, BackendError> {
        let byte = if dtype == DType::Bool { byte.min(1) } else { byte };
        let too_large = || BackendError::TooLarge { dtype, len };
        let bytes = dtype.bytes(len).filter(|bytes| isize::try_from(*bytes).is_ok()).ok_or_else(too_large)?;
        let mut words = Vec::new();
        words.try_reserve_exact(bytes.div_ceil(16)).map_err(|_| too_large())?;
        words.resize(bytes.div_ceil(16), u128::from_ne_bytes([byte; 16]));
        let mut storage = Self { dtype, len, words };
        // The bytes past the elements stay zero, whatever the fill.
        bytemuck::cast_slice_mut::<u128, u8>(&mut storage.words)[bytes..].fill(0);
        Ok(storage)
    }

    /// A copy of `data`.
    pub fn from_slice<T: Element>(data: &[T]) -> Result<Self, BackendError> {
        let mut storage = Self::zeroed(T::DTYPE, data.len())?;
        storage.bytes_mut().copy_from_slice(bytemuck::cast_slice(data));
        Ok(storage)
    }

    /// The elements as bytes.
    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice::<u128, u8>(&self.words)[..self.len * self.dtype.size()]
    }

    /// The elements as mutable bytes, for this crate's backends alone: a `bool` element must stay
    /// 0 or 1 whoever writes it ([`crate::buffer::check_elements`]), and [`Self::slice_mut`]
    /// lends only element types whose every bit pattern is an element.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        let bytes = self.len * self.dtype.size();
        &mut bytemuck::cast_slice_mut::<u128, u8>(&mut self.words)[..bytes]
    }

    /// The elements as `T`s, if they are `T`'s element type.
    pub fn slice<T: Element>(&self) -> Option<&[T]> {
        (self.dtype == T::DTYPE).then(|| bytemuck::cast_slice(self.bytes()))
    }

    /// The elements as mutable `T`s, if they are `T`'s element type.
    pub fn slice_mut<T: Element>(&mut self) -> Option<&mut [T]> {
        (self.dtype == T::DTYPE).then(|| bytemuck::cast_slice_mut(self.bytes_mut()))
    }
}

/// The copy methods of [`GpuBackend`](crate::GpuBackend) for a backend whose memory is the
/// [`HostMemory`] in its field `$memory`, and its constant buffers, uploaded by its own allocation
/// and copy.
macro_rules! host_copy_methods {
    ($memory:ident) => {
        fn upload_const_bytes(
            &self,
            dtype: $crate::DType,
            contents: &[u8],
        ) -> Result<$crate::ConstBuffer, $crate::BackendError> {
            $crate::ConstBuffer::upload(self, dtype, contents)
        }

        fn copy_to_device(
            &self,
            src: &[u8],
            dst: &mut $crate::DeviceBuffer,
        ) -> Result<(), $crate::BackendError> {
            self.$memory.copy_to_device(src, dst)
        }

        fn copy_to_host(
            &self,
            src: &$crate::DeviceBuffer,
            dst: &mut [u8],
        ) -> Result<(), $crate::BackendError> {
            self.$memory.copy_to_host(src, dst)
        }

        fn copy_on_device(
            &self,
            src: $crate::View<'_>,
            dst: $crate::ViewMut<'_>,
        ) -> Result<(), $crate::BackendError> {
            self.$memory.copy_on_device(src, dst)
        }
    };
}
pub(crate) use host_copy_methods;

/// The host-memory part of a backend: allocation and copies, with the ownership checks every
/// backend owes its callers.
#[derive(Clone, Copy, Debug)]
pub struct HostMemory {
    backend: BackendId,
}

impl HostMemory {
    /// Host memory owned by the backend `backend`.
    pub fn new(backend: BackendId) -> Self {
        Self { backend }
    }

    /// A zeroed buffer of `len` elements of `dtype`.
    pub fn alloc(&self, dtype: DType, len: usize) -> Result<DeviceBuffer, BackendError> {
        DeviceBuffer::new(self.backend, Box::new(HostStorage::zeroed(dtype, len)?))
    }

    /// A buffer of `len` elements of `dtype`, every byte `byte`.
    pub fn alloc_filled(&self, dtype: DType, len: usize, byte: u8) -> Result<DeviceBuffer, BackendError> {
        DeviceBuffer::new(self.backend, Box::new(HostStorage::filled(dtype, len, byte)?))
    }

    /// The storage of `buffer`, if this backend allocated it.
    pub fn storage<'b>(&self, buffer: &'b DeviceBuffer) -> Result<&'b HostStorage, BackendError> {
        self.check_owner(buffer)?;
        buffer.storage().ok_or_else(|| self.foreign_buffer(buffer))
    }

    /// The storage of `buffer`, mutably, if this backend allocated it.
    pub fn storage_mut<'b>(&self, buffer: &'b mut DeviceBuffer) -> Result<&'b mut HostStorage, BackendError> {
        self.check_owner(buffer)?;
        let foreign = self.foreign_buffer(buffer);
        buffer.storage_mut().ok_or(foreign)
    }

    /// Copies `src` into `dst`, which must have exactly its size.
    pub fn copy_to_device(&self, src: &[u8], dst: &mut DeviceBuffer) -> Result<(), BackendError> {
        crate::buffer::check_elements(dst.dtype(), src)?;
        let dst = self.storage_mut(dst)?.bytes_mut();
        check_size(dst.len(), src.len())?;
        dst.copy_from_slice(src);
        Ok(())
    }

    /// Copies `src` into `dst`, which must have exactly its size.
    pub fn copy_to_host(&self, src: &DeviceBuffer, dst: &mut [u8]) -> Result<(), BackendError> {
        let src = self.storage(src)?.bytes();
        check_size(src.len(), dst.len())?;
        dst.copy_from_slice(src);
        Ok(())
    }

    /// Copies view `src` into view `dst`, both of this backend's buffers, of one element type
    /// and length.
    pub fn copy_on_device(&self, src: View<'_>, mut dst: ViewMut<'_>) -> Result<(), BackendError> {
        let (from, to) = check_copy(&src, &dst)?;
        let src = &self.storage(src.buffer())?.bytes()[from];
        self.storage_mut(dst.buffer_mut())?.bytes_mut()[to].copy_from_slice(src);
        Ok(())
    }

    fn check_owner(&self, buffer: &DeviceBuffer) -> Result<(), BackendError> {
        if buffer.backend() == self.backend { Ok(()) } else { Err(self.foreign_buffer(buffer)) }
    }

    /// `buffer` refused: named by its id and the backend that allocated it.
    fn foreign_buffer(&self, buffer: &DeviceBuffer) -> BackendError {
        BackendError::ForeignResource {
            what: format!("device buffer {} (allocated by {})", buffer.id(), buffer.backend()),
            backend: self.backend.to_string(),
        }
    }
}

/// The byte ranges of a copy from `src` into `dst`: views inside their buffers, of one element
/// type and length. Every backend's `copy_on_device` checks these.
pub fn check_copy(src: &View<'_>, dst: &ViewMut<'_>) -> Result<(Range<usize>, Range<usize>), BackendError> {
    if src.dtype() != dst.dtype() {
        return Err(BackendError::DTypeMismatch { expected: dst.dtype(), found: src.dtype() });
    }
    let (from, to) = (src.checked_byte_range()?, dst.checked_byte_range()?);
    check_size(to.len(), from.len())?;
    Ok((from, to))
}

fn check_size(expected: usize, found: usize) -> Result<(), BackendError> {
    if expected == found { Ok(()) } else { Err(BackendError::SizeMismatch { expected, found }) }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::cpu::CpuBackend;
    use crate::record::RecordingBackend;
    use crate::{GpuBackend, GpuBackendExt};

    const DTYPES: [DType; 16] = DType::ALL;

    /// The host-memory backends, each as model code sees it.
    fn backends() -> [Box<dyn GpuBackend>; 2] {
        [Box::new(CpuBackend::new()), Box::new(RecordingBackend::new())]
    }

    #[track_caller]
    fn assert_too_large<T: std::fmt::Debug>(result: Result<T, BackendError>, dtype: DType, len: usize) {
        match result {
            Err(BackendError::TooLarge { dtype: refused, len: asked }) => {
                assert_eq!((refused, asked), (dtype, len))
            }
            other => panic!("expected {len} elements of {dtype} to be too large, got {other:?}"),
        }
    }

    #[test]
    fn an_allocation_the_host_cannot_hold_is_an_err_not_an_abort() {
        for dtype in DTYPES {
            // The bytes overflow usize; then they fit usize but not a Rust allocation (isize).
            let past_isize = isize::MAX as usize / dtype.size() + 1;
            for len in [usize::MAX, past_isize] {
                assert_too_large(HostStorage::zeroed(dtype, len), dtype, len);
                for gpu in backends() {
                    assert_too_large(gpu.alloc(dtype, len), dtype, len);
                }
            }
            assert_eq!(HostStorage::zeroed(dtype, 3).unwrap().bytes().len(), 3 * dtype.size());
        }
    }

    /// Another backend's storage, which claims `0` f32 elements without holding them.
    struct Claims(usize);

    impl BufferStorage for Claims {
        fn dtype(&self) -> DType {
            DType::F32
        }

        fn len(&self) -> usize {
            self.0
        }
    }

    #[test]
    fn a_device_buffer_whose_bytes_overflow_usize_cannot_be_made() {
        let id = BackendId::fresh();
        let largest = usize::MAX / 4;
        assert_too_large(DeviceBuffer::new(id, Box::new(Claims(largest + 1))), DType::F32, largest + 1);
        // The largest length whose bytes fit is a buffer (this one claims memory it does not have,
        // which only a backend's own allocation could make true).
        assert_eq!(DeviceBuffer::new(id, Box::new(Claims(largest))).unwrap().byte_len(), largest * 4);
    }

    #[test]
    fn u32_and_empty_buffers_round_trip() {
        for gpu in backends() {
            let data = [0, 1, u32::MAX, 0xdead_beef];
            let buffer = gpu.upload(&data).unwrap();
            assert_eq!((buffer.dtype(), buffer.len(), buffer.byte_len()), (DType::U32, 4, 16));
            assert_eq!(gpu.download::<u32>(&buffer).unwrap(), data);
            let wrong = gpu.download::<f32>(&buffer);
            assert!(matches!(
                wrong,
                Err(BackendError::DTypeMismatch { expected: DType::F32, found: DType::U32 })
            ));
            let empty = gpu.upload::<u32>(&[]).unwrap();
            assert!(empty.is_empty());
            assert_eq!(gpu.download::<u32>(&empty).unwrap(), []);
        }
    }

    #[test]
    fn memory_refuses_a_buffer_it_did_not_allocate() {
        let id = BackendId::fresh();
        let memory = HostMemory::new(id);
        let mut buffer = memory.alloc(DType::U32, 2).unwrap();
        memory.copy_to_device(bytemuck::cast_slice(&[7u32, 8]), &mut buffer).unwrap();
        assert_eq!(memory.storage(&buffer).unwrap(), &HostStorage::from_slice(&[7u32, 8]).unwrap());
        // The right backend id around another backend's storage, and host memory of another id.
        let mut disguised = DeviceBuffer::new(id, Box::new(Claims(2))).unwrap();
        assert!(matches!(memory.storage_mut(&mut disguised), Err(BackendError::ForeignResource { .. })));
        let other = HostMemory::new(BackendId::fresh());
        let mut bytes = [0u8; 8];
        assert!(matches!(other.copy_to_host(&buffer, &mut bytes), Err(BackendError::ForeignResource { .. })));
        assert_eq!(bytes, [0; 8]);
    }

    #[test]
    fn copies_on_the_device_need_equal_sizes_and_one_owner() {
        let gpu = RecordingBackend::new();
        let src = gpu.upload(&[1.0f32, 2.0, 3.0]).unwrap();
        let mut dst = gpu.zeros::<f32>(3).unwrap();
        gpu.copy_on_device(src.view(), dst.view_mut()).unwrap();
        assert_eq!(gpu.download::<f32>(&dst).unwrap(), [1.0, 2.0, 3.0]);
        // Part of one buffer into part of another, the rest untouched.
        gpu.copy_on_device(src.slice(0..2), dst.slice_mut(1..3)).unwrap();
        assert_eq!(gpu.download::<f32>(&dst).unwrap(), [1.0, 1.0, 2.0]);

        let mut short = gpu.zeros::<f32>(2).unwrap();
        let mismatch = gpu.copy_on_device(src.view(), short.view_mut());
        assert!(matches!(mismatch, Err(BackendError::SizeMismatch { expected: 8, found: 12 })));
        let outside = gpu.copy_on_device(src.slice(2..4), short.slice_mut(0..2));
        assert!(matches!(outside, Err(BackendError::SliceOutOfBounds { .. })));
        let words = gpu.zeros::<u32>(3).unwrap();
        let wrong_type = gpu.copy_on_device(words.view(), dst.view_mut());
        assert!(matches!(wrong_type, Err(BackendError::DTypeMismatch { .. })));
        assert_eq!(gpu.download::<f32>(&dst).unwrap(), [1.0, 1.0, 2.0], "a refused copy writes nothing");
        let other = RecordingBackend::new();
        let mut foreign = other.zeros::<f32>(3).unwrap();
        let refused = gpu.copy_on_device(src.view(), foreign.view_mut());
        assert!(matches!(refused, Err(BackendError::ForeignResource { .. })));
    }

    #[test]
    fn the_default_timer_covers_the_work() {
        let gpu = RecordingBackend::new();
        let elapsed = gpu
            .time(&mut || {
                std::thread::sleep(Duration::from_millis(20));
                Ok(())
            })
            .unwrap();
        assert!(elapsed >= Duration::from_millis(20), "{elapsed:?}");
        let failed = gpu.time(&mut || Err(BackendError::UnknownHandle { backend: "fake".into(), index: 1 }));
        assert!(failed.is_err());
    }
}
