//! Typed launchers: for each entry with `params`, a struct of its named arguments (in a module
//! named after the marker type) and a `launch_<field>` method on the handles struct that turns
//! them into the checked launch.
//!
//! ```text
//! kernels.launch_gemm(gpu, geometry, my_model::gemm { a: x.view(), b: w.view(), c: y.view_mut(), m, n, k })?;
//! ```
//!
//! A wrong count of arguments, a scalar for a buffer or a shared borrow where the kernel writes is
//! a type error at the call site; element types, extents and requirements are checked at launch.

use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote};

use super::tokens::{braced, concat};
use super::variants;

use crate::manifest::{Entry, Param, ParamType, ScalarKind, Table};

/// The argument structs of `table`'s entries with params, in a module `module`, and the
/// launcher methods for the handles struct (to splice into its `impl`).
pub(super) fn launchers(
    vis: &syn::Visibility,
    module: &Ident,
    kernels: &Ident,
    table: &Table,
    manifest: &str,
) -> (TokenStream, TokenStream) {
    let with_params = table
        .entries
        .iter()
        .enumerate()
        .filter_map(|(index, entry)| entry.params.as_ref().map(|params| (index, entry, params)));
    let (structs, methods): (Vec<_>, Vec<_>) = with_params
        .map(|(index, entry, params)| {
            let site = Site { table: &table.name, manifest, kernels, index };
            (args_struct(&site, entry, params), method(module, index, entry, params))
        })
        .unzip();
    let module_doc = format!(
        " The arguments of the kernels of `[{}]` in `{manifest}`, one struct per entry with `params`, \
         named after its field. The handles struct launches each with `launch_<field>`, which checks \
         every view's element type and extent and the entry's requirements before anything reaches \
         the device: an `Err` names the parameter and nothing runs, as it does for an optional entry \
         the target lacks.",
        table.name
    );
    let (generic_items, generic_methods) = variants::generic_launchers(module, kernels, table);
    let body = braced(concat(structs.into_iter().chain([generic_items])));
    let module_tokens = quote! {
        #[doc = #module_doc]
        #vis mod #module #body
    };
    (module_tokens, concat(methods.into_iter().chain([generic_methods])))
}

/// The Rust type of a scalar parameter: the primitive of its name, or the `half` type kda-runtime
/// re-exports (`f16` is no stable primitive).
pub(super) fn scalar_type(kind: ScalarKind) -> TokenStream {
    let name = Ident::new(kind.name(), Span::call_site());
    match kind {
        ScalarKind::F16 | ScalarKind::Bf16 => quote!(::kda_runtime::#name),
        ScalarKind::U32
        | ScalarKind::I32
        | ScalarKind::U64
        | ScalarKind::F32
        | ScalarKind::F64
        | ScalarKind::I8
        | ScalarKind::U8
        | ScalarKind::I16
        | ScalarKind::U16
        | ScalarKind::I64
        | ScalarKind::Bool => quote!(#name),
    }
}

/// The Rust type of an argument struct's field for `param`.
pub(super) fn field_type(param: &Param) -> TokenStream {
    match &param.ty {
        ParamType::Buffer { writable: false, nullable: false, .. } => quote!(::kda_runtime::View<'a>),
        ParamType::Buffer { writable: true, nullable: false, .. } => quote!(::kda_runtime::ViewMut<'a>),
        // `None` is the null pointer.
        ParamType::Buffer { writable: false, nullable: true, .. } => {
            quote!(::core::option::Option<::kda_runtime::View<'a>>)
        }
        ParamType::Buffer { writable: true, nullable: true, .. } => {
            quote!(::core::option::Option<::kda_runtime::ViewMut<'a>>)
        }
        ParamType::Scalar(scalar) => scalar_type(*scalar),
    }
}

/// The doc of an argument struct's field for `param`: its manifest declaration.
pub(super) fn field_doc(param: &Param) -> String {
    format!(" `{} {}`", param.ty, param.name)
}

/// Whether the entry takes a buffer, so its argument struct borrows.
pub(super) fn borrows(params: &[Param]) -> bool {
    params.iter().any(|param| matches!(param.ty, ParamType::Buffer { .. }))
}

/// Where an argument struct's entry is: its table, manifest, handles struct and index.
struct Site<'a> {
    table: &'a str,
    manifest: &'a str,
    kernels: &'a Ident,
    index: usize,
}

fn args_struct(site: &Site<'_>, entry: &Entry, params: &[Param]) -> TokenStream {
    let Site { table, manifest, kernels, index } = *site;
    let name = Ident::new(&entry.field, Span::call_site());
    let lifetime = borrows(params).then(|| quote!(<'a>));
    let fields = braced(concat(params.iter().map(|param| {
        let field = Ident::new(&param.name, Span::call_site());
        let doc = field_doc(param);
        let ty = field_type(param);
        quote! { #[doc = #doc] pub #field: #ty, }
    })));
    let doc = format!(
        " The arguments of `{table}.{}` (`{}::{}`, {manifest}:{}), in the kernel's order.",
        entry.field, entry.module, entry.entry, entry.location.line
    );
    let requires = entry.requires.iter().map(|requirement| format!(" - `{}`", requirement.text));
    let requires_doc = (!entry.requires.is_empty()).then(|| {
        quote! {
            #[doc = ""]
            #[doc = " A launch must also satisfy:"]
            #( #[doc = #requires] )*
        }
    });
    let index = proc_macro2::Literal::usize_unsuffixed(index);
    let impl_lifetime = lifetime.as_ref().map(|_| quote!(<'_>));
    quote! {
        #[doc = #doc]
        #requires_doc
        #[allow(non_camel_case_types)]
        #[derive(Debug)]
        pub struct #name #lifetime #fields

        #[automatically_derived]
        impl #name #impl_lifetime {
            /// The entry these arguments launch, with its signature.
            pub const ENTRY: &'static ::kda_runtime::KernelEntry = &super::#kernels::ENTRIES[#index];
        }
    }
}

fn method(module: &Ident, index: usize, entry: &Entry, params: &[Param]) -> TokenStream {
    let field = Ident::new(&entry.field, Span::call_site());
    let lifetime = borrows(params).then(|| quote!(<'_>));
    let index = proc_macro2::Literal::usize_unsuffixed(index);
    let handle = if entry.optional {
        quote! {
            match self.#field {
                ::core::option::Option::Some(handle) => handle,
                ::core::option::Option::None => {
                    return ::core::result::Result::Err(::kda_runtime::BackendError::Absent {
                        entry: ::std::boxed::Box::new(Self::ENTRIES[#index]),
                    });
                }
            }
        }
    } else {
        quote!(self.#field)
    };
    launcher(Launcher {
        // The checks a launch runs are documented once, on the module; this names the entry.
        doc: format!(" Launches `{}` with [`{module}::{}`], checked.", entry.field, entry.field),
        name: format_ident!("launch_{}", entry.field),
        generics: TokenStream::new(),
        args: quote!(#module::#field #lifetime),
        pattern: quote!(#module::#field),
        params,
        handle,
        entry: quote!(&Self::ENTRIES[#index]),
    })
}

/// A launcher method of the handles struct: what varies between an entry's own and a variant
/// group's generic one.
pub(super) struct Launcher<'a> {
    /// Its doc comment's first line.
    pub doc: String,
    /// `launch_<field>`.
    pub name: Ident,
    /// Its generic parameters, with their angle brackets (or nothing).
    pub generics: TokenStream,
    /// The type of its argument struct.
    pub args: TokenStream,
    /// The path its argument struct is destructured by.
    pub pattern: TokenStream,
    /// The entry's parameters (a variant group's: any variant's).
    pub params: &'a [Param],
    /// An expression for the handle to launch (it may `return` an `Err`).
    pub handle: TokenStream,
    /// An expression for the `&'static KernelEntry` launched.
    pub entry: TokenStream,
}

/// The method: safe over `GpuBackend::launch`, or, where a parameter has `safety` conditions, an
/// `unsafe fn` over `launch_trusting` whose `# Safety` lists them.
pub(super) fn launcher(launcher: Launcher<'_>) -> TokenStream {
    let Launcher { doc, name, generics, args: args_type, pattern, params, handle, entry } = launcher;
    // Mixed-site names: no parameter or field name of the manifest can capture them.
    let locals: Vec<Ident> =
        (0..params.len()).map(|i| Ident::new(&format!("arg{i}"), Span::mixed_site())).collect();
    let (gpu, geometry, args) = (
        Ident::new("gpu", Span::mixed_site()),
        Ident::new("geometry", Span::mixed_site()),
        Ident::new("args", Span::mixed_site()),
    );
    let names = params.iter().map(|param| Ident::new(&param.name, Span::call_site()));
    let signature = quote! {
        #name #generics(
            &self,
            #gpu: &dyn ::kda_runtime::GpuBackend,
            #geometry: ::kda_runtime::LaunchGeometry,
            #args: #args_type,
        ) -> ::core::result::Result<(), ::kda_runtime::BackendError>
    };
    let unpack = quote! {
        let #pattern { #(#names: #locals),* } = #args;
        let handle = #handle;
    };
    let trusted: Vec<String> = params
        .iter()
        .filter_map(|param| {
            param.safety.as_ref().map(|condition| format!(" - `{}`: {condition}", param.name))
        })
        .collect();
    if trusted.is_empty() {
        return quote! {
            #[doc = #doc]
            // `launch_` and a field the manifest may spell in any case.
            #[allow(non_snake_case)]
            pub fn #signature {
                #unpack
                #gpu.launch(handle, #geometry, &mut [#(#locals.into()),*])
            }
        };
    }
    quote! {
        #[doc = #doc]
        #[doc = ""]
        #[doc = " # Safety"]
        #[doc = ""]
        #[doc = " What the kernel touches through these buffers depends on data kda cannot check before \
                  the launch; the caller guarantees, for these arguments and this geometry:"]
        #( #[doc = #trusted] )*
        #[allow(non_snake_case)]
        pub unsafe fn #signature {
            #unpack
            // SAFETY: the caller guarantees the entry's conditions; `launch_trusting` refuses a
            // handle that is not the backend's for this entry.
            unsafe {
                ::kda_runtime::launch_trusting(#gpu, #entry, handle, #geometry, &mut [#(#locals.into()),*])
            }
        }
    }
}
