//! A scalar argument's value, of any of the contract's scalar kinds: its kind and its bits, so
//! that every backend passes every kind the same way and a new kind is a row of kda-types' table
//! and an impl of [`ScalarValue`] here.

use std::fmt;

use half::{bf16, f16};

use crate::signature::ScalarKind;

/// A scalar argument: its kind and the little-endian bytes of its value, zero-extended to 64 bits
/// (so the first [`ScalarKind::size`] bytes of [`Scalar::to_le_bytes`] are the C value).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Scalar {
    kind: ScalarKind,
    bits: u64,
}

/// A Rust type that is one of the scalar kinds: `u32` is `u32`, `half::f16` is `f16`, `bool` is
/// `bool`.
pub trait ScalarValue: Copy + sealed::Sealed {
    /// Its kind.
    const KIND: ScalarKind;
    /// Its bits, zero-extended.
    fn to_bits(self) -> u64;
    /// The value of `bits` (the low [`ScalarKind::size`] bytes).
    fn from_bits(bits: u64) -> Self;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! scalar_values {
    ($($ty:ty => $kind:ident, $to:expr, $from:expr;)*) => {$(
        impl sealed::Sealed for $ty {}
        impl ScalarValue for $ty {
            const KIND: ScalarKind = ScalarKind::$kind;
            fn to_bits(self) -> u64 {
                let to: fn($ty) -> u64 = $to;
                to(self)
            }
            fn from_bits(bits: u64) -> Self {
                let from: fn(u64) -> $ty = $from;
                from(bits)
            }
        }
    )*};
}

// Each `from` keeps the low bytes of its kind's size: the cast truncates by design.
scalar_values! {
    u8 => U8, u64::from, |bits| bits as u8;
    i8 => I8, |value| u64::from(value.cast_unsigned()), |bits| (bits as u8).cast_signed();
    u16 => U16, u64::from, |bits| bits as u16;
    i16 => I16, |value| u64::from(value.cast_unsigned()), |bits| (bits as u16).cast_signed();
    u32 => U32, u64::from, |bits| bits as u32;
    i32 => I32, |value| u64::from(value.cast_unsigned()), |bits| (bits as u32).cast_signed();
    u64 => U64, |value| value, |bits| bits;
    i64 => I64, i64::cast_unsigned, u64::cast_signed;
    f16 => F16, |value| u64::from(value.to_bits()), |bits| f16::from_bits(bits as u16);
    bf16 => Bf16, |value| u64::from(value.to_bits()), |bits| bf16::from_bits(bits as u16);
    f32 => F32, |value| u64::from(value.to_bits()), |bits| f32::from_bits(bits as u32);
    f64 => F64, f64::to_bits, f64::from_bits;
    bool => Bool, u64::from, |bits| bits as u8 != 0;
}

impl Scalar {
    /// The scalar `value`, of its type's kind.
    pub fn new<T: ScalarValue>(value: T) -> Self {
        Self { kind: T::KIND, bits: value.to_bits() }
    }

    /// Its kind.
    pub const fn kind(self) -> ScalarKind {
        self.kind
    }

    /// Its value's bytes, little-endian, zero-extended to 8: what a kernel's parameter buffer
    /// holds in its first [`ScalarKind::size`] bytes.
    pub const fn to_le_bytes(self) -> [u8; 8] {
        self.bits.to_le_bytes()
    }

    /// Its bits, zero-extended to 64.
    pub const fn bits(self) -> u64 {
        self.bits
    }

    /// The value as a `T`, if it is of `T`'s kind.
    pub fn get<T: ScalarValue>(self) -> Option<T> {
        (self.kind == T::KIND).then(|| T::from_bits(self.bits))
    }

    /// `value` as a scalar of the integer kind `kind`, if the kind holds it (`bool`: 0 or 1).
    pub fn from_size(kind: ScalarKind, value: u64) -> Option<Scalar> {
        let fits = match kind {
            ScalarKind::Bool => value <= 1,
            kind if kind.is_integer() => {
                let bits = 8 * kind.size() as u32 - u32::from(kind.is_signed());
                bits >= 64 || value < 1 << bits
            }
            _ => false,
        };
        fits.then_some(Scalar { kind, bits: value })
    }

    /// `value` rounded to the float kind `kind` (`None` for an integer kind).
    pub fn from_f64(kind: ScalarKind, value: f64) -> Option<Scalar> {
        Some(match kind {
            ScalarKind::F16 => Scalar::new(f16::from_f64(value)),
            ScalarKind::Bf16 => Scalar::new(bf16::from_f64(value)),
            ScalarKind::F32 => Scalar::new(value as f32),
            ScalarKind::F64 => Scalar::new(value),
            _ => return None,
        })
    }

    /// An integer scalar's value as a size (what an extent computes with): `None` for a float,
    /// `Some(Err(value))` for a negative one.
    pub fn as_size(self) -> Option<Result<u64, i64>> {
        if !self.kind.is_integer() {
            return None;
        }
        if !self.kind.is_signed() {
            return Some(Ok(self.bits));
        }
        // Sign-extend from the kind's width.
        let shift = 64 - 8 * self.kind.size() as u32;
        let value = (self.bits << shift).cast_signed() >> shift;
        Some(u64::try_from(value).map_err(|_| value))
    }
}

impl fmt::Display for Scalar {
    /// The value as Rust prints its type.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn show<T: ScalarValue + fmt::Display>(scalar: Scalar, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            T::from_bits(scalar.bits).fmt(f)
        }
        match self.kind {
            ScalarKind::U8 => show::<u8>(*self, f),
            ScalarKind::I8 => show::<i8>(*self, f),
            ScalarKind::U16 => show::<u16>(*self, f),
            ScalarKind::I16 => show::<i16>(*self, f),
            ScalarKind::U32 => show::<u32>(*self, f),
            ScalarKind::I32 => show::<i32>(*self, f),
            ScalarKind::U64 => show::<u64>(*self, f),
            ScalarKind::I64 => show::<i64>(*self, f),
            ScalarKind::F16 => show::<f16>(*self, f),
            ScalarKind::Bf16 => show::<bf16>(*self, f),
            ScalarKind::F32 => show::<f32>(*self, f),
            ScalarKind::F64 => show::<f64>(*self, f),
            ScalarKind::Bool => show::<bool>(*self, f),
        }
    }
}

impl fmt::Debug for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({self})", self.kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_keeps_its_value_in_its_low_bytes_little_endian() {
        assert_eq!(Scalar::new(-2i8).to_le_bytes(), [0xfe, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(Scalar::new(-2i32).to_le_bytes(), [0xfe, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        assert_eq!(Scalar::new(1.0f32).to_le_bytes()[..4], 1.0f32.to_le_bytes());
        assert_eq!(Scalar::new(f16::ONE).to_le_bytes()[..2], [0x00, 0x3c]);
        assert_eq!(Scalar::new(true).to_le_bytes(), [1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(Scalar::new(-1i64).bits(), u64::MAX);
        assert_eq!(Scalar::new(7u16).get::<u16>(), Some(7));
        assert_eq!(Scalar::new(7u16).get::<u32>(), None);
        assert_eq!(Scalar::new(-3i16).get::<i16>(), Some(-3));
        assert_eq!(Scalar::new(2.5f64).get::<f64>(), Some(2.5));
    }

    #[test]
    fn integers_are_sizes_and_negatives_and_floats_are_not() {
        assert_eq!(Scalar::new(300u16).as_size(), Some(Ok(300)));
        assert_eq!(Scalar::new(-5i8).as_size(), Some(Err(-5)));
        assert_eq!(Scalar::new(i64::MAX).as_size(), Some(Ok(i64::MAX as u64)));
        assert_eq!(Scalar::new(u64::MAX).as_size(), Some(Ok(u64::MAX)));
        assert_eq!(Scalar::new(true).as_size(), Some(Ok(1)));
        assert_eq!(Scalar::new(1.0f32).as_size(), None);
        assert_eq!(Scalar::new(bf16::ONE).as_size(), None);
    }

    #[test]
    fn sizes_and_floats_become_scalars_of_kinds_that_hold_them() {
        assert_eq!(Scalar::from_size(ScalarKind::U8, 255), Some(Scalar::new(255u8)));
        assert_eq!(Scalar::from_size(ScalarKind::U8, 256), None);
        assert_eq!(Scalar::from_size(ScalarKind::I8, 127), Some(Scalar::new(127i8)));
        assert_eq!(Scalar::from_size(ScalarKind::I8, 128), None);
        assert_eq!(Scalar::from_size(ScalarKind::U64, u64::MAX), Some(Scalar::new(u64::MAX)));
        assert_eq!(Scalar::from_size(ScalarKind::I64, u64::MAX), None);
        assert_eq!(Scalar::from_size(ScalarKind::Bool, 1), Some(Scalar::new(true)));
        assert_eq!(Scalar::from_size(ScalarKind::Bool, 2), None);
        assert_eq!(Scalar::from_size(ScalarKind::F32, 1), None);
        assert_eq!(Scalar::from_f64(ScalarKind::F16, 0.5), Some(Scalar::new(f16::from_f32(0.5))));
        assert_eq!(Scalar::from_f64(ScalarKind::U32, 0.5), None);
    }

    #[test]
    fn a_scalar_prints_as_its_value() {
        assert_eq!(Scalar::new(-7i32).to_string(), "-7");
        assert_eq!(Scalar::new(0.5f32).to_string(), "0.5");
        assert_eq!(format!("{:?}", Scalar::new(3u64)), "u64(3)");
    }
}
