//! The vocabulary of kda's launch contract, defined once for every crate that speaks it: the
//! manifest's parser (kda-build), the code the derive generates and the launch check
//! (kda-runtime), the nvcc proof and the emulator.
//!
//! Each type is one table: its manifest spelling, its C type as the kernel's code declares it,
//! and its size. A new type is one row here, and every front end that reads the manifest, proves
//! it against nvcc or checks a launch sees it the same way.
//!
//! - [`DType`]: the element type of a buffer parameter (`const bf16 x[n]`).
//! - [`ScalarKind`]: the type of a scalar parameter (`u32 n`).
//! - [`ParamCType`]: a parameter's type as the kernel declares it (`const bf16*`, `u32`), spelled
//!   once for the build's proof and the emulator's check.
//! - [`LaunchDim`]: a dimension of the launch geometry a requirement can test (`block.x`).
//! - [`Op`]: one instruction of the postfix programs extents and requirements compile to.
//! - [`Sanitizer`]: a sanitizer the emulated kernels can be built with, which the build records
//!   and the runtime reads.

#![no_std]
#![forbid(unsafe_code)]

mod dtype;
mod launch;
mod op;
mod param_c_type;
mod sanitizer;
mod scalar;

pub use dtype::DType;
pub use launch::LaunchDim;
pub use op::Op;
pub use param_c_type::ParamCType;
pub use sanitizer::Sanitizer;
pub use scalar::ScalarKind;

#[cfg(test)]
mod tests {
    use super::*;

    /// The position each variant must have in its `ALL`: a match the compiler checks is
    /// exhaustive, so a new variant fails here until it is listed.
    fn position_of_dtype(dtype: DType) -> usize {
        match dtype {
            DType::Bf16 => 0,
            DType::F32 => 1,
            DType::U32 => 2,
            DType::F16 => 3,
            DType::F64 => 4,
            DType::I8 => 5,
            DType::U8 => 6,
            DType::I16 => 7,
            DType::U16 => 8,
            DType::I32 => 9,
            DType::I64 => 10,
            DType::U64 => 11,
            DType::Bool => 12,
            DType::Fp8E4M3 => 13,
            DType::Fp8E5M2 => 14,
            DType::Void => 15,
        }
    }

    fn position_of_scalar(kind: ScalarKind) -> usize {
        match kind {
            ScalarKind::U32 => 0,
            ScalarKind::I32 => 1,
            ScalarKind::U64 => 2,
            ScalarKind::F32 => 3,
            ScalarKind::F16 => 4,
            ScalarKind::Bf16 => 5,
            ScalarKind::F64 => 6,
            ScalarKind::I8 => 7,
            ScalarKind::U8 => 8,
            ScalarKind::I16 => 9,
            ScalarKind::U16 => 10,
            ScalarKind::I64 => 11,
            ScalarKind::Bool => 12,
        }
    }

    fn position_of_dim(dim: LaunchDim) -> usize {
        match dim {
            LaunchDim::GridX => 0,
            LaunchDim::GridY => 1,
            LaunchDim::GridZ => 2,
            LaunchDim::BlockX => 3,
            LaunchDim::BlockY => 4,
            LaunchDim::BlockZ => 5,
            LaunchDim::SharedBytes => 6,
        }
    }

    fn position_of_sanitizer(sanitizer: Sanitizer) -> usize {
        match sanitizer {
            Sanitizer::Address => 0,
            Sanitizer::Thread => 1,
        }
    }

    #[test]
    fn every_variant_is_in_its_table_once_and_found_by_its_name() {
        for (index, sanitizer) in Sanitizer::ALL.into_iter().enumerate() {
            assert_eq!(position_of_sanitizer(sanitizer), index);
            assert_eq!(Sanitizer::from_name(sanitizer.name()), Some(sanitizer));
        }
        assert_eq!(Sanitizer::from_name("Address"), None);
        for (index, dtype) in DType::ALL.into_iter().enumerate() {
            assert_eq!(position_of_dtype(dtype), index);
            assert_eq!(DType::from_name(dtype.name()), Some(dtype));
        }
        for (index, kind) in ScalarKind::ALL.into_iter().enumerate() {
            assert_eq!(position_of_scalar(kind), index);
            assert_eq!(ScalarKind::from_name(kind.name()), Some(kind));
        }
        for (index, dim) in LaunchDim::ALL.into_iter().enumerate() {
            assert_eq!(position_of_dim(dim), index);
            assert_eq!(LaunchDim::from_name(dim.name()), Some(dim));
        }
        assert_eq!((DType::from_name("f8"), ScalarKind::from_name("fp8e4m3")), (None, None));
        assert_eq!(LaunchDim::from_name("block.w"), None);
    }

    #[test]
    fn the_c_types_are_the_ones_cuda_declares() {
        let c_types = DType::ALL.map(DType::c_type);
        assert_eq!(
            c_types,
            [
                "__nv_bfloat16",
                "float",
                "unsigned int",
                "__half",
                "double",
                "signed char",
                "unsigned char",
                "short",
                "unsigned short",
                "int",
                "long long",
                "unsigned long long",
                "bool",
                "__nv_fp8_e4m3",
                "__nv_fp8_e5m2",
                "void",
            ]
        );
        // The LP64 rule: the 64-bit integers also match `long`, whatever their typedef.
        assert_eq!(DType::U64.c_types(), ["unsigned long long", "unsigned long"]);
        assert_eq!(DType::I64.c_types(), ["long long", "long"]);
        // No C type is two manifest types.
        for (i, a) in DType::ALL.into_iter().enumerate() {
            for b in &DType::ALL[i + 1..] {
                assert!(a.c_types().iter().all(|c| !b.c_types().contains(c)), "{a} and {b}");
            }
        }
        // A scalar is its element type's C types and size.
        for kind in ScalarKind::ALL {
            assert_eq!(DType::from_name(kind.name()), Some(kind.dtype()));
            assert_eq!((kind.c_types(), kind.size()), (kind.dtype().c_types(), kind.dtype().size()));
        }
        let sizes = DType::ALL.map(DType::size);
        assert_eq!(sizes, [2, 4, 4, 2, 8, 1, 1, 2, 2, 4, 8, 8, 1, 1, 1, 1]);
        assert_eq!(DType::Bf16.bytes(usize::MAX), None);
        assert_eq!(DType::F32.bytes(3), Some(12));
        let integers: [bool; 16] = DType::ALL.map(DType::is_integer);
        assert_eq!(
            integers,
            [
                false, false, true, false, false, true, true, true, true, true, true, true, true, false,
                false, false
            ]
        );
        assert!(ScalarKind::I64.is_signed() && !ScalarKind::U64.is_signed() && !ScalarKind::Bool.is_signed());
    }
}
