//! The tokens of a `params` or `requires` string, each with its byte range in the string.

use std::ops::Range;

/// What a token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tok<'s> {
    /// A run of letters, digits and `_` not starting with a digit. Letters are Unicode so that
    /// `état` is one token, reported as "not a C identifier" rather than as a stray `é`.
    Ident(&'s str),
    /// A run of letters, digits and `_` starting with a digit; the parser checks it is a decimal
    /// `u64`, so that `0x10` or `16u` is one error, not a literal followed by a name.
    Number(&'s str),
    /// An operator or a delimiter, as written.
    Punct(&'static str),
    /// A character no rule takes.
    Other(char),
    /// The end of the string.
    End,
}

/// One token and the bytes of the string it covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Token<'s> {
    pub tok: Tok<'s>,
    pub start: usize,
    pub end: usize,
}

impl Token<'_> {
    pub fn span(&self) -> Range<usize> {
        self.start..self.end
    }

    pub fn is(&self, punct: &str) -> bool {
        matches!(self.tok, Tok::Punct(p) if p == punct)
    }

    /// The token as a message names it.
    pub fn describe(&self) -> String {
        match self.tok {
            Tok::Ident(text) | Tok::Number(text) => format!("`{}`", shorten(text)),
            Tok::Punct(punct) => format!("`{punct}`"),
            Tok::Other(c) if c.is_control() || c.is_whitespace() => format!("the character {c:?}"),
            Tok::Other(c) => format!("`{c}`"),
            Tok::End => "the end of the string".to_owned(),
        }
    }
}

/// Longest first, so that `<=` is not read as `<` then `=`.
const PUNCTS: [&str; 23] = [
    "==", "!=", "<=", ">=", "||", "[", "]", "(", ")", ",", ".", "+", "-", "*", "/", "%", "?", ":", "<", ">",
    "=", "!", "|",
];

/// The tokens of `text`, always ending with [`Tok::End`] at `text.len()`.
pub(super) fn tokenize(text: &str) -> Vec<Token<'_>> {
    let mut tokens = Vec::new();
    let mut rest = text.char_indices().peekable();
    while let Some(&(start, c)) = rest.peek() {
        if c.is_whitespace() {
            rest.next();
            continue;
        }
        let word = |c: char| c == '_' || c.is_alphanumeric();
        let (tok, end) = if word(c) {
            let end = text[start..].find(|c: char| !word(c)).map_or(text.len(), |len| start + len);
            let run = &text[start..end];
            (if c.is_ascii_digit() { Tok::Number(run) } else { Tok::Ident(run) }, end)
        } else if let Some(punct) = PUNCTS.iter().find(|punct| text[start..].starts_with(**punct)) {
            (Tok::Punct(punct), start + punct.len())
        } else {
            (Tok::Other(c), start + c.len_utf8())
        };
        tokens.push(Token { tok, start, end });
        while rest.peek().is_some_and(|&(at, _)| at < end) {
            rest.next();
        }
    }
    tokens.push(Token { tok: Tok::End, start: text.len(), end: text.len() });
    tokens
}

/// `text` cut to a length a message can carry (a 100,000-digit literal is still one error).
pub(super) fn shorten(text: &str) -> String {
    const MAX_CHARS: usize = 40;
    match text.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_carry_their_byte_ranges() {
        let tokens = tokenize("const bf16 a[m*k] <= 0x1 é$");
        let toks: Vec<(Tok<'_>, usize, usize)> = tokens.iter().map(|t| (t.tok, t.start, t.end)).collect();
        assert_eq!(
            toks,
            [
                (Tok::Ident("const"), 0, 5),
                (Tok::Ident("bf16"), 6, 10),
                (Tok::Ident("a"), 11, 12),
                (Tok::Punct("["), 12, 13),
                (Tok::Ident("m"), 13, 14),
                (Tok::Punct("*"), 14, 15),
                (Tok::Ident("k"), 15, 16),
                (Tok::Punct("]"), 16, 17),
                (Tok::Punct("<="), 18, 20),
                (Tok::Number("0x1"), 21, 24),
                (Tok::Ident("é"), 25, 27),
                (Tok::Other('$'), 27, 28),
                (Tok::End, 28, 28),
            ]
        );
    }

    #[test]
    fn long_tokens_are_shortened_in_messages() {
        assert_eq!(shorten("abc"), "abc");
        assert_eq!(shorten(&"9".repeat(100)), format!("{}…", "9".repeat(40)));
    }
}
