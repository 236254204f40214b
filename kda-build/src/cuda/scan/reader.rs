//! Which files a scan reads, and how many bytes: only regular files, [`MAX_TOTAL_BYTES`] in all
//! the scans one reader makes, and, for a census of a folder it does not trust, only headers
//! inside that folder (and the include folders its user names).

use std::collections::HashMap;
use std::fmt;
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

use super::lex::lex;
use super::preprocess::Preprocessor;
use super::{MAX_SOURCE_BYTES, MAX_TOTAL_BYTES, SourceScan};

/// Reads the sources and headers of scans.
#[derive(Debug)]
pub struct SourceReader {
    /// The canonical folders a header must be inside; `None` where it may be anywhere.
    roots: Option<Vec<PathBuf>>,
    /// The canonical folders searched, in order, for a header that is not beside its includer.
    search: Vec<PathBuf>,
    /// The bytes it may still read.
    budget: u64,
    /// The canonical path of each folder an include was met in: asked of the file system once.
    canonical_dirs: HashMap<PathBuf, PathBuf>,
}

/// Why a file was not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unread {
    /// An absolute path: outside the folders the reader reads.
    Absolute,
    /// A path that leaves the folders the reader reads, through `..` or a symbolic link.
    Outside,
    /// A device, a FIFO, a socket or a folder: not a regular file.
    NotRegular,
    /// The reader has read [`MAX_TOTAL_BYTES`], or what is left of them is less than the file.
    OverBudget,
    /// Reading it failed: the error.
    Failed(String),
}

impl fmt::Display for Unread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unread::Absolute => f.write_str("an absolute path, outside the folder scanned"),
            Unread::Outside => f.write_str("outside the folder scanned (through `..` or a symbolic link)"),
            Unread::NotRegular => f.write_str("not a regular file"),
            Unread::OverBudget => write!(
                f,
                "past the {} MiB read in all, every source and header together",
                MAX_TOTAL_BYTES >> 20
            ),
            Unread::Failed(error) => f.write_str(error),
        }
    }
}

impl SourceReader {
    /// A reader that reads a header wherever an include names it, as a compiler would: for the
    /// sources of a crate's own build.
    pub fn anywhere() -> SourceReader {
        SourceReader {
            roots: None,
            search: Vec::new(),
            budget: MAX_TOTAL_BYTES,
            canonical_dirs: HashMap::new(),
        }
    }

    /// A reader of the sources under `folder` that reads only the headers inside `folder` and
    /// `include_dirs`, and searches `include_dirs` in order for a header not beside its includer.
    /// Fails where a folder cannot be resolved.
    pub fn within(folder: &Path, include_dirs: &[PathBuf]) -> io::Result<SourceReader> {
        let canonical = |dir: &Path| {
            std::fs::canonicalize(dir)
                .map_err(|error| io::Error::new(error.kind(), format!("{}: {error}", dir.display())))
        };
        let search = include_dirs.iter().map(|dir| canonical(dir)).collect::<io::Result<Vec<_>>>()?;
        let roots = std::iter::once(canonical(folder)?).chain(search.iter().cloned()).collect();
        Ok(SourceReader {
            roots: Some(roots),
            search,
            budget: MAX_TOTAL_BYTES,
            canonical_dirs: HashMap::new(),
        })
    }

    /// The reader with `bytes` left to read, for tests of what it does once they are read.
    #[cfg(test)]
    pub(super) fn with_budget(self, bytes: u64) -> SourceReader {
        SourceReader { budget: bytes, ..self }
    }

    /// Scans the source at `path` with the headers it includes with `#include "..."` that this
    /// reader reads. Only reading `path` itself can fail; where the reader reads only inside its
    /// folders, so does a source that is a link to a file outside them.
    pub fn scan_file(&mut self, path: &Path) -> io::Result<SourceScan> {
        let refused = |why: Unread| io::Error::other(why.to_string());
        // A path that does not resolve is for `read` to report.
        let canonical = std::fs::canonicalize(path);
        if let (Some(roots), Ok(canonical)) = (&self.roots, &canonical)
            && !roots.iter().any(|root| canonical.starts_with(root))
        {
            return Err(refused(Unread::Outside));
        }
        let bytes = self.read(path).map_err(refused)?;
        let mut preprocessor = Preprocessor::new(self);
        preprocessor.included.insert(canonical.unwrap_or_else(|_| path.to_owned()));
        let tokens = preprocessor.run(lex(&bytes), Some(path), 0);
        Ok(preprocessor.finish(&tokens))
    }

    /// Scans `source`, which includes no header.
    pub(super) fn scan_bytes(&mut self, source: &[u8]) -> SourceScan {
        let mut preprocessor = Preprocessor::new(self);
        let tokens = preprocessor.run(lex(source), None, 0);
        preprocessor.finish(&tokens)
    }

    /// The file that `#include "written"` in the folder `dir` names, where this reader reads it:
    /// beside its includer, else in the search folders. `None` where there is no such file,
    /// which is left out as the compiler's own headers are.
    pub(super) fn locate(&mut self, dir: &Path, written: &str) -> Result<Option<PathBuf>, Unread> {
        let written = Path::new(written);
        let Some(roots) = &self.roots else {
            let path = dir.join(written);
            return Ok(path.exists().then_some(path));
        };
        if written.components().any(|part| matches!(part, Component::Prefix(_) | Component::RootDir)) {
            return Err(Unread::Absolute);
        }
        let inside = |path: &Path| roots.iter().any(|root| path.starts_with(root));
        let dir = match self.canonical_dirs.get(dir) {
            Some(canonical) => canonical,
            None => {
                let canonical =
                    std::fs::canonicalize(dir).map_err(|error| Unread::Failed(error.to_string()))?;
                self.canonical_dirs.entry(dir.to_owned()).or_insert(canonical)
            }
        };
        for base in std::iter::once(dir).chain(&self.search) {
            // Judged as written first, so that nothing outside the folders is even looked at.
            let path = lexically_normal(&base.join(written));
            if !inside(&path) {
                return Err(Unread::Outside);
            }
            match std::fs::canonicalize(&path) {
                Ok(real) if inside(&real) => return Ok(Some(path)),
                Ok(_) => return Err(Unread::Outside),
                Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                Err(error) => return Err(Unread::Failed(error.to_string())),
            }
        }
        Ok(None)
    }

    /// The bytes of the regular file at `path`, at most [`MAX_SOURCE_BYTES`], taken from the budget.
    pub(super) fn read(&mut self, path: &Path) -> Result<Vec<u8>, Unread> {
        let failed = |error: io::Error| Unread::Failed(error.to_string());
        if !std::fs::metadata(path).map_err(failed)?.is_file() {
            return Err(Unread::NotRegular);
        }
        let file = std::fs::File::open(path).map_err(failed)?;
        // Asked again of what was opened: the path may name another file by now.
        let metadata = file.metadata().map_err(failed)?;
        if !metadata.is_file() {
            return Err(Unread::NotRegular);
        }
        // A file the budget cannot hold whole is not read at all, rather than cut short unsaid.
        if metadata.len().min(MAX_SOURCE_BYTES) > self.budget {
            return Err(Unread::OverBudget);
        }
        let mut bytes = Vec::new();
        file.take(MAX_SOURCE_BYTES.min(self.budget)).read_to_end(&mut bytes).map_err(failed)?;
        self.budget = self.budget.saturating_sub(u64::try_from(bytes.len()).unwrap_or(u64::MAX));
        Ok(bytes)
    }
}

/// `path` with its `.` and `..` resolved as written, without asking the file system: what it
/// names where no folder on the way is a link.
fn lexically_normal(path: &Path) -> PathBuf {
    let mut normal = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                normal.pop();
            }
            other => normal.push(other),
        }
    }
    normal
}
