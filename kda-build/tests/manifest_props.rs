//! Property tests: whatever the text, the parser returns (never panics), and every error it
//! reports is located inside the file, in file order; valid `params` always parse.

use kda_build::Manifest;
use kda_build::manifest::ParamType;
// The manifest fuzzer's pieces: fragments that make TOML and manifest errors when spliced in
// anywhere, and the tokens random `params` and `requires` strings are made of.
use kda_test_support::fuzz::generate::{CONTRACT_TOKENS, FRAGMENTS};
use proptest::prelude::*;

const VALID: &str = "[glm5next_kda]\n\
    gemm = { module = \"gemm\", entry = \"dense_gemm_bf16\",\n\
             params = \"const bf16 a[m*k], const bf16 b[n*k], bf16 c[m*n], u32 m, u32 n, u32 k\",\n\
             requires = [\"block.x == THREADS\", \"m % 4 == 0 || m < 4\"] }\n\
    gemv_batchm = { module = \"dense_gemv_bf16_batchm\", entry = \"dense_gemv_bf16_batchm\", optional = true, doc = \"Batched.\" }\n\
    [glm5next_kda.recurrent]\n\
    module = \"kda_recurrent\"\n\
    entry = \"kda_recurrent_decode_bf16\"\n\
    params = \"\"\"\n\
    const f32 q[cdiv(t, c) * c], f32 s[t + (THREADS - 1)], u32 t, u32 c, f32 eps\"\"\"\n\
    requires = ['c == 32 || c == 64', \"grid.x * THREADS >= t\"]\n\
    [defines]\n\
    THREADS = 256\n";

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

/// A one-entry manifest with these `params` and `requires` (TOML-escaped here).
fn contract_manifest(params: &str, requires: &[String]) -> String {
    let quote = |text: &str| format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""));
    let requires: Vec<String> = requires.iter().map(|r| quote(r)).collect();
    format!(
        "[t]\ng = {{ module = \"m\", entry = \"e\", params = {}, requires = [{}] }}\n[defines]\nD = 4\nTHREADS = 256\n",
        quote(params),
        requires.join(", ")
    )
}

/// Extents that always evaluate: `+`, `*`, and `%` and `cdiv` by a non-zero literal, over the
/// scalars `n`, `m`, the define `D` and small literals (no constant part can overflow).
fn valid_extent() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("n".to_owned()),
        Just("m".to_owned()),
        Just("D".to_owned()),
        (1u64..10).prop_map(|v| v.to_string())
    ];
    leaf.prop_recursive(4, 16, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a} + {b}")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) * {b}")),
            (inner.clone(), 1u64..10).prop_map(|(a, b)| format!("({a}) % {b}")),
            (inner, 1u64..10).prop_map(|(a, b)| format!("cdiv({a}, {b})")),
        ]
    })
}

/// Random token soup, joined with or without spaces.
fn contract_text() -> impl Strategy<Value = String> {
    proptest::collection::vec((0..CONTRACT_TOKENS.len(), any::<bool>()), 0..24).prop_map(|tokens| {
        tokens
            .iter()
            .map(|&(token, space)| format!("{}{}", CONTRACT_TOKENS[token], if space { " " } else { "" }))
            .collect()
    })
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

    #[test]
    fn random_params_and_requires_never_panic_and_stay_located(
        params in contract_text(),
        requires in proptest::collection::vec(contract_text(), 0..3),
    ) {
        assert_located_inside(&contract_manifest(&params, &requires));
    }

    #[test]
    fn valid_params_always_parse(extents in proptest::collection::vec(valid_extent(), 1..4), bound in valid_extent()) {
        let buffers: Vec<String> =
            extents.iter().enumerate().map(|(i, extent)| format!("const f32 b{i}[{extent}]")).collect();
        let params = format!("{}, u32 n, u64 m", buffers.join(", "));
        let requires = [format!("{bound} <= {} || block.x == D", extents[0])];
        let text = contract_manifest(&params, &requires);
        let manifest = Manifest::parse("m.toml", &text).unwrap_or_else(|error| panic!("{text}\n{error}"));
        let entry = &manifest.tables[0].entries[0];
        let parsed = entry.params.as_ref().unwrap();
        prop_assert_eq!(parsed.len(), extents.len() + 2);
        for (param, extent) in parsed.iter().zip(&extents) {
            let ParamType::Buffer { extent_text, .. } = &param.ty else { panic!("{} is a buffer", param.name) };
            prop_assert_eq!(extent_text, extent);
        }
        prop_assert_eq!(entry.requires.len(), 1);
        prop_assert_eq!(entry.requires[0].any_of.len(), 2);
    }
}

#[test]
fn the_valid_manifest_is_valid() {
    let manifest = Manifest::parse("m.toml", VALID).unwrap();
    let recurrent = &manifest.tables[0].entries[2];
    assert_eq!(recurrent.params.as_ref().map(Vec::len), Some(5));
    assert_eq!(recurrent.requires.len(), 2);
}
