//! Fuzzes the front ends of `kda-build` that read a manifest: the parser, the derive's code
//! generator (feature `codegen`) and the build step, on generated, mutated, garbage and
//! pathological manifests (the fuzzer is `kda_test_support::fuzz`, in `test-support/`, shared with
//! `kda-cli/tests/fuzz_list.rs`). None may panic or hang; every rejection must be located.
//!
//! ```sh
//! cargo test -p kda-build --features codegen --test fuzz_manifest -- --nocapture      # 3,000 inputs
//! KDA_FUZZ_CASES=100000 cargo test --release -p kda-build --features codegen --test fuzz_manifest -- --nocapture
//! ```
//!
//! `cargo test --workspace` builds kda-build with `codegen` (the root package's dev-dependency
//! turns it on), so the derive is fuzzed there too; without the feature that stage is skipped.

use kda_build::Manifest;
use kda_build::cuda::{KernelBuild, Problem};
use kda_test_support::fuzz::{self, Case, Config, FILE, Parsed, Stage};

/// Enough for CI (about 15 s of a debug test on two cores); the documented run sets
/// `KDA_FUZZ_CASES=100000`.
const CI_CASES: u64 = 3_000;

#[test]
fn every_front_end_survives_generated_and_mutated_manifests() {
    let config = Config::from_env(CI_CASES);
    let root = fuzz::scratch_root(env!("CARGO_TARGET_TMPDIR")).join("fuzz_manifest");
    fuzz::run("fuzz_manifest", &root, &config, |case| {
        let input = case.input;
        let parsed = fuzz::parse(case, &input.bytes);
        case.count("1a. parser: the first step to reject", parsed.stage.name());
        derive(case, &parsed);
        build(case, &parsed);
    });
}

/// The manifest's lines, as a diagnostic's line may count them (one past the last for an error
/// at the end).
fn line_count(parsed: &Parsed) -> usize {
    parsed.text.as_deref().map_or(0, |text| text.split('\n').count())
}

// ---------------------------------------------------------------------------------------------
// The derive.

#[cfg(not(feature = "codegen"))]
fn derive(case: &mut Case<'_>, _: &Parsed) {
    case.count("2. derive (codegen)", "skipped: feature codegen off");
}

/// `#[derive(KernelTable)] #[kernel_table(manifest = "<abs path>", table = "...")] struct T;`:
/// the output must parse as Rust; with a manifest error, its compile errors are exactly the
/// parser's diagnostics, each `FILE:LINE:COL: ...`; with a good manifest, none.
#[cfg(feature = "codegen")]
fn derive(case: &mut Case<'_>, parsed: &Parsed) {
    use kda_build::codegen::{DeriveSite, derive_kernel_table};
    use quote::quote;

    const SECTION: &str = "2. derive (codegen)";
    let path = case.path.to_str().expect("the scratch path is UTF-8").to_owned();
    // A table of the manifest when it has one (now and then one it lacks), else the one the
    // generator meant.
    let table = match &parsed.result {
        Some(Ok(manifest)) if case.index % 20 != 7 && !manifest.tables.is_empty() => {
            manifest.tables[(case.index % manifest.tables.len() as u64) as usize].name.clone()
        }
        Some(Ok(_)) => "no_such_table".to_owned(),
        _ => case.input.table.clone(),
    };
    let tokens = quote! {
        #[kernel_table(manifest = #path, table = #table)]
        struct T;
    };
    let Ok(output) = case.guard("derive", || derive_kernel_table(tokens, &DeriveSite::default())) else {
        return;
    };
    let errors = compile_errors(output.clone());
    let Ok(file) = case.guard("derive output (syn::File)", || syn::parse2::<syn::File>(output)) else {
        return;
    };
    if let Err(error) = file {
        return case.fail(format!("the derive's output is not Rust: {error}"));
    }
    let lines = line_count(parsed);
    match &parsed.result {
        None if parsed.stage == Stage::NotUtf8 => {
            let clean = errors.len() == 1
                && errors[0].contains(": the manifest is not UTF-8: ")
                // Not text, so its lines are not counted: any line located is accepted.
                && fuzz::located(&errors[0], &path, u32::MAX as usize).is_some();
            if clean {
                case.count(SECTION, "not UTF-8: one located error");
            } else {
                case.fail(format!("non-UTF-8 manifest: expected one read error, got {errors:?}"));
            }
        }
        None => {}
        Some(Err(error)) => {
            // The parser's errors as the derive names the file (by its path), then the count of
            // the rest.
            let expected: Vec<String> =
                error.diagnostics.iter().map(|d| d.render(&path)).chain(error.summary()).collect();
            if errors != expected {
                return case.fail(format!(
                    "the derive reported {} errors, the parser {}: first {:?} vs {:?}",
                    errors.len(),
                    expected.len(),
                    errors.first().map(|e| fuzz::short(e)),
                    expected.first().map(|e| fuzz::short(e))
                ));
            }
            let kept = &errors[..error.diagnostics.len()];
            if let Some(bad) = kept.iter().find(|message| fuzz::located(message, &path, lines).is_none()) {
                return case
                    .fail(format!("a compile error not located in the manifest: {}", fuzz::short(bad)));
            }
            case.count(SECTION, "rejected: located compile errors");
        }
        Some(Ok(manifest)) => match manifest.table(&table) {
            Some(_) if errors.is_empty() => case.count(SECTION, "table generated"),
            Some(_) => {
                case.fail(format!("a valid manifest gave compile errors: {:?}", fuzz::short(&errors[0])))
            }
            None if errors.len() == 1 && errors[0].contains(&format!("has no table `[{table}]`")) => {
                case.count(SECTION, "rejected: table not in manifest")
            }
            None => case.fail(format!("a missing table gave {errors:?}")),
        },
    }
}

/// The messages of every `compile_error!` in `tokens`.
#[cfg(feature = "codegen")]
fn compile_errors(tokens: proc_macro2::TokenStream) -> Vec<String> {
    use proc_macro2::TokenTree;

    fn walk(tokens: proc_macro2::TokenStream, out: &mut Vec<String>) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        for (i, tree) in trees.iter().enumerate() {
            match tree {
                TokenTree::Ident(ident) if ident == "compile_error" => {
                    if let (Some(TokenTree::Punct(bang)), Some(TokenTree::Group(group))) =
                        (trees.get(i + 1), trees.get(i + 2))
                        && bang.as_char() == '!'
                    {
                        let message = syn::parse2::<syn::LitStr>(group.stream()).map_or_else(
                            |error| format!("(unreadable compile_error: {error})"),
                            |lit| lit.value(),
                        );
                        out.push(message);
                    }
                }
                TokenTree::Group(group) => walk(group.stream(), out),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(tokens, &mut out);
    out
}

// ---------------------------------------------------------------------------------------------
// The build step.

/// `KernelBuild::new(manifest, kernels, out).without_nvcc().run()` with an empty `<module>.cu`
/// for each module the manifest names (one in sixteen runs leaves one out): a manifest error is
/// the parser's, a missing source names its manifest line, a good manifest generates its defines.
fn build(case: &mut Case<'_>, parsed: &Parsed) {
    const SECTION: &str = "3. build step (without nvcc)";
    let kernels = case.dir.join("kernels");
    let out = case.dir.join("out");
    for dir in [&kernels, &out] {
        std::fs::create_dir_all(dir).expect("a scratch directory");
    }
    let mut created = Vec::new();
    let mut missing = None;
    if let Some(Ok(manifest)) = &parsed.result {
        let mut modules: Vec<(&str, u32)> = Vec::new();
        for entry in manifest.tables.iter().flat_map(|table| &table.entries) {
            if !modules.iter().any(|(module, _)| *module == entry.module) {
                modules.push((&entry.module, entry.location.line));
            }
        }
        let left_out =
            (case.index % 16 == 3 && !modules.is_empty()).then(|| (case.index / 16) as usize % modules.len());
        for (at, &(module, line)) in modules.iter().enumerate() {
            let source = kernels.join(format!("{module}.cu"));
            // A name past the file system's limit cannot be created: the build must say so.
            if Some(at) != left_out && std::fs::write(&source, "").is_ok() {
                created.push(source);
            } else if missing.is_none() {
                missing = Some((module.to_owned(), line));
            }
        }
    }
    let manifest_path = case.path.to_owned();
    let result =
        case.guard("build step", || KernelBuild::new(&manifest_path, &kernels, &out).without_nvcc().run());
    for source in created {
        let _ = std::fs::remove_file(source);
    }
    let Ok(result) = result else { return };
    let lines = line_count(parsed);
    match (&parsed.result, result) {
        (None, Ok(output)) if parsed.stage == Stage::NotUtf8 => match &output.manifest_error {
            // Left to the derive, which reports the same located error.
            Some(error) if error.to_string().contains(": the manifest is not UTF-8: ") => {
                case.count(SECTION, "not UTF-8: left to the derive, located")
            }
            other => case.fail(format!("non-UTF-8 manifest: the build said {other:?}")),
        },
        (None, _) if parsed.stage != Stage::NotUtf8 => {}
        (Some(Err(expected)), Ok(output)) => match &output.manifest_error {
            // Left to the derive, which reports it located; the build still writes a file that
            // compiles, with the defines that read well.
            Some(error) if error == expected && output.problems.is_empty() => {
                match generated_file(&output.generated) {
                    Ok(_) => case.count(SECTION, "rejected: left to the derive, defines recovered"),
                    Err(why) => case.fail(why),
                }
            }
            Some(error) => case.fail(format!(
                "the build's manifest error differs from the parser's: {}",
                fuzz::short(&error.to_string())
            )),
            None => case.fail("the parser rejected the manifest, the build did not".into()),
        },
        (Some(Ok(manifest)), result) => match (missing, result) {
            (Some((module, line)), Ok(output))
                if matches!(output.problems.as_slice(), [Problem::MissingSource { .. }]) =>
            {
                let Problem::MissingSource { module: named, listed_at, .. } = &output.problems[0] else {
                    unreachable!()
                };
                if *named == module
                    && listed_at.starts_with(&format!("{FILE}:{line}:"))
                    && (line as usize) <= lines
                {
                    case.count(SECTION, "rejected: missing source (located)");
                } else {
                    case.fail(format!(
                        "expected `{}` missing at line {line}: {}",
                        fuzz::short(&module),
                        fuzz::short(&output.problems[0].to_string())
                    ));
                }
            }
            (None, Ok(output)) if output.problems.is_empty() => {
                check_generated(case, manifest, &output.generated)
            }
            (missing, result) => case.fail(format!(
                "missing source {:?}: the build returned {}",
                missing.map(|(module, line)| (fuzz::short(&module), line)),
                match result {
                    Ok(output) => format!("Ok with problems {:?}", output.problems),
                    Err(error) => fuzz::short(&error.to_string()),
                }
            )),
        },
        (_, result) => case.fail(format!(
            "parser said {:?}, the build {}",
            parsed.stage,
            match result {
                Ok(_) => "Ok".to_owned(),
                Err(error) => fuzz::short(&error.to_string()),
            }
        )),
    }
}

/// The generated file's text, once it parses as a Rust file.
fn generated_file(generated: &std::path::Path) -> Result<String, String> {
    let source = std::fs::read_to_string(generated)
        .map_err(|_| format!("the build wrote no {}", generated.display()))?;
    syn::parse_file(&source).map_err(|error| format!("the generated file is not Rust: {error}"))?;
    Ok(source)
}

fn check_generated(case: &mut Case<'_>, manifest: &Manifest, generated: &std::path::Path) {
    let source = match generated_file(generated) {
        Ok(source) => source,
        Err(why) => return case.fail(why),
    };
    let missing = manifest
        .defines
        .iter()
        .find(|define| !source.contains(&format!("pub const {}: u32 = {};", define.name, define.value)));
    match missing {
        None if source.contains("/* missing */ ::core::option::Option::Some(") => {
            case.count("3. build step (without nvcc)", "built: defines generated")
        }
        None => case.fail("the build without nvcc does not say why there are no images".into()),
        Some(define) => case.fail(format!("define `{}` is not generated", fuzz::short(&define.name))),
    }
}
