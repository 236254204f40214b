//! Fuzzes `kda list --manifest PATH` on the inputs of `kda-build/tests/fuzz_manifest.rs` (the
//! fuzzer both run is `kda_test_support::fuzz`, in `test-support/`): in
//! process, the steps `main` takes (read the file, parse it, render the listing) on every input;
//! the binary itself on the named cases and a sample of the rest. Neither may panic or hang; a
//! rejection is the parser's located errors (the first of them, and a count of the rest; for
//! bytes that are not UTF-8, one error at the first such byte), and the binary's listing is the
//! in-process one.
//!
//! ```sh
//! cargo test --test fuzz_list -- --nocapture                                    # 2,000 inputs
//! KDA_FUZZ_CASES=100000 cargo test --release --test fuzz_list -- --nocapture
//! ```
//!
//! `KDA_FUZZ_BINARY_EVERY=N` runs the binary on every N-th random input (default 25).

use std::path::Path;
use std::process::Command;

use kda_build::manifest::{ReadError, read_manifest};
use kda_build::{Manifest, ManifestError};
use kda_test_support::fuzz::{self, Case, Config, Origin, Stage};

/// About 15 s of a debug test on two cores, binary runs included (the parser's own fuzzing is
/// `kda-build`'s, with 3,000).
const CI_CASES: u64 = 2_000;

#[test]
fn kda_list_survives_generated_and_mutated_manifests() {
    let config = Config::from_env(CI_CASES);
    let every: u64 =
        std::env::var("KDA_FUZZ_BINARY_EVERY").ok().and_then(|n| n.parse().ok()).unwrap_or(25).max(1);
    let root = fuzz::scratch_root(env!("CARGO_TARGET_TMPDIR")).join("fuzz_list");
    fuzz::run("fuzz_list", &root, &config, |case| {
        let input = case.input;
        let parsed = fuzz::parse(case, &input.bytes);
        case.count("1a. parser: the first step to reject", parsed.stage.name());
        let Some(listed) = in_process(case, parsed.stage) else { return };
        if input.origin == Origin::Named || case.index % every == 0 || config.only.is_some() {
            binary(case, &listed);
        }
    });
}

/// What `main`'s `list` does, and what it should print.
enum Listed {
    /// The listing, on stdout.
    Listing(String),
    /// The error, which `main` prints as `Error: {error:?}`.
    Error(String),
}

/// `list(Some(path))` of `kda-cli/src/main.rs`, step by step: read, parse, render.
fn in_process(case: &mut Case<'_>, stage: Stage) -> Option<Listed> {
    const SECTION: &str = "2. kda list, in process";
    let path = case.path.to_owned();
    let file = path.display().to_string();
    let text = match read_manifest(&path, &file) {
        Ok(text) => text,
        Err(ReadError::NotUtf8(error)) if stage == Stage::NotUtf8 => {
            // One located error, at the first byte that is not UTF-8.
            let lines = String::from_utf8_lossy(&case.input.bytes).split('\n').count();
            let rendered = error.to_string();
            if error.diagnostics.len() != 1 || fuzz::located(&rendered, &file, lines).is_none() {
                case.fail(format!("not UTF-8, but not one located error: {}", fuzz::short(&rendered)));
                return None;
            }
            case.count(SECTION, "not UTF-8: located read error");
            return Some(Listed::Error(rendered));
        }
        Err(error) => {
            case.fail(format!("reading the manifest: {error} (parser stage {stage:?})"));
            return None;
        }
    };
    let lines = text.split('\n').count();
    let result: Result<Manifest, ManifestError> =
        case.guard("kda list: parse", || Manifest::parse(&file, &text)).ok()?;
    match result {
        Err(error) => {
            let rendered = error.to_string();
            // Located lines, then the count of the rest where there are more than the cap.
            let mut shown = rendered.split('\n');
            let summary = error.summary();
            if let Some(summary) = &summary
                && shown.next_back() != Some(summary.as_str())
            {
                case.fail(format!("{} errors left out, but no line says so", error.omitted));
                return None;
            }
            if let Some(bad) = shown.find(|line| fuzz::located(line, &file, lines).is_none()) {
                case.fail(format!("an error line not located in the manifest: {}", fuzz::short(bad)));
                return None;
            }
            case.count(
                SECTION,
                if summary.is_some() {
                    "rejected: located, the rest counted"
                } else {
                    "rejected: located errors"
                },
            );
            Some(Listed::Error(rendered))
        }
        Ok(manifest) => {
            let listing =
                case.guard("kda list: render", || kda_cli::listing::render(&file, &manifest)).ok()?;
            // Each table's heading, in order, then the defines' (one pass: a manifest may have
            // 10,000 tables).
            let mut expected = manifest
                .tables
                .iter()
                .map(|table| format!("[{}]  (line {})", table.name, table.location.line))
                .chain((!manifest.defines.is_empty()).then(|| "[defines]".to_owned()));
            let mut next = expected.next();
            for line in listing.lines() {
                if next.as_deref().is_some_and(|heading| line.starts_with(heading)) {
                    next = expected.next();
                }
            }
            if next.is_none() {
                case.count(SECTION, "listed");
            } else {
                case.fail(format!("the listing leaves out {}", fuzz::short(&next.unwrap_or_default())));
            }
            Some(Listed::Listing(listing))
        }
    }
}

/// `kda list --manifest PATH`, the binary: exits 0 with the listing, or 1 with the error, and
/// never panics.
fn binary(case: &mut Case<'_>, listed: &Listed) {
    const SECTION: &str = "3. kda list --manifest, the binary";
    let path: &Path = case.path;
    let Ok(output) = case.guard("kda list: the binary", || {
        Command::new(env!("CARGO_BIN_EXE_kda")).arg("list").arg("--manifest").arg(path).output()
    }) else {
        return;
    };
    let output = match output {
        Ok(output) => output,
        Err(error) => return case.fail(format!("cannot run kda: {error}")),
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if stderr.contains("panicked") {
        return case.fail(format!("PANIC in kda list: {}", fuzz::short(&stderr)));
    }
    match listed {
        Listed::Listing(listing) if output.status.success() && stdout == listing.as_str() => {
            case.count(SECTION, "listed, as in process")
        }
        Listed::Error(error)
            if output.status.code() == Some(1) && stderr.starts_with(&format!("Error: {error}")) =>
        {
            case.count(SECTION, "rejected, as in process")
        }
        _ => case.fail(format!(
            "kda list exited {:?}; stdout {:?}; stderr {:?}",
            output.status.code(),
            fuzz::short(&stdout),
            fuzz::short(&stderr)
        )),
    }
}
