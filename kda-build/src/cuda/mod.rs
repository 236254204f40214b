//! The CUDA build step, for `build.rs`: compile each `kernels/<module>.cu` of the manifest with
//! nvcc into a fatbin, check that every manifest entry is exported under its exact name and takes
//! the parameters its `params` declare, and generate the Rust that embeds the images and the
//! `[defines]`.
//!
//! ```no_run
//! // build.rs
//! if let Err(error) = kda_build::cuda::KernelBuild::from_env().and_then(|build| build.run()) {
//!     eprintln!("{error}");
//!     std::process::exit(1);
//! }
//! ```
//!
//! Without nvcc the build warns and embeds no image (the CUDA backend then reports every module
//! as not built); `KDA_REQUIRE_NVCC=1` makes that an error.

mod generate;
mod nvcc;
mod signature;
mod symbols;

use std::path::{Path, PathBuf};

pub use nvcc::Nvcc;
pub use signature::{PtxParam, SignatureMismatch, SignatureProblem, ptx_params};
pub use symbols::{EntryProblem, check_entries, ptx_entries};

use crate::Manifest;

/// Everything that can stop the kernel build.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The manifest does not parse.
    #[error(transparent)]
    Manifest(#[from] crate::ManifestError),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A variable the build needs is unset.
    #[error("environment variable {0} is not set (is this running from build.rs?)")]
    MissingEnv(&'static str),
    /// `CUDA_COMPUTE_CAP` is not a list of architectures.
    #[error("CUDA_COMPUTE_CAP={0:?}: expected compute capabilities such as `90` or `80,90`")]
    ComputeCap(String),
    /// nvcc is required (`KDA_REQUIRE_NVCC=1`) but was not found.
    #[error("nvcc is required (KDA_REQUIRE_NVCC=1) but was not found: {0}")]
    NvccRequired(String),
    /// A module listed in the manifest has no source.
    #[error("module `{module}` (listed at {manifest}:{line}) has no source {path}")]
    MissingSource {
        /// The module.
        module: String,
        /// The manifest.
        manifest: String,
        /// Where the manifest first lists it.
        line: u32,
        /// The source it should be in.
        path: PathBuf,
    },
    /// nvcc failed on a module (for a reason other than a parameter check).
    #[error("nvcc failed on {path}:\n{stderr}")]
    Compile {
        /// The source.
        path: PathBuf,
        /// nvcc's diagnostics.
        stderr: String,
    },
    /// Manifest entries the compiled kernels do not export under their exact names.
    #[error("{}", problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Entries {
        /// One per entry.
        problems: Vec<EntryProblem>,
    },
    /// Manifest entries whose `params` the compiled kernels contradict, of every module.
    #[error("{}", problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Signatures {
        /// One per mismatch, in manifest order.
        problems: Vec<SignatureProblem>,
    },
}

/// What a successful build produced.
#[derive(Debug, Default)]
pub struct BuildOutput {
    /// `(module, fatbin path)` per compiled module, in manifest order; empty without nvcc.
    pub images: Vec<(String, PathBuf)>,
    /// Things worth a `cargo:warning`.
    pub warnings: Vec<String>,
    /// The generated Rust source, also written to `OUT_DIR/kda_kernels.rs`.
    pub generated: PathBuf,
}

/// A configured kernel build (prost-build style: set what differs from the defaults, then run).
#[derive(Clone, Debug)]
pub struct KernelBuild {
    manifest: PathBuf,
    manifest_name: String,
    kernels_dir: PathBuf,
    out_dir: PathBuf,
    compute_caps: Vec<u32>,
    require_nvcc: bool,
    nvcc: NvccSource,
    cargo_directives: bool,
}

/// Where a build gets its nvcc.
#[derive(Clone, Debug)]
enum NvccSource {
    /// [`Nvcc::find`].
    Search,
    /// This one.
    Given(Nvcc),
    /// None: build no image.
    Absent,
}

/// The environment a build script reads, so tests can give it explicitly.
const ENV_VARS: [&str; 6] =
    ["NVCC", "CUDA_HOME", "CUDA_PATH", "CUDA_COMPUTE_CAP", "KDA_REQUIRE_NVCC", "KDA_CUDA_PREFIX"];

impl KernelBuild {
    /// A build of `manifest` (the path errors show as written) with sources in `kernels_dir`,
    /// writing to `out_dir`, for sm_90, nvcc optional and found the usual way.
    pub fn new(
        manifest: impl Into<PathBuf>,
        kernels_dir: impl Into<PathBuf>,
        out_dir: impl Into<PathBuf>,
    ) -> Self {
        let manifest = manifest.into();
        let manifest_name = manifest
            .file_name()
            .map_or_else(|| manifest.display().to_string(), |name| name.to_string_lossy().into_owned());
        Self {
            manifest,
            manifest_name,
            kernels_dir: kernels_dir.into(),
            out_dir: out_dir.into(),
            compute_caps: vec![90],
            require_nvcc: false,
            nvcc: NvccSource::Search,
            cargo_directives: false,
        }
    }

    /// The build `build.rs` runs: `kernels.toml` and `kernels/` at the crate root, `OUT_DIR`,
    /// `CUDA_COMPUTE_CAP` (default 90; a list such as `80,90` allowed), `KDA_REQUIRE_NVCC=1`,
    /// and nvcc from `NVCC`, `CUDA_HOME`/`CUDA_PATH`, the project's install prefix or `PATH`.
    /// Prints the cargo directives that rebuild only when those inputs change.
    pub fn from_env() -> Result<Self, BuildError> {
        let root = PathBuf::from(env("CARGO_MANIFEST_DIR")?);
        let mut build = Self::new(root.join("kernels.toml"), root.join("kernels"), env("OUT_DIR")?);
        if let Ok(caps) = std::env::var("CUDA_COMPUTE_CAP") {
            build = build.compute_caps(parse_compute_caps(&caps)?);
        }
        build.require_nvcc = std::env::var("KDA_REQUIRE_NVCC").is_ok_and(|value| value == "1");
        build.cargo_directives = true;
        Ok(build)
    }

    /// Target architectures (`90` = sm_90): SASS for each, plus PTX of the newest.
    pub fn compute_caps(mut self, caps: Vec<u32>) -> Self {
        self.compute_caps = caps;
        self
    }

    /// Fail instead of warning when nvcc is absent.
    pub fn require_nvcc(mut self, require: bool) -> Self {
        self.require_nvcc = require;
        self
    }

    /// Use this nvcc rather than looking for one.
    pub fn nvcc(mut self, nvcc: Nvcc) -> Self {
        self.nvcc = NvccSource::Given(nvcc);
        self
    }

    /// Build as on a machine without nvcc: no image, the `[defines]` still generated.
    pub fn without_nvcc(mut self) -> Self {
        self.nvcc = NvccSource::Absent;
        self
    }

    /// Reads the manifest, compiles and checks every module, and writes `kda_kernels.rs`.
    pub fn run(&self) -> Result<BuildOutput, BuildError> {
        self.rerun_if_changed();
        let text = read(&self.manifest)?;
        let manifest = Manifest::parse(&self.manifest_name, &text)?;
        // Checked with or without nvcc: a module with no source is never built anywhere.
        let modules = self.modules(&manifest)?;
        let mut output = BuildOutput::default();
        let found = match &self.nvcc {
            NvccSource::Search => Nvcc::find(),
            NvccSource::Given(nvcc) => Ok(nvcc.clone()),
            NvccSource::Absent => Err("this build was told to use no nvcc".to_owned()),
        };
        let nvcc = match found {
            Ok(nvcc) => Some(nvcc),
            Err(why) if self.require_nvcc => return Err(BuildError::NvccRequired(why)),
            Err(why) => {
                output.warnings.push(format!(
                    "no CUDA kernel images are built: {why}; set KDA_REQUIRE_NVCC=1 to make this an error"
                ));
                None
            }
        };
        if let Some(nvcc) = &nvcc {
            output.warnings.extend(nvcc.version_warning());
            output.images = self.compile_all(nvcc, &manifest, &modules, &mut output.warnings)?;
        }
        let generated = generate::rust_source(&manifest, &self.manifest_name, &output.images, nvcc.is_none());
        output.generated = self.out_dir.join("kda_kernels.rs");
        write(&output.generated, &generated)?;
        if self.cargo_directives {
            for warning in &output.warnings {
                println!("cargo::warning={warning}");
            }
        }
        Ok(output)
    }

    /// Compiles every module in parallel, each through its generated unit with the C type checks
    /// of its entries' `params`, then checks the entries and the parameter widths of all of them.
    fn compile_all(
        &self,
        nvcc: &Nvcc,
        manifest: &Manifest,
        modules: &[(String, PathBuf)],
        warnings: &mut Vec<String>,
    ) -> Result<Vec<(String, PathBuf)>, BuildError> {
        let defines: Vec<String> =
            manifest.defines.iter().map(|d| format!("-D{}={}", d.name, d.value)).collect();
        let results: Vec<Result<_, BuildError>> = std::thread::scope(|scope| {
            let jobs: Vec<_> = modules
                .iter()
                .map(|(module, source)| {
                    let defines = &defines;
                    scope.spawn(move || self.compile_module(nvcc, manifest, module, source, defines))
                })
                .collect();
            jobs.into_iter()
                .map(|job| job.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
                .collect()
        });
        // Every module's parameter mismatches together; any other failure comes first.
        let mut compiled = Vec::new();
        let mut mismatches = Vec::new();
        for result in results {
            match result {
                Ok(module) => compiled.push(module),
                Err(BuildError::Signatures { problems }) => mismatches.extend(problems),
                Err(error) => return Err(error),
            }
        }
        if !mismatches.is_empty() {
            signature::sort_problems(&mut mismatches);
            return Err(BuildError::Signatures { problems: mismatches });
        }
        let exported: Vec<(String, Vec<String>)> =
            compiled.iter().map(|(module, _, ptx)| (module.clone(), ptx_entries(ptx))).collect();
        let problems = check_entries(manifest, &self.manifest_name, &self.kernels_dir, &exported, warnings);
        if !problems.is_empty() {
            return Err(BuildError::Entries { problems });
        }
        let ptx: Vec<(String, String)> =
            compiled.iter().map(|(module, _, ptx)| (module.clone(), ptx.clone())).collect();
        let mut problems = signature::check_ptx_params(manifest, &self.manifest_name, &ptx);
        if !problems.is_empty() {
            signature::sort_problems(&mut problems);
            return Err(BuildError::Signatures { problems });
        }
        Ok(compiled.into_iter().map(|(module, fatbin, _)| (module, fatbin)).collect())
    }

    /// Compiles one module through `OUT_DIR/<module>.kda.cu`: `(module, fatbin, PTX text)`.
    fn compile_module(
        &self,
        nvcc: &Nvcc,
        manifest: &Manifest,
        module: &str,
        source: &Path,
        defines: &[String],
    ) -> Result<(String, PathBuf, String), BuildError> {
        let absolute = std::path::absolute(source)
            .map_err(|error| BuildError::Io { path: source.to_owned(), source: error })?;
        let unit = self.out_dir.join(format!("{module}.kda.cu"));
        write(&unit, &signature::translation_unit(manifest, &self.manifest_name, module, &absolute))?;
        let fatbin = self.out_dir.join(format!("{module}.fatbin"));
        let ptx = self.out_dir.join(format!("{module}.ptx"));
        match nvcc.compile(&unit, &fatbin, &ptx, &self.compute_caps, defines, &self.kernels_dir) {
            Ok(()) => Ok((module.to_owned(), fatbin, read(&ptx)?)),
            Err(BuildError::Compile { stderr, .. }) => {
                Err(match signature::problems_from_nvcc(&stderr, manifest, &self.manifest_name, module) {
                    Some(problems) => BuildError::Signatures { problems },
                    // Named by the module's source, which nvcc's messages point into.
                    None => BuildError::Compile { path: source.to_owned(), stderr },
                })
            }
            Err(error) => Err(error),
        }
    }

    /// Every module the manifest lists, once, in manifest order, with its source.
    fn modules(&self, manifest: &Manifest) -> Result<Vec<(String, PathBuf)>, BuildError> {
        let mut modules: Vec<(String, PathBuf)> = Vec::new();
        // A set, not a scan of `modules`: a manifest may list 100,000 modules.
        let mut seen = std::collections::HashSet::new();
        for entry in manifest.tables.iter().flat_map(|table| &table.entries) {
            if !seen.insert(entry.module.as_str()) {
                continue;
            }
            let path = self.kernels_dir.join(format!("{}.cu", entry.module));
            if !path.is_file() {
                return Err(BuildError::MissingSource {
                    module: entry.module.clone(),
                    manifest: self.manifest_name.clone(),
                    line: entry.location.line,
                    path,
                });
            }
            modules.push((entry.module.clone(), path));
        }
        Ok(modules)
    }

    fn rerun_if_changed(&self) {
        if !self.cargo_directives {
            return;
        }
        // A directory is scanned whole: sources and headers alike.
        println!("cargo::rerun-if-changed={}", self.kernels_dir.display());
        println!("cargo::rerun-if-changed={}", self.manifest.display());
        for var in ENV_VARS {
            println!("cargo::rerun-if-env-changed={var}");
        }
    }
}

fn parse_compute_caps(caps: &str) -> Result<Vec<u32>, BuildError> {
    let parsed: Option<Vec<u32>> = caps
        .split([',', ' ', ';'])
        .filter(|cap| !cap.is_empty())
        .map(|cap| cap.trim_start_matches("sm_").parse().ok().filter(|cap| *cap >= 50))
        .collect();
    match parsed {
        Some(caps) if !caps.is_empty() => Ok(caps),
        _ => Err(BuildError::ComputeCap(caps.to_owned())),
    }
}

fn env(name: &'static str) -> Result<String, BuildError> {
    std::env::var(name).map_err(|_| BuildError::MissingEnv(name))
}

fn read(path: &Path) -> Result<String, BuildError> {
    std::fs::read_to_string(path).map_err(|source| BuildError::Io { path: path.to_owned(), source })
}

fn write(path: &Path, contents: &str) -> Result<(), BuildError> {
    // Leave an unchanged file alone, so nothing downstream sees a new mtime.
    if std::fs::read_to_string(path).is_ok_and(|old| old == contents) {
        return Ok(());
    }
    std::fs::write(path, contents).map_err(|source| BuildError::Io { path: path.to_owned(), source })
}

#[cfg(test)]
mod tests {
    use super::parse_compute_caps;

    #[test]
    fn compute_caps_are_a_list_of_architectures() {
        assert_eq!(parse_compute_caps("90").unwrap(), [90]);
        assert_eq!(parse_compute_caps("80,90").unwrap(), [80, 90]);
        assert_eq!(parse_compute_caps("sm_90 sm_100").unwrap(), [90, 100]);
        assert!(parse_compute_caps("").is_err());
        assert!(parse_compute_caps("ninety").is_err());
        assert!(parse_compute_caps("35").is_err());
    }
}
