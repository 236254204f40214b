//! The build proves every entry's `params` against the compiled kernel, twice:
//!
//! - **exact C types**, by nvcc itself: each module is compiled through a generated translation
//!   unit (`unit`) that includes it and appends compile-time checks of every entry's parameter
//!   count and types; a failed check is an nvcc error this module maps back to the manifest
//!   (`diagnostics`);
//! - **widths**, from the PTX of the same compile (`ptx`): the count and the size of every
//!   parameter in the kernel's parameter buffer, which is what a launch actually fills.
//!
//! The C check is the stronger one; the PTX check is what the runtime's layout rests on, so it is
//! kept as a check of its own. Without nvcc, the emulated build runs the C check with its C++
//! compiler, entry by entry, and also checks that each entry is declared.

mod diagnostics;
mod ptx;
mod unit;

use std::fmt;

pub(super) use diagnostics::{entry_check_failures, problems_from_nvcc};
pub(super) use ptx::check_ptx_params;
pub use ptx::{PtxParam, ptx_params};
pub(super) use unit::{entry_checks, translation_unit};

use kda_types::ParamCType;

use crate::cuda::problem::listed_line;
use crate::manifest::ParamType;

/// An entry whose `params` the compiled kernel contradicts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignatureProblem {
    /// `kernels.toml:LINE:COL`, where the entry is listed.
    pub listed_at: String,
    /// `module::entry`.
    pub symbol: String,
    /// What differs.
    pub mismatch: SignatureMismatch,
}

/// How a kernel contradicts its manifest `params`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SignatureMismatch {
    /// The number of parameters differs.
    Count {
        /// How many the manifest declares.
        declared: usize,
        /// How many the kernel takes.
        found: usize,
    },
    /// A parameter's exact C type differs (nvcc's check).
    Type {
        /// Its position.
        index: usize,
        /// Its manifest name.
        name: String,
        /// The manifest's type, manifest spelling (`const bf16*`).
        declared: String,
        /// The kernel's type: manifest spelling where there is one, else C (`double*`).
        found: String,
    },
    /// A parameter takes another number of bytes in the parameter buffer (the PTX check).
    Width {
        /// Its position.
        index: usize,
        /// Its manifest name.
        name: String,
        /// The manifest's type, manifest spelling.
        declared: String,
        /// The bytes the manifest's type takes.
        declared_size: u32,
        /// The bytes the kernel's parameter takes.
        found_size: u32,
    },
    /// The PTX declares the kernel, but its parameter list could not be read.
    UnreadablePtx,
}

impl fmt::Display for SignatureProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self { listed_at, symbol, mismatch } = self;
        match mismatch {
            SignatureMismatch::Count { declared, found } => write!(
                f,
                "{listed_at}: {symbol}: the manifest declares {}, the kernel takes {found}",
                parameters(*declared)
            ),
            SignatureMismatch::Type { index, name, declared, found } => write!(
                f,
                "{listed_at}: {symbol} parameter {index} `{name}`: the manifest declares `{declared}`, \
                 the kernel declares `{found}`"
            ),
            SignatureMismatch::Width { index, name, declared, declared_size, found_size } => write!(
                f,
                "{listed_at}: {symbol} parameter {index} `{name}`: the manifest declares `{declared}` \
                 ({declared_size} bytes), the kernel's parameter takes {found_size} bytes"
            ),
            SignatureMismatch::UnreadablePtx => {
                write!(f, "{listed_at}: {symbol}: the kernel's parameter list in the PTX could not be read")
            }
        }
    }
}

fn parameters(count: usize) -> String {
    if count == 1 { "1 parameter".to_owned() } else { format!("{count} parameters") }
}

/// A parameter's type as the kernel declares it, which spells it for the C check and its messages.
fn c_type(ty: &ParamType) -> ParamCType {
    match *ty {
        ParamType::Buffer { element, writable, .. } => ParamCType::Pointer { element, writable },
        ParamType::Scalar(scalar) => ParamCType::Scalar(scalar),
    }
}

/// Sorts problems into manifest order (a count before the parameters of its entry) and drops
/// repeats, so merged reports of several modules read like one.
pub(super) fn sort_problems(problems: &mut Vec<SignatureProblem>) {
    let line = |problem: &SignatureProblem| listed_line(&problem.listed_at);
    let position = |problem: &SignatureProblem| match &problem.mismatch {
        SignatureMismatch::Count { .. } | SignatureMismatch::UnreadablePtx => 0,
        SignatureMismatch::Type { index, .. } | SignatureMismatch::Width { index, .. } => index + 1,
    };
    problems.sort_by_key(|problem| (line(problem), position(problem)));
    problems.dedup();
}

#[cfg(test)]
mod tests;
