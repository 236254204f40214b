//! `#[derive(KernelTable)]` as users meet it: every manifest and attribute error as a located
//! compile error (`tests/ui/fail`, `.toml` fixtures beside the cases), and tables that compile and
//! resolve (`tests/ui/pass`). Bless new snapshots with `TRYBUILD=overwrite`.

use std::path::Path;

use kda_build::Manifest;
use kda_test_support::manifests;

#[test]
fn ui() {
    let generated = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui/generated");
    std::fs::create_dir_all(&generated).unwrap();
    std::fs::write(generated.join("large.toml"), manifests::large_manifest(1_000)).unwrap();
    std::fs::write(generated.join("grown.toml"), grown_manifest()).unwrap();

    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/fail/*.rs");
    cases.pass("tests/ui/pass/*.rs");
}

/// The cases' `kernels.toml` with one more line at the end of `[small_model]`: the whole edit a
/// new kernel needs.
fn grown_manifest() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui/pass/kernels.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let manifest = Manifest::parse("kernels.toml", &text).unwrap();
    let last_start = manifest.table("small_model").unwrap().entries.last().unwrap().location.line as usize;
    let mut lines: Vec<&str> = text.lines().collect();
    // The last entry may span several lines: the new one goes after its closing brace.
    let last_end = (last_start - 1..lines.len()).find(|&i| lines[i].trim_end().ends_with('}')).unwrap();
    lines.insert(last_end + 1, "extra_kernel = { module = \"kda_extra\", entry = \"kda_extra_kernel\" }");
    lines.join("\n") + "\n"
}
