//! An engine's cudarc memory as launch arguments: `&CudaSlice<T>` and `&CudaView<T>` (and a
//! `&CudaViewMut<T>`, read) become an [`In<'a, T>`], `&mut CudaSlice<T>` and `&mut CudaViewMut<T>`
//! an [`Out<'a, T>`], for `T` the element type of the parameter, and any of them an
//! `In<'a, Untyped>` or `Out<'a, Untyped>` for a `void` one. A launch asks each for its device
//! pointer on the backend's stream as cudarc's own launch does (see the crate's
//! [borrowed memory](crate::Borrowed)).
//!
//! Only cudarc's own types are taken: a type of the caller's could implement cudarc's
//! `DevicePtr` in safe code with any address, so the traits here are implemented for cudarc's
//! types alone, whose length is the memory they hold.

use std::sync::Arc;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{
    CudaContext, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, DeviceSlice, SyncOnDrop,
};

use crate::borrowed::{Borrowed, Memory};
use crate::{Element, In, KernelArg, Out, Untyped};

/// cudarc memory a kernel reads.
pub(crate) trait ReadableMemory: Sync {
    /// The context that allocated it.
    fn context(&self) -> &Arc<CudaContext>;
    /// Its address, `stream` made to wait for its last write; the guard records the read when
    /// dropped (cudarc's `DevicePtr::device_ptr`).
    fn read_on<'s>(&'s self, stream: &'s CudaStream) -> (CUdeviceptr, SyncOnDrop<'s>);
}

/// cudarc memory a kernel writes.
pub(crate) trait WritableMemory: Send {
    /// The context that allocated it.
    fn context(&self) -> &Arc<CudaContext>;
    /// Its address, `stream` made to wait for its last read and write; the guard records the
    /// write when dropped (cudarc's `DevicePtrMut::device_ptr_mut`).
    fn write_on<'s>(&'s mut self, stream: &'s CudaStream) -> (CUdeviceptr, SyncOnDrop<'s>);
}

/// The traits for cudarc's types: readable ones, then writable ones.
macro_rules! memory {
    (read: $($read:ty),*; write: $($write:ty),*) => {
        $(impl<T: Element> ReadableMemory for $read {
            fn context(&self) -> &Arc<CudaContext> {
                DeviceSlice::stream(self).context()
            }

            fn read_on<'s>(&'s self, stream: &'s CudaStream) -> (CUdeviceptr, SyncOnDrop<'s>) {
                self.device_ptr(stream)
            }
        })*
        $(impl<T: Element> WritableMemory for $write {
            fn context(&self) -> &Arc<CudaContext> {
                DeviceSlice::stream(self).context()
            }

            fn write_on<'s>(&'s mut self, stream: &'s CudaStream) -> (CUdeviceptr, SyncOnDrop<'s>) {
                self.device_ptr_mut(stream)
            }
        })*
    };
}

memory!(read: CudaSlice<T>, CudaView<'_, T>, CudaViewMut<'_, T>; write: CudaSlice<T>, CudaViewMut<'_, T>);

/// The conversions of cudarc's types into typed arguments: of their own element type, and of
/// `Untyped` (a `void` parameter, which takes any).
macro_rules! conversions {
    ($($typed:ident [$($lifetime:lifetime)?] [$($mutability:tt)?] $memory:ty => $variant:ident),* $(,)?) => {$(
        impl<'a, $($lifetime,)? T: Element> From<&'a $($mutability)? $memory> for $typed<'a, T> {
            fn from(memory: &'a $($mutability)? $memory) -> Self {
                $typed::wrap(borrowed(T::DTYPE, memory.len(), Memory::$variant(memory)))
            }
        }

        impl<'a, $($lifetime,)? T: Element> From<&'a $($mutability)? $memory> for $typed<'a, Untyped> {
            fn from(memory: &'a $($mutability)? $memory) -> Self {
                $typed::wrap(borrowed(T::DTYPE, memory.len(), Memory::$variant(memory)))
            }
        }
    )*};
}

conversions!(
    In [] [] CudaSlice<T> => Read,
    In ['b] [] CudaView<'b, T> => Read,
    In ['b] [] CudaViewMut<'b, T> => Read,
    Out [] [mut] CudaSlice<T> => Write,
    Out ['b] [mut] CudaViewMut<'b, T> => Write,
);

fn borrowed(dtype: crate::DType, len: usize, memory: Memory<'_>) -> KernelArg<'_> {
    KernelArg::Borrowed(Borrowed::new(dtype, len, memory))
}
