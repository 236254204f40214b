//! The scanner on sources written to test each of its rules, and on any bytes (proptest).

use proptest::prelude::*;

use super::lex::lex;
use super::preprocess::Preprocessor;
use super::*;

fn kernel(source: &str, name: &str) -> Kernel {
    let scan = scan_source(source.as_bytes());
    scan.kernels.into_iter().find(|kernel| kernel.name == name).unwrap_or_else(|| panic!("no {name}"))
}

fn signature(kernel: &Kernel) -> Vec<(String, Option<String>)> {
    kernel.params.iter().map(|param| (param.type_tokens.join(" "), param.name.clone())).collect()
}

fn names(source: &str) -> Vec<String> {
    scan_source(source.as_bytes()).kernels.into_iter().map(|kernel| kernel.name).collect()
}

#[test]
fn a_plain_kernel_has_its_linkage_name_and_parameters() {
    let source = "#include <cstdint>\n\nextern \"C\" __global__ void __launch_bounds__(256)\n\
                  scale(const float* __restrict__ x, float *y, size_t n, unsigned int k, float v[4]) {}\n";
    let scale = kernel(source, "scale");
    assert_eq!(
        (scale.linkage, scale.template.as_deref(), scale.line, scale.macro_name.as_deref()),
        (Linkage::C, None, 3, None)
    );
    assert_eq!(
        signature(&scale),
        [
            ("const float * __restrict__".to_owned(), Some("x".to_owned())),
            ("float *".to_owned(), Some("y".to_owned())),
            ("size_t".to_owned(), Some("n".to_owned())),
            ("unsigned int".to_owned(), Some("k".to_owned())),
            ("float *".to_owned(), Some("v".to_owned())),
        ]
    );
}

#[test]
fn linkage_comes_from_the_declaration_or_an_extern_c_block() {
    let source = "extern \"C\" {\nnamespace ns { __global__ void in_block(int n) {} }\n}\n\
                  __global__ void mangled(int) {}\nstatic __global__ void hidden() {}\n\
                  template <typename T, int N>\n__global__ void templated(T* x) {}\n\
                  template __global__ void templated<float, 2>(float*);\n";
    let scan = scan_source(source.as_bytes());
    let found: Vec<_> = scan
        .kernels
        .iter()
        .map(|kernel| (kernel.entry(), kernel.linkage, kernel.template.as_deref(), kernel.params.len()))
        .collect();
    let cxx = |entry: &str, template| (entry.to_owned(), Linkage::Cxx, template, 1);
    assert_eq!(
        found,
        [
            ("in_block".to_owned(), Linkage::C, None, 1),
            cxx("mangled", None),
            ("hidden".to_owned(), Linkage::Internal, None, 0),
            // The template's definition, then its explicit instantiation, a kernel of its own.
            cxx("templated", Some("typename T, int N")),
            cxx("templated<float, 2>", Some("")),
        ]
    );
    assert!(scan.kernels[3].is_template() && !scan.kernels[4].is_template());
    assert_eq!(signature(&kernel(source, "mangled")), [("int".to_owned(), None)]);
}

#[test]
fn comments_strings_and_characters_hide_nothing_and_declare_nothing() {
    let source = "// extern \"C\" __global__ void in_comment(int n) {}\n\
                  /* __global__ void in_block_comment() {} */\n\
                  const char* s = \"__global__ void in_string() {}\"; char c = '\"';\n\
                  const char* r = R\"x(__global__ void in_raw() {})x\";\n\
                  extern \"C\" __global__ void real(int n) {}\n";
    assert_eq!(names(source), ["real"]);
}

#[test]
fn kernels_declared_in_macros_are_found_at_their_invocation() {
    let source = "#define OUT(TYPENAME, OUT_T, FN_NAME, FUNC) \\\n\
                  extern \"C\" __global__ void FN_NAME( \\\n    const size_t n, const TYPENAME *x, OUT_T *y \\\n\
                  ) { for (size_t i = 0; i < n; ++i) y[i] = FUNC; }\n\
                  #define SAME(TYPENAME, FN_NAME, FUNC) OUT(TYPENAME, TYPENAME, FN_NAME, FUNC)\n\
                  #define PASTED(T, SUFFIX) extern \"C\" __global__ void copy_##SUFFIX(const T *x, T *y) {}\n\
                  #define NAME(s) #s\n\
                  #define ALIAS SAME\n\
                  SAME(float, neg_f32, -x[i])\n\
                  ALIAS(double, neg_f64, -x[i])\n\
                  OUT(float, bool, is_pos_f32, x[i] > 0)\n\
                  PASTED(double, f64)\n\
                  const char* label = NAME(a \"b\");\n";
    let neg = kernel(source, "neg_f32");
    assert_eq!((neg.line, neg.macro_name.as_deref(), neg.linkage), (9, Some("SAME"), Linkage::C));
    assert_eq!(
        signature(&neg),
        [
            ("const size_t".to_owned(), Some("n".to_owned())),
            ("const float *".to_owned(), Some("x".to_owned())),
            ("float *".to_owned(), Some("y".to_owned())),
        ]
    );
    assert_eq!(signature(&kernel(source, "is_pos_f32"))[2].0, "bool *");
    assert_eq!(kernel(source, "copy_f64").macro_name.as_deref(), Some("PASTED"));
    let through_alias = kernel(source, "neg_f64");
    assert_eq!((through_alias.line, through_alias.macro_name.as_deref()), (10, Some("ALIAS")));
    let tokens = Preprocessor::new(&mut SourceReader::anywhere()).run(lex(source.as_bytes()), None, 0);
    assert!(tokens.iter().any(|token| &*token.text == "\"a \\\"b\\\"\""), "{tokens:?}");
}

#[test]
fn object_like_variadic_and_undefined_macros_expand_as_a_preprocessor_would() {
    let source = "#define KERNEL extern \"C\" __global__\n#define ARGS(...) (__VA_ARGS__)\n\
                  #define __global__\n\
                  KERNEL void first ARGS(int a, float b)\n#undef KERNEL\nKERNEL void second(int) {}\n";
    let scan = scan_source(source.as_bytes());
    assert_eq!(scan.kernels.len(), 1, "{:?}", scan.kernels);
    assert_eq!(signature(&scan.kernels[0]).len(), 2);
    assert_eq!(scan.kernels[0].linkage, Linkage::C);
}

#[test]
fn if_0_and_if_1_are_evaluated_and_every_other_condition_keeps_all_branches() {
    let source = "#if 0\n__global__ void dead() {}\n#else\n__global__ void alive_else() {}\n#endif\n\
                  #if 1\n__global__ void alive_if() {}\n#elif X\n__global__ void dead_elif() {}\n#endif\n\
                  #if __CUDA_ARCH__ >= 800\n__global__ void arch() {}\n#else\n__global__ void other() {}\n#endif\n\
                  #ifdef NEVER\n#if 0\n#else\n__global__ void nested() {}\n#endif\n#endif\n";
    assert_eq!(names(source), ["alive_else", "alive_if", "arch", "other", "nested"]);
}

#[test]
fn typedefs_usings_and_records_are_collected() {
    let source = "typedef unsigned short u16_t;\nusing idx_t = long long;\nstruct Params { int n; };\n\
                  typedef struct { float x; } Pair;\nclass __align__(16) Box;\nenum class Mode : int { A };\n\
                  typedef void (*callback)(int);\n";
    let types = scan_source(source.as_bytes()).types;
    let alias = |tokens: &[&str]| TypeDecl::Alias(tokens.iter().map(|t| t.to_string()).collect());
    assert_eq!(types.get("u16_t"), Some(&alias(&["unsigned", "short"])));
    assert_eq!(types.get("idx_t"), Some(&alias(&["long", "long"])));
    assert_eq!(types.get("Params"), Some(&TypeDecl::Record("struct".into())));
    assert_eq!(types.get("Pair"), Some(&TypeDecl::Record("struct".into())));
    assert_eq!(types.get("Box"), Some(&TypeDecl::Record("class".into())));
    assert_eq!(types.get("Mode"), Some(&TypeDecl::Record("enum".into())));
    assert_eq!(types.get("callback"), None);
}

#[test]
fn a_quoted_include_brings_its_macros_and_types_but_not_its_kernels() {
    let dir = std::env::temp_dir().join(format!("kda-scan-include-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(
        dir.join("sub/ops.cuh"),
        "#include \"../main.cu\"\ntypedef float real;\n#define OP(N) extern \"C\" __global__ void N(real* x) {}\n\
         __global__ void header_kernel() {}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("main.cu"),
        "#include \"sub/ops.cuh\"\n#include \"missing.cuh\"\nOP(from_header)\n",
    )
    .unwrap();
    let scan = scan_file(&dir.join("main.cu")).unwrap();
    let found: Vec<_> = scan.kernels.iter().map(|kernel| (kernel.name.as_str(), kernel.line)).collect();
    assert_eq!(found, [("from_header", 3)]);
    assert_eq!(scan.types.get("real"), Some(&TypeDecl::Alias(vec!["float".into()])));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_macro_that_grows_without_bound_costs_bounded_time() {
    let mut source = String::from("#define L0 extern \"C\" __global__ void k(int a) {}\n");
    for level in 1..40 {
        source.push_str(&format!("#define L{level} L{0} L{0}\n", level - 1));
    }
    source.push_str("L39\n#define SELF(x) SELF(x) x\nSELF(1)\n");
    let started = std::time::Instant::now();
    assert_eq!(names(&source), ["k"]);
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
}

/// Sources of `n` repetitions of what made a scan walk to the end of the source (or of a list)
/// from each repetition, each followed by one kernel: name, source.
fn quadratic_before(n: usize) -> Vec<(&'static str, String)> {
    let last = "\n;extern \"C\" __global__ void last(int n) {}\n";
    vec![
        // The declaration's prefix was read back to the last `;` from each `__global__`.
        ("`__global__` with no `;`, `{` or `}`", format!("{}{last}", "__global__ ".repeat(n))),
        ("one `template <` before them", format!("template < {}{last}", "__global__ ".repeat(n))),
        // A bracket was matched by a walk to the end of the source.
        ("open parameter lists", format!("{}{last}", "__global__ void k( ".repeat(n))),
        ("open template arguments", format!("{}{last}", "__global__ void k< ".repeat(n))),
        ("open attributes", format!("{}{last}", "__global__ __launch_bounds__( ".repeat(n))),
        // A macro's arguments were collected by a walk to the end of the source.
        ("open macro calls", format!("#define F(x) x\n{}{last}", "F ( ".repeat(n))),
        // Whether a token is read asked every open `#if`, and a kernel's linkage every open brace.
        ("open `#if`s", format!("{}{last}{}", "#ifdef X\n".repeat(n), "int x;\n".repeat(n))),
        ("open braces", format!("{}{}{last}", "{\n".repeat(n), "__global__ void k(int n) {}\n".repeat(n))),
        // A `##` run was spelled and lexed anew at each `##`; `#x` spelled its argument at each use.
        ("a long `##` run", format!("#define P x{}\nP{last}", " ## x".repeat(n))),
        ("`#x` used often", format!("#define S(x) {}\nS({}){last}", "#x ".repeat(n / 10), "a ".repeat(n))),
    ]
}

#[test]
fn sources_that_made_the_scan_quadratic_scan_in_linear_time() {
    // Each took minutes at this length in a debug build, and takes well under a second.
    for (what, source) in quadratic_before(100_000) {
        let started = std::time::Instant::now();
        let scan = scan_source(source.as_bytes());
        let found: Vec<&str> = scan.kernels.iter().map(|kernel| kernel.name.as_str()).collect();
        assert_eq!(found.last(), Some(&"last"), "{what}");
        assert!(started.elapsed() < std::time::Duration::from_secs(30), "{what}: {:?}", started.elapsed());
    }
}

#[test]
fn a_reader_reads_its_budget_of_bytes_and_lists_the_headers_past_it() {
    let dir = std::env::temp_dir().join(format!("kda-scan-budget-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let source = "#include \"big.cuh\"\n#include \"small.cuh\"\nKERNEL(k)\n";
    std::fs::write(dir.join("main.cu"), source).unwrap();
    std::fs::write(dir.join("big.cuh"), format!("// {}\n", "x".repeat(200))).unwrap();
    std::fs::write(dir.join("small.cuh"), "#define KERNEL(N) extern \"C\" __global__ void N() {}\n").unwrap();
    let mut reader = SourceReader::within(&dir, &[]).unwrap().with_budget(source.len() as u64 + 100);
    let scan = reader.scan_file(&dir.join("main.cu")).unwrap();
    let unread: Vec<_> =
        scan.unread.iter().map(|unread| (unread.line, unread.path.as_str(), &unread.why)).collect();
    assert_eq!(unread, [(1, "big.cuh", &Unread::OverBudget)]);
    assert_eq!(scan.kernels.len(), 1, "small.cuh, within the budget, was read");
    let spent = reader.scan_file(&dir.join("main.cu")).unwrap_err();
    assert!(spent.to_string().starts_with("past the 64 MiB"), "{spent}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Pieces of C, CUDA and preprocessor text that a mutation splices anywhere.
const PIECES: &[&str] = &[
    "#define F(a, ...) a##__VA_ARGS__ #a\n",
    "#if 0\n",
    "#else\n",
    "#endif\n",
    "#include \"x\"\n",
    "\\\n",
    "/*",
    "*/",
    "//",
    "\"",
    "'",
    "R\"(",
    ")\"",
    "__global__",
    "extern \"C\"",
    "template<",
    ">",
    "(",
    ")",
    "{",
    "}",
    ";",
    ",",
    "##",
    "#",
    "F(",
    "u8'",
    "1'0",
    "\n",
    "typedef",
    "struct",
    "[",
    "]",
    "...",
];

proptest! {
    #[test]
    fn no_bytes_make_the_scan_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = scan_source(&bytes);
    }

    #[test]
    fn no_mutation_of_a_kernel_library_makes_the_scan_panic(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), 0..PIECES.len(), any::<bool>()), 0..12),
    ) {
        let mut source = "#define OP(T, NAME, F) extern \"C\" __global__ void NAME(const size_t n, const T* x, T* y) \\\n\
                          { for (size_t i = 0; i < n; ++i) y[i] = F; }\n\
                          OP(float, neg_f32, -x[i])\ntemplate <typename T> __global__ void t(T* x) {}\n\
                          extern \"C\" { __global__ void c(int a[4], void (*f)(int)) {} }\n"
            .as_bytes()
            .to_vec();
        for (index, piece, delete) in edits {
            let at = index.index(source.len() + 1);
            if delete && at < source.len() {
                source.remove(at);
            } else {
                source.splice(at..at, PIECES[piece].bytes());
            }
        }
        let _ = scan_source(&source);
    }
}
