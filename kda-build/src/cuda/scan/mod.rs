//! A scanner of CUDA sources for the kernels they declare: each `__global__` function, its
//! linkage, whether it is a template, its name and its parameters as C tokens, with the
//! typedefs, structs and classes the sources declare. `kda census` reads a kernel library with it
//! and drafts the manifest entries of the kernels kda can state.
//!
//! It is no compiler, and it never fails: any bytes scan to some list, maybe empty.
//!
//! - **Lexing.** Comments, string, raw-string and character literals, `\` line continuations
//!   (inside tokens too) and pp-numbers (`1'000`, `0x1p-3f`) are read as C does, so a
//!   `__global__` in a comment or a string is no kernel.
//! - **Macros.** `#define` and `#undef` of object-like and function-like macros (variadic ones
//!   too) are tracked in file order, with the definitions of the headers a source includes with
//!   `#include "..."` beside it; every macro is expanded wherever it is used, with `#`
//!   (stringizing) and `##` (token pasting), arguments expanded before substitution and the
//!   result rescanned, a macro never re-expanded inside its own expansion. So the kernels a
//!   library writes once in a macro and instantiates per element type
//!   (`UNARY_OP(float, uneg_f32, -x)`) are found, each at the line of its invocation. The
//!   declaration keywords the scanner reads (`__global__`, `extern`, `template`, ...) are never
//!   taken as macros: a shim for a host compiler that defines `__global__` away would hide every
//!   kernel. Expansion stops at [`MAX_MACRO_DEPTH`] nested macros and [`MAX_EXPANDED_TOKENS`]
//!   tokens, so a definition that grows without bound costs bounded time.
//! - **Conditionals.** `#if 0` and `#if 1` (and their `#elif` / `#else`) are evaluated; every
//!   other condition (`#if __CUDA_ARCH__ >= 800`, `#ifdef X`) is unknown without the compiler's
//!   flags, so *all* its branches are read: a census lists what some build of the library
//!   exports. A macro defined differently in two branches keeps the later definition, and a
//!   kernel declared in two branches is listed once, as first found.
//! - **Headers.** A quoted `#include` is read from the including file's folder (once per scan,
//!   at most [`MAX_INCLUDE_DEPTH`] deep, [`MAX_SOURCE_BYTES`] each) for its macros and types; the
//!   kernels a header declares are its own scan's, not its includer's. `<...>` includes are the
//!   toolkit's, whose typedefs the caller knows. A [`SourceReader`] decides which files a scan may
//!   read: only regular files (no device, FIFO or socket), at most [`MAX_TOTAL_BYTES`] in all the
//!   scans it makes, and for a census only inside the folders it is given: an absolute include,
//!   or one that leaves them through `..` or a symbolic link, is not read and is listed in
//!   [`SourceScan::unread`].
//!
//! Its time is linear in the bytes it reads (times the bounded macro expansion): brackets are
//! matched through tables built in one pass, and no scan restarts from each `__global__`, macro
//! name or `#if`.

mod brackets;
mod declarations;
mod lex;
mod preprocess;
mod reader;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use self::reader::{SourceReader, Unread};

/// The most bytes read of one source or header: past it the rest is not scanned.
pub const MAX_SOURCE_BYTES: u64 = 16 << 20;
/// The most bytes one [`SourceReader`] reads, every source and header of every scan it makes
/// together: what bounds the time and the memory of a census of a folder, whatever it holds. A
/// scan holds the tokens of the files it is reading, about 80 bytes per token as read and
/// expanded (a token per byte at worst, one per four bytes in real sources: a 16 MiB library
/// takes about 430 MB), and of the rest only their macros, types and kernels.
pub const MAX_TOTAL_BYTES: u64 = 64 << 20;
/// The most tokens macro expansion may produce in one scan; past it macros stay unexpanded.
pub const MAX_EXPANDED_TOKENS: usize = 1 << 20;
/// The most macro expansions nested in one another (an argument's included).
pub const MAX_MACRO_DEPTH: usize = 64;
/// The most headers included inside one another.
pub const MAX_INCLUDE_DEPTH: usize = 32;

/// What the scan of one source found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceScan {
    /// Each `__global__` function, once per name, in source order.
    pub kernels: Vec<Kernel>,
    /// The types the source and the headers it includes declare, by name: what a parameter's
    /// type may name besides the C and CUDA types.
    pub types: BTreeMap<String, TypeDecl>,
    /// The quoted includes the scan did not read, in the order met: the macros and types of those
    /// headers are missing from it.
    pub unread: Vec<UnreadInclude>,
}

/// A quoted `#include` a scan did not read, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnreadInclude {
    /// The header whose `#include` it is (its path as read), `None` where it is the scanned
    /// source's own.
    pub header: Option<PathBuf>,
    /// The line of the `#include`.
    pub line: u32,
    /// The path as written between the quotes.
    pub path: String,
    /// Why it was not read.
    pub why: Unread,
}

/// A type a source declares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TypeDecl {
    /// `typedef T name;` or `using name = T;`: the tokens of `T`.
    Alias(Vec<String>),
    /// A `struct`, `class`, `union` or `enum` (the keyword), which no manifest type is.
    Record(String),
}

/// A `__global__` function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kernel {
    /// Its name: the symbol, where its linkage is C.
    pub name: String,
    /// Under which name the module exports it.
    pub linkage: Linkage,
    /// A template's parameter list as written (`typename T, int N`); empty for an explicit
    /// instantiation (`template __global__ void k<float>(float*);`).
    pub template: Option<String>,
    /// The template arguments written after its name (`float, 2` of `k<float, 2>(...)`): an
    /// explicit instantiation's, or a specialization's.
    pub template_args: Option<String>,
    /// Its parameters, in order.
    pub params: Vec<KernelParam>,
    /// The line of its `__global__`, or of the macro invocation that declared it (1-based).
    pub line: u32,
    /// The macro whose invocation in the source declared it.
    pub macro_name: Option<String>,
}

impl Kernel {
    /// The name a manifest's `entry` gives it: its name, and its template arguments where it is
    /// an instantiation (`max_each<float>`).
    pub fn entry(&self) -> String {
        match &self.template_args {
            Some(args) => format!("{}<{args}>", self.name),
            None => self.name.clone(),
        }
    }

    /// Whether it is a template's definition, which no entry names: its instantiations are the
    /// kernels.
    pub fn is_template(&self) -> bool {
        self.template.as_deref().is_some_and(|params| !params.is_empty())
    }
}

/// The linkage of a kernel, which decides the symbol a module exports it under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Linkage {
    /// `extern "C"`, on the declaration or around it: exported under its own name.
    C,
    /// C++: exported under a mangled name.
    Cxx,
    /// `static`: not exported.
    Internal,
}

/// One parameter of a kernel, as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelParam {
    /// The tokens of its type, qualifiers included (`const`, `size_t`, `*`, `__restrict__`); an
    /// array parameter `T x[N]` is the pointer it decays to (`T`, `*`), and a declarator the
    /// scanner does not split (a function pointer) is all its tokens.
    pub type_tokens: Vec<String>,
    /// Its name, where it has one.
    pub name: Option<String>,
}

/// Scans the source at `path`, reading the headers it includes with `#include "..."` from its
/// folder, wherever they are, as a compiler would (regular files only, [`MAX_TOTAL_BYTES`] in all).
/// Only reading `path` itself can fail. A census, which reads folders it does not trust, scans
/// with [`SourceReader::within`] instead.
pub fn scan_file(path: &Path) -> std::io::Result<SourceScan> {
    SourceReader::anywhere().scan_file(path)
}

/// Scans `source`, which includes no header.
pub fn scan_source(source: &[u8]) -> SourceScan {
    SourceReader::anywhere().scan_bytes(source)
}
