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

use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::Arc;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{
    CudaContext, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, DeviceSlice,
    SyncOnDrop,
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
pub(crate) trait WritableMemory: Send + Sync {
    /// The context that allocated it.
    fn context(&self) -> &Arc<CudaContext>;
    /// Its address, `stream` made to wait for its last read and write; the guard records the
    /// write when dropped (cudarc's `DevicePtrMut::device_ptr_mut`).
    fn write_on<'s>(&'s mut self, stream: &'s CudaStream) -> (CUdeviceptr, SyncOnDrop<'s>);
}

/// An exclusive borrow of cudarc memory a kernel writes: a `&'a mut` to it, kept as a pointer so
/// that an argument stays covariant in `'a`, as a `&'a mut` to a sized type is (a `&'a mut dyn` is
/// invariant, which would make a typed argument of a shorter borrow a type error).
pub(crate) struct Exclusive<'a> {
    memory: NonNull<dyn WritableMemory + 'a>,
    borrow: PhantomData<&'a mut ()>,
}

impl<'a> Exclusive<'a> {
    fn new(memory: &'a mut (dyn WritableMemory + 'a)) -> Self {
        Self { memory: NonNull::from(memory), borrow: PhantomData }
    }

    /// The memory, for one use.
    pub(crate) fn get(&mut self) -> &mut (dyn WritableMemory + 'a) {
        // SAFETY: `memory` came from a `&'a mut` (`new`), whose exclusive borrow `borrow` stands
        // for, for `'a`; `&mut self` makes this the only use of it now. Covariance in `'a` only
        // shortens what the pointer is known to outlive: nothing stores an object through it.
        unsafe { self.memory.as_mut() }
    }
}

// SAFETY: an `Exclusive` is a `&mut` to a `WritableMemory`, which is `Send + Sync`; a `&mut T` is
// `Send` and `Sync` where `T` is.
unsafe impl Send for Exclusive<'_> {}
// SAFETY: as for `Send`: a shared `Exclusive` gives no access (`get` takes `&mut self`).
unsafe impl Sync for Exclusive<'_> {}

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
    ($($typed:ident [$($lifetime:lifetime)?] [$($mutability:tt)?] $memory:ty => $wrap:ident),* $(,)?) => {$(
        impl<'a, $($lifetime,)? T: Element> From<&'a $($mutability)? $memory> for $typed<'a, T> {
            fn from(memory: &'a $($mutability)? $memory) -> Self {
                $typed::wrap(borrowed(T::DTYPE, memory.len(), $wrap(memory)))
            }
        }

        impl<'a, $($lifetime,)? T: Element> From<&'a $($mutability)? $memory> for $typed<'a, Untyped> {
            fn from(memory: &'a $($mutability)? $memory) -> Self {
                $typed::wrap(borrowed(T::DTYPE, memory.len(), $wrap(memory)))
            }
        }
    )*};
}

conversions!(
    In [] [] CudaSlice<T> => shared,
    In ['b] [] CudaView<'b, T> => shared,
    In ['b] [] CudaViewMut<'b, T> => shared,
    Out [] [mut] CudaSlice<T> => exclusive,
    Out ['b] [mut] CudaViewMut<'b, T> => exclusive,
);

fn borrowed(dtype: crate::DType, len: usize, memory: Memory<'_>) -> KernelArg<'_> {
    KernelArg::Borrowed(Borrowed::new(dtype, len, memory))
}

/// Written memory, as [`Memory::Write`] holds it.
fn exclusive<'a>(memory: &'a mut (dyn WritableMemory + 'a)) -> Memory<'a> {
    Memory::Write(Exclusive::new(memory))
}

/// Read memory, as [`Memory::Read`] holds it.
fn shared<'a>(memory: &'a (dyn ReadableMemory + 'a)) -> Memory<'a> {
    Memory::Read(memory)
}
