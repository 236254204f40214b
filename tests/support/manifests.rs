//! Manifests generated for tests and benchmarks (shared through `#[path]`).

use std::fmt::Write;

/// A table `[large]` of `entries` entries over ten modules (`module_0` ..), field `k0000` ..,
/// entry `kernel_0` ..; every seventh entry (0, 7, 14, ...) is optional.
pub fn large_manifest(entries: usize) -> String {
    let mut text = String::from("[large]\n");
    for i in 0..entries {
        let optional = if i % 7 == 0 { ", optional = true" } else { "" };
        let _ = writeln!(
            text,
            "k{i:04} = {{ module = \"module_{}\", entry = \"kernel_{i}\"{optional} }}",
            i % 10
        );
    }
    text
}
