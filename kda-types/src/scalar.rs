//! Types of scalar parameters: the element types a kernel can take by value, whose names, C
//! types and sizes are [`DType`]'s.

use core::fmt;

use crate::DType;

/// The type of a scalar parameter, passed to the kernel by copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarKind {
    /// `u32`: `unsigned int`.
    U32,
    /// `i32`: `int`.
    I32,
    /// `u64`: `unsigned long long` or `unsigned long` (`size_t`).
    U64,
    /// `f32`: `float`.
    F32,
    /// `f16`: `__half`.
    F16,
    /// `bf16`: `__nv_bfloat16`.
    Bf16,
    /// `f64`: `double`.
    F64,
    /// `i8`: `signed char`.
    I8,
    /// `u8`: `unsigned char`.
    U8,
    /// `i16`: `short`.
    I16,
    /// `u16`: `unsigned short`.
    U16,
    /// `i64`: `long long` or `long` (`int64_t`).
    I64,
    /// `bool`: `bool`.
    Bool,
}

impl ScalarKind {
    /// Every scalar kind, in the order of the table.
    pub const ALL: [ScalarKind; 13] = [
        ScalarKind::U32,
        ScalarKind::I32,
        ScalarKind::U64,
        ScalarKind::F32,
        ScalarKind::F16,
        ScalarKind::Bf16,
        ScalarKind::F64,
        ScalarKind::I8,
        ScalarKind::U8,
        ScalarKind::I16,
        ScalarKind::U16,
        ScalarKind::I64,
        ScalarKind::Bool,
    ];

    /// The element type of the same name, whose C types and size it has.
    pub const fn dtype(self) -> DType {
        match self {
            ScalarKind::U32 => DType::U32,
            ScalarKind::I32 => DType::I32,
            ScalarKind::U64 => DType::U64,
            ScalarKind::F32 => DType::F32,
            ScalarKind::F16 => DType::F16,
            ScalarKind::Bf16 => DType::Bf16,
            ScalarKind::F64 => DType::F64,
            ScalarKind::I8 => DType::I8,
            ScalarKind::U8 => DType::U8,
            ScalarKind::I16 => DType::I16,
            ScalarKind::U16 => DType::U16,
            ScalarKind::I64 => DType::I64,
            ScalarKind::Bool => DType::Bool,
        }
    }

    /// The manifest spelling: `u32`.
    pub const fn name(self) -> &'static str {
        self.dtype().name()
    }

    /// The C types a kernel may declare the parameter with ([`DType::c_types`]).
    pub const fn c_types(self) -> &'static [&'static str] {
        self.dtype().c_types()
    }

    /// The canonical C type: `unsigned int`.
    pub const fn c_type(self) -> &'static str {
        self.dtype().c_type()
    }

    /// Bytes of the value in the kernel's parameter buffer.
    pub const fn size(self) -> usize {
        self.dtype().size()
    }

    /// Whether an extent or a requirement may use it: integers only (`bool` as 0 or 1).
    pub const fn is_integer(self) -> bool {
        self.dtype().is_integer()
    }

    /// Whether it is a signed integer.
    pub const fn is_signed(self) -> bool {
        self.dtype().is_signed()
    }

    /// The scalar kind the manifest spells `name`.
    pub fn from_name(name: &str) -> Option<ScalarKind> {
        ScalarKind::ALL.into_iter().find(|kind| kind.name() == name)
    }
}

impl fmt::Display for ScalarKind {
    /// The manifest spelling.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
