//! `kda`: the tool's command for any crate that keeps its kernels in a kda manifest. It knows no
//! model: it reads the manifest it is given, or the `kernels.toml` of the current directory.

#![forbid(unsafe_code)]

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::bail;
use clap::{Parser, Subcommand};
use kda_build::Manifest;
use kda_build::manifest::read_manifest;

/// kda, the build-time kernel registry: what a crate's kernel manifest says.
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
}

/// Where a crate keeps its manifest, beside its `Cargo.toml`.
const DEFAULT_MANIFEST: &str = "kernels.toml";

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::List { manifest } => list(manifest),
    }
}

fn list(path: Option<PathBuf>) -> anyhow::Result<()> {
    let path = match path {
        Some(path) => path,
        None if Path::new(DEFAULT_MANIFEST).exists() => PathBuf::from(DEFAULT_MANIFEST),
        None => bail!(
            "no `{DEFAULT_MANIFEST}` in this directory: run `kda list` in a crate that keeps its kernels \
             in one, or name a manifest with --manifest"
        ),
    };
    let file = path.display().to_string();
    // Capped in size and located where not UTF-8, as the derive and the build read it.
    let text = read_manifest(&path, &file)?;
    let manifest = Manifest::parse(&file, &text)?;
    let listing = kda_cli::listing::render(&file, &manifest);
    // A reader that stops early (`kda list | head`) is not an error; `print!` would panic.
    match std::io::stdout().lock().write_all(listing.as_bytes()) {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        written => Ok(written?),
    }
}
