//! The handles struct and its per-entry items (`ENTRIES`, `resolve`, `handle`) from one macro of
//! the table, `__kda_table!`: its two invocations list each entry's data once, and the macro
//! writes the field, the entry, the lookup and the match arm of each (and the entry enum's `ALL`
//! from its variants' names).
//!
//! ```text
//! __kda_table! { struct " `gemm::dense_gemm_bf16`, kernels.toml:2." gemm required ... }
//! impl MyModelKernels {
//!     __kda_table! { items [/* the entries' constructor and signatures */] 0 gemm required "gemm" "dense_gemm_bf16" 2 __kda_S0 ... }
//! }
//! ```

use std::collections::HashMap;

use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote};
use syn::Visibility;

use super::signature;
use super::tokens::{Code, LOCAL_PREFIX, Str};
use crate::manifest::Table;

/// The names the table's items are generated under.
pub(super) struct TableItems<'a> {
    /// The handles struct's visibility: the marker's.
    pub vis: &'a Visibility,
    /// The handles struct.
    pub kernels: &'a Ident,
    /// The entry enum, which `handle` takes.
    pub entry_enum: &'a Ident,
    /// The manifest as the user named it.
    pub manifest: &'a str,
}

/// The definition of `__kda_table!` for `table`: before its invocations.
pub(super) fn macro_definition(names: &TableItems<'_>, table: &Table) -> TokenStream {
    let TableItems { vis, kernels, entry_enum, manifest } = *names;
    let table_macro = format_ident!("{LOCAL_PREFIX}table");
    let (table_name, p) = (&table.name, LOCAL_PREFIX);
    let struct_doc = format!(
        " Kernel handles of the table `[{table_name}]` in `{manifest}`, resolved by [`{kernels}::resolve`]."
    );
    let manifest_prefix = format!("{manifest}:");
    // The locals and the entries' constructor are named with the reserved prefix: no name of the
    // deriving module or the manifest can be read in their place.
    let (entries, resolver, handles, index, looked_up, found, namespace, constructor) = (
        format_ident!("{p}entries"),
        format_ident!("{p}resolver"),
        format_ident!("{p}handles"),
        format_ident!("{p}index"),
        format_ident!("{p}looked_up"),
        format_ident!("{p}table"),
        format_ident!("{p}namespace"),
        format_ident!("{p}entry"),
    );
    quote! {
        #[allow(unused_macros)]
        macro_rules! #table_macro {
            // What a required or an optional entry is: its field's type, whether every target has
            // it, its handle as `handle` returns it, and its field once looked up (`?`: `None`
            // where a required entry was not found).
            (@ty required) => { ::kda_runtime::KernelHandle };
            (@ty optional) => { ::core::option::Option<::kda_runtime::KernelHandle> };
            (@required required) => { true };
            (@required optional) => { false };
            (@handle required $handle:expr) => { ::core::option::Option::Some($handle) };
            (@handle optional $handle:expr) => { $handle };
            (@found required $handle:expr) => { $handle? };
            (@found optional $handle:expr) => { $handle };
            // A field's doc after the entry's own: what it is, where, and how it is launched.
            (@absent required) => { "" };
            (@absent optional) => { "; `None` where the target lacks it" };
            (@launched $field:ident launched) => {
                ::core::concat!(
                    "\n\n Launched through `launch_", ::core::stringify!($field),
                    "` with the arguments of its struct in the table's module."
                )
            };
            (@launched $field:ident unlaunched) => { "" };
            // The entry enum's `ALL`, from its variants' names.
            (@all $($field:ident)*) => { [$(Self::$field),*] };
            (struct $($doc:literal $field:ident $kind:ident $symbol:literal $line:literal $launched:ident)*) => {
                #[doc = #struct_doc]
                #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
                #vis struct #kernels {
                    $(
                        #[doc = ::core::concat!(
                            $doc, " `", $symbol, "`, ", #manifest_prefix, $line, #table_macro!(@absent $kind), ".",
                            #table_macro!(@launched $field $launched)
                        )]
                        pub $field: #table_macro!(@ty $kind),
                    )*
                }
            };
            (items [$($constructor:tt)*]
             $($position:literal $field:ident $kind:ident $module:literal $entry_point:literal $line:literal $signature:ident)*) => {
                /// Every entry, in manifest order.
                pub const ENTRIES: [::kda_runtime::KernelEntry; Self::ENTRY_POINTS] = {
                    $($constructor)*
                    let #namespace = Self::NAMESPACE;
                    [$(#constructor(
                        #namespace,
                        ::core::stringify!($field),
                        $module,
                        $entry_point,
                        #table_macro!(@required $kind),
                        $line,
                        $signature,
                    ),)*]
                };

                /// Looks every entry up once on `gpu`. Fails naming every required entry the backend
                /// lacks and every lookup that failed; an optional entry is `None` only when the
                /// backend answers "not found".
                pub fn resolve(
                    gpu: &dyn ::kda_runtime::GpuBackend,
                ) -> ::core::result::Result<Self, ::kda_runtime::ResolveError> {
                    // `&Self::ENTRIES[i]` would copy the whole array into a temporary at every
                    // lookup (indexing a constant is not promoted); a reference to the constant
                    // itself is a static.
                    let #entries: &'static [::kda_runtime::KernelEntry; Self::ENTRY_POINTS] = &Self::ENTRIES;
                    let mut #resolver = ::kda_runtime::Resolver::new(gpu, #table_name, #manifest);
                    // Every entry is looked up, in manifest order, before any is missed: the
                    // resolver keeps each problem.
                    let #handles: [::core::option::Option<::kda_runtime::KernelHandle>; Self::ENTRY_POINTS] =
                        ::core::array::from_fn(|#index| {
                            let #looked_up = &#entries[#index];
                            if #looked_up.required {
                                #resolver.required(#looked_up)
                            } else {
                                #resolver.optional(#looked_up)
                            }
                        });
                    // The fields are named, never bound: a field called `None` or `Ok` is no
                    // pattern here.
                    let #found = || ::core::option::Option::Some(Self {
                        $($field: #table_macro!(@found $kind #handles[$position]),)*
                    });
                    #resolver.finish(#found())
                }

                /// The handle of `entry`: `None` only for an optional entry the target lacks.
                pub fn handle(&self, entry: #entry_enum) -> ::core::option::Option<::kda_runtime::KernelHandle> {
                    match entry {
                        $(#entry_enum::$field => #table_macro!(@handle $kind self.$field),)*
                    }
                }
            };
        }
    }
}

/// What an entry is for the table macro.
fn kind(optional: bool) -> &'static str {
    if optional { "optional" } else { "required" }
}

/// The invocation that defines the handles struct: each field's own doc (the entry's, as its
/// first paragraphs), name, kind, symbol, line, and whether it is launched through a launcher.
pub(super) fn write_struct(code: &mut Code, table: &Table) {
    write!(code, "{LOCAL_PREFIX}table! {{ struct");
    for entry in &table.entries {
        let own_doc = entry.doc.as_ref().map(|doc| format!(" {doc}\n\n")).unwrap_or_default();
        let symbol = format!("{}::{}", entry.module, entry.entry);
        let launched = if entry.params.is_some() { "launched" } else { "unlaunched" };
        write!(
            code,
            "\n{} {} {} {} {} {launched}",
            Str(&own_doc),
            entry.field,
            kind(entry.optional),
            Str(&symbol),
            entry.location.line
        );
    }
    code.push("\n}");
}

/// The invocation that defines `ENTRIES`, `resolve` and `handle` (in the handles struct's `impl`):
/// the entries' constructor and each distinct signature as a constant, then each entry's position,
/// field, kind, module, entry point, line and signature.
pub(super) fn write_items(code: &mut Code, table: &Table) -> Result<(), String> {
    // The constructor is an item, in whose scope the deriving module's names are: its parameters
    // have the reserved prefix, so no constant of that module can be read as their pattern.
    let p = LOCAL_PREFIX;
    write!(
        code,
        "{p}table! {{ items [
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
    let mut list = Code::default();
    for (position, entry) in table.entries.iter().enumerate() {
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
            list,
            "\n{position} {} {} {} {} {} {p}S{index}",
            entry.field,
            kind(entry.optional),
            Str(&entry.module),
            Str(&entry.entry),
            entry.location.line
        );
    }
    write!(code, "]{}\n}}", list.into_string());
    Ok(())
}
