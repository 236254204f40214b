//! The fuzzer's inputs: structurally valid manifests, mutations of them, raw garbage, and
//! pathological sizes, each drawn from its own seeded generator so that one case can be rerun
//! alone (`KDA_FUZZ_ONLY=N`).

use std::fmt::Write;

/// SplitMix64: small, fast, and the same on every platform.
pub struct Rng(u64);

impl Rng {
    /// The generator of case `index` of a run seeded `seed`.
    pub fn for_case(seed: u64, index: u64) -> Self {
        let mut rng = Rng(seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        rng.next_u64();
        rng
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    /// One of `items` (not empty), uniformly.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Where an input comes from: the columns of the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A generated manifest meant to be valid (most of them are).
    Valid,
    /// A valid manifest, then 1 to 4 byte-level edits.
    Mutated,
    /// Bytes or tokens with no structure.
    Garbage,
    /// Valid structure around one giant piece: long names and lines, deep nesting, huge numbers,
    /// thousands of entries, parameters or errors.
    Pathological,
    /// A fixed regression case.
    Named,
}

impl Origin {
    /// Every origin, in the report's column order.
    pub const ALL: [Origin; 5] =
        [Origin::Valid, Origin::Mutated, Origin::Garbage, Origin::Pathological, Origin::Named];

    /// The origin's column heading in the report.
    pub fn name(self) -> &'static str {
        match self {
            Origin::Valid => "valid",
            Origin::Mutated => "mutated",
            Origin::Garbage => "garbage",
            Origin::Pathological => "patholog.",
            Origin::Named => "named",
        }
    }

    /// The origin's column: its place in [`Origin::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// One input.
pub struct Input {
    /// The file's bytes, UTF-8 or not.
    pub bytes: Vec<u8>,
    /// How it was made.
    pub origin: Origin,
    /// A table the text names, for the derive to ask for when the manifest does not parse.
    pub table: String,
    /// What the input is, for failure reports.
    pub what: String,
}

/// Case `index` of the run seeded `seed`.
pub fn input(seed: u64, index: u64) -> Input {
    let rng = &mut Rng::for_case(seed, index);
    let roll = rng.below(100);
    if roll < 55 {
        let manifest = Manifest::random(rng);
        Input {
            table: manifest.first_table(),
            bytes: manifest.render(rng).into_bytes(),
            origin: Origin::Valid,
            what: "valid".into(),
        }
    } else if roll < 87 {
        let manifest = Manifest::random(rng);
        let mut bytes = manifest.render(rng).into_bytes();
        let edits = mutate(rng, &mut bytes);
        Input {
            table: manifest.first_table(),
            bytes,
            origin: Origin::Mutated,
            what: format!("mutated: {edits}"),
        }
    } else if roll < 94 {
        let (bytes, what) = garbage(rng);
        Input { bytes, origin: Origin::Garbage, table: "t".into(), what }
    } else {
        let (text, table, what) = pathological(rng);
        let mut bytes = text.into_bytes();
        // Some giants get one edit too, so that their errors are reached from odd places.
        let what =
            if rng.chance(25) { format!("{what}, then {}", mutate_once(rng, &mut bytes)) } else { what };
        Input { bytes, origin: Origin::Pathological, table, what }
    }
}

// ---------------------------------------------------------------------------------------------
// Structurally valid manifests.

const FIELDS: &[&str] = &[
    "gemm",
    "gemv",
    "gemv_batchm",
    "norm",
    "conv",
    "pack",
    "gate",
    "recurrent",
    "chunk",
    "état",
    "_x",
    "None",
    "Ok",
    "Some",
    "Self_",
    "résumé",
    "λ",
    "変数",
    "union",
    "default",
    "raw",
    "macro_rules",
];
/// Field names that fail validation, drawn rarely.
const BAD_FIELDS: &[&str] =
    &["type", "fn", "self", "Self", "1x", "a-b", "_", "", "a b", "r#x", "gen", "crate"];
const MODULES: &[&str] = &["gemm", "gemv", "norm", "kda_chunk", "kda_gate", "causal_conv1d", "m", "_k9", "K"];
const BAD_C_NAMES: &[&str] = &["état", "a-b", "9k", "", "a.b", "a::b", "a b", "a\u{0}b"];
const SCALARS: &[&str] = &["n", "m", "k", "t", "c", "heads", "dim", "len", "rows", "stride"];
const ELEMENTS: &[&str] = &["bf16", "f32", "u32"];
const INT_TYPES: &[&str] = &["u32", "i32", "u64"];
const LAUNCH: &[&str] = &["block.x", "block.y", "block.z", "grid.x", "grid.y", "grid.z"];
const COMPARE: &[&str] = &["==", "!=", "<", "<=", ">", ">="];
const DOCS: &[&str] = &[
    "Dense bf16 GEMM.",
    "The batched GEMV: 2..=16 rows in one pass.",
    "Quotes \" and backslashes \\ and tabs \t.",
    "Ünïcödé, 変数, emoji 🦀, RTL \u{202E}text.",
    "",
    "Multi\nline\ndoc.",
    "`code` and **markdown** and <html>.",
    "*/ /* #[doc] \"\"\" ''' } { ] [",
];

/// Tokens random `params` and `requires` strings are made of, here and in the token soup of
/// `kda-build/tests/manifest_props.rs`: the grammar's words and punctuation, plus the pieces that
/// stress the lexer.
pub const CONTRACT_TOKENS: &[&str] = &[
    "const",
    "bf16",
    "f32",
    "u32",
    "i32",
    "u64",
    "f16",
    "n",
    "m",
    "eps",
    "type",
    "é",
    "THREADS",
    "[",
    "]",
    "(",
    ")",
    ",",
    "+",
    "-",
    "*",
    "%",
    "cdiv",
    "block",
    "grid",
    ".",
    "x",
    "w",
    "0",
    "1",
    "7",
    "18446744073709551616",
    "18446744073709551615",
    "0x1",
    "==",
    "!=",
    "<",
    "<=",
    ">=",
    "=",
    "||",
    "|",
    "$",
    "٣",
    "𝔘",
    "e\u{301}",
    "ǅ",
    "\u{200B}",
    "\u{FEFF}",
    "\t",
    "_",
    "__",
    "a1",
    "1a",
    "self",
    "Self",
    "D",
];

/// Fragments spliced into valid manifests, here and in `kda-build/tests/manifest_props.rs`'s
/// mutations: TOML structure, the contract grammar, huge literals, odd characters and escapes.
pub const FRAGMENTS: &[&str] = &[
    "[",
    "]",
    "{",
    "}",
    "=",
    "\"",
    "'",
    "\n",
    "\r",
    "\r\n",
    "\t",
    ",",
    "#",
    ".",
    "'''",
    "\"\"\"",
    "[[",
    "]]",
    "[[a]]\n",
    "[t]\n",
    "[t.f]\n",
    "[defines]\n",
    "x = { }",
    "optional = 1",
    "module = \"a-b\"",
    "entry = \"e\"",
    "doc = 3",
    "params = '",
    "requires = [",
    "params = \"u32 n\"",
    "requires = [\"n > 1\"]",
    "é",
    "\0",
    "\u{FFFD}",
    "\u{FEFF}",
    "\u{10FFFF}",
    "\\",
    "\\u",
    "\\uD800",
    "\\U0010FFFF",
    "\\U00110000",
    "\\x41",
    "\\u0041",
    "const ",
    "f16 ",
    "u32 ",
    "(",
    ")",
    "cdiv(",
    "*",
    "- 300",
    "% 0",
    "block.x",
    "grid.w",
    "||",
    "==",
    "=",
    ",,",
    "18446744073709551616",
    "99999999999999999999999999999999",
    "4294967296",
    "-1",
    "1e9",
    "1.5",
    "0x",
    "0xFFFFFFFFFFFFFFFFFF",
    "nan",
    "inf",
    "1979-05-27T07:32:00Z",
    "true",
    "fn",
    "type",
    "a.b.c = 1\n",
];

/// Invalid UTF-8: a lone continuation byte, a truncated sequence, an overlong form, a
/// surrogate, a code point past U+10FFFF, bytes that never occur.
const INVALID_UTF8: &[&[u8]] = &[
    b"\x80",
    b"\xC3",
    b"\xE2\x82",
    b"\xC0\x80",
    b"\xED\xA0\x80",
    b"\xF4\x90\x80\x80",
    b"\xFF",
    b"\xFE\xFF",
    b"\xF0\x9F\xA6",
];

fn ident(rng: &mut Rng, first: &str, rest: &str, max: usize) -> String {
    let first: Vec<char> = first.chars().collect();
    let rest: Vec<char> = rest.chars().collect();
    let mut name = String::new();
    name.push(*rng.pick(&first));
    for _ in 0..rng.below(max) {
        name.push(*rng.pick(&rest));
    }
    name
}

fn c_name(rng: &mut Rng) -> String {
    if rng.chance(60) {
        return (*rng.pick(MODULES)).to_owned();
    }
    ident(
        rng,
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_",
        "abcdefghijklmnopqrstuvwxyz_0123456789",
        12,
    )
}

fn field_name(rng: &mut Rng, flawed: Option<Flaw>) -> String {
    match rng.below(100) {
        0..=4 if flawed == Some(Flaw::Names) => (*rng.pick(BAD_FIELDS)).to_owned(),
        2..=40 => (*rng.pick(FIELDS)).to_owned(),
        _ => {
            let rest = "abcdefghijklmnopqrstuvwxyz_0123456789éß変";
            ident(rng, "abcdefghijklmnopqrstuvwxyzé_λ", rest, 10)
        }
    }
}

/// What a flawed manifest gets wrong, now and then: one kind per manifest, so that each kind
/// reaches its own check.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flaw {
    /// Missing and unknown keys, values of the wrong type.
    Shape,
    /// Names that are not identifiers, keywords, empty tables.
    Names,
    /// Token soup in `params` and `requires`, `requires` without `params`.
    Contract,
}

/// A manifest as the generator builds it, before it is written out in one of TOML's spellings.
pub struct Manifest {
    tables: Vec<Table>,
    defines: Vec<(String, String)>,
    defines_first: bool,
}

struct Table {
    name: String,
    entries: Vec<Entry>,
}

struct Entry {
    field: String,
    keys: Vec<(String, Value)>,
}

enum Value {
    /// A string, written in one of TOML's four string forms.
    Str(String),
    /// Anything else, as written.
    Raw(String),
    /// An array of strings (`requires`).
    Strings(Vec<String>),
}

impl Manifest {
    /// A manifest; three in five are meant to pass every check, the others carry a flaw here and
    /// there (a bad name, a missing key, a value of the wrong type, token soup in `params`).
    pub fn random(rng: &mut Rng) -> Self {
        let flawed = match rng.below(10) {
            0..=5 => None,
            6 => Some(Flaw::Shape),
            7 => Some(Flaw::Names),
            _ => Some(Flaw::Contract),
        };
        let flaw = |rng: &mut Rng, percent: usize| flawed == Some(Flaw::Names) && rng.chance(percent);
        let defines: Vec<(String, String)> = (0..rng.below(5))
            .map(|i| {
                let name = if rng.chance(50) {
                    (*rng.pick(&["THREADS", "MAX_M", "D", "CHUNK", "WARPS"])).to_owned() + &i.to_string()
                } else {
                    ident(rng, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_", "ABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789", 10)
                };
                let name = if flaw(rng, 5) { (*rng.pick(BAD_C_NAMES)).to_owned() } else { name };
                let value =
                    match if flawed == Some(Flaw::Shape) && rng.chance(10) { 95 } else { rng.below(92) } {
                        0..=69 => rng.range(1, 1024).to_string(),
                        70..=79 => format!("0x{:X}", rng.range(1, 0xFFFF)),
                        80..=84 => format!("{}_{:03}", rng.range(1, 99), rng.below(1000)),
                        85..=87 => format!("0o{:o}", rng.range(1, 4096)),
                        88..=89 => format!("0b{:b}", rng.range(1, 255)),
                        90..=91 => "4294967295".to_owned(),
                        _ => (*rng.pick(&["4294967296", "-1", "0", "1.5", "\"16\"", "true", "[1]", "+7"]))
                            .to_owned(),
                    };
                (name, value)
            })
            .collect();
        let define_names: Vec<String> = defines.iter().map(|(name, _)| name.clone()).collect();
        let mut tables: Vec<Table> = Vec::new();
        for _ in 0..rng.range(1, 4) {
            let mut name = field_name(rng, flawed);
            if name == "defines" || name == "build" || tables.iter().any(|table| table.name == name) {
                name = format!("{name}_{}", tables.len());
            }
            let mut entries: Vec<Entry> = Vec::new();
            let count = if flaw(rng, 5) { 0 } else { rng.range(1, 12) };
            for index in 0..count {
                let mut field = field_name(rng, flawed);
                if entries.iter().any(|entry| entry.field == field) {
                    field = format!("{field}{index}");
                }
                entries.push(Entry::random(rng, field, index, &define_names, flawed));
            }
            tables.push(Table { name, entries });
        }
        Manifest { tables, defines, defines_first: rng.chance(30) }
    }

    /// The name of its first table (`t` when it has none), for the derive to ask for.
    pub fn first_table(&self) -> String {
        self.tables.first().map_or_else(|| "t".to_owned(), |table| table.name.clone())
    }

    /// The manifest in TOML, in a spelling drawn from `rng`: inline tables on one line or
    /// several, sub-tables, dotted keys, every string form, comments, CRLF line ends.
    pub fn render(&self, rng: &mut Rng) -> String {
        let mut out = String::new();
        if rng.chance(20) {
            out.push_str("# The kernel manifest.\n\n");
        }
        let defines = |out: &mut String, rng: &mut Rng| {
            if self.defines.is_empty() && !rng.chance(5) {
                return;
            }
            out.push_str("[defines]\n");
            for (name, value) in &self.defines {
                let _ = writeln!(out, "{} = {value}", key(rng, name));
            }
            out.push('\n');
        };
        if self.defines_first {
            defines(&mut out, rng);
        }
        for table in &self.tables {
            let _ = writeln!(out, "[{}]", key(rng, &table.name));
            // Entries written as sub-tables must come after the table's own lines.
            let (mut inline, mut sub) = (Vec::new(), Vec::new());
            for entry in &table.entries {
                if rng.chance(20) { sub.push(entry) } else { inline.push(entry) }
            }
            for entry in inline {
                entry.render_inline(rng, &mut out);
            }
            for entry in sub {
                let _ = writeln!(out, "[{}.{}]", key(rng, &table.name), key(rng, &entry.field));
                for (name, value) in &entry.keys {
                    let _ = writeln!(out, "{name} = {}", value.render(rng));
                }
            }
            if rng.chance(30) {
                out.push_str("# end of table\n");
            }
            out.push('\n');
        }
        if !self.defines_first {
            defines(&mut out, rng);
        }
        if rng.chance(5) {
            out = out.replace('\n', "\r\n");
        }
        if rng.chance(5) {
            out.pop();
        }
        out
    }
}

impl Entry {
    fn random(rng: &mut Rng, field: String, index: usize, defines: &[String], flawed: Option<Flaw>) -> Self {
        let flaw = |rng: &mut Rng, kind: Flaw, percent: usize| flawed == Some(kind) && rng.chance(percent);
        let module =
            if flaw(rng, Flaw::Names, 3) { (*rng.pick(BAD_C_NAMES)).to_owned() } else { c_name(rng) };
        let entry = if flaw(rng, Flaw::Names, 3) {
            (*rng.pick(BAD_C_NAMES)).to_owned()
        } else {
            format!("{}_{index}", c_name(rng))
        };
        let mut keys =
            vec![("module".to_owned(), Value::Str(module)), ("entry".to_owned(), Value::Str(entry))];
        if rng.chance(30) {
            keys.push(("optional".into(), Value::Raw((*rng.pick(&["true", "false"])).into())));
        }
        if rng.chance(30) {
            keys.push(("doc".into(), Value::Str((*rng.pick(DOCS)).into())));
        }
        let (params, requires) =
            match if flawed == Some(Flaw::Contract) { rng.below(100) } else { rng.below(85) } {
                0..=24 => (None, None),
                25..=84 => {
                    let (params, scalars) = params(rng, defines);
                    let requires = (rng.chance(60)).then(|| {
                        (0..rng.range(1, 3)).map(|_| requirement(rng, &scalars, defines)).collect::<Vec<_>>()
                    });
                    (Some(params), requires)
                }
                // Token soup: valid TOML, anything for the params parser.
                85..=97 => {
                    let requires = rng.chance(60).then(|| (0..rng.range(1, 3)).map(|_| soup(rng)).collect());
                    (Some(soup(rng)), requires)
                }
                // `requires` without `params`.
                _ => (None, Some(vec!["n > 0".to_owned()])),
            };
        if let Some(params) = params {
            keys.push(("params".into(), Value::Str(params)));
        }
        if let Some(requires) = requires {
            keys.push(("requires".into(), Value::Strings(requires)));
        }
        if flaw(rng, Flaw::Shape, 4) {
            keys.push((
                rng.pick(&["modul", "entrypoint", "Optional", "docs", "param"]).to_string(),
                Value::Raw("1".into()),
            ));
        }
        if flaw(rng, Flaw::Shape, 4) {
            // A missing key or a value of the wrong type: a shape error.
            let at = rng.below(keys.len());
            if rng.chance(50) {
                keys.remove(at);
            } else {
                keys[at].1 = Value::Raw((*rng.pick(&["1", "true", "[]", "{}", "1.5", "\"x\""])).into());
            }
        }
        // Keys in any order.
        for i in (1..keys.len()).rev() {
            if rng.chance(20) {
                keys.swap(i, rng.below(i + 1));
            }
        }
        Entry { field, keys }
    }

    fn render_inline(&self, rng: &mut Rng, out: &mut String) {
        let field = key(rng, &self.field);
        match rng.below(10) {
            // Dotted keys, one line each.
            0 => {
                for (name, value) in &self.keys {
                    let _ = writeln!(out, "{field}.{name} = {}", value.render(rng));
                }
            }
            // An inline table over several lines (TOML 1.1), aligned the way README writes it.
            1..=2 => {
                let pad = " ".repeat(field.chars().count().min(40) + 5);
                let keys: Vec<String> =
                    self.keys.iter().map(|(name, value)| format!("{name} = {}", value.render(rng))).collect();
                let _ = writeln!(out, "{field} = {{ {} }}", keys.join(&format!(",\n{pad}")));
            }
            _ => {
                let keys: Vec<String> =
                    self.keys.iter().map(|(name, value)| format!("{name} = {}", value.render(rng))).collect();
                let _ = writeln!(out, "{field} = {{ {} }}", keys.join(", "));
            }
        }
    }
}

impl Value {
    fn render(&self, rng: &mut Rng) -> String {
        match self {
            Value::Str(text) => string(rng, text),
            Value::Raw(text) => text.clone(),
            Value::Strings(items) => {
                let items: Vec<String> = items.iter().map(|item| string(rng, item)).collect();
                if rng.chance(20) {
                    format!("[\n    {},\n]", items.join(",\n    "))
                } else {
                    format!("[{}]", items.join(", "))
                }
            }
        }
    }
}

/// A bare key when TOML allows one (sometimes quoted anyway), else a basic string.
fn key(rng: &mut Rng, name: &str) -> String {
    let bare = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare && !rng.chance(10) { name.to_owned() } else { basic(rng, name) }
}

/// `text` in one of TOML's string forms: basic (sometimes with needless escapes, so that the
/// parser's source mapping is inexact), literal, multi-line basic or multi-line literal.
fn string(rng: &mut Rng, text: &str) -> String {
    let literal_ok = !text.contains('\'') && !text.chars().any(|c| c.is_control() && c != '\t');
    let multi_ok = !text.contains("'''") && !text.chars().any(|c| c.is_control() && c != '\t' && c != '\n');
    match rng.below(10) {
        0..=5 => basic(rng, text),
        6..=7 if literal_ok => format!("'{text}'"),
        8 if multi_ok => format!("'''\n{text}'''"),
        _ => format!("\"\"\"{}{}\"\"\"", if rng.chance(50) { "\n" } else { "" }, escape(rng, text, true)),
    }
}

fn basic(rng: &mut Rng, text: &str) -> String {
    format!("\"{}\"", escape(rng, text, false))
}

fn escape(rng: &mut Rng, text: &str, multi_line: bool) -> String {
    let needless = rng.chance(10);
    let mut out = String::new();
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' if multi_line => out.push('\n'),
            '\n' => out.push_str("\\n"),
            '\t' => out.push('\t'),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            'a' | 'n' if needless => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// A `params` string the parser accepts (mostly: a `-` or a define can still fold below zero),
/// and its integer scalars.
fn params(rng: &mut Rng, defines: &[String]) -> (String, Vec<String>) {
    if rng.chance(4) {
        return ((*rng.pick(&["", " ", "\t"])).to_owned(), Vec::new());
    }
    let mut names: Vec<&str> = SCALARS.to_vec();
    let mut take = |rng: &mut Rng| -> String {
        if names.is_empty() {
            return format!("p{}", rng.below(1000));
        }
        names.swap_remove(rng.below(names.len())).to_owned()
    };
    let scalars: Vec<(String, &str)> = (0..rng.below(4)).map(|_| (take(rng), *rng.pick(INT_TYPES))).collect();
    let integer_names: Vec<String> = scalars.iter().map(|(name, _)| name.clone()).collect();
    let mut declared: Vec<String> = scalars.iter().map(|(name, ty)| format!("{ty} {name}")).collect();
    if rng.chance(20) {
        declared.push(format!("f32 eps{}", rng.below(10)));
    }
    for i in 0..rng.below(4) {
        let constness = if rng.chance(50) { "const " } else { "" };
        let extent = expr(rng, &integer_names, defines, 3, false);
        declared.push(format!("{constness}{} buf{i}[{extent}]", rng.pick(ELEMENTS)));
    }
    for i in (1..declared.len()).rev() {
        declared.swap(i, rng.below(i + 1));
    }
    let separator = *rng.pick(&[", ", ",", " , ", ",\n  "]);
    (declared.join(separator), integer_names)
}

fn expr(rng: &mut Rng, scalars: &[String], defines: &[String], depth: usize, launch: bool) -> String {
    if depth == 0 || rng.chance(40) {
        return match rng.below(10) {
            0..=4 if !scalars.is_empty() => rng.pick(scalars).clone(),
            5..=6 if !defines.is_empty() => rng.pick(defines).clone(),
            7 if launch => (*rng.pick(LAUNCH)).to_owned(),
            _ => rng.range(1, 64).to_string(),
        };
    }
    let a = expr(rng, scalars, defines, depth - 1, launch);
    let b = expr(rng, scalars, defines, depth - 1, launch);
    match rng.below(7) {
        0 | 1 => format!("{a} + {b}"),
        2 | 3 => format!("({a}) * {b}"),
        4 => format!("({a}) % {}", rng.range(1, 9)),
        5 => format!("cdiv({a}, {})", rng.range(1, 9)),
        // Scalars minus a literal only, so that no constant folds below zero.
        _ if !scalars.is_empty() => format!("{} - {}", rng.pick(scalars), rng.range(0, 3)),
        _ => format!("{a}*{b}"),
    }
}

fn requirement(rng: &mut Rng, scalars: &[String], defines: &[String]) -> String {
    let comparisons: Vec<String> = (0..rng.range(1, 3))
        .map(|_| {
            format!(
                "{} {} {}",
                expr(rng, scalars, defines, 2, true),
                rng.pick(COMPARE),
                expr(rng, scalars, defines, 2, true)
            )
        })
        .collect();
    comparisons.join(" || ")
}

fn soup(rng: &mut Rng) -> String {
    let mut out = String::new();
    for _ in 0..rng.below(24) {
        out.push_str(rng.pick::<&str>(CONTRACT_TOKENS));
        if rng.chance(50) {
            out.push(' ');
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Mutations.

/// 1 to 4 edits of `bytes`; what they were.
fn mutate(rng: &mut Rng, bytes: &mut Vec<u8>) -> String {
    let edits: Vec<String> = (0..rng.range(1, 4)).map(|_| mutate_once(rng, bytes)).collect();
    edits.join(", ")
}

fn mutate_once(rng: &mut Rng, bytes: &mut Vec<u8>) -> String {
    let at = rng.below(bytes.len() + 1);
    match rng.below(14) {
        0 => {
            if at < bytes.len() {
                bytes[at] = rng.next_u64() as u8;
            }
            format!("byte flip at {at}")
        }
        1 => {
            let end = (at + rng.range(1, 20)).min(bytes.len());
            bytes.drain(at..end);
            format!("delete {at}..{end}")
        }
        2 => {
            let end = (at + rng.range(1, 40)).min(bytes.len());
            let copy = bytes[at..end].to_vec();
            let to = rng.below(bytes.len() + 1);
            bytes.splice(to..to, copy);
            format!("copy {at}..{end} to {to}")
        }
        3..=5 => {
            let fragment = *rng.pick(FRAGMENTS);
            bytes.splice(at..at, fragment.bytes());
            format!("insert {fragment:?} at {at}")
        }
        6..=8 => {
            // Inside a string: just after a quote, where the params parser reads.
            let quotes: Vec<usize> = bytes
                .iter()
                .enumerate()
                .filter(|&(_, &b)| b == b'"' || b == b'\'')
                .map(|(i, _)| i + 1)
                .collect();
            let to = if quotes.is_empty() { at } else { *rng.pick(&quotes) + rng.below(8) }.min(bytes.len());
            let piece = if rng.chance(50) {
                (*rng.pick(CONTRACT_TOKENS)).to_owned()
            } else {
                (*rng.pick(FRAGMENTS)).to_owned()
            };
            bytes.splice(to..to, piece.bytes());
            format!("insert {piece:?} in a string at {to}")
        }
        9 => {
            let sequence = *rng.pick(INVALID_UTF8);
            bytes.splice(at..at, sequence.iter().copied());
            format!("insert invalid UTF-8 {sequence:?} at {at}")
        }
        10 => {
            bytes.truncate(at);
            format!("truncate at {at}")
        }
        11 => {
            let piece = match rng.below(4) {
                0 => "a".repeat(10_000),
                1 => "(".repeat(1_000),
                2 => "9".repeat(rng.range(20, 5_000)),
                _ => "[".repeat(1_000),
            };
            bytes.splice(at..at, piece.bytes());
            format!("insert a {}-byte run at {at}", piece.len())
        }
        12 => {
            // Swap two lines.
            let text = String::from_utf8_lossy(bytes).into_owned();
            let mut lines: Vec<&str> = text.split('\n').collect();
            let (a, b) = (rng.below(lines.len()), rng.below(lines.len()));
            lines.swap(a, b);
            *bytes = lines.join("\n").into_bytes();
            format!("swap lines {a} and {b}")
        }
        _ => {
            let end = (at + rng.range(1, 8)).min(bytes.len());
            let copy = bytes[at..end].to_vec();
            let times = rng.range(2, 200);
            for _ in 0..times {
                bytes.splice(at..at, copy.iter().copied());
            }
            format!("repeat {at}..{end} {times} times")
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Garbage.

fn garbage(rng: &mut Rng) -> (Vec<u8>, String) {
    let len = rng.below(400);
    match rng.below(4) {
        0 => ((0..len).map(|_| rng.next_u64() as u8).collect(), "random bytes".into()),
        1 => {
            let alphabet = b"[]{}=\"'.,#\n \t\\abcxyz019_-+:";
            ((0..len).map(|_| *rng.pick(alphabet)).collect(), "TOML punctuation".into())
        }
        2 => {
            let mut out = String::new();
            for _ in 0..rng.below(60) {
                out.push_str(if rng.chance(50) {
                    rng.pick::<&str>(FRAGMENTS)
                } else {
                    rng.pick::<&str>(CONTRACT_TOKENS)
                });
            }
            (out.into_bytes(), "fragment soup".into())
        }
        _ => {
            let chars: String =
                (0..len).map(|_| char::from_u32(rng.below(0x11_0000) as u32).unwrap_or('\u{FFFD}')).collect();
            (chars.into_bytes(), "random characters".into())
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Pathological sizes.

/// A size for one giant: mostly 1,000 or 10,000, sometimes past 65,535 (where `format!`
/// widths stop).
fn giant(rng: &mut Rng) -> usize {
    match rng.below(10) {
        0..=3 => 1_000,
        4..=7 => 10_000,
        _ => 70_000,
    }
}

fn entry_line(field: &str, module: &str, entry: &str, rest: &str) -> String {
    format!("{field} = {{ module = \"{module}\", entry = \"{entry}\"{rest} }}\n")
}

/// `(text, table, what)`.
fn pathological(rng: &mut Rng) -> (String, String, String) {
    let n = giant(rng);
    let long = "a".repeat(n);
    let params = |p: &str| format!(", params = \"{p}\"");
    let (text, what) = match rng.below(22) {
        0 => (format!("[t]\n{}", entry_line(&long, "m", "e", "")), format!("{n}-char field name")),
        1 => (format!("[t]\n{}", entry_line("f", &long, "e", "")), format!("{n}-char module name")),
        2 => (format!("[t]\n{}", entry_line("f", "m", &long, "")), format!("{n}-char entry name")),
        3 => (
            format!("[t]\n{}[defines]\n{long} = 1\n", entry_line("f", "m", "e", "")),
            format!("{n}-char define name"),
        ),
        4 => (format!("[{long}]\n{}", entry_line("f", "m", "e", "")), format!("{n}-char table name")),
        5 => (
            format!("[t]\n{}", entry_line("f", "m", "e", &format!(", doc = \"{}\"", "d".repeat(n * 10)))),
            format!("{}-char doc", n * 10),
        ),
        6 => {
            let extent = format!("{}n{}", "(".repeat(n), ")".repeat(n));
            (
                format!("[t]\n{}", entry_line("f", "m", "e", &params(&format!("u32 n, f32 b[{extent}]")))),
                format!("{n} nested parentheses"),
            )
        }
        7 => {
            let extent = format!("{}n{}", "cdiv(".repeat(n), ", 2)".repeat(n));
            (
                format!("[t]\n{}", entry_line("f", "m", "e", &params(&format!("u32 n, f32 b[{extent}]")))),
                format!("{n} nested cdiv"),
            )
        }
        8 => {
            let extent = vec!["n"; n].join(" + ");
            (
                format!("[t]\n{}", entry_line("f", "m", "e", &params(&format!("u32 n, f32 b[{extent}]")))),
                format!("{n}-term sum"),
            )
        }
        9 => {
            let digits = "9".repeat(n * 10);
            (
                format!("[t]\n{}", entry_line("f", "m", "e", &params(&format!("u32 n, f32 b[{digits}]")))),
                format!("{}-digit literal", n * 10),
            )
        }
        10 => (
            format!("[t]\n{}[defines]\nD = {}\n", entry_line("f", "m", "e", ""), "9".repeat(n)),
            format!("{n}-digit define"),
        ),
        11 => {
            let nesting = rng.pick(&["[", "{a=", "[{a="]);
            let close = match *nesting {
                "[" => "]",
                "{a=" => "}",
                _ => "}]",
            };
            (
                format!("[t]\nf = {}1{}\n", nesting.repeat(n), close.repeat(n)),
                format!("{n}-deep {nesting} nesting"),
            )
        }
        12 => (format!("[t]\n{} = 1\n", vec!["a"; n].join(".")), format!("{n}-part dotted key")),
        13 => (format!("[{}]\nf = 1\n", vec!["a"; n].join(".")), format!("{n}-part table header")),
        14 => {
            let count = n.min(10_000) / 4;
            let mut text = "[t]\n".to_owned();
            for i in 0..count {
                text.push_str(&entry_line(
                    &format!("f{i}"),
                    &format!("m{}", i % 7),
                    &format!("e{i}"),
                    &params("u32 n, const f32 a[n * 2], bf16 b[cdiv(n, 4)]"),
                ));
            }
            (text, format!("{count} entries"))
        }
        15 => {
            let count = n.min(10_000);
            let list: Vec<String> = (0..count).map(|i| format!("u32 p{i}")).collect();
            (
                format!("[t]\n{}", entry_line("f", "m", "e", &params(&list.join(", ")))),
                format!("{count} parameters"),
            )
        }
        16 => {
            // Thousands of errors on one line.
            let keys: Vec<String> = (0..n.min(20_000)).map(|i| format!("k{i} = 1")).collect();
            (
                format!("[t]\nf = {{ module = \"m\", entry = \"e\", {} }}\n", keys.join(", ")),
                format!("{} unknown keys on one line", keys.len()),
            )
        }
        17 => {
            let list = vec!["u32 1x"; n.min(20_000)].join(", ");
            (
                format!("[t]\n{}", entry_line("f", "m", "e", &params(&list))),
                "thousands of parameter errors on one line".into(),
            )
        }
        18 => (format!("[t]\nf = {}\n", "]".repeat(n)), format!("{n} closing brackets")),
        19 => {
            let requires: Vec<String> =
                (0..n.min(5_000)).map(|i| format!("\"n > {i} || block.x == {i}\"")).collect();
            (
                format!(
                    "[t]\n{}",
                    entry_line(
                        "f",
                        "m",
                        "e",
                        &format!(", params = \"u32 n\", requires = [{}]", requires.join(", "))
                    )
                ),
                format!("{} requirements", requires.len()),
            )
        }
        20 => {
            let count = n.min(10_000);
            let mut text = String::new();
            for i in 0..count {
                let _ = write!(text, "[t{i}]\n{}", entry_line("f", "m", "e", ""));
            }
            (text, format!("{count} tables"))
        }
        _ => {
            let line = format!("{}x", " ".repeat(n * 10));
            (
                format!("[t]\n{}{line}\n", entry_line("f", "m", "e", "")),
                format!("an error after {} spaces", n * 10),
            )
        }
    };
    (text, "t".to_owned(), what)
}

/// The fixed cases every run starts with: each found a bug or stands for a class the random
/// inputs reach only rarely. `(name, bytes)`.
pub fn named() -> Vec<(&'static str, Vec<u8>)> {
    let long = "a".repeat(70_000);
    let one = |rest: &str| format!("[t]\n{}", entry_line("f", "m", "e", rest)).into_bytes();
    let params = |list: &str| one(&format!(", params = \"{list}\""));
    let errors_on_one_line = if cfg!(debug_assertions) { 20_000 } else { 200_000 };
    let many_params: Vec<String> = (0..65_536).map(|i| format!("u32 p{i}")).collect();
    vec![
        // `kda list` padded its columns with `{:width$}`, which panics past 65,535.
        ("field name past u16::MAX", format!("[t]\n{}", entry_line(&long, "m", "e", "")).into_bytes()),
        ("module::entry past u16::MAX", format!("[t]\n{}", entry_line("f", &long, "e", "")).into_bytes()),
        ("define name past u16::MAX", [one(""), format!("[defines]\n{long} = 1\n").into_bytes()].concat()),
        ("one define", [one(""), b"[defines]\nD = 4294967295\n".to_vec()].concat()),
        ("empty file", Vec::new()),
        ("only a BOM", "\u{FEFF}".into()),
        ("invalid UTF-8 first", [b"\xFF".to_vec(), one("")].concat()),
        (
            "invalid UTF-8 in a params string",
            b"[t]\nf = { module = \"m\", entry = \"e\", params = \"u32 \xC3n\" }\n".to_vec(),
        ),
        ("surrogate escape", b"[t]\nf = { module = \"m\", entry = \"\\uD800\" }\n".to_vec()),
        (
            "1k nested parentheses",
            params(&format!("u32 n, f32 b[{}n{}]", "(".repeat(1000), ")".repeat(1000))),
        ),
        ("100k-digit extent", params(&format!("f32 b[{}]", "7".repeat(100_000)))),
        ("u64::MAX extent times two", params("f32 b[18446744073709551615 * 2]")),
        (
            "escaped params",
            one(", params = \"u32 \\u006e, f32 b[n \\u002a 2]\", requires = [\"n \\u003e 1\"]"),
        ),
        ("10k-deep arrays", format!("[t]\nf = {}{}\n", "[".repeat(10_000), "]".repeat(10_000)).into_bytes()),
        ("10k-part dotted key", format!("[t]\n{} = 1\n", vec!["a"; 10_000].join(".")).into_bytes()),
        // Every column was counted from its line's start, so errors on one line took quadratic
        // time: 200,000 took 6.8 s of a release build (now 0.1 s). Debug runs take fewer.
        ("errors by the thousand on one line", params(&vec!["u32 1x"; errors_on_one_line].join(","))),
        // The derive refused more than 65,535 parameters without a location, the build step took
        // them: now the parser refuses them, at the first one too many.
        ("65,536 parameters", params(&many_params.join(","))),
    ]
}
