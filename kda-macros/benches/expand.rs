//! How long `#[derive(KernelTable)]` takes to expand: read, parse and validate the manifest, then
//! generate the table, on `proc_macro2` tokens, for tables of 16, 1,000 and 10,000 entries, each
//! entry with params and a requirement (so each gets its signature and launcher).
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
    let dir = std::env::temp_dir().join(format!("kda-bench-expand-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = dir.join(format!("large_{entries}.toml"));
    std::fs::write(&manifest, manifests::large_manifest(entries)).unwrap();
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
