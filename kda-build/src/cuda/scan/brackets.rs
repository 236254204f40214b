//! Where the brackets of a token list close, each found in one pass over the list. A scan that
//! matched a bracket by walking forward from every `__global__` or macro name would walk to the
//! end of the source from each one left open: quadratic in the source's length.

use super::lex::{Kind, Token};

/// For each token that opens a bracket, the index of the token that closes it.
pub(super) struct Closes(Vec<u32>);

/// What [`Closes`] holds for a token that opens nothing, or a bracket that is not closed (and for
/// an index past `u32::MAX`, which no source under the scan's byte caps reaches).
const UNCLOSED: u32 = u32::MAX;

/// An open bracket of [`Closes::angles`].
enum Open {
    Paren,
    /// A `<`, at this index.
    Angle(usize),
}

impl Closes {
    /// Each `(`'s `)`, counting parentheses only.
    pub(super) fn parens(tokens: &[Token]) -> Closes {
        let mut closes = vec![UNCLOSED; tokens.len()];
        let mut open = Vec::new();
        for (at, token) in tokens.iter().enumerate().filter(|(_, token)| token.kind == Kind::Punct) {
            match &*token.text {
                "(" => open.push(at),
                ")" => {
                    if let Some(opened) = open.pop() {
                        closes[opened] = index(at);
                    }
                }
                _ => {}
            }
        }
        Closes(closes)
    }

    /// Each `<`'s `>`, as a template argument list closes: what parentheses hold is skipped, and a
    /// `;`, `{`, `}` or a `)` that closes a parenthesis opened before the `<` leaves it unclosed.
    pub(super) fn angles(tokens: &[Token]) -> Closes {
        let mut closes = vec![UNCLOSED; tokens.len()];
        let mut open = Vec::new();
        // The `<`s opened since the innermost open parenthesis end unclosed here.
        let abandon = |open: &mut Vec<Open>| {
            while matches!(open.last(), Some(Open::Angle(_))) {
                open.pop();
            }
        };
        for (at, token) in tokens.iter().enumerate().filter(|(_, token)| token.kind == Kind::Punct) {
            match &*token.text {
                "(" => open.push(Open::Paren),
                "<" => open.push(Open::Angle(at)),
                ">" => {
                    if let Some(&Open::Angle(opened)) = open.last() {
                        closes[opened] = index(at);
                        open.pop();
                    }
                }
                ")" => {
                    abandon(&mut open);
                    open.pop();
                }
                ";" | "{" | "}" => abandon(&mut open),
                _ => {}
            }
        }
        Closes(closes)
    }

    /// The index of the token that closes the bracket at `open`, where it is closed.
    pub(super) fn get(&self, open: usize) -> Option<usize> {
        let close = *self.0.get(open)?;
        usize::try_from(close).ok().filter(|_| close != UNCLOSED)
    }
}

fn index(at: usize) -> u32 {
    u32::try_from(at).unwrap_or(UNCLOSED)
}
