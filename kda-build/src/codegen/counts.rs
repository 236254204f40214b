//! `entry_points = N`, `required = N`, `optional = N`: counts the deriving crate relies on,
//! checked against the manifest so that a grown table fails where the assumption is written.

use crate::manifest::Table;

use super::attr::Attrs;

/// One error per count of `attrs` that `table` does not have.
pub(super) fn check(attrs: &Attrs, table: &Table, manifest: &str) -> Vec<syn::Error> {
    let counts = [
        (&attrs.entry_points, table.entries.len(), "entries"),
        (&attrs.required, table.required_count(), "required entries"),
        (&attrs.optional, table.optional_count(), "optional entries"),
    ];
    counts
        .into_iter()
        .filter_map(|(expected, found, what)| {
            let literal = expected.as_ref()?;
            // `attr::parse` checked that the literal is a usize.
            let expected: usize = literal.base10_parse().ok()?;
            (expected != found).then(|| {
                syn::Error::new(
                    literal.span(),
                    format!(
                        "table `{}` in {manifest} has {found} {what}; this crate expects {expected}: \
                         review the code that depends on the count",
                        table.name
                    ),
                )
            })
        })
        .collect()
}
