//! Writing the generated code as text, parsed into tokens once.
//!
//! A large table is tens of thousands of items; built token by token (with `quote!`, whose
//! interpolations clone what they splice), most of the expansion is allocating and dropping tokens.
//! The per-entry code is written to a `String` instead and parsed by one `TokenStream::from_str`
//! per part: inside rustc, one call to its lexer. Its tokens have call-site spans, so the generated
//! locals and helpers are named with the reserved prefix [`LOCAL_PREFIX`], which no manifest name
//! may start with; items whose spans diagnostics show (the marker's names, the entry enum, a
//! variant group's trait impls and launchers' bounds) stay the derive's own tokens. What every
//! entry repeats is said once, in the table's macros: the argument structs and launchers
//! (`launcher::macros`), the handles struct, `ENTRIES`, `resolve` and `handle` (`table`); each
//! entry's code is its data, and shared signatures are written once.

use std::fmt::{self, Display, Write};

use proc_macro2::{Delimiter, Group, TokenStream};

pub(super) use crate::manifest::RESERVED_PREFIX as LOCAL_PREFIX;

/// Rust code being written. Writing to a `String` cannot fail, so [`Code::write_fmt`] does not
/// return a `Result` and `write!(code, ...)` needs no `let _ =`.
#[derive(Default)]
pub(super) struct Code(String);

impl Code {
    /// Appends formatted text (what `write!` and `writeln!` call).
    pub fn write_fmt(&mut self, args: fmt::Arguments<'_>) {
        // `String`'s `fmt::Write` never fails.
        let _ = self.0.write_fmt(args);
    }

    /// Appends `text`.
    pub fn push(&mut self, text: &str) {
        self.0.push_str(text);
    }

    /// One `#[doc = "..."]` of `lines`, joined as rustdoc joins one attribute per line.
    pub fn doc<I>(&mut self, lines: I)
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.push("#[doc = ");
        self.doc_literal(lines);
        self.push("]");
    }

    /// The string literal of a doc of `lines`, as [`Code::doc`] writes it.
    pub fn doc_literal<I>(&mut self, lines: I)
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let mut text = String::new();
        for (i, line) in lines.into_iter().enumerate() {
            if i > 0 {
                text.push('\n');
            }
            text.push_str(line.as_ref());
        }
        write!(self, "{}", Str(&text));
    }

    /// The code as text.
    pub fn into_string(self) -> String {
        self.0
    }

    /// The code as tokens; an error naming `what` where it does not lex (a generator bug).
    pub fn parse(self, what: &str) -> Result<TokenStream, String> {
        self.0.parse().map_err(|error| format!("kda generated {what} that does not lex: {error}"))
    }
}

/// A string literal of its text: `Debug` escapes exactly as a Rust literal reads it back.
pub(super) struct Str<'a>(pub &'a str);

impl Display for Str<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Most text (docs, names) needs no escape, and `Debug` escapes character by character.
        let plain = self.0.bytes().all(|byte| matches!(byte, b' ' | b'!' | b'#'..=b'[' | b']'..=b'~'));
        if plain {
            f.write_str("\"")?;
            f.write_str(self.0)?;
            f.write_str("\"")
        } else {
            write!(f, "{:?}", self.0)
        }
    }
}

/// `{ stream }`, as one token: later interpolations clone a group as one token, not its contents.
pub(super) fn braced(stream: TokenStream) -> Group {
    Group::new(Delimiter::Brace, stream)
}

#[cfg(test)]
mod tests {
    use super::Str;

    #[test]
    fn string_literals_read_back_as_their_text() {
        for text in ["", " `const f32[n*k] x`", "a \"quoted\" \\ path", "état\n\u{7f}\t", "~!#[]{}"] {
            assert_eq!(Str(text).to_string(), format!("{text:?}"));
        }
    }
}
