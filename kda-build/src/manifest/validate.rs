//! The rules TOML cannot express: names that must be identifiers, no entry point listed twice,
//! no empty table.

use std::collections::HashMap;

use super::ident::{RESERVED_PREFIX, is_c_identifier, is_reserved, is_rust_field_name, is_rust_keyword};
use super::parse::{RawManifest, RawTable};
use super::template::TemplateId;
use super::{Diagnostic, LineIndex};

/// Checks every table and define, adding each problem to `diagnostics`.
pub(super) fn validate(source: &LineIndex<'_>, manifest: &RawManifest, diagnostics: &mut Vec<Diagnostic>) {
    for table in &manifest.tables {
        validate_table(source, table, diagnostics);
    }
    for (name, _) in &manifest.defines {
        // Both nvcc (`-DNAME=VALUE`) and Rust (`pub const NAME`) see the name.
        if !is_c_identifier(name.get_ref()) || is_rust_keyword(name.get_ref()) {
            diagnostics.push(Diagnostic::new(
                source,
                name.span(),
                format!("define {:?} must be a C identifier that is not a Rust keyword", name.get_ref()),
            ));
        }
    }
}

fn validate_table(source: &LineIndex<'_>, table: &RawTable, diagnostics: &mut Vec<Diagnostic>) {
    let table_name = table.name.get_ref();
    if table.is_empty {
        diagnostics.push(Diagnostic::new(
            source,
            table.name.span(),
            format!("table `[{table_name}]` lists no kernel entries"),
        ));
    }
    let mut first_listed = HashMap::new();
    for (field, entry) in &table.entries {
        if let Some(message) = field_name_problem(field.get_ref()) {
            diagnostics.push(Diagnostic::new(source, field.span(), message));
        }
        if let Some(Err(message)) = TemplateId::parse(entry.entry.get_ref()) {
            let message =
                format!("entry point {:?} of `{}`: {message}", entry.entry.get_ref(), field.get_ref());
            diagnostics.push(Diagnostic::new(source, entry.entry.span(), message));
        }
        let template = TemplateId::parse(entry.entry.get_ref()).is_some();
        let names = [("module", &entry.module)]
            .into_iter()
            .chain((!template).then_some(("entry point", &entry.entry)));
        for (what, name) in names {
            if !is_c_identifier(name.get_ref()) {
                diagnostics.push(Diagnostic::new(
                    source,
                    name.span(),
                    format!(
                        "{what} {:?} of `{}` is not a C identifier \
                         (ASCII letters, digits and `_`, not starting with a digit)",
                        name.get_ref(),
                        field.get_ref()
                    ),
                ));
            }
        }
        let symbol = (entry.module.get_ref().as_str(), entry.entry.get_ref().as_str());
        if let Some(first) = first_listed.insert(symbol, field) {
            diagnostics.push(Diagnostic::new(
                source,
                field.span(),
                format!(
                    "`{}::{}` is listed twice in `[{table_name}]`: first as `{}` at {}",
                    symbol.0,
                    symbol.1,
                    first.get_ref(),
                    source.location(first.span().start)
                ),
            ));
            // Keep blaming later repeats on the first listing.
            first_listed.insert(symbol, first);
        }
    }
}

fn field_name_problem(field: &str) -> Option<String> {
    if is_rust_keyword(field) {
        Some(format!("field name `{field}` is a Rust keyword; choose another name"))
    } else if !is_rust_field_name(field) {
        Some(format!("field name {field:?} is not a Rust identifier"))
    } else if is_reserved(field) {
        Some(format!(
            "field name `{field}` starts with `{RESERVED_PREFIX}`, which kda reserves for generated code"
        ))
    } else {
        None
    }
}
