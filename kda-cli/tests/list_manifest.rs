//! `kda list --manifest PATH` on manifests no front end should read whole or print whole: an
//! endless file stops at the size cap, bytes that are not UTF-8 are located, and thousands of
//! errors print the first few and a count of the rest. Each exits 1 with the error, never a
//! panic or a hang.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kda_build::manifest::{MAX_MANIFEST_BYTES, MAX_REPORTED_ERRORS};

/// A scratch file of `bytes`, named for the test.
fn scratch(name: &str, bytes: &[u8]) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// `kda list --manifest PATH`, which must end within 30 s: a read that never stops fails
/// here, and the process is killed rather than left reading.
fn list(path: impl AsRef<Path>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kda"))
        .args(["list", "--manifest"])
        .arg(path.as_ref())
        // anyhow would print a backtrace after the error.
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run kda");
    // Drained as it runs: a child blocked on a full pipe would look like a hang.
    let stdout = drain(child.stdout.take().expect("piped stdout"));
    let stderr = drain(child.stderr.take().expect("piped stderr"));
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("cannot wait for kda") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("kda list --manifest {} did not end within 30 s", path.as_ref().display());
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let joined = |reader: JoinHandle<Vec<u8>>| reader.join().expect("a pipe reader panicked");
    Output { status, stdout: joined(stdout), stderr: joined(stderr) }
}

/// Everything `pipe` yields, read on a thread of its own.
fn drain(mut pipe: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        bytes
    })
}

/// The error `kda list` printed, after asserting it failed cleanly.
fn error_of(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(output.stdout.is_empty(), "{}", String::from_utf8_lossy(&output.stdout));
    stderr
}

#[cfg(unix)]
#[test]
fn an_endless_manifest_is_read_up_to_the_cap_and_refused() {
    let stderr = error_of(&list("/dev/zero"));
    assert_eq!(
        stderr.trim_end(),
        format!(
            "Error: cannot read the kernel manifest `/dev/zero`: it has more than {MAX_MANIFEST_BYTES} bytes \
             (16 MiB), the most a manifest may have"
        )
    );
}

#[test]
fn a_manifest_over_the_cap_is_refused_naming_it_and_the_cap() {
    let path = scratch("list_too_large.toml", &vec![b'#'; MAX_MANIFEST_BYTES as usize + 1]);
    let stderr = error_of(&list(&path));
    let expected = format!(
        "cannot read the kernel manifest `{}`: it has more than {MAX_MANIFEST_BYTES}",
        path.display()
    );
    assert!(stderr.starts_with(&format!("Error: {expected}")), "{stderr}");
}

#[test]
fn bytes_that_are_not_utf8_are_located_at_line_and_column() {
    let path = scratch("list_not_utf8.toml", b"[t]\nf = { module = \"m\", entry = \"\xE9t\xE9\" }\n");
    let stderr = error_of(&list(&path));
    assert_eq!(
        stderr.trim_end(),
        format!(
            "Error: {}:2:30: the manifest is not UTF-8: byte 0xE9 cannot be read as a character",
            path.display()
        )
    );
}

#[test]
fn twenty_thousand_errors_print_the_first_and_count_the_rest() {
    let params = vec!["u32 n"; 20_001].join(", ");
    let text = format!("[t]\nf = {{ module = \"m\", entry = \"e\", params = \"{params}\" }}\n");
    let path = scratch("list_many_errors.toml", text.as_bytes());
    let stderr = error_of(&list(&path));
    let lines: Vec<&str> = stderr.trim_end().lines().collect();
    assert_eq!(lines.len(), MAX_REPORTED_ERRORS + 1, "{stderr}");
    let file = path.display().to_string();
    assert!(lines[0].starts_with(&format!("Error: {file}:2:")), "{}", lines[0]);
    for line in &lines[1..MAX_REPORTED_ERRORS] {
        assert!(line.starts_with(&format!("{file}:2:")) && line.contains("is listed twice"), "{line}");
    }
    assert_eq!(lines[MAX_REPORTED_ERRORS], format!("... and {} more errors", 20_000 - MAX_REPORTED_ERRORS));
}

/// `kda list` without `--manifest`, run in `dir`.
fn list_in(dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kda"))
        .arg("list")
        .current_dir(dir)
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .output()
        .expect("cannot run kda")
}

#[test]
fn without_a_path_the_manifest_is_the_kernels_toml_of_the_current_directory() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("list_crate");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("kernels.toml"), "[mine]\nscale = { module = \"ops\", entry = \"scale_f32\" }\n")
        .unwrap();
    let output = list_in(&dir);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.starts_with("kernels.toml: 1 kernel table\n"), "{stdout}");
    assert!(stdout.contains("ops::scale_f32"), "{stdout}");
}

#[test]
fn a_directory_without_a_manifest_is_a_clear_error() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("list_no_crate");
    std::fs::create_dir_all(&dir).unwrap();
    let _ = std::fs::remove_file(dir.join("kernels.toml"));
    let stderr = error_of(&list_in(&dir));
    assert!(
        stderr.starts_with("Error: no `kernels.toml` in this directory: run `kda list` in a crate"),
        "{stderr}"
    );
}
