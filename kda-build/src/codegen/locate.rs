//! Finding the manifest a derive names, and reading it.

use std::path::{Path, PathBuf};

use super::DeriveSite;

/// A manifest read from disk.
#[derive(Clone, Debug)]
pub(super) struct ManifestFile {
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
        // The crate root is named, not printed: it is the same for every manifest of the crate
        // and, in a build of a copied crate, a path under the target directory.
        let mut tried: Vec<String> = Vec::new();
        if site.crate_root.is_some() && !Path::new(relative).is_absolute() {
            tried.push("at the crate root".to_owned());
        }
        let rest = candidates.iter().skip(tried.len());
        tried.extend(rest.map(|path| path.display().to_string()));
        return Err(format!(
            "cannot find the kernel manifest `{relative}` (looked for it {}); \
             `manifest` is relative to the crate root",
            if tried.is_empty() {
                "nowhere: no crate root is known".to_owned()
            } else {
                tried.join(" and at ")
            }
        ));
    };
    let text = crate::manifest::read_manifest(path, relative).map_err(|error| error.to_string())?;
    Ok(ManifestFile { display: relative.to_owned(), path: path.clone(), text })
}
