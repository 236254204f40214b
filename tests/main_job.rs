//! The main job (`kda` without a subcommand) refuses token counts past the block's bound
//! (`KdaGeometry::max_tokens`) before it allocates anything: it exits 1 with an error naming the
//! option and the bound, never a panic (a sum that wraps) or an abort (an allocation that fails).

use std::process::{Command, Output};

use kda::geometry::KdaGeometry;

/// `kda --backend cpu --preset tiny ARGS`.
fn kda(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kda-block"))
        .args(["--backend", "cpu", "--preset", "tiny"])
        .args(args)
        // anyhow would print a backtrace after the error.
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .output()
        .expect("cannot run kda")
}

/// Asserts `kda ARGS` fails cleanly with `expected` at the start of its error.
fn assert_refused(args: &[&str], expected: &str) {
    let output = kda(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked") && !stderr.contains("memory allocation"), "{args:?}: {stderr}");
    assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
    let max = KdaGeometry::tiny().max_tokens();
    let bound = format!("the block takes at most {max} tokens at this geometry");
    assert!(stderr.starts_with(&format!("Error: {expected}: {bound}")), "{args:?}: {stderr}");
    // Refused before a backend is opened or anything run.
    assert!(output.stdout.is_empty(), "{args:?}: {}", String::from_utf8_lossy(&output.stdout));
}

#[test]
fn a_prompt_and_decode_whose_sum_wraps_u32_are_refused() {
    assert_refused(&["--prompt", "4294967295", "--decode", "1"], "--prompt = 4294967295 tokens");
    assert_refused(&["--prompt", "1", "--decode", "4294967295"], "--prompt + --decode = 4294967296 tokens");
}

#[test]
fn a_prompt_past_the_bound_is_refused_before_anything_is_allocated() {
    // 25.6 GB of inputs at `tiny`, and 1 TB: the allocation would abort the process.
    assert_refused(&["--prompt", "100000000", "--decode", "1"], "--prompt = 100000000 tokens");
    assert_refused(&["--prompt", "4000000000", "--decode", "0"], "--prompt = 4000000000 tokens");
}

#[test]
fn a_batched_decode_past_the_bound_is_refused_before_the_job_runs() {
    let max = KdaGeometry::tiny().max_tokens();
    let steps = (max / 64 + 1).to_string();
    let tokens = 64 * (u64::from(max) / 64 + 1);
    assert_refused(
        &["--prompt", "1", "--decode", &steps, "--batch", "64"],
        &format!("--batch × --decode = {tokens} tokens"),
    );
}
