//! Element types of buffer parameters.

use core::fmt;

/// The element type of a buffer parameter, and of the device buffer that fills it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// `bf16`: `__nv_bfloat16` (`<cuda_bf16.h>`), `half::bf16` in Rust.
    Bf16,
    /// `f32`: `float`.
    F32,
    /// `u32`: `unsigned int`, e.g. index buffers.
    U32,
}

impl DType {
    /// Every element type, in the order of the table.
    pub const ALL: [DType; 3] = [DType::Bf16, DType::F32, DType::U32];

    /// The manifest spelling: `bf16`.
    pub const fn name(self) -> &'static str {
        match self {
            DType::Bf16 => "bf16",
            DType::F32 => "f32",
            DType::U32 => "u32",
        }
    }

    /// The CUDA C type a kernel declares its elements with: `__nv_bfloat16`.
    pub const fn c_type(self) -> &'static str {
        match self {
            DType::Bf16 => "__nv_bfloat16",
            DType::F32 => "float",
            DType::U32 => "unsigned int",
        }
    }

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::Bf16 => 2,
            DType::F32 | DType::U32 => 4,
        }
    }

    /// The bytes of `len` elements, or `None` where that overflows `usize`.
    pub const fn bytes(self, len: usize) -> Option<usize> {
        len.checked_mul(self.size())
    }

    /// The element type the manifest spells `name`.
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|dtype| dtype.name() == name)
    }
}

impl fmt::Display for DType {
    /// The manifest spelling.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
