//! The README's quick start, as a new user follows it: a crate made of exactly the files its code
//! blocks show, in a folder outside this workspace, with its `../kda/` paths pointing at this
//! workspace. It is built and tested offline, against this workspace's lock file and in its target
//! directory, so it costs one crate's build. The times of the steps a user waits for are printed
//! (`cargo test --test quick_start -- --nocapture`), not asserted.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The README's heading of the quick start.
const SECTION: &str = "## Quick start: your own crate";

/// An nvcc that is not there, for the build without one.
const NO_NVCC: &str = "/nonexistent/kda-quick-start/nvcc";

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The files the quick start's code blocks show, in order: each block holds one or more files,
/// each starting at a comment line that names it (`# Cargo.toml, ...`, `// src/lib.rs`).
fn quick_start_files(readme: &str) -> Vec<(String, String)> {
    let section = readme.split_once(SECTION).expect("README.md has the quick start").1;
    let section = section.split("\n## ").next().unwrap_or(section);
    let mut files: Vec<(String, String)> = Vec::new();
    let mut in_block = false;
    for line in section.lines() {
        if line.starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if !in_block {
            continue;
        }
        match file_named_by(line) {
            Some(path) => files.push((path.to_owned(), String::new())),
            None => {
                let (path, text) = files.last_mut().unwrap_or_else(|| panic!("a block starts with {line:?}"));
                assert!(!path.is_empty());
                text.push_str(line);
                text.push('\n');
            }
        }
    }
    files
}

/// The file a comment line names: its first word, when that is a path of one of the quick start's
/// kinds of file.
fn file_named_by(line: &str) -> Option<&str> {
    let comment = line.strip_prefix("# ").or_else(|| line.strip_prefix("// "))?;
    let word = comment.split([' ', ',']).next()?;
    [".toml", ".rs", ".cu"].iter().any(|extension| word.ends_with(extension)).then_some(word)
}

/// Writes the crate into `root`: the files as the README shows them, the manifest with a
/// `[package]` (the README's block goes after the user's own) and the paths of this workspace.
fn write_crate(root: &Path, files: &[(String, String)]) {
    let _ = std::fs::remove_dir_all(root);
    let kda = format!("{}/", workspace().display());
    for (path, text) in files {
        let text = match path.as_str() {
            "Cargo.toml" => format!(
                "[package]\nname = \"my-model\"\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n{}\n\
                 [workspace]\n",
                text.replace("../kda/", &kda)
            ),
            _ => text.clone(),
        };
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    std::fs::copy(workspace().join("Cargo.lock"), root.join("Cargo.lock")).unwrap();
}

/// A cargo command in the crate at `root`, offline, in this workspace's target directory, with
/// this test's toolchain (outside the workspace, its `rust-toolchain.toml` does not apply).
/// The workspace's target directory, which the crates share so as not to build kda again.
fn target() -> &'static Path {
    // `CARGO_TARGET_TMPDIR` is `<target>/tmp`.
    Path::new(env!("CARGO_TARGET_TMPDIR")).parent().expect("the target directory")
}

fn cargo(root: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO"));
    command.args(args).args(["--offline", "--color=never", "--manifest-path"]).arg(root.join("Cargo.toml"));
    command.env("CARGO_TARGET_DIR", target());
    let rustc = Path::new(env!("CARGO")).with_file_name("rustc");
    if rustc.is_file() {
        command.env("RUSTC", rustc);
    }
    command
}

/// Held by each test that builds a crate for its whole run: the crates share the package name
/// `my-model` and the target directory, and [`clean`] cleans every one of them.
fn one_crate_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static CRATES: std::sync::Mutex<()> = std::sync::Mutex::new(());
    CRATES.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Makes the next build of `my-model` a clean one: its fingerprints and build-script outputs go
/// from the shared target directory, so cargo builds it, its kernels and its tests again. Not
/// `cargo clean -p my-model`: that removes every artifact named like one of the crate's targets,
/// so its `emulated` test takes the `emulated` test binaries of the workspace's packages with it
/// while `cargo test --workspace` is running them.
fn clean() {
    for kind in [".fingerprint", "build"] {
        let dir = target().join("debug").join(kind);
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|error| panic!("{}: {error}", dir.display())) {
            let path = entry.unwrap().path();
            if path
                .file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with("my-model-"))
            {
                std::fs::remove_dir_all(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
            }
        }
    }
}

/// Runs `command`, asserting it succeeds, and prints how long it took as `step`; its stderr.
fn timed(step: &str, mut command: Command) -> String {
    let start = Instant::now();
    let output = command.output().unwrap_or_else(|error| panic!("{step}: cannot run cargo: {error}"));
    let seconds = start.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{step} failed:\n{stderr}\n{stdout}");
    println!("quick start: {step}: {seconds:.1} s");
    stderr + &stdout
}

/// Runs `command`, asserting it fails, and prints how long it took as `step`; its stderr and
/// stdout.
fn timed_failure(step: &str, mut command: Command) -> String {
    let start = Instant::now();
    let output = command.output().unwrap_or_else(|error| panic!("{step}: cannot run cargo: {error}"));
    let seconds = start.elapsed().as_secs_f64();
    let text =
        String::from_utf8_lossy(&output.stderr).into_owned() + &String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success(), "{step} succeeded:\n{text}");
    println!("quick start: {step}: {seconds:.1} s");
    text
}

/// Replaces the first `from` in the file at `path` with `to`, as a user's edit would.
fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{}: no {from:?}", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

#[test]
fn the_readme_quick_start_names_every_file_once() {
    let readme = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    let paths: Vec<String> = quick_start_files(&readme).into_iter().map(|(path, _)| path).collect();
    assert_eq!(
        paths,
        ["Cargo.toml", "kernels.toml", "kernels/scale.cu", "build.rs", "src/lib.rs", "tests/emulated.rs"]
    );
    assert_eq!(file_named_by("    // x[i] *= 2 in kernels/scale.cu"), None, "an indented comment is code");
    assert_eq!(file_named_by("# the kernels also built"), None);
}

#[test]
fn a_crate_made_from_the_readme_quick_start_builds_and_passes_its_test_on_the_emulator() {
    let _alone = one_crate_at_a_time();
    let readme = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    let files = quick_start_files(&readme);
    // Outside the workspace, as a user's crate is.
    let root: PathBuf = std::env::temp_dir().join(format!("kda-quick-start-{}/my-model", std::process::id()));
    write_crate(&root, &files);
    let build = || cargo(&root, &["test", "--no-run"]);
    let nvcc = kda_build::cuda::Nvcc::find(&[]).is_ok();
    println!("quick start in {}; nvcc {}", root.display(), if nvcc { "found" } else { "absent" });

    timed("first build (with the dependencies the shared target directory lacks)", build());
    clean();
    let mut without_nvcc = build();
    without_nvcc.env("NVCC", NO_NVCC).env_remove("KDA_REQUIRE_NVCC");
    timed("clean build without nvcc", without_nvcc);
    clean();
    let stderr = timed(if nvcc { "clean build with nvcc" } else { "clean build (nvcc absent)" }, build());
    assert_eq!(
        stderr.contains("no CUDA kernel images are built"),
        !nvcc,
        "the build warns exactly when there is no nvcc:\n{stderr}"
    );

    edit(&root.join("kernels/scale.cu"), "x[i] *= factor;", "x[i] = x[i] * factor;");
    timed("edit of one .cu", build());
    edit(&root.join("kernels.toml"), "factor\" }", "factor\", doc = \"`x[i] *= factor`\" }");
    timed("edit of the manifest", build());
    let output = timed("cargo test", cargo(&root, &["test"]));
    assert!(output.contains("test scale_runs_on_the_emulator ... ok"), "{output}");
    std::fs::remove_dir_all(root.parent().unwrap()).unwrap();
}

#[test]
fn a_crate_made_from_the_readme_quick_start_runs_its_test_under_each_sanitizer_by_the_switch() {
    let _alone = one_crate_at_a_time();
    let readme = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    let root: PathBuf =
        std::env::temp_dir().join(format!("kda-quick-start-sanitized-{}/my-model", std::process::id()));
    write_crate(&root, &quick_start_files(&readme));
    let kernel = root.join("kernels/scale.cu");
    // The same `cargo test`, the switch its only difference; no nvcc, which the sanitizers do not need.
    let test = |sanitizer: &str| {
        let mut command = cargo(&root, &["test"]);
        command.env("KDA_EMULATOR_SANITIZER", sanitizer).env("NVCC", NO_NVCC).env_remove("KDA_REQUIRE_NVCC");
        command
    };

    let output = timed_failure("a switch naming no sanitizer", test("memory"));
    assert!(
        output.contains(
            "KDA_EMULATOR_SANITIZER=\"memory\": expected `address` (AddressSanitizer + UBSan), \
             `thread` (ThreadSanitizer) or `none`"
        ),
        "{output}"
    );
    for sanitizer in ["address", "thread"] {
        let output = timed(&format!("cargo test under {sanitizer}"), test(sanitizer));
        assert!(output.contains("test scale_runs_on_the_emulator ... ok"), "{output}");
    }

    // A thread past the buffer: `x[3]` of three elements.
    edit(&kernel, "i < n)", "i <= n)");
    let output = timed_failure("cargo test under address, an overrun planted", test("address"));
    assert!(output.contains("AddressSanitizer + UBSan reported an error in this launch"), "{output}");
    assert!(output.contains("ERROR: AddressSanitizer: heap-buffer-overflow"), "{output}");
    assert!(output.contains("scale.cu:2"), "the report names the kernel's line: {output}");

    // Thread 0 reads `x[1]` while thread 1 scales it, with no barrier between them: a race that
    // changes no result, so only ThreadSanitizer sees it.
    let race = "if (threadIdx.x == 0 && n > 1) { volatile float seen = x[1]; (void)seen; }";
    edit(&kernel, "i <= n) x[i] *= factor;", &format!("i < n) x[i] *= factor;\n    {race}"));
    let output = timed_failure("cargo test under thread, a race planted", test("thread"));
    assert!(output.contains("ThreadSanitizer reported an error in this launch"), "{output}");
    assert!(output.contains("WARNING: ThreadSanitizer: data race"), "{output}");
    std::fs::remove_dir_all(root.parent().unwrap()).unwrap();
}
