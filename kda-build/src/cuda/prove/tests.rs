//! The signature checks without nvcc: PTX layouts, the width check, the generated unit and the
//! reading of nvcc's errors (as nvcc 13.0.88 wrote them for a unit `unit` wrote).

use std::path::Path;

use super::*;
use crate::Manifest;
use crate::manifest::{DType, Expr, Location, Param, ScalarKind};

const PTX: &str = "\
.version 9.0
.target sm_90
.address_size 64

\t// .globl\tdense_gemm_bf16
.visible .entry dense_gemm_bf16(
\t.param .u64 .ptr .align 1 dense_gemm_bf16_param_0,
\t.param .u64 .ptr .align 1 dense_gemm_bf16_param_1,
\t.param .u64 .ptr .align 1 dense_gemm_bf16_param_2,
\t.param .u32 dense_gemm_bf16_param_3,
\t.param .u32 dense_gemm_bf16_param_4,
\t.param .u32 dense_gemm_bf16_param_5
)
.maxntid 256
{
\tret;
}
.visible .entry packed(
\t.param .u32 packed_param_0,
\t.param .align 8 .b8 packed_param_1[16],
\t.param .f32 packed_param_2,
\t.param .align 2 .b8 packed_param_3[2],
\t.param .u64 packed_param_4
)
{
\tret;
}
.visible .entry none()
{
\tret;
}
.visible .entry odd(
\t.param .pred odd_param_0
)
{
\tret;
}
";

fn param(name: &str, ty: ParamType) -> Param {
    Param {
        name: name.to_owned(),
        ty,
        safety: None,
        type_axis: None,
        location: Location { line: 1, column: 1 },
    }
}

fn buffer(name: &str, element: DType, writable: bool) -> Param {
    let extent = Expr::Literal(1);
    param(name, ParamType::Buffer { element, writable, extent, extent_text: "1".to_owned(), nullable: false })
}

fn scalar(name: &str, scalar: ScalarKind) -> Param {
    param(name, ParamType::Scalar(scalar))
}

/// `gemm::dense_gemm_bf16` at line 2 with the GEMM's params, `gemm::missing` at line 3 without.
fn manifest() -> Manifest {
    let mut manifest = Manifest::parse(
        "kernels.toml",
        "[t]\ngemm = { module = \"gemm\", entry = \"dense_gemm_bf16\" }\n\
         other = { module = \"gemm\", entry = \"missing\" }\n",
    )
    .unwrap();
    manifest.tables[0].entries[0].params = Some(vec![
        buffer("a", DType::Bf16, false),
        buffer("b", DType::Bf16, false),
        buffer("c", DType::Bf16, true),
        scalar("m", ScalarKind::U32),
        scalar("n", ScalarKind::U32),
        scalar("k", ScalarKind::U32),
    ]);
    manifest
}

fn at(size: u32, align: u32, offset: u32) -> PtxParam {
    PtxParam { size, align, offset }
}

#[test]
fn ptx_params_read_pointers_scalars_and_structs_with_their_offsets() {
    let gemm = ptx_params(PTX, "dense_gemm_bf16").unwrap();
    assert_eq!(gemm, [at(8, 8, 0), at(8, 8, 8), at(8, 8, 16), at(4, 4, 24), at(4, 4, 28), at(4, 4, 32)]);
    // The struct aligns to 8 after the u32; the u64 after the 2-byte struct rounds up to 40.
    let packed = ptx_params(PTX, "packed").unwrap();
    assert_eq!(packed, [at(4, 4, 0), at(16, 8, 8), at(4, 4, 24), at(2, 2, 28), at(8, 8, 32)]);
    assert_eq!(ptx_params(PTX, "none").unwrap(), []);
}

#[test]
fn ptx_params_of_an_unknown_entry_or_form_are_none() {
    assert_eq!(ptx_params(PTX, "dense_gemm"), None, "a prefix of an entry is not the entry");
    assert_eq!(ptx_params(PTX, "dense_gemm_bf16_param_0"), None, "a parameter is not an entry");
    assert_eq!(ptx_params(PTX, "odd"), None, "`.pred` has no byte size");
}

#[test]
fn the_width_check_passes_the_real_layout_and_reports_count_and_widths() {
    let manifest = manifest();
    let ptx = [("gemm".to_owned(), PTX.to_owned())];
    assert_eq!(check_ptx_params(&manifest, "kernels.toml", &ptx), []);

    let mut wrong = manifest.clone();
    let params = wrong.tables[0].entries[0].params.as_mut().unwrap();
    params[3] = scalar("m", ScalarKind::U64);
    params.push(scalar("lda", ScalarKind::U32));
    let messages: Vec<String> =
        check_ptx_params(&wrong, "kernels.toml", &ptx).iter().map(ToString::to_string).collect();
    assert_eq!(
        messages,
        [
            "kernels.toml:2:1: gemm::dense_gemm_bf16: the manifest declares 7 parameters, the kernel takes 6",
            "kernels.toml:2:1: gemm::dense_gemm_bf16 parameter 3 `m`: the manifest declares `u64` (8 bytes), \
             the kernel's parameter takes 4 bytes",
        ]
    );
}

#[test]
fn the_width_check_leaves_absent_entries_to_the_entry_check() {
    let mut manifest = manifest();
    manifest.tables[0].entries[1].params = Some(vec![scalar("n", ScalarKind::U32)]);
    assert_eq!(check_ptx_params(&manifest, "kernels.toml", &[("gemm".to_owned(), PTX.to_owned())]), []);
}

#[test]
fn the_unit_includes_the_module_and_checks_each_parameter_in_c() {
    let unit = translation_unit(&manifest(), "kernels.toml", "gemm", Path::new("/k/my \"gemm\".cu"));
    assert!(unit.contains("#include \"/k/my \\\"gemm\\\".cu\"\n"), "{unit}");
    assert!(unit.contains("kda_check::kda_absent dense_gemm_bf16(kda_check::kda_absent);"), "{unit}");
    assert!(unit.contains("// kernels.toml:2: gemm::dense_gemm_bf16\n"), "{unit}");
    assert!(unit.contains("using kda_entry_0 = decltype(kda_type_of(&dense_gemm_bf16, 0));"), "{unit}");
    assert!(unit.contains("static_assert(kda_count_check<0, 6, kda_entry_0>::ok"), "{unit}");
    assert!(unit.contains("kda_param_check<0, 0, const __nv_bfloat16*, kda_entry_0>::ok"), "{unit}");
    assert!(unit.contains("kda_param_check<0, 2, __nv_bfloat16*, kda_entry_0>::ok"), "{unit}");
    assert!(unit.contains("kda_param_check<0, 5, unsigned int, kda_entry_0>::ok"), "{unit}");
    assert!(!unit.contains("&missing"), "an entry without params is not checked: {unit}");
    assert!(!unit.contains("kda_entry_missing<0,"), "nvcc's unit leaves presence to the PTX: {unit}");
}

#[test]
fn an_emulated_unit_checks_every_listing_of_its_entry_and_that_it_is_declared() {
    let manifest = manifest();
    let entries: Vec<&crate::Entry> = manifest.tables[0].entries.iter().collect();
    let checks = entry_checks("kernels.toml", &entries);
    assert!(checks.contains("static_assert(kda_entry_missing<0, kda_entry_0>::ok"), "{checks}");
    assert!(checks.contains("static_assert(kda_entry_missing<1, kda_entry_1>::ok"), "{checks}");
    assert!(checks.contains("kda_param_check<0, 5, unsigned int, kda_entry_0>::ok"), "{checks}");
    assert!(!checks.contains("kda_count_check<1,"), "no params, no parameter checks: {checks}");
}

/// g++ 13's errors for the emulated unit of a module registering `dense_gemm_bf16` (listed
/// first), with an `f32*` for `b`, and a check of a listing no unit has.
const GXX_GEMM: &str = "\
/out/emu/u.cpp:60:55: error: incomplete type 'kda_check::kda_param_check<0, 1, const __nv_bfloat16*, kda_check::kda_params<float*, float*> >' {aka 'kda_check::kda_param_mismatch<0, 1, const kda_manifest::t_bf16*, kda_manifest::t_f32*>'} used in nested name specifier
   60 | static_assert(kda_param_check<0, 1, const __nv_bfloat16*, kda_entry_0>::ok, \"x\");
/out/emu/u.cpp:80:9: error: incomplete type 'kda_check::kda_entry_missing<9, kda_check::kda_absent>' used in nested name specifier";

/// g++ 13's errors for the emulated unit of a module registering `missing` second, which the
/// module does not declare (the registration fails with it).
const GXX_MISSING: &str = "\
/out/emu/u.cpp:3:15: error: 'missing' was not declared in this scope
/out/emu/u.cpp:70:9: error: incomplete type 'kda_check::kda_entry_missing<1, kda_check::kda_absent>' used in nested name specifier";

#[test]
fn the_c_plus_plus_compilers_failed_checks_are_read_for_the_listed_entries_only() {
    let manifest = manifest();
    let [gemm, missing] = [&manifest.tables[0].entries[0], &manifest.tables[0].entries[1]];
    let checks = entry_check_failures(GXX_GEMM, "kernels.toml", &[gemm]);
    assert!(checks.undeclared.is_empty(), "the presence check of listing 9 is not this unit's");
    let messages: Vec<(usize, String)> =
        checks.signature.iter().map(|(listing, problem)| (*listing, problem.to_string())).collect();
    assert_eq!(
        messages,
        [(
            0,
            "kernels.toml:2:1: gemm::dense_gemm_bf16 parameter 1 `b`: the manifest declares `const bf16*`, \
              the kernel declares `f32*`"
                .to_owned()
        )]
    );
    // Both in one unit: each failure is its own listing's.
    let both = entry_check_failures(&format!("{GXX_GEMM}\n{GXX_MISSING}"), "kernels.toml", &[gemm, missing]);
    assert_eq!(both.undeclared, [1], "{both:?}");
    assert_eq!(both.signature.iter().map(|(listing, _)| *listing).collect::<Vec<_>>(), [0]);
    let checks = entry_check_failures(GXX_MISSING, "kernels.toml", &[gemm]);
    assert!(checks.undeclared.is_empty() && checks.signature.is_empty(), "listing 1 is not this unit's");
    assert_eq!(entry_check_failures("", "kernels.toml", &[gemm]), Default::default());
}

#[test]
fn a_module_without_params_is_compiled_as_it_is() {
    let unit = translation_unit(&manifest(), "kernels.toml", "other", Path::new("/k/other.cu"));
    assert_eq!(
        unit.lines().filter(|line| !line.starts_with("//")).collect::<Vec<_>>(),
        ["#include \"/k/other.cu\""]
    );
}

/// nvcc 13.0.88's output on the unit of `manifest()` for a GEMM that takes 7 parameters, among
/// them `float* b`, `const bf16* c` and `unsigned long long m`.
const STDERR: &str = r#"gemm.kda.cu(41): error: incomplete type "kda_check::kda_count_mismatch<0, 6, 7>" is not allowed
  static_assert(kda_count_check<0, 6, kda_entry_0>::ok, "gemm::dense_gemm_bf16: parameter count");
                ^

gemm.kda.cu(43): error: incomplete type "kda_check::kda_param_mismatch<0, 1, kda_check::kda_spell<const __nv_bfloat16 *>::type, kda_check::kda_spell<kda_check::kda_param_at<0, kda_check::kda_params<float *, const bf16 *, unsigned long long, u32, u32, u32>>::type>::type>" (aka "kda_check::kda_param_mismatch<0, 1, const kda_manifest::t_bf16 *, kda_manifest::t_f32 *>") is not allowed
  static_assert(kda_param_check<0, 1, const __nv_bfloat16*, kda_entry_0>::ok, "gemm::dense_gemm_bf16 parameter 1 b");
                ^

gemm.kda.cu(44): error: incomplete type "kda_check::kda_param_mismatch<0, 2, kda_check::kda_spell<__nv_bfloat16 *>::type, kda_check::kda_spell<const __nv_bfloat16 *>::type>" (aka "kda_check::kda_param_mismatch<0, 2, kda_manifest::t_bf16 *, const kda_manifest::t_bf16 *>") is not allowed
  static_assert(kda_param_check<0, 2, __nv_bfloat16*, kda_entry_0>::ok, "gemm::dense_gemm_bf16 parameter 2 c");
                ^

gemm.kda.cu(45): error: incomplete type "kda_check::kda_param_mismatch<0, 3, kda_check::kda_spell<unsigned int>::type, kda_check::kda_spell<unsigned long long>::type>" (aka "kda_check::kda_param_mismatch<0, 3, kda_manifest::t_u32, kda_manifest::t_u64>") is not allowed
  static_assert(kda_param_check<0, 3, unsigned int, kda_entry_0>::ok, "gemm::dense_gemm_bf16 parameter 3 m");
                ^

4 errors detected in the compilation of "gemm.kda.cu".
"#;

#[test]
fn every_failed_check_in_nvcc_output_becomes_a_problem_in_manifest_terms() {
    let problems = problems_from_nvcc(STDERR, &manifest(), "kernels.toml", "gemm").unwrap();
    let messages: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        messages,
        [
            "kernels.toml:2:1: gemm::dense_gemm_bf16: the manifest declares 6 parameters, the kernel takes 7",
            "kernels.toml:2:1: gemm::dense_gemm_bf16 parameter 1 `b`: the manifest declares `const bf16*`, \
             the kernel declares `f32*`",
            "kernels.toml:2:1: gemm::dense_gemm_bf16 parameter 2 `c`: the manifest declares `bf16*`, \
             the kernel declares `const bf16*`",
            "kernels.toml:2:1: gemm::dense_gemm_bf16 parameter 3 `m`: the manifest declares `u32`, \
             the kernel declares `u64`",
        ]
    );
}

#[test]
fn nvcc_output_with_any_other_error_is_not_a_signature_report() {
    let other = format!("{STDERR}/k/gemm.cu(7): error: identifier \"undefined_thing\" is undefined\n");
    assert_eq!(problems_from_nvcc(&other, &manifest(), "kernels.toml", "gemm"), None);
    assert_eq!(
        problems_from_nvcc("nvcc fatal   : Unknown option '-x'", &manifest(), "kernels.toml", "gemm"),
        None
    );
    // A check of an entry this module does not have: not ours to explain.
    let elsewhere = STDERR.replace("<0, ", "<9, ");
    assert_eq!(problems_from_nvcc(&elsewhere, &manifest(), "kernels.toml", "gemm"), None);
}

#[test]
fn problems_of_several_modules_sort_into_manifest_order() {
    let problem = |line: u32, mismatch| SignatureProblem {
        listed_at: format!("kernels.toml:{line}:3"),
        symbol: "m::e".to_owned(),
        mismatch,
    };
    let width = |index| SignatureMismatch::Width {
        index,
        name: "x".to_owned(),
        declared: "u32".to_owned(),
        declared_size: 4,
        found_size: 8,
    };
    let mut problems = vec![
        problem(12, width(1)),
        problem(9, width(0)),
        problem(12, SignatureMismatch::Count { declared: 2, found: 3 }),
        problem(9, width(0)),
    ];
    sort_problems(&mut problems);
    assert_eq!(
        problems,
        [
            problem(9, width(0)),
            problem(12, SignatureMismatch::Count { declared: 2, found: 3 }),
            problem(12, width(1))
        ]
    );
}

#[test]
fn a_single_parameter_is_counted_in_the_singular() {
    let problem = SignatureProblem {
        listed_at: "kernels.toml:4:1".to_owned(),
        symbol: "m::e".to_owned(),
        mismatch: SignatureMismatch::Count { declared: 1, found: 0 },
    };
    assert_eq!(
        problem.to_string(),
        "kernels.toml:4:1: m::e: the manifest declares 1 parameter, the kernel takes 0"
    );
}
