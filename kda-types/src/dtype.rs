//! Element types of buffer parameters: the one table every front end reads.

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
    /// `f16`: `__half` (`<cuda_fp16.h>`), `half::f16` in Rust.
    F16,
    /// `f64`: `double`.
    F64,
    /// `i8`: `signed char` (`int8_t`).
    I8,
    /// `u8`: `unsigned char` (`uint8_t`).
    U8,
    /// `i16`: `short` (`int16_t`).
    I16,
    /// `u16`: `unsigned short` (`uint16_t`).
    U16,
    /// `i32`: `int` (`int32_t`).
    I32,
    /// `i64`: `long long` or `long` (`int64_t`, `ptrdiff_t`): see [`DType::c_types`].
    I64,
    /// `u64`: `unsigned long long` or `unsigned long` (`uint64_t`, `size_t`).
    U64,
    /// `bool`: `bool`, one byte holding 0 or 1.
    Bool,
    /// `fp8e4m3`: `__nv_fp8_e4m3` (`<cuda_fp8.h>`), the OCP E4M3 format; one byte.
    Fp8E4M3,
    /// `fp8e5m2`: `__nv_fp8_e5m2` (`<cuda_fp8.h>`), the OCP E5M2 format; one byte.
    Fp8E5M2,
    /// `void`: untyped bytes, a buffer of quantized blocks or any other layout the kernel
    /// decodes itself. A parameter of it takes a view of any element type, its extent in bytes.
    Void,
}

impl DType {
    /// Every element type, in the order of the table.
    pub const ALL: [DType; 16] = [
        DType::Bf16,
        DType::F32,
        DType::U32,
        DType::F16,
        DType::F64,
        DType::I8,
        DType::U8,
        DType::I16,
        DType::U16,
        DType::I32,
        DType::I64,
        DType::U64,
        DType::Bool,
        DType::Fp8E4M3,
        DType::Fp8E5M2,
        DType::Void,
    ];

    /// The manifest spelling: `bf16`.
    pub const fn name(self) -> &'static str {
        match self {
            DType::Bf16 => "bf16",
            DType::F32 => "f32",
            DType::U32 => "u32",
            DType::F16 => "f16",
            DType::F64 => "f64",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I16 => "i16",
            DType::U16 => "u16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U64 => "u64",
            DType::Bool => "bool",
            DType::Fp8E4M3 => "fp8e4m3",
            DType::Fp8E5M2 => "fp8e5m2",
            DType::Void => "void",
        }
    }

    /// The C types a kernel may declare it with, as the compiler sees them (typedefs resolved),
    /// the canonical one first.
    ///
    /// The rule for integers: a manifest integer type is a width and a signedness, and matches
    /// every C integer type of that width and signedness on the targets kda builds for (LP64:
    /// 64-bit Linux, where `long` is 64 bits). So `u64` is `unsigned long long` and `unsigned
    /// long` (`size_t`, `uint64_t`), `i64` is `long long` and `long` (`int64_t`, `ptrdiff_t`).
    /// Plain `char`, whose signedness is the platform's, is neither `i8` nor `u8`. The nvcc
    /// check, the emulator's check and the CUDA backend's layout check apply this one list.
    pub const fn c_types(self) -> &'static [&'static str] {
        match self {
            DType::Bf16 => &["__nv_bfloat16"],
            DType::F32 => &["float"],
            DType::U32 => &["unsigned int"],
            DType::F16 => &["__half"],
            DType::F64 => &["double"],
            DType::I8 => &["signed char"],
            DType::U8 => &["unsigned char"],
            DType::I16 => &["short"],
            DType::U16 => &["unsigned short"],
            DType::I32 => &["int"],
            DType::I64 => &["long long", "long"],
            DType::U64 => &["unsigned long long", "unsigned long"],
            DType::Bool => &["bool"],
            DType::Fp8E4M3 => &["__nv_fp8_e4m3"],
            DType::Fp8E5M2 => &["__nv_fp8_e5m2"],
            DType::Void => &["void"],
        }
    }

    /// The canonical C type: `__nv_bfloat16`.
    pub const fn c_type(self) -> &'static str {
        self.c_types()[0]
    }

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::I8 | DType::U8 | DType::Bool | DType::Fp8E4M3 | DType::Fp8E5M2 | DType::Void => 1,
            DType::Bf16 | DType::F16 | DType::I16 | DType::U16 => 2,
            DType::F32 | DType::U32 | DType::I32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
        }
    }

    /// The bytes of `len` elements, or `None` where that overflows `usize`.
    pub const fn bytes(self, len: usize) -> Option<usize> {
        len.checked_mul(self.size())
    }

    /// Whether its values are integers (`bool` included), which an extent or a requirement may
    /// use as a scalar.
    pub const fn is_integer(self) -> bool {
        !matches!(
            self,
            DType::Bf16
                | DType::F16
                | DType::F32
                | DType::F64
                | DType::Fp8E4M3
                | DType::Fp8E5M2
                | DType::Void
        )
    }

    /// Whether its integers are signed.
    pub const fn is_signed(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64)
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
