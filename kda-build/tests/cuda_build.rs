//! The CUDA build step on fixture kernels: the entry and signature checks with the real nvcc
//! (which CI installs with scripts/install-cuda.sh; `cargo test -p kda-build --test cuda_build --
//! --ignored`), and the checks that need no nvcc.

use std::path::{Path, PathBuf};

use kda_build::cuda::{BuildError, KernelBuild, Nvcc, PtxParam, ptx_params};

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

#[test]
#[ignore = "needs nvcc: .ci/run installs it and runs this with --ignored"]
fn a_good_module_passes_the_signature_checks_and_its_ptx_gives_the_layout() {
    let output = build("good.toml", "good-signature").nvcc(nvcc()).run().unwrap();
    let unit = std::fs::read_to_string(output.generated.with_file_name("fixture.kda.cu")).unwrap();
    assert!(unit.contains("kda_param_check<3, 2, unsigned int, kda_line_3>"), "{unit}");
    // The PTX written beside the fatbin is the one the same nvcc run embedded.
    let ptx = std::fs::read_to_string(output.generated.with_file_name("fixture.ptx")).unwrap();
    let layout = |size, offset| PtxParam { size, align: size, offset };
    assert_eq!(ptx_params(&ptx, "fixture_add").unwrap(), [layout(8, 0), layout(8, 8), layout(4, 16)]);
    assert!(
        output.generated.with_file_name("fixture.nvcc-keep").read_dir().is_err(),
        "kept files are removed"
    );
}

#[test]
#[ignore = "needs nvcc: .ci/run installs it and runs this with --ignored"]
fn with_several_architectures_the_ptx_checked_is_the_newest() {
    let output = build("good.toml", "two-caps").compute_caps(vec![80, 90]).nvcc(nvcc()).run().unwrap();
    let ptx = std::fs::read_to_string(output.generated.with_file_name("fixture.ptx")).unwrap();
    assert!(ptx.contains(".target sm_90"), "{ptx}");
    assert_eq!(ptx_params(&ptx, "fixture_add").map(|params| params.len()), Some(3));
}

/// The one-line report of a build of `manifest` that must fail its signature check.
fn signature_error(manifest: &str, test: &str) -> String {
    let error = build(manifest, test).nvcc(nvcc()).run().unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, BuildError::Signatures { ref problems } if problems.len() == 1), "{message}");
    message
}

#[test]
#[ignore = "needs nvcc: .ci/run installs it and runs this with --ignored"]
fn a_kernel_with_a_parameter_too_few_fails_the_build() {
    assert_eq!(
        signature_error("too_few.toml", "too-few"),
        "too_few.toml:3: signature::sig_scale: the manifest declares 3 parameters, the kernel takes 2"
    );
}

#[test]
#[ignore = "needs nvcc: .ci/run installs it and runs this with --ignored"]
fn a_float_buffer_where_the_manifest_says_bf16_fails_the_build() {
    assert_eq!(
        signature_error("wrong_element.toml", "wrong-element"),
        "wrong_element.toml:3: signature::sig_widen parameter 1 `dst`: the manifest declares `bf16*`, \
         the kernel declares `f32*`"
    );
}

#[test]
#[ignore = "needs nvcc: .ci/run installs it and runs this with --ignored"]
fn a_missing_const_fails_the_build() {
    assert_eq!(
        signature_error("missing_const.toml", "missing-const"),
        "missing_const.toml:3: signature::sig_copy parameter 0 `src`: the manifest declares `const bf16*`, \
         the kernel declares `bf16*`"
    );
}

#[test]
#[ignore = "needs nvcc: .ci/run installs it and runs this with --ignored"]
fn a_u64_where_the_manifest_says_u32_fails_the_build() {
    assert_eq!(
        signature_error("wrong_width.toml", "wrong-width"),
        "wrong_width.toml:3: signature::sig_fill parameter 1 `n`: the manifest declares `u32`, \
         the kernel declares `u64`"
    );
}

#[test]
#[ignore = "needs nvcc: .ci/run installs it and runs this with --ignored"]
fn every_mismatch_of_every_module_is_reported_at_once_in_manifest_order() {
    let error = build("all_mismatches.toml", "all-mismatches").nvcc(nvcc()).run().unwrap_err();
    assert!(matches!(error, BuildError::Signatures { .. }), "{error}");
    assert_eq!(
        error.to_string().lines().collect::<Vec<_>>(),
        [
            "all_mismatches.toml:4: signature::sig_fill parameter 1 `n`: the manifest declares `u32`, \
             the kernel declares `u64`",
            "all_mismatches.toml:5: signature::sig_scale: the manifest declares 3 parameters, the kernel takes 2",
            "all_mismatches.toml:6: fixture::fixture_add parameter 2 `n`: the manifest declares `i32`, \
             the kernel declares `u32`",
            "all_mismatches.toml:7: signature::sig_widen parameter 1 `dst`: the manifest declares `bf16*`, \
             the kernel declares `f32*`",
            "all_mismatches.toml:8: signature::sig_copy parameter 0 `src`: the manifest declares `const bf16*`, \
             the kernel declares `bf16*`",
        ]
    );
}
