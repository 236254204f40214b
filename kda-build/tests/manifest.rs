//! The manifest parser: the model it builds and every error class, located and in file order.

use kda_build::manifest::MAX_REPORTED_ERRORS;
use kda_build::{Location, Manifest};

#[path = "manifest/params.rs"]
mod params;
#[path = "manifest/variants.rs"]
mod variants;

/// The rendered errors of `text`, one per line.
fn errors(text: &str) -> Vec<String> {
    let error = Manifest::parse("k.toml", text).expect_err("the manifest should be rejected");
    error.diagnostics.iter().map(|d| d.render(&error.file)).collect()
}

#[test]
fn the_project_manifest_lists_the_glm5next_kda_table_in_order() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../kernels.toml")).unwrap();
    let manifest = Manifest::parse("kernels.toml", &text).unwrap();
    let table = manifest.table("glm5next_kda").unwrap();
    let fields: Vec<&str> = table.entries.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "gemm",
            "gemm_splitk",
            "gemm_reduce",
            "gemv",
            "gemv_batchm",
            "conv_decode",
            "conv_prefill",
            "chunk_prepare",
            "chunk_scan",
            "recurrent",
            "recurrent_regs",
            "o_norm",
            "fill"
        ]
    );
    let optional: Vec<&str> = table.entries.iter().filter(|e| e.optional).map(|e| e.field.as_str()).collect();
    assert_eq!(optional, ["gemm_splitk", "gemm_reduce", "gemv_batchm", "recurrent_regs"]);
    assert_eq!((table.entries.len(), table.required_count(), table.optional_count()), (13, 9, 4));
    assert!(table.entries.iter().all(|e| e.doc.as_deref().is_some_and(|doc| !doc.is_empty())));
    let smem = &table.entries[10];
    assert_eq!(
        (smem.module.as_str(), smem.entry.as_str()),
        ("kda_recurrent", "kda_recurrent_decode_bf16_regs")
    );
}

#[test]
fn entries_keep_file_order_fields_and_locations() {
    let text = "# kernels\n[b_table]\nzeta = { module = \"m\", entry = \"z\", doc = \"Last letter.\" }\n\
                alpha = { module = \"m\", entry = \"a\", optional = true }\n\n[a_table]\n[a_table.one]\nmodule = \"n\"\nentry = \"one\"\n";
    let manifest = Manifest::parse("k.toml", text).unwrap();
    let names: Vec<&str> = manifest.tables.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["b_table", "a_table"]);
    let b = &manifest.tables[0];
    assert_eq!(b.location, Location { line: 2, column: 2 });
    assert_eq!(b.entries[0].field, "zeta");
    assert_eq!(b.entries[0].doc.as_deref(), Some("Last letter."));
    assert!(!b.entries[0].optional);
    assert_eq!(b.entries[1].field, "alpha");
    assert!(b.entries[1].optional);
    assert_eq!(b.entries[1].location, Location { line: 4, column: 1 });
    let one = &manifest.tables[1].entries[0];
    assert_eq!((one.field.as_str(), one.module.as_str(), one.entry.as_str()), ("one", "n", "one"));
    assert_eq!(one.location.line, 7);
}

#[test]
fn a_manifest_without_tables_is_empty_not_an_error() {
    assert!(Manifest::parse("k.toml", "# nothing yet\n").unwrap().tables.is_empty());
}

#[test]
fn syntax_errors_are_all_reported_with_their_locations() {
    assert_eq!(
        errors("[t\ngemm = {\n"),
        ["k.toml:1:3: unclosed table, expected `]`", "k.toml:2:9: unclosed inline table, expected `}`"]
    );
}

#[test]
fn unknown_keys_are_reported_at_the_key() {
    assert_eq!(
        errors("[t]\ngemm = { module = \"gemm\", entry = \"e\", optinal = true }\n"),
        [
            "k.toml:2:40: entry `gemm`: unknown field `optinal`, expected one of `module`, `entry`, `optional`, `doc`, `params`, `requires`, `safety`, `variants`, `unlaunched`"
        ]
    );
}

#[test]
fn missing_module_or_entry_is_reported_at_the_entry() {
    assert_eq!(
        errors("[t]\ngemm = { entry = \"e\" }\n"),
        ["k.toml:2:8: entry `gemm`: missing field `module`"]
    );
    assert_eq!(
        errors("[t]\n[t.gemm]\nmodule = \"m\"\n"),
        ["k.toml:2:1: entry `gemm`: missing field `entry`"]
    );
}

#[test]
fn wrong_value_types_are_reported_at_the_value() {
    assert_eq!(
        errors("[t]\ngemm = { module = \"gemm\", entry = \"e\", optional = \"yes\" }\n"),
        [
            "k.toml:2:51: entry `gemm`: invalid type: string \"yes\", expected a boolean, or the optional variants by axis as in `{ T = [\"bf16\"] }`"
        ]
    );
    assert_eq!(
        errors("[t]\ngemm = { module = 3, entry = \"e\" }\n"),
        ["k.toml:2:19: entry `gemm`: invalid type: integer `3`, expected a string"]
    );
    assert_eq!(
        errors("[t]\ngemm = { module = \"m\", entry = \"e\", doc = 5 }\n"),
        ["k.toml:2:43: entry `gemm`: invalid type: integer `5`, expected a string"]
    );
}

#[test]
fn field_names_must_be_rust_identifiers_and_not_keywords() {
    assert_eq!(
        errors(
            "[t]\ntype = { module = \"m\", entry = \"a\" }\n\"two words\" = { module = \"m\", entry = \"b\" }\n"
        ),
        [
            "k.toml:2:1: field name `type` is a Rust keyword; choose another name",
            "k.toml:3:1: field name \"two words\" is not a Rust identifier",
        ]
    );
}

#[test]
fn field_names_may_not_take_the_prefix_of_generated_code() {
    assert_eq!(
        errors("[t]\n__kda_args = { module = \"m\", entry = \"a\" }\n"),
        ["k.toml:2:1: field name `__kda_args` starts with `__kda_`, which kda reserves for generated code"]
    );
}

#[test]
fn modules_and_entries_must_be_c_identifiers() {
    assert_eq!(
        errors("[t]\ngemm = { module = \"dense-gemm\", entry = \"9e\" }\n"),
        [
            "k.toml:2:19: module \"dense-gemm\" of `gemm` is not a C identifier (ASCII letters, digits and `_`, not starting with a digit)",
            "k.toml:2:41: entry point \"9e\" of `gemm` is not a C identifier (ASCII letters, digits and `_`, not starting with a digit)",
        ]
    );
    // cudarc's CString conversion would panic on a NUL; the manifest never lets one through.
    assert_eq!(errors("[t]\ng = { module = \"m\", entry = \"a\\u0000b\" }\n").len(), 1);
}

#[test]
fn an_entry_point_listed_twice_names_the_first_listing() {
    assert_eq!(
        errors(
            "[t]\na = { module = \"m\", entry = \"e\" }\nb = { module = \"m\", entry = \"e\" }\nc = { module = \"m\", entry = \"e\" }\n"
        ),
        [
            "k.toml:3:1: `m::e` is listed twice in `[t]`: first as `a` at 2:1",
            "k.toml:4:1: `m::e` is listed twice in `[t]`: first as `a` at 2:1",
        ]
    );
    // The same entry point in two tables is fine: each table resolves on its own.
    assert!(
        Manifest::parse(
            "k.toml",
            "[t]\na = { module = \"m\", entry = \"e\" }\n[u]\na = { module = \"m\", entry = \"e\" }\n"
        )
        .is_ok()
    );
}

#[test]
fn empty_tables_and_non_tables_are_rejected() {
    assert_eq!(errors("[t]\n"), ["k.toml:1:2: table `[t]` lists no kernel entries"]);
    assert_eq!(
        errors("version = 1\n"),
        [
            "k.toml:1:1: `version` is not a kernel table: the top level of a manifest holds only `[table]`s of entries such as `gemm = { module = \"gemm\", entry = \"dense_gemm_bf16\" }`"
        ]
    );
    assert_eq!(
        errors("[t]\ngemm = \"dense_gemm_bf16\"\n"),
        [
            "k.toml:2:8: entry `gemm` must be a table such as `{ module = \"...\", entry = \"...\" }`, not a string"
        ]
    );
}

#[test]
fn every_error_is_reported_at_once_in_file_order() {
    let text = "[t]\n\
                a = { module = \"m\", entry = \"e\" }\n\
                b = { module = \"m\", entry = \"e\", extra = 1 }\n\
                fn = { module = \"m\", entry = \"f\" }\n\
                [empty]\n\
                [u]\n\
                x = { module = \"m\" }\n";
    let lines: Vec<u32> =
        Manifest::parse("k.toml", text).unwrap_err().diagnostics.iter().map(|d| d.location.line).collect();
    assert_eq!(lines, [3, 4, 5, 7]);
}

#[test]
fn the_error_display_is_one_located_line_per_problem() {
    let error = Manifest::parse("path/to/kernels.toml", "[t]\n[u]\n").unwrap_err();
    assert_eq!(
        error.to_string(),
        "path/to/kernels.toml:1:2: table `[t]` lists no kernel entries\n\
         path/to/kernels.toml:2:2: table `[u]` lists no kernel entries"
    );
}

#[test]
fn defines_are_named_integers_shared_by_kernels_and_rust() {
    let text = "[defines]\nDENSE_GEMV_BATCHM_MAX_M = 16\nKDA_VPB = 32\n\n[t]\ng = { module = \"m\", entry = \"e\" }\n";
    let manifest = Manifest::parse("k.toml", text).unwrap();
    let defines: Vec<(&str, u32, u32)> =
        manifest.defines.iter().map(|d| (d.name.as_str(), d.value, d.location.line)).collect();
    assert_eq!(defines, [("DENSE_GEMV_BATCHM_MAX_M", 16, 2), ("KDA_VPB", 32, 3)]);
    // `[defines]` is not a kernel table.
    assert_eq!(manifest.tables.len(), 1);
    assert!(manifest.table("defines").is_none());
}

#[test]
fn defines_must_be_u32_values_with_c_names() {
    assert_eq!(
        errors("[defines]\nNEG = -1\nTEXT = \"16\"\n\"BAD-NAME\" = 1\nfn = 2\n"),
        [
            "k.toml:2:7: define `NEG`: invalid value: integer `-1`, expected u32",
            "k.toml:3:8: define `TEXT`: invalid type: string \"16\", expected u32",
            "k.toml:4:1: define \"BAD-NAME\" must be a C identifier that is not a Rust keyword",
            "k.toml:5:1: define \"fn\" must be a C identifier that is not a Rust keyword",
        ]
    );
    assert_eq!(errors("defines = 3\n"), ["k.toml:1:1: `defines` must be a table of `NAME = integer` lines"]);
}

#[test]
fn a_misspelt_key_and_a_missing_one_in_the_same_entry_are_both_reported() {
    assert_eq!(
        errors("[t]\ngemm = { module = \"gemm\", entyr = \"dense_gemm_bf16\", optinal = true }\n"),
        [
            // In file order: the missing key is blamed on the entry's table, which comes first.
            "k.toml:2:8: entry `gemm`: missing field `entry`",
            "k.toml:2:27: entry `gemm`: unknown field `entyr`, expected one of `module`, `entry`, `optional`, `doc`, `params`, `requires`, `safety`, `variants`, `unlaunched`",
            "k.toml:2:54: entry `gemm`: unknown field `optinal`, expected one of `module`, `entry`, `optional`, `doc`, `params`, `requires`, `safety`, `variants`, `unlaunched`",
        ]
    );
}

#[test]
fn twenty_thousand_duplicate_parameters_show_the_first_errors_and_count_the_rest() {
    // 20,001 parameters of one name: 20,000 duplicates, which once printed 1.6 MB.
    let params = vec!["u32 n"; 20_001].join(", ");
    let text = format!("[t]\nf = {{ module = \"m\", entry = \"e\", params = \"{params}\" }}\n");
    let error = Manifest::parse("k.toml", &text).unwrap_err();
    assert_eq!((error.diagnostics.len(), error.omitted), (MAX_REPORTED_ERRORS, 20_000 - MAX_REPORTED_ERRORS));
    let rendered = error.to_string();
    let lines: Vec<&str> = rendered.lines().collect();
    assert_eq!(lines.len(), MAX_REPORTED_ERRORS + 1);
    // The first duplicates, in file order: the second parameter is the first repeat.
    let prefix = "f = { module = \"m\", entry = \"e\", params = \"";
    for (i, line) in lines[..MAX_REPORTED_ERRORS].iter().enumerate() {
        let column = prefix.len() + (i + 1) * "u32 n, ".len() + "u32 ".len() + 1;
        let expected = format!("k.toml:2:{column}: entry `f`: parameter `n` is listed twice: first at 2:");
        assert!(line.starts_with(&expected), "{line}, expected {expected}");
    }
    assert_eq!(lines[MAX_REPORTED_ERRORS], "... and 19980 more errors");
    assert!(rendered.len() < 4_096, "{} bytes", rendered.len());
}

#[test]
fn the_build_table_holds_settings_not_entries_and_refuses_what_it_does_not_know() {
    let text = "[build]\nunlisted_kernels = \"allow\"\n\n[t]\ng = { module = \"m\", entry = \"e\" }\n";
    let manifest = Manifest::parse("k.toml", text).unwrap();
    assert_eq!(manifest.build.unlisted_kernels, kda_build::manifest::UnlistedKernels::Allow);
    assert_eq!(manifest.tables.len(), 1, "`[build]` is no kernel table");
    let default = Manifest::parse("k.toml", "[t]\ng = { module = \"m\", entry = \"e\" }\n").unwrap();
    assert_eq!(default.build.unlisted_kernels, kda_build::manifest::UnlistedKernels::Warn);
    assert_eq!(
        errors("[build]\nunlisted_kernels = \"ignore\"\n"),
        ["k.toml:2:20: [build]: unknown variant `ignore`, expected `warn` or `allow`"]
    );
    assert_eq!(
        errors("[build]\nunlisted = 1\n"),
        ["k.toml:2:1: [build]: unknown field `unlisted`, expected `unlisted_kernels`"]
    );
}
