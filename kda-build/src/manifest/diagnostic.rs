//! Errors located in the manifest: byte spans, turned into `LINE:COL` the way editors count.

use std::fmt;
use std::ops::Range;

/// A 1-based line and column (in characters) in the manifest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Location {
    /// 1-based line.
    pub line: u32,
    /// 1-based column, in characters.
    pub column: u32,
}

impl Location {
    /// The location of byte `offset` of `text` (clamped to the text). For many offsets of one
    /// text, build a [`LineIndex`] once.
    pub fn of_offset(text: &str, offset: usize) -> Location {
        LineIndex::new(text).location(offset)
    }
}

/// A text with the offsets of its line starts, to locate many byte offsets in it cheaply.
#[derive(Clone, Debug)]
pub struct LineIndex<'a> {
    text: &'a str,
    line_starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    /// Indexes the lines of `text`.
    pub fn new(text: &'a str) -> Self {
        let line_starts = std::iter::once(0).chain(text.match_indices('\n').map(|(at, _)| at + 1)).collect();
        Self { text, line_starts }
    }

    /// The indexed text.
    pub fn text(&self) -> &'a str {
        self.text
    }

    /// The location of byte `offset` (clamped to the text; inside a multi-byte character, that
    /// character's column).
    pub fn location(&self, offset: usize) -> Location {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.line_starts.partition_point(|&start| start <= offset);
        let line_start = self.line_starts[line - 1];
        Location { line: line as u32, column: self.text[line_start..offset].chars().count() as u32 + 1 }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// One problem in the manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The byte range it is about.
    pub span: Range<usize>,
    /// Where the range starts.
    pub location: Location,
    /// What is wrong, and what to do.
    pub message: String,
}

impl Diagnostic {
    /// A problem with the bytes `span` of the indexed text.
    pub fn new(text: &LineIndex<'_>, span: Range<usize>, message: impl Into<String>) -> Self {
        Diagnostic { location: text.location(span.start), span, message: message.into() }
    }

    /// `FILE:LINE:COL: message`.
    pub fn render(&self, file: &str) -> String {
        format!("{file}:{}: {}", self.location, self.message)
    }
}

/// Every problem of a manifest, in file order.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ManifestError {
    /// The manifest file, as the user named it.
    pub file: String,
    /// The problems, in file order; never empty.
    pub diagnostics: Vec<Diagnostic>,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, diagnostic) in self.diagnostics.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            f.write_str(&diagnostic.render(&self.file))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_count_lines_and_characters() {
        let text = "a = 1\nbé = 2\n";
        assert_eq!(Location::of_offset(text, 0), Location { line: 1, column: 1 });
        assert_eq!(Location::of_offset(text, 6), Location { line: 2, column: 1 });
        // 'é' is two bytes but one column.
        assert_eq!(Location::of_offset(text, 9), Location { line: 2, column: 3 });
        // Inside a multi-byte character: the character's own column.
        assert_eq!(Location::of_offset(text, 8), Location { line: 2, column: 2 });
        assert_eq!(Location::of_offset(text, 1000), Location { line: 3, column: 1 });
    }
}
