//! The CUDA build step on fixture kernels: the entry check with the real nvcc (which CI installs
//! with scripts/install-cuda.sh; `cargo test -p kda-build --test cuda_build -- --ignored`), and
//! the checks that need no nvcc.

use std::path::{Path, PathBuf};

use kda_build::cuda::{BuildError, KernelBuild, Nvcc};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cuda")
}

/// A fresh output folder for one test.
fn out_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kda-cuda-build-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn build(manifest: &str, test: &str) -> KernelBuild {
    KernelBuild::new(fixtures().join(manifest), fixtures().join("kernels"), out_dir(test))
}

fn nvcc() -> Nvcc {
    Nvcc::find().expect("this test needs nvcc: run scripts/install-cuda.sh or set NVCC")
}

#[test]
fn a_module_without_a_source_is_an_error_with_or_without_nvcc() {
    let error = build("no_source.toml", "no-source").without_nvcc().run().unwrap_err();
    let BuildError::MissingSource { module, line, .. } = &error else { panic!("{error}") };
    assert_eq!((module.as_str(), *line), ("never_written", 3));
    assert!(error.to_string().contains("never_written.cu"), "{error}");
}

#[test]
fn without_nvcc_the_build_warns_and_embeds_nothing_unless_nvcc_is_required() {
    let error = build("good.toml", "required").without_nvcc().require_nvcc(true).run().unwrap_err();
    assert!(matches!(error, BuildError::NvccRequired(_)), "{error}");

    let output = build("good.toml", "optional").without_nvcc().run().unwrap();
    assert!(output.images.is_empty());
    assert!(
        output.warnings.iter().any(|w| w.contains("no CUDA kernel images are built")),
        "{:?}",
        output.warnings
    );
    let generated = std::fs::read_to_string(&output.generated).unwrap();
    assert!(generated.contains("pub const FIXTURE_BLOCK: u32 = 128;"), "{generated}");
    assert!(generated.contains("KERNEL_IMAGES_MISSING: Option<&str> = Some("), "{generated}");
}

#[test]
#[ignore = "needs nvcc: .ci/run installs it and runs this with --ignored"]
fn a_mangled_entry_and_a_missing_one_fail_the_build_naming_them() {
    let error = build("broken.toml", "broken").nvcc(nvcc()).run().unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, BuildError::Entries { ref problems } if problems.len() == 2), "{message}");
    let file = fixtures().join("kernels/fixture.cu").display().to_string();
    assert!(
        message.contains(&format!(
            "broken.toml:4: `fixture::fixture_scale` is exported by {file} under the C++-mangled name `_Z13fixture_scalePffj`"
        )),
        "{message}"
    );
    assert!(
        message.contains(&format!("broken.toml:5: `fixture::fixture_gone` is not in {file}, which exports")),
        "{message}"
    );
}

#[test]
#[ignore = "needs nvcc: .ci/run installs it and runs this with --ignored"]
fn a_good_module_is_embedded_with_its_defines_and_unlisted_kernels_are_warned_about() {
    let output = build("good.toml", "good").nvcc(nvcc()).run().unwrap();
    assert_eq!(output.images.len(), 1);
    let (module, fatbin) = &output.images[0];
    assert_eq!(module, "fixture");
    let bytes = std::fs::read(fatbin).unwrap();
    assert_eq!(bytes[..4], [0x50, 0xED, 0x55, 0xBA], "not a fatbin");
    let generated = std::fs::read_to_string(&output.generated).unwrap();
    assert!(generated.contains("pub const FIXTURE_BLOCK: u32 = 128;"), "{generated}");
    assert!(generated.contains("module: \"fixture\""), "{generated}");
    assert!(generated.contains("KERNEL_IMAGES_MISSING: Option<&str> = None"), "{generated}");
    assert!(output.warnings.iter().any(|w| w.contains("`fixture_unlisted`")), "{:?}", output.warnings);
    assert!(output.warnings.iter().any(|w| w.contains("`_Z13fixture_scalePffj`")), "{:?}", output.warnings);
}
