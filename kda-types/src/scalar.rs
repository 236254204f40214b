//! Types of scalar parameters.

use core::fmt;

/// The type of a scalar parameter, passed to the kernel by copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarKind {
    /// `u32`: `unsigned int`.
    U32,
    /// `i32`: `int`.
    I32,
    /// `u64`: `unsigned long long`.
    U64,
    /// `f32`: `float`.
    F32,
}

impl ScalarKind {
    /// Every scalar kind, in the order of the table.
    pub const ALL: [ScalarKind; 4] = [ScalarKind::U32, ScalarKind::I32, ScalarKind::U64, ScalarKind::F32];

    /// The manifest spelling: `u32`.
    pub const fn name(self) -> &'static str {
        match self {
            ScalarKind::U32 => "u32",
            ScalarKind::I32 => "i32",
            ScalarKind::U64 => "u64",
            ScalarKind::F32 => "f32",
        }
    }

    /// The CUDA C type a kernel declares the parameter with: `unsigned int`.
    pub const fn c_type(self) -> &'static str {
        match self {
            ScalarKind::U32 => "unsigned int",
            ScalarKind::I32 => "int",
            ScalarKind::U64 => "unsigned long long",
            ScalarKind::F32 => "float",
        }
    }

    /// Bytes of the value in the kernel's parameter buffer.
    pub const fn size(self) -> usize {
        match self {
            ScalarKind::U32 | ScalarKind::I32 | ScalarKind::F32 => 4,
            ScalarKind::U64 => 8,
        }
    }

    /// Whether an extent or a requirement may use it: integers only.
    pub const fn is_integer(self) -> bool {
        !matches!(self, ScalarKind::F32)
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
