//! The launch contract of an entry as runtime data: its `params` and `requires` become a
//! `::kda_runtime::Signature` whose extents and requirements are postfix programs.
//!
//! The tokens name the runtime's items by the short names [`prelude`] imports into the block that
//! holds the entries: a large table's signatures are most of its expansion, and every token costs
//! expansion time.

use proc_macro2::{Ident, Span, TokenStream};
use quote::quote;

use super::tokens::{bracketed, comma_separated};

use crate::manifest::{Entry, Op, Param, ParamType, Requirement};

/// The imports the signature tokens rely on, for the block expression around the entries (no
/// token of the manifest's own reaches that block but string literals).
pub(super) fn prelude() -> TokenStream {
    quote! {
        use ::kda_runtime::signature::{
            Access::{Read, Write}, KernelParam as P, LaunchDim::*, Op::*, Requirement as R, ScalarKind as S,
        };
        use ::kda_runtime::DType as D;
    }
}

/// `Some(&Signature { .. })` for an entry with `params`, else `None`. An error where a parameter
/// index does not fit the runtime's `u16` scalar references.
pub(super) fn tokens(entry: &Entry) -> Result<TokenStream, String> {
    let Some(params) = &entry.params else {
        return Ok(quote!(::core::option::Option::None));
    };
    if params.len() > usize::from(u16::MAX) {
        return Err(format!(
            "`{}` has {} parameters; a kernel takes at most 65,535",
            entry.field,
            params.len()
        ));
    }
    let params = bracketed(comma_separated(params.iter().map(param)));
    let requires = bracketed(comma_separated(entry.requires.iter().map(requirement)));
    Ok(
        quote!(::core::option::Option::Some(&::kda_runtime::Signature { params: &#params, requires: &#requires })),
    )
}

fn param(param: &Param) -> TokenStream {
    let name = &param.name;
    match &param.ty {
        ParamType::Buffer { element, writable, extent, extent_text, nullable } => {
            let dtype = variant(element);
            let access = if *writable { quote!(Write) } else { quote!(Read) };
            let program = program(&extent.program());
            let trusting = param.safety.as_ref().map(|condition| quote!(.trusting(#condition)));
            let nullable = nullable.then(|| quote!(.nullable()));
            quote!(P::buffer(#name, D::#dtype, #access, #extent_text, &#program) #trusting #nullable)
        }
        ParamType::Scalar(scalar) => {
            let kind = variant(scalar);
            quote!(P::scalar(#name, S::#kind))
        }
    }
}

/// The `&[::kda_runtime::BuiltEntry]` of one module's manifest `entries`, as the build step embeds
/// it beside the module's image: each entry's name and the signature the derive gives its table,
/// spelled by the same tokens, so a table's signatures equal the build's exactly. An entry whose
/// signature the derive refuses (it reports why) is embedded without one, so no checked lookup of
/// it resolves.
#[cfg(feature = "cuda")]
pub(crate) fn built_entries<'a>(entries: impl IntoIterator<Item = (&'a Entry, &'a str)>) -> TokenStream {
    let rows = entries.into_iter().map(|(entry, symbol)| {
        let name = &entry.entry;
        let signature = tokens(entry).unwrap_or_else(|_| quote!(::core::option::Option::None));
        quote!(::kda_runtime::BuiltEntry { entry: #name, symbol: #symbol, signature: #signature })
    });
    let prelude = prelude();
    let rows = bracketed(comma_separated(rows));
    quote!({ #prelude &#rows })
}

/// The variant of a kda-types enum (`DType`, `ScalarKind`, `LaunchDim`) as a token: the runtime
/// re-exports those very enums, so the manifest's value and the runtime's are spelled alike.
fn variant(value: &impl std::fmt::Debug) -> Ident {
    Ident::new(&format!("{value:?}"), Span::call_site())
}

fn requirement(requirement: &Requirement) -> TokenStream {
    let text = &requirement.text;
    let program = program(&requirement.program());
    quote!(R::new(#text, &#program))
}

/// A program as an array of `Op`s, each by its short name (see [`prelude`]).
fn program(program: &[Op]) -> proc_macro2::Group {
    bracketed(comma_separated(program.iter().map(|op| match op {
        Op::Literal(value) => quote!(Literal(#value)),
        Op::Scalar(index) => quote!(Scalar(#index)),
        Op::Strided(index) => quote!(Strided(#index)),
        Op::Launch(dim) => {
            let dim = variant(dim);
            quote!(Launch(#dim))
        }
        op => {
            let op = variant(op);
            quote!(#op)
        }
    })))
}
