//! A scanner of CUDA sources for the kernels they declare: each `__global__` function, its
//! linkage, whether it is a template, its name and its parameters as C tokens, with the
//! typedefs, structs and classes the sources declare. `kda census` reads a kernel library with it
//! and drafts the manifest entries of the kernels kda can state.
//!
//! It is no compiler, and it never fails: any bytes scan to some list, maybe empty.
//!
//! - **Lexing.** Comments, string, raw-string and character literals, `\` line continuations
//!   (inside tokens too) and pp-numbers (`1'000`, `0x1p-3f`) are read as C does, so a
//!   `__global__` in a comment or a string is no kernel.
//! - **Macros.** `#define` and `#undef` of object-like and function-like macros (variadic ones
//!   too) are tracked in file order, with the definitions of the headers a source includes with
//!   `#include "..."` beside it; every macro is expanded wherever it is used, with `#`
//!   (stringizing) and `##` (token pasting), arguments expanded before substitution and the
//!   result rescanned, a macro never re-expanded inside its own expansion. So the kernels a
//!   library writes once in a macro and instantiates per element type
//!   (`UNARY_OP(float, uneg_f32, -x)`) are found, each at the line of its invocation. The
//!   declaration keywords the scanner reads (`__global__`, `extern`, `template`, ...) are never
//!   taken as macros: a shim for a host compiler that defines `__global__` away would hide every
//!   kernel. Expansion stops at [`MAX_MACRO_DEPTH`] nested macros and [`MAX_EXPANDED_TOKENS`]
//!   tokens, so a definition that grows without bound costs bounded time.
//! - **Conditionals.** `#if 0` and `#if 1` (and their `#elif` / `#else`) are evaluated; every
//!   other condition (`#if __CUDA_ARCH__ >= 800`, `#ifdef X`) is unknown without the compiler's
//!   flags, so *all* its branches are read: a census lists what some build of the library
//!   exports. A macro defined differently in two branches keeps the later definition, and a
//!   kernel declared in two branches is listed once, as first found.
//! - **Headers.** A quoted `#include` is read from the including file's folder (once per scan,
//!   at most [`MAX_INCLUDE_DEPTH`] deep, [`MAX_SOURCE_BYTES`] each) for its macros and types; the
//!   kernels a header declares are its own scan's, not its includer's. `<...>` includes are the
//!   toolkit's, whose typedefs the caller knows.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// The most bytes read of one source or header: past it the rest is not scanned.
pub const MAX_SOURCE_BYTES: u64 = 16 << 20;
/// The most tokens macro expansion may produce in one scan; past it macros stay unexpanded.
pub const MAX_EXPANDED_TOKENS: usize = 1 << 20;
/// The most macro expansions nested in one another (an argument's included).
pub const MAX_MACRO_DEPTH: usize = 64;
/// The most headers included inside one another.
pub const MAX_INCLUDE_DEPTH: usize = 32;

/// What the scan of one source found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceScan {
    /// Each `__global__` function, once per name, in source order.
    pub kernels: Vec<Kernel>,
    /// The types the source and the headers it includes declare, by name: what a parameter's
    /// type may name besides the C and CUDA types.
    pub types: BTreeMap<String, TypeDecl>,
}

/// A type a source declares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TypeDecl {
    /// `typedef T name;` or `using name = T;`: the tokens of `T`.
    Alias(Vec<String>),
    /// A `struct`, `class`, `union` or `enum` (the keyword), which no manifest type is.
    Record(String),
}

/// A `__global__` function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kernel {
    /// Its name: the symbol, where its linkage is C.
    pub name: String,
    /// Under which name the module exports it.
    pub linkage: Linkage,
    /// A template's parameter list as written (`typename T, int N`); empty for an explicit
    /// instantiation (`template __global__ void k<float>(float*);`).
    pub template: Option<String>,
    /// Its parameters, in order.
    pub params: Vec<KernelParam>,
    /// The line of its `__global__`, or of the macro invocation that declared it (1-based).
    pub line: u32,
    /// The macro whose invocation in the source declared it.
    pub macro_name: Option<String>,
}

/// The linkage of a kernel, which decides the symbol a module exports it under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Linkage {
    /// `extern "C"`, on the declaration or around it: exported under its own name.
    C,
    /// C++: exported under a mangled name.
    Cxx,
    /// `static`: not exported.
    Internal,
}

/// One parameter of a kernel, as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelParam {
    /// The tokens of its type, qualifiers included (`const`, `size_t`, `*`, `__restrict__`); an
    /// array parameter `T x[N]` is the pointer it decays to (`T`, `*`), and a declarator the
    /// scanner does not split (a function pointer) is all its tokens.
    pub type_tokens: Vec<String>,
    /// Its name, where it has one.
    pub name: Option<String>,
}

/// Scans the source at `path`, reading the headers it includes with `#include "..."` from its
/// folder. Only reading `path` itself can fail.
pub fn scan_file(path: &Path) -> std::io::Result<SourceScan> {
    let bytes = read_capped(path)?;
    let mut preprocessor = Preprocessor::default();
    preprocessor.included.insert(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned()));
    let tokens = preprocessor.run(lex(&bytes), path.parent(), 0);
    Ok(preprocessor.finish(&tokens))
}

/// Scans `source`, which includes no header.
pub fn scan_source(source: &[u8]) -> SourceScan {
    let mut preprocessor = Preprocessor::default();
    let tokens = preprocessor.run(lex(source), None, 0);
    preprocessor.finish(&tokens)
}

fn read_capped(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?.take(MAX_SOURCE_BYTES).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The words a scan reads as declarations, which a `#define` does not change.
const DECLARATION_KEYWORDS: &[&str] = &[
    "__global__",
    "__device__",
    "__host__",
    "extern",
    "static",
    "template",
    "typedef",
    "using",
    "struct",
    "class",
    "union",
    "enum",
    "void",
    "const",
];

/// Attributes that may stand between `__global__` and a kernel's name, or after `struct`, each
/// with a parenthesised argument.
const ATTRIBUTES: &[&str] = &["__launch_bounds__", "__attribute__", "__declspec", "alignas", "__align__"];

/// The words of a parameter's type that are no type's name, so cannot end an unnamed one.
const TYPE_WORDS: &[&str] = &[
    "void",
    "char",
    "short",
    "int",
    "long",
    "float",
    "double",
    "signed",
    "unsigned",
    "bool",
    "const",
    "volatile",
    "__restrict__",
    "__restrict",
    "restrict",
    "struct",
    "class",
    "union",
    "enum",
    "typename",
    "__grid_constant__",
];

// ---------------------------------------------------------------------------------------------
// Lexing

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Ident,
    Number,
    /// A string or character literal, its prefix and quotes included.
    Literal,
    Punct,
    /// What `##` leaves of an empty argument, gone once pasting is done.
    Placemarker,
}

#[derive(Clone, Debug)]
struct Token {
    kind: Kind,
    text: Rc<str>,
    /// The line it is on, or of the macro invocation it came from.
    line: u32,
    /// Whether whitespace or a comment is before it: `#define F(x)` is function-like, `#define
    /// F (x)` is not.
    space_before: bool,
    /// Whether it is the first token of its line: a `#` there starts a directive.
    line_start: bool,
    /// The macro whose invocation in the source produced it.
    origin: Option<Rc<str>>,
    /// Whether it is a `##` of a macro body, which pastes (a `##` in an argument does not).
    paste: bool,
}

impl Token {
    fn is(&self, text: &str) -> bool {
        self.kind != Kind::Literal && &*self.text == text
    }

    fn ident(&self) -> Option<&str> {
        (self.kind == Kind::Ident).then_some(&*self.text)
    }
}

/// The bytes of a source, read with `\`-newline continuations removed wherever they fall.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
    line: u32,
}

impl Cursor<'_> {
    fn skip_continuations(&mut self) {
        loop {
            match self.bytes.get(self.at..self.at.saturating_add(3)) {
                Some([b'\\', b'\n', ..]) => self.at += 2,
                Some([b'\\', b'\r', b'\n']) => self.at += 3,
                _ => return,
            }
            self.line = self.line.saturating_add(1);
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_continuations();
        self.bytes.get(self.at).copied()
    }

    /// The byte after the next one.
    fn peek_second(&mut self) -> Option<u8> {
        let (at, line) = (self.at, self.line);
        self.bump();
        let second = self.peek();
        (self.at, self.line) = (at, line);
        second
    }

    fn bump(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.at += 1;
        if byte == b'\n' {
            self.line = self.line.saturating_add(1);
        }
        Some(byte)
    }

    /// Moves past bytes while `keep` holds, appending them to `text`.
    fn take_while(&mut self, text: &mut Vec<u8>, keep: impl Fn(u8) -> bool) {
        while let Some(byte) = self.peek().filter(|&byte| keep(byte)) {
            text.push(byte);
            self.at += 1;
        }
    }
}

fn is_ident_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'$' || byte >= 0x80
}

/// The punctuators of more than one character that the scan tells apart (`<` and `>` stay single,
/// so that nested template arguments close one at a time).
const LONG_PUNCTS: &[&[u8]] = &[b"...", b"##", b"::", b"->", b"&&", b"||", b"==", b"!=", b"++", b"--"];

fn lex(bytes: &[u8]) -> Vec<Token> {
    let mut cursor = Cursor { bytes, at: 0, line: 1 };
    let mut tokens = Vec::new();
    let (mut space_before, mut line_start) = (false, true);
    while let Some(byte) = cursor.peek() {
        match (byte, cursor.peek_second()) {
            (b'\n', _) => {
                cursor.bump();
                (space_before, line_start) = (true, true);
            }
            (b' ' | b'\t' | b'\r' | 0x0b | 0x0c, _) => {
                cursor.bump();
                space_before = true;
            }
            (b'/', Some(b'/')) => {
                while cursor.peek().is_some_and(|byte| byte != b'\n') {
                    cursor.bump();
                }
                space_before = true;
            }
            (b'/', Some(b'*')) => {
                cursor.bump();
                cursor.bump();
                while let Some(byte) = cursor.bump() {
                    if byte == b'*' && cursor.peek() == Some(b'/') {
                        cursor.bump();
                        break;
                    }
                }
                space_before = true;
            }
            _ => {
                let line = cursor.line;
                let (kind, text) = lex_token(&mut cursor);
                let text: Rc<str> = String::from_utf8_lossy(&text).into();
                tokens.push(Token { kind, text, line, space_before, line_start, origin: None, paste: false });
                (space_before, line_start) = (false, false);
            }
        }
    }
    tokens
}

/// The token at the cursor, which is not whitespace.
fn lex_token(cursor: &mut Cursor<'_>) -> (Kind, Vec<u8>) {
    let mut text = Vec::new();
    let Some(first) = cursor.peek() else { return (Kind::Punct, text) };
    if is_ident_byte(first) && !first.is_ascii_digit() {
        cursor.take_while(&mut text, is_ident_byte);
        return match (text.as_slice(), cursor.peek()) {
            (b"R" | b"u8R" | b"uR" | b"UR" | b"LR", Some(b'"')) => {
                raw_string(cursor, &mut text);
                (Kind::Literal, text)
            }
            (b"u8" | b"u" | b"U" | b"L", Some(quote @ (b'"' | b'\''))) => {
                quoted(cursor, &mut text, quote);
                (Kind::Literal, text)
            }
            _ => (Kind::Ident, text),
        };
    }
    if first.is_ascii_digit() || (first == b'.' && cursor.peek_second().is_some_and(|b| b.is_ascii_digit())) {
        // A pp-number: digits, letters, `.`, digit separators and exponent signs.
        while let Some(byte) = cursor.peek() {
            let exponent_sign =
                matches!(byte, b'+' | b'-') && matches!(text.last(), Some(b'e' | b'E' | b'p' | b'P'));
            let separator = byte == b'\'' && cursor.peek_second().is_some_and(is_ident_byte);
            if !(is_ident_byte(byte) || byte == b'.' || exponent_sign || separator) {
                break;
            }
            text.push(byte);
            cursor.bump();
        }
        return (Kind::Number, text);
    }
    if matches!(first, b'"' | b'\'') {
        quoted(cursor, &mut text, first);
        return (Kind::Literal, text);
    }
    for punct in LONG_PUNCTS {
        let (at, line) = (cursor.at, cursor.line);
        if punct.iter().all(|&byte| cursor.bump() == Some(byte)) {
            return (Kind::Punct, punct.to_vec());
        }
        (cursor.at, cursor.line) = (at, line);
    }
    cursor.bump();
    text.push(first);
    (Kind::Punct, text)
}

/// A string or character literal from its opening `quote` to its closing one, or to the end of
/// the line where it is not closed.
fn quoted(cursor: &mut Cursor<'_>, text: &mut Vec<u8>, quote: u8) {
    text.extend(cursor.bump());
    while let Some(byte) = cursor.peek().filter(|&byte| byte != b'\n') {
        text.push(byte);
        cursor.bump();
        if byte == b'\\' {
            if let Some(escaped) = cursor.peek().filter(|&byte| byte != b'\n') {
                text.push(escaped);
                cursor.bump();
            }
        } else if byte == quote {
            return;
        }
    }
}

/// `R"delim( ... )delim"`, the prefix already in `text`; unterminated, it runs to the end.
fn raw_string(cursor: &mut Cursor<'_>, text: &mut Vec<u8>) {
    text.extend(cursor.bump());
    let mut delimiter = Vec::new();
    loop {
        match cursor.peek() {
            Some(b'(') => break,
            Some(byte) if delimiter.len() < 16 && !b"\" \t\n()\\".contains(&byte) => {
                delimiter.push(byte);
                text.push(byte);
                cursor.bump();
            }
            // No raw string after all: what follows is lexed as usual.
            _ => return,
        }
    }
    text.extend(cursor.bump());
    let opening = text.len();
    let closing: Vec<u8> = [&b")"[..], &delimiter, b"\""].concat();
    while let Some(byte) = cursor.bump() {
        text.push(byte);
        if text.len() >= opening + closing.len() && text.ends_with(&closing) {
            return;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Preprocessing

/// A `#define`.
#[derive(Debug)]
struct Macro {
    /// The parameters of a function-like macro (`__VA_ARGS__` or the named one last when
    /// variadic); `None` for an object-like one.
    params: Option<Vec<Rc<str>>>,
    variadic: bool,
    body: Vec<Token>,
}

/// One `#if` ... `#endif` being read.
struct Conditional {
    /// Whether the branch being read is read.
    live: bool,
    /// Whether a branch known to be true was read, so that the rest are not.
    taken: bool,
}

impl Conditional {
    /// A branch whose condition is `value` where the scan can tell, `None` where it cannot.
    fn branch(&mut self, value: Option<bool>) {
        self.live = !self.taken && value != Some(false);
        self.taken |= value == Some(true);
    }
}

/// The directives and macros of one scan: the source's and its headers'.
#[derive(Default)]
struct Preprocessor {
    macros: HashMap<Rc<str>, Rc<Macro>>,
    /// The tokens expansion has produced.
    expanded: usize,
    /// How many expansions are nested where the expansion is.
    nesting: usize,
    /// The files read, so that each is read once.
    included: HashSet<PathBuf>,
    /// The expanded tokens of every included header: read for their types, not their kernels.
    headers: Vec<Token>,
}

impl Preprocessor {
    /// The tokens of a file after its directives, with its macros expanded; `dir` is where its
    /// quoted includes are, if anywhere, and `includes` how many includes deep the file is.
    fn run(&mut self, tokens: Vec<Token>, dir: Option<&Path>, includes: usize) -> Vec<Token> {
        let mut out = Vec::new();
        let mut pending = Vec::new();
        let mut conditionals: Vec<Conditional> = Vec::new();
        let mut tokens = tokens.into_iter().peekable();
        while let Some(token) = tokens.next() {
            if !(token.line_start && token.is("#")) {
                if conditionals.iter().all(|conditional| conditional.live) {
                    pending.push(token);
                }
                continue;
            }
            let mut directive = Vec::new();
            while let Some(token) = tokens.next_if(|token| !token.line_start) {
                directive.push(token);
            }
            self.expand(&std::mem::take(&mut pending), &mut Vec::new(), &mut out);
            self.directive(&directive, &mut conditionals, dir, includes);
        }
        self.expand(&pending, &mut Vec::new(), &mut out);
        out
    }

    /// Carries out one directive (its tokens after the `#`) of a file `includes` includes deep.
    fn directive(
        &mut self,
        directive: &[Token],
        conditionals: &mut Vec<Conditional>,
        dir: Option<&Path>,
        includes: usize,
    ) {
        let Some((name, rest)) = directive.split_first() else { return };
        let live = conditionals.iter().all(|conditional| conditional.live);
        match &*name.text {
            "if" | "ifdef" | "ifndef" => {
                let mut conditional = Conditional { live: true, taken: false };
                conditional.branch(if name.is("if") { trivial_condition(rest) } else { None });
                conditionals.push(conditional);
            }
            "elif" | "elifdef" | "elifndef" => {
                if let Some(conditional) = conditionals.last_mut() {
                    conditional.branch(if name.is("elif") { trivial_condition(rest) } else { None });
                }
            }
            "else" => {
                if let Some(conditional) = conditionals.last_mut() {
                    conditional.branch(None);
                }
            }
            "endif" => drop(conditionals.pop()),
            _ if !live => {}
            "define" => self.define(rest),
            "undef" => {
                if let Some(name) = rest.first() {
                    self.macros.remove(&name.text);
                }
            }
            "include" => {
                if let (Some(dir), Some(header)) = (dir, rest.first()) {
                    let quoted = header.text.strip_prefix('"').and_then(|text| text.strip_suffix('"'));
                    if let Some(file) =
                        quoted.filter(|_| header.kind == Kind::Literal && includes < MAX_INCLUDE_DEPTH)
                    {
                        self.include(&dir.join(file), includes + 1);
                    }
                }
            }
            _ => {}
        }
    }

    /// Reads the header at `path` for its macros and types, unless it was read; one that cannot
    /// be read is left out, as the compiler's own headers are.
    fn include(&mut self, path: &Path, includes: usize) {
        let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
        if !self.included.insert(canonical) {
            return;
        }
        if let Ok(bytes) = read_capped(path) {
            let tokens = self.run(lex(&bytes), path.parent(), includes);
            self.headers.extend(tokens);
        }
    }

    /// Records `#define` (its tokens after `define`), unless it defines a declaration keyword.
    fn define(&mut self, tokens: &[Token]) {
        let Some((name, rest)) = tokens.split_first() else { return };
        if name.kind != Kind::Ident || DECLARATION_KEYWORDS.contains(&&*name.text) {
            return;
        }
        let function_like = rest.first().is_some_and(|open| open.is("(") && !open.space_before);
        let (params, variadic, body) = if function_like {
            let Some(close) = rest.iter().position(|token| token.is(")")) else { return };
            let Some((params, variadic)) = macro_params(&rest[1..close]) else { return };
            (Some(params), variadic, &rest[close + 1..])
        } else {
            (None, false, rest)
        };
        let body =
            body.iter().map(|token| Token { line_start: false, paste: token.is("##"), ..token.clone() });
        self.macros.insert(name.text.clone(), Rc::new(Macro { params, variadic, body: body.collect() }));
    }

    /// Appends `tokens` to `out` with every macro expanded; `active` are the macros whose
    /// expansion is being read, which are not expanded again.
    fn expand(&mut self, tokens: &[Token], active: &mut Vec<Rc<str>>, out: &mut Vec<Token>) {
        self.nesting += 1;
        let mut at = 0;
        while let Some(token) = tokens.get(at) {
            at += 1;
            let Some(definition) = self.definition(token, active) else {
                out.push(token.clone());
                continue;
            };
            let body = match &definition.params {
                None => Some(definition.body.clone()),
                Some(params) => macro_args(tokens, at).and_then(|(args, next)| {
                    let args = group_args(args, params.len(), definition.variadic);
                    let body = self.substitute(&definition.body, params, &args, active)?;
                    at = next;
                    Some(body)
                }),
            };
            // A function-like macro's name without arguments is a plain word; an expansion past
            // the budget is left unexpanded.
            let Some(body) = body else {
                out.push(token.clone());
                continue;
            };
            // Each token of an expansion is on the invocation's line, from the macro the source invoked.
            let origin = token.origin.clone().unwrap_or_else(|| token.text.clone());
            let mut replacement: Vec<Token> = paste(body)
                .into_iter()
                .map(|expanded| Token { line: token.line, origin: Some(origin.clone()), ..expanded })
                .collect();
            // An expansion that ends in a function-like macro's name takes its arguments from
            // what follows (`#define OP BINARY_OP` then `OP(float, add_f32)`).
            let calls_on = replacement.last().and_then(|last| self.definition(last, active));
            if let Some((_, next)) =
                calls_on.filter(|called| called.params.is_some()).and_then(|_| macro_args(tokens, at))
            {
                replacement.extend(tokens[at..next].iter().cloned());
                at = next;
            }
            self.expanded = self.expanded.saturating_add(replacement.len());
            active.push(token.text.clone());
            self.expand(&replacement, active, out);
            active.pop();
        }
        self.nesting -= 1;
    }

    /// The macro `token` invokes, where it is one to expand here.
    fn definition(&self, token: &Token, active: &[Rc<str>]) -> Option<Rc<Macro>> {
        let name = token.ident()?;
        let within = self.nesting <= MAX_MACRO_DEPTH && self.expanded < MAX_EXPANDED_TOKENS;
        let recursive = active.iter().any(|active| &**active == name);
        self.macros.get(name).filter(|_| within && !recursive).cloned()
    }

    /// A function-like macro's `body` with its `params` replaced by `args`; `None` past the
    /// expansion budget.
    fn substitute(
        &mut self,
        body: &[Token],
        params: &[Rc<str>],
        args: &[Vec<Token>],
        active: &mut Vec<Rc<str>>,
    ) -> Option<Vec<Token>> {
        let param =
            |token: &Token| token.ident().and_then(|name| params.iter().position(|param| &**param == name));
        let arg = |index: usize| args.get(index).map(Vec::as_slice).unwrap_or_default();
        let mut expanded_args: Vec<Option<Vec<Token>>> = vec![None; args.len()];
        let mut out: Vec<Token> = Vec::new();
        let mut at = 0;
        while let Some(token) = body.get(at) {
            at += 1;
            if out.len() > MAX_EXPANDED_TOKENS.saturating_sub(self.expanded) {
                return None;
            }
            let stringized = body.get(at).and_then(param).filter(|_| token.is("#"));
            if let Some(index) = stringized {
                at += 1;
                out.push(stringize(arg(index), token));
                continue;
            }
            let Some(index) = param(token) else {
                out.push(token.clone());
                continue;
            };
            // An operand of `##` is the argument as written, any other use the argument expanded.
            if out.last().is_some_and(|last| last.paste) || body.get(at).is_some_and(|next| next.paste) {
                out.extend_from_slice(arg(index));
                if arg(index).is_empty() {
                    out.push(Token {
                        kind: Kind::Placemarker,
                        text: "".into(),
                        paste: false,
                        ..token.clone()
                    });
                }
            } else if let Some(slot) = expanded_args.get_mut(index) {
                let expanded = match slot {
                    Some(expanded) => expanded,
                    None => {
                        let mut expanded = Vec::new();
                        self.expand(arg(index), active, &mut expanded);
                        slot.insert(expanded)
                    }
                };
                out.extend_from_slice(expanded);
            }
        }
        Some(out)
    }

    /// What the scan found, once the source's tokens are read.
    fn finish(self, tokens: &[Token]) -> SourceScan {
        let mut types = declared_types(&self.headers);
        types.extend(declared_types(tokens));
        SourceScan { kernels: kernels(tokens), types }
    }
}

/// `0` or `1` (any integer literal), which a scan can evaluate without the compiler's flags.
fn trivial_condition(tokens: &[Token]) -> Option<bool> {
    let [number] = tokens else { return None };
    let digits = number.text.trim_end_matches(['u', 'U', 'l', 'L']);
    let value = match digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => digits.parse::<u64>().ok(),
    };
    value.filter(|_| number.kind == Kind::Number).map(|value| value != 0)
}

/// The parameters of `#define F(a, b, ...)` between the parentheses, and whether it is variadic.
fn macro_params(tokens: &[Token]) -> Option<(Vec<Rc<str>>, bool)> {
    let mut params = Vec::new();
    let mut variadic = false;
    let mut expects_name = true;
    let mut tokens = tokens.iter().peekable();
    while let Some(token) = tokens.next() {
        if variadic {
            // Nothing follows the variadic parameter.
            return None;
        }
        if !expects_name && token.is(",") {
            expects_name = true;
            continue;
        }
        if !expects_name {
            return None;
        }
        if token.is("...") {
            params.push("__VA_ARGS__".into());
            variadic = true;
        } else {
            params.push(token.ident()?.into());
            variadic = tokens.next_if(|next| next.is("...")).is_some();
        }
        expects_name = false;
    }
    (!expects_name || params.is_empty()).then_some((params, variadic))
}

/// The arguments of a function-like macro whose name is before `tokens[at]`, and where the
/// tokens after its `)` start; `None` where no `(` follows or it is not closed.
fn macro_args(tokens: &[Token], at: usize) -> Option<(Vec<Vec<Token>>, usize)> {
    if !tokens.get(at)?.is("(") {
        return None;
    }
    let mut args = vec![Vec::new()];
    let mut depth = 0usize;
    for (offset, token) in tokens.get(at + 1..)?.iter().enumerate() {
        if token.kind == Kind::Punct {
            match (&*token.text, depth) {
                (")", 0) => return Some((args, at + offset + 2)),
                (",", 0) => {
                    args.push(Vec::new());
                    continue;
                }
                ("(", _) => depth += 1,
                (")", _) => depth -= 1,
                _ => {}
            }
        }
        args.last_mut()?.push(token.clone());
    }
    None
}

/// `args` as `params` parameters take them: `F()` has no argument, and the arguments from the
/// variadic parameter on are one, with their commas.
fn group_args(mut args: Vec<Vec<Token>>, params: usize, variadic: bool) -> Vec<Vec<Token>> {
    if params == 0 && args.iter().all(Vec::is_empty) {
        return Vec::new();
    }
    if variadic && params > 0 && args.len() > params {
        let rest = args.split_off(params - 1);
        let mut joined: Vec<Token> = Vec::new();
        for arg in rest {
            if let Some(last) = joined.last() {
                joined.push(Token {
                    kind: Kind::Punct,
                    text: ",".into(),
                    space_before: false,
                    ..last.clone()
                });
            }
            joined.extend(arg);
        }
        args.push(joined);
    }
    args
}

/// `#arg`: the argument's spelling as a string literal.
fn stringize(arg: &[Token], hash: &Token) -> Token {
    let mut text = String::from("\"");
    for (index, token) in arg.iter().enumerate() {
        if index > 0 && token.space_before {
            text.push(' ');
        }
        for ch in token.text.chars() {
            if token.kind == Kind::Literal && matches!(ch, '"' | '\\') {
                text.push('\\');
            }
            text.push(ch);
        }
    }
    text.push('"');
    Token { kind: Kind::Literal, text: text.into(), paste: false, ..hash.clone() }
}

/// `tokens` with each `##` of the body replaced by the token its two sides spell together.
fn paste(tokens: Vec<Token>) -> Vec<Token> {
    let mut out: Vec<Token> = Vec::with_capacity(tokens.len());
    let mut tokens = tokens.into_iter();
    while let Some(token) = tokens.next() {
        if !token.paste {
            out.push(token);
            continue;
        }
        let (Some(left), Some(right)) = (out.pop(), tokens.next()) else { continue };
        let joined = match (left.kind, right.kind) {
            (Kind::Placemarker, _) => right,
            (_, Kind::Placemarker) => left,
            _ => {
                let text = format!("{}{}", left.text, right.text);
                let relexed = lex(text.as_bytes());
                let kind = match relexed.as_slice() {
                    [one] => one.kind,
                    // Not one token (`+` and `-` pasted): kept together, as a compiler would refuse it.
                    _ => Kind::Punct,
                };
                Token { kind, text: text.into(), paste: false, ..left }
            }
        };
        out.push(joined);
    }
    out.retain(|token| token.kind != Kind::Placemarker);
    out
}

// ---------------------------------------------------------------------------------------------
// Declarations

/// The `__global__` functions of a preprocessed source, once per name.
fn kernels(tokens: &[Token]) -> Vec<Kernel> {
    let mut found: Vec<Kernel> = Vec::new();
    let mut names = HashSet::new();
    // Per open brace: whether it opens an `extern "C" { ... }` block.
    let mut braces: Vec<bool> = Vec::new();
    let mut start = 0;
    let mut at = 0;
    while let Some(token) = tokens.get(at) {
        if token.kind == Kind::Punct {
            match &*token.text {
                "{" => {
                    let c_block = at >= 2 && tokens[at - 2].is("extern") && &*tokens[at - 1].text == "\"C\"";
                    braces.push(c_block);
                    start = at + 1;
                }
                "}" => {
                    braces.pop();
                    start = at + 1;
                }
                ";" => start = at + 1,
                _ => {}
            }
        } else if token.is("__global__") {
            let in_c_block = braces.iter().any(|&c_block| c_block);
            if let Some((kernel, next)) = kernel_at(tokens, start, at, in_c_block) {
                if names.insert(kernel.name.clone()) {
                    found.push(kernel);
                }
                (at, start) = (next, next);
                continue;
            }
        }
        at += 1;
    }
    found
}

/// The kernel whose declaration starts at `tokens[start]` and has its `__global__` at
/// `tokens[global]`, and where the tokens after its parameter list start.
fn kernel_at(tokens: &[Token], start: usize, global: usize, in_c_block: bool) -> Option<(Kernel, usize)> {
    let prefix = tokens.get(start..global)?;
    let template = prefix.iter().rposition(|token| token.is("template")).map(|at| {
        let rest = &prefix[at + 1..];
        match rest.first() {
            Some(open) if open.is("<") => {
                let close = matching(rest, 0, "<", ">").unwrap_or(rest.len());
                spell(rest.get(1..close).unwrap_or_default())
            }
            _ => String::new(),
        }
    });
    let extern_c = prefix.windows(2).any(|pair| pair[0].is("extern") && &*pair[1].text == "\"C\"");
    let linkage = if prefix.iter().any(|token| token.is("static")) {
        Linkage::Internal
    } else if extern_c || in_c_block {
        Linkage::C
    } else {
        Linkage::Cxx
    };
    // The name: the first word followed by its parameter list (or its template arguments),
    // past the return type and any `__launch_bounds__(...)`.
    let mut at = global + 1;
    let (name, open) = loop {
        let token = tokens.get(at)?;
        let next = tokens.get(at + 1);
        if at > global + 64 || [";", "{", "}"].iter().any(|end| token.is(end)) {
            return None;
        }
        if ATTRIBUTES.iter().any(|attribute| token.is(attribute)) && next.is_some_and(|next| next.is("(")) {
            at = matching(tokens, at + 1, "(", ")")? + 1;
            continue;
        }
        match (token.ident(), next) {
            (Some(name), Some(next)) if next.is("(") => break (name, at + 1),
            (Some(name), Some(next)) if next.is("<") => {
                let close = matching(tokens, at + 1, "<", ">")?;
                if tokens.get(close + 1).is_some_and(|open| open.is("(")) {
                    break (name, close + 1);
                }
            }
            _ => {}
        }
        at += 1;
    };
    let close = matching(tokens, open, "(", ")")?;
    let kernel = Kernel {
        name: name.to_owned(),
        linkage,
        template,
        params: params(&tokens[open + 1..close]),
        line: tokens[global].line,
        macro_name: tokens[global].origin.as_deref().map(str::to_owned),
    };
    Some((kernel, close + 1))
}

/// The index of the `close` that matches the `open` at `tokens[at]`, counting parentheses too
/// when matching angle brackets.
fn matching(tokens: &[Token], at: usize, open: &str, close: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut parens = 0usize;
    for (index, token) in tokens.iter().enumerate().skip(at) {
        if token.kind != Kind::Punct {
            continue;
        }
        if open != "(" {
            match &*token.text {
                "(" => parens += 1,
                ")" => parens = parens.checked_sub(1)?,
                _ => {}
            }
            if parens > 0 {
                continue;
            }
        }
        if token.is(open) {
            depth += 1;
        } else if token.is(close) {
            depth = depth.checked_sub(1)?;
            if depth == 0 {
                return Some(index);
            }
        } else if open != "(" && [";", "{", "}"].iter().any(|end| token.is(end)) {
            return None;
        }
    }
    None
}

/// The tokens as text, one space where the source had whitespace.
fn spell(tokens: &[Token]) -> String {
    let mut text = String::new();
    for (index, token) in tokens.iter().enumerate() {
        if index > 0 && token.space_before {
            text.push(' ');
        }
        text.push_str(&token.text);
    }
    text
}

/// The parameters between a kernel's parentheses.
fn params(tokens: &[Token]) -> Vec<KernelParam> {
    let mut pieces = vec![Vec::new()];
    let mut depth = 0usize;
    let mut angles = 0usize;
    for token in tokens {
        if token.kind == Kind::Punct {
            match &*token.text {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" | "}" => depth = depth.saturating_sub(1),
                "<" => angles += 1,
                ">" => angles = angles.saturating_sub(1),
                "," if depth == 0 && angles == 0 => {
                    pieces.push(Vec::new());
                    continue;
                }
                _ => {}
            }
        }
        if let Some(piece) = pieces.last_mut() {
            piece.push(token);
        }
    }
    if let [only] = pieces.as_slice()
        && (only.is_empty() || (only.len() == 1 && only[0].is("void")))
    {
        return Vec::new();
    }
    pieces.iter().map(|piece| param(piece)).collect()
}

/// One parameter's type and name.
fn param(tokens: &[&Token]) -> KernelParam {
    let texts = |tokens: &[&Token]| tokens.iter().map(|token| token.text.to_string()).collect::<Vec<_>>();
    // A default argument is no part of the type.
    let tokens = match tokens.iter().position(|token| token.is("=")) {
        Some(at) => &tokens[..at],
        None => tokens,
    };
    if tokens.iter().any(|token| token.is("(")) {
        return KernelParam { type_tokens: texts(tokens), name: None };
    }
    // `T x[N]` is `T* x`.
    let declarator_end = tokens.iter().position(|token| token.is("[")).unwrap_or(tokens.len());
    let arrays = tokens[declarator_end..].iter().filter(|token| token.is("[")).count();
    let (declared, name) = match tokens[..declarator_end].split_last() {
        Some((last, rest))
            if last.kind == Kind::Ident
                && !TYPE_WORDS.contains(&&*last.text)
                && rest.iter().any(|token| !TYPE_WORDS.contains(&&*token.text) || is_base_word(token)) =>
        {
            (rest, Some(last.text.to_string()))
        }
        _ => (&tokens[..declarator_end], None),
    };
    let mut type_tokens = texts(declared);
    type_tokens.extend(std::iter::repeat_n("*".to_owned(), arrays));
    KernelParam { type_tokens, name }
}

/// Whether the word names a type by itself (`int`), as opposed to qualifying one (`const`).
fn is_base_word(token: &Token) -> bool {
    ["void", "char", "short", "int", "long", "float", "double", "signed", "unsigned", "bool"]
        .contains(&&*token.text)
}

/// The typedefs, `using` aliases, structs, classes, unions and enums the tokens declare.
fn declared_types(tokens: &[Token]) -> BTreeMap<String, TypeDecl> {
    let mut types = BTreeMap::new();
    let mut at = 0;
    while let Some(token) = tokens.get(at) {
        at += 1;
        match token.ident() {
            Some("typedef") => {
                let end = statement_end(tokens, at);
                let declaration = &tokens[at..end];
                at = end;
                let Some((name, ty)) = declaration.split_last().filter(|(name, _)| name.kind == Kind::Ident)
                else {
                    continue;
                };
                let punct = |text: &str| ty.iter().any(|token| token.is(text));
                if punct("{") {
                    if let Some(keyword) = ty.first().filter(|first| record_keyword(first)) {
                        types.insert(name.text.to_string(), TypeDecl::Record(keyword.text.to_string()));
                    }
                } else if !(punct("(") || punct("[") || punct(",") || ty.is_empty()) {
                    let alias = ty.iter().map(|token| token.text.to_string()).collect();
                    types.insert(name.text.to_string(), TypeDecl::Alias(alias));
                }
            }
            Some("using") => {
                let (Some(name), Some(equals)) = (tokens.get(at).and_then(Token::ident), tokens.get(at + 1))
                else {
                    continue;
                };
                if equals.is("=") {
                    let end = statement_end(tokens, at + 2);
                    let ty = &tokens[at + 2..end];
                    if !ty.is_empty() && !ty.iter().any(|token| token.is("(")) {
                        let alias = ty.iter().map(|token| token.text.to_string()).collect();
                        types.insert(name.to_owned(), TypeDecl::Alias(alias));
                    }
                    at = end;
                }
            }
            Some(_) if record_keyword(token) => {
                if token.is("enum")
                    && tokens.get(at).is_some_and(|next| next.is("class") || next.is("struct"))
                {
                    at += 1;
                }
                while tokens
                    .get(at)
                    .is_some_and(|token| ATTRIBUTES.iter().any(|attribute| token.is(attribute)))
                {
                    let argument = tokens.get(at + 1).filter(|open| open.is("("));
                    at = argument
                        .and_then(|_| matching(tokens, at + 1, "(", ")"))
                        .map_or(at + 1, |close| close + 1);
                }
                let name = tokens.get(at).and_then(Token::ident);
                let follows = tokens
                    .get(at + 1)
                    .is_some_and(|next| ["{", ";", ":", "final"].iter().any(|t| next.is(t)));
                if let Some(name) = name.filter(|_| follows) {
                    types.insert(name.to_owned(), TypeDecl::Record(token.text.to_string()));
                }
            }
            _ => {}
        }
    }
    types
}

fn record_keyword(token: &Token) -> bool {
    ["struct", "class", "union", "enum"].iter().any(|keyword| token.is(keyword))
}

/// Where the statement from `tokens[at]` ends: its `;` outside braces and parentheses.
fn statement_end(tokens: &[Token], at: usize) -> usize {
    let mut depth = 0usize;
    for (index, token) in tokens.iter().enumerate().skip(at) {
        if token.kind != Kind::Punct {
            continue;
        }
        match &*token.text {
            "{" | "(" => depth += 1,
            "}" | ")" => depth = depth.saturating_sub(1),
            ";" if depth == 0 => return index,
            _ => {}
        }
    }
    tokens.len()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

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
            .map(|kernel| {
                (kernel.name.as_str(), kernel.linkage, kernel.template.as_deref(), kernel.params.len())
            })
            .collect();
        assert_eq!(
            found,
            [
                ("in_block", Linkage::C, None, 1),
                ("mangled", Linkage::Cxx, None, 1),
                ("hidden", Linkage::Internal, None, 0),
                ("templated", Linkage::Cxx, Some("typename T, int N"), 1),
            ]
        );
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
        let tokens = Preprocessor::default().run(lex(source.as_bytes()), None, 0);
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
}
