//! How long `#[derive(KernelTable)]` takes to expand: read, parse and validate the manifest, then
//! generate the table, on `proc_macro2` tokens, for tables of 16, 1,000 and 10,000 entries, each
//! entry with params and a requirement (so each gets its signature and launcher), and for a
//! library's table of 1,000 entries of which 250 have four variants.
//!
//! `cargo bench -p kda-macros --bench expand`

use kda_build::codegen::{DeriveSite, derive_kernel_table};
use kda_test_support::manifests;
use quote::quote;

fn main() {
    divan::main();
}

/// A site with no crate root: the manifests are named by absolute path.
fn site() -> DeriveSite {
    DeriveSite { crate_root: None, deriving_file: None }
}

/// Tables of 16 entries (about a model's), 1,000 and 10,000.
#[divan::bench(args = [16, 1_000, 10_000])]
fn generated_table(bencher: divan::Bencher, entries: usize) {
    expand(bencher, &format!("large_{entries}"), &manifests::large_manifest(entries));
}

/// A kernel library's table of 1,000 entries, 250 of them instantiated for four element types
/// (1,750 entries once expanded, each variant group with its generic launcher).
#[divan::bench]
fn library_table(bencher: divan::Bencher) {
    expand(bencher, "library_1000", &manifests::library_manifest(1_000));
}

/// Expands the derive on the manifest `text`, written as `name.toml`.
fn expand(bencher: divan::Bencher, name: &str, text: &str) {
    let dir = std::env::temp_dir().join(format!("kda-bench-expand-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = dir.join(format!("{name}.toml"));
    std::fs::write(&manifest, text).unwrap();
    let path = manifest.to_str().unwrap();
    let site = site();
    bencher.bench(|| {
        derive_kernel_table(
            quote!(
                #[kernel_table(manifest = #path)]
                struct Large;
            ),
            &site,
        )
    });
}
