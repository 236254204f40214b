//! The naming rules: fields become Rust struct fields, modules and entries are C symbols.

/// Words that cannot name a struct field (strict and reserved keywords, 2024 edition).
const RUST_KEYWORDS: &[&str] = &[
    "Self", "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "crate", "do",
    "dyn", "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl", "in", "let", "loop",
    "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref", "return", "self", "static",
    "struct", "super", "trait", "true", "try", "type", "typeof", "unsafe", "unsized", "use", "virtual",
    "where", "while", "yield",
];

/// The prefix of the names the generated code gives its own locals and helpers: no field or
/// parameter of a manifest may start with it, so none can capture or shadow them.
pub(crate) const RESERVED_PREFIX: &str = "__kda_";

/// Whether `name` starts with [`RESERVED_PREFIX`].
pub(crate) fn is_reserved(name: &str) -> bool {
    name.starts_with(RESERVED_PREFIX)
}

/// Whether `name` is a Rust keyword (so it cannot name a field without `r#`).
pub(crate) fn is_rust_keyword(name: &str) -> bool {
    RUST_KEYWORDS.contains(&name)
}

/// Whether `name` can name a struct field: a Rust identifier that is not a keyword.
pub fn is_rust_field_name(name: &str) -> bool {
    let mut chars = name.chars();
    let starts_well = chars.next().is_some_and(|first| first == '_' || unicode_ident::is_xid_start(first));
    starts_well && chars.all(unicode_ident::is_xid_continue) && name != "_" && !is_rust_keyword(name)
}

/// Whether `name` is a C identifier (ASCII letters, digits and `_`, not starting with a digit),
/// as a module file name and an `extern "C"` entry point must be.
pub fn is_c_identifier(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes.next().is_some_and(|first| first == b'_' || first.is_ascii_alphabetic())
        && bytes.all(|b| b == b'_' || b.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_names_are_rust_identifiers_but_not_keywords() {
        for good in ["gemm", "gemv_batchm", "_private", "x1", "état"] {
            assert!(is_rust_field_name(good), "{good}");
        }
        for bad in ["", "_", "1x", "a-b", "a b", "type", "self", "Self", "gen", "try", "r#type"] {
            assert!(!is_rust_field_name(bad), "{bad}");
        }
    }

    #[test]
    fn modules_and_entries_are_c_identifiers() {
        for good in ["gemm", "dense_gemm_bf16", "_k", "K9"] {
            assert!(is_c_identifier(good), "{good}");
        }
        for bad in ["", "9k", "a-b", "a.b", "état", "a\0b", "a::b"] {
            assert!(!is_c_identifier(bad), "{bad}");
        }
    }
}
