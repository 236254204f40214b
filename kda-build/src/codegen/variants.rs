//! A variant group's generic launcher: for an entry whose `variants` have one type axis
//! (`affine` over `T = ["f32", "f16", "bf16"]`), `launch_affine::<T>` launches the variant of
//! element type `T`, through an argument struct `affine` whose fields of type `T` are `T`. A
//! sealed trait `affine_type` is implemented for the declared types only, so `launch_affine::<i8>`
//! does not compile where i8 is not declared. Each variant keeps its own handle and launcher.

use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote};

use super::launcher::{Launcher, borrows, field_doc, field_type, launcher};
use super::tokens::{braced, concat};
use crate::manifest::{AxisValue, DType, Entry, Param, ParamType, Table};

/// One group: its key, its type axis, and each variant's entry index, entry and type.
struct Group<'a> {
    name: &'a str,
    axis: &'a str,
    variants: Vec<(usize, &'a Entry, DType)>,
    params: &'a [Param],
}

/// The items of every eligible group (traits, impls and argument structs, for the arguments
/// module `module`) and their launcher methods (for the handles struct `kernels`).
pub(super) fn generic_launchers(
    module: &Ident,
    kernels: &Ident,
    table: &Table,
) -> (TokenStream, TokenStream) {
    let groups = groups(table);
    if groups.is_empty() {
        return (TokenStream::new(), TokenStream::new());
    }
    let seals = groups.iter().map(|group| {
        let seal = Ident::new(group.name, Span::call_site());
        quote!(pub trait #seal {})
    });
    let sealed = quote! {
        /// What seals each variant group's element-type trait: only the declared types have it.
        #[allow(non_camel_case_types)]
        mod sealed { #(#seals)* }
    };
    let (items, methods): (Vec<_>, Vec<_>) =
        groups.iter().map(|group| (items(group, kernels, &table.name), method(group, module))).unzip();
    (concat(std::iter::once(sealed).chain(items)), concat(methods))
}

/// The groups with one type axis whose variants all have `params`, in the order of their first
/// variant.
fn groups(table: &Table) -> Vec<Group<'_>> {
    let mut groups: Vec<Group<'_>> = Vec::new();
    let mut broken: Vec<&str> = Vec::new();
    for (index, entry) in table.entries.iter().enumerate() {
        let Some(variant) = &entry.variant else { continue };
        let group = variant.group.as_str();
        let eligible = match (&variant.axes[..], &entry.params) {
            ([(axis, AxisValue::Type(dtype))], Some(params)) => Some((axis.as_str(), *dtype, params)),
            _ => None,
        };
        match (eligible, groups.iter_mut().find(|g| g.name == group)) {
            _ if broken.contains(&group) => {}
            (Some((_, dtype, _)), Some(found)) => found.variants.push((index, entry, dtype)),
            (Some((axis, dtype, params)), None) => {
                groups.push(Group { name: group, axis, variants: vec![(index, entry, dtype)], params })
            }
            (None, _) => {
                broken.push(group);
                groups.retain(|g| g.name != group);
            }
        }
    }
    groups
}

/// The Rust type a launcher takes for an element type: what kda-runtime names it.
fn rust_type(dtype: DType) -> TokenStream {
    let name = Ident::new(dtype.name(), Span::call_site());
    match dtype {
        DType::Bf16 | DType::F16 => quote!(::kda_runtime::#name),
        DType::Fp8E4M3 => quote!(::kda_runtime::Fp8E4M3),
        DType::Fp8E5M2 => quote!(::kda_runtime::Fp8E5M2),
        _ => quote!(#name),
    }
}

/// Whether a parameter is a scalar of the group's type axis: a field of type `T`.
fn generic_scalar(param: &Param, axis: &str) -> bool {
    matches!(param.ty, ParamType::Scalar(_)) && param.type_axis.as_deref() == Some(axis)
}

fn items(group: &Group<'_>, kernels: &Ident, table: &str) -> TokenStream {
    let name = Ident::new(group.name, Span::call_site());
    let trait_name = format_ident!("{}_type", group.name);
    let types: Vec<&str> = group.variants.iter().map(|(_, _, dtype)| dtype.name()).collect();
    let takes_scalar = group.params.iter().any(|param| generic_scalar(param, group.axis));
    // A scalar of type `T` is passed by value: `T` must be a scalar kind.
    let scalar_bound = takes_scalar.then(|| quote!(+ ::kda_runtime::ScalarValue));
    let trait_doc = format!(
        " The element types `[{table}].{}` is instantiated for ({}): `launch_{}::<T>` takes any of them, \
         and no other.",
        group.name,
        types.join(", "),
        group.name
    );
    let impls = group.variants.iter().map(|(index, entry, dtype)| {
        let ty = rust_type(*dtype);
        let field = Ident::new(&entry.field, Span::call_site());
        let index = proc_macro2::Literal::usize_unsuffixed(*index);
        let handle = if entry.optional {
            quote! {
                kernels.#field.ok_or_else(|| ::kda_runtime::BackendError::Absent {
                    entry: ::std::boxed::Box::new(super::#kernels::ENTRIES[#index]),
                })
            }
        } else {
            quote!(::core::result::Result::Ok(kernels.#field))
        };
        quote! {
            impl sealed::#name for #ty {}
            impl #trait_name for #ty {
                const ENTRY: &'static ::kda_runtime::KernelEntry = &super::#kernels::ENTRIES[#index];
                fn handle(
                    kernels: &super::#kernels,
                ) -> ::core::result::Result<::kda_runtime::KernelHandle, ::kda_runtime::BackendError> {
                    #handle
                }
            }
        }
    });
    let fields = braced(concat(group.params.iter().map(|param| {
        let field = Ident::new(&param.name, Span::call_site());
        let doc = field_doc(param);
        let ty = if generic_scalar(param, group.axis) { quote!(T) } else { field_type(param) };
        quote! { #[doc = #doc] pub #field: #ty, }
    })));
    let generics = struct_generics(group);
    let struct_doc = format!(
        " The arguments of any variant of `[{table}].{}`, in the kernel's order, for `launch_{}`.",
        group.name, group.name
    );
    quote! {
        #[doc = #trait_doc]
        #[allow(non_camel_case_types)]
        pub trait #trait_name: sealed::#name #scalar_bound {
            /// The entry of this type's variant.
            const ENTRY: &'static ::kda_runtime::KernelEntry;
            /// This type's variant in a resolved table; an `Err` where the target lacks it.
            fn handle(
                kernels: &super::#kernels,
            ) -> ::core::result::Result<::kda_runtime::KernelHandle, ::kda_runtime::BackendError>;
        }
        #(#impls)*
        #[doc = #struct_doc]
        #[allow(non_camel_case_types)]
        #[derive(Debug)]
        pub struct #name #generics #fields
    }
}

/// The argument struct's generics: `'a` where it borrows, `T` where a scalar is of type `T`.
fn struct_generics(group: &Group<'_>) -> TokenStream {
    let lifetime = borrows(group.params).then(|| quote!('a));
    let ty = group.params.iter().any(|param| generic_scalar(param, group.axis)).then(|| quote!(T));
    match (lifetime, ty) {
        (None, None) => TokenStream::new(),
        (lifetime, ty) => {
            let parts = lifetime.into_iter().chain(ty);
            quote!(<#(#parts),*>)
        }
    }
}

fn method(group: &Group<'_>, module: &Ident) -> TokenStream {
    let name = Ident::new(group.name, Span::call_site());
    let trait_name = format_ident!("{}_type", group.name);
    let lifetime = borrows(group.params).then(|| quote!('_));
    let ty = group.params.iter().any(|param| generic_scalar(param, group.axis)).then(|| quote!(T));
    let args = match (lifetime, ty) {
        (None, None) => quote!(#module::#name),
        (lifetime, ty) => {
            let parts = lifetime.into_iter().chain(ty);
            quote!(#module::#name<#(#parts),*>)
        }
    };
    launcher(Launcher {
        doc: format!(
            " Launches the variant of `{}` for the element type `T` ([`{module}::{trait_name}`]) with \
             [`{module}::{}`], checked.",
            group.name, group.name
        ),
        name: format_ident!("launch_{}", group.name),
        generics: quote!(<T: #module::#trait_name>),
        args,
        pattern: quote!(#module::#name),
        params: group.params,
        handle: quote!(<T as #module::#trait_name>::handle(self)?),
        entry: quote!(<T as #module::#trait_name>::ENTRY),
    })
}
