//! What a CPU kernel declares (its parameter kinds) and what it receives (typed host slices and
//! scalars), plus the error a kernel returns when it refuses a launch.

use std::fmt;

use half::bf16;

/// The kind of one kernel parameter, as the CUDA signature spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// `const bf16*`: a bf16 buffer the kernel only reads.
    ConstBf16,
    /// `bf16*`: a bf16 buffer the kernel writes.
    MutBf16,
    /// `const f32*`: an f32 buffer the kernel only reads.
    ConstF32,
    /// `f32*`: an f32 buffer the kernel writes.
    MutF32,
    /// A `u32` scalar.
    U32,
    /// An `i32` scalar.
    I32,
    /// An `f32` scalar.
    F32,
}

impl fmt::Display for ParamKind {
    /// The C spelling (`const bf16*`, `f32*`, `u32`), the form the ABI tables use.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ParamKind::ConstBf16 => "const bf16*",
            ParamKind::MutBf16 => "bf16*",
            ParamKind::ConstF32 => "const f32*",
            ParamKind::MutF32 => "f32*",
            ParamKind::U32 => "u32",
            ParamKind::I32 => "i32",
            ParamKind::F32 => "f32",
        })
    }
}

/// One launch argument as a CPU kernel sees it: buffers become host slices of their element type.
#[derive(Debug)]
pub enum CpuArg<'a> {
    /// A `const bf16*` parameter.
    ConstBf16(&'a [bf16]),
    /// A `bf16*` parameter.
    MutBf16(&'a mut [bf16]),
    /// A `const f32*` parameter.
    ConstF32(&'a [f32]),
    /// An `f32*` parameter.
    MutF32(&'a mut [f32]),
    /// A `u32` parameter.
    U32(u32),
    /// An `i32` parameter.
    I32(i32),
    /// An `f32` scalar parameter.
    F32(f32),
}

impl<'a> CpuArg<'a> {
    /// The parameter kind this argument fills.
    pub fn kind(&self) -> ParamKind {
        match self {
            CpuArg::ConstBf16(_) => ParamKind::ConstBf16,
            CpuArg::MutBf16(_) => ParamKind::MutBf16,
            CpuArg::ConstF32(_) => ParamKind::ConstF32,
            CpuArg::MutF32(_) => ParamKind::MutF32,
            CpuArg::U32(_) => ParamKind::U32,
            CpuArg::I32(_) => ParamKind::I32,
            CpuArg::F32(_) => ParamKind::F32,
        }
    }

    /// A copy of a shared argument; `None` for a mutable buffer, which can be handed out once only.
    fn shared(&self) -> Option<CpuArg<'a>> {
        match *self {
            CpuArg::ConstBf16(data) => Some(CpuArg::ConstBf16(data)),
            CpuArg::ConstF32(data) => Some(CpuArg::ConstF32(data)),
            CpuArg::U32(value) => Some(CpuArg::U32(value)),
            CpuArg::I32(value) => Some(CpuArg::I32(value)),
            CpuArg::F32(value) => Some(CpuArg::F32(value)),
            CpuArg::MutBf16(_) | CpuArg::MutF32(_) => None,
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

/// The arguments of one launch, already checked against the kernel's declared signature; a
/// kernel takes them by position.
///
/// Mutable buffers are moved out (so two `&mut` to one buffer can never coexist); shared buffers
/// and scalars can be read any number of times. Asking for the wrong kind is an error, not a
/// panic, so a kernel registered with the wrong signature fails its launches cleanly.
#[derive(Debug)]
pub struct CpuArgs<'a> {
    slots: Vec<Option<CpuArg<'a>>>,
}

macro_rules! accessors {
    ($($(#[$doc:meta])* $name:ident: $variant:ident -> $ty:ty;)*) => {$(
        $(#[$doc])*
        pub fn $name(&mut self, index: usize) -> Result<$ty, KernelError> {
            match self.take(index)? {
                CpuArg::$variant(value) => Ok(value),
                other => Err(KernelError::new(format!(
                    "argument {index} is a `{}`, not a `{}`",
                    other.kind(),
                    ParamKind::$variant,
                ))),
            }
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

    accessors! {
        /// Argument `index`, a `const bf16*` buffer.
        const_bf16: ConstBf16 -> &'a [bf16];
        /// Argument `index`, a `bf16*` buffer; it can be taken once.
        mut_bf16: MutBf16 -> &'a mut [bf16];
        /// Argument `index`, a `const f32*` buffer.
        const_f32: ConstF32 -> &'a [f32];
        /// Argument `index`, an `f32*` buffer; it can be taken once.
        mut_f32: MutF32 -> &'a mut [f32];
        /// Argument `index`, a `u32` scalar.
        u32: U32 -> u32;
        /// Argument `index`, an `i32` scalar.
        i32: I32 -> i32;
        /// Argument `index`, an `f32` scalar.
        f32: F32 -> f32;
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
