//! What a CPU kernel receives (typed host slices and scalars, in the entry's parameter order),
//! plus the error a kernel returns when it refuses a launch.

use std::fmt;

use half::bf16;
use kda_types::ParamCType;

use crate::{DType, Element, Scalar, ScalarValue};

/// One launch argument as a CPU kernel sees it: a buffer becomes the host bytes of its view, which
/// [`CpuArgs`] hands out as a slice of the element type.
#[derive(Debug)]
pub enum CpuArg<'a> {
    /// A `const T*` parameter: the view's elements.
    Const(DType, &'a [u8]),
    /// A `T*` parameter: the view's elements, writable.
    Mut(DType, &'a mut [u8]),
    /// A scalar parameter.
    Scalar(Scalar),
    /// A null pointer, for a `nullable` buffer parameter.
    Null,
}

impl<'a> CpuArg<'a> {
    /// The C spelling of the parameter this argument fills (`const bf16*`, `u32`).
    pub fn describe(&self) -> String {
        match self {
            CpuArg::Const(dtype, _) => pointer(*dtype, false).to_string(),
            CpuArg::Mut(dtype, _) => pointer(*dtype, true).to_string(),
            CpuArg::Scalar(scalar) => ParamCType::Scalar(scalar.kind()).manifest_spelling().to_string(),
            CpuArg::Null => "null pointer".to_owned(),
        }
    }

    /// A copy of a shared argument; `None` for a mutable buffer, which can be handed out once only.
    fn shared(&self) -> Option<CpuArg<'a>> {
        match *self {
            CpuArg::Const(dtype, data) => Some(CpuArg::Const(dtype, data)),
            CpuArg::Scalar(scalar) => Some(CpuArg::Scalar(scalar)),
            CpuArg::Null => Some(CpuArg::Null),
            CpuArg::Mut(..) => None,
        }
    }

    /// The argument read only: a mutable buffer becomes a shared one (as C passes `T*` for
    /// `const T*`); anything else is unchanged.
    pub(crate) fn into_shared(self) -> CpuArg<'a> {
        match self {
            CpuArg::Mut(dtype, data) => CpuArg::Const(dtype, data),
            other => other,
        }
    }
}

/// Why a CPU kernel refused or failed a launch; the backend reports it as
/// [`BackendError::Launch`](crate::BackendError::Launch), naming the kernel.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct KernelError {
    message: String,
}

impl KernelError {
    /// An error saying `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self { message: message.into() }
    }
}

impl From<String> for KernelError {
    fn from(message: String) -> Self {
        Self::new(message)
    }
}

impl From<&str> for KernelError {
    fn from(message: &str) -> Self {
        Self::new(message)
    }
}

/// The arguments of one launch, already checked against the entry's signature; a kernel takes
/// them by position.
///
/// Mutable buffers are moved out (so two `&mut` to one buffer can never coexist); shared buffers
/// and scalars can be read any number of times. Asking for the wrong kind is an error, not a
/// panic, so a kernel registered with the wrong signature fails its launches cleanly.
#[derive(Debug)]
pub struct CpuArgs<'a> {
    slots: Vec<Option<CpuArg<'a>>>,
}

/// Accessors by element type, each the generic one ([`CpuArgs::slice`], [`CpuArgs::slice_mut`],
/// [`CpuArgs::scalar`]) at one type.
macro_rules! accessors {
    ($($(#[$doc:meta])* $name:ident -> $ty:ty = $generic:ident;)*) => {$(
        $(#[$doc])*
        pub fn $name(&mut self, index: usize) -> Result<$ty, KernelError> {
            self.$generic(index)
        }
    )*};
}

impl<'a> CpuArgs<'a> {
    pub(crate) fn new(args: Vec<CpuArg<'a>>) -> Self {
        Self { slots: args.into_iter().map(Some).collect() }
    }

    /// The number of arguments.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether the kernel takes no argument.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Argument `index`, a `const T*` buffer (or a `T*` one, read).
    pub fn slice<T: Element>(&mut self, index: usize) -> Result<&'a [T], KernelError> {
        match self.take(index)? {
            CpuArg::Const(dtype, data) if dtype == T::DTYPE => cast(index, data),
            other => Err(wrong(index, &other, pointer(T::DTYPE, false))),
        }
    }

    /// Argument `index`, a `nullable const T*` buffer: `None` for a null pointer.
    pub fn nullable_slice<T: Element>(&mut self, index: usize) -> Result<Option<&'a [T]>, KernelError> {
        if self.is_null(index) { self.take(index).map(|_| None) } else { self.slice(index).map(Some) }
    }

    /// Argument `index`, a `nullable T*` buffer: `None` for a null pointer; it can be taken once.
    pub fn nullable_slice_mut<T: Element>(
        &mut self,
        index: usize,
    ) -> Result<Option<&'a mut [T]>, KernelError> {
        if self.is_null(index) { self.take(index).map(|_| None) } else { self.slice_mut(index).map(Some) }
    }

    /// Whether argument `index` is a null pointer.
    fn is_null(&self, index: usize) -> bool {
        matches!(self.slots.get(index), Some(Some(CpuArg::Null)))
    }

    /// Argument `index`, a `T*` buffer; it can be taken once.
    pub fn slice_mut<T: Element>(&mut self, index: usize) -> Result<&'a mut [T], KernelError> {
        match self.take(index)? {
            CpuArg::Mut(dtype, data) if dtype == T::DTYPE => {
                bytemuck::try_cast_slice_mut(data).map_err(|error| misaligned(index, error))
            }
            other => Err(wrong(index, &other, pointer(T::DTYPE, true))),
        }
    }

    /// Argument `index`, a scalar of `T`'s kind.
    pub fn scalar<T: ScalarValue>(&mut self, index: usize) -> Result<T, KernelError> {
        match self.take(index)? {
            CpuArg::Scalar(scalar) => {
                scalar.get().ok_or_else(|| wrong(index, &CpuArg::Scalar(scalar), T::KIND))
            }
            other => Err(wrong(index, &other, T::KIND)),
        }
    }

    accessors! {
        /// Argument `index`, a `const bf16*` buffer.
        const_bf16 -> &'a [bf16] = slice;
        /// Argument `index`, a `bf16*` buffer; it can be taken once.
        mut_bf16 -> &'a mut [bf16] = slice_mut;
        /// Argument `index`, a `const f32*` buffer.
        const_f32 -> &'a [f32] = slice;
        /// Argument `index`, an `f32*` buffer; it can be taken once.
        mut_f32 -> &'a mut [f32] = slice_mut;
        /// Argument `index`, a `const u32*` buffer.
        const_u32 -> &'a [u32] = slice;
        /// Argument `index`, a `u32*` buffer; it can be taken once.
        mut_u32 -> &'a mut [u32] = slice_mut;
        /// Argument `index`, a `u32` scalar.
        u32 -> u32 = scalar;
        /// Argument `index`, an `i32` scalar.
        i32 -> i32 = scalar;
        /// Argument `index`, a `u64` scalar.
        u64 -> u64 = scalar;
        /// Argument `index`, an `f32` scalar.
        f32 -> f32 = scalar;
    }

    fn take(&mut self, index: usize) -> Result<CpuArg<'a>, KernelError> {
        let count = self.slots.len();
        let slot = self.slots.get_mut(index).ok_or_else(|| {
            KernelError::new(format!("argument {index} asked for, but the launch has {count}"))
        })?;
        let taken = || KernelError::new(format!("argument {index} was already taken"));
        match slot.as_ref().ok_or_else(taken)?.shared() {
            Some(copy) => Ok(copy),
            None => slot.take().ok_or_else(taken),
        }
    }
}

/// `data` as `T`s (host storage is 16-byte aligned and a view starts at a whole element).
fn cast<T: Element>(index: usize, data: &[u8]) -> Result<&[T], KernelError> {
    bytemuck::try_cast_slice(data).map_err(|error| misaligned(index, error))
}

fn misaligned(index: usize, error: bytemuck::PodCastError) -> KernelError {
    KernelError::new(format!("argument {index} cannot be read in place: {error:?}"))
}

/// The manifest's spelling of a pointer parameter: `const bf16*`, `f32*`.
fn pointer(element: DType, writable: bool) -> impl fmt::Display {
    ParamCType::Pointer { element, writable }.manifest_spelling()
}

/// Argument `index` is `found` where the kernel asked for `asked`.
fn wrong(index: usize, found: &CpuArg<'_>, asked: impl fmt::Display) -> KernelError {
    KernelError::new(format!("argument {index} is a `{}`, not a `{asked}`", found.describe()))
}
