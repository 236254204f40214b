//! Generating the kernel table: the handles struct, its consts and `resolve`, the `KernelTable`
//! impl, and the tracking include that rebuilds the crate when the manifest changes.

use std::collections::HashMap;

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use syn::{DeriveInput, Ident, LitStr};

use super::attr::{self, snake_case};
use super::locate::{ManifestFile, locate};
use super::tokens::{Code, LOCAL_PREFIX, Str, braced};
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

    let mut field_decls = Code::default();
    for entry in &table.entries {
        let optional = if entry.optional { "; `None` where the target lacks it" } else { "" };
        let symbol =
            format!(" `{}::{}`, {manifest}:{}{optional}.", entry.module, entry.entry, entry.location.line);
        let launch = entry.params.as_ref().map(|_| {
            format!(
                " Launched through `launch_{}` with the arguments of its struct in the table's module.",
                entry.field
            )
        });
        let doc = entry.doc.iter().map(|doc| format!(" {doc}")).chain([symbol]).chain(launch);
        code_doc_paragraphs(&mut field_decls, doc);
        let ty = if entry.optional {
            "::core::option::Option<::kda_runtime::KernelHandle>"
        } else {
            "::kda_runtime::KernelHandle"
        };
        writeln!(field_decls, " pub {}: {ty},", entry.field);
    }
    let field_decls = braced(field_decls.parse("the handles struct's fields")?);

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
        /// Every entry, in manifest order.
        pub const ENTRIES: [::kda_runtime::KernelEntry; Self::ENTRY_POINTS] = ",
        table.entries.len(),
        table.required_count(),
        table.optional_count(),
    );
    write_entries(&mut impl_body, table)?;
    impl_body.push(
        "
        /// Looks every entry up once on `gpu`. Fails naming every required entry the backend
        /// lacks and every lookup that failed; an optional entry is `None` only when the
        /// backend answers \"not found\".
        pub fn resolve(
            gpu: &dyn ::kda_runtime::GpuBackend,
        ) -> ::core::result::Result<Self, ::kda_runtime::ResolveError> ",
    );
    write_resolve_body(&mut impl_body, table, manifest);
    entry_enum::write_handle_method(&mut impl_body, &entry_name.to_string(), table);
    let args_items =
        launcher::write_launchers(&mut impl_body, &module, &kernels.to_string(), table, manifest);
    let impl_body = braced(impl_body.parse("the handles struct's items")?);
    let args_module = format_ident!("{module}");
    let macros = launcher::macros(&args_module, kernels);
    let args_items = braced(args_items.parse("the argument structs")?);
    let module_doc = launcher::module_doc(table, manifest);
    let entry_enum = entry_enum::entry_enum(vis, &entry_name, kernels, table, manifest)?;

    let struct_doc = format!(
        " Kernel handles of the table `[{table_name}]` in `{manifest}`, resolved by [`{kernels}::resolve`]."
    );
    let marker_doc = format!(" Resolves [`{kernels}`] from the table `[{table_name}]` of `{manifest}`.");
    let (impl_generics, type_generics, where_clause) = input.generics.split_for_impl();
    Ok(quote! {
        #macros

        #[doc = #module_doc]
        // Each argument struct is named after its entry's field, as the manifest spells it.
        #[allow(non_camel_case_types)]
        #vis mod #args_module #args_items

        #entry_enum

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
    })
}

/// The doc of a field: one paragraph per item of `paragraphs`.
fn code_doc_paragraphs(code: &mut Code, paragraphs: impl Iterator<Item = String>) {
    let mut lines = Vec::new();
    for paragraph in paragraphs {
        if !lines.is_empty() {
            lines.push(String::new());
        }
        lines.push(paragraph);
    }
    code.doc(lines);
}

/// `ENTRIES`' value: a block importing the short names the entries are spelled with (see
/// [`signature::PRELUDE`]), each distinct signature as a constant, and the array, each entry made
/// by one call of a local constructor.
fn write_entries(code: &mut Code, table: &Table) -> Result<(), String> {
    // The constructor is an item, in whose scope the deriving module's names are: its parameters
    // have the reserved prefix, so no constant of that module can be read as their pattern.
    let p = LOCAL_PREFIX;
    write!(
        code,
        "{{
            {}
            const fn {p}entry(
                {p}namespace: &'static str,
                {p}field: &'static str,
                {p}module: &'static str,
                {p}entry: &'static str,
                {p}required: bool,
                {p}line: u32,
                {p}signature: ::core::option::Option<&'static ::kda_runtime::Signature>,
            ) -> ::kda_runtime::KernelEntry {{
                ::kda_runtime::KernelEntry {{
                    namespace: {p}namespace, table: {}, field: {p}field, module: {p}module,
                    entry: {p}entry, required: {p}required, line: {p}line, signature: {p}signature,
                }}
            }}",
        signature::PRELUDE,
        Str(&table.name),
    );
    // A library's kernels share signatures (a kernel's variants differ in one type, and kernels
    // written by one macro in nothing else): each is written once, as a constant.
    let mut signatures: HashMap<String, usize> = HashMap::new();
    let mut array = Code::default();
    for entry in &table.entries {
        let mut signature = Code::default();
        signature::write(&mut signature, entry)?;
        let count = signatures.len();
        let index = *signatures.entry(signature.into_string()).or_insert_with_key(|signature| {
            write!(
                code,
                "\nconst {p}S{count}: ::core::option::Option<&'static ::kda_runtime::Signature> = {signature};"
            );
            count
        });
        write!(
            array,
            "\n{p}entry({p}namespace, {}, {}, {}, {}, {}, {p}S{index}),",
            Str(&entry.field),
            Str(&entry.module),
            Str(&entry.entry),
            !entry.optional,
            entry.location.line
        );
    }
    write!(code, "\nlet {p}namespace = Self::NAMESPACE;\n[{}]\n}};", array.into_string());
    Ok(())
}

/// `resolve`'s body: one lookup per entry, then the struct if every required entry was found.
fn write_resolve_body(code: &mut Code, table: &Table, manifest: &str) {
    let p = LOCAL_PREFIX;
    // `&Self::ENTRIES[i]` would copy the whole array into a temporary at every lookup (indexing
    // a constant is not promoted); a reference to the constant itself is a static.
    write!(
        code,
        "{{
            use ::core::option::Option::{{None, Some}};
            let {p}entries: &'static [::kda_runtime::KernelEntry; Self::ENTRY_POINTS] = &Self::ENTRIES;
            let mut {p}resolver = ::kda_runtime::Resolver::new(gpu, {}, {});",
        Str(&table.name),
        Str(manifest)
    );
    // Handles are bound to locals of the reserved prefix, never to the field names: a field called
    // `None` or `Ok` would otherwise be read as a pattern.
    for (index, entry) in table.entries.iter().enumerate() {
        let method = if entry.optional { "optional" } else { "required" };
        write!(code, "\nlet {p}{index} = {p}resolver.{method}(&{p}entries[{index}]);");
    }
    let required = || table.entries.iter().enumerate().filter(|(_, entry)| !entry.optional);
    let fields: String = table
        .entries
        .iter()
        .enumerate()
        .map(|(index, entry)| format!(" {}: {p}{index},", entry.field))
        .collect();
    let table_value = format!("Some(Self {{{fields} }})");
    if required().next().is_none() {
        write!(code, "\n{p}resolver.finish({table_value})\n}}");
        return;
    }
    write!(code, "\n{p}resolver.finish(match (");
    for (index, _) in required() {
        write!(code, "{p}{index},");
    }
    code.push(") { (");
    for (index, _) in required() {
        write!(code, "Some({p}{index}),");
    }
    write!(code, ") => {table_value}, _ => None }})\n}}");
}
