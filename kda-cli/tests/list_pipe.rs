//! `kda list` into a reader that stops early (`kda list | head -1`): the closed pipe ends the
//! listing quietly, with success, instead of a panic.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[test]
fn a_listing_piped_into_a_reader_that_stops_early_ends_without_a_panic() {
    // Long enough that the listing outgrows the pipe's buffer before the reader closes it.
    let mut manifest = String::from("[t]\n");
    for i in 0..20_000 {
        manifest.push_str(&format!("e{i} = {{ module = \"m\", entry = \"k{i}\" }}\n"));
    }
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("list_pipe.toml");
    std::fs::write(&path, manifest).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kda"))
        .arg("list")
        .arg("--manifest")
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.contains("1 kernel table"), "{first}");
    // The reader is dropped here: the rest of the listing meets a closed pipe.
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{}: {stderr}", output.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
}
