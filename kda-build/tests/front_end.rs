//! What a user of a real crate sees when its manifest or kernels are wrong: a crate built by
//! cargo (the derive, `build.rs` with the build step, `include_kernels!`), each mistake reported
//! once, as a compiler error located in the manifest, never as a failed build script.
//!
//! The crate is written under cargo's test scratch folder and built offline against this
//! workspace's lock file, in a target directory kept between runs, so only the first run builds
//! its dependencies.

use std::path::{Path, PathBuf};
use std::process::Command;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/front_end");

/// An nvcc that is not there, for the builds without one.
const NO_NVCC: &str = "/nonexistent/kda-front-end/nvcc";

/// Writes the test crate for `case` with `manifest` as its `kernels.toml`, builds it, and
/// returns whether the build succeeded and cargo's stderr. Cases named `nvcc-*` check what only
/// compiled kernels show: their build requires nvcc, so a missing one fails loudly. Cases named
/// `emu-*` build with the crate's feature `emulation` and no nvcc; `absent-*` require nvcc and
/// have none.
fn build_crate(case: &str, manifest: &str) -> (bool, String) {
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("front-end");
    let root = scratch.join(case);
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("src")).unwrap();
    copy_dir(&Path::new(FIXTURE).join("kernels"), &root.join("kernels"));
    std::fs::copy(Path::new(FIXTURE).join("build.rs"), root.join("build.rs")).unwrap();
    std::fs::copy(Path::new(FIXTURE).join("lib.rs"), root.join("src/lib.rs")).unwrap();
    std::fs::write(root.join("kernels.toml"), manifest).unwrap();
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    std::fs::copy(workspace.join("Cargo.lock"), root.join("Cargo.lock")).unwrap();
    let path = |package: &str| workspace.join(package).display().to_string();
    std::fs::write(
        root.join("Cargo.toml"),
        format!(
            "[package]\nname = \"front-end-{case}\"\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n\
             [features]\nemulation = [\"kda-runtime/emulation\"]\n\n[dependencies]\nkda-runtime = {{ path = {:?} }}\n\n\
             [build-dependencies]\nkda-build = {{ path = {:?} }}\n\n[workspace]\n",
            path("kda-runtime"),
            path("kda-build"),
        ),
    )
    .unwrap();
    let mut cargo = Command::new(env!("CARGO"));
    cargo.args(["build", "--offline", "--color=never", "--manifest-path"]).arg(root.join("Cargo.toml"));
    cargo.env("CARGO_TARGET_DIR", scratch.join("target"));
    if case.starts_with("emu-") {
        cargo.arg("--features=emulation");
    }
    if case.starts_with("emu-") || case.starts_with("absent-") {
        cargo.env("NVCC", NO_NVCC);
    }
    // Each case says whether nvcc is required, whatever the environment running the test does
    // (CI requires it of every build).
    if case.starts_with("nvcc-") || case.starts_with("absent-") {
        cargo.env("KDA_REQUIRE_NVCC", "1");
    } else {
        cargo.env_remove("KDA_REQUIRE_NVCC");
    }
    let output = cargo.output().unwrap();
    (output.status.success(), String::from_utf8_lossy(&output.stderr).into_owned())
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for file in std::fs::read_dir(from).unwrap() {
        let file: PathBuf = file.unwrap().path();
        std::fs::copy(&file, to.join(file.file_name().unwrap())).unwrap();
    }
}

/// Asserts the build failed with exactly the compiler errors `located` (each the start of one
/// error's message, in order), and not through its build script.
fn assert_located_errors(case: &str, manifest: &str, located: &[&str]) {
    let (success, stderr) = build_crate(case, manifest);
    assert!(!success, "the build should fail:\n{stderr}");
    assert!(!stderr.contains("failed to run custom build command"), "{stderr}");
    let errors: Vec<&str> = stderr
        .lines()
        .filter_map(|line| line.strip_prefix("error: "))
        // cargo's summary of the failed crate
        .filter(|message| !message.starts_with("could not compile"))
        .collect();
    assert_eq!(errors.len(), located.len(), "{stderr}");
    for (error, expected) in errors.iter().zip(located) {
        assert!(error.starts_with(expected), "expected `{expected}...`:\n{stderr}");
    }
}

#[test]
fn a_misspelt_manifest_key_is_one_located_compiler_error() {
    assert_located_errors(
        "misspelt",
        "[front_end]\nscale = { module = \"frontend\", entyr = \"frontend_scale\" }\n",
        &[
            "kernels.toml:2:9: entry `scale`: missing field `entry`",
            "kernels.toml:2:32: entry `scale`: unknown field `entyr`",
        ],
    );
}

#[test]
fn a_good_crate_builds() {
    let manifest = "[front_end]\nscale = { module = \"frontend\", entry = \"frontend_scale\", \
                    params = \"f32 x[n], f32 factor, u32 n\" }\n";
    let (success, stderr) = build_crate("good", manifest);
    assert!(success, "{stderr}");
}

/// A manifest listing an entry `kernels/frontend.cu` lacks, and the error it gives.
const MISSING_ENTRY: (&str, &str) = (
    "[front_end]\nscale = { module = \"frontend\", entry = \"frontend_scale\" }\n\
     gone = { module = \"frontend\", entry = \"frontend_gone\" }\n",
    "kernels.toml:3:1: `frontend::frontend_gone` is not in ",
);

/// A manifest whose params the kernel contradicts, and the error it gives.
const WRONG_PARAMS: (&str, &str) = (
    "[front_end]\nscale = { module = \"frontend\", entry = \"frontend_scale\", \
     params = \"f32 x[n], f32 factor, i32 n\" }\n",
    "kernels.toml:2:1: frontend::frontend_scale parameter 2 `n`: the manifest declares `i32`, the kernel declares `u32`",
);

#[test]
#[ignore = "needs nvcc: .ci/run installs it and runs this with --ignored"]
fn an_entry_the_kernels_lack_is_one_located_compiler_error() {
    assert_located_errors("nvcc-missing-entry", MISSING_ENTRY.0, &[MISSING_ENTRY.1]);
}

#[test]
#[ignore = "needs nvcc: .ci/run installs it and runs this with --ignored"]
fn params_the_kernel_contradicts_are_one_located_compiler_error() {
    assert_located_errors("nvcc-wrong-params", WRONG_PARAMS.0, &[WRONG_PARAMS.1]);
}

#[test]
fn without_nvcc_the_emulated_build_reports_a_missing_entry_as_the_same_one_error() {
    assert_located_errors("emu-missing-entry", MISSING_ENTRY.0, &[MISSING_ENTRY.1]);
}

#[test]
fn without_nvcc_the_emulated_build_reports_contradicted_params_as_the_same_one_error() {
    assert_located_errors("emu-wrong-params", WRONG_PARAMS.0, &[WRONG_PARAMS.1]);
}

#[test]
fn nvcc_required_and_absent_is_one_located_compiler_error() {
    assert_located_errors(
        "absent-nvcc",
        "[front_end]\nscale = { module = \"frontend\", entry = \"frontend_scale\" }\n",
        &[&format!(
            "kernels.toml: nvcc is required (KDA_REQUIRE_NVCC=1) but was not found: cannot run {NO_NVCC}"
        )],
    );
}
