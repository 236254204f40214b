//! `kda`: the tool's command for any crate that keeps its kernels in a kda manifest. It knows no
//! model: it reads the manifest it is given, or the `kernels.toml` of the current directory.

#![forbid(unsafe_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use kda_build::Manifest;
use kda_build::cuda::emulation::Sanitizer;
use kda_build::manifest::read_manifest;
use kda_cli::census::{self, Census};
use kda_cli::emulate::{self, EmulateOptions};

/// kda, the build-time kernel registry: what a crate's kernel manifest says, its kernels run on
/// the emulator, and which kernels of a library a manifest can state.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Lists each kernel table of a manifest: fields, `module::entry`, required or optional,
    /// manifest line, and the counts.
    List {
        /// The manifest to list (default: `kernels.toml` in the current directory, where a
        /// crate keeps it).
        #[arg(long)]
        manifest: Option<PathBuf>,
    },
    /// Builds the kernels for the emulator (AddressSanitizer + UBSan by default) and launches
    /// every entry several times, at scalars and geometries its `requires` allow, buffers of
    /// exactly their extents and drawn layouts for its `strided` ones, saying how many launches
    /// each entry had. Exits 1 if a launch fails (a read or write past a buffer or a `__shared__`
    /// array, undefined behaviour, a barrier or warp collective some threads miss), or if an entry
    /// has no launch and its manifest entry does not say why (`unlaunched`, or a `safety`
    /// condition). Needs a C++ compiler, no GPU and no nvcc.
    Emulate {
        /// The manifest (default: `kernels.toml` in the current directory).
        #[arg(long)]
        manifest: Option<PathBuf>,
        /// The kernels directory (default: `kernels` beside the manifest).
        #[arg(long)]
        kernels: Option<PathBuf>,
        /// The sanitizer compiled in: `address` (with UBSan), `thread`, or `none` (in process).
        #[arg(long, default_value = "address", value_parser = parse_sanitizer)]
        sanitizer: SanitizerChoice,
        /// Launches per entry.
        #[arg(long, default_value_t = 8)]
        launches: u32,
        /// Seed of the launches, the inputs and the block orders.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Where the emulated build goes.
        #[arg(long, default_value = "target/kda/emulate")]
        out: PathBuf,
        /// Print a sanitizer's whole report, not only the lines that say what and where.
        #[arg(long)]
        full_reports: bool,
    },
    /// Lists each `__global__` kernel of the `.cu` and `.cuh` files under a folder (those macros
    /// declare included), says whether a manifest entry can state it and why not, and drafts the
    /// entries of those it can: their types as the kernels declare them, their extents guessed.
    /// Needs no compiler.
    Census {
        /// The folder of CUDA sources: a kernel library's, a crate's `kernels/`.
        folder: PathBuf,
        /// Write the drafted `kernels.toml` lines to this file instead of printing them.
        #[arg(long)]
        manifest_out: Option<PathBuf>,
        /// A folder whose headers a quoted `#include` may read too, searched after the including
        /// file's own folder (repeatable). Without it, only the headers under the folder of CUDA
        /// sources are read: an absolute include, or one that leaves it, is listed, not read.
        #[arg(long = "include-dir", value_name = "DIR")]
        include_dirs: Vec<PathBuf>,
    },
}

/// A `--sanitizer` value: one of the emulator's sanitizers, or none.
#[derive(Clone, Copy, Debug)]
struct SanitizerChoice(Option<Sanitizer>);

fn parse_sanitizer(name: &str) -> Result<SanitizerChoice, String> {
    if name == "none" {
        return Ok(SanitizerChoice(None));
    }
    Sanitizer::from_name(name)
        .map(|sanitizer| SanitizerChoice(Some(sanitizer)))
        .ok_or_else(|| format!("`{name}`: expected `address`, `thread` or `none`"))
}

/// Where a crate keeps its manifest, beside its `Cargo.toml`.
const DEFAULT_MANIFEST: &str = "kernels.toml";

fn main() -> anyhow::Result<ExitCode> {
    match Cli::parse().command {
        Command::List { manifest } => list(manifest).map(|()| ExitCode::SUCCESS),
        Command::Emulate { manifest, kernels, sanitizer, launches, seed, out, full_reports } => {
            let manifest = manifest_path(manifest, "emulate")?;
            let kernels =
                kernels.unwrap_or_else(|| manifest.parent().unwrap_or(Path::new("")).join("kernels"));
            let options = EmulateOptions {
                manifest,
                kernels,
                out_dir: out,
                sanitizer: sanitizer.0,
                launches,
                seed,
                full_reports,
            };
            // A reader that stops early (`kda emulate | head`) is not an error; `println!` would
            // panic.
            let mut say = |line: &str| drop(writeln!(std::io::stdout().lock(), "{line}"));
            let reports = emulate::run(&options, &mut say)?;
            let failed = reports.iter().filter(|report| report.failed()).count();
            say(&format!("{} entries, {failed} failed", reports.len()));
            Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        Command::Census { folder, manifest_out, include_dirs } => {
            census(&folder, manifest_out, &include_dirs).map(|()| ExitCode::SUCCESS)
        }
    }
}

/// The manifest a command reads: `given`, else the current directory's `kernels.toml`.
fn manifest_path(given: Option<PathBuf>, command: &str) -> anyhow::Result<PathBuf> {
    match given {
        Some(path) => Ok(path),
        None if Path::new(DEFAULT_MANIFEST).exists() => Ok(PathBuf::from(DEFAULT_MANIFEST)),
        None => bail!(
            "no `{DEFAULT_MANIFEST}` in this directory: run `kda {command}` in a crate that keeps its \
             kernels in one, or name a manifest with --manifest"
        ),
    }
}

/// `kda census`: the report, then the drafted entries, printed or written to `manifest_out`.
fn census(folder: &Path, manifest_out: Option<PathBuf>, include_dirs: &[PathBuf]) -> anyhow::Result<()> {
    if let Some(dir) = include_dirs.iter().find(|dir| !dir.is_dir()) {
        bail!("{}: --include-dir names no folder", dir.display());
    }
    let census = Census::with_include_dirs(folder, include_dirs)
        .with_context(|| format!("{}: cannot list the folder", folder.display()))?;
    let mut out = census.report();
    match (census::draft::manifest(&census), manifest_out) {
        (Some(draft), Some(path)) => {
            std::fs::write(&path, draft)
                .with_context(|| format!("{}: cannot write the draft", path.display()))?;
            out.push_str(&format!("\ndrafted entries written to {}\n", path.display()));
        }
        (Some(draft), None) => out.push_str(&format!("\ndrafted entries:\n\n{draft}")),
        (None, _) => out.push_str("\nno kernel to draft an entry for\n"),
    }
    print_all(&out)
}

/// Prints `text`; a reader that stops early (`kda list | head`) is not an error, where `print!`
/// would panic.
fn print_all(text: &str) -> anyhow::Result<()> {
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        written => Ok(written?),
    }
}

fn list(path: Option<PathBuf>) -> anyhow::Result<()> {
    let path = manifest_path(path, "list")?;
    let file = path.display().to_string();
    // Capped in size and located where not UTF-8, as the derive and the build read it.
    let text = read_manifest(&path, &file)?;
    let manifest = Manifest::parse(&file, &text)?;
    print_all(&kda_cli::listing::render(&file, &manifest))
}
