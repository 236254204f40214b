//! Property tests: whatever the text, the parser returns (never panics), and every error it
//! reports is located inside the file.

use kda_build::Manifest;
use proptest::prelude::*;

const VALID: &str = "[glm5next_kda]\n\
    gemm = { module = \"gemm\", entry = \"dense_gemm_bf16\" }\n\
    gemv_batchm = { module = \"dense_gemv_bf16_batchm\", entry = \"dense_gemv_bf16_batchm\", optional = true, doc = \"Batched.\" }\n\
    [glm5next_kda.recurrent]\n\
    module = \"kda_recurrent\"\n\
    entry = \"kda_recurrent_decode_bf16\"\n";

/// Fragments that make TOML and manifest errors when spliced in anywhere.
const FRAGMENTS: &[&str] = &[
    "[",
    "]",
    "{",
    "}",
    "=",
    "\"",
    "\n",
    ",",
    "optional = 1",
    "module = \"a-b\"",
    "x = { }",
    "[t]\n",
    "é",
    "\0",
    "'''",
    "#",
    "fn",
    "entry = \"e\"",
    ".",
    "[[a]]\n",
];

/// Every error's line and column lie inside `text`.
fn assert_located_inside(text: &str) {
    let line_count = text.split('\n').count() as u32;
    if let Err(error) = Manifest::parse("m.toml", text) {
        assert!(!error.diagnostics.is_empty());
        for diagnostic in &error.diagnostics {
            let location = diagnostic.location;
            assert!((1..=line_count).contains(&location.line), "{location} outside {line_count} lines");
            let line = text.split('\n').nth(location.line as usize - 1).unwrap();
            assert!(location.column >= 1 && location.column as usize <= line.chars().count() + 1);
        }
        let starts: Vec<usize> = error.diagnostics.iter().map(|d| d.span.start).collect();
        assert!(starts.is_sorted(), "errors out of file order: {starts:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_text_never_panics_the_parser(text in "\\PC{0,200}") {
        assert_located_inside(&text);
    }

    #[test]
    fn mutated_manifests_never_panic_and_stay_located(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), 0..FRAGMENTS.len(), 0usize..4), 1..6)
    ) {
        let mut text = VALID.to_owned();
        for (at, fragment, cut) in edits {
            let mut position = at.index(text.len() + 1);
            while !text.is_char_boundary(position) {
                position -= 1;
            }
            let mut end = (position + cut).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            text.replace_range(position..end, FRAGMENTS[fragment]);
        }
        assert_located_inside(&text);
    }
}
