//! The entry enum: one variant per entry of the table, named as its field, so that code which
//! knows something per kernel (a launch case, a cost model, a fallback) matches on it, and the
//! compiler checks the match is exhaustive. A renamed or removed entry is then a compile error
//! where its knowledge is, and a new one an error until it has some.
//!
//! ```text
//! match entry {
//!     MyModelEntry::gemm | MyModelEntry::gemv => 2 * m * n * k,
//!     MyModelEntry::fill => 0,
//! }
//! ```

use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote};

use super::tokens::{Code, LOCAL_PREFIX, braced};
use crate::manifest::Table;

/// The enum `name` over the entries of `table` (in manifest order) with its methods.
pub(super) fn entry_enum(
    vis: &syn::Visibility,
    name: &Ident,
    kernels: &Ident,
    table: &Table,
    manifest: &str,
) -> Result<TokenStream, String> {
    let count = table.entries.len();
    let mut variants = Code::default();
    let mut all = Code::default();
    for entry in &table.entries {
        variants.doc([format!(" `{}::{}`, {manifest}:{}.", entry.module, entry.entry, entry.location.line)]);
        writeln!(variants, " {},", entry.field);
        write!(all, " {}", entry.field);
    }
    let variants = braced(variants.parse("the entry enum's variants")?);
    let all = all.parse("the entry enum's `ALL`")?;
    let table_macro = format_ident!("{LOCAL_PREFIX}table");
    let enum_doc = format!(
        " The entries of the table `[{}]` in `{manifest}`, one variant per entry named as its field, \
         in manifest order: what per-kernel code matches on, exhaustively.",
        table.name
    );
    Ok(quote! {
        #[doc = #enum_doc]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[allow(non_camel_case_types)]
        #vis enum #name #variants

        #[automatically_derived]
        impl #name {
            /// Every entry, in manifest order.
            pub const ALL: [Self; #count] = #table_macro!(@all #all);

            /// The entry's place in the manifest's order (and in [`Self::ALL`]): the variants are
            /// declared in that order, without explicit discriminants.
            pub const fn index(self) -> usize {
                self as usize
            }

            /// The entry: its module, entry point, signature and manifest line.
            pub const fn entry(self) -> &'static ::kda_runtime::KernelEntry {
                let entries: &'static [::kda_runtime::KernelEntry; #count] = &#kernels::ENTRIES;
                &entries[self.index()]
            }

            /// The entry's field name in the manifest and in the handles struct.
            pub const fn field(self) -> &'static str {
                self.entry().field
            }

            /// The entry whose field is `field`, if the table has one.
            pub fn from_field(field: &str) -> ::core::option::Option<Self> {
                Self::ALL.into_iter().find(|entry| entry.field() == field)
            }
        }
    })
}
