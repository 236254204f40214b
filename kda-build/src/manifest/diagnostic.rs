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
    /// The characters before byte `i * CHUNK`, so that a column costs at most `CHUNK` bytes of
    /// counting, not the length of its line: a one-line manifest can carry 100,000 errors.
    chars_before_chunk: Vec<usize>,
}

/// The bytes between two entries of [`LineIndex::chars_before_chunk`].
const CHUNK: usize = 256;

impl<'a> LineIndex<'a> {
    /// Indexes the lines of `text`.
    pub fn new(text: &'a str) -> Self {
        let line_starts = std::iter::once(0).chain(text.match_indices('\n').map(|(at, _)| at + 1)).collect();
        let chars_before_chunk = std::iter::once(0)
            .chain(text.as_bytes().chunks(CHUNK).scan(0, |chars, chunk| {
                *chars += chars_in(chunk);
                Some(*chars)
            }))
            .collect();
        Self { text, line_starts, chars_before_chunk }
    }

    /// The characters before byte `offset`, a character boundary.
    fn chars_before(&self, offset: usize) -> usize {
        let chunk = offset / CHUNK;
        self.chars_before_chunk[chunk] + chars_in(&self.text.as_bytes()[chunk * CHUNK..offset])
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
        let column = self.chars_before(offset) - self.chars_before(line_start) + 1;
        Location { line: line as u32, column: column as u32 }
    }
}

/// The characters that start in `bytes` (every byte but UTF-8 continuation bytes).
fn chars_in(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&byte| byte & 0xC0 != 0x80).count()
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

    #[test]
    fn columns_are_counted_across_chunks() {
        // Lines and multi-byte characters that straddle the index's chunks.
        let text: String = (0..3 * CHUNK)
            .map(|i| {
                if i % 7 == 0 {
                    '\n'
                } else if i % 3 == 0 {
                    'é'
                } else {
                    'a'
                }
            })
            .collect();
        let index = LineIndex::new(&text);
        for offset in (0..=text.len()).filter(|&offset| text.is_char_boundary(offset)) {
            let line_start = text[..offset].rfind('\n').map_or(0, |at| at + 1);
            let expected = Location {
                line: text[..offset].matches('\n').count() as u32 + 1,
                column: text[line_start..offset].chars().count() as u32 + 1,
            };
            assert_eq!(index.location(offset), expected, "offset {offset}");
        }
    }
}
