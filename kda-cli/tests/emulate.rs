//! `kda emulate` on a crate as a new user writes it (`tests/emulate/`): one correct kernel and
//! two that overrun, each because a `requires` was left out. With nothing of the crate's but its
//! manifest and kernels, the correct one passes and each overrun is reported with the entry, the
//! launch that found it and the sanitizer's own line for it, and the command exits 1. On the
//! kernel library (`examples/kernel-library`), every entry is launched, its strided inputs at
//! drawn layouts, or says why not; an entry with no launch and no reason fails the run
//! (`tests/emulate/reasons/`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

#[test]
fn kda_emulate_passes_the_correct_kernel_and_reports_each_overrun_with_its_launch() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/emulate");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kda-emulate");
    // Run where the crate is, as its author would: the manifest and kernels are found there.
    let output = Command::new(env!("CARGO_BIN_EXE_kda"))
        .args(["emulate", "--launches", "32", "--out"])
        .arg(&out)
        .current_dir(&crate_dir)
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("cannot run kda");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("elementwise::scale_f32 (line 8): ok, 32 launches"), "{stdout}");
    // An odd n: x[2i + 1] one past the input, found by AddressSanitizer in the kernel's line.
    let pair = stdout.split("elementwise::pair_sum_f32 (line 12): FAILED at launch ").nth(1).expect(&stdout);
    let pair = pair.split_once(": ").map_or(pair, |(_, launch)| launch);
    let n: u32 = pair.split(", ").next().and_then(|n| n.strip_prefix("n = ")?.parse().ok()).expect(pair);
    assert_eq!(n % 2, 1, "an even n reads no element past x: {pair}");
    assert!(pair.contains("AddressSanitizer: heap-buffer-overflow"), "{pair}");
    assert!(pair.contains("READ of size 4"), "{pair}");
    assert!(pair.contains("elementwise.cu:10"), "{pair}");
    // A block of more than 128 threads writes past `partial[128]`: UBSan's bounds check.
    let block = stdout.split("reduce::block_sum_f32 (line 16): FAILED at launch ").nth(1).expect(&stdout);
    let threads: u32 =
        block.split("block = (").nth(1).and_then(|rest| rest.split(',').next()?.parse().ok()).expect(block);
    assert!(threads > 128, "a block of {threads} threads stays inside partial[128]: {block}");
    assert!(block.contains("reduce.cu:7:14: runtime error: index"), "{block}");
    assert!(block.contains("out of bounds for type 'float [128]'"), "{block}");
    // Condensed: the report's shadow-memory dump is left out.
    assert!(!stdout.contains("Shadow byte legend"), "{stdout}");
    assert!(stdout.ends_with("3 entries, 2 failed\n"), "{stdout}");
}

/// `kda emulate --manifest <manifest> --kernels <kernels>`, plain (in process), with `extra`
/// arguments, its build in `out` under the test's temporary folder.
fn emulate(manifest: &Path, kernels: &Path, out: &str, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kda"))
        .args(["emulate", "--sanitizer", "none", "--manifest"])
        .arg(manifest)
        .arg("--kernels")
        .arg(kernels)
        .arg("--out")
        .arg(Path::new(env!("CARGO_TARGET_TMPDIR")).join(out))
        .args(extra)
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("cannot run kda")
}

/// The kernel library's crate.
fn library() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/kernel-library")
}

/// What `kda emulate` printed over the kernel library, one launch an entry asked: one run for the
/// tests that read it.
fn library_run() -> &'static str {
    static STDOUT: OnceLock<String> = OnceLock::new();
    STDOUT.get_or_init(|| {
        let library = library();
        let output = emulate(
            &library.join("kernels.toml"),
            &library.join("kernels"),
            "kda-emulate-library",
            &["--launches", "1"],
        );
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stdout.contains("45 entries, "), "stdout:\n{stdout}\nstderr:\n{stderr}");
        stdout
    })
}

/// The launches an entry's line says ran (a failed one included), or `None` for a line that gives
/// a reason for none.
fn launches(line: &str) -> Option<u32> {
    let count = |rest: &str| rest.split([' ', ',', ':']).next()?.parse().ok();
    if let Some((_, rest)) = line.split_once(": ok, ") {
        count(rest)
    } else if let Some((_, rest)) = line.split_once(": FAILED at launch ") {
        count(rest)
    } else {
        None
    }
}

#[test]
fn kda_emulate_launches_every_entry_of_the_kernel_library_or_repeats_why_not() {
    let stdout = library_run();
    let entries: Vec<&str> = stdout.lines().filter(|line| line.contains(" (line ")).collect();
    assert_eq!(entries.len(), 45, "{stdout}");
    let mut reasons = Vec::new();
    for line in &entries {
        match launches(line) {
            Some(count) => assert!(count >= 1, "{line}"),
            None => reasons.push(*line),
        }
    }
    // The gathers and scatters, whose reach is the caller's `safety` condition, repeated.
    assert_eq!(reasons.len(), 5, "{reasons:#?}");
    for line in reasons {
        assert!(line.contains(": 0 launches, by its `safety`: "), "{line}");
        assert!(line.contains("\"every `ids[i]` is a row of "), "{line}");
    }
}

#[test]
fn kda_emulate_launches_each_strided_entry_at_drawn_layouts() {
    let stdout = library_run();
    // Every variant of the unary ops (one layout) and of the binary op (two runs of strides).
    let strided: Vec<&str> =
        stdout.lines().filter(|line| line.starts_with("unary::") || line.starts_with("binary::")).collect();
    assert_eq!(strided.len(), 16, "{stdout}");
    for line in strided {
        assert!(line.contains(": ok, "), "{line}");
        assert!(launches(line).is_some_and(|count| count >= 1), "{line}");
    }
}

#[test]
fn kda_emulate_fails_an_entry_with_no_launch_unless_its_entry_says_why() {
    let reasons = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/emulate/reasons");
    let output = emulate(&reasons.join("kernels.toml"), &reasons.join("kernels"), "kda-emulate-reasons", &[]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "stdout:\n{stdout}\nstderr:\n{stderr}");
    for expected in [
        "opaque::opaque_table_a (line 5): FAILED, 0 launches: no `params`, so no launch can be checked",
        "opaque::opaque_table_b (line 7): 0 launches, unlaunched: \"its table comes from the model's own setup, \
         which no drawn launch has\"",
        "opaque::wide_block_f32 (line 10): FAILED, 0 launches: no launch of 4000 drawn keeps every `requires`",
        "opaque::wide_block_stated_f32 (line 14): 0 launches, unlaunched: \"a block of more than 2048 threads is \
         for a device to come\"",
    ] {
        assert!(stdout.contains(expected), "{expected}\n{stdout}");
    }
    assert!(stdout.contains("say why in its entry: `unlaunched = \"...\"`"), "{stdout}");
    assert!(stdout.ends_with("4 entries, 2 failed\n"), "{stdout}");

    // The two that say why, alone: the run passes.
    let output =
        emulate(&reasons.join("explained.toml"), &reasons.join("kernels"), "kda-emulate-explained", &[]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("0 launches, unlaunched: \"its table comes from"), "{stdout}");
    assert!(stdout.ends_with("2 entries, 0 failed\n"), "{stdout}");
}

#[test]
fn kda_emulate_outside_a_crate_says_where_the_manifest_should_be() {
    let output = Command::new(env!("CARGO_BIN_EXE_kda"))
        .arg("emulate")
        .current_dir(env!("CARGO_TARGET_TMPDIR"))
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("cannot run kda");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no `kernels.toml` in this directory: run `kda emulate` in a crate"), "{stderr}");
}
