//! `params` and `requires`: the model they parse into and every error class, each located at
//! the offending token inside the TOML string.

use kda_build::Manifest;
use kda_build::manifest::{
    BinaryOp, CompareOp, Comparison, DType, Expr, LaunchDim, Param, ParamType, ScalarKind,
};

use super::errors;

/// A one-entry manifest whose `params` content starts at line 2, column 44: byte `i` of
/// `params` is column `44 + i`.
fn with_params(params: &str) -> String {
    format!("[t]\ng = {{ module = \"m\", entry = \"e\", params = \"{params}\" }}\n")
}

/// As [`with_params`] with `params = "u32 n"` and `requires`: the first requirement's content
/// starts at column 65.
fn with_requires(requires: &[&str]) -> String {
    let list: Vec<String> = requires.iter().map(|r| format!("\"{r}\"")).collect();
    format!(
        "[t]\ng = {{ module = \"m\", entry = \"e\", params = \"u32 n\", requires = [{}] }}\n",
        list.join(", ")
    )
}

fn params_of(text: &str) -> Vec<Param> {
    let manifest = Manifest::parse("k.toml", text).unwrap();
    manifest.tables[0].entries[0].params.clone().expect("params")
}

fn scalar(name: &str, index: usize) -> Box<Expr> {
    Box::new(Expr::Scalar { name: name.to_owned(), index })
}

fn binary(op: BinaryOp, lhs: Box<Expr>, rhs: Box<Expr>) -> Box<Expr> {
    Box::new(Expr::Binary { op, lhs, rhs })
}

#[test]
fn the_project_manifest_carries_params_and_requires_for_every_entry() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../kernels.toml")).unwrap();
    let manifest = Manifest::parse("kernels.toml", &text).unwrap();
    let table = manifest.table("glm5next_kda").unwrap();
    assert!(table.entries.iter().all(|e| e.params.is_some()));

    let gemm = &table.entries[0];
    let params = gemm.params.as_ref().unwrap();
    let shape: Vec<(&str, String)> = params.iter().map(|p| (p.name.as_str(), p.ty.to_string())).collect();
    assert_eq!(
        shape,
        [
            ("a", "const bf16[(m-1)*lda+k]".to_owned()),
            ("b", "const bf16[n*k]".to_owned()),
            ("c", "bf16[m*n]".to_owned()),
            ("m", "u32".to_owned()),
            ("n", "u32".to_owned()),
            ("k", "u32".to_owned()),
            ("lda", "u32".to_owned()),
        ]
    );
    let ParamType::Buffer { element, writable, extent, .. } = &params[2].ty else { panic!("c is a buffer") };
    assert_eq!((*element, *writable), (DType::Bf16, true));
    // Scalars are found by position, also when declared after the buffer.
    assert_eq!(*extent, *binary(BinaryOp::Mul, scalar("m", 3), scalar("n", 4)));
    assert_eq!(params[0].location.line, 15);
    assert_eq!(gemm.requires.len(), 5);
    // The dynamic shared memory its four stages of 128 + 128 rows of 32 bf16 take.
    let shared = &gemm.requires[2];
    assert_eq!(shared.any_of[0].lhs, Expr::Launch(LaunchDim::SharedBytes));
    assert_eq!(shared.any_of[0].op, CompareOp::Ge);
    assert_eq!(
        gemm.requires[0].any_of,
        [Comparison {
            lhs: Expr::Launch(LaunchDim::BlockX),
            op: CompareOp::Eq,
            rhs: Expr::Define { name: "GEMM_THREADS".to_owned(), value: 128 },
        }]
    );
    assert_eq!(gemm.requires[0].text, "block.x == GEMM_THREADS");

    let conv_decode = &table.entries[5];
    assert_eq!(conv_decode.field, "conv_decode");
    assert_eq!(conv_decode.requires.len(), 10);
    let head_dim = &conv_decode.requires[6];
    assert_eq!(head_dim.text, "head_dim == 32 || head_dim == 64 || head_dim == 128");
    assert_eq!(head_dim.any_of.len(), 3);
    let eps = conv_decode.params.as_ref().unwrap().last().unwrap();
    assert_eq!((eps.name.as_str(), &eps.ty), ("eps", &ParamType::Scalar(ScalarKind::F32)));

    // `cdiv(t,c)*c*h*d`: `*` is left-associative, `cdiv` an operand.
    let chunk_prepare = &table.entries[7];
    assert_eq!(chunk_prepare.field, "chunk_prepare");
    let ParamType::Buffer { extent, extent_text, .. } = &chunk_prepare.params.as_ref().unwrap()[0].ty else {
        panic!("q is a buffer")
    };
    assert_eq!(extent_text, "cdiv(t,c)*c*h*d");
    let cdiv = binary(BinaryOp::Cdiv, scalar("t", 13), scalar("c", 16));
    let expected = binary(
        BinaryOp::Mul,
        binary(BinaryOp::Mul, binary(BinaryOp::Mul, cdiv, scalar("c", 16)), scalar("h", 14)),
        scalar("d", 15),
    );
    assert_eq!(*extent, *expected);
    // Entries without `requires` have none.
    assert_eq!(table.entries[12].field, "fill");
    assert!(table.entries[12].requires.is_empty());
}

#[test]
fn extents_follow_precedence_and_use_defines_declared_after_the_table() {
    let text = format!(
        "{}[defines]\nB = 8\n",
        with_params("u32 n, const f32 x[1 + n * 2 % 3 - cdiv(n, B)], u64 w, i32 s")
    );
    let params = params_of(&text);
    let ParamType::Buffer { element, writable, extent, extent_text, .. } = &params[1].ty else { panic!() };
    assert_eq!(
        (*element, *writable, extent_text.as_str()),
        (DType::F32, false, "1 + n * 2 % 3 - cdiv(n, B)")
    );
    let b = Box::new(Expr::Define { name: "B".to_owned(), value: 8 });
    let product = binary(
        BinaryOp::Rem,
        binary(BinaryOp::Mul, scalar("n", 0), Box::new(Expr::Literal(2))),
        Box::new(Expr::Literal(3)),
    );
    let sum = binary(BinaryOp::Add, Box::new(Expr::Literal(1)), product);
    assert_eq!(*extent, *binary(BinaryOp::Sub, sum, binary(BinaryOp::Cdiv, scalar("n", 0), b)));
    assert_eq!(params[2].ty, ParamType::Scalar(ScalarKind::U64));
    assert_eq!(params[3].ty, ParamType::Scalar(ScalarKind::I32));
    assert_eq!((params[1].location.line, params[1].location.column), (2, 61));
}

#[test]
fn params_are_optional_and_may_be_empty() {
    let manifest = Manifest::parse("k.toml", "[t]\ng = { module = \"m\", entry = \"e\" }\n").unwrap();
    assert_eq!(manifest.tables[0].entries[0].params, None);
    assert!(manifest.tables[0].entries[0].requires.is_empty());
    assert_eq!(params_of(&with_params(" ")), []);
    // Integer scalars of any width, u64::MAX, parentheses, names across lines of a multi-line string.
    let text = "[t]\ng = { module = \"m\", entry = \"e\", params = \"\"\"\nu32 x[(n + 1) * 18446744073709551615 % 7],\ni32 n\"\"\" }\n";
    assert_eq!(params_of(text)[1].location.line, 4);
}

#[test]
fn requirements_parse_comparisons_joined_by_or() {
    let text = with_requires(&["n % 32 == 0 || grid.z != n", "block.x * 2 <= 1024", "shared.bytes >= 2 * n"]);
    let manifest = Manifest::parse("k.toml", &text).unwrap();
    let requires = &manifest.tables[0].entries[0].requires;
    assert_eq!(requires.len(), 3);
    assert_eq!(requires[2].any_of[0].lhs, Expr::Launch(LaunchDim::SharedBytes));
    let ops: Vec<CompareOp> = requires[0].any_of.iter().map(|c| c.op).collect();
    assert_eq!(ops, [CompareOp::Eq, CompareOp::Ne]);
    assert_eq!(requires[0].any_of[1].lhs, Expr::Launch(LaunchDim::GridZ));
    assert_eq!(requires[1].any_of[0].op, CompareOp::Le);
    assert_eq!((requires[1].location.line, requires[1].location.column), (2, 94));
}

#[test]
fn every_c_type_of_a_kernel_library_is_a_buffer_element_and_a_scalar() {
    let params = params_of(&with_params(
        "const f16 a[n], f64 b[n], const i8 c[n], u8 d[n], i16 e[n], const u16 f[n], i32 g[n], i64 h[n], \
         u64 i[n], const bool j[n], const fp8e4m3 k[n], fp8e5m2 l[n], u64 n, i64 o, f16 p, bf16 q, f64 r, \
         i8 s, u8 t, i16 u, u16 v, bool w",
    ));
    let spelled: Vec<String> = params.iter().map(|param| param.ty.to_string()).collect();
    assert_eq!(
        spelled,
        [
            "const f16[n]",
            "f64[n]",
            "const i8[n]",
            "u8[n]",
            "i16[n]",
            "const u16[n]",
            "i32[n]",
            "i64[n]",
            "u64[n]",
            "const bool[n]",
            "const fp8e4m3[n]",
            "fp8e5m2[n]",
            "u64",
            "i64",
            "f16",
            "bf16",
            "f64",
            "i8",
            "u8",
            "i16",
            "u16",
            "bool",
        ]
    );
    // A `u64` or `i64` scalar sizes an extent like any integer (`bool` too, as 0 or 1); a float does not.
    assert_eq!(params_of(&with_params("f32 x[o], i64 o")).len(), 2);
    let float_extent = errors(&with_params("f32 x[p], f16 p"));
    assert_eq!(float_extent.len(), 1, "{float_extent:?}");
}

#[test]
fn an_unknown_type_lists_the_accepted_ones() {
    assert_eq!(
        errors(&with_params("f8 a[n], u32 n, float x, fp8e4m3 s, i32 b[n]")),
        [
            "k.toml:2:44: entry `g`: unknown element type `f8` of buffer `a`: expected bf16, f32, u32, f16, f64, i8, u8, i16, u16, i32, i64, u64, bool, fp8e4m3, fp8e5m2 or void",
            "k.toml:2:60: entry `g`: unknown type `float` of scalar `x`: expected u32, i32, u64, f32, f16, bf16, f64, i8, u8, i16, u16, i64 or bool",
            "k.toml:2:69: entry `g`: scalar `s` cannot be fp8e4m3: a scalar is u32, i32, u64, f32, f16, bf16, f64, i8, u8, i16, u16, i64 or bool (fp8e4m3 is a buffer element type)",
        ]
    );
}

#[test]
fn an_unknown_name_in_an_extent_is_reported_at_the_name() {
    assert_eq!(
        errors(&with_params("bf16 a[n*x], u32 n")),
        [
            "k.toml:2:53: entry `g`: unknown name `x` in the extent of `a`: not a scalar parameter of this entry, a [defines] constant or a launch dimension (block.x, ..., grid.z, shared.bytes)"
        ]
    );
}

#[test]
fn only_integer_scalars_size_a_buffer() {
    assert_eq!(
        errors(&with_params("f32 eps, bf16 a[eps], bf16 b[a]")),
        [
            "k.toml:2:60: entry `g`: f32 scalar `eps` cannot size a buffer (the extent of `a`)",
            "k.toml:2:73: entry `g`: buffer `a` cannot size a buffer (the extent of `b`): an extent uses integer scalars, [defines] constants and launch dimensions, and reads a layout with `strided`",
        ]
    );
}

#[test]
fn a_duplicate_parameter_names_the_first_one() {
    assert_eq!(
        errors(&with_params("u32 n, bf16 a[n], u32 n")),
        ["k.toml:2:66: entry `g`: parameter `n` is listed twice: first at 2:48"]
    );
}

#[test]
fn parameter_names_are_c_identifiers_not_keywords_nor_defines() {
    assert_eq!(
        errors(&format!("{}[defines]\nX = 1\n", with_params("u32 type, u32 état, u32 X, u32 _"))),
        [
            "k.toml:2:48: entry `g`: parameter name `type` is a Rust keyword; choose another name",
            "k.toml:2:58: entry `g`: parameter name `état` is not a C identifier (ASCII letters, digits and `_`, not starting with a digit)",
            "k.toml:2:68: entry `g`: parameter name `X` is also a [defines] constant, which nvcc would substitute into the kernel; choose another name",
            "k.toml:2:75: entry `g`: parameter name `_` cannot name a Rust field; choose another name",
        ]
    );
}

#[test]
fn parameter_names_may_not_take_the_prefix_of_generated_locals() {
    assert_eq!(
        errors(&with_params("u32 __kda_0, u32 __kda")),
        [
            "k.toml:2:48: entry `g`: parameter name `__kda_0` starts with `__kda_`, which kda reserves for generated code"
        ]
    );
}

#[test]
fn literals_are_decimal_u64() {
    assert_eq!(
        errors(&with_params("bf16 a[18446744073709551616], bf16 b[0x10]")),
        [
            "k.toml:2:51: entry `g`: integer literal `18446744073709551616` does not fit in u64",
            "k.toml:2:81: entry `g`: invalid integer literal `0x10`: write a decimal integer",
        ]
    );
}

#[test]
fn const_applies_to_buffers_only() {
    assert_eq!(
        errors(&with_params("const u32 n")),
        ["k.toml:2:44: entry `g`: `const` applies to buffers only: scalar `n` is passed by value"]
    );
}

#[test]
fn syntax_errors_are_located_and_each_parameter_is_parsed_on_its_own() {
    // The missing `]` costs `a` only: `n` is still declared, `c` still checked.
    assert_eq!(
        errors(&with_params("bf16 a[n, u32 n, bf16* c, bf16 d[], ,u32 e, bf16 f[n] g")),
        [
            "k.toml:2:52: entry `g`: expected `]` to close the extent of `a`, found `,`",
            "k.toml:2:65: entry `g`: expected the parameter's name after `bf16`, found `*`: a buffer is written `[const] T name[EXTENT]`",
            "k.toml:2:76: entry `g`: the extent of `d` is empty: write its number of elements, as in `d[n]`",
            "k.toml:2:80: entry `g`: expected a parameter (`[const] T name[EXTENT]` or `T name`), found `,`",
            "k.toml:2:98: entry `g`: expected `,` or the end of `params` after parameter `f`, found `g`",
        ]
    );
    assert_eq!(
        errors(&with_params("bf16 a[cdiv(n n)], u32 n,")),
        [
            "k.toml:2:58: entry `g`: expected `,` between the two operands of `cdiv`, found `n`",
            "k.toml:2:69: entry `g`: expected a parameter (`[const] T name[EXTENT]` or `T name`), found the end of the string",
        ]
    );
}

#[test]
fn extents_divide_take_min_and_max_choose_and_read_the_launch() {
    let params = params_of(&with_params(
        "const f32 x[min(n, 4) * max(n / 2, 1)], f32 y[grid.x * n], f32 z[b != 0 ? b * n : n], u32 n, u32 b",
    ));
    let extents: Vec<&Expr> = params
        .iter()
        .filter_map(|p| match &p.ty {
            ParamType::Buffer { extent, .. } => Some(extent),
            ParamType::Scalar(_) => None,
        })
        .collect();
    let literal = |value| Box::new(Expr::Literal(value));
    assert_eq!(
        *extents[0],
        *binary(
            BinaryOp::Mul,
            binary(BinaryOp::Min, scalar("n", 3), literal(4)),
            binary(BinaryOp::Max, binary(BinaryOp::Div, scalar("n", 3), literal(2)), literal(1)),
        )
    );
    assert_eq!(*extents[1], *binary(BinaryOp::Mul, Box::new(Expr::Launch(LaunchDim::GridX)), scalar("n", 3)));
    assert_eq!(
        *extents[2],
        Expr::Select {
            condition: Box::new(Comparison {
                lhs: *scalar("b", 4),
                op: CompareOp::Ne,
                rhs: Expr::Literal(0)
            }),
            taken: binary(BinaryOp::Mul, scalar("b", 4), scalar("n", 3)),
            other: scalar("n", 3),
        }
    );
    // In a requirement a conditional is written in parentheses, and min/max/`/` work as anywhere.
    let text = with_requires(&["n >= (n > 8 ? 2 : 1)", "min(n, 3) / 2 == 1"]);
    let manifest = Manifest::parse("k.toml", &text).unwrap();
    assert_eq!(manifest.tables[0].entries[0].requires.len(), 2);
}

#[test]
fn a_misused_conditional_or_function_is_located() {
    assert_eq!(
        errors(&with_params("bf16 a[n == 1 ? 2], bf16 b[n ? 1 : 2], bf16 c[grid.w], bf16 d[max(n)], u32 n")),
        [
            "k.toml:2:61: entry `g`: expected `:` between the two values of `c ? a : b`, found `]`",
            "k.toml:2:73: entry `g`: expected `]` to close the extent of `b`, found `?`",
            "k.toml:2:90: entry `g`: `grid.w` is not a launch dimension: expected block.x, block.y, block.z, grid.x, grid.y, grid.z or shared.bytes",
            "k.toml:2:111: entry `g`: expected `,` between the two operands of `max`, found `)`",
        ]
    );
    // A conditional's constant branch that always fails is still reported; a folded condition
    // picks its branch, so `1 == 1 ? n : n / 0` reports only what is always taken.
    let text = format!("{}[defines]\nZERO = 0\n", with_params("bf16 a[1 == 0 ? 1 : n / ZERO], u32 n"));
    assert_eq!(errors(&text), ["k.toml:2:66: entry `g`: `n / ZERO` divides by zero"]);
    // A requirement's sides stay its own: an unparenthesised conditional is not one.
    assert_eq!(
        errors(&with_requires(&["n == 1 ? 1 : 2"])),
        ["k.toml:2:72: entry `g`: expected `||` or the end of the requirement, found `?`"]
    );
}

#[test]
fn constant_arithmetic_that_always_fails_is_reported_at_the_operator() {
    let text = format!(
        "{}[defines]\nCONV_BLOCK = 256\nZERO = 0\nBIG = 4294967295\n",
        with_params(
            "bf16 x[1 - 2], bf16 y[CONV_BLOCK - 300], bf16 z[cdiv(n, ZERO) + n % 0], bf16 w[BIG * BIG * BIG], u32 n"
        )
    );
    assert_eq!(
        errors(&text),
        [
            "k.toml:2:53: entry `g`: `1 - 2` is below zero (expressions are unsigned)",
            "k.toml:2:77: entry `g`: `CONV_BLOCK - 300` (256 - 300) is below zero (expressions are unsigned)",
            "k.toml:2:92: entry `g`: `cdiv(n, ZERO)` divides by zero",
            "k.toml:2:110: entry `g`: `n % 0` divides by zero",
            "k.toml:2:133: entry `g`: `BIG * BIG * BIG` (18446744065119617025 * 4294967295) overflows u64",
        ]
    );
}

#[test]
fn requirements_use_the_same_names_and_syntax() {
    assert_eq!(
        errors(&with_requires(&["n >= 1 || q == 2"])),
        [
            "k.toml:2:75: entry `g`: unknown name `q` in a requirement: not a scalar parameter of this entry, a [defines] constant or a launch dimension (block.x, ..., grid.z, shared.bytes)"
        ]
    );
    assert_eq!(
        errors(&with_requires(&["n = 1", "n < 2 < 3", ""])),
        [
            "k.toml:2:67: entry `g`: expected a comparison (`==`, `!=`, `<`, `<=`, `>` or `>=`), found `=` (`==` tests equality)",
            "k.toml:2:80: entry `g`: expected `||` or the end of the requirement, found `<`",
            "k.toml:2:87: entry `g`: expected an integer, a name, `cdiv(a, b)`, `min(a, b)`, `max(a, b)`, `strided(layout, rank)` or `(`, found the end of the string",
        ]
    );
}

#[test]
fn requires_without_params_is_reported_at_the_array() {
    assert_eq!(
        errors("[t]\nh = { module = \"m\", entry = \"f\", requires = [\"1 == 1\"] }\n"),
        [
            "k.toml:2:45: entry `h`: `requires` without `params`: a requirement names the kernel's parameters, so declare them in `params`"
        ]
    );
}

#[test]
fn strings_with_escapes_are_located_at_their_start_and_others_exactly() {
    // `\u0041` is `A`: the value no longer matches the source byte for byte.
    assert_eq!(
        errors(&with_params("bf16 a[\\u0041]")),
        [
            "k.toml:2:44: entry `g`: unknown name `A` in the extent of `a`: not a scalar parameter of this entry, a [defines] constant or a launch dimension (block.x, ..., grid.z, shared.bytes)"
        ]
    );
    assert_eq!(
        errors(
            "[t]\ng = { module = \"m\", entry = \"e\", params = 'bf16 a[z]' }\n[t.h]\nmodule = \"m\"\nentry = \"f\"\nparams = '''\n  u32 q[z]'''\n"
        ),
        [
            "k.toml:2:51: entry `g`: unknown name `z` in the extent of `a`: not a scalar parameter of this entry, a [defines] constant or a launch dimension (block.x, ..., grid.z, shared.bytes)",
            "k.toml:7:9: entry `h`: unknown name `z` in the extent of `q`: not a scalar parameter of this entry, a [defines] constant or a launch dimension (block.x, ..., grid.z, shared.bytes)",
        ]
    );
}

#[test]
fn deep_nesting_and_huge_inputs_are_errors_not_crashes() {
    let deep = format!("{}n{}", "(".repeat(100_000), ")".repeat(100_000));
    assert_eq!(
        errors(&with_params(&format!("bf16 a[{deep}], u32 n"))),
        [
            "k.toml:2:115: entry `g`: expression nested too deeply: at most 64 levels of parentheses, function calls and conditionals"
        ]
    );
    // Located at the 513th `+`.
    let chain = format!("n{}", " + n".repeat(50_000));
    assert_eq!(
        errors(&with_params(&format!("bf16 a[{chain}], u32 n"))),
        [
            "k.toml:2:2101: entry `g`: expression too long: more than 512 operators in a row (`a + b + c` has two)"
        ]
    );
    let digits = "9".repeat(100_000);
    assert_eq!(
        errors(&with_params(&format!("bf16 a[{digits}]"))),
        [format!("k.toml:2:51: entry `g`: integer literal `{}…` does not fit in u64", "9".repeat(40))]
    );
    // 100,001 empty parameters, each an error, and one for listing more than a kernel takes:
    // the first shown, the rest counted.
    let commas = Manifest::parse("k.toml", &with_params(&",".repeat(100_000))).unwrap_err();
    assert_eq!(commas.diagnostics.len() + commas.omitted, 100_002);
    assert!(commas.to_string().ends_with(&format!("\n... and {} more errors", commas.omitted)));
    // Alone, the one for listing more parameters than a kernel takes.
    let many: Vec<String> = (0..65_536).map(|i| format!("u32 n{i}")).collect();
    let many = errors(&with_params(&many.join(", ")));
    assert_eq!(many.len(), 1);
    assert!(many[0].contains("a kernel takes at most 65,535 parameters; `params` lists 65536"), "{many:?}");
}

#[test]
fn params_errors_of_every_entry_are_reported_in_file_order() {
    let text = "[t]\n\
                a = { module = \"m\", entry = \"a\", params = \"u32 n, u32 n\", requires = [\"x == 1\"] }\n\
                b = { module = \"m\", entry = \"b\", extra = 1, params = \"f16 x\" }\n\
                c = { module = \"m\", entry = \"c\", params = \"bf16 x[y]\" }\n";
    let lines: Vec<(u32, u32)> = Manifest::parse("k.toml", text)
        .unwrap_err()
        .diagnostics
        .iter()
        .map(|d| (d.location.line, d.location.column))
        .collect();
    // `b` has an unknown key, so its params are not read: one error per problem, no noise.
    assert_eq!(lines, [(2, 55), (2, 72), (3, 34), (4, 51)]);
}

#[test]
fn safety_states_what_the_caller_guarantees_for_a_buffer_whose_reach_depends_on_data() {
    let text = "[t]\n\
                g = { module = \"m\", entry = \"e\", params = \"const u32 ids[n], const f32 src[?], f32 out[n], u32 n\",\n\
                      safety = { src = \" every id is a row of src \" } }\n";
    let params = params_of(text);
    let src = &params[1];
    assert_eq!(
        (src.ty.to_string(), src.safety.as_deref()),
        ("const f32[?]".to_owned(), Some("every id is a row of src"))
    );
    let ParamType::Buffer { extent, .. } = &src.ty else { panic!("src is a buffer") };
    assert_eq!(*extent, Expr::Literal(0), "`?` is all kda can check: nothing");
    assert!(params.iter().filter(|p| p.name != "src").all(|p| p.safety.is_none()));
}

#[test]
fn safety_names_buffers_of_the_entry_with_a_condition_and_only_they_may_be_unbounded() {
    let text = "[t]\n\
                g = { module = \"m\", entry = \"e\", params = \"const f32 a[?], const f32 b[n], u32 n\",\n\
                      safety = { a = \"x\", b = \"\", n = \"x\", q = \"y\" } }\n\
                h = { module = \"m\", entry = \"h\", safety = { a = \"x\" } }\n\
                k = { module = \"m\", entry = \"k\", params = \"const f32 a[?]\" }\n";
    assert_eq!(
        errors(text),
        [
            "k.toml:3:25: entry `g`: the `safety` condition of `b` is empty: state what the caller guarantees",
            "k.toml:3:29: entry `g`: `safety` names scalar `n`: a condition states what a buffer's reach depends on",
            "k.toml:3:38: entry `g`: `safety` names `q`, which is not a parameter of this entry",
            "k.toml:4:43: entry `h`: `safety` without `params`: a condition names a buffer parameter, so declare them in `params`",
            "k.toml:5:56: entry `k`: the extent of `a` is `?`, unknown to kda: name `a` in the entry's `safety` with what the caller guarantees about its reach",
        ]
    );
}

#[test]
fn strided_reads_a_const_integer_layout_buffer_of_the_entry() {
    let params = params_of(&with_params(
        "u64 numel, u64 num_dims, const u64 info[2 * num_dims], const f32 inp[strided(info, num_dims)], f32 out[numel]",
    ));
    let ParamType::Buffer { extent, extent_text, .. } = &params[3].ty else { panic!("inp is a buffer") };
    assert_eq!(extent_text, "strided(info, num_dims)");
    assert_eq!(
        *extent,
        Expr::Strided { layout: "info".to_owned(), index: 2, rank: scalar("num_dims", 1), part: 1 }
    );
    assert_eq!(
        errors(&with_params(
            "f32 w[n], const f32 l[n], const u32 a[strided(w, 1)], const u32 b[strided(l, 1)], const u32 c[strided(n, 1)], const u32 d[strided(1, 1)], u32 n"
        )),
        [
            "k.toml:2:90: entry `g`: the layout `w` of `strided` is written by the kernel: a layout is `const`, so the launch check can read it before the launch",
            "k.toml:2:118: entry `g`: the layout `l` of `strided` holds f32: a layout holds integers (dims, then strides)",
            "k.toml:2:146: entry `g`: `strided` reads a layout buffer of this entry; `n` is not one",
            "k.toml:2:174: entry `g`: expected the name of a layout buffer, as in `strided(info, rank)`, found `1`",
        ]
    );
}

#[test]
fn strided_reads_a_later_run_of_strides_where_a_layout_holds_several() {
    // A binary op's layout: the dims, then the left input's strides, then the right's.
    let params = params_of(&with_params(
        "u64 rank, const u64 layout[3 * rank], const f32 lhs[strided(layout, rank)], const f32 rhs[strided(layout, rank, 2)]",
    ));
    let extents: Vec<&Expr> = params[2..]
        .iter()
        .map(|p| match &p.ty {
            ParamType::Buffer { extent, .. } => extent,
            ParamType::Scalar(_) => panic!("a buffer"),
        })
        .collect();
    let strided =
        |part| Expr::Strided { layout: "layout".to_owned(), index: 1, rank: scalar("rank", 0), part };
    assert_eq!(extents, [&strided(1), &strided(2)]);
    assert_eq!(
        errors(&with_params(
            "u64 r, const u64 l[3 * r], const f32 a[strided(l, r, 0)], const f32 b[strided(l, r, r)]"
        )),
        [
            "k.toml:2:97: entry `g`: expected the strides' part of the layout, an integer from 1 (the strides after the dims), as in `strided(info, rank, 2)`, found `0`",
            "k.toml:2:128: entry `g`: expected the strides' part of the layout, an integer from 1 (the strides after the dims), as in `strided(info, rank, 2)`, found `r`",
        ]
    );
}

#[test]
fn nullable_buffers_take_a_null_pointer_and_scalars_cannot_be_nullable() {
    let params =
        params_of(&with_params("nullable const f32 bias[n], nullable f32 out[n], const f32 x[n], u32 n"));
    let spelled: Vec<String> = params.iter().map(|p| p.ty.to_string()).collect();
    assert_eq!(spelled, ["nullable const f32[n]", "nullable f32[n]", "const f32[n]", "u32"]);
    // The qualifiers in either order.
    let swapped = params_of(&with_params("const nullable f32 x[n], u32 n"));
    assert_eq!(swapped[0].ty.to_string(), "nullable const f32[n]");
    assert_eq!(
        errors(&with_params("nullable u32 n, const f32 x[n]")),
        ["k.toml:2:44: entry `g`: `nullable` applies to buffers only: scalar `n` is passed by value"]
    );
}

#[test]
fn entries_with_the_same_strings_have_the_same_contract_at_their_own_places() {
    // `b` and `c` write `a`'s strings, at other lines and columns; in `alone`, `a`'s differ (in
    // the same bytes' room), so `b` is read as the first of its kind.
    let shared = r#"[t]
a = { module = "m", entry = "a", params = "const f32 x[n*k], u32 n, u32 k", requires = ["n >= 1", "k < 8"] }
  b   =   { module = "m", entry = "b", params = "const f32 x[n*k], u32 n, u32 k",
            requires = ["n >= 1", "k < 8"] }
c = { module = "m", entry = "c", params = "const f32 x[n*k], u32 n, u32 k", requires = ["n >= 1", "k < 8"], doc = "c" }
"#;
    let alone = shared.replacen("const f32 x[n*k], u32 n, u32 k", "const f64 x[k*n], u32 n, u32 k", 1);
    let (shared, alone) =
        (Manifest::parse("k.toml", shared).unwrap(), Manifest::parse("k.toml", &alone).unwrap());
    let (shared, alone) = (&shared.tables[0].entries, &alone.tables[0].entries);
    for at in [1, 2] {
        assert_eq!(shared[at].params, alone[at].params);
        assert_eq!(shared[at].requires, alone[at].requires);
    }
    let places = |entry: usize| -> Vec<(u32, u32)> {
        let params = shared[entry].params.iter().flatten().map(|p| p.location);
        params.chain(shared[entry].requires.iter().map(|r| r.location)).map(|l| (l.line, l.column)).collect()
    };
    assert_eq!(places(0), [(2, 54), (2, 66), (2, 73), (2, 89), (2, 99)]);
    assert_eq!(places(1), [(3, 60), (3, 72), (3, 79), (4, 25), (4, 35)]);
}
