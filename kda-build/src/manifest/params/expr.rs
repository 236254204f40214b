//! Integer expressions (extents and the sides of a requirement): a token cursor, the
//! recursive-descent parser, and the step that resolves names and folds constants.

use std::collections::HashMap;
use std::ops::Range;

use super::lex::{Tok, Token, shorten};
use crate::manifest::{BinaryOp, CompareOp, Comparison, DType, Expr, LaunchDim, ScalarKind};

/// The deepest nesting of parentheses, function calls and conditionals an expression may have:
/// real extents use a handful, and the bound keeps the parser's recursion off the stack limit.
pub(super) const MAX_NESTING: u32 = 64;

/// The most operators an expression may apply one after another (`a + b + c` applies two, one on
/// the other's result): a flat sum of hundreds of terms is fine, and the bound keeps every walk of
/// the expression's tree that recurses in its height (its postfix program, clone, comparison,
/// drop) off the stack limit: at 512, a third of a megabyte in a debug build.
pub(super) const MAX_CHAIN: u32 = 512;

/// The most values the launch check's evaluator may hold at once for one expression. Its stack
/// holds 128 (`STACK_DEPTH` in `kda_runtime::signature`), of which a requirement's comparison
/// takes one for its left side while its right side is evaluated, and an `||` one for the
/// alternatives before it. A left-associative chain holds 2; each operand that waits on a
/// parenthesis, a call or a conditional on its right holds one more.
pub(super) const MAX_STACK: u32 = 126;

/// A problem at the bytes `span` of the string being parsed.
#[derive(Debug)]
pub(super) struct Problem {
    pub span: Range<usize>,
    pub message: String,
}

impl Problem {
    pub fn new(span: Range<usize>, message: impl Into<String>) -> Self {
        Problem { span, message: message.into() }
    }

    /// "expected `what`, found" the token at the cursor.
    pub fn expected(what: &str, found: Token<'_>) -> Self {
        Problem::new(found.span(), format!("expected {what}, found {}", found.describe()))
    }
}

/// Reads a slice of tokens whose last token ends it (a `,` between parameters, or the end of the
/// string); the cursor never moves past that last token, so it can always be reported as found.
pub(super) struct Cursor<'t, 's> {
    tokens: &'t [Token<'s>],
    pos: usize,
}

impl<'t, 's> Cursor<'t, 's> {
    /// `tokens` must not be empty: its last token ends the slice.
    pub fn new(tokens: &'t [Token<'s>]) -> Self {
        debug_assert!(!tokens.is_empty());
        Cursor { tokens, pos: 0 }
    }

    pub fn peek(&self) -> Token<'s> {
        self.tokens[self.pos.min(self.tokens.len() - 1)]
    }

    /// The token after the next one (the ending token when there is none).
    pub fn peek_second(&self) -> Token<'s> {
        self.tokens[(self.pos + 1).min(self.tokens.len() - 1)]
    }

    pub fn at_end(&self) -> bool {
        self.pos + 1 >= self.tokens.len()
    }

    pub fn bump(&mut self) -> Token<'s> {
        let token = self.peek();
        if !self.at_end() {
            self.pos += 1;
        }
        token
    }

    /// Takes the next token if it is `punct` (never the ending token).
    pub fn eat(&mut self, punct: &str) -> Option<Token<'s>> {
        (!self.at_end() && self.peek().is(punct)).then(|| self.bump())
    }

    /// Takes the next token if it is an identifier.
    pub fn ident(&mut self) -> Option<(&'s str, Token<'s>)> {
        match self.peek().tok {
            Tok::Ident(name) if !self.at_end() => Some((name, self.bump())),
            _ => None,
        }
    }
}

/// An expression as written, with its byte range (parentheses included).
#[derive(Debug)]
pub(super) struct Node<'s> {
    pub kind: NodeKind<'s>,
    pub start: usize,
    pub end: usize,
    /// Levels of operators below and including this node.
    height: u32,
    /// The most values its postfix program holds at once.
    stack: u32,
}

#[derive(Debug)]
pub(super) enum NodeKind<'s> {
    Int(u64),
    Name(&'s str),
    Launch(LaunchDim),
    /// Something already reported (a bad literal, an unknown launch dimension): it resolves to
    /// nothing and adds no further error.
    Invalid,
    Binary {
        op: BinaryOp,
        op_span: Range<usize>,
        lhs: Box<Node<'s>>,
        rhs: Box<Node<'s>>,
    },
    /// `strided(layout, rank)` or `strided(layout, rank, part)`.
    Strided {
        layout: &'s str,
        layout_span: Range<usize>,
        rank: Box<Node<'s>>,
        part: u16,
    },
    /// `lhs CMP rhs ? taken : other`.
    Select {
        condition: Box<(Node<'s>, CompareOp, Node<'s>)>,
        taken: Box<Node<'s>>,
        other: Box<Node<'s>>,
    },
}

impl<'s> Node<'s> {
    /// The extent `?` at `token`: 0 elements are all kda can check.
    pub fn unknown_reach(token: Token<'_>) -> Self {
        Node::leaf(NodeKind::Int(0), token)
    }

    fn leaf(kind: NodeKind<'s>, token: Token<'_>) -> Self {
        Node { kind, start: token.start, end: token.end, height: 0, stack: 1 }
    }

    fn binary(op: BinaryOp, op_token: Token<'_>, lhs: Node<'s>, rhs: Node<'s>) -> Result<Self, Problem> {
        // The program evaluates `lhs`, then `rhs` with `lhs`'s value held.
        let (height, stack) = within_bounds(op_token, &[(&lhs, 0), (&rhs, 1)])?;
        let (start, end) = (lhs.start, rhs.end);
        let kind = NodeKind::Binary { op, op_span: op_token.span(), lhs: Box::new(lhs), rhs: Box::new(rhs) };
        Ok(Node { kind, start, end, height, stack })
    }
}

/// The height and the stack of the node of `operator` over `operands`, each with how many values
/// its program holds while the operand is evaluated; a problem at `operator` where they pass
/// [`MAX_CHAIN`] or [`MAX_STACK`].
fn within_bounds(operator: Token<'_>, operands: &[(&Node<'_>, u32)]) -> Result<(u32, u32), Problem> {
    let height = operands.iter().map(|(node, _)| node.height).max().unwrap_or(0) + 1;
    let stack = operands.iter().map(|(node, held)| node.stack + held).max().unwrap_or(1);
    if height > MAX_CHAIN {
        return Err(Problem::new(
            operator.span(),
            format!("expression too long: more than {MAX_CHAIN} operators in a row (`a + b + c` has two)"),
        ));
    }
    if stack > MAX_STACK {
        return Err(Problem::new(
            operator.span(),
            format!(
                "expression nested too deeply: evaluating it would hold more than {MAX_STACK} values at once \
                 (a left operand's value is held while a parenthesised, called or conditional right operand \
                 is evaluated)"
            ),
        ));
    }
    Ok((height, stack))
}

fn too_deep(token: Token<'_>) -> Problem {
    Problem::new(
        token.span(),
        format!(
            "expression nested too deeply: at most {MAX_NESTING} levels of parentheses, function calls and \
             conditionals"
        ),
    )
}

/// `value = expr [CMP expr '?' value ':' value]`: an extent, or what parentheses and a
/// function's arguments hold. A requirement's sides are `expr`s, so that its comparisons stay its
/// own; a conditional inside one is written in parentheses.
pub(super) fn parse_value<'s>(
    cursor: &mut Cursor<'_, 's>,
    depth: u32,
    problems: &mut Vec<Problem>,
) -> Result<Node<'s>, Problem> {
    let lhs = parse_expr(cursor, depth, problems)?;
    let Some(op) = compare_op(cursor.peek()) else { return Ok(lhs) };
    let op_token = cursor.bump();
    if depth >= MAX_NESTING {
        return Err(too_deep(op_token));
    }
    let rhs = parse_expr(cursor, depth + 1, problems)?;
    cursor.eat("?").ok_or_else(|| {
        Problem::expected("`?` after the condition (`c ? a : b` chooses between two values)", cursor.peek())
    })?;
    let taken = parse_value(cursor, depth + 1, problems)?;
    cursor
        .eat(":")
        .ok_or_else(|| Problem::expected("`:` between the two values of `c ? a : b`", cursor.peek()))?;
    let other = parse_value(cursor, depth + 1, problems)?;
    // The program evaluates the comparison (which leaves one value), then `taken`, then `other`.
    let (height, stack) = within_bounds(op_token, &[(&lhs, 0), (&rhs, 1), (&taken, 1), (&other, 2)])?;
    let (start, end) = (lhs.start, other.end);
    let kind = NodeKind::Select {
        condition: Box::new((lhs, op, rhs)),
        taken: Box::new(taken),
        other: Box::new(other),
    };
    Ok(Node { kind, start, end, height, stack })
}

/// The comparison `token` spells, if it is one.
pub(super) fn compare_op(token: Token<'_>) -> Option<CompareOp> {
    match token.tok {
        Tok::Punct("==") => Some(CompareOp::Eq),
        Tok::Punct("!=") => Some(CompareOp::Ne),
        Tok::Punct("<") => Some(CompareOp::Lt),
        Tok::Punct("<=") => Some(CompareOp::Le),
        Tok::Punct(">") => Some(CompareOp::Gt),
        Tok::Punct(">=") => Some(CompareOp::Ge),
        _ => None,
    }
}

/// `expr = term (('+' | '-') term)*`, `term = atom (('*' | '/' | '%') atom)*`,
/// `atom = INTEGER | NAME | NAME '.' NAME | FUNCTION '(' value ',' value ')' | '(' value ')'`,
/// FUNCTION one of `cdiv`, `min` and `max`.
///
/// A fatal problem is returned; one the parse can step over (a bad literal, an unknown launch
/// dimension) is added to `problems` and parsing goes on.
pub(super) fn parse_expr<'s>(
    cursor: &mut Cursor<'_, 's>,
    depth: u32,
    problems: &mut Vec<Problem>,
) -> Result<Node<'s>, Problem> {
    let mut lhs = parse_term(cursor, depth, problems)?;
    loop {
        let (op, token) = if let Some(token) = cursor.eat("+") {
            (BinaryOp::Add, token)
        } else if let Some(token) = cursor.eat("-") {
            (BinaryOp::Sub, token)
        } else {
            return Ok(lhs);
        };
        let rhs = parse_term(cursor, depth, problems)?;
        lhs = Node::binary(op, token, lhs, rhs)?;
    }
}

fn parse_term<'s>(
    cursor: &mut Cursor<'_, 's>,
    depth: u32,
    problems: &mut Vec<Problem>,
) -> Result<Node<'s>, Problem> {
    let mut lhs = parse_atom(cursor, depth, problems)?;
    loop {
        let (op, token) = if let Some(token) = cursor.eat("*") {
            (BinaryOp::Mul, token)
        } else if let Some(token) = cursor.eat("/") {
            (BinaryOp::Div, token)
        } else if let Some(token) = cursor.eat("%") {
            (BinaryOp::Rem, token)
        } else {
            return Ok(lhs);
        };
        let rhs = parse_atom(cursor, depth, problems)?;
        lhs = Node::binary(op, token, lhs, rhs)?;
    }
}

fn parse_atom<'s>(
    cursor: &mut Cursor<'_, 's>,
    depth: u32,
    problems: &mut Vec<Problem>,
) -> Result<Node<'s>, Problem> {
    let token = cursor.peek();
    match token.tok {
        _ if cursor.at_end() => Err(Problem::expected(EXPECTED_OPERAND, token)),
        Tok::Number(text) => {
            cursor.bump();
            Ok(Node::leaf(literal(text, token, problems), token))
        }
        Tok::Ident(function)
            if cursor.peek_second().is("(") && FUNCTIONS.iter().any(|(f, _)| *f == function) =>
        {
            if depth >= MAX_NESTING {
                return Err(too_deep(token));
            }
            let op = FUNCTIONS.iter().find(|(f, _)| *f == function).map_or(BinaryOp::Cdiv, |(_, op)| *op);
            cursor.bump();
            cursor.bump();
            let lhs = parse_value(cursor, depth + 1, problems)?;
            cursor.eat(",").ok_or_else(|| {
                Problem::expected(&format!("`,` between the two operands of `{function}`"), cursor.peek())
            })?;
            let rhs = parse_value(cursor, depth + 1, problems)?;
            let close = cursor
                .eat(")")
                .ok_or_else(|| Problem::expected(&format!("`)` to close `{function}(`"), cursor.peek()))?;
            let mut node = Node::binary(op, token, lhs, rhs)?;
            (node.start, node.end) = (token.start, close.end);
            Ok(node)
        }
        Tok::Ident("strided") if cursor.peek_second().is("(") => {
            if depth >= MAX_NESTING {
                return Err(too_deep(token));
            }
            cursor.bump();
            cursor.bump();
            let (layout, layout_token) = cursor.ident().ok_or_else(|| {
                Problem::expected("the name of a layout buffer, as in `strided(info, rank)`", cursor.peek())
            })?;
            cursor.eat(",").ok_or_else(|| {
                Problem::expected("`,` between the layout and the rank of `strided`", cursor.peek())
            })?;
            let rank = parse_value(cursor, depth + 1, problems)?;
            let part = match cursor.eat(",") {
                Some(_) => strides_part(cursor)?,
                None => 1,
            };
            let close =
                cursor.eat(")").ok_or_else(|| Problem::expected("`)` to close `strided(`", cursor.peek()))?;
            let (height, stack) = within_bounds(token, &[(&rank, 0)])?;
            let kind =
                NodeKind::Strided { layout, layout_span: layout_token.span(), rank: Box::new(rank), part };
            Ok(Node { kind, start: token.start, end: close.end, height, stack })
        }
        Tok::Ident(name) if cursor.peek_second().is(".") => {
            cursor.bump();
            cursor.bump();
            let Some((axis, axis_token)) = cursor.ident() else {
                return Err(Problem::expected(
                    &format!(
                        "an axis after `{}.` (`x`, `y` or `z`, or `bytes` after `shared.`)",
                        shorten(name)
                    ),
                    cursor.peek(),
                ));
            };
            let node = Node {
                kind: NodeKind::Invalid,
                start: token.start,
                end: axis_token.end,
                height: 0,
                stack: 1,
            };
            match launch_dim(name, axis) {
                Some(dim) => Ok(Node { kind: NodeKind::Launch(dim), ..node }),
                None => {
                    problems.push(Problem::new(
                        token.start..axis_token.end,
                        format!(
                            "`{}.{}` is not a launch dimension: expected block.x, block.y, block.z, \
                             grid.x, grid.y, grid.z or shared.bytes",
                            shorten(name),
                            shorten(axis)
                        ),
                    ));
                    Ok(node)
                }
            }
        }
        Tok::Ident(name) => {
            cursor.bump();
            Ok(Node::leaf(NodeKind::Name(name), token))
        }
        Tok::Punct("(") => {
            if depth >= MAX_NESTING {
                return Err(too_deep(token));
            }
            cursor.bump();
            let mut node = parse_value(cursor, depth + 1, problems)?;
            let close = cursor.eat(")").ok_or_else(|| Problem::expected("`)`", cursor.peek()))?;
            (node.start, node.end) = (token.start, close.end);
            Ok(node)
        }
        _ => Err(Problem::expected(EXPECTED_OPERAND, token)),
    }
}

const EXPECTED_OPERAND: &str =
    "an integer, a name, `cdiv(a, b)`, `min(a, b)`, `max(a, b)`, `strided(layout, rank)` or `(`";

/// The two-operand functions an expression can call, and the operation each is.
const FUNCTIONS: [(&str, BinaryOp); 3] =
    [("cdiv", BinaryOp::Cdiv), ("min", BinaryOp::Min), ("max", BinaryOp::Max)];

/// A decimal `u64`; anything else is reported and becomes [`NodeKind::Invalid`].
fn literal<'s>(text: &str, token: Token<'_>, problems: &mut Vec<Problem>) -> NodeKind<'s> {
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        problems.push(Problem::new(
            token.span(),
            format!("invalid integer literal `{}`: write a decimal integer", shorten(text)),
        ));
        return NodeKind::Invalid;
    }
    match text.parse::<u64>() {
        Ok(value) => NodeKind::Int(value),
        // All digits, so the only failure is a value past u64::MAX.
        Err(_) => {
            problems.push(Problem::new(
                token.span(),
                format!("integer literal `{}` does not fit in u64", shorten(text)),
            ));
            NodeKind::Invalid
        }
    }
}

fn launch_dim(base: &str, axis: &str) -> Option<LaunchDim> {
    LaunchDim::from_name(&format!("{base}.{axis}"))
}

/// What a parameter name stands for in an expression.
#[derive(Clone, Copy, Debug)]
pub(super) enum Kind {
    /// An integer scalar, at this position of the parameters.
    Integer(usize),
    /// A float scalar: never an integer.
    Float(ScalarKind),
    /// A buffer, at this position of the parameters, of this element type (when it is one):
    /// never an integer, but `strided` reads a `const` one of integers as a layout.
    Buffer { index: usize, element: Option<DType>, writable: bool },
    /// A parameter whose own declaration is already reported: using it adds no error.
    Broken,
}

/// The names an expression of one entry can use.
pub(super) struct Names<'a> {
    pub params: HashMap<&'a str, Kind>,
    pub defines: &'a HashMap<&'a str, u32>,
}

/// Where an expression is written: the messages and the allowed names differ.
#[derive(Clone, Copy)]
pub(super) enum Place<'a> {
    /// The extent of this buffer (its name as messages show it).
    Extent(&'a str),
    /// A side of a requirement.
    Requirement,
}

/// The value of an expression when it is made of literals and defines only.
enum Fold {
    Known(u64),
    Unknown,
    /// Already reported below: the enclosing expression adds no error of its own.
    Failed,
}

/// Resolves every name of `node` and fold-checks its constant parts, adding a problem for each
/// name that is not an integer of the entry and each constant operation that fails at every
/// launch. `None` when anything was reported.
pub(super) fn resolve(
    text: &str,
    node: &Node<'_>,
    names: &Names<'_>,
    place: Place<'_>,
    problems: &mut Vec<Problem>,
) -> Option<Expr> {
    let before = problems.len();
    let (expr, _) = Resolver { text, names, place, problems }.node(node);
    if problems.len() == before { expr } else { None }
}

struct Resolver<'r, 'a> {
    text: &'r str,
    names: &'r Names<'a>,
    place: Place<'r>,
    problems: &'r mut Vec<Problem>,
}

impl Resolver<'_, '_> {
    /// Each kind of node in a method of its own, so that the frame of `node`, which recurses at
    /// each parenthesis, call and conditional, holds only what every kind needs.
    fn node(&mut self, node: &Node<'_>) -> (Option<Expr>, Fold) {
        let span = node.start..node.end;
        match &node.kind {
            NodeKind::Int(value) => (Some(Expr::Literal(*value)), Fold::Known(*value)),
            NodeKind::Invalid => (None, Fold::Failed),
            NodeKind::Launch(dim) => (Some(Expr::Launch(*dim)), Fold::Unknown),
            NodeKind::Name(name) => self.name(name, span),
            NodeKind::Binary { .. } => self.chain(node),
            NodeKind::Strided { layout, layout_span, rank, part } => {
                self.strided(layout, layout_span, rank, *part)
            }
            NodeKind::Select { condition, taken, other } => self.select(condition, taken, other),
        }
    }

    /// A chain of operators, `((a op b) op c) op ...`, resolved along its left operands in a loop:
    /// a flat sum of hundreds of terms takes one frame, not one per operator.
    fn chain(&mut self, node: &Node<'_>) -> (Option<Expr>, Fold) {
        let mut operators = Vec::new();
        let mut leftmost = node;
        while let NodeKind::Binary { op, op_span, lhs, rhs } = &leftmost.kind {
            operators.push((*op, op_span, &**rhs, leftmost.start..leftmost.end));
            leftmost = lhs;
        }
        let (mut expr, mut fold) = self.node(leftmost);
        for (op, op_span, rhs, span) in operators.into_iter().rev() {
            let (rhs_expr, rhs_fold) = self.node(rhs);
            fold = self.fold(op, op_span.clone(), span, fold, rhs_fold);
            expr = expr.zip(rhs_expr).map(|(lhs, rhs)| Expr::Binary {
                op,
                lhs: Box::new(lhs),
                rhs: Box::new(rhs),
            });
        }
        (expr, fold)
    }

    fn strided(
        &mut self,
        layout: &str,
        layout_span: &Range<usize>,
        rank: &Node<'_>,
        part: u16,
    ) -> (Option<Expr>, Fold) {
        let (rank, rank_fold) = self.node(rank);
        let layout = self.layout(layout, layout_span.clone());
        let failed = layout.is_none() || matches!(rank_fold, Fold::Failed);
        let expr = layout.zip(rank).map(|((layout, index), rank)| Expr::Strided {
            layout,
            index,
            rank: Box::new(rank),
            part,
        });
        (expr, if failed { Fold::Failed } else { Fold::Unknown })
    }

    fn select(
        &mut self,
        condition: &(Node<'_>, CompareOp, Node<'_>),
        taken: &Node<'_>,
        other: &Node<'_>,
    ) -> (Option<Expr>, Fold) {
        let (lhs, op, rhs) = condition;
        let (lhs, lhs_fold) = self.node(lhs);
        let (rhs, rhs_fold) = self.node(rhs);
        let (taken, taken_fold) = self.node(taken);
        let (other, other_fold) = self.node(other);
        let fold = match (lhs_fold, rhs_fold) {
            (Fold::Failed, _) | (_, Fold::Failed) => Fold::Failed,
            (Fold::Known(a), Fold::Known(b)) if op.holds(a, b) => taken_fold,
            (Fold::Known(_), Fold::Known(_)) => other_fold,
            _ if matches!(taken_fold, Fold::Failed) || matches!(other_fold, Fold::Failed) => Fold::Failed,
            _ => Fold::Unknown,
        };
        let condition = lhs.zip(rhs).map(|(lhs, rhs)| Box::new(Comparison { lhs, op: *op, rhs }));
        let expr = condition.zip(taken.zip(other)).map(|(condition, (taken, other))| Expr::Select {
            condition,
            taken: Box::new(taken),
            other: Box::new(other),
        });
        (expr, fold)
    }

    fn name(&mut self, name: &str, span: Range<usize>) -> (Option<Expr>, Fold) {
        let kind = self.names.params.get(name).copied();
        match kind {
            Some(Kind::Integer(index)) => {
                return (Some(Expr::Scalar { name: name.to_owned(), index }), Fold::Unknown);
            }
            Some(Kind::Broken) => return (None, Fold::Failed),
            None => {
                if let Some(value) = self.names.defines.get(name) {
                    let value = u64::from(*value);
                    return (Some(Expr::Define { name: name.to_owned(), value }), Fold::Known(value));
                }
            }
            Some(Kind::Float(_) | Kind::Buffer { .. }) => {}
        }
        let name = shorten(name);
        let message = match (kind, self.place) {
            (Some(Kind::Float(ty)), Place::Extent(buffer)) => {
                format!("{} scalar `{name}` cannot size a buffer (the extent of `{buffer}`)", ty.name())
            }
            (Some(Kind::Float(ty)), Place::Requirement) => format!(
                "{} scalar `{name}` cannot appear in a requirement: requirements compare integers",
                ty.name()
            ),
            (Some(Kind::Buffer { .. }), Place::Extent(buffer)) => format!(
                "buffer `{name}` cannot size a buffer (the extent of `{buffer}`): an extent uses integer \
                 scalars, [defines] constants and launch dimensions, and reads a layout with `strided`"
            ),
            (Some(Kind::Buffer { .. }), Place::Requirement) => format!(
                "buffer `{name}` cannot appear in a requirement: requirements compare integer scalars, \
                 [defines] constants and launch dimensions"
            ),
            (_, Place::Extent(buffer)) => format!(
                "unknown name `{name}` in the extent of `{buffer}`: not a scalar parameter of this \
                 entry, a [defines] constant or a launch dimension (block.x, ..., grid.z, shared.bytes)"
            ),
            (_, Place::Requirement) => format!(
                "unknown name `{name}` in a requirement: not a scalar parameter of this entry, \
                 a [defines] constant or a launch dimension (block.x, ..., grid.z, shared.bytes)"
            ),
        };
        self.problems.push(Problem::new(span, message));
        (None, Fold::Failed)
    }

    /// The layout `strided` reads: a `const` buffer of integers of the entry, by name and position.
    fn layout(&mut self, name: &str, span: Range<usize>) -> Option<(String, usize)> {
        let message = match self.names.params.get(name) {
            Some(Kind::Buffer { index, element: Some(element), writable: false }) if element.is_integer() => {
                return Some((name.to_owned(), *index));
            }
            Some(Kind::Broken) | Some(Kind::Buffer { element: None, .. }) => return None,
            Some(Kind::Buffer { writable: true, .. }) => format!(
                "the layout `{}` of `strided` is written by the kernel: a layout is `const`, so the launch \
                 check can read it before the launch",
                shorten(name)
            ),
            Some(Kind::Buffer { element: Some(element), .. }) => format!(
                "the layout `{}` of `strided` holds {element}: a layout holds integers (dims, then strides)",
                shorten(name)
            ),
            Some(Kind::Integer(_) | Kind::Float(_)) | None => {
                format!("`strided` reads a layout buffer of this entry; `{}` is not one", shorten(name))
            }
        };
        self.problems.push(Problem::new(span, message));
        None
    }

    /// Folds `lhs op rhs` when both are constant; a zero divisor fails whatever `lhs` is.
    fn fold(
        &mut self,
        op: BinaryOp,
        op_span: Range<usize>,
        span: Range<usize>,
        lhs: Fold,
        rhs: Fold,
    ) -> Fold {
        let (a, b) = match (lhs, rhs) {
            (_, Fold::Known(0)) if matches!(op, BinaryOp::Rem | BinaryOp::Cdiv | BinaryOp::Div) => {
                let message = format!("`{}` divides by zero", self.snippet(span));
                self.problems.push(Problem::new(op_span, message));
                return Fold::Failed;
            }
            (Fold::Known(a), Fold::Known(b)) => (a, b),
            (Fold::Failed, _) | (_, Fold::Failed) => return Fold::Failed,
            _ => return Fold::Unknown,
        };
        let (value, symbol, failure) = match op {
            BinaryOp::Add => (a.checked_add(b), "+", "overflows u64"),
            BinaryOp::Sub => (a.checked_sub(b), "-", "is below zero (expressions are unsigned)"),
            BinaryOp::Mul => (a.checked_mul(b), "*", "overflows u64"),
            // `b` is not zero: the first arm above took that case.
            BinaryOp::Rem => return Fold::Known(a % b),
            BinaryOp::Cdiv => return Fold::Known(a.div_ceil(b)),
            BinaryOp::Div => return Fold::Known(a / b),
            BinaryOp::Min => return Fold::Known(a.min(b)),
            BinaryOp::Max => return Fold::Known(a.max(b)),
        };
        if let Some(value) = value {
            return Fold::Known(value);
        }
        let written = self.snippet(span);
        let values = format!("{a} {symbol} {b}");
        // Name the values only when defines hide them.
        let values = if strip(&written) == strip(&values) { String::new() } else { format!(" ({values})") };
        self.problems.push(Problem::new(op_span, format!("`{written}`{values} {failure}")));
        Fold::Failed
    }

    fn snippet(&self, span: Range<usize>) -> String {
        shorten(self.text.get(span).unwrap_or_default())
    }
}

fn strip(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

/// The third argument of `strided`: which run of `rank` strides follows the dims, 1 for the first
/// (a binary op's layout holds the dims, then the left input's strides, then the right's: 2).
fn strides_part(cursor: &mut Cursor<'_, '_>) -> Result<u16, Problem> {
    let token = cursor.peek();
    let part = match token.tok {
        Tok::Number(text) => text.parse::<u16>().ok().filter(|part| *part >= 1),
        _ => None,
    };
    let part = part.ok_or_else(|| {
        Problem::expected(
            "the strides' part of the layout, an integer from 1 (the strides after the dims), as in `strided(info, rank, 2)`",
            token,
        )
    })?;
    cursor.bump();
    Ok(part)
}

#[cfg(test)]
mod tests {
    use kda_types::Op;

    use super::{MAX_CHAIN, MAX_NESTING, MAX_STACK};
    use crate::Manifest;
    use crate::manifest::ParamType;

    /// The values the launch check's evaluator holds (`STACK_DEPTH` in `kda_runtime::signature`).
    const EVALUATOR_STACK: usize = 128;

    /// A one-entry manifest whose extent of `a` starts at line 2, column 58 (byte `i` of `extent`
    /// is column `58 + i`), with `requires`.
    fn manifest(extent: &str, requires: &[&str]) -> Result<Manifest, Vec<String>> {
        let requires: Vec<String> = requires.iter().map(|text| format!("\"{text}\"")).collect();
        let text = format!(
            "[t]\ng = {{ module = \"m\", entry = \"e\", params = \"u32 n, bf16 a[{extent}]\", requires = [{}] }}\n",
            requires.join(", ")
        );
        Manifest::parse("k.toml", &text)
            .map_err(|error| error.diagnostics.iter().map(|d| d.render(&error.file)).collect())
    }

    /// The most values `program` holds at once, evaluated as the launch check does.
    fn stack_of(program: &[Op]) -> usize {
        let (mut held, mut most) = (0usize, 0);
        for op in program {
            held = match op {
                Op::Literal(_) | Op::Scalar(_) | Op::Launch(_) => held + 1,
                Op::Strided(..) => held,
                Op::Select => held.saturating_sub(2),
                _ => held.saturating_sub(1),
            };
            most = most.max(held);
        }
        most
    }

    /// The stacks of the programs of the extent of `a` and of each requirement.
    fn stacks(manifest: &Manifest) -> (usize, Vec<usize>) {
        let entry = &manifest.tables[0].entries[0];
        let extent = entry.params.iter().flatten().find_map(|param| match &param.ty {
            ParamType::Buffer { extent, .. } => Some(stack_of(&extent.program())),
            ParamType::Scalar(_) => None,
        });
        let requires = entry.requires.iter().map(|requirement| stack_of(&requirement.program())).collect();
        (extent.unwrap_or_default(), requires)
    }

    /// `n < 1 ? n : n < 1 ? n : ... n`, `levels` conditionals, each the other's `:` side.
    fn conditionals(levels: usize) -> String {
        format!("{}n", "n < 1 ? n : ".repeat(levels))
    }

    #[test]
    fn a_flat_sum_of_200_terms_holds_two_values_and_is_accepted() {
        let sum = vec!["n"; 200].join(" + ");
        let manifest =
            manifest(&sum, &[&format!("{sum} >= 1")]).unwrap_or_else(|errors| panic!("{errors:?}"));
        assert_eq!(stacks(&manifest), (2, vec![2]));
    }

    #[test]
    fn nesting_is_refused_at_the_parenthesis_past_the_limit() {
        let deep = format!("{}n{}", "(".repeat(200), ")".repeat(200));
        assert_eq!(
            manifest(&deep, &[]).unwrap_err(),
            [format!(
                "k.toml:2:{}: entry `g`: expression nested too deeply: at most {MAX_NESTING} levels of parentheses, \
                 function calls and conditionals",
                58 + MAX_NESTING
            )]
        );
        let nested_sum = format!("{}n{}", "n + (".repeat(200), ")".repeat(200));
        let refused = manifest(&nested_sum, &[]).unwrap_err();
        assert!(refused[0].contains("nested too deeply: at most 64 levels"), "{refused:?}");
    }

    #[test]
    fn a_chain_past_the_limit_is_refused_at_its_first_operator_past_it() {
        let accepted = vec!["n"; MAX_CHAIN as usize + 1].join(" + ");
        assert!(manifest(&accepted, &[]).is_ok());
        let refused = format!("{accepted} + n");
        // The chain's operators are at bytes 2, 6, 10, ...
        assert_eq!(
            manifest(&refused, &[]).unwrap_err(),
            [format!(
                "k.toml:2:{}: entry `g`: expression too long: more than {MAX_CHAIN} operators in a row (`a + b + c` \
                 has two)",
                58 + 2 + 4 * MAX_CHAIN
            )]
        );
    }

    #[test]
    fn the_deepest_expressions_accepted_fit_the_launch_checks_stack() {
        // Each conditional holds two values while its `:` side is evaluated: 2 × 62 + 1.
        let deepest = conditionals(62);
        let manifest_62 = manifest(&deepest, &[]).unwrap_or_else(|errors| panic!("{errors:?}"));
        assert_eq!(stacks(&manifest_62).0, MAX_STACK as usize - 1);
        let refused = manifest(&conditionals(63), &[]).unwrap_err();
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(
            refused[0].starts_with(&format!(
                "k.toml:2:60: entry `g`: expression nested too deeply: evaluating it would hold more than {MAX_STACK} values"
            )),
            "{refused:?}"
        );
        // A requirement's right side holding MAX_STACK values, after an alternative and its own
        // left side: the evaluator's whole stack.
        let widest = format!("n == n + ({deepest})");
        let manifest =
            manifest("n", &[&format!("{widest} || {widest}")]).unwrap_or_else(|errors| panic!("{errors:?}"));
        assert_eq!(stacks(&manifest).1, [EVALUATOR_STACK]);
    }

    #[test]
    fn the_longest_chain_accepted_is_walked_within_half_a_test_threads_stack() {
        let walked = std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(|| {
                let sum = vec!["n"; MAX_CHAIN as usize + 1].join(" + ");
                let manifest =
                    manifest(&sum, &[&format!("{sum} >= 1")]).unwrap_or_else(|errors| panic!("{errors:?}"));
                let copy = manifest.clone();
                assert_eq!(copy, manifest);
                assert!(format!("{manifest:?}").len() > sum.len());
                stacks(&manifest)
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(walked, (2, vec![2]));
    }
}
