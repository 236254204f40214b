//! The launch contract of an entry: its `params` string and `requires` strings, parsed into
//! [`Param`]s and [`Requirement`]s, every problem located at its token in the manifest.
//!
//! - `params` = `param (',' param)*`, in the kernel's order: a buffer is `[const] T name[EXTENT]`
//!   (T: any element type of kda-types' `DType`), a scalar `T name` (T: any of its `ScalarKind`s).
//!   `EXTENT` may be `?` for a buffer whose reach kda cannot bound, which the entry's `safety`
//!   must name.
//! - `safety` = `{ buffer = "what the caller guarantees" }`: the reach that depends on data.
//! - a requirement = `expr CMP expr ('||' expr CMP expr)*`, CMP one of `== != < <= > >=`.
//! - `expr` = integer literals, the entry's integer scalars, `[defines]` constants, the launch's
//!   `block.x` ... `grid.z` and `shared.bytes`, `+ - * / %`, parentheses, `cdiv(a, b)`,
//!   `min(a, b)`, `max(a, b)`, and `a CMP b ? c : d` (an extent's whole expression, or in
//!   parentheses).

mod expr;
mod lex;

use std::collections::{BTreeMap, HashMap, hash_map};
use std::ops::Range;

use toml::Spanned;

use self::expr::{Cursor, Kind, Names, Node, Place, Problem, compare_op, parse_expr, parse_value, resolve};
use self::lex::{Tok, Token, shorten, tokenize};
use super::ident::{RESERVED_PREFIX, is_c_identifier, is_reserved, is_rust_field_name, is_rust_keyword};
use super::parse::{RawEntry, RawManifest};
use super::variants::Variant;
use super::{
    CompareOp, Comparison, DType, Diagnostic, Expr, LineIndex, Param, ParamType, Requirement, ScalarKind,
};

/// The most parameters an entry may declare: the runtime refers to a scalar by a `u16` index.
const MAX_PARAMS: usize = u16::MAX as usize;

/// The launch contract of one entry, as [`Entry`](super::Entry) holds it.
pub(super) struct Contract {
    pub params: Option<Vec<Param>>,
    pub requires: Vec<Requirement>,
}

/// The contract of every entry that read well, per table in file order; every problem goes to
/// `diagnostics`. The `[defines]` are all known here, wherever the file writes them.
pub(super) fn read_contracts(
    source: &LineIndex<'_>,
    manifest: &RawManifest,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Vec<Contract>> {
    let defines: HashMap<&str, u32> =
        manifest.defines.iter().map(|(name, value)| (name.get_ref().as_str(), *value)).collect();
    manifest
        .tables
        .iter()
        .map(|table| {
            let mut group = GroupContract::default();
            let mut same_text = SameText::default();
            table
                .entries
                .iter()
                .map(|(field, entry)| {
                    if let Some(contract) = group.of_variant(entry) {
                        return contract;
                    }
                    let text = SameText::key(source, entry);
                    if let Some(contract) = text.as_ref().and_then(|text| same_text.of(source, entry, text)) {
                        return contract;
                    }
                    let before = diagnostics.len();
                    let reader =
                        EntryReader { source, defines: &defines, field: field.get_ref(), diagnostics };
                    let (contract, name_offsets) = reader.read(entry);
                    let clean = diagnostics.len() == before;
                    group.remember(entry, &contract, clean);
                    if let Some(text) = text.filter(|_| clean) {
                        same_text.remember(text, &contract, name_offsets);
                    }
                    contract
                })
                .collect()
        })
        .collect()
}

/// The contracts read so far of entries without variants or `safety`, by their `params` and
/// `requires` as written: a library's kernels written by one macro share them, and an entry whose
/// strings equal an earlier one's has its contract, located at its own strings.
#[derive(Default)]
struct SameText<'e> {
    read: HashMap<Strings<'e>, (Contract, Vec<usize>)>,
}

/// An entry's `params` and `requires` as written.
type Strings<'e> = (&'e str, Vec<&'e str>);

impl<'e> SameText<'e> {
    /// The strings `entry`'s contract is read from, where an equal entry's may stand for it: a
    /// `params` whose value is its source (so a name's offset in it locates the name).
    fn key(source: &LineIndex<'_>, entry: &'e RawEntry) -> Option<Strings<'e>> {
        if entry.variant.is_some() || entry.safety.is_some() {
            return None;
        }
        let params = entry.params.as_ref()?;
        let requires =
            entry.requires.iter().flat_map(|list| list.get_ref()).map(|string| string.get_ref().as_str());
        Text::new(source.text(), params).exact.then(|| (params.get_ref().as_str(), requires.collect()))
    }

    /// The contract of `entry`, whose strings are `key`, from an earlier entry's.
    fn of(
        &self,
        source: &LineIndex<'_>,
        entry: &RawEntry,
        key: &(&'e str, Vec<&'e str>),
    ) -> Option<Contract> {
        let (contract, name_offsets) = self.read.get(key)?;
        let base = Text::new(source.text(), entry.params.as_ref()?).base;
        let mut params = contract.params.clone()?;
        for (param, offset) in params.iter_mut().zip(name_offsets) {
            param.location = source.location(base + offset);
        }
        let mut requires = contract.requires.clone();
        let strings = entry.requires.iter().flat_map(|list| list.get_ref());
        for (requirement, string) in requires.iter_mut().zip(strings) {
            requirement.location = source.location(string.span().start);
        }
        Some(Contract { params: Some(params), requires })
    }

    /// Keeps `contract`, read without a problem from the strings `key`.
    fn remember(&mut self, key: Strings<'e>, contract: &Contract, name_offsets: Vec<usize>) {
        if let hash_map::Entry::Vacant(slot) = self.read.entry(key) {
            let contract = Contract { params: contract.params.clone(), requires: contract.requires.clone() };
            slot.insert((contract, name_offsets));
        }
    }
}

/// The contract a variant group's first variant read to, kept for its other variants: where the
/// variants differ in type axes only and those type only buffers, each variant's contract is the
/// first's with its element types, so a group's `params` and `requires` are parsed once.
#[derive(Default)]
struct GroupContract<'e> {
    /// The group of the last variant read.
    group: Option<&'e str>,
    /// Its contract, when the group's other variants can take it.
    shared: Option<Contract>,
}

impl<'e> GroupContract<'e> {
    /// The contract of `entry` from its group's first variant, where that one can stand for it.
    fn of_variant(&self, entry: &RawEntry) -> Option<Contract> {
        let variant = entry.variant.as_ref().filter(|variant| types_only(variant))?;
        let shared = self.shared.as_ref().filter(|_| self.group == Some(variant.group.as_str()))?;
        let mut params = shared.params.clone()?;
        for param in &mut params {
            if let (Some(axis), ParamType::Buffer { element, .. }) = (&param.type_axis, &mut param.ty) {
                *element = variant.type_of(axis)?;
            }
        }
        Some(Contract { params: Some(params), requires: shared.requires.clone() })
    }

    /// Keeps the contract `entry` read to, if it is a variant whose group's other variants differ
    /// from it in element types only: read without a problem (`clean`), with the type axes typing
    /// buffers that no `strided` reads as a layout (a layout's element type is checked).
    fn remember(&mut self, entry: &'e RawEntry, contract: &Contract, clean: bool) {
        let Some(variant) = &entry.variant else { return };
        if self.group == Some(variant.group.as_str()) {
            return;
        }
        self.group = Some(&variant.group);
        self.shared = None;
        let Some(params) = &contract.params else { return };
        let mut layouts = Vec::new();
        for expr in params.iter().filter_map(|param| match &param.ty {
            ParamType::Buffer { extent, .. } => Some(extent),
            ParamType::Scalar(_) => None,
        }) {
            strided_layouts(expr, &mut layouts);
        }
        for comparison in contract.requires.iter().flat_map(|requirement| &requirement.any_of) {
            strided_layouts(&comparison.lhs, &mut layouts);
            strided_layouts(&comparison.rhs, &mut layouts);
        }
        let typed_buffers_only = params.iter().enumerate().all(|(index, param)| {
            param.type_axis.is_none()
                || matches!(param.ty, ParamType::Buffer { .. }) && !layouts.contains(&index)
        });
        if clean && types_only(variant) && typed_buffers_only {
            self.shared =
                Some(Contract { params: Some(params.clone()), requires: contract.requires.clone() });
        }
    }
}

/// Whether a variant's axes are all types: an integer axis is a constant of its expressions.
fn types_only(variant: &Variant) -> bool {
    variant.constants().next().is_none()
}

/// The parameter positions `expr` reads as a `strided` layout, pushed to `layouts`.
fn strided_layouts(expr: &Expr, layouts: &mut Vec<usize>) {
    match expr {
        Expr::Literal(_) | Expr::Scalar { .. } | Expr::Define { .. } | Expr::Launch(_) => {}
        Expr::Binary { lhs, rhs, .. } => {
            strided_layouts(lhs, layouts);
            strided_layouts(rhs, layouts);
        }
        Expr::Strided { index, rank, .. } => {
            layouts.push(*index);
            strided_layouts(rank, layouts);
        }
        Expr::Select { condition, taken, other } => {
            strided_layouts(&condition.lhs, layouts);
            strided_layouts(&condition.rhs, layouts);
            strided_layouts(taken, layouts);
            strided_layouts(other, layouts);
        }
    }
}

/// A TOML string of the manifest: its value, and where the value's bytes are in the file.
struct Text<'a> {
    value: &'a str,
    /// The file offset of the value's first byte.
    base: usize,
    /// Whether value byte `i` is file byte `base + i`: false when escapes or a trimmed line end
    /// make the source differ from the value, and then every problem is located at `base`.
    exact: bool,
}

impl<'a> Text<'a> {
    fn new(source: &str, string: &'a Spanned<String>) -> Self {
        let (span, value) = (string.span(), string.get_ref().as_str());
        let written = source.get(span.clone()).unwrap_or_default();
        for quote in ["\"\"\"", "'''", "\"", "'"] {
            if written.len() >= 2 * quote.len() && written.starts_with(quote) && written.ends_with(quote) {
                let mut inner = &written[quote.len()..written.len() - quote.len()];
                let mut base = span.start + quote.len();
                if quote.len() == 3 {
                    // A multi-line string drops the line end right after its opening quotes.
                    for line_end in ["\r\n", "\n"] {
                        if let Some(rest) = inner.strip_prefix(line_end) {
                            (inner, base) = (rest, base + line_end.len());
                            break;
                        }
                    }
                }
                return Text { value, base, exact: inner == value };
            }
        }
        Text { value, base: span.start, exact: false }
    }

    fn file_span(&self, span: Range<usize>) -> Range<usize> {
        if self.exact { self.base + span.start..self.base + span.end } else { self.base..self.base }
    }
}

/// Reads the contract of one entry.
struct EntryReader<'r, 'a> {
    source: &'r LineIndex<'a>,
    defines: &'r HashMap<&'r str, u32>,
    field: &'r str,
    diagnostics: &'r mut Vec<Diagnostic>,
}

impl<'r> EntryReader<'r, '_> {
    /// The entry's contract, and where each parameter's name starts in its `params`.
    fn read(mut self, entry: &'r RawEntry) -> (Contract, Vec<usize>) {
        // A variant's integer axes are constants of its extents and requirements, as defines are.
        let variant = entry.variant.as_ref();
        let constants = variant.into_iter().flat_map(Variant::constants);
        let defines: HashMap<&str, u32> =
            self.defines.iter().map(|(name, value)| (*name, *value)).chain(constants).collect();
        let mut names = Names { params: HashMap::new(), defines: &defines };
        let safety = entry.safety.as_ref().map(|safety| safety.get_ref());
        let trusted: Vec<&str> =
            safety.into_iter().flatten().map(|(name, _)| name.get_ref().as_str()).collect();
        let mut name_offsets = Vec::new();
        let mut params = entry.params.as_ref().and_then(|params| {
            let text = Text::new(self.source.text(), params);
            self.params(&text, &mut names, &trusted, variant, &mut name_offsets)
        });
        let mut requires = Vec::new();
        if let Some(list) = &entry.requires {
            if entry.params.is_none() {
                self.without_params("requires", list.span(), "a requirement names the kernel's parameters");
            } else {
                for string in list.get_ref() {
                    let text = Text::new(self.source.text(), string);
                    requires.extend(self.requirement(&text, string.span().start, &names));
                }
            }
        }
        if let Some(safety) = &entry.safety {
            if entry.params.is_none() {
                self.without_params("safety", safety.span(), "a condition names a buffer parameter");
            } else if let Some(list) = &mut params {
                self.safety(safety.get_ref(), list);
            }
        }
        (Contract { params, requires }, name_offsets)
    }

    /// `key` written on an entry without `params`, which it needs.
    fn without_params(&mut self, key: &str, span: Range<usize>, why: &str) {
        let message =
            format!("entry `{}`: `{key}` without `params`: {why}, so declare them in `params`", self.field);
        self.diagnostics.push(Diagnostic::new(self.source, span, message));
    }

    /// Gives each buffer the condition `safety` states for it; a name that is not a buffer of the
    /// entry, or an empty condition, is reported at its key or value.
    fn safety(&mut self, safety: &BTreeMap<Spanned<String>, Spanned<String>>, params: &mut [Param]) {
        for (name, condition) in safety {
            let param = params.iter_mut().find(|param| param.name == *name.get_ref());
            let problem = match param {
                Some(Param { ty: ParamType::Buffer { .. }, .. }) if condition.get_ref().trim().is_empty() => {
                    Some((
                        condition.span(),
                        format!(
                            "the `safety` condition of `{}` is empty: state what the caller guarantees",
                            name.get_ref()
                        ),
                    ))
                }
                Some(param @ Param { ty: ParamType::Buffer { .. }, .. }) => {
                    param.safety = Some(condition.get_ref().trim().to_owned());
                    None
                }
                Some(_) => Some((
                    name.span(),
                    format!(
                        "`safety` names scalar `{}`: a condition states what a buffer's reach depends on",
                        shorten(name.get_ref())
                    ),
                )),
                None => Some((
                    name.span(),
                    format!(
                        "`safety` names `{}`, which is not a parameter of this entry",
                        shorten(name.get_ref())
                    ),
                )),
            };
            if let Some((span, message)) = problem {
                let message = format!("entry `{}`: {message}", self.field);
                self.diagnostics.push(Diagnostic::new(self.source, span, message));
            }
        }
    }

    fn report(&mut self, text: &Text<'_>, problems: Vec<Problem>) {
        for problem in problems {
            let message = format!("entry `{}`: {}", self.field, problem.message);
            self.diagnostics.push(Diagnostic::new(self.source, text.file_span(problem.span), message));
        }
    }

    /// The parameters, registering each name in `names`; `None` when anything was reported.
    /// `trusted` are the names the entry's `safety` gives a condition: only those may have the
    /// extent `?`.
    /// A type `variant` has an axis of is that axis's type. Where each parameter's name starts in
    /// `params` goes to `name_offsets`.
    fn params<'s>(
        &mut self,
        text: &Text<'s>,
        names: &mut Names<'s>,
        trusted: &[&str],
        variant: Option<&Variant>,
        name_offsets: &mut Vec<usize>,
    ) -> Option<Vec<Param>>
    where
        'r: 's,
    {
        let tokens = tokenize(text.value);
        let mut problems = Vec::new();
        let mut first_at: HashMap<&str, Range<usize>> = HashMap::new();
        let mut declared = Vec::new();
        // A blank string declares a kernel without parameters.
        let segments = if tokens.len() == 1 { Vec::new() } else { split(&tokens) };
        if let Some(first_extra) = segments.get(MAX_PARAMS) {
            // The runtime refers to a scalar by a `u16` index.
            let message =
                format!("a kernel takes at most 65,535 parameters; `params` lists {}", segments.len());
            problems.push(Problem::new(first_extra[0].span(), message));
        }
        for (index, segment) in segments.into_iter().enumerate() {
            let read = declare(&mut Cursor::new(segment), &mut problems).map(|mut param| {
                if let Some(dtype) = variant.and_then(|variant| variant.type_of(param.ty.0)) {
                    param.type_axis = Some(param.ty.0);
                    param.ty.0 = dtype.name();
                }
                param
            });
            let (name, kind, param) = match read {
                Ok(param) => (Some(param.name), kind_of(&param, index), Some(param)),
                Err((problem, name)) => {
                    problems.push(problem);
                    (name, Kind::Broken, None)
                }
            };
            if let Some((name, token)) = name {
                if let Some(first) = first_at.get(name) {
                    let first = self.source.location(text.file_span(first.clone()).start);
                    let message = format!("parameter `{}` is listed twice: first at {first}", shorten(name));
                    problems.push(Problem::new(token.span(), message));
                } else {
                    first_at.insert(name, token.span());
                    names.params.insert(name, kind);
                }
            }
            declared.extend(param);
        }
        let params: Vec<Param> = declared
            .iter()
            .filter_map(|param| self.check(text, param, names, trusted, &mut problems))
            .collect();
        let ok = problems.is_empty();
        self.report(text, problems);
        // Without a problem, every declared parameter is one of `params`, in order.
        name_offsets.extend(declared.iter().map(|param| param.name.1.span().start));
        ok.then_some(params)
    }

    /// The type, name and extent checks of one parameter that parsed.
    fn check(
        &self,
        text: &Text<'_>,
        param: &Declared<'_>,
        names: &Names<'_>,
        trusted: &[&str],
        problems: &mut Vec<Problem>,
    ) -> Option<Param> {
        let before = problems.len();
        let (name, name_token) = param.name;
        let ty = match &param.extent {
            Some((node, written)) => {
                if param.unbounded && !trusted.contains(&name) {
                    let message = format!(
                        "the extent of `{0}` is `?`, unknown to kda: name `{0}` in the entry's `safety` with \
                         what the caller guarantees about its reach",
                        shorten(name)
                    );
                    problems.push(Problem::new(written.clone(), message));
                }
                let element = element_type(param.ty, name, problems);
                let extent = resolve(text.value, node, names, Place::Extent(&shorten(name)), problems);
                element.zip(extent).map(|(element, extent)| ParamType::Buffer {
                    nullable: param.nullable.is_some(),
                    element,
                    writable: param.constness.is_none(),
                    extent,
                    extent_text: text.value[written.clone()].trim().to_owned(),
                })
            }
            None => {
                for qualifier in [param.nullable, param.constness].into_iter().flatten() {
                    let message = format!(
                        "`{}` applies to buffers only: scalar `{}` is passed by value",
                        if qualifier.tok == Tok::Ident("const") { "const" } else { "nullable" },
                        shorten(name)
                    );
                    problems.push(Problem::new(qualifier.span(), message));
                }
                scalar_type(param.ty, name, problems).map(ParamType::Scalar)
            }
        };
        if let Some(message) = name_problem(name, self.defines) {
            problems.push(Problem::new(name_token.span(), message));
        }
        let location = self.source.location(text.file_span(name_token.span()).start);
        ty.filter(|_| problems.len() == before).map(|ty| Param {
            name: name.to_owned(),
            ty,
            safety: None,
            type_axis: param.type_axis.map(str::to_owned),
            location,
        })
    }

    fn requirement(&mut self, text: &Text<'_>, start: usize, names: &Names<'_>) -> Option<Requirement> {
        let tokens = tokenize(text.value);
        let mut problems = Vec::new();
        let mut any_of = Vec::new();
        match parse_requirement(&mut Cursor::new(&tokens), &mut problems) {
            Ok(comparisons) => {
                for (lhs, op, rhs) in comparisons {
                    let lhs = resolve(text.value, &lhs, names, Place::Requirement, &mut problems);
                    let rhs = resolve(text.value, &rhs, names, Place::Requirement, &mut problems);
                    any_of.extend(lhs.zip(rhs).map(|(lhs, rhs)| Comparison { lhs, op, rhs }));
                }
            }
            Err(problem) => problems.push(problem),
        }
        let ok = problems.is_empty();
        self.report(text, problems);
        ok.then(|| Requirement { any_of, text: text.value.to_owned(), location: self.source.location(start) })
    }
}

/// One parameter as written.
struct Declared<'s> {
    nullable: Option<Token<'s>>,
    constness: Option<Token<'s>>,
    ty: (&'s str, Token<'s>),
    name: (&'s str, Token<'s>),
    /// The extent and the bytes between its brackets.
    extent: Option<(Node<'s>, Range<usize>)>,
    /// Whether the extent is `?` (parsed as 0).
    unbounded: bool,
    /// The variant axis the type is written as, once resolved to the variant's type.
    type_axis: Option<&'s str>,
}

/// A syntax error, with the parameter's name when it got that far (so that uses of the name
/// are not reported again as unknown).
type DeclareError<'s> = (Problem, Option<(&'s str, Token<'s>)>);

/// The parameters' token slices, each ending with the `,` or end that closes it. A `,` inside
/// `cdiv(..)` does not split; a `]` closes any parenthesis left open, so that a missing `)`
/// costs one parameter, not all the rest.
fn split<'t, 's>(tokens: &'t [Token<'s>]) -> Vec<&'t [Token<'s>]> {
    let (mut segments, mut start, mut depth) = (Vec::new(), 0, 0u32);
    for (at, token) in tokens.iter().enumerate() {
        match token.tok {
            Tok::Punct("(") => depth += 1,
            Tok::Punct(")") => depth = depth.saturating_sub(1),
            Tok::Punct("]") => depth = 0,
            Tok::Punct(",") if depth == 0 => {
                segments.push(&tokens[start..=at]);
                start = at + 1;
            }
            Tok::End => segments.push(&tokens[start..=at]),
            _ => {}
        }
    }
    segments
}

/// `[nullable] [const] T name[EXTENT]` or `T name`, up to the token that ends the parameter.
fn declare<'s>(
    cursor: &mut Cursor<'_, 's>,
    problems: &mut Vec<Problem>,
) -> Result<Declared<'s>, DeclareError<'s>> {
    // The qualifiers, in either order, each before a type.
    let (mut nullable, mut constness) = (None, None);
    loop {
        match (cursor.peek().tok, cursor.peek_second().tok) {
            (Tok::Ident("nullable"), Tok::Ident(_)) if nullable.is_none() => nullable = Some(cursor.bump()),
            (Tok::Ident("const"), Tok::Ident(_)) if constness.is_none() => constness = Some(cursor.bump()),
            _ => break,
        }
    }
    let ty = cursor.ident().ok_or_else(|| {
        (Problem::expected("a parameter (`[const] T name[EXTENT]` or `T name`)", cursor.peek()), None)
    })?;
    let Some(name) = cursor.ident() else {
        let found = cursor.peek();
        let hint = if found.is("*") { ": a buffer is written `[const] T name[EXTENT]`" } else { "" };
        let message = format!(
            "expected the parameter's name after `{}`, found {}{hint}",
            shorten(ty.0),
            found.describe()
        );
        return Err((Problem::new(found.span(), message), None));
    };
    let partial = Some(name);
    let mut unbounded = false;
    let extent = match cursor.eat("[") {
        Some(open) if cursor.peek().is("?") && cursor.peek_second().is("]") => {
            let question = cursor.bump();
            let close = cursor.bump();
            unbounded = true;
            Some((Node::unknown_reach(question), open.end..close.start))
        }
        Some(open) if cursor.peek().is("]") => {
            let message = format!(
                "the extent of `{0}` is empty: write its number of elements, as in `{0}[n]`",
                shorten(name.0)
            );
            return Err((Problem::new(open.start..cursor.peek().end, message), partial));
        }
        Some(open) => {
            let node = parse_value(cursor, 0, problems).map_err(|problem| (problem, partial))?;
            let Some(close) = cursor.eat("]") else {
                let what = format!("`]` to close the extent of `{}`", shorten(name.0));
                return Err((Problem::expected(&what, cursor.peek()), partial));
            };
            Some((node, open.end..close.start))
        }
        None => None,
    };
    if !cursor.at_end() {
        let what = format!("`,` or the end of `params` after parameter `{}`", shorten(name.0));
        return Err((Problem::expected(&what, cursor.peek()), partial));
    }
    Ok(Declared { nullable, constness, ty, name, extent, unbounded, type_axis: None })
}

/// What the parameter at `index` stands for in an expression.
fn kind_of(param: &Declared<'_>, index: usize) -> Kind {
    match (param.extent.is_some(), ScalarKind::from_name(param.ty.0)) {
        (true, _) => {
            Kind::Buffer { index, element: DType::from_name(param.ty.0), writable: param.constness.is_none() }
        }
        (false, Some(kind)) if kind.is_integer() => Kind::Integer(index),
        (false, Some(kind)) => Kind::Float(kind),
        // An unknown type is reported at the declaration; its uses add nothing.
        (false, None) => Kind::Broken,
    }
}

fn element_type(ty: (&str, Token<'_>), name: &str, problems: &mut Vec<Problem>) -> Option<DType> {
    if let Some(dtype) = DType::from_name(ty.0) {
        return Some(dtype);
    }
    // Every scalar kind is an element type too: an unknown element type is no type at all.
    let elements = one_of(DType::ALL.map(DType::name));
    let message = format!(
        "unknown element type `{}` of buffer `{}`: expected {elements}",
        shorten(ty.0),
        shorten(name)
    );
    problems.push(Problem::new(ty.1.span(), message));
    None
}

fn scalar_type(ty: (&str, Token<'_>), name: &str, problems: &mut Vec<Problem>) -> Option<ScalarKind> {
    if let Some(kind) = ScalarKind::from_name(ty.0) {
        return Some(kind);
    }
    let scalars = one_of(ScalarKind::ALL.map(ScalarKind::name));
    let message = match DType::from_name(ty.0) {
        Some(element) => format!(
            "scalar `{}` cannot be {element}: a scalar is {scalars} ({element} is a buffer element type)",
            shorten(name)
        ),
        None => format!("unknown type `{}` of scalar `{}`: expected {scalars}", shorten(ty.0), shorten(name)),
    };
    problems.push(Problem::new(ty.1.span(), message));
    None
}

/// Parameter names become C argument names and Rust fields of the launcher; nvcc gets every
/// define as `-DNAME=VALUE`, which would substitute a parameter of the same name.
fn name_problem(name: &str, defines: &HashMap<&str, u32>) -> Option<String> {
    let shown = shorten(name);
    if !is_c_identifier(name) {
        Some(format!(
            "parameter name `{shown}` is not a C identifier (ASCII letters, digits and `_`, not starting with a digit)"
        ))
    } else if is_rust_keyword(name) {
        Some(format!("parameter name `{shown}` is a Rust keyword; choose another name"))
    } else if !is_rust_field_name(name) {
        Some(format!("parameter name `{shown}` cannot name a Rust field; choose another name"))
    } else if is_reserved(name) {
        Some(format!(
            "parameter name `{shown}` starts with `{RESERVED_PREFIX}`, which kda reserves for generated code"
        ))
    } else if defines.contains_key(name) {
        Some(format!(
            "parameter name `{shown}` is also a [defines] constant, which nvcc would substitute into the \
             kernel; choose another name"
        ))
    } else {
        None
    }
}

/// `expr CMP expr ('||' expr CMP expr)*`.
fn parse_requirement<'s>(
    cursor: &mut Cursor<'_, 's>,
    problems: &mut Vec<Problem>,
) -> Result<Vec<(Node<'s>, CompareOp, Node<'s>)>, Problem> {
    let mut comparisons = Vec::new();
    loop {
        let lhs = parse_expr(cursor, 0, problems)?;
        let found = cursor.peek();
        let op = match compare_op(found) {
            Some(op) => op,
            None => {
                let hint = if found.is("=") { " (`==` tests equality)" } else { "" };
                let message = format!(
                    "expected a comparison (`==`, `!=`, `<`, `<=`, `>` or `>=`), found {}{hint}",
                    found.describe()
                );
                return Err(Problem::new(found.span(), message));
            }
        };
        cursor.bump();
        let rhs = parse_expr(cursor, 0, problems)?;
        comparisons.push((lhs, op, rhs));
        if cursor.at_end() {
            return Ok(comparisons);
        }
        if cursor.eat("||").is_none() {
            return Err(Problem::expected("`||` or the end of the requirement", cursor.peek()));
        }
    }
}

/// `names` as a message lists alternatives: `a, b or c`.
fn one_of<const N: usize>(names: [&str; N]) -> String {
    match names.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}
