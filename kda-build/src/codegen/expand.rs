//! Generating the kernel table: the handles struct, its consts and `resolve`, the `KernelTable`
//! impl, and the tracking include that rebuilds the crate when the manifest changes.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use syn::{DeriveInput, Ident, LitStr};

use super::attr::{self, snake_case};
use super::locate::{ManifestFile, locate};
use super::table::{self, TableItems};
use super::tokens::{Code, braced};
use super::{DeriveSite, counts, entry_enum, fallback, launcher};
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
    let mut expansion: TokenStream = errors.iter().map(syn::Error::to_compile_error).collect();
    expansion.extend(body);
    expansion.extend(file.as_ref().map(track));
    expansion
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

    // The build step names the namespace of the images it compiles from this manifest with the
    // same expression, so the table resolves exactly those.
    let namespace = namespace_expr(&manifest_key(manifest));
    let module = snake_case(&marker.to_string());
    let entry_name = format_ident!("{}Entry", marker);
    let mut impl_body = Code::default();
    write!(
        impl_body,
        "/// The namespace the entries are looked up in, `<crate>@<version>:<manifest>`: that of
        /// the `KERNEL_IMAGES` the crate's build compiles from the same manifest.
        pub const NAMESPACE: &'static str = {namespace};
        /// Entry points in the table.
        pub const ENTRY_POINTS: usize = {};
        /// Entry points every target must carry.
        pub const REQUIRED_ENTRY_POINTS: usize = {};
        /// Entry points a target may lack.
        pub const OPTIONAL_ENTRY_POINTS: usize = {};
        ",
        table.entries.len(),
        table.required_count(),
        table.optional_count(),
    );
    table::write_items(&mut impl_body, table)?;
    let args_items = launcher::write_launchers(&mut impl_body, &module, table);
    let impl_body = braced(impl_body.parse("the handles struct's items")?);
    let args_module = format_ident!("{module}");
    let macros = launcher::macros(&args_module, kernels, &entry_name, table, manifest)?;
    let args_items = braced(args_items.parse("the argument structs")?);
    let module_doc = launcher::module_doc(table, manifest);
    let entry_enum = entry_enum::entry_enum(vis, &entry_name, kernels, table, manifest)?;
    let table_items = TableItems { vis, kernels, entry_enum: &entry_name, manifest };
    let table_macro = table::macro_definition(&table_items, table);
    let mut handles_struct = Code::default();
    table::write_struct(&mut handles_struct, table);
    let handles_struct = handles_struct.parse("the handles struct")?;
    let marker_doc = format!(" Resolves [`{kernels}`] from the table `[{table_name}]` of `{manifest}`.");
    let (impl_generics, type_generics, where_clause) = input.generics.split_for_impl();
    Ok(quote! {
        #macros
        #table_macro

        #[doc = #module_doc]
        // Each argument struct is named after its entry's field, as the manifest spells it.
        #[allow(non_camel_case_types)]
        #vis mod #args_module #args_items

        #entry_enum

        #handles_struct

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
    })
}
