//! Lexing as C does: comments, string, raw-string and character literals, `\` line
//! continuations (inside tokens too) and pp-numbers, into tokens that remember their line and
//! the macro whose expansion made them.

use std::rc::Rc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Ident,
    Number,
    /// A string or character literal, its prefix and quotes included.
    Literal,
    Punct,
    /// What `##` leaves of an empty argument, gone once pasting is done.
    Placemarker,
}

#[derive(Clone, Debug)]
pub(super) struct Token {
    pub(super) kind: Kind,
    pub(super) text: Rc<str>,
    /// The line it is on, or of the macro invocation it came from.
    pub(super) line: u32,
    /// Whether whitespace or a comment is before it: `#define F(x)` is function-like, `#define
    /// F (x)` is not.
    pub(super) space_before: bool,
    /// Whether it is the first token of its line: a `#` there starts a directive.
    pub(super) line_start: bool,
    /// The macro whose invocation in the source produced it.
    pub(super) origin: Option<Rc<str>>,
    /// Whether it is a `##` of a macro body, which pastes (a `##` in an argument does not).
    pub(super) paste: bool,
}

impl Token {
    pub(super) fn is(&self, text: &str) -> bool {
        self.kind != Kind::Literal && &*self.text == text
    }

    pub(super) fn ident(&self) -> Option<&str> {
        (self.kind == Kind::Ident).then_some(&*self.text)
    }
}

/// The bytes of a source, read with `\`-newline continuations removed wherever they fall.
pub(super) struct Cursor<'a> {
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
        let byte = *self.bytes.get(self.at)?;
        if byte != b'\\' {
            return Some(byte);
        }
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
        loop {
            // The bytes up to a `\` are taken in one run.
            let rest = self.bytes.get(self.at..).unwrap_or_default();
            let run = rest.iter().position(|&byte| byte == b'\\' || !keep(byte)).unwrap_or(rest.len());
            text.extend_from_slice(&rest[..run]);
            self.at += run;
            match self.peek() {
                Some(byte) if keep(byte) => {
                    text.push(byte);
                    self.at += 1;
                }
                _ => return,
            }
        }
    }
}

pub(super) fn is_ident_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'$' || byte >= 0x80
}

/// The punctuators of more than one character that the scan tells apart (`<` and `>` stay single,
/// so that nested template arguments close one at a time).
pub(super) const LONG_PUNCTS: &[&[u8]] =
    &[b"...", b"##", b"::", b"->", b"&&", b"||", b"==", b"!=", b"++", b"--"];

pub(super) fn lex(bytes: &[u8]) -> Vec<Token> {
    let mut cursor = Cursor { bytes, at: 0, line: 1 };
    let mut tokens = Vec::new();
    // Each one-byte spelling (most punctuators) is held once, however many tokens have it: a
    // source of `;` or NUL bytes over and over costs a token's size per byte, not an allocation
    // as well. (Holding every spelling once, in a hash set, costs more time than it saves.)
    let mut single_bytes: Vec<Option<Rc<str>>> = vec![None; 256];
    let mut text = Vec::new();
    let (mut space_before, mut line_start) = (false, true);
    while let Some(byte) = cursor.peek() {
        // Only a `/` needs the byte after it (asked of every byte, it slows the lexer by half).
        let comment =
            if byte == b'/' { cursor.peek_second().filter(|second| b"/*".contains(second)) } else { None };
        match (byte, comment) {
            (b'\n', _) => {
                cursor.bump();
                (space_before, line_start) = (true, true);
            }
            (b' ' | b'\t' | b'\r' | 0x0b | 0x0c, _) => {
                cursor.bump();
                space_before = true;
            }
            (_, Some(b'/')) => {
                while cursor.peek().is_some_and(|byte| byte != b'\n') {
                    cursor.bump();
                }
                space_before = true;
            }
            (_, Some(_)) => {
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
                text.clear();
                let kind = lex_token(&mut cursor, &mut text);
                let text: Rc<str> = match text.as_slice() {
                    [byte] => single_bytes[usize::from(*byte)]
                        .get_or_insert_with(|| String::from_utf8_lossy(&text).into())
                        .clone(),
                    _ => String::from_utf8_lossy(&text).into(),
                };
                tokens.push(Token { kind, text, line, space_before, line_start, origin: None, paste: false });
                (space_before, line_start) = (false, false);
            }
        }
    }
    tokens
}

/// The token at the cursor, which is not whitespace.
/// Its spelling is appended to `text`.
fn lex_token(cursor: &mut Cursor<'_>, text: &mut Vec<u8>) -> Kind {
    let Some(first) = cursor.peek() else { return Kind::Punct };
    if is_ident_byte(first) && !first.is_ascii_digit() {
        cursor.take_while(text, is_ident_byte);
        return match (text.as_slice(), cursor.peek()) {
            (b"R" | b"u8R" | b"uR" | b"UR" | b"LR", Some(b'"')) => {
                raw_string(cursor, text);
                Kind::Literal
            }
            (b"u8" | b"u" | b"U" | b"L", Some(quote @ (b'"' | b'\''))) => {
                quoted(cursor, text, quote);
                Kind::Literal
            }
            _ => Kind::Ident,
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
        return Kind::Number;
    }
    if matches!(first, b'"' | b'\'') {
        quoted(cursor, text, first);
        return Kind::Literal;
    }
    for punct in LONG_PUNCTS.iter().filter(|punct| punct[0] == first) {
        let (at, line) = (cursor.at, cursor.line);
        if punct.iter().all(|&byte| cursor.bump() == Some(byte)) {
            text.extend_from_slice(punct);
            return Kind::Punct;
        }
        (cursor.at, cursor.line) = (at, line);
    }
    cursor.bump();
    text.push(first);
    Kind::Punct
}

/// A string or character literal from its opening `quote` to its closing one, or to the end of
/// the line where it is not closed.
pub(super) fn quoted(cursor: &mut Cursor<'_>, text: &mut Vec<u8>, quote: u8) {
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
pub(super) fn raw_string(cursor: &mut Cursor<'_>, text: &mut Vec<u8>) {
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
