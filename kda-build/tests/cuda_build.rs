//! The CUDA build step on fixture kernels: the entry, signature and spill checks with the real
//! nvcc (which CI installs with scripts/install-cuda.sh; `cargo test -p kda-build --test
//! cuda_build -- --ignored`), and the checks that need no nvcc: the emulated build among them.

use std::path::{Path, PathBuf};

use kda_build::cuda::{
    Arch, BuildError, BuildOutput, EntryResources, KernelBuild, Nvcc, Problem, PtxParam, ResourceUsage,
    parse_targets, ptx_params,
};

const SM_90: Arch = Arch { major: 9, minor: 0, specific: false };

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
    Nvcc::find(&[]).expect("this test needs nvcc: run scripts/install-cuda.sh or set NVCC")
}

/// The build's problems, one message each, after checking each is also a `compile_error!` of
/// the generated file (how the user sees it).
fn problems(output: &BuildOutput) -> Vec<String> {
    let generated = std::fs::read_to_string(&output.generated).unwrap();
    let messages: Vec<String> = output.problems.iter().map(ToString::to_string).collect();
    for message in &messages {
        assert!(generated.contains(&format!("::core::compile_error!({message:?});")), "{generated}");
    }
    assert_eq!(generated.matches("compile_error!").count(), messages.len(), "{generated}");
    messages
}

#[test]
fn a_module_without_a_source_is_a_located_problem_with_or_without_nvcc() {
    let output = build("no_source.toml", "no-source").without_nvcc().run().unwrap();
    let [Problem::MissingSource { module, listed_at, .. }] = output.problems.as_slice() else {
        panic!("{:?}", output.problems)
    };
    assert_eq!((module.as_str(), listed_at.as_str()), ("never_written", "no_source.toml:3:1"));
    assert!(problems(&output)[0].contains("never_written.cu"), "{:?}", output.problems);
}

#[test]
fn a_manifest_that_does_not_parse_is_left_to_the_derive_and_its_defines_still_generated() {
    let dir = out_dir("bad-manifest");
    let manifest = dir.join("kernels.toml");
    std::fs::write(
        &manifest,
        "[t]\nadd = { module = \"fixture\", entyr = \"fixture_add\" }\n\n[defines]\nBLOCK = 128\n",
    )
    .unwrap();
    let output = KernelBuild::new(&manifest, fixtures().join("kernels"), &dir).without_nvcc().run().unwrap();
    let error = output.manifest_error.expect("the manifest has an error").to_string();
    assert!(error.contains("kernels.toml:2:"), "{error}");
    let generated = std::fs::read_to_string(&output.generated).unwrap();
    assert!(!generated.contains("compile_error!"), "reported once, by the derive: {generated}");
    assert!(generated.contains("pub const BLOCK: u32 = 128;"), "{generated}");
}

#[test]
fn a_bad_target_list_is_an_error_of_the_build_itself() {
    assert!(parse_targets("90,sm_9x").is_none());
    let message = BuildError::Targets("sm_9x".to_owned()).to_string();
    assert!(message.contains("`90a`") && message.contains("compute_90"), "{message}");
    // A build script returning the error shows cargo this sentence, not a struct.
    assert_eq!(format!("{:?}", BuildError::Targets("sm_9x".to_owned())), message);
}

#[test]
fn without_nvcc_the_build_warns_and_embeds_nothing_unless_nvcc_is_required() {
    // Required: one compiler error, located at the manifest, and the build script succeeds.
    let required = build("good.toml", "required").without_nvcc().require_nvcc(true).run().unwrap();
    assert_eq!(
        problems(&required),
        [
            "good.toml: nvcc is required (KDA_REQUIRE_NVCC=1) but was not found: this build was told to use no nvcc"
        ]
    );
    assert!(required.warnings.is_empty(), "{:?}", required.warnings);

    let output = build("good.toml", "optional").without_nvcc().run().unwrap();
    assert!(output.images.is_empty());
    assert!(
        output.warnings.iter().any(|w| w.contains("no CUDA kernel images are built")),
        "{:?}",
        output.warnings
    );
    let generated = std::fs::read_to_string(&output.generated).unwrap();
    assert!(generated.contains("pub const FIXTURE_BLOCK: u32 = 128;"), "{generated}");
    assert!(generated.contains("/* missing */ ::core::option::Option::Some("), "{generated}");
}

#[test]
#[ignore = "needs nvcc: .ci/run installs it and runs this with --ignored"]
fn a_mangled_entry_and_a_missing_one_are_located_problems_naming_them() {
    let output = build("broken.toml", "broken").nvcc(nvcc()).run().unwrap();
    assert!(
        output.problems.iter().all(|problem| matches!(problem, Problem::Entry(_))),
        "{:?}",
        output.problems
    );
    let messages = problems(&output);
    let file = fixtures().join("kernels/fixture.cu").display().to_string();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(
        messages[0].starts_with(&format!(
            "broken.toml:4:1: `fixture::fixture_scale` is exported by {file} under the C++-mangled name `_Z13fixture_scalePffj`"
        )),
        "{messages:?}"
    );
    assert!(
        messages[1].starts_with(&format!(
            "broken.toml:5:1: `fixture::fixture_gone` is not in {file}, which exports"
        )),
        "{messages:?}"
    );
}

#[test]
#[ignore = "needs nvcc: .ci/run installs it and runs this with --ignored"]
fn an_nvcc_error_is_a_problem_located_at_the_modules_first_entry_with_nvccs_message() {
    let kernels = copy_of_kernels("nvcc-error");
    std::fs::write(kernels.join("signature.cu"), "extern \"C\" __global__ void sig_widen( {\n").unwrap();
    let output = build_in("two_modules.toml", &kernels, "nvcc-error").nvcc(nvcc()).run().unwrap();
    let messages = problems(&output);
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(messages[0].starts_with("two_modules.toml:5:1: nvcc failed on "), "{messages:?}");
    assert!(messages[0].contains("signature.cu(1)"), "nvcc's own location: {messages:?}");
    // The other module still compiled and is embedded.
    assert_eq!(output.images.iter().map(|image| image.module.as_str()).collect::<Vec<_>>(), ["fixture"]);
}

#[test]
#[ignore = "needs nvcc: .ci/run installs it and runs this with --ignored"]
fn a_good_module_is_embedded_with_its_defines_and_unlisted_kernels_are_warned_about() {
    let output = build("good.toml", "good").nvcc(nvcc()).run().unwrap();
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    assert_eq!(output.images.len(), 1);
    let image = &output.images[0];
    assert_eq!(image.module, "fixture");
    let bytes = std::fs::read(&image.fatbin).unwrap();
    assert_eq!(bytes[..4], [0x50, 0xED, 0x55, 0xBA], "not a fatbin");
    let generated = std::fs::read_to_string(&output.generated).unwrap();
    assert!(generated.contains("pub const FIXTURE_BLOCK: u32 = 128;"), "{generated}");
    assert!(generated.contains("module: \"fixture\""), "{generated}");
    assert!(generated.contains("/* missing */ ::core::option::Option::None"), "{generated}");
    // What the image carries, as the runtime checks it against the device.
    assert_eq!(image.sass, [SM_90]);
    assert_eq!(image.ptx, Some((SM_90, (9, 0))), "compute_90 PTX, ISA 9.0 from CUDA 13.0");
    // Its SASS, kept as the cubin the fatbin embeds.
    let cubin = output.generated.with_file_name("fixture.sm_90.cubin");
    assert_eq!(image.cubins, [(SM_90, cubin.clone())]);
    assert_eq!(std::fs::read(&cubin).unwrap()[..4], *b"\x7fELF", "not a cubin");
    // Every kernel of the module has its resources, the unlisted ones too.
    let mut kernels: Vec<&str> = image.resources.iter().map(|resources| resources.entry.as_str()).collect();
    kernels.sort_unstable();
    assert_eq!(kernels, ["_Z13fixture_scalePffj", "fixture_add", "fixture_unlisted"]);
    assert!(image.resources.iter().all(|resources| resources.arch == SM_90 && !resources.usage.spills()));
    assert!(image.resources.iter().all(|resources| resources.usage.registers > 0), "{:?}", image.resources);
    assert!(
        generated.contains("EntryResources { module: \"fixture\", entry: \"fixture_add\", "),
        "{generated}"
    );
    assert!(generated.contains("sass: &[::kda_runtime::CudaArch::new(9, 0)]"), "{generated}");
    // One warning for the module, naming both kernels no table lists.
    let unlisted: Vec<&String> = output.warnings.iter().filter(|w| w.contains("no table of")).collect();
    assert_eq!(unlisted.len(), 1, "{:?}", output.warnings);
    assert!(unlisted[0].contains("exports 2 kernels no table of good.toml lists"), "{unlisted:?}");
    assert!(unlisted[0].contains("`fixture_unlisted`") && unlisted[0].contains("`_Z13fixture_scalePffj`"));
}

#[test]
#[ignore = "needs nvcc: .ci/run installs it and runs this with --ignored"]
fn a_good_module_passes_the_signature_checks_and_its_ptx_gives_the_layout() {
    let output = build("good.toml", "good-signature").nvcc(nvcc()).run().unwrap();
    let unit = std::fs::read_to_string(output.generated.with_file_name("fixture.kda.cu")).unwrap();
    assert!(unit.contains("kda_param_check<0, 2, unsigned int, kda_entry_0>"), "{unit}");
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
    let targets = parse_targets("80,90").unwrap();
    let output = build("good.toml", "two-caps").targets(targets).nvcc(nvcc()).run().unwrap();
    let ptx = std::fs::read_to_string(output.generated.with_file_name("fixture.ptx")).unwrap();
    assert!(ptx.contains(".target sm_90"), "{ptx}");
    assert_eq!(ptx_params(&ptx, "fixture_add").map(|params| params.len()), Some(3));
    let image = &output.images[0];
    assert_eq!(image.sass.len(), 2);
    // A cubin and resources for each target, though nvcc names the cubins of two virtual
    // architectures otherwise.
    let sm_80 = Arch { major: 8, minor: 0, specific: false };
    let archs: Vec<Arch> = image.cubins.iter().map(|(arch, _)| *arch).collect();
    assert_eq!(archs, [sm_80, SM_90]);
    assert!(image.cubins.iter().all(|(_, cubin)| cubin.is_file()));
    let fixture_add = |arch| image.resources.iter().any(|r| r.entry == "fixture_add" && r.arch == arch);
    assert!(fixture_add(sm_80) && fixture_add(SM_90), "{:?}", image.resources);
}

#[test]
#[ignore = "needs nvcc: .ci/run installs it and runs this with --ignored"]
fn architecture_specific_sass_and_ptx_only_targets_are_embedded_as_listed() {
    let targets = parse_targets("90a,compute_80").unwrap();
    let output = build("good.toml", "targets").targets(targets).nvcc(nvcc()).run().unwrap();
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    let image = &output.images[0];
    assert_eq!(image.sass, [Arch { major: 9, minor: 0, specific: true }]);
    assert_eq!(image.ptx.map(|(arch, _)| arch), Some(Arch { major: 8, minor: 0, specific: false }));
    let generated = std::fs::read_to_string(&output.generated).unwrap();
    assert!(generated.contains("CudaArch::specific(9, 0)"), "{generated}");
    // The checks read the PTX behind the newest code, here the sm_90a SASS's.
    let ptx = std::fs::read_to_string(output.generated.with_file_name("fixture.ptx")).unwrap();
    assert!(ptx.contains(".target sm_90a"), "{ptx}");
    let sm_90a = Arch { major: 9, minor: 0, specific: true };
    assert_eq!(image.cubins, [(sm_90a, output.generated.with_file_name("fixture.sm_90a.cubin"))]);
    assert!(image.cubins[0].1.is_file());
    assert!(image.resources.iter().all(|resources| resources.arch == sm_90a), "{:?}", image.resources);
}

/// A copy of the fixture kernels that a test may edit.
fn copy_of_kernels(test: &str) -> PathBuf {
    let dir = out_dir(&format!("{test}-kernels"));
    for file in std::fs::read_dir(fixtures().join("kernels")).unwrap() {
        let file = file.unwrap().path();
        std::fs::copy(&file, dir.join(file.file_name().unwrap())).unwrap();
    }
    dir
}

fn build_in(manifest: &str, kernels: &Path, test: &str) -> KernelBuild {
    KernelBuild::new(fixtures().join(manifest), kernels, out_dir(test))
}

#[test]
#[ignore = "needs nvcc: .ci/run installs it and runs this with --ignored"]
fn only_the_modules_whose_inputs_changed_are_compiled_again() {
    let kernels = copy_of_kernels("cache");
    let build = build_in("two_modules.toml", &kernels, "cache").nvcc(nvcc());
    let recompiled = || {
        let output = build.run().unwrap();
        assert!(output.problems.is_empty(), "{:?}", output.problems);
        assert_eq!(output.images.len(), 2);
        output.recompiled
    };
    assert_eq!(recompiled(), ["fixture", "signature"], "a fresh build compiles everything");
    assert!(recompiled().is_empty(), "nothing changed");
    // Rewritten with the same bytes: contents, not timestamps, decide.
    let source = std::fs::read_to_string(kernels.join("signature.cu")).unwrap();
    std::fs::write(kernels.join("signature.cu"), &source).unwrap();
    assert!(recompiled().is_empty());
    std::fs::write(kernels.join("signature.cu"), format!("{source}\n// edited\n")).unwrap();
    assert_eq!(recompiled(), ["signature"]);
    // A header recompiles exactly the modules that include it.
    let header = std::fs::read_to_string(kernels.join("fixture_index.cuh")).unwrap();
    std::fs::write(kernels.join("fixture_index.cuh"), format!("{header}// edited\n")).unwrap();
    assert_eq!(recompiled(), ["fixture"]);
    // So do other flags, for every module.
    let output = build.clone().nvcc_flags(["-lineinfo"]).run().unwrap();
    assert_eq!(output.recompiled, ["fixture", "signature"]);
}

#[test]
#[ignore = "needs nvcc: .ci/run installs it and runs this with --ignored"]
fn a_kernel_that_spills_is_a_problem_at_its_entry_and_a_cached_build_still_reports_it() {
    let build = build("spill.toml", "spill").nvcc(nvcc());
    let output = build.run().unwrap();
    let [Problem::Spill(spill)] = output.problems.as_slice() else { panic!("{:?}", output.problems) };
    assert_eq!(
        (spill.listed_at.as_str(), spill.symbol.as_str()),
        ("spill.toml:5:1", "spill::spill_live_values")
    );
    assert_eq!(spill.arch, SM_90);
    let ResourceUsage { registers, spill_stores, spill_loads, .. } = spill.usage;
    assert_eq!(registers, 64, "__launch_bounds__(1024) leaves 64 registers a thread");
    assert!(spill_stores > 0 && spill_loads > 0, "{:?}", spill.usage);
    assert!(
        problems(&output)[0].starts_with(&format!(
            "spill.toml:5:1: `spill::spill_live_values` spills registers on sm_90: 64 registers, \
             {spill_stores} bytes spill stores, {spill_loads} bytes spill loads ("
        )),
        "{:?}",
        output.problems
    );
    // The image is still built, with every kernel's resources: the kernel beside it fits.
    let image = output.images.iter().find(|image| image.module == "spill").expect("the spill module's image");
    let resources = |entry: &str| -> &EntryResources {
        image.resources.iter().find(|resources| resources.entry == entry).expect(entry)
    };
    assert_eq!(resources("spill_live_values").usage, spill.usage);
    assert!(!resources("spill_free_values").usage.spills(), "{:?}", image.resources);
    let generated = std::fs::read_to_string(&output.generated).unwrap();
    assert!(
        generated.contains(&format!(
            "EntryResources {{ module: \"spill\", entry: \"spill_live_values\", \
             arch: ::kda_runtime::CudaArch::new(9, 0), registers: 64, spill_stores: {spill_stores}, \
             spill_loads: {spill_loads}, "
        )),
        "{generated}"
    );
    // From the cache: nothing compiled, the same resources and the same problem.
    let again = build.run().unwrap();
    assert!(again.recompiled.is_empty(), "{:?}", again.recompiled);
    assert_eq!(again.images, output.images);
    assert_eq!(again.problems, output.problems);
}

/// The one-line report of a build of `manifest` that must fail its signature check.
fn signature_error(manifest: &str, test: &str) -> String {
    let output = build(manifest, test).nvcc(nvcc()).run().unwrap();
    assert!(matches!(output.problems.as_slice(), [Problem::Signature(_)]), "{:?}", output.problems);
    problems(&output).remove(0)
}

#[test]
#[ignore = "needs nvcc: .ci/run installs it and runs this with --ignored"]
fn a_kernel_with_a_parameter_too_few_fails_the_build() {
    assert_eq!(
        signature_error("too_few.toml", "too-few"),
        "too_few.toml:3:1: signature::sig_scale: the manifest declares 3 parameters, the kernel takes 2"
    );
}

#[test]
#[ignore = "needs nvcc: .ci/run installs it and runs this with --ignored"]
fn a_float_buffer_where_the_manifest_says_bf16_fails_the_build() {
    assert_eq!(
        signature_error("wrong_element.toml", "wrong-element"),
        "wrong_element.toml:3:1: signature::sig_widen parameter 1 `dst`: the manifest declares `bf16*`, \
         the kernel declares `f32*`"
    );
}

#[test]
#[ignore = "needs nvcc: .ci/run installs it and runs this with --ignored"]
fn a_missing_const_fails_the_build() {
    assert_eq!(
        signature_error("missing_const.toml", "missing-const"),
        "missing_const.toml:3:1: signature::sig_copy parameter 0 `src`: the manifest declares `const bf16*`, \
         the kernel declares `bf16*`"
    );
}

#[test]
#[ignore = "needs nvcc: .ci/run installs it and runs this with --ignored"]
fn a_u64_where_the_manifest_says_u32_fails_the_build() {
    assert_eq!(
        signature_error("wrong_width.toml", "wrong-width"),
        "wrong_width.toml:3:1: signature::sig_fill parameter 1 `n`: the manifest declares `u32`, \
         the kernel declares `u64`"
    );
}

#[test]
#[ignore = "needs nvcc: .ci/run installs it and runs this with --ignored"]
fn a_librarys_c_types_are_its_manifest_types_under_the_one_integer_rule() {
    // size_t, uint64_t and long, int64_t, int8_t, __half, fp8, bool, void: all stated, except plain
    // `char`, which is no `u8`.
    use kda_build::cuda::emulation::Emulation;
    let output = build("library_types.toml", "library-types")
        .nvcc(nvcc())
        .emulation(Emulation::default())
        .run()
        .unwrap();
    assert_eq!(
        problems(&output),
        [
            "library_types.toml:6:1: library_types::lib_text parameter 0 `text`: the manifest declares `const u8*`, \
          the kernel declares `const char*`"
        ]
    );
    // The emulated build proves the same types, reported once: `lib_text` is not built for it.
    let emulated: Vec<&str> = output.emulated.iter().map(|library| library.entry.as_str()).collect();
    assert_eq!(emulated, ["lib_every", "lib_dequantize"]);
}

/// What the build reports for `all_mismatches.toml`, with nvcc, the emulated build or both.
const ALL_MISMATCHES: [&str; 5] = [
    "all_mismatches.toml:4:1: signature::sig_fill parameter 1 `n`: the manifest declares `u32`, \
     the kernel declares `u64`",
    "all_mismatches.toml:5:1: signature::sig_scale: the manifest declares 3 parameters, the kernel takes 2",
    "all_mismatches.toml:6:1: fixture::fixture_add parameter 2 `n`: the manifest declares `i32`, \
     the kernel declares `u32`",
    "all_mismatches.toml:7:1: signature::sig_widen parameter 1 `dst`: the manifest declares `bf16*`, \
     the kernel declares `f32*`",
    "all_mismatches.toml:8:1: signature::sig_copy parameter 0 `src`: the manifest declares `const bf16*`, \
     the kernel declares `bf16*`",
];

#[test]
#[ignore = "needs nvcc: .ci/run installs it and runs this with --ignored"]
fn template_instantiations_are_made_found_under_their_mangled_names_and_proved() {
    use kda_build::cuda::emulation::Emulation;
    let output =
        build("templates.toml", "templates").nvcc(nvcc()).emulation(Emulation::default()).run().unwrap();
    assert_eq!(problems(&output), Vec::<String>::new());
    // The image carries each entry with the name nvcc mangled it to, what a CUDA lookup loads.
    let generated = std::fs::read_to_string(&output.generated).unwrap();
    for (entry, symbol) in [
        ("scale<float, 3>", "_Z5scaleIfLi3EEvPKT_PS0_j"),
        ("scale<double, 3>", "_Z5scaleIdLi3EEvPKT_PS0_j"),
        ("fill<__half, 64>", "_Z4fillI6__halfLm64EEvPT_S1_"),
    ] {
        let at = generated.find(&format!("{entry:?}")).unwrap_or_else(|| panic!("{entry}: {generated}"));
        let named = generated[at..].find(&format!("{symbol:?}"));
        assert!(named.is_some_and(|offset| offset < 64), "{entry} as {symbol}: {generated}");
    }
    // And the emulator builds each under its own name.
    let emulated: Vec<&str> = output.emulated.iter().map(|library| library.entry.as_str()).collect();
    assert_eq!(emulated, ["scale<float, 3>", "scale<double, 3>", "fill<__half, 64>"]);
    // Each instantiation's C types are proved as an extern "C" kernel's are: `scale<float, 5>`
    // takes an `unsigned int n`, not a `u64`.
    let wrong = build("template_mismatch.toml", "template-mismatch").nvcc(nvcc()).run().unwrap();
    assert_eq!(
        problems(&wrong),
        ["template_mismatch.toml:4:1: templates::scale<float, 5> parameter 2 `n`: the manifest declares \
             `u64`, the kernel declares `u32`"]
    );
}

#[test]
#[ignore = "needs nvcc: .ci/run installs it and runs this with --ignored"]
fn every_mismatch_of_every_module_is_reported_at_once_in_manifest_order() {
    let output = build("all_mismatches.toml", "all-mismatches").nvcc(nvcc()).run().unwrap();
    assert!(output.problems.iter().all(|problem| matches!(problem, Problem::Signature(_))));
    assert_eq!(problems(&output), ALL_MISMATCHES);
    // With the emulated build too, which finds the same: each mistake once.
    use kda_build::cuda::emulation::Emulation;
    let both = build("all_mismatches.toml", "all-mismatches-both")
        .nvcc(nvcc())
        .emulation(Emulation::default())
        .run()
        .unwrap();
    assert_eq!(problems(&both), ALL_MISMATCHES);
}

#[test]
fn without_nvcc_the_emulated_build_proves_the_same_c_types_with_the_same_messages() {
    use kda_build::cuda::emulation::Emulation;
    let output = build("all_mismatches.toml", "emulated-mismatches")
        .without_nvcc()
        .emulation(Emulation::default())
        .run()
        .unwrap();
    assert!(output.problems.iter().all(|problem| matches!(problem, Problem::Signature(_))));
    assert_eq!(problems(&output), ALL_MISMATCHES);
    // The kernels whose every listing holds still build.
    let built: Vec<&str> = output.emulated.iter().map(|library| library.entry.as_str()).collect();
    assert_eq!(built, [] as [&str; 0], "every entry of the manifest has a mismatch");
}

#[test]
fn without_nvcc_an_entry_the_module_lacks_is_the_located_entry_problem_nvcc_gives() {
    use kda_build::cuda::emulation::Emulation;
    let output =
        build("broken.toml", "emulated-broken").without_nvcc().emulation(Emulation::default()).run().unwrap();
    let file = fixtures().join("kernels/fixture.cu").display().to_string();
    assert_eq!(
        problems(&output),
        [format!(
            "broken.toml:5:1: `fixture::fixture_gone` is not in {file}, which exports `fixture_add`, `fixture_unlisted`"
        )]
    );
}

#[test]
fn a_c_plus_plus_error_is_its_first_located_error_and_the_rest_is_there_on_request() {
    use kda_build::cuda::emulation::Emulation;
    let kernels = copy_of_kernels("emulated-rejection");
    // An undeclared name, then an error it leads to.
    let broken = "extern \"C\" __global__ void sig_widen(const bf16* src, float* dst, u32 n) {\n\
                  undeclared_name(dst);\n  dst[0] = src;\n}\n";
    let source = std::fs::read_to_string(kernels.join("signature.cu")).unwrap();
    let (head, _) = source.split_once("extern \"C\"").unwrap();
    std::fs::write(kernels.join("signature.cu"), format!("{head}{broken}")).unwrap();
    let build = build_in("two_modules.toml", &kernels, "emulated-rejection").without_nvcc();
    let output = build.clone().emulation(Emulation::default()).run().unwrap();
    let [message] = problems(&output).try_into().expect("one problem");
    let lines: Vec<&str> = message.lines().collect();
    assert!(lines[0].starts_with("two_modules.toml:5:1: the emulated build (C++) failed on "), "{message}");
    assert!(lines[1].contains("signature.cu:") && lines[1].contains("undeclared_name"), "{message}");
    assert_eq!(message.matches("error").count(), 1, "one error: {message}");
    assert!(message.ends_with("KDA_FULL_DIAGNOSTICS=1 shows them all)"), "{message}");
    // Asked for, the whole output follows the message.
    let full = build.full_diagnostics(true).emulation(Emulation::default()).run().unwrap();
    let generated = std::fs::read_to_string(&full.generated).unwrap();
    let whole = full.problems[0].diagnostics().expect("a compiler's rejection");
    assert!(whole.matches("error").count() > 1, "{whole}");
    assert!(
        generated.contains(&format!("{:?}", format!("{message}\nThe compiler's whole output:\n{whole}")))
    );
}

#[test]
fn the_emulated_build_recompiles_only_the_modules_whose_inputs_changed() {
    use kda_build::cuda::emulation::Emulation;
    let kernels = copy_of_kernels("emulated-cache");
    let build = build_in("two_modules.toml", &kernels, "emulated-cache")
        .without_nvcc()
        .emulation(Emulation::default());
    let recompiled = || {
        let output = build.run().unwrap();
        assert!(output.problems.is_empty(), "{:?}", output.problems);
        let entries: Vec<&str> = output.emulated.iter().map(|library| library.entry.as_str()).collect();
        assert_eq!(entries, ["fixture_add", "sig_widen"]);
        assert!(output.emulated.iter().all(|library| library.path.is_file()));
        assert!(output.emulation_driver.as_ref().is_some_and(|driver| driver.is_file()));
        output.emulated_recompiled
    };
    assert_eq!(recompiled(), ["fixture", "signature"], "a fresh build compiles everything");
    assert!(recompiled().is_empty(), "nothing changed");
    let source = std::fs::read_to_string(kernels.join("signature.cu")).unwrap();
    std::fs::write(kernels.join("signature.cu"), format!("{source}\n// edited\n")).unwrap();
    assert_eq!(recompiled(), ["signature"]);
    let header = std::fs::read_to_string(kernels.join("fixture_index.cuh")).unwrap();
    std::fs::write(kernels.join("fixture_index.cuh"), format!("{header}// edited\n")).unwrap();
    assert_eq!(recompiled(), ["fixture"]);
}

/// A module of two `extern "C"` kernels and a template, each with a `__shared__` array of its own
/// name and size, listed as four entries.
const PAIR_MODULE: &str = r#"
extern "C" __global__ void pair_first(float* out) {
    __shared__ float first_tile[32];
    first_tile[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = first_tile[31 - threadIdx.x];
}
extern "C" __global__ void pair_second(float* out) {
    __shared__ float second_tile[64];
    second_tile[threadIdx.x] = 2.0f;
    __syncthreads();
    out[threadIdx.x] = second_tile[63 - threadIdx.x];
}
template <int N>
__global__ void pair_fill(float* out) {
    __shared__ float fill_tile[N];
    fill_tile[threadIdx.x] = 3.0f;
    __syncthreads();
    out[threadIdx.x] = fill_tile[N - 1 - threadIdx.x];
}
"#;

const PAIR_MANIFEST: &str = r#"[pair]
first = { module = "pair", entry = "pair_first", params = "f32 out[32]" }
second = { module = "pair", entry = "pair_second", params = "f32 out[64]" }
fill_16 = { module = "pair", entry = "pair_fill<16>", params = "f32 out[16]" }
fill_48 = { module = "pair", entry = "pair_fill<48>", params = "f32 out[48]" }
"#;

/// Writes the module `pair.cu` holding `source` and the manifest `pair.toml` holding `manifest`
/// into a fresh folder for `test`: the build of them for the emulator alone, the kernels' folder
/// and the output folder.
fn pair_build(test: &str, source: &str, manifest: &str) -> (KernelBuild, PathBuf, PathBuf) {
    use kda_build::cuda::emulation::Emulation;
    let dir = out_dir(test);
    let kernels = dir.join("kernels");
    std::fs::create_dir_all(&kernels).unwrap();
    std::fs::write(kernels.join("pair.cu"), source).unwrap();
    std::fs::write(dir.join("pair.toml"), manifest).unwrap();
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let build = KernelBuild::new(dir.join("pair.toml"), &kernels, &out)
        .without_nvcc()
        .emulation(Emulation::default());
    (build, kernels, out)
}

/// The symbols `library` defines, by name, with their addresses, as binutils' `nm` (beside the
/// linker the emulated build uses) lists them.
fn defined_symbols(library: &Path) -> Vec<(String, u64)> {
    let output = std::process::Command::new("nm")
        .arg("--defined-only")
        .arg(library)
        .output()
        .unwrap_or_else(|error| panic!("nm (binutils, with the linker) cannot run: {error}"));
    assert!(output.status.success(), "nm {}: {}", library.display(), String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| {
            let [address, _, name] = line.split_whitespace().collect::<Vec<_>>()[..] else { return None };
            Some((name.to_owned(), u64::from_str_radix(address, 16).ok()?))
        })
        .collect()
}

#[test]
fn the_emulated_build_compiles_a_module_once_and_links_each_entry_with_only_its_kernel() {
    let (build, kernels, out) = pair_build("emulated-once", PAIR_MODULE, PAIR_MANIFEST);
    let output = build.run().unwrap();
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    let entries: Vec<&str> = output.emulated.iter().map(|library| library.entry.as_str()).collect();
    assert_eq!(entries, ["pair_first", "pair_second", "pair_fill<16>", "pair_fill<48>"]);
    // One compile of the module for its four entries: one object, reported once.
    assert_eq!(output.emulated_recompiled, ["pair"]);
    let mut objects: Vec<String> = std::fs::read_dir(out.join("emu"))
        .unwrap()
        .map(|file| file.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".o") && !name.starts_with("kda_emu_"))
        .collect();
    objects.sort();
    assert_eq!(objects, ["pair.module.o"]);

    // Each library keeps its own kernel (its code, which may be inlined into the invoker whose
    // mangled name carries the kernel's, and its array) and exactly its `__shared__` array: no
    // other kernel of the module, no other kernel's array. The names as the compiler mangles them.
    let kernels_and_arrays = [
        ("10pair_first", "_ZZ10pair_firstE10first_tile", 32 * 4),
        ("11pair_second", "_ZZ11pair_secondE11second_tile", 64 * 4),
        ("9pair_fillILi16E", "_ZZ9pair_fillILi16EEvPfE9fill_tile", 16 * 4),
        ("9pair_fillILi48E", "_ZZ9pair_fillILi48EEvPfE9fill_tile", 48 * 4),
    ];
    for (library, (kernel, _, bytes)) in output.emulated.iter().zip(kernels_and_arrays) {
        let symbols = defined_symbols(&library.path);
        let address = |name: &str| symbols.iter().find(|(symbol, _)| symbol == name).map(|(_, at)| *at);
        for (other_kernel, other_array, _) in kernels_and_arrays {
            let own = other_kernel == kernel;
            let mentioned = symbols.iter().any(|(symbol, _)| symbol.contains(other_kernel));
            assert_eq!(mentioned, own, "{other_kernel} in {}: {symbols:?}", library.entry);
            assert_eq!(address(other_array).is_some(), own, "{other_array} in {}", library.entry);
        }
        let shared = address("__stop_kda_emu_shared").unwrap() - address("__start_kda_emu_shared").unwrap();
        assert_eq!(shared, bytes, "{}'s static shared memory", library.entry);
    }

    // Nothing changed: nothing compiled; an edit of the module: one compile again.
    assert!(build.run().unwrap().emulated_recompiled.is_empty());
    std::fs::write(kernels.join("pair.cu"), format!("{PAIR_MODULE}// edited\n")).unwrap();
    let edited = build.run().unwrap();
    assert_eq!(edited.emulated_recompiled, ["pair"]);
    assert_eq!(edited.emulated.len(), 4);
}

#[test]
fn an_emulator_only_include_directory_reaches_the_emulated_build_alone() {
    use kda_build::cuda::emulation::Emulation;
    // The module includes a header nvcc would not have: a stand-in the crate gives the emulator.
    let kernels = copy_of_kernels("emulated-includes");
    let source = std::fs::read_to_string(kernels.join("signature.cu")).unwrap();
    std::fs::write(kernels.join("signature.cu"), format!("#include \"emu_stand_in.h\"\n{source}")).unwrap();
    let stand_ins = out_dir("emulated-includes-stand-ins");
    std::fs::write(stand_ins.join("emu_stand_in.h"), "#define KDA_TEST_STAND_IN 1\n").unwrap();

    let with = Emulation { include_dirs: vec![stand_ins], ..Emulation::default() };
    let output =
        build_in("two_modules.toml", &kernels, "emulated-includes").without_nvcc().emulation(with).run();
    let output = output.unwrap();
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    assert_eq!(output.emulated.len(), 2);

    let without = build_in("two_modules.toml", &kernels, "emulated-includes-without")
        .without_nvcc()
        .emulation(Emulation::default())
        .run()
        .unwrap();
    let missing = problems(&without);
    assert!(
        missing.iter().any(|problem| problem.contains("signature") && problem.contains("emu_stand_in.h")),
        "{missing:?}"
    );
}

#[test]
fn an_instantiation_that_does_not_compile_is_one_problem_at_its_entry_and_the_others_still_build() {
    // fp8 has no arithmetic: `pair_double<__nv_fp8_e4m3>` fails in the template's body, past
    // every check of its parameter types.
    let source = format!(
        "{PAIR_MODULE}template <typename T>\n__global__ void pair_double(T* out) {{ out[0] = out[0] * out[0]; }}\n"
    );
    let manifest = format!(
        "{PAIR_MANIFEST}double = {{ module = \"pair\", entry = \"pair_double<__nv_fp8_e4m3>\", params = \"fp8e4m3 out[1]\" }}\n"
    );
    let (build, _, _) = pair_build("emulated-instantiation", &source, &manifest);
    let output = build.run().unwrap();
    let [problem @ Problem::Emulation { listed_at, diagnostics, .. }] = output.problems.as_slice() else {
        panic!("not one emulation problem: {:#?}", output.problems)
    };
    assert_eq!(listed_at, "pair.toml:6:1", "{problem}");
    assert!(diagnostics.contains("pair_double"), "{diagnostics}");
    let entries: Vec<&str> = output.emulated.iter().map(|library| library.entry.as_str()).collect();
    assert_eq!(entries, ["pair_first", "pair_second", "pair_fill<16>", "pair_fill<48>"]);
    assert_eq!(output.emulated_recompiled, ["pair"]);
}
