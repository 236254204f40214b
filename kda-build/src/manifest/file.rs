//! Reading a manifest from disk, the one way every front end does it: at most
//! [`MAX_MANIFEST_BYTES`], and UTF-8, with the first byte that is not located like the
//! manifest's other errors.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use super::{Diagnostic, LineIndex, ManifestError};

/// The most bytes a manifest may have. Real manifests are a few kilobytes; the cap is what
/// stops the reading of `/dev/zero`, a pipe that never ends or a file of gigabytes.
pub const MAX_MANIFEST_BYTES: u64 = 16 * 1024 * 1024;

/// Why a manifest file could not be read as text.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be opened or read.
    #[error("cannot read the kernel manifest `{file}`: {error}")]
    Io {
        /// The manifest, as the user named it.
        file: String,
        /// Why (not a `source`: the message already says it, once).
        error: io::Error,
    },
    /// The file has more than `cap` bytes.
    #[error(
        "cannot read the kernel manifest `{file}`: it has more than {cap} bytes ({} MiB), \
         the most a manifest may have",
        cap >> 20
    )]
    TooLarge {
        /// The manifest, as the user named it.
        file: String,
        /// [`MAX_MANIFEST_BYTES`].
        cap: u64,
    },
    /// The file is not UTF-8: one diagnostic, at the first byte that is not.
    #[error(transparent)]
    NotUtf8(ManifestError),
}

/// The text of the manifest at `path`; `file` is the name messages show, as in
/// [`Manifest::parse`](super::Manifest::parse).
pub fn read_manifest(path: &Path, file: &str) -> Result<String, ReadError> {
    let io_error = |error| ReadError::Io { file: file.to_owned(), error };
    let bytes = read_capped(path, MAX_MANIFEST_BYTES).map_err(io_error)?;
    let bytes =
        bytes.ok_or_else(|| ReadError::TooLarge { file: file.to_owned(), cap: MAX_MANIFEST_BYTES })?;
    decode(file, bytes).map_err(ReadError::NotUtf8)
}

/// The bytes of `path`, or `None` if it has more than `cap`.
fn read_capped(path: &Path, cap: u64) -> io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    // One byte past the cap tells a file of exactly `cap` bytes from a longer one, without
    // reading the rest of the longer one (of `/dev/zero`, forever).
    File::open(path)?.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= cap).then_some(bytes))
}

/// `bytes` as text, or the error locating its first byte that is not UTF-8 at `FILE:LINE:COL`.
fn decode(file: &str, bytes: Vec<u8>) -> Result<String, ManifestError> {
    String::from_utf8(bytes).map_err(|error| {
        let bytes = error.as_bytes();
        let utf8 = error.utf8_error();
        let start = utf8.valid_up_to();
        // `None`: the file ends inside a character, so the rest of it is the bad sequence.
        let end = utf8.error_len().map_or(bytes.len(), |len| start + len);
        // The text before the bad byte is valid (`valid_up_to` says so) and locates it: the
        // byte's line and column are where that text ends.
        let valid = std::str::from_utf8(&bytes[..start]).unwrap_or_default();
        let location = LineIndex::new(valid).location(start);
        let message = not_utf8_message(&bytes[start..end], utf8.error_len().is_none());
        ManifestError::new(file, vec![Diagnostic { span: start..end, location, message }])
    })
}

/// What is wrong with `sequence`, the first bytes that are not UTF-8 (at the end of the file
/// when `truncated`).
fn not_utf8_message(sequence: &[u8], truncated: bool) -> String {
    let mut hex = String::new();
    for (i, byte) in sequence.iter().enumerate() {
        let _ = write!(hex, "{}0x{byte:02X}", if i > 0 { " " } else { "" });
    }
    let bytes = if sequence.len() == 1 { "byte" } else { "bytes" };
    if truncated {
        format!("the manifest is not UTF-8: it ends inside a character ({bytes} {hex})")
    } else {
        format!("the manifest is not UTF-8: {bytes} {hex} cannot be read as a character")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `check` of a scratch file of `bytes`, removed afterwards.
    fn with_file<T>(name: &str, bytes: &[u8], check: impl FnOnce(&Path) -> T) -> T {
        let path = std::env::temp_dir().join(format!("kda-manifest-{}-{name}", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        let result = check(&path);
        let _ = std::fs::remove_file(&path);
        result
    }

    #[test]
    fn a_file_of_exactly_the_cap_is_read_and_one_byte_more_is_not() {
        let (exact, over) = with_file("cap.toml", &[b'#'; 10], |path| {
            (read_capped(path, 10).unwrap().map(|bytes| bytes.len()), read_capped(path, 9).unwrap())
        });
        assert_eq!((exact, over), (Some(10), None));
    }

    #[cfg(unix)]
    #[test]
    fn an_endless_file_stops_at_the_cap_with_an_error_naming_it() {
        let error = read_manifest(Path::new("/dev/zero"), "/dev/zero").unwrap_err();
        assert!(matches!(error, ReadError::TooLarge { cap: MAX_MANIFEST_BYTES, .. }), "{error:?}");
        assert_eq!(
            error.to_string(),
            "cannot read the kernel manifest `/dev/zero`: it has more than 16777216 bytes (16 MiB), \
             the most a manifest may have"
        );
    }

    #[test]
    fn a_missing_file_is_an_io_error_naming_it() {
        let error = read_manifest(Path::new("/nonexistent/kda/kernels.toml"), "kernels.toml").unwrap_err();
        assert!(error.to_string().starts_with("cannot read the kernel manifest `kernels.toml`: "), "{error}");
    }

    #[test]
    fn the_first_byte_that_is_not_utf8_is_located_by_line_and_character() {
        // Line 3 is `# éab` before it: five characters (`é` two bytes, one column), so column 6.
        let bytes = b"[t]\n# ok\n# \xC3\xA9ab\xFF\xFE = 1\n\xFF";
        let ReadError::NotUtf8(error) =
            with_file("bad.toml", bytes, |path| read_manifest(path, "k.toml")).unwrap_err()
        else {
            panic!("not a UTF-8 error")
        };
        assert_eq!(error.diagnostics.len(), 1);
        assert_eq!(error.diagnostics[0].span, 15..16);
        assert_eq!(
            error.to_string(),
            "k.toml:3:6: the manifest is not UTF-8: byte 0xFF cannot be read as a character"
        );
    }

    #[test]
    fn a_file_ending_inside_a_character_is_located_there() {
        let error = decode("k.toml", b"a = 1\n\xE2\x82".to_vec()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "k.toml:2:1: the manifest is not UTF-8: it ends inside a character (bytes 0xE2 0x82)"
        );
        assert_eq!(decode("k.toml", b"[t]\n".to_vec()).unwrap(), "[t]\n");
    }
}
