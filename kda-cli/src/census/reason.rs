//! Why a manifest entry cannot state a kernel the census found.

use std::fmt;

use super::ctype::Unstatable;

/// Why a kernel has no manifest entry, the first of its problems.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// A template's definition: an entry names one of its instantiations.
    Template,
    /// C++ linkage: exported under a mangled name.
    CxxLinkage,
    /// `static`: not exported.
    Static,
    /// Declared in a `.cuh` header: a module is a `.cu` file.
    InHeader,
    /// In a subfolder: a module is `<kernels>/<module>.cu`.
    InSubfolder,
    /// The file's stem (this) is no C identifier, as a module's name must be.
    ModuleName(String),
    /// The kernel's name is no C identifier, as an entry must be.
    EntryName,
    /// A parameter whose type no manifest type spells.
    Param {
        /// Its position, from 0.
        index: usize,
        /// Its name, where it has one.
        name: Option<String>,
        /// Why.
        why: Unstatable,
    },
}

impl Reason {
    /// The reason without the names of one kernel, which kernels that share it are counted by.
    pub fn category(&self) -> String {
        match self {
            Reason::ModuleName(_) => "a file name that is no C identifier".to_owned(),
            Reason::Param { why, .. } => why.category(),
            other => other.to_string(),
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Template => f.write_str(
                "template: an entry names an instantiation (`entry = \"name<float>\"`, which the build makes); explicit ones are listed",
            ),
            Reason::CxxLinkage => f.write_str("C++ linkage: declare it `extern \"C\"`"),
            Reason::Static => f.write_str("static: its module does not export it"),
            Reason::InHeader => f.write_str("declared in a header: a module is a `.cu` file"),
            Reason::InSubfolder => {
                f.write_str("in a subfolder: a module is a `.cu` file of the kernels folder")
            }
            Reason::ModuleName(stem) => write!(f, "module `{stem}`: a module's name is a C identifier"),
            Reason::EntryName => f.write_str("its name is no C identifier"),
            Reason::Param { index, name: Some(name), why } => write!(f, "parameter {index} `{name}`: {why}"),
            Reason::Param { index, name: None, why } => write!(f, "parameter {index}: {why}"),
        }
    }
}
