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
    /// Whether every character is one byte, so that a column is a difference of offsets (the
    /// derive locates every entry and parameter of a manifest, which is nearly always ASCII).
    ascii: bool,
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
        Self { text, line_starts, chars_before_chunk, ascii: text.is_ascii() }
    }

    /// The characters before byte `offset`, a character boundary.
    fn chars_before(&self, offset: usize) -> usize {
        if self.ascii {
            return offset;
        }
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

/// The most problems a [`ManifestError`] keeps and shows one by one; the rest are counted in one
/// summary line. One mistake repeated (20,000 duplicate parameters) would otherwise print
/// megabytes, burying the first problems, which are the ones to fix first.
pub const MAX_REPORTED_ERRORS: usize = 20;

/// The problems of a manifest, in file order: the first [`MAX_REPORTED_ERRORS`], and how many
/// more there are.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ManifestError {
    /// The manifest file, as the user named it.
    pub file: String,
    /// The first problems, in file order; never empty, at most [`MAX_REPORTED_ERRORS`].
    pub diagnostics: Vec<Diagnostic>,
    /// The problems after those, counted but not kept.
    pub omitted: usize,
}

impl ManifestError {
    /// The error of `file` with the problems `diagnostics`, in any order: sorted into file
    /// order (stably: problems at one offset keep the order they were found in), then capped at
    /// [`MAX_REPORTED_ERRORS`].
    pub fn new(file: &str, mut diagnostics: Vec<Diagnostic>) -> Self {
        diagnostics.sort_by_key(|diagnostic| diagnostic.span.start);
        let omitted = diagnostics.len().saturating_sub(MAX_REPORTED_ERRORS);
        diagnostics.truncate(MAX_REPORTED_ERRORS);
        ManifestError { file: file.to_owned(), diagnostics, omitted }
    }

    /// What every front end shows, one line each: `FILE:LINE:COL: message` per kept problem,
    /// then `... and N more errors` when some were omitted.
    pub fn lines(&self) -> impl Iterator<Item = String> + '_ {
        let kept = self.diagnostics.iter().map(|diagnostic| diagnostic.render(&self.file));
        kept.chain(self.summary())
    }

    /// The line counting the omitted problems, if any.
    pub fn summary(&self) -> Option<String> {
        match self.omitted {
            0 => None,
            1 => Some("... and 1 more error".to_owned()),
            n => Some(format!("... and {n} more errors")),
        }
    }
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, line) in self.lines().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            f.write_str(&line)?;
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

    /// An error of `count` problems, one per line, found in reverse file order.
    fn error_of(count: usize) -> ManifestError {
        let text = "x\n".repeat(count);
        let index = LineIndex::new(&text);
        let diagnostics =
            (0..count).rev().map(|i| Diagnostic::new(&index, 2 * i..2 * i + 1, "bad")).collect();
        ManifestError::new("k.toml", diagnostics)
    }

    #[test]
    fn errors_past_the_cap_are_counted_in_one_summary_line() {
        let error = error_of(MAX_REPORTED_ERRORS + 7);
        assert_eq!((error.diagnostics.len(), error.omitted), (MAX_REPORTED_ERRORS, 7));
        let lines: Vec<String> = error.lines().collect();
        assert_eq!(lines.len(), MAX_REPORTED_ERRORS + 1);
        // The first problems in file order are the ones kept.
        assert_eq!(lines[0], "k.toml:1:1: bad");
        assert_eq!(lines[MAX_REPORTED_ERRORS - 1], format!("k.toml:{MAX_REPORTED_ERRORS}:1: bad"));
        assert_eq!(lines[MAX_REPORTED_ERRORS], "... and 7 more errors");
        assert_eq!(error.to_string(), lines.join("\n"));
        assert_eq!(error_of(MAX_REPORTED_ERRORS + 1).summary().as_deref(), Some("... and 1 more error"));
    }

    #[test]
    fn errors_up_to_the_cap_are_all_shown_without_a_summary() {
        let error = error_of(MAX_REPORTED_ERRORS);
        assert_eq!((error.diagnostics.len(), error.omitted), (MAX_REPORTED_ERRORS, 0));
        assert_eq!(error.lines().count(), MAX_REPORTED_ERRORS);
        assert!(!error.to_string().contains("more error"));
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
