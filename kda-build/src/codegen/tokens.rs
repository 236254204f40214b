//! Assembling large token streams without copying them.
//!
//! `quote!` interpolates a `TokenStream` by cloning it token by token, so a table's thousands of
//! generated items would be copied once per level of nesting. These helpers move the pieces into
//! one stream instead, and wrap long sequences in a group, which later interpolations clone as a
//! single token.

use proc_macro2::{Delimiter, Group, Punct, Spacing, TokenStream, TokenTree};

/// `parts`, one after the other, moved.
pub(super) fn concat(parts: impl IntoIterator<Item = TokenStream>) -> TokenStream {
    let mut out = TokenStream::new();
    out.extend(parts);
    out
}

/// `parts` separated by commas, moved.
pub(super) fn comma_separated(parts: impl IntoIterator<Item = TokenStream>) -> TokenStream {
    let mut out = TokenStream::new();
    for part in parts {
        out.extend(part);
        out.extend([TokenTree::Punct(Punct::new(',', Spacing::Alone))]);
    }
    out
}

/// `{ stream }`, as one token.
pub(super) fn braced(stream: TokenStream) -> Group {
    Group::new(Delimiter::Brace, stream)
}

/// `[ stream ]`, as one token.
pub(super) fn bracketed(stream: TokenStream) -> Group {
    Group::new(Delimiter::Bracket, stream)
}
