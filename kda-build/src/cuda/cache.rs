//! The per-module build cache: a module is recompiled only when something it was compiled from
//! changed.
//!
//! What a module's image depends on is its *command* (the generated unit's text, with the params
//! checks, and every nvcc flag: defines, architectures, include directories, nvcc's path and
//! version) and the *contents* of every file nvcc read, as nvcc itself reports them (`-MD`, in the
//! same run). After a compile, `<module>.kda-cache` records a fingerprint of both and the list of
//! those files; the next build re-reads the files on that list and compiles again only if the
//! fingerprint differs. Editing one kernel thus recompiles that kernel; editing a shared header
//! recompiles exactly the modules that include it.
//!
//! The record also keeps what ptxas reported of the module's kernels ([`EntryResources`]), which
//! only a compile prints: a module taken from the cache reports the same resources, and the same
//! spills, as the build that compiled it.
//!
//! Contents, not timestamps: a checkout or `touch` that changes no byte costs nothing, and a
//! header edited and reverted costs nothing either.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use super::resources::EntryResources;

/// The first line of a record: a record of another format is not trusted (v1 had no resources).
const RECORD_HEADER: &str = "kda-build module cache v2";

/// The start of a record line naming a file nvcc read.
const FILE: &str = "file ";
/// The start of a record line of one kernel's resources on one target.
const RESOURCES: &str = "resources ";

/// A 64-bit FNV-1a hash of a build's inputs. Not cryptographic: it tells builds of one crate
/// apart, where a collision would need two different inputs of the same module to meet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Fingerprint(u64);

impl Fingerprint {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0100_0000_01b3;

    /// The fingerprint of `command` (everything but file contents).
    pub fn of_command(command: &[&str]) -> Self {
        let mut hash = Self(Self::OFFSET);
        for part in command {
            hash.add(part.as_bytes());
        }
        hash
    }

    /// This fingerprint extended with the contents of `files`; `None` when one cannot be read
    /// (deleted, renamed): the module must be compiled again.
    pub fn with_files(mut self, files: &[PathBuf]) -> Option<Self> {
        for file in files {
            self.add(file.as_os_str().as_encoded_bytes());
            self.add(&std::fs::read(file).ok()?);
        }
        Some(self)
    }

    /// Adds `bytes` and their length, so `["ab", "c"]` and `["a", "bc"]` differ.
    fn add(&mut self, bytes: &[u8]) {
        for byte in bytes.iter().copied().chain((bytes.len() as u64).to_le_bytes()) {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(Self::PRIME);
        }
    }
}

/// What the last compile of a module left: its fingerprint, the files it read, and its kernels'
/// resources.
///
/// ```text
/// kda-build module cache v2
/// 5c1f0e2a9b3d4e67
/// file /src/kernels/gemm.cu
/// resources sm_90 dense_gemm_bf16 registers=115 spill_stores=0 spill_loads=0 ...
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Record {
    pub fingerprint: Fingerprint,
    pub files: Vec<PathBuf>,
    pub resources: Vec<EntryResources>,
}

impl Record {
    /// The record at `path`, if there is a readable one (every line of it).
    pub fn read(path: &Path) -> Option<Self> {
        let text = std::fs::read_to_string(path).ok()?;
        let mut lines = text.lines();
        if lines.next()? != RECORD_HEADER {
            return None;
        }
        let fingerprint = Fingerprint(u64::from_str_radix(lines.next()?, 16).ok()?);
        let mut record = Self { fingerprint, files: Vec::new(), resources: Vec::new() };
        for line in lines {
            if let Some(file) = line.strip_prefix(FILE) {
                record.files.push(PathBuf::from(file));
            } else {
                let resources = line.strip_prefix(RESOURCES).and_then(EntryResources::from_record_line)?;
                record.resources.push(resources);
            }
        }
        Some(record)
    }

    /// Writes the record to `path`.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let mut text = format!("{RECORD_HEADER}\n{:016x}\n", self.fingerprint.0);
        for file in &self.files {
            let _ = writeln!(text, "{FILE}{}", file.display());
        }
        for resources in &self.resources {
            let _ = writeln!(text, "{RESOURCES}{}", resources.record_line());
        }
        std::fs::write(path, text)
    }

    /// Whether a module whose command fingerprints as `command` is still what this record
    /// describes: the same command and the same contents of every file it read.
    pub fn is_current(&self, command: Fingerprint) -> bool {
        command.with_files(&self.files) == Some(self.fingerprint)
    }
}

/// The prerequisites of a make-style dependency file as nvcc writes it (`-MD -MF`):
/// `target : a.cu \` then one path per continued line, spaces in a path escaped as `\ `.
pub(super) fn parse_dependencies(text: &str) -> Vec<PathBuf> {
    let joined = text.replace("\\\r\n", " ").replace("\\\n", " ");
    let mut files = Vec::new();
    for rule in joined.lines() {
        // The target ends at the first ` : ` or `: `; a Windows drive (`C:\`) has no space after.
        let Some(split) = rule.find(": ").or_else(|| rule.find(" :")) else { continue };
        let mut path = String::new();
        let mut chars = rule[split + 1..].trim_start_matches(':').chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if chars.peek() == Some(&' ') => path.push(chars.next().unwrap_or(' ')),
                c if c.is_whitespace() => {
                    if !path.is_empty() {
                        files.push(PathBuf::from(std::mem::take(&mut path)));
                    }
                }
                c => path.push(c),
            }
        }
        if !path.is_empty() {
            files.push(PathBuf::from(path));
        }
    }
    files.sort();
    files.dedup();
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("kda-cache-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn nvcc_dependency_files_are_read_with_continuations_and_escaped_spaces() {
        let text = "/out/norm.fatbin : /out/norm.kda.cu \\\n    /src/kernels/norm.cu \\\n    \
                    /src/kernels/kda_common.cuh \\\n    /opt/my\\ cuda/include/cuda_runtime.h\n";
        assert_eq!(
            parse_dependencies(text),
            [
                PathBuf::from("/opt/my cuda/include/cuda_runtime.h"),
                PathBuf::from("/out/norm.kda.cu"),
                PathBuf::from("/src/kernels/kda_common.cuh"),
                PathBuf::from("/src/kernels/norm.cu"),
            ]
        );
        assert!(parse_dependencies("").is_empty());
    }

    #[test]
    fn a_record_is_current_until_a_file_it_read_or_the_command_changes() {
        let dir = scratch("current");
        let (source, header) = (dir.join("norm.cu"), dir.join("common.cuh"));
        std::fs::write(&source, "kernel").unwrap();
        std::fs::write(&header, "header").unwrap();
        let command = Fingerprint::of_command(&["nvcc", "-O3", "-DBLOCK=128"]);
        let files = vec![header.clone(), source.clone()];
        let record =
            Record { fingerprint: command.with_files(&files).unwrap(), files, resources: Vec::new() };
        record.write(&dir.join("norm.kda-cache")).unwrap();
        let record = Record::read(&dir.join("norm.kda-cache")).unwrap();

        assert!(record.is_current(command));
        assert!(!record.is_current(Fingerprint::of_command(&["nvcc", "-O3", "-DBLOCK=256"])));
        // Rewritten with the same bytes: still current (contents, not timestamps).
        std::fs::write(&header, "header").unwrap();
        assert!(record.is_current(command));
        std::fs::write(&header, "header v2").unwrap();
        assert!(!record.is_current(command));
        std::fs::write(&header, "header").unwrap();
        std::fs::remove_file(&source).unwrap();
        assert!(!record.is_current(command), "a file that is gone");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_command_fingerprint_keeps_the_boundaries_of_its_parts() {
        assert_ne!(Fingerprint::of_command(&["ab", "c"]), Fingerprint::of_command(&["a", "bc"]));
        assert_eq!(Fingerprint::of_command(&["a", "bc"]), Fingerprint::of_command(&["a", "bc"]));
    }

    #[test]
    fn a_record_of_another_format_is_not_trusted() {
        let dir = scratch("format");
        std::fs::write(dir.join("x.kda-cache"), "some other file\n0123\n").unwrap();
        assert_eq!(Record::read(&dir.join("x.kda-cache")), None);
        assert_eq!(Record::read(&dir.join("absent.kda-cache")), None);
        // A record of v1, without resources: compiled again, so the resources are reported.
        std::fs::write(dir.join("v1.kda-cache"), "kda-build module cache v1\n0123\n/src/x.cu\n").unwrap();
        assert_eq!(Record::read(&dir.join("v1.kda-cache")), None);
        // A line this version does not know.
        let garbled = format!("{RECORD_HEADER}\n0123\nfile /src/x.cu\nresources sm_90 k registers=oops\n");
        std::fs::write(dir.join("garbled.kda-cache"), garbled).unwrap();
        assert_eq!(Record::read(&dir.join("garbled.kda-cache")), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_record_keeps_the_resources_of_the_modules_kernels() {
        use crate::cuda::{Arch, ResourceUsage};
        let dir = scratch("resources");
        let usage = ResourceUsage { registers: 115, barriers: 1, shared: 46080, ..ResourceUsage::default() };
        let sm_90 = Arch { major: 9, minor: 0, specific: false };
        let record = Record {
            fingerprint: Fingerprint::of_command(&["nvcc"]),
            files: vec![PathBuf::from("/src/my kernels/gemm.cu")],
            resources: vec![
                EntryResources { entry: "dense_gemm_bf16".to_owned(), arch: sm_90, usage },
                EntryResources {
                    entry: "_Z6helperv".to_owned(),
                    arch: Arch { specific: true, ..sm_90 },
                    usage: ResourceUsage { spill_stores: 8, ..usage },
                },
            ],
        };
        record.write(&dir.join("gemm.kda-cache")).unwrap();
        assert_eq!(Record::read(&dir.join("gemm.kda-cache")), Some(record));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
