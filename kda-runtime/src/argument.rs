//! Typed buffer arguments: what the fields of a generated argument struct are. A `const T*`
//! parameter's field is an [`In<'a, T>`], a `T*` parameter's an [`Out<'a, T>`], `T` the element
//! type the manifest declares (`f32`, [`bf16`](crate::bf16); [`Untyped`] for `void`).
//!
//! Each is made with `.into()` from what holds the elements:
//! - kda's own memory: a [`View`], [`ViewMut`], [`DeviceBuffer`] or [`ConstBuffer`], whose element
//!   type is the buffer's and is checked at launch;
//! - an engine's cudarc memory (feature `cuda`): `&CudaSlice<T>` or `&CudaView<T>` for an `In`,
//!   `&mut CudaSlice<T>` or `&mut CudaViewMut<T>` for an `Out`, whose element type the compiler
//!   checks: a `&CudaSlice<f32>` where the kernel takes bf16 does not compile, nor a shared borrow
//!   where it writes (see [`Borrowed`]);
//! - memory of an engine's own allocator, by device address ([`In::from_device_ptr`], `unsafe`).
//!
//! Whatever holds them, a launch checks the same things before anything reaches a device: element
//! type, extent against the length, the entry's requirements ([`signature::check`](crate::signature::check)).

use std::fmt;
use std::marker::PhantomData;

use crate::borrowed::Borrowed;
use crate::{ConstBuffer, DeviceBuffer, Element, KernelArg, View, ViewMut};

/// The element type of a `void` parameter: a view of any element type fills it, its extent in
/// bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Untyped {}

/// Elements of `T` a kernel reads: the field of a `const T*` parameter in a generated argument
/// struct, `T` the element type the manifest declares ([`Untyped`] for `void`).
///
/// Made with `.into()` from kda's [`View`], [`ViewMut`], [`DeviceBuffer`] or [`ConstBuffer`] (whose
/// element type a launch checks), or, with the feature `cuda`, from an engine's `&CudaSlice<T>`,
/// `&CudaView<T>` or `&CudaViewMut<T>`, whose element type the compiler checks; from a device
/// address with [`In::from_device_ptr`]. A launch checks the extent against the length and the
/// entry's requirements, whatever holds the elements.
///
/// ```
/// use kda_runtime::record::RecordingBackend;
/// use kda_runtime::{GpuBackendExt, In, KernelArg};
///
/// let gpu = RecordingBackend::new();
/// let x = gpu.upload(&[1.0f32, 2.0])?;
/// let input: In<'_, f32> = x.view().into();
/// assert!(matches!(KernelArg::from(input), KernelArg::Read(view) if view.len() == 2));
/// # Ok::<(), kda_runtime::BackendError>(())
/// ```
pub struct In<'a, T> {
    arg: KernelArg<'a>,
    element: PhantomData<fn() -> T>,
}

/// Elements of `T` a kernel writes (and may read): the field of a `T*` parameter in a generated
/// argument struct. It borrows its memory exclusively, so no other argument of the launch views it.
///
/// Made with `.into()` from kda's [`ViewMut`] or `&mut` [`DeviceBuffer`], or, with the feature
/// `cuda`, from an engine's `&mut CudaSlice<T>` or `&mut CudaViewMut<T>`; from a device address with
/// [`Out::from_device_ptr`]. A shared borrow does not convert: a kernel that writes does not compile
/// with one.
pub struct Out<'a, T> {
    arg: KernelArg<'a>,
    element: PhantomData<fn() -> T>,
}

/// What both typed arguments have: the argument they wrap, and their `Debug`.
macro_rules! typed_argument {
    ($name:ident) => {
        impl<'a, T> $name<'a, T> {
            /// The typed argument over `arg`, whose element type the caller made `T`'s (or a
            /// launch checks).
            pub(crate) fn wrap(arg: KernelArg<'a>) -> Self {
                Self { arg, element: PhantomData }
            }
        }

        impl<'a, T> From<$name<'a, T>> for KernelArg<'a> {
            fn from(typed: $name<'a, T>) -> Self {
                typed.arg
            }
        }

        impl<'a, T> From<Option<$name<'a, T>>> for KernelArg<'a> {
            /// The argument, or a null pointer for a `nullable` parameter.
            fn from(typed: Option<$name<'a, T>>) -> Self {
                typed.map_or(KernelArg::Null, |typed| typed.arg)
            }
        }

        impl<T> fmt::Debug for $name<'_, T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_tuple(stringify!($name)).field(&self.arg).finish()
            }
        }
    };
}

typed_argument!(In);
typed_argument!(Out);

impl<'a, T> From<View<'a>> for In<'a, T> {
    fn from(view: View<'a>) -> Self {
        Self::wrap(KernelArg::Read(view))
    }
}

impl<'a, T> From<ViewMut<'a>> for In<'a, T> {
    /// The same elements, read only (as C passes `T*` for `const T*`).
    fn from(view: ViewMut<'a>) -> Self {
        Self::wrap(KernelArg::Read(view.into()))
    }
}

impl<'a, T> From<&'a DeviceBuffer> for In<'a, T> {
    fn from(buffer: &'a DeviceBuffer) -> Self {
        Self::wrap(KernelArg::Read(buffer.view()))
    }
}

impl<'a, T> From<&'a mut DeviceBuffer> for In<'a, T> {
    fn from(buffer: &'a mut DeviceBuffer) -> Self {
        Self::wrap(KernelArg::Read(buffer.view()))
    }
}

impl<'a, T> From<&'a ConstBuffer> for In<'a, T> {
    fn from(buffer: &'a ConstBuffer) -> Self {
        Self::wrap(KernelArg::Read(buffer.view()))
    }
}

impl<'a, T> From<ViewMut<'a>> for Out<'a, T> {
    fn from(view: ViewMut<'a>) -> Self {
        Self::wrap(KernelArg::Write(view))
    }
}

impl<'a, T> From<&'a mut DeviceBuffer> for Out<'a, T> {
    fn from(buffer: &'a mut DeviceBuffer) -> Self {
        Self::wrap(KernelArg::Write(buffer.view_mut()))
    }
}

impl<'a, T: Element> In<'a, T> {
    /// `len` elements of `T` at device address `address`, memory of the caller's own allocator
    /// (neither a kda buffer nor a cudarc slice), for a launch on the CUDA backend of its context.
    /// The launch checks the element type, the extent against `len`, and that no written argument
    /// of the launch overlaps it; nothing orders it with other streams.
    ///
    /// # Safety
    ///
    /// Until the launch has finished on the device (not only until it returns):
    /// - `address` is the start of `len` elements of `T` allocated in the context of the backend
    ///   the argument is launched on (`len` times the size of `T` bytes, within one allocation),
    ///   aligned for `T`;
    /// - the memory is not freed, and nothing writes it, on any stream, except in stream order
    ///   after the launch (the caller orders its own work with the backend's stream).
    pub unsafe fn from_device_ptr(address: u64, len: usize) -> Self {
        Self::wrap(KernelArg::Borrowed(Borrowed::raw(T::DTYPE, address, len, false)))
    }
}

impl<'a, T: Element> Out<'a, T> {
    /// `len` elements of `T` at device address `address`, written by the kernel: as
    /// [`In::from_device_ptr`].
    ///
    /// # Safety
    ///
    /// Those of [`In::from_device_ptr`], and: nothing reads the memory either, on any stream,
    /// except in stream order after the launch.
    pub unsafe fn from_device_ptr(address: u64, len: usize) -> Self {
        Self::wrap(KernelArg::Borrowed(Borrowed::raw(T::DTYPE, address, len, true)))
    }
}
