//! Generating the kernel table: the handles struct, its consts and `resolve`, the `KernelTable`
//! impl, and the tracking include that rebuilds the crate when the manifest changes.

use proc_macro2::{Literal, Span, TokenStream};
use quote::{format_ident, quote};
use syn::{DeriveInput, Ident, LitStr};

use super::attr::{self, snake_case};
use super::locate::{ManifestFile, locate};
use super::tokens::{braced, bracketed, comma_separated, concat};
use super::{DeriveSite, counts, entry_enum, fallback, launcher, signature};
use crate::manifest::namespace::{manifest_key, namespace_expr};
use crate::manifest::{Manifest, Table};

/// The default manifest, relative to the crate root.
const DEFAULT_MANIFEST: &str = "kernels.toml";

/// The whole expansion: the generated table (or its fallback) after every error.
pub(super) fn derive(input: &DeriveInput, site: &DeriveSite) -> TokenStream {
    let mut errors = Vec::new();
    let attrs = attr::parse(&input.attrs, &mut errors);
    let kernels = attrs.name.clone().unwrap_or_else(|| format_ident!("{}Kernels", input.ident));
    if !errors.is_empty() {
        // With a key unread, looking for the manifest or table would only report guesses.
        let errors = errors.iter().map(syn::Error::to_compile_error);
        let fallback = fallback::expand(input, &kernels);
        return quote!(#(#errors)* #fallback);
    }
    // Errors about the manifest point at the literal naming it, else at the attribute or derive.
    let attr_span = attrs.span.unwrap_or_else(Span::call_site);
    let manifest_span = attrs.manifest.as_ref().map_or(attr_span, LitStr::span);
    let manifest_path = attrs.manifest.as_ref().map_or_else(|| DEFAULT_MANIFEST.to_owned(), LitStr::value);

    let file = locate(&manifest_path, site)
        .map_err(|message| errors.push(syn::Error::new(manifest_span, message)))
        .ok();
    let manifest = file.as_ref().and_then(|file| {
        Manifest::parse(&file.display, &file.text)
            .map_err(|error| {
                errors.extend(error.lines().map(|message| syn::Error::new(manifest_span, message)));
            })
            .ok()
    });
    let table = manifest.as_ref().and_then(|manifest| {
        let name = attrs.table.as_ref().map_or_else(|| snake_case(&input.ident.to_string()), LitStr::value);
        let table = manifest.table(&name);
        if table.is_none() {
            let span = attrs.table.as_ref().map_or(manifest_span, LitStr::span);
            errors
                .push(syn::Error::new(span, missing_table_message(manifest, &name, &manifest_path, &attrs)));
        }
        table
    });

    if let (Some(table), Some(file)) = (table, &file) {
        errors.extend(counts::check(&attrs, table, &file.display));
    }
    let body = match (table, &file) {
        (Some(table), Some(file)) => generate(input, &kernels, table, file).unwrap_or_else(|message| {
            errors.push(syn::Error::new(manifest_span, message));
            fallback::expand(input, &kernels)
        }),
        _ => fallback::expand(input, &kernels),
    };
    let errors = errors.iter().map(syn::Error::to_compile_error);
    let tracking = file.as_ref().map(track).unwrap_or_default();
    concat(errors.chain([body, tracking]))
}

fn missing_table_message(manifest: &Manifest, name: &str, path: &str, attrs: &attr::Attrs) -> String {
    let tables: Vec<String> = manifest.tables.iter().map(|table| format!("`{}`", table.name)).collect();
    let how = if attrs.table.is_some() {
        String::new()
    } else {
        " (the type's name in snake_case; name another with `table = \"...\"`)".to_owned()
    };
    format!("{path} has no table `[{name}]`{how}; its tables: {}", tables.join(", "))
}

/// Makes rustc record the manifest as an input, so editing it rebuilds the deriving crate.
fn track(file: &ManifestFile) -> TokenStream {
    let path = file.path.to_string_lossy();
    quote! {
        const _: &[u8] = ::core::include_bytes!(#path);
    }
}

/// The table of `table`, for the marker `input`, named `kernels`.
fn generate(
    input: &DeriveInput,
    kernels: &Ident,
    table: &Table,
    file: &ManifestFile,
) -> Result<TokenStream, String> {
    let vis = &input.vis;
    let marker = &input.ident;
    let table_name = &table.name;
    let manifest = &file.display;
    let fields: Vec<Ident> =
        table.entries.iter().map(|entry| Ident::new(&entry.field, Span::call_site())).collect();

    let field_decls = braced(concat(table.entries.iter().zip(&fields).map(|(entry, field)| {
        let doc = entry.doc.iter().map(|doc| format!(" {doc}"));
        let symbol = format!(
            " `{}::{}`, {manifest}:{}{}.",
            entry.module,
            entry.entry,
            entry.location.line,
            if entry.optional { "; `None` where the target lacks it" } else { "" }
        );
        let launch = entry.params.iter().map(|_| {
            format!(
                " Launched through `launch_{}` with the arguments of its struct in the table's module.",
                entry.field
            )
        });
        let ty = if entry.optional {
            quote!(::core::option::Option<::kda_runtime::KernelHandle>)
        } else {
            quote!(::kda_runtime::KernelHandle)
        };
        quote! {
            #( #[doc = #doc] #[doc = ""] )*
            #[doc = #symbol]
            #( #[doc = ""] #[doc = #launch] )*
            pub #field: #ty,
        }
    })));

    let entries = table
        .entries
        .iter()
        .map(|entry| {
            let (field, module, name) = (&entry.field, &entry.module, &entry.entry);
            let required = !entry.optional;
            let line = entry.location.line;
            let signature = signature::tokens(entry)?;
            Ok(quote! {
                ::kda_runtime::KernelEntry {
                    namespace: Self::NAMESPACE, table: #table_name, field: #field, module: #module, entry: #name,
                    required: #required, line: #line, signature: #signature,
                }
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let entries = bracketed(comma_separated(entries));
    // The build step names the namespace of the images it compiles from this manifest with the
    // same expression, so the table resolves exactly those.
    let namespace: TokenStream = namespace_expr(&manifest_key(manifest))
        .parse()
        .map_err(|error| format!("the namespace of `{manifest}` is not an expression: {error}"))?;
    let prelude = signature::prelude();
    let args_module = format_ident!("{}", snake_case(&marker.to_string()));
    let (args_structs, launch_methods) = launcher::launchers(vis, &args_module, kernels, table, manifest);
    let entry_name = format_ident!("{}Entry", marker);
    let (entry_enum, handle_method) =
        entry_enum::entry_enum(vis, &entry_name, kernels, table, &fields, manifest);
    let entry_points = table.entries.len();
    let required_points = table.required_count();
    let optional_points = table.optional_count();
    let resolve_body = resolve_body(table, &fields, table_name, manifest);

    let struct_doc = format!(
        " Kernel handles of the table `[{table_name}]` in `{manifest}`, resolved by [`{kernels}::resolve`]."
    );
    let marker_doc = format!(" Resolves [`{kernels}`] from the table `[{table_name}]` of `{manifest}`.");
    let (impl_generics, type_generics, where_clause) = input.generics.split_for_impl();
    let impl_body = braced(concat([
        quote! {
            /// The namespace the entries are looked up in, `<crate>@<version>:<manifest>`: that of
            /// the `KERNEL_IMAGES` the crate's build compiles from the same manifest.
            pub const NAMESPACE: &'static str = #namespace;
            /// Entry points in the table.
            pub const ENTRY_POINTS: usize = #entry_points;
            /// Entry points every target must carry.
            pub const REQUIRED_ENTRY_POINTS: usize = #required_points;
            /// Entry points a target may lack.
            pub const OPTIONAL_ENTRY_POINTS: usize = #optional_points;
            /// Every entry, in manifest order.
            pub const ENTRIES: [::kda_runtime::KernelEntry; Self::ENTRY_POINTS] = {
                #prelude
                #entries
            };

            /// Looks every entry up once on `gpu`. Fails naming every required entry the backend
            /// lacks and every lookup that failed; an optional entry is `None` only when the
            /// backend answers "not found".
            pub fn resolve(
                gpu: &dyn ::kda_runtime::GpuBackend,
            ) -> ::core::result::Result<Self, ::kda_runtime::ResolveError> #resolve_body
        },
        handle_method,
        launch_methods,
    ]));
    Ok(concat([
        args_structs,
        entry_enum,
        quote! {
        #[doc = #struct_doc]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #vis struct #kernels #field_decls

        #[automatically_derived]
        impl #kernels #impl_body

        #[doc = #marker_doc]
        #[automatically_derived]
        impl #impl_generics ::kda_runtime::KernelTable for #marker #type_generics #where_clause {
            type Kernels = #kernels;
            const NAME: &'static str = #table_name;
            const ENTRIES: &'static [::kda_runtime::KernelEntry] = &#kernels::ENTRIES;

            fn resolve(
                gpu: &dyn ::kda_runtime::GpuBackend,
            ) -> ::core::result::Result<#kernels, ::kda_runtime::ResolveError> {
                #kernels::resolve(gpu)
            }
        }
        },
    ]))
}

/// One lookup per entry, then the struct if every required entry was found.
fn resolve_body(table: &Table, fields: &[Ident], table_name: &str, manifest: &str) -> proc_macro2::Group {
    // A mixed-site name cannot collide with the field names the manifest brings in.
    let resolver = Ident::new("resolver", Span::mixed_site());
    // `&Self::ENTRIES[i]` would copy the whole array into a temporary at every lookup (indexing
    // a constant is not promoted); a reference to the constant itself is a static.
    let entries = Ident::new("entries", Span::mixed_site());
    // Handles are bound to mixed-site locals, never to the field names: a field called `None` or
    // `Ok` would otherwise be read as a pattern.
    let locals: Vec<Ident> =
        (0..fields.len()).map(|i| Ident::new(&format!("entry{i}"), Span::mixed_site())).collect();
    let lookups = table.entries.iter().zip(&locals).enumerate().map(|(index, (entry, local))| {
        let index = Literal::usize_unsuffixed(index);
        let method = if entry.optional { quote!(optional) } else { quote!(required) };
        quote! { let #local = #resolver.#method(&#entries[#index]); }
    });
    let required: Vec<&Ident> = table
        .entries
        .iter()
        .zip(&locals)
        .filter(|(entry, _)| !entry.optional)
        .map(|(_, local)| local)
        .collect();
    let table_value = if required.is_empty() {
        quote!(::core::option::Option::Some(Self { #(#fields: #locals),* }))
    } else {
        quote! {
            match (#(#required,)*) {
                (#(::core::option::Option::Some(#required),)*) => {
                    ::core::option::Option::Some(Self { #(#fields: #locals),* })
                }
                _ => ::core::option::Option::None,
            }
        }
    };
    braced(concat([
        quote! {
            let #entries: &'static [::kda_runtime::KernelEntry; Self::ENTRY_POINTS] = &Self::ENTRIES;
            let mut #resolver = ::kda_runtime::Resolver::new(gpu, #table_name, #manifest);
        },
        concat(lookups),
        quote!(#resolver.finish(#table_value)),
    ]))
}
