//! Finding nvcc and running it.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::BuildError;

/// The CUDA version the target machines' driver runs: PTX from a newer nvcc does not load there.
const DRIVER_CUDA: (u32, u32) = (13, 0);

/// A working nvcc and its CUDA version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nvcc {
    path: PathBuf,
    version: (u32, u32),
}

impl Nvcc {
    /// The nvcc at `path`, if it runs and says its version.
    pub fn at(path: impl Into<PathBuf>) -> Result<Self, String> {
        let path = path.into();
        let output = Command::new(&path)
            .arg("--version")
            .output()
            .map_err(|error| format!("cannot run {}: {error}", path.display()))?;
        let text = String::from_utf8_lossy(&output.stdout);
        let version = parse_release(&text)
            .ok_or_else(|| format!("{} --version printed no `release X.Y`: {text:?}", path.display()))?;
        Ok(Self { path, version })
    }

    /// nvcc from `NVCC` (used as given), else `CUDA_HOME`/`CUDA_PATH`, the project's install
    /// prefix (`scripts/install-cuda.sh`, `KDA_CUDA_PREFIX`), else what `cc` finds (`PATH`).
    pub fn find() -> Result<Self, String> {
        if let Some(path) = std::env::var_os("NVCC") {
            return Self::at(path);
        }
        let mut tried = Vec::new();
        for candidate in candidates() {
            match Self::at(&candidate) {
                Ok(nvcc) => return Ok(nvcc),
                Err(why) => tried.push(why),
            }
        }
        Err(format!(
            "nvcc was not found ({}); install it with scripts/install-cuda.sh or set NVCC",
            tried.join("; ")
        ))
    }

    /// The path of this nvcc.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its CUDA version, `(major, minor)`.
    pub fn version(&self) -> (u32, u32) {
        self.version
    }

    /// A warning when this nvcc's PTX is too new for the targets' CUDA 13.0 driver.
    pub fn version_warning(&self) -> Option<String> {
        let (major, minor) = self.version;
        (self.version > DRIVER_CUDA).then(|| {
            format!(
                "nvcc is CUDA {major}.{minor}, newer than the CUDA {}.{} driver of the target machines: \
                 its PTX will not load there (SASS for the listed architectures still does); \
                 scripts/install-cuda.sh installs the pinned 13.0",
                DRIVER_CUDA.0, DRIVER_CUDA.1
            )
        })
    }

    /// Compiles `source` into a fatbin (SASS for every `caps`, PTX for the newest) and writes the
    /// PTX it embeds to `ptx`, for the entry and parameter checks, in one nvcc run.
    pub fn compile(
        &self,
        source: &Path,
        fatbin: &Path,
        ptx: &Path,
        caps: &[u32],
        defines: &[String],
        include_dir: &Path,
    ) -> Result<(), BuildError> {
        let newest = caps.iter().copied().max().unwrap_or(90);
        let common = |command: &mut Command| {
            command.args(["-O3", "--fmad=false", "-std=c++17", "-I"]).arg(include_dir).args(defines);
        };
        // nvcc keeps the intermediate files of the fatbin, the embedded PTX among them, so the
        // front end and cicc run once for both outputs. A fresh folder per module: no stale file
        // of an earlier build is mistaken for this one's.
        let keep = fatbin.with_extension("nvcc-keep");
        let _ = std::fs::remove_dir_all(&keep);
        std::fs::create_dir_all(&keep)
            .map_err(|error| BuildError::Io { path: keep.clone(), source: error })?;
        let mut fatbin_command = Command::new(&self.path);
        common(&mut fatbin_command);
        fatbin_command.arg("--fatbin");
        for cap in caps {
            fatbin_command.arg(format!("-gencode=arch=compute_{cap},code=sm_{cap}"));
        }
        fatbin_command.arg(format!("-gencode=arch=compute_{newest},code=compute_{newest}"));
        fatbin_command.arg("--keep").arg("--keep-dir").arg(&keep);
        fatbin_command.arg("-o").arg(fatbin).arg(source);
        let compiled = run(fatbin_command, source).and_then(|()| match kept_ptx(&keep, source, newest) {
            Some(kept) => {
                std::fs::rename(&kept, ptx).map_err(|error| BuildError::Io { path: kept, source: error })
            }
            None => {
                // An nvcc that names its kept files otherwise: compile the PTX on its own.
                let mut ptx_command = Command::new(&self.path);
                common(&mut ptx_command);
                ptx_command
                    .arg("--ptx")
                    .arg(format!("-arch=compute_{newest}"))
                    .arg("-o")
                    .arg(ptx)
                    .arg(source);
                run(ptx_command, source)
            }
        });
        // The rest (preprocessed sources of a few MiB, cubins) is not needed.
        let _ = std::fs::remove_dir_all(&keep);
        compiled
    }
}

/// The PTX for `compute_{arch}` among the files nvcc kept for `source`: `<stem>.ptx` when it
/// compiled one virtual architecture, `<stem>.compute_<arch>.ptx` when several.
fn kept_ptx(keep: &Path, source: &Path, arch: u32) -> Option<PathBuf> {
    let stem = source.file_stem()?.to_string_lossy();
    [format!("{stem}.compute_{arch}.ptx"), format!("{stem}.ptx")]
        .into_iter()
        .map(|name| keep.join(name))
        .find(|path| path.is_file())
}

fn run(mut command: Command, source: &Path) -> Result<(), BuildError> {
    let output = command
        .output()
        .map_err(|source_error| BuildError::Io { path: source.to_owned(), source: source_error })?;
    if output.status.success() {
        Ok(())
    } else {
        Err(BuildError::Compile {
            path: source.to_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        })
    }
}

/// Where to look when `NVCC` is unset.
fn candidates() -> Vec<PathBuf> {
    let mut candidates: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(|root| PathBuf::from(root).join("bin").join("nvcc"))
        .collect();
    candidates.push(install_prefix().join("cuda").join("bin").join("nvcc"));
    candidates.push(compiler_from_cc());
    candidates
}

/// Where `scripts/install-cuda.sh` installs the pinned toolkit.
fn install_prefix() -> PathBuf {
    std::env::var_os("KDA_CUDA_PREFIX").map(PathBuf::from).unwrap_or_else(|| {
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
        home.join(".cache/kda/cuda-13.0.88")
    })
}

/// The CUDA compiler `cc` would use (`NVCC`, else `nvcc` on `PATH`).
fn compiler_from_cc() -> PathBuf {
    let target =
        std::env::var("TARGET").unwrap_or_else(|_| format!("{}-unknown-linux-gnu", std::env::consts::ARCH));
    let host = std::env::var("HOST").unwrap_or_else(|_| target.clone());
    cc::Build::new()
        .cuda(true)
        .cargo_metadata(false)
        .cargo_warnings(false)
        .opt_level(3)
        .target(&target)
        .host(&host)
        .try_get_compiler()
        .map_or_else(|_| PathBuf::from("nvcc"), |tool| tool.path().to_owned())
}

/// `(major, minor)` from nvcc's `Cuda compilation tools, release 13.0, V13.0.88`.
fn parse_release(text: &str) -> Option<(u32, u32)> {
    let release = text.split("release ").nth(1)?;
    let version = release.split([',', ' ', '\n']).next()?;
    let (major, minor) = version.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_release_is_read_from_nvcc_version() {
        let text = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\n";
        assert_eq!(parse_release(text), Some((13, 0)));
        assert_eq!(parse_release("no version here"), None);
    }

    #[test]
    fn only_an_nvcc_newer_than_the_driver_is_warned_about() {
        let nvcc = |version| Nvcc { path: PathBuf::from("nvcc"), version };
        assert_eq!(nvcc((13, 0)).version_warning(), None);
        assert_eq!(nvcc((12, 8)).version_warning(), None);
        assert!(nvcc((13, 5)).version_warning().unwrap().contains("CUDA 13.5"));
    }

    #[test]
    fn the_kept_ptx_is_found_under_either_naming() {
        let keep = std::env::temp_dir().join(format!("kda-kept-ptx-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&keep);
        std::fs::create_dir_all(&keep).unwrap();
        let source = Path::new("/out/gemm.kda.cu");
        assert_eq!(kept_ptx(&keep, source, 90), None);
        std::fs::write(keep.join("gemm.kda.ptx"), "").unwrap();
        assert_eq!(kept_ptx(&keep, source, 90), Some(keep.join("gemm.kda.ptx")));
        // Several virtual architectures: each PTX is named by its own.
        std::fs::write(keep.join("gemm.kda.compute_80.ptx"), "").unwrap();
        std::fs::write(keep.join("gemm.kda.compute_90.ptx"), "").unwrap();
        assert_eq!(kept_ptx(&keep, source, 90), Some(keep.join("gemm.kda.compute_90.ptx")));
        std::fs::remove_dir_all(&keep).unwrap();
    }

    #[test]
    fn a_missing_nvcc_is_an_error_not_a_panic() {
        assert!(Nvcc::at("/nonexistent/bin/nvcc").unwrap_err().contains("cannot run"));
    }
}
