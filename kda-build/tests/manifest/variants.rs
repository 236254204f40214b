//! `variants`: one manifest entry for a kernel's instantiations, expanded into one entry per
//! combination of its axes, each a type or a constant in its contract; and every misuse located.

use kda_build::Manifest;
use kda_build::manifest::{AxisValue, DType, Expr, ParamType, ScalarKind};

use super::errors;

const LIBRARY: &str = r#"[lib]
affine = { module = "affine", entry = "affine_{T}", variants = { T = ["f32", "f16", "bf16"] },
           params = "u64 n, const T x[n], T y[n], T mul, f32 add" }
attn = { module = "attn", entry = "attn_{T}_d{D}", variants = { T = ["f16", "bf16"], D = [64, 128] },
         params = "const T q[n * D], u32 n", requires = ["block.x == D"] }
"#;

#[test]
fn each_combination_of_the_axes_is_an_entry_with_its_types_and_constants() {
    let manifest = Manifest::parse("k.toml", LIBRARY).unwrap();
    let entries = &manifest.tables[0].entries;
    let names: Vec<(&str, &str)> = entries.iter().map(|e| (e.field.as_str(), e.entry.as_str())).collect();
    assert_eq!(
        names,
        [
            ("affine_f32", "affine_f32"),
            ("affine_f16", "affine_f16"),
            ("affine_bf16", "affine_bf16"),
            // Axes in alphabetical order, the last varying fastest.
            ("attn_64_f16", "attn_f16_d64"),
            ("attn_64_bf16", "attn_bf16_d64"),
            ("attn_128_f16", "attn_f16_d128"),
            ("attn_128_bf16", "attn_bf16_d128"),
        ]
    );
    // A type axis is the variant's type wherever `params` writes it, and remembered as the axis.
    let f16 = &entries[1];
    let types: Vec<String> = f16.params.as_ref().unwrap().iter().map(|p| p.ty.to_string()).collect();
    assert_eq!(types, ["u64", "const f16[n]", "f16[n]", "f16", "f32"]);
    let axes: Vec<Option<&str>> =
        f16.params.as_ref().unwrap().iter().map(|p| p.type_axis.as_deref()).collect();
    assert_eq!(axes, [None, Some("T"), Some("T"), Some("T"), None]);
    let variant = f16.variant.as_ref().unwrap();
    assert_eq!((variant.group.as_str(), variant.index), ("affine", 1));
    assert_eq!(variant.axes, [("T".to_owned(), AxisValue::Type(DType::F16))]);
    assert!(matches!(f16.params.as_ref().unwrap()[3].ty, ParamType::Scalar(ScalarKind::F16)));
    // An integer axis is a constant of the extents and requirements.
    let attn = &entries[5];
    let ParamType::Buffer { extent, .. } = &attn.params.as_ref().unwrap()[0].ty else {
        panic!("q is a buffer")
    };
    let Expr::Binary { rhs, .. } = extent else { panic!("n * D") };
    assert_eq!(**rhs, Expr::Define { name: "D".to_owned(), value: 128 });
    assert_eq!(attn.requires[0].any_of[0].rhs, Expr::Define { name: "D".to_owned(), value: 128 });
    assert!(entries.iter().all(|e| e.variant.is_some()));
}

#[test]
fn a_misused_axis_is_located_and_expands_to_nothing() {
    let text = r#"[t]
a = { module = "m", entry = "a_{T}", variants = { T = ["f8", "void", 3] } }
b = { module = "m", entry = "b", variants = { T = ["f32"] } }
c = { module = "m", entry = "c_{T}_{U}", variants = { T = ["f32", "f32"] } }
d = { module = "m", entry = "d_{f32}", variants = { f32 = ["f32"] } }
e = { module = "m", entry = "e_{T}", variants = { T = [] } }
"#;
    assert_eq!(
        errors(text),
        [
            "k.toml:2:56: entry `a`: variant `f8` of axis `T` is no element type: expected bf16, f32, u32, f16, f64, i8, u8, i16, u16, i32, i64, u64, bool, fp8e4m3, fp8e5m2 or an integer",
            "k.toml:2:62: entry `a`: variant `void` of axis `T` is no element type: expected bf16, f32, u32, f16, f64, i8, u8, i16, u16, i32, i64, u64, bool, fp8e4m3, fp8e5m2 or an integer",
            "k.toml:3:29: entry `b`: `entry` must name each variant: write `{T}` where its value goes, as in `b_{T}`",
            "k.toml:4:29: entry `c`: `{U}` in `entry` is not a variant axis of this entry",
            "k.toml:4:59: entry `c`: variant axis `T` lists `f32` twice",
            "k.toml:5:53: entry `d`: variant axis `f32` must be a C identifier that is not a type name, such as `T` or `D`",
            "k.toml:6:55: entry `e`: variant axis `T` lists no value",
        ]
    );
}

#[test]
fn a_template_entry_names_its_instantiation_with_c_types_and_a_bad_one_is_located() {
    let text = r#"[t]
scale = { module = "m", entry = "scale<T, D>", variants = { T = ["f16", "u64"], D = [64] } }
fill  = { module = "m", entry = "fill<__nv_bfloat16, -3>" }
"#;
    let manifest = Manifest::parse("k.toml", text).unwrap();
    let entries: Vec<&str> = manifest.tables[0].entries.iter().map(|e| e.entry.as_str()).collect();
    assert_eq!(entries, ["scale<__half, 64>", "scale<unsigned long long, 64>", "fill<__nv_bfloat16, -3>"]);
    let text = r#"[t]
a = { module = "m", entry = "scale<float" }
b = { module = "m", entry = "1scale<float>" }
c = { module = "m", entry = "scale<float, wat>" }
d = { module = "m", entry = "scale<U>", variants = { T = ["f32"] } }
e = { module = "m", entry = "sc\nale<float>" }
"#;
    assert_eq!(
        errors(text),
        [
            "k.toml:2:29: entry point \"scale<float\" of `a`: a template instantiation ends with `>`, as in `softmax<float>`",
            "k.toml:3:29: entry point \"1scale<float>\" of `b`: the template's name `1scale` is not a C identifier",
            "k.toml:4:29: entry point \"scale<float, wat>\" of `c`: template argument `wat` is neither an integer nor a C type of an element type (`float`, `__half`, `__nv_bfloat16`, `unsigned int`, ...)",
            "k.toml:5:29: entry `d`: `entry` must name each variant: write `T` among the template's arguments, as in `scale<T>`",
            // Line breaks in a name (the 100,000-manifest fuzz's find): each message one line.
            "k.toml:6:29: entry point \"sc\\nale<float>\" of `e`: the template's name `sc\\nale` is not a C identifier",
        ]
    );
}

#[test]
fn optional_can_name_the_variants_a_target_may_lack() {
    let text = r#"[lib]
affine = { module = "affine", entry = "affine_{T}", variants = { T = ["f32", "f16", "bf16"] },
           optional = { T = ["bf16"] } }
attn = { module = "attn", entry = "attn_{T}_d{D}", variants = { T = ["f16", "bf16"], D = [64, 128] },
         optional = { D = [128] } }
all = { module = "m", entry = "all_{T}", variants = { T = ["f32", "f16"] }, optional = true }
"#;
    let manifest = Manifest::parse("k.toml", text).unwrap();
    let optional: Vec<&str> =
        manifest.tables[0].entries.iter().filter(|e| e.optional).map(|e| e.field.as_str()).collect();
    assert_eq!(optional, ["affine_bf16", "attn_128_f16", "attn_128_bf16", "all_f32", "all_f16"]);
    assert_eq!(manifest.tables[0].optional_count(), 5);
}

#[test]
fn an_optional_variant_that_is_not_declared_is_located() {
    let text = r#"[t]
a = { module = "m", entry = "a_{T}", variants = { T = ["f32"] }, optional = { T = ["f64", 3] } }
b = { module = "m", entry = "b_{T}", variants = { T = ["f32"] }, optional = { U = ["f32"] } }
c = { module = "m", entry = "c", optional = { T = ["f32"] } }
d = { module = "m", entry = "d", optional = "yes" }
"#;
    assert_eq!(
        errors(text),
        [
            "k.toml:2:84: entry `a`: `optional` lists `f64`, which is not a variant of axis `T`",
            "k.toml:2:91: entry `a`: `optional` lists `3`, which is not a variant of axis `T`",
            "k.toml:3:79: entry `b`: `optional` names `U`, which is not a variant axis of this entry",
            "k.toml:4:47: entry `c`: `optional` lists variants, but the entry has no `variants`",
            "k.toml:5:45: entry `d`: invalid type: string \"yes\", expected a boolean, or the optional variants by axis as in `{ T = [\"bf16\"] }`",
        ]
    );
}

/// Each parameter's name, type and condition, and each requirement's alternatives and text: what
/// the contract of an entry is, wherever the manifest writes it.
fn contracts(text: &str) -> Vec<(Vec<String>, Vec<String>)> {
    let manifest = Manifest::parse("k.toml", text).unwrap();
    manifest.tables[0]
        .entries
        .iter()
        .map(|entry| {
            let params = entry.params.iter().flatten();
            let params = params.map(|p| format!("{} {:?} {:?}", p.name, p.ty, p.safety)).collect();
            let requires = entry.requires.iter().map(|r| format!("{:?} {}", r.any_of, r.text)).collect();
            (params, requires)
        })
        .collect()
}

#[test]
fn a_group_s_variants_have_the_contracts_of_the_same_entries_written_one_by_one() {
    let group = r#"[t]
scale = { module = "m", entry = "scale_{T}", variants = { T = ["f32", "bf16", "u8"] },
          params = "const T x[n*k], nullable T y[cdiv(n, 4)*4], const u32 info[2 * r], f32 z[strided(info, r)], T w[?], u32 n, u32 k, u32 r",
          safety = { w = "w holds n * k elements" }, requires = ["n >= 1", "block.x == 32 || n < 8"] }
"#;
    let written = |ty: &str| {
        format!(
            r#"scale_{ty} = {{ module = "m", entry = "scale_{ty}",
          params = "const {ty} x[n*k], nullable {ty} y[cdiv(n, 4)*4], const u32 info[2 * r], f32 z[strided(info, r)], {ty} w[?], u32 n, u32 k, u32 r",
          safety = {{ w = "w holds n * k elements" }}, requires = ["n >= 1", "block.x == 32 || n < 8"] }}
"#
        )
    };
    let one_by_one = format!("[t]\n{}{}{}", written("f32"), written("bf16"), written("u8"));
    let expected = contracts(&one_by_one);
    assert_eq!(
        expected[1].0[0],
        "x Buffer { element: Bf16, writable: false, extent: Binary { op: Mul, lhs: Scalar { name: \"n\", index: 5 }, rhs: Scalar { name: \"k\", index: 6 } }, extent_text: \"n*k\", nullable: false } None"
    );
    assert_eq!(contracts(group), expected);
}

#[test]
fn a_variant_whose_type_cannot_hold_a_layout_is_reported_alone() {
    // The layout's element type is checked per variant: `u32` holds a layout, `f32` does not.
    let text = r#"[t]
gather = { module = "m", entry = "gather_{T}", variants = { T = ["u32", "f32"] },
           params = "const T info[2 * r], f32 x[strided(info, r)], u32 r" }
"#;
    assert_eq!(
        errors(text),
        [
            "k.toml:3:57: entry `gather_f32`: the layout `info` of `strided` holds f32: a layout holds integers (dims, then strides)"
        ]
    );
}
