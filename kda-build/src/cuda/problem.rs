//! What only the build step can find wrong with a crate's kernels: each located in the manifest,
//! and reported to the user as a compiler error (`compile_error!` in the generated file) rather
//! than as a failed build script.

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
    /// nvcc rejected a module (for a reason other than a parameter check).
    #[error("{listed_at}: nvcc failed on {}:\n{diagnostics}", path.display())]
    Compile {
        /// `kernels.toml:LINE:COL` of the first entry in the module.
        listed_at: String,
        /// The module's source, which nvcc's messages point into.
        path: PathBuf,
        /// nvcc's messages.
        diagnostics: String,
    },
    /// The emulator's C++ compiler rejected an entry's unit (or the shim itself).
    #[error("{listed_at}: the emulated build (C++) failed on {}:\n{diagnostics}", path.display())]
    Emulation {
        /// `kernels.toml:LINE:COL` of the entry.
        listed_at: String,
        /// The source the messages point into.
        path: PathBuf,
        /// The compiler's messages.
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
}
