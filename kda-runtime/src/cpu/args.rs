//! What a CPU kernel receives (typed host slices and scalars, in the entry's parameter order),
//! plus the error a kernel returns when it refuses a launch.

use half::bf16;

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
    /// A `const u32*` parameter.
    ConstU32(&'a [u32]),
    /// A `u32*` parameter.
    MutU32(&'a mut [u32]),
    /// A `u32` parameter.
    U32(u32),
    /// An `i32` parameter.
    I32(i32),
    /// A `u64` parameter.
    U64(u64),
    /// An `f32` scalar parameter.
    F32(f32),
}

impl<'a> CpuArg<'a> {
    /// The C spelling of the parameter this argument fills (`const bf16*`, `u32`).
    pub fn describe(&self) -> &'static str {
        match self {
            CpuArg::ConstBf16(_) => "const bf16*",
            CpuArg::MutBf16(_) => "bf16*",
            CpuArg::ConstF32(_) => "const f32*",
            CpuArg::MutF32(_) => "f32*",
            CpuArg::ConstU32(_) => "const u32*",
            CpuArg::MutU32(_) => "u32*",
            CpuArg::U32(_) => "u32",
            CpuArg::I32(_) => "i32",
            CpuArg::U64(_) => "u64",
            CpuArg::F32(_) => "f32",
        }
    }

    /// A copy of a shared argument; `None` for a mutable buffer, which can be handed out once only.
    fn shared(&self) -> Option<CpuArg<'a>> {
        match *self {
            CpuArg::ConstBf16(data) => Some(CpuArg::ConstBf16(data)),
            CpuArg::ConstF32(data) => Some(CpuArg::ConstF32(data)),
            CpuArg::ConstU32(data) => Some(CpuArg::ConstU32(data)),
            CpuArg::U32(value) => Some(CpuArg::U32(value)),
            CpuArg::I32(value) => Some(CpuArg::I32(value)),
            CpuArg::U64(value) => Some(CpuArg::U64(value)),
            CpuArg::F32(value) => Some(CpuArg::F32(value)),
            CpuArg::MutBf16(_) | CpuArg::MutF32(_) | CpuArg::MutU32(_) => None,
        }
    }

    /// The argument read only: a mutable buffer becomes a shared one (as C passes `T*` for
    /// `const T*`); anything else is unchanged.
    pub(crate) fn into_shared(self) -> CpuArg<'a> {
        match self {
            CpuArg::MutBf16(data) => CpuArg::ConstBf16(data),
            CpuArg::MutF32(data) => CpuArg::ConstF32(data),
            CpuArg::MutU32(data) => CpuArg::ConstU32(data),
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

macro_rules! accessors {
    ($($(#[$doc:meta])* $name:ident: $variant:ident ($spelling:literal) -> $ty:ty;)*) => {$(
        $(#[$doc])*
        pub fn $name(&mut self, index: usize) -> Result<$ty, KernelError> {
            match self.take(index)? {
                CpuArg::$variant(value) => Ok(value),
                other => Err(KernelError::new(format!(
                    "argument {index} is a `{}`, not a `{}`",
                    other.describe(),
                    $spelling,
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
        const_bf16: ConstBf16 ("const bf16*") -> &'a [bf16];
        /// Argument `index`, a `bf16*` buffer; it can be taken once.
        mut_bf16: MutBf16 ("bf16*") -> &'a mut [bf16];
        /// Argument `index`, a `const f32*` buffer.
        const_f32: ConstF32 ("const f32*") -> &'a [f32];
        /// Argument `index`, an `f32*` buffer; it can be taken once.
        mut_f32: MutF32 ("f32*") -> &'a mut [f32];
        /// Argument `index`, a `const u32*` buffer.
        const_u32: ConstU32 ("const u32*") -> &'a [u32];
        /// Argument `index`, a `u32*` buffer; it can be taken once.
        mut_u32: MutU32 ("u32*") -> &'a mut [u32];
        /// Argument `index`, a `u32` scalar.
        u32: U32 ("u32") -> u32;
        /// Argument `index`, an `i32` scalar.
        i32: I32 ("i32") -> i32;
        /// Argument `index`, a `u64` scalar.
        u64: U64 ("u64") -> u64;
        /// Argument `index`, an `f32` scalar.
        f32: F32 ("f32") -> f32;
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
