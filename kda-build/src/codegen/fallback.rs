//! What the derive emits when there is no table to generate: the named struct and the trait impl,
//! empty, so the only diagnostics are the real ones (after thiserror-impl's `fallback.rs`).

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::{DeriveInput, Ident};

/// An empty stand-in for the table `kernels` of the marker `input`.
pub(super) fn expand(input: &DeriveInput, kernels: &Ident) -> TokenStream {
    let vis = &input.vis;
    let marker = &input.ident;
    let entry = format_ident!("{}Entry", marker);
    let (impl_generics, type_generics, where_clause) = input.generics.split_for_impl();
    quote! {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #vis struct #kernels {}

        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #vis enum #entry {}

        impl #entry {
            pub const ALL: [Self; 0] = [];

            pub const fn index(self) -> usize {
                match self {}
            }

            pub const fn entry(self) -> &'static ::kda_runtime::KernelEntry {
                match self {}
            }

            pub const fn field(self) -> &'static str {
                match self {}
            }

            pub fn from_field(_: &str) -> ::core::option::Option<Self> {
                ::core::option::Option::None
            }
        }

        impl #kernels {
            pub const NAMESPACE: &'static str = "";
            pub const ENTRY_POINTS: usize = 0;
            pub const REQUIRED_ENTRY_POINTS: usize = 0;
            pub const OPTIONAL_ENTRY_POINTS: usize = 0;
            pub const ENTRIES: [::kda_runtime::KernelEntry; 0] = [];

            pub fn handle(&self, entry: #entry) -> ::core::option::Option<::kda_runtime::KernelHandle> {
                match entry {}
            }

            pub fn resolve(
                _: &dyn ::kda_runtime::GpuBackend,
            ) -> ::core::result::Result<Self, ::kda_runtime::ResolveError> {
                ::core::unreachable!("the kernel table failed to derive")
            }
        }

        impl #impl_generics ::kda_runtime::KernelTable for #marker #type_generics #where_clause {
            type Kernels = #kernels;
            const NAME: &'static str = "";
            const ENTRIES: &'static [::kda_runtime::KernelEntry] = &[];

            fn resolve(
                _: &dyn ::kda_runtime::GpuBackend,
            ) -> ::core::result::Result<#kernels, ::kda_runtime::ResolveError> {
                ::core::unreachable!("the kernel table failed to derive")
            }
        }
    }
}
