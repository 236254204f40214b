//! `kda list`: every table of a manifest with its entries and counts.

use std::fmt::Write;

use kda_build::{Manifest, Table};

/// The listing of `manifest` (read from `file`): per table, each field with its `module::entry`,
/// required or optional, and manifest line, then the counts.
pub fn render(file: &str, manifest: &Manifest) -> String {
    let mut out = String::new();
    let tables = manifest.tables.len();
    let _ = writeln!(out, "{file}: {tables} kernel table{}", if tables == 1 { "" } else { "s" });
    for table in &manifest.tables {
        out.push('\n');
        render_table(&mut out, table);
    }
    if !manifest.defines.is_empty() {
        let width = manifest.defines.iter().map(|d| columns(&d.name)).max().unwrap_or(0);
        let _ = writeln!(out, "\n[defines]  (-DNAME=VALUE for nvcc, kda::kernels::defines for Rust)");
        for define in &manifest.defines {
            out.push_str("  ");
            pad(&mut out, &define.name, width);
            let _ = writeln!(out, "  {:>6}  line {}", define.value, define.location.line);
        }
    }
    out
}

fn render_table(out: &mut String, table: &Table) {
    let field_width = column_width(table.entries.iter().map(|e| columns(&e.field)), "field");
    let symbol_width = column_width(
        table.entries.iter().map(|e| columns(&e.module) + 2 + columns(&e.entry)),
        "module::entry",
    );
    let _ = writeln!(out, "[{}]  (line {})", table.name, table.location.line);
    out.push_str("  ");
    pad(out, "field", field_width);
    out.push_str("  ");
    pad(out, "module::entry", symbol_width);
    out.push_str("  kind      line\n");
    for entry in &table.entries {
        let symbol = format!("{}::{}", entry.module, entry.entry);
        let kind = if entry.optional { "optional" } else { "required" };
        out.push_str("  ");
        pad(out, &entry.field, field_width);
        out.push_str("  ");
        pad(out, &symbol, symbol_width);
        let _ = writeln!(out, "  {kind}  {}", entry.location.line);
    }
    let _ = writeln!(
        out,
        "  {} entry points: {} required, {} optional",
        table.entries.len(),
        table.required_count(),
        table.optional_count()
    );
}

fn column_width(widths: impl Iterator<Item = usize>, header: &str) -> usize {
    widths.max().unwrap_or(0).max(header.len())
}

/// The columns `text` takes: one per character (a field name may be `état`).
fn columns(text: &str) -> usize {
    text.chars().count()
}

/// `text`, then spaces up to `width` columns. Not `{:width$}`: a format width past `u16::MAX`
/// panics, and a manifest name can be longer than that.
fn pad(out: &mut String, text: &str, width: usize) {
    out.push_str(text);
    out.extend(std::iter::repeat_n(' ', width.saturating_sub(columns(text))));
}
