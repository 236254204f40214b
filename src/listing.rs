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
        let width = manifest.defines.iter().map(|d| d.name.len()).max().unwrap_or(0);
        let _ = writeln!(out, "\n[defines]  (-DNAME=VALUE for nvcc, kda::kernels::defines for Rust)");
        for define in &manifest.defines {
            let _ =
                writeln!(out, "  {:width$}  {:>6}  line {}", define.name, define.value, define.location.line);
        }
    }
    out
}

fn render_table(out: &mut String, table: &Table) {
    let field_width = column_width(table.entries.iter().map(|e| e.field.len()), "field");
    let symbol_width =
        column_width(table.entries.iter().map(|e| e.module.len() + 2 + e.entry.len()), "module::entry");
    let _ = writeln!(out, "[{}]  (line {})", table.name, table.location.line);
    let _ =
        writeln!(out, "  {:field_width$}  {:symbol_width$}  {:8}  line", "field", "module::entry", "kind");
    for entry in &table.entries {
        let symbol = format!("{}::{}", entry.module, entry.entry);
        let kind = if entry.optional { "optional" } else { "required" };
        let _ = writeln!(
            out,
            "  {:field_width$}  {symbol:symbol_width$}  {kind:8}  {}",
            entry.field, entry.location.line
        );
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
