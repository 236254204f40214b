//! The launch contract of an entry as runtime data: its `params` and `requires` become a
//! `::kda_runtime::Signature` whose extents and requirements are postfix programs.

use proc_macro2::TokenStream;
use quote::quote;

use crate::manifest::{
    BinaryOp, CompareOp, Comparison, ElementType, Entry, Expr, LaunchDim, Param, ParamType, Requirement,
    ScalarType,
};

/// `Some(&Signature { .. })` for an entry with `params`, else `None`. An error where a parameter
/// index does not fit the runtime's `u16` scalar references.
pub(super) fn signature(entry: &Entry) -> Result<TokenStream, String> {
    let Some(params) = &entry.params else {
        return Ok(quote!(::core::option::Option::None));
    };
    if params.len() > usize::from(u16::MAX) {
        return Err(format!("`{}` has {} parameters; a kernel takes at most 65,535", entry.field, params.len()));
    }
    let params = params.iter().map(param);
    let requires = entry.requires.iter().map(requirement);
    Ok(quote! {
        ::core::option::Option::Some(&::kda_runtime::Signature {
            params: &[#(#params),*],
            requires: &[#(#requires),*],
        })
    })
}

fn param(param: &Param) -> TokenStream {
    let name = &param.name;
    let kind = match &param.ty {
        ParamType::Buffer { element, writable, extent, extent_text } => {
            let dtype = match element {
                ElementType::Bf16 => quote!(Bf16),
                ElementType::F32 => quote!(F32),
                ElementType::U32 => quote!(U32),
            };
            let access = if *writable { quote!(Write) } else { quote!(Read) };
            let mut program = Vec::new();
            postfix(extent, &mut program);
            quote! {
                ::kda_runtime::signature::ParamKind::Buffer {
                    dtype: ::kda_runtime::DType::#dtype,
                    access: ::kda_runtime::signature::Access::#access,
                    extent: ::kda_runtime::signature::Extent { text: #extent_text, program: &[#(#program),*] },
                }
            }
        }
        ParamType::Scalar(scalar) => {
            let kind = scalar_kind(*scalar);
            quote!(::kda_runtime::signature::ParamKind::Scalar(::kda_runtime::signature::ScalarKind::#kind))
        }
    };
    quote!(::kda_runtime::signature::KernelParam { name: #name, kind: #kind })
}

/// The runtime's name of a scalar type.
pub(super) fn scalar_kind(scalar: ScalarType) -> TokenStream {
    match scalar {
        ScalarType::U32 => quote!(U32),
        ScalarType::I32 => quote!(I32),
        ScalarType::U64 => quote!(U64),
        ScalarType::F32 => quote!(F32),
    }
}

fn requirement(requirement: &Requirement) -> TokenStream {
    let mut program = Vec::new();
    for (i, Comparison { lhs, op, rhs }) in requirement.any_of.iter().enumerate() {
        postfix(lhs, &mut program);
        postfix(rhs, &mut program);
        program.push(op_token(match op {
            CompareOp::Eq => quote!(Eq),
            CompareOp::Ne => quote!(Ne),
            CompareOp::Lt => quote!(Lt),
            CompareOp::Le => quote!(Le),
            CompareOp::Gt => quote!(Gt),
            CompareOp::Ge => quote!(Ge),
        }));
        if i > 0 {
            program.push(op_token(quote!(Or)));
        }
    }
    let text = &requirement.text;
    quote!(::kda_runtime::signature::Requirement { text: #text, program: &[#(#program),*] })
}

fn op_token(op: TokenStream) -> TokenStream {
    quote!(::kda_runtime::signature::Op::#op)
}

/// Appends `expr` in postfix order; `[defines]` become their values.
fn postfix(expr: &Expr, program: &mut Vec<TokenStream>) {
    match expr {
        Expr::Literal(value) | Expr::Define { value, .. } => program.push(op_token(quote!(Literal(#value)))),
        Expr::Scalar { index, .. } => {
            // `signature` checked that every index fits.
            let index = *index as u16;
            program.push(op_token(quote!(Scalar(#index))));
        }
        Expr::Launch(dim) => {
            let dim = match dim {
                LaunchDim::GridX => quote!(GridX),
                LaunchDim::GridY => quote!(GridY),
                LaunchDim::GridZ => quote!(GridZ),
                LaunchDim::BlockX => quote!(BlockX),
                LaunchDim::BlockY => quote!(BlockY),
                LaunchDim::BlockZ => quote!(BlockZ),
            };
            program.push(op_token(quote!(Launch(::kda_runtime::signature::LaunchDim::#dim))));
        }
        Expr::Binary { op, lhs, rhs } => {
            postfix(lhs, program);
            postfix(rhs, program);
            program.push(op_token(match op {
                BinaryOp::Add => quote!(Add),
                BinaryOp::Sub => quote!(Sub),
                BinaryOp::Mul => quote!(Mul),
                BinaryOp::Rem => quote!(Rem),
                BinaryOp::Cdiv => quote!(Cdiv),
            }));
        }
    }
}
