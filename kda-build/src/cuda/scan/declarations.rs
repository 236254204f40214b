//! The declarations a scan reads from the preprocessed tokens: each `__global__` function and
//! its parameters, and the typedefs, structs and classes the parameters may name.

use std::collections::{BTreeMap, HashSet};

use super::brackets::Closes;
use super::lex::{Kind, Token};
use super::{Kernel, KernelParam, Linkage, TypeDecl};

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

/// The `__global__` functions of a preprocessed source, once per name (and per template
/// arguments: each explicit instantiation of a template is one).
///
/// Linear in the tokens: each bracket is matched through [`Closes`], a declaration's prefix is read
/// only for a kernel found (and the prefixes of the kernels found do not overlap), and the open
/// `extern "C"` blocks are counted, not searched.
pub(super) fn kernels(tokens: &[Token]) -> Vec<Kernel> {
    let brackets = Brackets { parens: Closes::parens(tokens), angles: Closes::angles(tokens) };
    let mut found: Vec<Kernel> = Vec::new();
    let mut names = HashSet::new();
    // Per open brace: whether it opens an `extern "C" { ... }` block; and how many of those are open.
    let mut braces: Vec<bool> = Vec::new();
    let mut c_blocks = 0usize;
    let mut start = 0;
    let mut at = 0;
    while let Some(token) = tokens.get(at) {
        if token.kind == Kind::Punct {
            match &*token.text {
                "{" => {
                    let c_block = at >= 2 && tokens[at - 2].is("extern") && &*tokens[at - 1].text == "\"C\"";
                    braces.push(c_block);
                    c_blocks += usize::from(c_block);
                    start = at + 1;
                }
                "}" => {
                    if braces.pop() == Some(true) {
                        c_blocks -= 1;
                    }
                    start = at + 1;
                }
                ";" => start = at + 1,
                _ => {}
            }
        } else if token.is("__global__")
            && let Some((kernel, next)) = kernel_at(tokens, &brackets, start, at, c_blocks > 0)
        {
            if names.insert((kernel.name.clone(), kernel.template_args.clone())) {
                found.push(kernel);
            }
            (at, start) = (next, next);
            continue;
        }
        at += 1;
    }
    found
}

/// Where the brackets of the tokens a declaration is read from close.
struct Brackets {
    parens: Closes,
    angles: Closes,
}

/// The kernel whose declaration starts at `tokens[start]` and has its `__global__` at
/// `tokens[global]`, and where the tokens after its parameter list start.
fn kernel_at(
    tokens: &[Token],
    brackets: &Brackets,
    start: usize,
    global: usize,
    in_c_block: bool,
) -> Option<(Kernel, usize)> {
    // The name: the first word followed by its parameter list (or its template arguments),
    // past the return type and any `__launch_bounds__(...)`.
    let mut at = global + 1;
    let (name, template_args, open) = loop {
        let token = tokens.get(at)?;
        let next = tokens.get(at + 1);
        if at > global + 64 || [";", "{", "}"].iter().any(|end| token.is(end)) {
            return None;
        }
        if ATTRIBUTES.iter().any(|attribute| token.is(attribute)) && next.is_some_and(|next| next.is("(")) {
            at = brackets.parens.get(at + 1)? + 1;
            continue;
        }
        match (token.ident(), next) {
            (Some(name), Some(next)) if next.is("(") => break (name, None, at + 1),
            (Some(name), Some(next)) if next.is("<") => {
                let close = brackets.angles.get(at + 1)?;
                if tokens.get(close + 1).is_some_and(|open| open.is("(")) {
                    break (name, Some(spell(&tokens[at + 2..close])), close + 1);
                }
            }
            _ => {}
        }
        at += 1;
    };
    let close = brackets.parens.get(open)?;
    // What precedes `__global__` in the declaration, read once the declaration is a kernel's.
    let prefix = tokens.get(start..global)?;
    let template = prefix.iter().rposition(|token| token.is("template")).map(|at| {
        let rest = &prefix[at + 1..];
        match rest.first() {
            Some(open) if open.is("<") => {
                // A `>` past `__global__` does not close the parameter list.
                let close = brackets.angles.get(start + at + 1).filter(|&close| close < global);
                spell(
                    rest.get(1..close.map_or(rest.len(), |close| close - (start + at + 1)))
                        .unwrap_or_default(),
                )
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
    let kernel = Kernel {
        name: name.to_owned(),
        linkage,
        template,
        template_args,
        params: params(&tokens[open + 1..close]),
        line: tokens[global].line,
        macro_name: tokens[global].origin.as_deref().map(str::to_owned),
    };
    Some((kernel, close + 1))
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
pub(super) fn declared_types(tokens: &[Token]) -> BTreeMap<String, TypeDecl> {
    let parens = Closes::parens(tokens);
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
                    at = argument.and_then(|_| parens.get(at + 1)).map_or(at + 1, |close| close + 1);
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
