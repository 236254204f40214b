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
//! - [`LaunchDim`]: a dimension of the launch geometry a requirement can test (`block.x`).
//! - [`Op`]: one instruction of the postfix programs extents and requirements compile to.

#![no_std]
#![forbid(unsafe_code)]

mod dtype;
mod launch;
mod op;
mod scalar;

pub use dtype::DType;
pub use launch::LaunchDim;
pub use op::Op;
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
        }
    }

    fn position_of_scalar(kind: ScalarKind) -> usize {
        match kind {
            ScalarKind::U32 => 0,
            ScalarKind::I32 => 1,
            ScalarKind::U64 => 2,
            ScalarKind::F32 => 3,
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

    #[test]
    fn every_variant_is_in_its_table_once_and_found_by_its_name() {
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
        assert_eq!((DType::from_name("f16"), ScalarKind::from_name("bf16")), (None, None));
        assert_eq!(LaunchDim::from_name("block.w"), None);
    }

    #[test]
    fn the_c_types_are_the_ones_cuda_declares() {
        let c_types = DType::ALL.map(DType::c_type);
        assert_eq!(c_types, ["__nv_bfloat16", "float", "unsigned int"]);
        let c_types = ScalarKind::ALL.map(ScalarKind::c_type);
        assert_eq!(c_types, ["unsigned int", "int", "unsigned long long", "float"]);
        // A type that is both an element and a scalar is one C type, of one size.
        for dtype in DType::ALL {
            if let Some(kind) = ScalarKind::from_name(dtype.name()) {
                assert_eq!((dtype.c_type(), dtype.size()), (kind.c_type(), kind.size()));
            }
        }
        assert_eq!(DType::Bf16.bytes(usize::MAX), None);
        assert_eq!(DType::F32.bytes(3), Some(12));
    }
}
