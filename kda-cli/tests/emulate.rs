//! `kda emulate` on a crate as a new user writes it (`tests/emulate/`): one correct kernel and
//! two that overrun, each because a `requires` was left out. With nothing of the crate's but its
//! manifest and kernels, the correct one passes and each overrun is reported with the entry, the
//! launch that found it and the sanitizer's own line for it, and the command exits 1.

use std::path::Path;
use std::process::Command;

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
    let pair = stdout.split("elementwise::pair_sum_f32 (line 12): FAILED at ").nth(1).expect(&stdout);
    let n: u32 = pair.split(", ").next().and_then(|n| n.strip_prefix("n = ")?.parse().ok()).expect(pair);
    assert_eq!(n % 2, 1, "an even n reads no element past x: {pair}");
    assert!(pair.contains("AddressSanitizer: heap-buffer-overflow"), "{pair}");
    assert!(pair.contains("READ of size 4"), "{pair}");
    assert!(pair.contains("elementwise.cu:10"), "{pair}");
    // A block of more than 128 threads writes past `partial[128]`: UBSan's bounds check.
    let block = stdout.split("reduce::block_sum_f32 (line 16): FAILED at ").nth(1).expect(&stdout);
    let threads: u32 =
        block.split("block = (").nth(1).and_then(|rest| rest.split(',').next()?.parse().ok()).expect(block);
    assert!(threads > 128, "a block of {threads} threads stays inside partial[128]: {block}");
    assert!(block.contains("reduce.cu:7:14: runtime error: index"), "{block}");
    assert!(block.contains("out of bounds for type 'float [128]'"), "{block}");
    // Condensed: the report's shadow-memory dump is left out.
    assert!(!stdout.contains("Shadow byte legend"), "{stdout}");
    assert!(stdout.ends_with("3 entries, 2 failed\n"), "{stdout}");
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
