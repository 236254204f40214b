//! `kda census <folder>`: which kernels of a folder of CUDA sources (a kernel library, a crate's
//! `kernels/`) a manifest entry can state, why not the others, and a draft of the entries.
//!
//! Each `.cu` and `.cuh` file under the folder is read with kda-build's scanner
//! ([`kda_build::cuda::scan`]), which finds every `__global__` function, those a macro declares
//! included. A kernel is stated when it is `extern "C"` or an explicit instantiation of a template
//! (stated with its template's parameters, `entry = "max_each<float>"`), in a `.cu` file of the
//! folder itself (a module), and every parameter is a pointer to or a value of a manifest type
//! ([`ctype`]); the first problem otherwise is its [`Reason`]. A template's definition is listed
//! and not stated: an entry names an instantiation. The drafted entries ([`draft`])
//! form one table named after the folder, each field named after its entry.
//!
//! The census reads folders it need not trust: a quoted `#include` is read only where it stays
//! inside the folder (or an include folder its user names), only regular files are read, and at
//! most [`MAX_TOTAL_BYTES`](kda_build::cuda::scan::MAX_TOTAL_BYTES) in all. An include it does
//! not read is listed with its line and why, under the file that has it (or the first that
//! includes that file). Its time is linear in the bytes it reads.

pub mod ctype;
pub mod draft;
mod reason;

use std::collections::{HashMap, HashSet};
use std::fmt::Write;
use std::path::{Path, PathBuf};

use kda_build::cuda::scan::{Kernel, KernelParam, Linkage, SourceReader, SourceScan, Unread, UnreadInclude};
use kda_build::manifest::is_c_identifier;

use self::ctype::Stated;
pub use self::reason::Reason;

/// The deepest folder below the census's folder that it reads.
const MAX_FOLDER_DEPTH: usize = 16;

/// What the census found in a folder.
#[derive(Clone, Debug)]
pub struct Census {
    /// The folder.
    pub folder: PathBuf,
    /// Each `.cu` and `.cuh` file under it, by path.
    pub files: Vec<FileCensus>,
}

/// What the census found in one file.
#[derive(Clone, Debug)]
pub struct FileCensus {
    /// Its path below the folder, `/`-separated.
    pub path: String,
    /// The module it is, where it is one: the stem of a `.cu` file of the folder itself.
    pub module: String,
    /// Its kernels, in source order; empty when it could not be read.
    pub kernels: Vec<KernelCensus>,
    /// The quoted includes its scan did not read, each once in the census: a header's own are
    /// listed under the header where the census lists it, else under the first file that
    /// includes it.
    pub unread: Vec<UnreadInclude>,
    /// Why it could not be read.
    pub error: Option<String>,
}

/// One kernel and whether a manifest entry can state it.
#[derive(Clone, Debug)]
pub struct KernelCensus {
    /// The kernel as the scanner found it.
    pub kernel: Kernel,
    /// How the entry states each parameter, or why no entry can.
    pub outcome: Result<Vec<Stated>, Reason>,
}

impl Census {
    /// The census of every `.cu` and `.cuh` file under `folder`, whose headers are read only
    /// inside it; fails only when `folder` cannot be listed.
    pub fn of(folder: &Path) -> std::io::Result<Census> {
        Census::with_include_dirs(folder, &[])
    }

    /// As [`Census::of`], with headers also read inside `include_dirs`, which are searched in
    /// order for a header not beside its includer. Fails where a folder cannot be listed or
    /// resolved.
    pub fn with_include_dirs(folder: &Path, include_dirs: &[PathBuf]) -> std::io::Result<Census> {
        let mut paths = Vec::new();
        sources(folder, 0, &mut paths)?;
        paths.sort();
        let mut reader = SourceReader::within(folder, include_dirs)?;
        // An include not read is listed under the file that has it, where the census lists that
        // file, else once, under the first file whose scan met it.
        let listed: HashSet<PathBuf> = paths.iter().map(|path| as_included(path)).collect();
        let mut shown = HashSet::new();
        let files = paths
            .iter()
            .map(|path| {
                let mut file = FileCensus::of(folder, path, &mut reader);
                file.unread.retain(|unread| match &unread.header {
                    None => true,
                    Some(header) => {
                        !listed.contains(header)
                            && shown.insert((header.clone(), unread.line, unread.path.clone()))
                    }
                });
                file
            })
            .collect();
        Ok(Census { folder: folder.to_owned(), files })
    }

    /// Every kernel, with its file.
    pub fn kernels(&self) -> impl Iterator<Item = (&FileCensus, &KernelCensus)> {
        self.files.iter().flat_map(|file| file.kernels.iter().map(move |kernel| (file, kernel)))
    }

    /// How many kernels an entry can state.
    pub fn stated(&self) -> usize {
        self.kernels().filter(|(_, kernel)| kernel.outcome.is_ok()).count()
    }

    /// The reasons of the kernels not stated, each with how many kernels it stops, the most
    /// frequent first.
    pub fn reasons(&self) -> Vec<(String, usize)> {
        let mut counts: HashMap<String, usize> = HashMap::new();
        for (_, kernel) in self.kernels() {
            if let Err(reason) = &kernel.outcome {
                *counts.entry(reason.category()).or_default() += 1;
            }
        }
        let mut counts: Vec<(String, usize)> = counts.into_iter().collect();
        counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        counts
    }

    /// The report: per file each kernel, stated or why not, then the totals and the reasons.
    pub fn report(&self) -> String {
        let mut out = String::new();
        let total = self.kernels().count();
        let _ = writeln!(out, "{}: {} files, {total} kernels", self.folder.display(), self.files.len());
        for file in &self.files {
            let _ = writeln!(out, "\n{}", file.path);
            if let Some(error) = &file.error {
                let _ = writeln!(out, "  cannot be read: {error}");
            }
            for unread in &file.unread {
                let _ = write!(out, "  #include \"{}\" (", unread.path);
                if let Some(header) = &unread.header {
                    let _ = write!(out, "{}, ", self.shown(header));
                }
                let _ = write!(out, "line {}): not read: {}", unread.line, unread.why);
                let _ = match unread.why {
                    Unread::Absolute | Unread::Outside => {
                        writeln!(out, " (`--include-dir DIR` reads the headers under DIR)")
                    }
                    _ => writeln!(out),
                };
            }
            for census in &file.kernels {
                let kernel = &census.kernel;
                let _ = write!(out, "  {} (line {}", kernel.entry(), kernel.line);
                if let Some(name) = &kernel.macro_name {
                    let _ = write!(out, ", {name}");
                }
                let _ = match &census.outcome {
                    Ok(_) => writeln!(out, "): stated"),
                    Err(reason) => writeln!(out, "): not stated: {reason}"),
                };
            }
        }
        let _ = writeln!(out, "\n{} of {total} stated", self.stated());
        for (reason, count) in self.reasons() {
            let _ = writeln!(out, "{count:>6}  {reason}");
        }
        out
    }

    /// A header's path as the report shows it: below the folder, `/`-separated, where it is in it.
    fn shown(&self, header: &Path) -> String {
        let folder = std::fs::canonicalize(&self.folder).unwrap_or_else(|_| self.folder.clone());
        match header.strip_prefix(&folder) {
            Ok(relative) => slashed(relative),
            Err(_) => header.display().to_string(),
        }
    }
}

impl FileCensus {
    fn of(folder: &Path, path: &Path, reader: &mut SourceReader) -> FileCensus {
        let relative = path.strip_prefix(folder).unwrap_or(path);
        let depth = relative.components().count();
        let module = path.file_stem().map(|stem| stem.to_string_lossy().into_owned()).unwrap_or_default();
        let place = if path.extension().is_some_and(|extension| extension == "cuh") {
            Err(Reason::InHeader)
        } else if depth > 1 {
            Err(Reason::InSubfolder)
        } else if !is_c_identifier(&module) {
            Err(Reason::ModuleName(module.clone()))
        } else {
            Ok(())
        };
        let (kernels, unread, error) = match reader.scan_file(path) {
            Ok(scan) => {
                // Each template's definition by name, for its explicit instantiations.
                let mut templates = HashMap::new();
                for kernel in scan.kernels.iter().filter(|kernel| kernel.is_template()) {
                    templates.entry(kernel.name.as_str()).or_insert_with(|| Template::of(kernel));
                }
                let kernels = scan
                    .kernels
                    .iter()
                    .map(|kernel| KernelCensus::of(kernel, &place, &scan, &templates))
                    .collect();
                (kernels, scan.unread.clone(), None)
            }
            Err(error) => (Vec::new(), Vec::new(), Some(error.to_string())),
        };
        FileCensus { path: slashed(relative), module, kernels, unread, error }
    }
}

/// The path of the source at `path` as a scan names a header it includes: its folder's canonical
/// path, then its name.
fn as_included(path: &Path) -> PathBuf {
    let folder = path.parent().and_then(|folder| std::fs::canonicalize(folder).ok());
    match (folder, path.file_name()) {
        (Some(folder), Some(name)) => folder.join(name),
        _ => path.to_owned(),
    }
}

/// A relative path, `/`-separated.
fn slashed(relative: &Path) -> String {
    let parts: Vec<String> =
        relative.components().map(|part| part.as_os_str().to_string_lossy().into_owned()).collect();
    parts.join("/")
}

impl KernelCensus {
    /// Whether a manifest entry can state `kernel`, in a file whose `place` may be a module.
    fn of(
        kernel: &Kernel,
        place: &Result<(), Reason>,
        scan: &SourceScan,
        templates: &HashMap<&str, Template<'_>>,
    ) -> KernelCensus {
        // An explicit instantiation states the parameters of its template's definition, where the
        // module has it, with the arguments in place of the template's parameters (and their names).
        let instance = kernel
            .template_args
            .as_deref()
            .and_then(|args| templates.get(kernel.name.as_str())?.instantiate(args));
        let params = instance.as_ref().unwrap_or(&kernel.params);
        let outcome = if kernel.is_template() {
            Err(Reason::Template)
        } else if kernel.linkage == Linkage::Cxx && kernel.template_args.is_none() {
            Err(Reason::CxxLinkage)
        } else if kernel.linkage == Linkage::Internal {
            Err(Reason::Static)
        } else if let Err(reason) = place {
            Err(reason.clone())
        } else if !is_c_identifier(&kernel.name) {
            Err(Reason::EntryName)
        } else {
            params
                .iter()
                .enumerate()
                .map(|(index, param)| {
                    ctype::state(&param.type_tokens, &scan.types).map_err(|why| Reason::Param {
                        index,
                        name: param.name.clone(),
                        why,
                    })
                })
                .collect()
        };
        KernelCensus { kernel: Kernel { params: params.clone(), ..kernel.clone() }, outcome }
    }
}

/// A template's definition, read once for all its explicit instantiations.
struct Template<'k> {
    definition: &'k Kernel,
    /// How many parameters it takes.
    arity: usize,
    /// The position of each parameter, by name (the first of a name, as a search in order finds).
    positions: HashMap<&'k str, usize>,
}

impl<'k> Template<'k> {
    fn of(definition: &'k Kernel) -> Template<'k> {
        let names = split_top_level(definition.template.as_deref().unwrap_or_default());
        let mut positions = HashMap::new();
        for (at, param) in names.iter().enumerate() {
            let declared = param.split('=').next().unwrap_or(param);
            positions.entry(declared.split_whitespace().last().unwrap_or_default()).or_insert(at);
        }
        Template { definition, arity: names.len(), positions }
    }

    /// The parameters of the definition instantiated with `args` (`float, 2`): each template
    /// parameter's name replaced by its argument's tokens. `None` where the counts differ.
    fn instantiate(&self, args: &str) -> Option<Vec<KernelParam>> {
        let args = split_top_level(args);
        if args.len() != self.arity {
            return None;
        }
        let substitute = |token: &String| -> Vec<String> {
            match self.positions.get(token.as_str()) {
                Some(&at) => args[at].split_whitespace().map(str::to_owned).collect(),
                None => vec![token.clone()],
            }
        };
        let params = self
            .definition
            .params
            .iter()
            .map(|param| KernelParam {
                type_tokens: param.type_tokens.iter().flat_map(substitute).collect(),
                name: param.name.clone(),
            })
            .collect();
        Some(params)
    }
}

/// The comma-separated parts of a template's parameter or argument list, trimmed, outside any
/// nested `<...>` or `(...)`.
fn split_top_level(list: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (at, ch) in list.char_indices() {
        match ch {
            '<' | '(' => depth += 1,
            '>' | ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(list[start..at].trim());
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(list[start..].trim());
    parts.retain(|part| !part.is_empty());
    parts
}

/// Appends the `.cu` and `.cuh` files under `folder` to `found`; folders that are links are not
/// followed, so that a cycle of links ends.
fn sources(folder: &Path, depth: usize, found: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(folder)? {
        let entry = entry?;
        let path = entry.path();
        let is_source = path.extension().is_some_and(|extension| extension == "cu" || extension == "cuh");
        let kind = entry.file_type()?;
        if kind.is_dir() && depth < MAX_FOLDER_DEPTH {
            // A subfolder that cannot be listed is left out: the census reads what it can.
            drop(sources(&path, depth + 1, found));
        } else if is_source && (kind.is_file() || path.is_file()) {
            found.push(path);
        }
    }
    Ok(())
}
