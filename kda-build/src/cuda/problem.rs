//! What only the build step can find wrong with a crate's kernels: each located in the manifest,
//! and reported to the user as a compiler error (`compile_error!` in the generated file) rather
//! than as a failed build script.
//!
//! A compiler's rejection of a module is shown as its first located error, with the source lines
//! the compiler quotes under it: what follows the first error is mostly consequences of it (a
//! template's instantiation notes, the same undeclared name again). The build's
//! `full_diagnostics` (`KDA_FULL_DIAGNOSTICS=1`) appends the compiler's whole output.

use std::path::PathBuf;

use super::{EntryProblem, SignatureProblem, SpillProblem};
use crate::Entry;

/// A problem of the kernels against their manifest.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// A module the manifest lists has no source.
    #[error("{listed_at}: module `{module}` has no source {}", path.display())]
    MissingSource {
        /// `kernels.toml:LINE:COL` of the first entry in the module.
        listed_at: String,
        /// The module.
        module: String,
        /// The source it should be in.
        path: PathBuf,
    },
    /// nvcc is required (`KDA_REQUIRE_NVCC=1`) but was not found: located at the manifest, whose
    /// kernels are then built for no GPU.
    #[error("{manifest}: nvcc is required (KDA_REQUIRE_NVCC=1) but was not found: {why}")]
    NvccRequired {
        /// The manifest's name (`kernels.toml`).
        manifest: String,
        /// Where the build looked, and what each place answered.
        why: String,
    },
    /// nvcc rejected a module (for a reason other than a parameter check).
    #[error("{listed_at}: nvcc failed on {}:\n{}", path.display(), first_error(diagnostics))]
    Compile {
        /// `kernels.toml:LINE:COL` of the first entry in the module.
        listed_at: String,
        /// The module's source, which nvcc's messages point into.
        path: PathBuf,
        /// nvcc's messages, all of them (the message shows the first error).
        diagnostics: String,
    },
    /// The emulator's C++ compiler rejected a module's unit (or the shim itself), or the linker an
    /// entry's library.
    #[error(
        "{listed_at}: the emulated build (C++) failed on {}:\n{}",
        path.display(),
        first_error(diagnostics)
    )]
    Emulation {
        /// `kernels.toml:LINE:COL` of the entry.
        listed_at: String,
        /// The source the messages point into.
        path: PathBuf,
        /// The compiler's messages, all of them (the message shows the first error).
        diagnostics: String,
    },
    /// An entry the compiled module does not export under its exact name.
    #[error("{0}")]
    Entry(EntryProblem),
    /// An entry whose `params` the compiled kernel contradicts.
    #[error("{0}")]
    Signature(SignatureProblem),
    /// An entry whose kernel spills registers to local memory on a target.
    #[error("{0}")]
    Spill(SpillProblem),
}

impl Problem {
    /// The compiler's whole output, for a problem that is a compiler's rejection.
    pub fn diagnostics(&self) -> Option<&str> {
        match self {
            Self::Compile { diagnostics, .. } | Self::Emulation { diagnostics, .. } => Some(diagnostics),
            _ => None,
        }
    }
}

/// An error line of a compiler or of a tool it runs: `file(12): error: ...` (nvcc),
/// `file:12:5: error: ...` and `fatal error: ...` (gcc, clang), `error: ...`.
pub(super) fn is_error(line: &str) -> bool {
    line.contains(" error:") || line.starts_with("error")
}

/// The first error of a compiler's `diagnostics`, with the lines it indents under it (the quoted
/// source and its caret), and how many lines were left out; all of `diagnostics` where no line
/// is an error (a linker's report, say), which then has nothing to reduce to.
fn first_error(diagnostics: &str) -> String {
    let lines: Vec<&str> = diagnostics.lines().collect();
    let Some(first) = lines.iter().position(|line| is_error(line)) else {
        return diagnostics.to_owned();
    };
    let quoted = lines[first + 1..].iter().take_while(|line| line.starts_with(char::is_whitespace)).count();
    let shown = &lines[first..=first + quoted];
    let left_out = lines.len() - shown.len();
    let mut text = shown.join("\n");
    if left_out > 0 {
        text.push_str(&format!(
            "\n({left_out} more lines of compiler output; KDA_FULL_DIAGNOSTICS=1 shows them all)"
        ));
    }
    text
}

/// `kernels.toml:LINE:COL`, where the manifest lists `entry`.
pub(super) fn listed_at(manifest_name: &str, entry: &Entry) -> String {
    format!("{manifest_name}:{}:{}", entry.location.line, entry.location.column)
}

/// The line of a `listed_at`, for sorting reports into manifest order.
pub(super) fn listed_line(listed_at: &str) -> u32 {
    listed_at.rsplit(':').nth(1).and_then(|line| line.parse().ok()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_listed_at_its_line_and_column() {
        let manifest = crate::Manifest::parse(
            "kernels.toml",
            "[t]\n\n  gemm = { module = \"gemm\", entry = \"dense_gemm_bf16\" }\n",
        )
        .unwrap();
        let at = listed_at("kernels.toml", &manifest.tables[0].entries[0]);
        assert_eq!(at, "kernels.toml:3:3");
        assert_eq!(listed_line(&at), 3);
        assert_eq!(listed_line("no location"), 0);
    }

    /// g++'s report of one undeclared name in a kernel, and of what it broke after it.
    const GCC: &str = "\
In file included from /out/emu/m.e.entry.cpp:3:
/k/m.cu: In function 'void e(float*, unsigned int)':
/k/m.cu:7:5: error: 'undeclared_name' was not declared in this scope
    7 |     undeclared_name(x);
      |     ^~~~~~~~~~~~~~~
/k/m.cu:9:1: error: expected '}' at end of input
    9 | }
      | ^";

    #[test]
    fn a_compiler_rejection_shows_its_first_located_error_with_its_quoted_source() {
        let problem = Problem::Emulation {
            listed_at: "kernels.toml:3:1".to_owned(),
            path: PathBuf::from("/k/m.cu"),
            diagnostics: GCC.to_owned(),
        };
        assert_eq!(
            problem.to_string(),
            "kernels.toml:3:1: the emulated build (C++) failed on /k/m.cu:\n\
             /k/m.cu:7:5: error: 'undeclared_name' was not declared in this scope\n    \
             7 |     undeclared_name(x);\n      |     ^~~~~~~~~~~~~~~\n\
             (5 more lines of compiler output; KDA_FULL_DIAGNOSTICS=1 shows them all)"
        );
        assert_eq!(problem.diagnostics(), Some(GCC));
    }

    #[test]
    fn nvccs_one_error_is_shown_whole_and_output_without_an_error_line_as_it_is() {
        let nvcc = "/k/m.cu(7): error: identifier \"undeclared_name\" is undefined\n      undeclared_name(x);\n      ^";
        assert_eq!(first_error(nvcc), nvcc);
        let linker = "/usr/bin/ld: m.o: in function `e': undefined reference to `g'";
        assert_eq!(first_error(linker), linker);
        assert_eq!(first_error(""), "");
    }
}
