//! A kernel parameter's C type as the manifest spells it, under the table of kda-types
//! ([`DType::c_types`], [`ScalarKind`]) and its one integer rule: an integer type is a width and
//! a signedness, whatever the typedef, on the LP64 targets kda builds for.

use std::collections::BTreeMap;
use std::fmt;

use kda_build::cuda::scan::TypeDecl;
use kda_build::manifest::{DType, ScalarKind};

/// A parameter as a manifest entry states it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stated {
    /// `T name`: passed by value.
    Scalar(ScalarKind),
    /// `[const] T name[EXTENT]`: a pointer to its elements, `const` when the kernel only reads.
    Buffer {
        /// The element type.
        element: DType,
        /// Whether the pointee is `const`.
        constant: bool,
    },
}

/// Why a parameter's C type has no manifest spelling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unstatable {
    /// A `struct`, `class`, `union` or `enum` (the keyword, the name), by value or behind a
    /// pointer: the launch check knows no layout of it.
    Record(String, String),
    /// `T**`: the launch check can bound one buffer, not the buffers it points to.
    PointerToPointer,
    /// `T&` or `T&&`.
    Reference,
    /// Plain `char`, whose signedness is the platform's: neither `i8` nor `u8`.
    PlainChar,
    /// A `volatile` pointee.
    Volatile,
    /// An element type that is no scalar kind (fp8, `void`), passed by value.
    ByValue(DType),
    /// A name that is no manifest type's C type nor a typedef of one in the sources.
    Unknown(String),
    /// A declarator the census does not read: a function pointer, `...`, a template type.
    Declarator(String),
}

impl Unstatable {
    /// The reason without the names of one kernel, which kernels that share it are counted by.
    pub fn category(&self) -> String {
        match self {
            Unstatable::Record(keyword, _) => format!("a {keyword} parameter"),
            Unstatable::Unknown(name) => format!("unknown type `{name}`"),
            Unstatable::Declarator(_) => "a function pointer, `...` or template type parameter".to_owned(),
            other => other.to_string(),
        }
    }
}

impl fmt::Display for Unstatable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unstatable::Record(keyword, name) => {
                write!(f, "{keyword} type `{name}`: no manifest type has its layout")
            }
            Unstatable::PointerToPointer => f.write_str(
                "a pointer to pointer: the launch check bounds one buffer, not the ones it points to",
            ),
            Unstatable::Reference => f.write_str("a reference: a kernel takes pointers and values"),
            Unstatable::PlainChar => f.write_str(
                "plain `char`, neither i8 nor u8 (its signedness is the platform's): declare it `signed \
                 char`, `unsigned char`, `int8_t` or `uint8_t`",
            ),
            Unstatable::Volatile => f.write_str("a `volatile` pointee: a buffer is `const` or plain"),
            Unstatable::ByValue(dtype) => {
                write!(f, "`{}` by value: {dtype} is a buffer element type only", dtype.c_type())
            }
            Unstatable::Unknown(name) => write!(
                f,
                "unknown type `{name}`: no manifest type's C type, nor a typedef of one in these sources"
            ),
            Unstatable::Declarator(text) => write!(f, "`{text}`: not a pointer or value of a manifest type"),
        }
    }
}

/// The typedefs of the C and CUDA headers kernels include (`<cstdint>`, `<cstddef>`,
/// `<cuda_fp16.h>`'s `half`, `<cuda_bf16.h>`'s `nv_bfloat16`), as LP64 defines them. A source's
/// own typedef of the same name comes first.
const LIBRARY_TYPEDEFS: &[(&str, &str)] = &[
    ("size_t", "unsigned long"),
    ("ssize_t", "long"),
    ("ptrdiff_t", "long"),
    ("intptr_t", "long"),
    ("uintptr_t", "unsigned long"),
    ("int8_t", "signed char"),
    ("uint8_t", "unsigned char"),
    ("int16_t", "short"),
    ("uint16_t", "unsigned short"),
    ("int32_t", "int"),
    ("uint32_t", "unsigned int"),
    ("int64_t", "long"),
    ("uint64_t", "unsigned long"),
    ("half", "__half"),
    ("nv_bfloat16", "__nv_bfloat16"),
];

/// Words that qualify a parameter without changing its type as the nvcc check compares it.
const IGNORED: &[&str] = &["__restrict__", "__restrict", "restrict", "register", "__grid_constant__"];

/// The words of the C integer types, which combine (`unsigned long long int`).
const INTEGER_WORDS: &[&str] = &["signed", "unsigned", "char", "short", "int", "long"];

/// Typedefs nested deeper than this are taken for a cycle.
const MAX_ALIAS_DEPTH: usize = 32;

/// The most tokens of typedefs one parameter's type is resolved through: a typedef that names
/// another several times, which names another several times, ..., grows exponentially within
/// [`MAX_ALIAS_DEPTH`]; a real type's typedefs hold a handful.
const MAX_ALIAS_TOKENS: usize = 256;

/// How the manifest states a parameter whose type is `tokens` (as the scanner split it), with the
/// types the sources declare.
pub fn state(tokens: &[String], types: &BTreeMap<String, TypeDecl>) -> Result<Stated, Unstatable> {
    let mut alias_tokens = MAX_ALIAS_TOKENS;
    let tokens = resolve(tokens, types, 0, &mut alias_tokens)?;
    let is = |text: &str| tokens.iter().any(|token| token == text);
    if is("&") || is("&&") {
        return Err(Unstatable::Reference);
    }
    if ["(", "...", "<", "[", "::"].iter().any(|text| is(text)) {
        return Err(Unstatable::Declarator(tokens.join(" ")));
    }
    let first_star = tokens.iter().position(|token| token == "*").unwrap_or(tokens.len());
    let pointee = &tokens[..first_star];
    if pointee.iter().any(|token| token == "volatile") {
        return Err(Unstatable::Volatile);
    }
    let words: Vec<&str> = pointee.iter().map(String::as_str).filter(|word| *word != "const").collect();
    let element = dtype(&words)?;
    match tokens.iter().filter(|token| *token == "*").count() {
        0 => ScalarKind::ALL
            .into_iter()
            .find(|kind| kind.dtype() == element)
            .map(Stated::Scalar)
            .ok_or(Unstatable::ByValue(element)),
        1 => Ok(Stated::Buffer { element, constant: pointee.iter().any(|token| token == "const") }),
        _ => Err(Unstatable::PointerToPointer),
    }
}

/// `tokens` with every typedef replaced by what it names and the ignored qualifiers and `std::`
/// dropped; a record keyword or a typedef of a record is its reason. `depth` typedefs deep, with
/// `alias_tokens` more tokens of typedefs to read.
fn resolve(
    tokens: &[String],
    types: &BTreeMap<String, TypeDecl>,
    depth: usize,
    alias_tokens: &mut usize,
) -> Result<Vec<String>, Unstatable> {
    let mut resolved = Vec::new();
    let mut tokens = tokens.iter().peekable();
    while let Some(token) = tokens.next() {
        let token = token.as_str();
        if depth > 0 {
            *alias_tokens =
                alias_tokens.checked_sub(1).ok_or_else(|| Unstatable::Unknown(token.to_owned()))?;
        }
        if token == "std" && tokens.peek().is_some_and(|next| *next == "::") {
            tokens.next();
            continue;
        }
        if IGNORED.contains(&token) || (token == "::" && resolved.is_empty()) {
            continue;
        }
        if matches!(token, "struct" | "class" | "union" | "enum") {
            let name = tokens.next().cloned().unwrap_or_default();
            return Err(Unstatable::Record(token.to_owned(), name));
        }
        match types.get(token) {
            Some(TypeDecl::Record(keyword)) => {
                return Err(Unstatable::Record(keyword.clone(), token.to_owned()));
            }
            Some(TypeDecl::Alias(_)) if depth >= MAX_ALIAS_DEPTH => {
                return Err(Unstatable::Unknown(token.to_owned()));
            }
            Some(TypeDecl::Alias(aliased)) => {
                resolved.extend(resolve(aliased, types, depth + 1, alias_tokens)?);
            }
            None => match LIBRARY_TYPEDEFS.iter().find(|(name, _)| *name == token) {
                Some((_, c_type)) => resolved.extend(c_type.split(' ').map(str::to_owned)),
                None => resolved.push(token.to_owned()),
            },
        }
    }
    Ok(resolved)
}

/// The element type whose C type the words spell.
fn dtype(words: &[&str]) -> Result<DType, Unstatable> {
    let c_type = if !words.is_empty() && words.iter().all(|word| INTEGER_WORDS.contains(word)) {
        integer_type(words).ok_or_else(|| Unstatable::Unknown(words.join(" ")))?
    } else if let [word] = words {
        (*word).to_owned()
    } else {
        return Err(Unstatable::Unknown(words.join(" ")));
    };
    if c_type == "char" {
        return Err(Unstatable::PlainChar);
    }
    DType::ALL
        .into_iter()
        .find(|dtype| dtype.c_types().contains(&c_type.as_str()))
        .ok_or(Unstatable::Unknown(c_type))
}

/// The canonical spelling of a combination of integer words (`long unsigned int` is `unsigned
/// long`), or `None` where C has no such type.
fn integer_type(words: &[&str]) -> Option<String> {
    let count = |word: &str| words.iter().filter(|each| **each == word).count();
    let (signed, unsigned) = (count("signed"), count("unsigned"));
    if signed + unsigned > 1 || count("int") > 1 {
        return None;
    }
    let base = match (count("char"), count("short"), count("long")) {
        (1, 0, 0) if count("int") == 0 => {
            let char_type = match (signed, unsigned) {
                (1, _) => "signed char",
                (_, 1) => "unsigned char",
                _ => "char",
            };
            return Some(char_type.to_owned());
        }
        (0, 1, 0) => "short",
        (0, 0, 0) => "int",
        (0, 0, 1) => "long",
        (0, 0, 2) => "long long",
        _ => return None,
    };
    Some(if unsigned == 1 { format!("unsigned {base}") } else { base.to_owned() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stated(text: &str) -> Result<Stated, Unstatable> {
        let types = BTreeMap::from([
            ("real".to_owned(), TypeDecl::Alias(vec!["float".into()])),
            ("loop_a".to_owned(), TypeDecl::Alias(vec!["loop_b".into()])),
            ("loop_b".to_owned(), TypeDecl::Alias(vec!["loop_a".into()])),
            ("Params".to_owned(), TypeDecl::Record("struct".into())),
        ]);
        let tokens: Vec<String> =
            text.split(' ').filter(|word| !word.is_empty()).map(str::to_owned).collect();
        state(&tokens, &types)
    }

    fn buffer(element: DType, constant: bool) -> Result<Stated, Unstatable> {
        Ok(Stated::Buffer { element, constant })
    }

    #[test]
    fn integers_are_a_width_and_a_signedness_whatever_the_spelling() {
        for (text, kind) in [
            ("size_t", ScalarKind::U64),
            ("const size_t", ScalarKind::U64),
            ("std :: size_t", ScalarKind::U64),
            ("unsigned long", ScalarKind::U64),
            ("long unsigned int", ScalarKind::U64),
            ("uint64_t", ScalarKind::U64),
            ("int64_t", ScalarKind::I64),
            ("long long int", ScalarKind::I64),
            ("unsigned", ScalarKind::U32),
            ("uint32_t", ScalarKind::U32),
            ("int", ScalarKind::I32),
            ("signed", ScalarKind::I32),
            ("short int", ScalarKind::I16),
            ("unsigned short int", ScalarKind::U16),
            ("int8_t", ScalarKind::I8),
            ("signed char", ScalarKind::I8),
            ("unsigned char", ScalarKind::U8),
            ("bool", ScalarKind::Bool),
        ] {
            assert_eq!(stated(text), Ok(Stated::Scalar(kind)), "{text}");
        }
        assert_eq!(stated("char"), Err(Unstatable::PlainChar));
        assert_eq!(stated("const char *"), Err(Unstatable::PlainChar));
        assert_eq!(stated("long long long"), Err(Unstatable::Unknown("long long long".into())));
    }

    #[test]
    fn pointers_are_buffers_and_their_const_is_the_pointees() {
        assert_eq!(stated("const float * __restrict__"), buffer(DType::F32, true));
        assert_eq!(stated("float const *"), buffer(DType::F32, true));
        assert_eq!(stated("float * const"), buffer(DType::F32, false));
        assert_eq!(stated("const void *"), buffer(DType::Void, true));
        assert_eq!(stated("half *"), buffer(DType::F16, false));
        assert_eq!(stated("__nv_fp8_e4m3 *"), buffer(DType::Fp8E4M3, false));
        assert_eq!(stated("const real *"), buffer(DType::F32, true));
        assert_eq!(stated("__nv_bfloat16"), Ok(Stated::Scalar(ScalarKind::Bf16)));
    }

    #[test]
    fn what_no_manifest_type_spells_has_its_reason() {
        assert_eq!(stated("float * *"), Err(Unstatable::PointerToPointer));
        assert_eq!(stated("const float &"), Err(Unstatable::Reference));
        assert_eq!(stated("Params"), Err(Unstatable::Record("struct".into(), "Params".into())));
        assert_eq!(stated("const struct Other *"), Err(Unstatable::Record("struct".into(), "Other".into())));
        assert_eq!(stated("float2"), Err(Unstatable::Unknown("float2".into())));
        assert_eq!(stated("loop_a"), Err(Unstatable::Unknown("loop_a".into())));
        assert_eq!(stated("volatile int *"), Err(Unstatable::Volatile));
        assert_eq!(stated("__nv_fp8_e4m3"), Err(Unstatable::ByValue(DType::Fp8E4M3)));
        assert_eq!(stated("void ( * ) ( int )"), Err(Unstatable::Declarator("void ( * ) ( int )".into())));
        assert_eq!(stated("long double"), Err(Unstatable::Unknown("long double".into())));
    }

    #[test]
    fn typedefs_that_each_name_the_next_many_times_resolve_in_bounded_time() {
        // `t0` is 8 `t1`s, each 8 `t2`s, ...: 8^30 words, were each read.
        let mut types: BTreeMap<String, TypeDecl> = (0..30)
            .map(|level| (format!("t{level}"), TypeDecl::Alias(vec![format!("t{}", level + 1); 8])))
            .collect();
        types.insert("t30".to_owned(), TypeDecl::Alias(vec!["float".to_owned()]));
        let found = state(&["t0".to_owned(), "*".to_owned()], &types);
        assert!(matches!(found, Err(Unstatable::Unknown(_))), "{found:?}");
    }
}
