//! Finding nvcc and running it.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::BuildError;
use super::resources::without_resource_usage;
use super::target::{Arch, Plan};

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

    /// nvcc from `NVCC` (used as given), else the first that runs of `CUDA_HOME/bin/nvcc`,
    /// `CUDA_PATH/bin/nvcc`, `extra` (in order), what `cc` finds (`nvcc` on `PATH`), and the
    /// pinned toolkit's per-user install (`$KDA_CUDA_PREFIX`, by default `~/.cache/kda/cuda-<pin>`).
    pub fn find(extra: &[PathBuf]) -> Result<Self, String> {
        if let Some(path) = std::env::var_os("NVCC") {
            return Self::at(path);
        }
        let mut tried = Vec::new();
        for candidate in candidates(extra) {
            match Self::at(&candidate) {
                Ok(nvcc) => return Ok(nvcc),
                Err(why) => tried.push(why),
            }
        }
        Err(format!("nvcc was not found ({}); set NVCC or CUDA_HOME", tried.join("; ")))
    }

    /// The path of this nvcc.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its CUDA version, `(major, minor)`.
    pub fn version(&self) -> (u32, u32) {
        self.version
    }

    /// Compiles `unit` into `fatbin` with `args` (flags and `-gencode`s), in one nvcc run that
    /// also writes the files it read to `dependencies` (`-MD`), the PTX of `checked` to `ptx`, for
    /// the entry and parameter checks, and the SASS of every target to its `cubins`, and reports
    /// every kernel's resources (`--resource-usage`). `Ok(Ok(report))`: ptxas's report, for
    /// [`parse_resource_usage`](super::resources::parse_resource_usage); `Ok(Err(diagnostics))`
    /// when nvcc rejects the code; `Err` when it could not be run at all.
    pub(super) fn compile(
        &self,
        unit: &Path,
        outputs: &Outputs,
        args: &[String],
        checked: Arch,
    ) -> Result<Result<String, String>, BuildError> {
        // nvcc keeps the intermediate files of the fatbin, the embedded PTX among them, so the
        // front end and cicc run once for every output. A fresh folder per module: no stale file
        // of an earlier build is mistaken for this one's.
        let keep = outputs.fatbin.with_extension("nvcc-keep");
        let _ = std::fs::remove_dir_all(&keep);
        std::fs::create_dir_all(&keep).map_err(|source| BuildError::Io { path: keep.clone(), source })?;
        let mut command = Command::new(&self.path);
        command.args(args).arg("--fatbin").arg("--keep").arg("--keep-dir").arg(&keep);
        command.arg("--resource-usage");
        command.arg("-MD").arg("-MF").arg(&outputs.dependencies);
        command.arg("-o").arg(&outputs.fatbin).arg(unit);
        let compiled = run(command, unit).and_then(|stderr| match stderr {
            Err(diagnostics) => Ok(Err(without_resource_usage(&diagnostics))),
            Ok(report) => {
                let kept = kept_ptx(&keep, unit, checked)
                    .ok_or_else(|| not_kept(&keep, format!("{} PTX", Plan::virtual_name(checked))))?;
                rename(&kept, &outputs.ptx)?;
                for (arch, cubin) in &outputs.cubins {
                    let kept = kept_cubin(&keep, unit, *arch)
                        .ok_or_else(|| not_kept(&keep, format!("{arch} cubin")))?;
                    rename(&kept, cubin)?;
                }
                Ok(Ok(report))
            }
        });
        // The rest (preprocessed sources of a few MiB) is not needed.
        let _ = std::fs::remove_dir_all(&keep);
        compiled
    }
}

/// Where one compile writes.
pub(super) struct Outputs {
    /// The fatbin the crate embeds.
    pub fatbin: PathBuf,
    /// The PTX the checks read.
    pub ptx: PathBuf,
    /// nvcc's list of the files it read.
    pub dependencies: PathBuf,
    /// Where the SASS of each target goes, as the cubin the fatbin embeds.
    pub cubins: Vec<(Arch, PathBuf)>,
}

/// The error of a file nvcc should have kept in `keep` (`what`: `compute_90 PTX`).
fn not_kept(keep: &Path, what: String) -> BuildError {
    BuildError::Io { path: keep.to_owned(), source: std::io::Error::other(format!("nvcc kept no {what}")) }
}

fn rename(from: &Path, to: &Path) -> Result<(), BuildError> {
    std::fs::rename(from, to).map_err(|source| BuildError::Io { path: from.to_owned(), source })
}

/// The PTX for `compute_{arch}` among the files nvcc kept for `source`: `<stem>.ptx` when it
/// compiled one virtual architecture, `<stem>.compute_<arch>.ptx` when several.
fn kept_ptx(keep: &Path, source: &Path, arch: Arch) -> Option<PathBuf> {
    let stem = source.file_stem()?.to_string_lossy();
    [format!("{stem}.{}.ptx", Plan::virtual_name(arch)), format!("{stem}.ptx")]
        .into_iter()
        .map(|name| keep.join(name))
        .find(|path| path.is_file())
}

/// The SASS for `arch` among the files nvcc kept for `source`, named after the virtual
/// architecture it came from when several were compiled: `<stem>.sm_90.cubin` (one virtual
/// architecture), `<stem>.compute_90.sm_90.cubin` (several, this one also kept as PTX),
/// `<stem>.compute_90.cubin` (several, this one compiled to SASS only).
fn kept_cubin(keep: &Path, source: &Path, arch: Arch) -> Option<PathBuf> {
    let stem = source.file_stem()?.to_string_lossy();
    let virtual_name = Plan::virtual_name(arch);
    [
        format!("{stem}.{arch}.cubin"),
        format!("{stem}.{virtual_name}.{arch}.cubin"),
        format!("{stem}.{virtual_name}.cubin"),
    ]
    .into_iter()
    .map(|name| keep.join(name))
    .find(|path| path.is_file())
}

/// Runs `command` on `source`: `Ok(Ok(stderr))` when it succeeds, `Ok(Err(stderr))` when it fails.
fn run(mut command: Command, source: &Path) -> Result<Result<String, String>, BuildError> {
    let output = command
        .output()
        .map_err(|source_error| BuildError::Io { path: source.to_owned(), source: source_error })?;
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    Ok(if output.status.success() { Ok(stderr) } else { Err(stderr) })
}

/// Where to look when `NVCC` is unset.
fn candidates(extra: &[PathBuf]) -> Vec<PathBuf> {
    let mut candidates: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(|root| PathBuf::from(root).join("bin").join("nvcc"))
        .collect();
    candidates.extend_from_slice(extra);
    candidates.push(compiler_from_cc());
    candidates.extend(installed_nvcc());
    candidates
}

/// The pinned CUDA release that `scripts/install-cuda.sh` installs.
pub(crate) const PINNED_CUDA: &str = "13.0.88";

/// Where `scripts/install-cuda.sh` puts the pinned toolkit's nvcc for this user:
/// `$KDA_CUDA_PREFIX/cuda/bin/nvcc`, by default under `$HOME/.cache/kda/cuda-<PINNED_CUDA>`, so
/// that any crate's build finds it without `NVCC` set. `None` without `HOME` or the prefix.
pub(crate) fn installed_nvcc() -> Option<PathBuf> {
    let prefix = match std::env::var_os("KDA_CUDA_PREFIX") {
        Some(prefix) => PathBuf::from(prefix),
        None => {
            PathBuf::from(std::env::var_os("HOME")?).join(".cache/kda").join(format!("cuda-{PINNED_CUDA}"))
        }
    };
    Some(prefix.join("cuda/bin/nvcc"))
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
    fn the_installed_toolkit_is_the_one_the_install_script_pins() {
        let script =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/install-cuda.sh"))
                .expect("scripts/install-cuda.sh");
        assert!(
            script.contains(&format!("nvidia-cuda-nvcc=={PINNED_CUDA}\n")),
            "the script pins another nvcc"
        );
        assert!(
            script.contains(&format!("PREFIX=\"${{KDA_CUDA_PREFIX:-$HOME/.cache/kda/cuda-{PINNED_CUDA}}}\""))
        );
        assert!(installed_nvcc().is_none_or(|path| path.ends_with("cuda/bin/nvcc")));
    }

    #[test]
    fn the_release_is_read_from_nvcc_version() {
        let text = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\n";
        assert_eq!(parse_release(text), Some((13, 0)));
        assert_eq!(parse_release("no version here"), None);
    }

    #[test]
    fn the_kept_ptx_is_found_under_either_naming() {
        const SM_90: Arch = Arch { major: 9, minor: 0, specific: false };
        let keep = std::env::temp_dir().join(format!("kda-kept-ptx-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&keep);
        std::fs::create_dir_all(&keep).unwrap();
        let source = Path::new("/out/gemm.kda.cu");
        assert_eq!(kept_ptx(&keep, source, SM_90), None);
        std::fs::write(keep.join("gemm.kda.ptx"), "").unwrap();
        assert_eq!(kept_ptx(&keep, source, SM_90), Some(keep.join("gemm.kda.ptx")));
        // Several virtual architectures: each PTX is named by its own.
        std::fs::write(keep.join("gemm.kda.compute_80.ptx"), "").unwrap();
        std::fs::write(keep.join("gemm.kda.compute_90.ptx"), "").unwrap();
        assert_eq!(kept_ptx(&keep, source, SM_90), Some(keep.join("gemm.kda.compute_90.ptx")));
        std::fs::remove_dir_all(&keep).unwrap();
    }

    #[test]
    fn the_kept_cubin_is_found_under_each_naming_nvcc_uses() {
        let arch = |major, specific| Arch { major, minor: 0, specific };
        let keep = std::env::temp_dir().join(format!("kda-kept-cubin-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&keep);
        std::fs::create_dir_all(&keep).unwrap();
        let source = Path::new("/out/gemm.kda.cu");
        assert_eq!(kept_cubin(&keep, source, arch(9, false)), None);
        // As nvcc 13.0 names them: `-gencode`s for sm_90 and compute_90 (one virtual
        // architecture), then for sm_90a, sm_80 and compute_80 (two).
        for name in ["gemm.kda.sm_90.cubin", "gemm.kda.compute_90a.cubin", "gemm.kda.compute_80.sm_80.cubin"]
        {
            std::fs::write(keep.join(name), "").unwrap();
        }
        assert_eq!(kept_cubin(&keep, source, arch(9, false)), Some(keep.join("gemm.kda.sm_90.cubin")));
        assert_eq!(kept_cubin(&keep, source, arch(9, true)), Some(keep.join("gemm.kda.compute_90a.cubin")));
        assert_eq!(
            kept_cubin(&keep, source, arch(8, false)),
            Some(keep.join("gemm.kda.compute_80.sm_80.cubin"))
        );
        assert_eq!(kept_cubin(&keep, source, arch(10, false)), None);
        std::fs::remove_dir_all(&keep).unwrap();
    }

    #[test]
    fn a_missing_nvcc_is_an_error_not_a_panic() {
        assert!(Nvcc::at("/nonexistent/bin/nvcc").unwrap_err().contains("cannot run"));
    }
}
