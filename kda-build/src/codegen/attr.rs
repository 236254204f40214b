//! `#[kernel_table(manifest = "...", table = "...", name = "...", entry_points = N, required = N,
//! optional = N)]`.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Attribute, Ident, LitInt, LitStr};

/// The keys of `#[kernel_table(...)]`, each with the literal the user wrote (for error spans).
#[derive(Default)]
pub(super) struct Attrs {
    pub manifest: Option<LitStr>,
    pub table: Option<LitStr>,
    pub name: Option<Ident>,
    /// The number of entries the deriving crate expects the table to have.
    pub entry_points: Option<LitInt>,
    /// The number of required entries it expects.
    pub required: Option<LitInt>,
    /// The number of optional entries it expects.
    pub optional: Option<LitInt>,
    /// The first `#[kernel_table]` attribute, which errors about defaulted keys point at.
    pub span: Option<Span>,
}

/// Reads every `#[kernel_table]` attribute; what cannot be read goes to `errors` and the rest is
/// kept, so one bad key does not hide the others.
pub(super) fn parse(attrs: &[Attribute], errors: &mut Vec<syn::Error>) -> Attrs {
    let mut parsed = Attrs::default();
    for attr in attrs.iter().filter(|attr| attr.path().is_ident("kernel_table")) {
        parsed.span.get_or_insert(attr.span());
        if let Err(error) = attr.parse_nested_meta(|meta| {
            let key = meta.path.get_ident().map(Ident::to_string).unwrap_or_default();
            let slot = match key.as_str() {
                "manifest" => &mut parsed.manifest,
                "table" => &mut parsed.table,
                "entry_points" | "required" | "optional" => {
                    let slot = match key.as_str() {
                        "entry_points" => &mut parsed.entry_points,
                        "required" => &mut parsed.required,
                        _ => &mut parsed.optional,
                    };
                    let literal: LitInt = meta.value()?.parse()?;
                    literal.base10_parse::<usize>()?;
                    return set_once(slot, literal, &meta.path);
                }
                "name" => {
                    let literal: LitStr = meta.value()?.parse()?;
                    let ident = literal
                        .parse::<Ident>()
                        .map_err(|_| syn::Error::new(literal.span(), "`name` must be a Rust identifier"))?;
                    return set_once(&mut parsed.name, ident, &meta.path);
                }
                _ => {
                    return Err(meta.error(
                        "unknown key in #[kernel_table]: expected `manifest`, `table`, `name`, \
                             `entry_points`, `required` or `optional`",
                    ));
                }
            };
            let literal: LitStr = meta.value()?.parse()?;
            set_once(slot, literal, &meta.path)
        }) {
            errors.push(error);
        }
    }
    parsed
}

fn set_once<T>(slot: &mut Option<T>, value: T, key: &syn::Path) -> syn::Result<()> {
    if slot.is_some() {
        return Err(syn::Error::new_spanned(key, "this key is given twice in #[kernel_table]"));
    }
    *slot = Some(value);
    Ok(())
}

/// The default table of a marker type: its snake_case name (`Qwen3NextAttn` → `qwen3next_attn`).
pub(super) fn snake_case(name: &str) -> String {
    let mut snake = String::with_capacity(name.len() + 4);
    let mut previous_lowercase = false;
    for c in name.chars() {
        if c.is_uppercase() && previous_lowercase {
            snake.push('_');
        }
        previous_lowercase = c.is_lowercase();
        snake.extend(c.to_lowercase());
    }
    snake
}

#[cfg(test)]
mod tests {
    use super::snake_case;

    #[test]
    fn snake_case_breaks_before_capitals_after_lowercase_letters() {
        assert_eq!(snake_case("Qwen3NextAttn"), "qwen3next_attn");
        assert_eq!(snake_case("KimiLinear48B"), "kimi_linear48b");
        assert_eq!(snake_case("Gemm"), "gemm");
        assert_eq!(snake_case("already_snake"), "already_snake");
    }
}
