//! The namespace of a manifest's kernels: what keeps two crates' `gemm` modules apart when one
//! backend carries both.
//!
//! The derive (for each entry) and the build step (for each image) both name the namespace as
//! `<crate>@<version>:<manifest>`, the crate's name and version from cargo, the manifest as its
//! path relative to the crate root. Both sides build the path part with [`manifest_key`], so a
//! table resolves exactly the images its own build compiled.

/// The manifest part of a namespace: `path` with `\` as `/` and no leading `./`, so
/// `./kernels.toml` and `kernels.toml` name one manifest.
pub fn manifest_key(path: &str) -> String {
    let mut key = path.replace('\\', "/");
    while let Some(rest) = key.strip_prefix("./") {
        key = rest.to_owned();
    }
    key
}

/// The Rust expression, for generated code, that evaluates to the namespace of `manifest_key`
/// in the crate that compiles it: `concat!(env!("CARGO_PKG_NAME"), "@", ..., ":", key)`.
pub fn namespace_expr(manifest_key: &str) -> String {
    format!(
        "::core::concat!(::core::env!(\"CARGO_PKG_NAME\"), \"@\", ::core::env!(\"CARGO_PKG_VERSION\"), \":\", {manifest_key:?})"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_manifest_share_a_key() {
        assert_eq!(manifest_key("kernels.toml"), "kernels.toml");
        assert_eq!(manifest_key("./kernels.toml"), "kernels.toml");
        assert_eq!(manifest_key("././model\\kernels.toml"), "model/kernels.toml");
        assert_ne!(manifest_key("a/kernels.toml"), manifest_key("b/kernels.toml"));
    }

    #[test]
    fn the_expression_names_the_compiling_crate() {
        assert_eq!(
            namespace_expr("kernels.toml"),
            "::core::concat!(::core::env!(\"CARGO_PKG_NAME\"), \"@\", ::core::env!(\"CARGO_PKG_VERSION\"), \":\", \"kernels.toml\")"
        );
    }
}
