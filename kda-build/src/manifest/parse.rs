//! From TOML source to spanned raw tables: syntax, and the shape of every table and entry.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;
use toml::Spanned;
use toml::de::{DeTable, DeValue, ValueDeserializer};

use super::params::Contract;
use super::variants::{self, RawOptional, RawVariants, Variant};
use super::{BUILD_TABLE, BuildSettings, DEFINES_TABLE, Define, Diagnostic, Entry, LineIndex, Table};

/// The keys of an entry: [`RawEntry`]'s fields.
const ENTRY_KEYS: [&str; 9] =
    ["module", "entry", "optional", "doc", "params", "requires", "safety", "variants", "unlaunched"];

/// One entry as written, with the spans later checks blame.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEntry {
    pub module: Spanned<String>,
    pub entry: Spanned<String>,
    /// `true`, or for a variant group the variants a target may lack.
    #[serde(default)]
    pub optional: RawOptional,
    #[serde(default)]
    pub doc: Option<String>,
    #[serde(default)]
    pub params: Option<Spanned<String>>,
    /// Spanned as a whole too: `requires` without `params` is blamed on the array.
    #[serde(default)]
    pub requires: Option<Spanned<Vec<Spanned<String>>>>,
    /// Buffer parameter name to what the caller guarantees about its reach.
    #[serde(default)]
    pub safety: Option<Spanned<BTreeMap<Spanned<String>, Spanned<String>>>>,
    /// The axes of the kernel's instantiations; expanded away as the entry is read.
    #[serde(default)]
    pub variants: Option<Spanned<RawVariants>>,
    /// Why `kda emulate` draws no launch of the entry, in words.
    #[serde(default)]
    pub unlaunched: Option<Spanned<String>>,
    /// Which instantiation this entry is, once expanded.
    #[serde(skip)]
    pub variant: Option<Variant>,
}

/// One kernel table as written.
pub(super) struct RawTable {
    pub name: Spanned<String>,
    /// Whether the table has no keys at all (entries that failed to read are not counted here).
    pub is_empty: bool,
    /// The entries that read well.
    pub entries: Vec<(Spanned<String>, RawEntry)>,
}

/// The manifest as written: its kernel tables, its `[defines]` and its `[build]` settings.
#[derive(Default)]
pub(super) struct RawManifest {
    pub tables: Vec<RawTable>,
    pub defines: Vec<(Spanned<String>, u32)>,
    pub build: BuildSettings,
}

/// Parses `source` into raw tables, collecting every syntax and shape error in `diagnostics`.
///
/// Syntax errors stop here: checking the shape of a half-parsed document would only add noise.
pub(super) fn read(source: &LineIndex<'_>, diagnostics: &mut Vec<Diagnostic>) -> RawManifest {
    let (root, syntax_errors) = DeTable::parse_recoverable(source.text());
    if !syntax_errors.is_empty() {
        diagnostics.extend(
            syntax_errors
                .iter()
                .map(|error| Diagnostic::new(source, error.span().unwrap_or(0..0), error.message())),
        );
        return RawManifest::default();
    }
    let mut manifest = RawManifest::default();
    for (name, value) in root.into_inner() {
        let name = spanned_string(name);
        if name.get_ref() == DEFINES_TABLE {
            manifest.defines.extend(read_defines(source, name, value, diagnostics));
        } else if name.get_ref() == BUILD_TABLE {
            let span = value.span();
            match BuildSettings::deserialize(ValueDeserializer::from(value)) {
                Ok(build) => manifest.build = build,
                Err(error) => {
                    let message = format!("[build]: {}", error.message());
                    diagnostics.push(Diagnostic::new(source, error.span().unwrap_or(span), message));
                }
            }
        } else {
            manifest.tables.extend(read_table(source, name, value, diagnostics));
        }
    }
    manifest
}

/// `[defines]`: `NAME = integer` lines, read as `u32`.
fn read_defines(
    source: &LineIndex<'_>,
    name: Spanned<String>,
    value: Spanned<DeValue<'_>>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<(Spanned<String>, u32)> {
    let DeValue::Table(defines) = value.into_inner() else {
        diagnostics.push(Diagnostic::new(
            source,
            name.span(),
            "`defines` must be a table of `NAME = integer` lines",
        ));
        return Vec::new();
    };
    defines
        .into_iter()
        .filter_map(|(key, value)| {
            let key = spanned_string(key);
            let value_span = value.span();
            u32::deserialize(ValueDeserializer::from(value))
                .map_err(|error| {
                    let span = error.span().unwrap_or(value_span);
                    let message = format!("define `{}`: {}", key.get_ref(), error.message());
                    diagnostics.push(Diagnostic::new(source, span, message));
                })
                .ok()
                .map(|value| (key, value))
        })
        .collect()
}

fn read_table(
    source: &LineIndex<'_>,
    name: Spanned<String>,
    value: Spanned<DeValue<'_>>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<RawTable> {
    let DeValue::Table(entries) = value.into_inner() else {
        diagnostics.push(Diagnostic::new(
            source,
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
    let mut expanded: Vec<(Spanned<String>, RawEntry)> = Vec::new();
    // Each field, with the variant group it belongs to.
    let mut fields: HashMap<String, Option<String>> = HashMap::new();
    for (field, value) in entries {
        let Some((field, raw)) = read_entry(source, spanned_string(field), value, diagnostics) else {
            continue;
        };
        for (field, raw) in variants::expand(source, field, raw, diagnostics) {
            let group = raw.variant.as_ref().map(|variant| variant.group.clone());
            // TOML keeps keys unique; a variant's field can still be another entry's key.
            if let Some(other) = fields.get(field.get_ref()) {
                let groups: Vec<&str> = other.iter().chain(&group).map(String::as_str).collect();
                let message = format!(
                    "entry `{}` is a variant of `{}` and another entry's field: rename one",
                    field.get_ref(),
                    groups.join("` and `")
                );
                diagnostics.push(Diagnostic::new(source, field.span(), message));
                continue;
            }
            fields.insert(field.get_ref().clone(), group);
            expanded.push((field, raw));
        }
    }
    let entries = expanded;
    Some(RawTable { name, is_empty, entries })
}

fn read_entry(
    source: &LineIndex<'_>,
    field: Spanned<String>,
    value: Spanned<DeValue<'_>>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<(Spanned<String>, RawEntry)> {
    let name = field.get_ref();
    let value_span = value.span();
    let type_name = value.get_ref().type_str();
    let DeValue::Table(keys) = value.into_inner() else {
        let kind = format!("{} {type_name}", article(type_name));
        diagnostics.push(Diagnostic::new(
            source,
            value_span,
            format!(
                "entry `{name}` must be a table such as `{{ module = \"...\", entry = \"...\" }}`, not {kind}"
            ),
        ));
        return None;
    };
    // serde stops at an entry's first error: find the unknown keys first, so that a misspelt key
    // and, say, a missing `entry` in the same entry are both reported.
    let errors_before = diagnostics.len();
    let keys: DeTable<'_> = keys
        .into_iter()
        .filter(|(key, _)| {
            let known = ENTRY_KEYS.contains(&key.get_ref().as_ref());
            if !known {
                let expected = ENTRY_KEYS.map(|key| format!("`{key}`")).join(", ");
                let message =
                    format!("entry `{name}`: unknown field `{}`, expected one of {expected}", key.get_ref());
                diagnostics.push(Diagnostic::new(source, key.span(), message));
            }
            known
        })
        .collect();
    match RawEntry::deserialize(ValueDeserializer::from(Spanned::new(
        value_span.clone(),
        DeValue::Table(keys),
    ))) {
        Ok(entry) => {
            // Before `variants` expand it, so a group's empty reason is one error.
            if let Some(reason) = &entry.unlaunched
                && reason.get_ref().trim().is_empty()
            {
                let message = format!(
                    "entry `{name}`: `unlaunched` is empty: say in words why `kda emulate` does not launch it"
                );
                diagnostics.push(Diagnostic::new(source, reason.span(), message));
            }
            (diagnostics.len() == errors_before).then_some((field, entry))
        }
        Err(error) => {
            let span = error.span().unwrap_or(value_span);
            diagnostics.push(Diagnostic::new(source, span, format!("entry `{name}`: {}", error.message())));
            None
        }
    }
}

fn spanned_string(key: Spanned<std::borrow::Cow<'_, str>>) -> Spanned<String> {
    let span = key.span();
    Spanned::new(span, key.into_inner().into_owned())
}

fn article(type_name: &str) -> &'static str {
    if type_name.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" }
}

impl RawTable {
    /// The validated model of this table, with the contract of each entry (in entry order).
    pub fn into_table(self, source: &LineIndex<'_>, contracts: Vec<Contract>) -> Table {
        Table {
            location: source.location(self.name.span().start),
            name: self.name.into_inner(),
            entries: self
                .entries
                .into_iter()
                .zip(contracts)
                .map(|((field, raw), contract)| Entry {
                    location: source.location(field.span().start),
                    field: field.into_inner(),
                    module: raw.module.into_inner(),
                    entry: raw.entry.into_inner(),
                    optional: raw.optional.covers(raw.variant.as_ref()),
                    doc: raw.doc,
                    params: contract.params,
                    requires: contract.requires,
                    variant: raw.variant,
                    unlaunched: raw.unlaunched.map(|reason| reason.into_inner().trim().to_owned()),
                })
                .collect(),
        }
    }
}

/// The validated model of a define.
pub(super) fn into_define(source: &LineIndex<'_>, (name, value): (Spanned<String>, u32)) -> Define {
    Define { location: source.location(name.span().start), name: name.into_inner(), value }
}

#[cfg(test)]
mod tests {
    use crate::Manifest;

    #[test]
    fn unlaunched_is_each_variants_reason_and_an_empty_one_is_one_located_error() {
        let text = r#"[t]
neg = { module = "m", entry = "neg_{T}", variants = { T = ["f32", "f16"] },
        unlaunched = " reads ids only the model makes " }
plain = { module = "m", entry = "plain" }
"#;
        let manifest = Manifest::parse("k.toml", text).expect("a valid manifest");
        let reasons: Vec<Option<&str>> =
            manifest.tables[0].entries.iter().map(|entry| entry.unlaunched.as_deref()).collect();
        let reason = Some("reads ids only the model makes");
        assert_eq!(reasons, [reason, reason, None]);

        let empty = text.replace(" reads ids only the model makes ", " ");
        let error = Manifest::parse("k.toml", &empty).expect_err("an empty reason");
        let lines: Vec<String> = error.lines().collect();
        assert_eq!(
            lines,
            [
                "k.toml:3:22: entry `neg`: `unlaunched` is empty: say in words why `kda emulate` does not launch it"
            ]
        );
    }
}
