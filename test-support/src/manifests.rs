//! Manifests generated for tests and benchmarks: kda-macros' `tests/compiletest.rs` (the derive
//! on a 1,000-entry table) and `benches/expand.rs` (its expansion time).

use std::fmt::Write;

/// A table `[large]` of `entries` entries over ten modules (`module_0` ..), field `k0000` ..,
/// entry `kernel_0` ..; every seventh entry (0, 7, 14, ...) is optional. Each has params (two
/// buffers with extents, three scalars) and a requirement, as the project's entries do.
pub fn large_manifest(entries: usize) -> String {
    let mut text = String::from("[large]\n");
    for i in 0..entries {
        let optional = if i % 7 == 0 { ", optional = true" } else { "" };
        let _ = writeln!(
            text,
            "k{i:04} = {{ module = \"module_{}\", entry = \"kernel_{i}\"{optional}, \
             params = \"const bf16 x[n*k], f32 y[cdiv(n, 4)*4], u32 n, u32 k, f32 eps\", requires = [\"n >= 1\"] }}",
            i % 10
        );
    }
    text
}

/// As [`large_manifest`], with every fourth entry (0, 4, 8, ...) a kernel instantiated for four
/// element types (`variants = { T = ["f32", "f16", "bf16", "f64"] }`): a kernel library's table,
/// which expands to `entries + 3 * entries.div_ceil(4)` entries.
pub fn library_manifest(entries: usize) -> String {
    let mut text = String::from("[large]\n");
    for i in 0..entries {
        let optional = if i % 7 == 0 { ", optional = true" } else { "" };
        let (entry, variants, element) = if i % 4 == 0 {
            (format!("kernel_{i}_{{T}}"), ", variants = { T = [\"f32\", \"f16\", \"bf16\", \"f64\"] }", "T")
        } else {
            (format!("kernel_{i}"), "", "bf16")
        };
        let _ = writeln!(
            text,
            "k{i:04} = {{ module = \"module_{}\", entry = \"{entry}\"{optional}{variants}, \
             params = \"const {element} x[n*k], f32 y[cdiv(n, 4)*4], u32 n, u32 k, f32 eps\", requires = [\"n >= 1\"] }}",
            i % 10
        );
    }
    text
}
