//! From TOML text to spanned raw tables: syntax, and the shape of every table and entry.

use serde::Deserialize;
use toml::Spanned;
use toml::de::{DeTable, DeValue, ValueDeserializer};

use super::{Diagnostic, Entry, Location, Table};

/// One entry as written, with the spans later checks blame.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEntry {
    pub module: Spanned<String>,
    pub entry: Spanned<String>,
    #[serde(default)]
    pub optional: bool,
    #[serde(default)]
    pub doc: Option<String>,
}

/// One kernel table as written.
pub(super) struct RawTable {
    pub name: Spanned<String>,
    /// Whether the table has no keys at all (entries that failed to read are not counted here).
    pub is_empty: bool,
    /// The entries that read well.
    pub entries: Vec<(Spanned<String>, RawEntry)>,
}

/// Parses `text` into raw tables, collecting every syntax and shape error in `diagnostics`.
///
/// Syntax errors stop here: checking the shape of a half-parsed document would only add noise.
pub(super) fn read(text: &str, diagnostics: &mut Vec<Diagnostic>) -> Vec<RawTable> {
    let (root, syntax_errors) = DeTable::parse_recoverable(text);
    if !syntax_errors.is_empty() {
        diagnostics.extend(
            syntax_errors
                .iter()
                .map(|error| Diagnostic::new(text, error.span().unwrap_or(0..0), error.message())),
        );
        return Vec::new();
    }
    root.into_inner()
        .into_iter()
        .filter_map(|(name, value)| read_table(text, spanned_string(name), value, diagnostics))
        .collect()
}

fn read_table(
    text: &str,
    name: Spanned<String>,
    value: Spanned<DeValue<'_>>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<RawTable> {
    let DeValue::Table(entries) = value.into_inner() else {
        diagnostics.push(Diagnostic::new(
            text,
            name.span(),
            format!(
                "`{}` is not a kernel table: the top level of a manifest holds only \
                 `[table]`s of entries such as `gemm = {{ module = \"gemm\", entry = \"dense_gemm_bf16\" }}`",
                name.get_ref()
            ),
        ));
        return None;
    };
    let is_empty = entries.is_empty();
    let entries = entries
        .into_iter()
        .filter_map(|(field, value)| read_entry(text, spanned_string(field), value, diagnostics))
        .collect();
    Some(RawTable {
        name,
        is_empty,
        entries,
    })
}

fn read_entry(
    text: &str,
    field: Spanned<String>,
    value: Spanned<DeValue<'_>>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<(Spanned<String>, RawEntry)> {
    let name = field.get_ref();
    if !value.get_ref().is_table() {
        diagnostics.push(Diagnostic::new(
            text,
            value.span(),
            format!(
                "entry `{name}` must be a table such as `{{ module = \"...\", entry = \"...\" }}`, \
                 not {} {}",
                article(value.get_ref().type_str()),
                value.get_ref().type_str()
            ),
        ));
        return None;
    }
    let value_span = value.span();
    match RawEntry::deserialize(ValueDeserializer::from(value)) {
        Ok(entry) => Some((field, entry)),
        Err(error) => {
            let span = error.span().unwrap_or(value_span);
            diagnostics.push(Diagnostic::new(
                text,
                span,
                format!("entry `{name}`: {}", error.message()),
            ));
            None
        }
    }
}

fn spanned_string(key: Spanned<std::borrow::Cow<'_, str>>) -> Spanned<String> {
    let span = key.span();
    Spanned::new(span, key.into_inner().into_owned())
}

fn article(type_name: &str) -> &'static str {
    if type_name.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

impl RawTable {
    /// The validated model of this table.
    pub fn into_table(self, text: &str) -> Table {
        Table {
            location: Location::of_offset(text, self.name.span().start),
            name: self.name.into_inner(),
            entries: self
                .entries
                .into_iter()
                .map(|(field, raw)| Entry {
                    location: Location::of_offset(text, field.span().start),
                    field: field.into_inner(),
                    module: raw.module.into_inner(),
                    entry: raw.entry.into_inner(),
                    optional: raw.optional,
                    doc: raw.doc,
                })
                .collect(),
        }
    }
}
