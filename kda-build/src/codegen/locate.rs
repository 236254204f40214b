//! Finding the manifest a derive names, and reading it.

use std::path::{Path, PathBuf};

use super::DeriveSite;

/// A manifest read from disk.
#[derive(Clone, Debug)]
pub struct ManifestFile {
    /// The path as the user wrote it, which every message shows.
    pub display: String,
    /// Where it was found, absolute when the site's paths are.
    pub path: PathBuf,
    /// Its contents.
    pub text: String,
}

/// Finds `relative` under the crate root, else beside the deriving file, and reads it.
pub(super) fn locate(relative: &str, site: &DeriveSite) -> Result<ManifestFile, String> {
    let candidates: Vec<PathBuf> = if Path::new(relative).is_absolute() {
        vec![PathBuf::from(relative)]
    } else {
        let beside_file = site.deriving_file.as_deref().and_then(Path::parent);
        site.crate_root
            .iter()
            .map(PathBuf::as_path)
            .chain(beside_file)
            .map(|dir| dir.join(relative))
            .collect()
    };
    let Some(path) = candidates.iter().find(|path| path.is_file()) else {
        let tried: Vec<String> = candidates.iter().map(|path| path.display().to_string()).collect();
        return Err(format!(
            "cannot find the kernel manifest `{relative}` (looked for {}); \
             `manifest` is relative to the crate root",
            if tried.is_empty() {
                "it nowhere: no crate root is known".to_owned()
            } else {
                tried.join(" and ")
            }
        ));
    };
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("cannot read the kernel manifest `{}`: {error}", path.display()))?;
    Ok(ManifestFile { display: relative.to_owned(), path: path.clone(), text })
}
