//! `kda`: the GLM-5 Next KDA model's command line.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use kda::kernels::{MANIFEST, MANIFEST_NAME};
use kda_build::Manifest;

/// The GLM-5 Next KDA block and its kernel registry.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Lists each kernel table of the manifest: fields, `module::entry`, required or optional,
    /// manifest line, and the counts.
    List {
        /// A manifest to list instead of the one compiled into this binary.
        #[arg(long)]
        manifest: Option<PathBuf>,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::List { manifest } => list(manifest),
    }
}

fn list(path: Option<PathBuf>) -> anyhow::Result<()> {
    let (file, text) = match path {
        Some(path) => {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            (path.display().to_string(), text)
        }
        None => (MANIFEST_NAME.to_owned(), MANIFEST.to_owned()),
    };
    let manifest = Manifest::parse(&file, &text)?;
    print!("{}", kda::listing::render(&file, &manifest));
    Ok(())
}
