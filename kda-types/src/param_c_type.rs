//! A kernel parameter's type as its C declaration has it, and the two ways kda spells it: in the
//! manifest's words (`const bf16*`, for messages) and as the compiler sees it (`const
//! __nv_bfloat16*`, for the checks nvcc and the emulator's compiler run).

use core::fmt;

use crate::{DType, ScalarKind};

/// The type of one kernel parameter as the kernel declares it, without its extent: a pointer to
/// elements (`const` where the kernel only reads them) or a value passed by copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamCType {
    /// `const T*` or `T*`.
    Pointer {
        /// `T`.
        element: DType,
        /// No `const`: the kernel writes through it.
        writable: bool,
    },
    /// `T`, by copy.
    Scalar(ScalarKind),
}

impl ParamCType {
    /// The manifest's spelling: `const bf16*`, `f32*`, `u32`.
    pub fn manifest_spelling(self) -> impl fmt::Display {
        Spelled { ty: self, element: DType::name }
    }

    /// The canonical C type: `const __nv_bfloat16*`, `float*`, `unsigned int`.
    pub fn c_spelling(self) -> impl fmt::Display {
        Spelled { ty: self, element: DType::c_type }
    }
}

/// A [`ParamCType`] written with `element` naming its element type: one shape for both spellings.
struct Spelled {
    ty: ParamCType,
    element: fn(DType) -> &'static str,
}

impl fmt::Display for Spelled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ty {
            ParamCType::Pointer { element, writable } => {
                write!(f, "{}{}*", if writable { "" } else { "const " }, (self.element)(element))
            }
            ParamCType::Scalar(kind) => f.write_str((self.element)(kind.dtype())),
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use std::string::ToString;

    use super::*;

    #[test]
    fn both_spellings_mark_a_read_only_pointer_const_and_name_a_scalar_alone() {
        let read = ParamCType::Pointer { element: DType::Bf16, writable: false };
        let written = ParamCType::Pointer { element: DType::U64, writable: true };
        let scalar = ParamCType::Scalar(ScalarKind::U32);
        let manifest = [read, written, scalar].map(|ty| ty.manifest_spelling().to_string());
        assert_eq!(manifest, ["const bf16*", "u64*", "u32"]);
        let c = [read, written, scalar].map(|ty| ty.c_spelling().to_string());
        assert_eq!(c, ["const __nv_bfloat16*", "unsigned long long*", "unsigned int"]);
    }
}
