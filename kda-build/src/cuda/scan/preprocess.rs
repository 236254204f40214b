//! The preprocessor the scan runs: `#define` and `#undef` tracked in file order, macros
//! expanded with `#` and `##`, trivial `#if`s evaluated and every other branch read, quoted
//! headers read for their macros and types.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use super::brackets::Closes;
use super::declarations::{declared_types, kernels};
use super::lex::{Kind, Token, lex};
use super::reader::SourceReader;
use super::{MAX_EXPANDED_TOKENS, MAX_INCLUDE_DEPTH, MAX_MACRO_DEPTH, SourceScan, TypeDecl, UnreadInclude};

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

/// The `#if`s open where a file is read.
#[derive(Default)]
struct Conditionals {
    open: Vec<Conditional>,
    /// How many of them are in a branch that is not read: counted, so that whether a token is
    /// read costs the same however many `#if`s are open.
    dead: usize,
}

impl Conditionals {
    /// Whether the tokens here are read.
    fn live(&self) -> bool {
        self.dead == 0
    }

    /// `#if`: its first branch's condition is `value`.
    fn open(&mut self, value: Option<bool>) {
        let mut conditional = Conditional { live: true, taken: false };
        conditional.branch(value);
        self.dead += usize::from(!conditional.live);
        self.open.push(conditional);
    }

    /// `#elif` or `#else`: the next branch of the innermost `#if`.
    fn branch(&mut self, value: Option<bool>) {
        if let Some(conditional) = self.open.last_mut() {
            self.dead -= usize::from(!conditional.live);
            conditional.branch(value);
            self.dead += usize::from(!conditional.live);
        }
    }

    /// `#endif`.
    fn close(&mut self) {
        if let Some(conditional) = self.open.pop() {
            self.dead -= usize::from(!conditional.live);
        }
    }
}

/// The directives and macros of one scan: the source's and its headers'.
pub(super) struct Preprocessor<'r> {
    /// What reads the headers.
    reader: &'r mut SourceReader,
    macros: HashMap<Rc<str>, Rc<Macro>>,
    /// The tokens expansion has produced.
    expanded: usize,
    /// How many expansions are nested where the expansion is.
    nesting: usize,
    /// The files read, so that each is read once.
    pub(super) included: HashSet<PathBuf>,
    /// The quoted includes met, by their includer's folder and the path written: each is located
    /// once, however often it is written.
    tried: HashSet<(PathBuf, Rc<str>)>,
    /// The types the included headers declare, each header's read as soon as it is (its kernels
    /// are not the scan's), so that no header's tokens are held past its reading.
    header_types: BTreeMap<String, TypeDecl>,
    /// The quoted includes not read.
    unread: Vec<UnreadInclude>,
}

impl<'r> Preprocessor<'r> {
    pub(super) fn new(reader: &'r mut SourceReader) -> Self {
        Preprocessor {
            reader,
            macros: HashMap::new(),
            expanded: 0,
            nesting: 0,
            included: HashSet::new(),
            tried: HashSet::new(),
            header_types: BTreeMap::new(),
            unread: Vec::new(),
        }
    }

    /// The tokens of a file after its directives, with its macros expanded; `file` is its path
    /// as read, beside which its quoted includes are, and `includes` how many includes deep it
    /// is.
    pub(super) fn run(&mut self, tokens: Vec<Token>, file: Option<&Path>, includes: usize) -> Vec<Token> {
        // As many as come in, most often: reserved at once, not doubled through copies of it.
        let mut out = Vec::with_capacity(tokens.len());
        let mut conditionals = Conditionals::default();
        // Where the tokens since the last directive start: they are read or skipped together, as
        // only a directive changes which branch is read.
        let mut since_directive = 0;
        let mut at = 0;
        while let Some(token) = tokens.get(at) {
            if !(token.line_start && token.is("#")) {
                at += 1;
                continue;
            }
            if conditionals.live() {
                self.expand(&tokens[since_directive..at], &mut Vec::new(), &mut out);
            }
            let name = at + 1;
            at = name;
            while tokens.get(at).is_some_and(|token| !token.line_start) {
                at += 1;
            }
            self.directive(&tokens[name..at], &mut conditionals, file, includes);
            since_directive = at;
        }
        if conditionals.live() {
            self.expand(&tokens[since_directive..], &mut Vec::new(), &mut out);
        }
        out
    }

    /// Carries out one directive (its tokens after the `#`) of the file `file`, `includes`
    /// includes deep.
    fn directive(
        &mut self,
        directive: &[Token],
        conditionals: &mut Conditionals,
        file: Option<&Path>,
        includes: usize,
    ) {
        let Some((name, rest)) = directive.split_first() else { return };
        match &*name.text {
            "if" => conditionals.open(trivial_condition(rest)),
            "ifdef" | "ifndef" => conditionals.open(None),
            "elif" => conditionals.branch(trivial_condition(rest)),
            "elifdef" | "elifndef" | "else" => conditionals.branch(None),
            "endif" => conditionals.close(),
            _ if !conditionals.live() => {}
            "define" => self.define(rest),
            "undef" => {
                if let Some(name) = rest.first() {
                    self.macros.remove(&name.text);
                }
            }
            "include" => {
                if let (Some(file), Some(header)) = (file, rest.first()) {
                    let quoted = header.text.strip_prefix('"').and_then(|text| text.strip_suffix('"'));
                    if let Some(written) =
                        quoted.filter(|_| header.kind == Kind::Literal && includes < MAX_INCLUDE_DEPTH)
                    {
                        self.include(file, written, name.line, includes);
                    }
                }
            }
            _ => {}
        }
    }

    /// Reads the header that `#include "written"` at `line` of `includer` (`includes` includes
    /// deep) names for its macros and types, unless it was read. One that is not there is left
    /// out, as the compiler's own headers are; one the reader does not read is listed unread.
    fn include(&mut self, includer: &Path, written: &str, line: u32, includes: usize) {
        let dir = includer.parent().unwrap_or(Path::new(""));
        if !self.tried.insert((dir.to_owned(), written.into())) {
            return;
        }
        let why = match self.reader.locate(dir, written) {
            Ok(None) => return,
            Ok(Some(path)) => {
                let canonical = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
                if !self.included.insert(canonical) {
                    return;
                }
                match self.reader.read(&path) {
                    Ok(bytes) => {
                        let tokens = self.run(lex(&bytes), Some(&path), includes + 1);
                        self.header_types.extend(declared_types(&tokens));
                        return;
                    }
                    Err(why) => why,
                }
            }
            Err(why) => why,
        };
        let header = (includes > 0).then(|| includer.to_owned());
        self.unread.push(UnreadInclude { header, line, path: written.to_owned(), why });
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
        // Where each `(` closes, built at the first call of a function-like macro: a call left
        // open then costs no walk to the end of `tokens`.
        let mut parens: Option<Closes> = None;
        let mut at = 0;
        while let Some(token) = tokens.get(at) {
            at += 1;
            let Some(definition) = self.definition(token, active) else {
                out.push(token.clone());
                continue;
            };
            let body = match &definition.params {
                None => Some(definition.body.clone()),
                Some(params) => {
                    let parens = parens.get_or_insert_with(|| Closes::parens(tokens));
                    macro_args(tokens, parens, at).and_then(|(args, next)| {
                        let args = group_args(args, params.len(), definition.variadic);
                        let body = self.substitute(&definition.body, params, &args, active);
                        match body {
                            Some(_) => at = next,
                            // The budget is spent: no macro after this one expands either, so
                            // that none collects its arguments only to be left unexpanded.
                            None => self.expanded = MAX_EXPANDED_TOKENS,
                        }
                        body
                    })
                }
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
            if calls_on.is_some_and(|called| called.params.is_some()) {
                let parens = parens.get_or_insert_with(|| Closes::parens(tokens));
                if let Some((_, next)) = macro_args(tokens, parens, at) {
                    replacement.extend(tokens[at..next].iter().cloned());
                    at = next;
                }
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
        let definition = self.macros.get(name)?;
        let within = self.nesting <= MAX_MACRO_DEPTH && self.expanded < MAX_EXPANDED_TOKENS;
        let recursive = active.iter().any(|active| &**active == name);
        (within && !recursive).then(|| definition.clone())
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
        // Each argument spelled once, however often `#` spells it.
        let mut stringized_args: Vec<Option<Rc<str>>> = vec![None; params.len()];
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
                let text = match stringized_args.get_mut(index) {
                    Some(slot) => slot.get_or_insert_with(|| stringize(arg(index))).clone(),
                    None => stringize(arg(index)),
                };
                out.push(Token { kind: Kind::Literal, text, paste: false, ..token.clone() });
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
    pub(super) fn finish(self, tokens: &[Token]) -> SourceScan {
        let mut types = self.header_types;
        types.extend(declared_types(tokens));
        SourceScan { kernels: kernels(tokens), types, unread: self.unread }
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
/// tokens after its `)` start; `None` where no `(` follows or it is not closed (`parens` says
/// where each `(` of `tokens` closes).
fn macro_args(tokens: &[Token], parens: &Closes, at: usize) -> Option<(Vec<Vec<Token>>, usize)> {
    if !tokens.get(at)?.is("(") {
        return None;
    }
    let close = parens.get(at)?;
    let mut args = vec![Vec::new()];
    let mut depth = 0usize;
    for token in tokens.get(at + 1..close)? {
        if token.kind == Kind::Punct {
            match (&*token.text, depth) {
                (",", 0) => {
                    args.push(Vec::new());
                    continue;
                }
                ("(", _) => depth += 1,
                (")", _) => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        args.last_mut()?.push(token.clone());
    }
    Some((args, close + 1))
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
fn stringize(arg: &[Token]) -> Rc<str> {
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
    text.into()
}

/// `tokens` with each `##` of the body replaced by the token its two sides spell together. A run
/// `a ## b ## c ...` is spelled in one buffer and lexed once it ends: spelled and lexed anew at
/// each `##`, it would cost the square of its length.
fn paste(tokens: Vec<Token>) -> Vec<Token> {
    let mut out: Vec<Token> = Vec::with_capacity(tokens.len());
    // The spelling of `out`'s last token while `##`s join onto it.
    let mut joined: Option<String> = None;
    let mut tokens = tokens.into_iter();
    while let Some(token) = tokens.next() {
        if !token.paste {
            end_join(&mut out, &mut joined);
            out.push(token);
            continue;
        }
        let (Some(left), Some(right)) = (out.pop(), tokens.next()) else {
            joined = None;
            continue;
        };
        match (left.kind, right.kind) {
            (Kind::Placemarker, _) => out.push(right),
            (_, Kind::Placemarker) => out.push(left),
            _ => {
                joined.get_or_insert_with(|| left.text.to_string()).push_str(&right.text);
                // Its kind is the whole run's, known once the run ends; a placemarker it is not.
                out.push(Token { kind: Kind::Punct, paste: false, ..left });
            }
        }
    }
    end_join(&mut out, &mut joined);
    out.retain(|token| token.kind != Kind::Placemarker);
    out
}

/// Gives `out`'s last token the spelling `joined` that `##`s made, and its kind.
fn end_join(out: &mut [Token], joined: &mut Option<String>) {
    let (Some(text), Some(last)) = (joined.take(), out.last_mut()) else { return };
    last.kind = match lex(text.as_bytes()).as_slice() {
        [one] => one.kind,
        // Not one token (`+` and `-` pasted): kept together, as a compiler would refuse it.
        _ => Kind::Punct,
    };
    last.text = text.into();
}
