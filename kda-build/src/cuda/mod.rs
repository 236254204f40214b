//! The CUDA build step, for `build.rs`: compile each `kernels/<module>.cu` of the manifest with
//! nvcc into a fatbin, check that every manifest entry is exported under its exact name and takes
//! the parameters its `params` declare, and generate the Rust that embeds the images and the
//! `[defines]`, which the crate includes with `kda_runtime::include_kernels!()`. The same nvcc
//! run reports every kernel's registers, spills, stack frame and shared memory ([`resources`]):
//! the build records them, lists them in the generated file, and fails a kernel that spills.
//!
//! ```no_run
//! // build.rs
//! fn main() -> Result<(), kda_build::cuda::BuildError> {
//!     kda_build::cuda::KernelBuild::from_env()?.run().map(drop)
//! }
//! ```
//!
//! One front end for mistakes: `run` fails only when the build itself cannot proceed (a manifest
//! it cannot read, a file it cannot write). What is wrong with the *kernels* (a module without a
//! source, a compiler's errors, an entry the module does not export, params the kernel
//! contradicts, a kernel that spills registers, nvcc required and absent) becomes a
//! `compile_error!` in the generated file, located at `kernels.toml:LINE:COL`, and a manifest
//! that does not parse is left to the derive, which reports it located too: either way the user
//! reads compiler errors, not a build-script dump. The entry and parameter checks are made by
//! whichever compiler the build has, nvcc or the emulated build's C++ compiler, with the same
//! messages; with both, nvcc's come first and the emulated build adds only what nvcc did not
//! report. A compiler's rejection of a module shows its first located error;
//! `KDA_FULL_DIAGNOSTICS=1` (or [`KernelBuild::full_diagnostics`]) shows its whole output.
//!
//! Each module is compiled once per distinct input and cached in `OUT_DIR` (see `cache`), at
//! most `NUM_JOBS` at a time. Without nvcc the build warns and embeds no image (the CUDA backend
//! then reports every module as not built); `KDA_REQUIRE_NVCC=1` makes that an error.
//!
//! The environment [`KernelBuild::from_env`] reads: `CARGO_MANIFEST_DIR`, `OUT_DIR` and
//! `NUM_JOBS` (set by cargo), `CUDA_COMPUTE_CAP` (the [`target`] list, default `90`),
//! `KDA_REQUIRE_NVCC`, `KDA_FULL_DIAGNOSTICS`, `CARGO_FEATURE_EMULATION` (the crate's feature
//! `emulation`), [`SANITIZER_ENV`] (`KDA_EMULATOR_SANITIZER`: the sanitizer the emulated kernels
//! are built with), and `NVCC`, `CUDA_HOME`, `CUDA_PATH`, `KDA_CUDA_PREFIX` to find nvcc
//! ([`Nvcc::find`]).

mod cache;
mod embed;
pub mod emulation;
mod jobs;
mod module;
mod nvcc;
mod problem;
mod prove;
pub mod resources;
pub mod scan;
mod symbols;
pub mod target;

use std::path::{Path, PathBuf};

pub use nvcc::Nvcc;
pub use problem::Problem;
pub use prove::{PtxParam, SignatureMismatch, SignatureProblem, ptx_params};
pub use resources::{EntryResources, ResourceUsage, SpillProblem};
pub use symbols::{EntryProblem, ProblemKind};
use symbols::{check_entries, ptx_entries, ptx_isa};
pub use target::{Arch, Target, parse_targets};

use crate::manifest::{ReadError, read_manifest};
use crate::{Manifest, ManifestError};
use module::{Compiled, Compiler};
use target::Plan;

/// What stops the build step itself (as opposed to the kernels' [`Problem`]s, which it reports
/// as compiler errors).
#[derive(thiserror::Error)]
pub enum BuildError {
    /// The manifest could not be read (missing, unreadable, past the size cap).
    #[error(transparent)]
    Manifest(ReadError),
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
    /// `CUDA_COMPUTE_CAP` is not a list of targets.
    #[error(
        "CUDA_COMPUTE_CAP={0:?}: expected targets such as `90`, `80,90`, `90a` or `compute_90` (PTX only)"
    )]
    Targets(String),
    /// [`SANITIZER_ENV`] names no sanitizer.
    #[error("{SANITIZER_ENV}={0:?}: expected {choices}", choices = sanitizer_choices())]
    Sanitizer(String),
}

/// The environment variable that builds a crate's emulated kernels with a sanitizer, so that its
/// tests run them under it with no change to their code: `address` (AddressSanitizer + UBSan),
/// `thread` (ThreadSanitizer), or `none` (as unset).
pub const SANITIZER_ENV: &str = "KDA_EMULATOR_SANITIZER";

/// The values [`SANITIZER_ENV`] accepts, as its error lists them.
fn sanitizer_choices() -> String {
    let named = emulation::Sanitizer::ALL.map(|sanitizer| format!("`{}` ({sanitizer})", sanitizer.name()));
    format!("{} or `none`", named.join(", "))
}

/// The sanitizer [`SANITIZER_ENV`]'s `value` names: `None` where it is unset, empty or `none`.
fn sanitizer_named(value: Option<std::ffi::OsString>) -> Result<Option<emulation::Sanitizer>, BuildError> {
    let Some(value) = value else { return Ok(None) };
    let value =
        value.into_string().map_err(|value| BuildError::Sanitizer(value.to_string_lossy().into_owned()))?;
    match value.as_str() {
        "" | "none" => Ok(None),
        name => emulation::Sanitizer::from_name(name).map(Some).ok_or(BuildError::Sanitizer(value)),
    }
}

/// As its message: a build script returning `Result<(), BuildError>` shows cargo the sentence,
/// not a struct dump.
impl std::fmt::Debug for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// One module's embedded image and what it carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuiltImage {
    /// The module.
    pub module: String,
    /// Its fatbin in `OUT_DIR`.
    pub fatbin: PathBuf,
    /// The architectures it has SASS for.
    pub sass: Vec<Arch>,
    /// The virtual architecture of its widest PTX, and the PTX ISA version.
    pub ptx: Option<(Arch, (u32, u32))>,
    /// The SASS of each of `sass`, in that order: the cubin the fatbin embeds, kept from the same
    /// nvcc run in `OUT_DIR` (`<module>.sm_90.cubin`), for a disassembler (`nvdisasm`).
    pub cubins: Vec<(Arch, PathBuf)>,
    /// Every kernel's resources on every SASS target, as ptxas reported them (per target, in the
    /// order ptxas compiled the kernels): the listed entries, and any other kernel the module has.
    pub resources: Vec<EntryResources>,
    /// The kernels the module exports, by the names a lookup finds them under (a template
    /// instantiation's mangled name).
    pub exports: Vec<String>,
}

/// What a build produced.
#[derive(Debug, Default)]
pub struct BuildOutput {
    /// One per compiled module, in manifest order; empty without nvcc.
    pub images: Vec<BuiltImage>,
    /// What is wrong with the kernels, in manifest order: each is a `compile_error!` in the
    /// generated file.
    pub problems: Vec<Problem>,
    /// Why the manifest does not parse, when it does not (the derive reports it to the user).
    pub manifest_error: Option<ManifestError>,
    /// The modules nvcc compiled in this run (the others came from the cache).
    pub recompiled: Vec<String>,
    /// One library per entry when the build also emulates ([`KernelBuild::emulation`]).
    pub emulated: Vec<emulation::EmulatedLibrary>,
    /// The emulator's driver executable, built with the libraries' flags.
    pub emulation_driver: Option<PathBuf>,
    /// The modules the emulated build compiled again in this run (each once, for all its entries).
    pub emulated_recompiled: Vec<String>,
    /// Things worth a `cargo:warning`.
    pub warnings: Vec<String>,
    /// The generated Rust source.
    pub generated: PathBuf,
}

/// A configured kernel build (prost-build style: set what differs from the defaults, then run).
#[derive(Clone, Debug)]
pub struct KernelBuild {
    /// The crate's root, which the manifest's namespace key is relative to.
    crate_root: Option<PathBuf>,
    manifest: PathBuf,
    kernels_dir: PathBuf,
    include_dirs: Vec<PathBuf>,
    out_dir: PathBuf,
    out_file: String,
    targets: Vec<Target>,
    nvcc_flags: Vec<String>,
    require_nvcc: bool,
    nvcc: NvccSource,
    nvcc_candidates: Vec<PathBuf>,
    jobs: usize,
    emulation: Option<emulation::Emulation>,
    full_diagnostics: bool,
    cargo_directives: bool,
    /// What reading the environment found worth a warning, which [`BuildOutput::warnings`] starts
    /// with.
    warnings: Vec<String>,
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

/// The environment that changes what a build makes, beyond the files it reads.
const ENV_VARS: [&str; 8] = [
    SANITIZER_ENV,
    "NVCC",
    "CUDA_HOME",
    "CUDA_PATH",
    "KDA_CUDA_PREFIX",
    "CUDA_COMPUTE_CAP",
    "KDA_REQUIRE_NVCC",
    "KDA_FULL_DIAGNOSTICS",
];

/// The flags every module is compiled with, before the include directories and the user's.
const BASE_FLAGS: [&str; 2] = ["-O3", "-std=c++17"];

impl KernelBuild {
    /// A build of `manifest` with sources (and headers) in `kernels_dir`, writing to `out_dir`,
    /// for sm_90 (SASS and PTX), nvcc optional and found the usual way, as many jobs as cores.
    /// Prints no cargo directives: for tests and tools; build scripts use [`Self::from_env`].
    pub fn new(
        manifest: impl Into<PathBuf>,
        kernels_dir: impl Into<PathBuf>,
        out_dir: impl Into<PathBuf>,
    ) -> Self {
        Self {
            crate_root: None,
            manifest: manifest.into(),
            kernels_dir: kernels_dir.into(),
            include_dirs: Vec::new(),
            out_dir: out_dir.into(),
            out_file: "kda_kernels.rs".to_owned(),
            targets: vec![Target::Sass(Arch { major: 9, minor: 0, specific: false })],
            nvcc_flags: Vec::new(),
            require_nvcc: false,
            nvcc: NvccSource::Search,
            nvcc_candidates: Vec::new(),
            jobs: std::thread::available_parallelism().map_or(1, usize::from),
            emulation: None,
            full_diagnostics: false,
            cargo_directives: false,
            warnings: Vec::new(),
        }
    }

    /// The build a build script runs: `kernels.toml` and `kernels/` at the crate root
    /// (`CARGO_MANIFEST_DIR`), `OUT_DIR`, `NUM_JOBS`, the targets of `CUDA_COMPUTE_CAP`,
    /// `KDA_REQUIRE_NVCC=1`, `KDA_FULL_DIAGNOSTICS=1`. [`run`](Self::run) prints the cargo directives that rerun it when
    /// those inputs change, and its warnings.
    ///
    /// A crate with a feature named `emulation` (cargo tells the build script with
    /// `CARGO_FEATURE_EMULATION`) also gets its kernels built for the emulator: the feature is the
    /// one switch, and the one-line `build.rs` stays one line. `KDA_EMULATOR_SANITIZER=address`
    /// (AddressSanitizer + UBSan) or `thread` (ThreadSanitizer) builds them with that sanitizer
    /// ([`SANITIZER_ENV`]), and the generated `EMULATED_KERNELS` records it, so the crate's tests,
    /// unchanged, run every launch through the sanitized driver
    /// (`KDA_EMULATOR_SANITIZER=address cargo test`); any other value is an `Err` naming the
    /// accepted ones. [`emulation`](Self::emulation) replaces both choices.
    pub fn from_env() -> Result<Self, BuildError> {
        let root = PathBuf::from(env("CARGO_MANIFEST_DIR")?);
        let mut build = Self::new(root.join("kernels.toml"), root.join("kernels"), env("OUT_DIR")?);
        build.crate_root = Some(root);
        if let Ok(list) = std::env::var("CUDA_COMPUTE_CAP") {
            build.targets = parse_targets(&list).ok_or(BuildError::Targets(list))?;
        }
        if let Some(jobs) = std::env::var("NUM_JOBS").ok().and_then(|jobs| jobs.parse().ok()) {
            build.jobs = jobs;
        }
        let set = |name| std::env::var(name).is_ok_and(|value| value == "1");
        build.require_nvcc = set("KDA_REQUIRE_NVCC");
        build.full_diagnostics = set("KDA_FULL_DIAGNOSTICS");
        let sanitizer = sanitizer_named(std::env::var_os(SANITIZER_ENV))?;
        if std::env::var_os("CARGO_FEATURE_EMULATION").is_some() {
            build.emulation = Some(emulation::Emulation { sanitizer, ..emulation::Emulation::default() });
        } else if let Some(sanitizer) = sanitizer {
            build.warnings.push(format!(
                "{SANITIZER_ENV}={}: this crate builds no emulated kernels (it has no feature `emulation`), so none run under {sanitizer}",
                sanitizer.name()
            ));
        }
        build.cargo_directives = true;
        Ok(build)
    }

    /// The manifest (relative paths are the crate root's, in a build script).
    pub fn manifest(mut self, path: impl AsRef<Path>) -> Self {
        self.manifest = self.rooted(path.as_ref());
        self
    }

    /// Where the modules' sources are (`<module>.cu`); also the first include directory.
    pub fn kernels_dir(mut self, path: impl AsRef<Path>) -> Self {
        self.kernels_dir = self.rooted(path.as_ref());
        self
    }

    /// Another include directory (`-I`), searched after the kernels directory.
    pub fn include_dir(mut self, path: impl AsRef<Path>) -> Self {
        let path = self.rooted(path.as_ref());
        self.include_dirs.push(path);
        self
    }

    /// Extra nvcc flags for every module (`-lineinfo`, `--fmad=false`), after the defaults
    /// (`-O3 -std=c++17`).
    pub fn nvcc_flags<S: Into<String>>(mut self, flags: impl IntoIterator<Item = S>) -> Self {
        self.nvcc_flags.extend(flags.into_iter().map(Into::into));
        self
    }

    /// What to compile for (replacing `CUDA_COMPUTE_CAP` and the default sm_90).
    pub fn targets(mut self, targets: Vec<Target>) -> Self {
        self.targets = targets;
        self
    }

    /// Report a missing nvcc as a located compiler error instead of a warning.
    pub fn require_nvcc(mut self, require: bool) -> Self {
        self.require_nvcc = require;
        self
    }

    /// Show the compiler's whole output where a compiler rejects a module, not its first error
    /// (`KDA_FULL_DIAGNOSTICS=1` in a build script).
    pub fn full_diagnostics(mut self, full: bool) -> Self {
        self.full_diagnostics = full;
        self
    }

    /// Use this nvcc rather than looking for one.
    pub fn nvcc(mut self, nvcc: Nvcc) -> Self {
        self.nvcc = NvccSource::Given(nvcc);
        self
    }

    /// Another place to look for nvcc, after `NVCC`, `CUDA_HOME` and `CUDA_PATH` and before `PATH`
    /// (a toolkit the project installs for itself, say).
    pub fn nvcc_candidate(mut self, path: impl Into<PathBuf>) -> Self {
        self.nvcc_candidates.push(path.into());
        self
    }

    /// Build as on a machine without nvcc: no image, the `[defines]` still generated.
    pub fn without_nvcc(mut self) -> Self {
        self.nvcc = NvccSource::Absent;
        self
    }

    /// At most `jobs` nvcc processes at once (default: `NUM_JOBS`, else the cores).
    pub fn jobs(mut self, jobs: usize) -> Self {
        self.jobs = jobs;
        self
    }

    /// Also builds every entry for the emulator (see [`emulation`]): one shared library per
    /// entry in `OUT_DIR/emu` (`emu-<sanitizer>` with a sanitizer), listed in the generated
    /// file as `EMULATED_KERNELS`. Independent of nvcc; a unit the C++ compiler rejects is a
    /// located compiler error like nvcc's. Its `include_dirs` are relative to the crate root in a
    /// build script, as [`include_dir`](Self::include_dir)'s are.
    pub fn emulation(mut self, mut emulation: emulation::Emulation) -> Self {
        emulation.include_dirs = emulation.include_dirs.iter().map(|dir| self.rooted(dir)).collect();
        self.emulation = Some(emulation);
        self
    }

    /// The generated file's name in `OUT_DIR` (default `kda_kernels.rs`), for a crate with
    /// several manifests: `include_kernels!("name.rs")` includes it.
    pub fn out_file(mut self, name: impl Into<String>) -> Self {
        self.out_file = name.into();
        self
    }

    /// Reads the manifest, compiles (or takes from the cache) and checks every module, and
    /// writes the generated file. In a build script (`from_env`), an `Err` is also told to cargo
    /// as `cargo::error`, so it is the first thing the user reads, not a line under cargo's
    /// "failed to run custom build command".
    pub fn run(&self) -> Result<BuildOutput, BuildError> {
        let result = self.build();
        if let Err(error) = &result
            && self.cargo_directives
        {
            for line in cargo_errors(error) {
                println!("{line}");
            }
        }
        result
    }

    fn build(&self) -> Result<BuildOutput, BuildError> {
        self.rerun_if_changed();
        let name = self.manifest_name();
        let mut output = BuildOutput {
            generated: self.out_dir.join(&self.out_file),
            warnings: self.warnings.clone(),
            ..BuildOutput::default()
        };
        let parsed = match read_manifest(&self.manifest, &name) {
            Ok(text) => {
                Manifest::parse(&name, &text).map_err(|error| (error, Manifest::recover_defines(&text)))
            }
            Err(ReadError::NotUtf8(error)) => Err((error, Vec::new())),
            Err(error) => return Err(BuildError::Manifest(error)),
        };
        let manifest = match parsed {
            Ok(manifest) => manifest,
            Err((error, defines)) => {
                // The derive reads the same manifest and reports this, located; a second report
                // here would only repeat it. The defines that read well are still generated.
                let why = "the manifest has errors (the derive reports them)";
                self.write_generated(&name, None, &defines, &output, Some(why), (0, 0))?;
                output.manifest_error = Some(error);
                return Ok(output);
            }
        };
        // Checked with or without nvcc: a module with no source is never built anywhere.
        let modules = self.modules(&manifest, &name, &mut output.problems);
        let emulated = match &self.emulation {
            Some(emulation) => self.emulate(emulation, &manifest, &name, &modules, &mut output)?,
            None => Vec::new(),
        };
        let found = match &self.nvcc {
            NvccSource::Search => Nvcc::find(&self.nvcc_candidates),
            NvccSource::Given(nvcc) => Ok(nvcc.clone()),
            NvccSource::Absent => Err("this build was told to use no nvcc".to_owned()),
        };
        let (missing, toolkit) = match &found {
            Ok(nvcc) => {
                self.compile_all(nvcc, &manifest, &name, &modules, &mut output)?;
                (None, nvcc.version())
            }
            Err(why) if self.require_nvcc => {
                output.problems.push(Problem::NvccRequired { manifest: name.clone(), why: why.clone() });
                (Some("nvcc was not found when this crate was built"), (0, 0))
            }
            Err(why) => {
                output.warnings.push(format!(
                    "no CUDA kernel images are built: {why}; set KDA_REQUIRE_NVCC=1 to make this an error"
                ));
                (Some("nvcc was not found when this crate was built"), (0, 0))
            }
        };
        merge_emulated(&mut output.problems, emulated);
        self.write_generated(&name, Some(&manifest), &manifest.defines, &output, missing, toolkit)?;
        if self.cargo_directives {
            for warning in &output.warnings {
                println!("cargo::warning={warning}");
            }
        }
        Ok(output)
    }

    /// Compiles every module, at most `jobs` at once, then checks the entries and the parameter
    /// widths of all of them against their PTX, and their kernels' resources for spills.
    fn compile_all(
        &self,
        nvcc: &Nvcc,
        manifest: &Manifest,
        name: &str,
        modules: &[(String, PathBuf)],
        output: &mut BuildOutput,
    ) -> Result<(), BuildError> {
        let plan = Plan::new(&self.targets);
        let args = self.nvcc_args(manifest, &plan);
        let compiler = Compiler {
            nvcc,
            manifest,
            manifest_name: name,
            out_dir: &self.out_dir,
            args: &args,
            plan: &plan,
        };
        let results =
            jobs::run_bounded(self.jobs, modules, |(module, source)| compiler.compile(module, source));
        let mut ptx_by_module = Vec::new();
        let mut signature_problems = Vec::new();
        for ((module, _), result) in modules.iter().zip(results) {
            match result? {
                Compiled::Image { fatbin, ptx, cubins, resources, recompiled } => {
                    if recompiled {
                        output.recompiled.push(module.clone());
                    }
                    let widest = plan.widest_ptx().zip(ptx_isa(&ptx));
                    output.images.push(BuiltImage {
                        module: module.clone(),
                        fatbin,
                        sass: plan.sass.clone(),
                        ptx: widest,
                        cubins,
                        resources,
                        exports: ptx_entries(&ptx),
                    });
                    ptx_by_module.push((module.clone(), ptx));
                }
                Compiled::Rejected(problems) => {
                    for problem in problems {
                        match problem {
                            Problem::Signature(problem) => signature_problems.push(problem),
                            other => output.problems.push(other),
                        }
                    }
                }
            }
        }
        let exported: Vec<(String, Vec<String>)> =
            ptx_by_module.iter().map(|(module, ptx)| (module.clone(), ptx_entries(ptx))).collect();
        let entry_problems =
            check_entries(manifest, name, &self.kernels_dir, &exported, &mut output.warnings);
        output.problems.extend(entry_problems.into_iter().map(Problem::Entry));
        signature_problems.extend(prove::check_ptx_params(manifest, name, &ptx_by_module));
        prove::sort_problems(&mut signature_problems);
        output.problems.extend(signature_problems.into_iter().map(Problem::Signature));
        let spills = resources::check_spills(manifest, name, &output.images);
        output.problems.extend(spills.into_iter().map(Problem::Spill));
        Ok(())
    }

    /// Builds the emulated library of every entry whose module has a source; the problems it
    /// found, for [`merge_emulated`].
    fn emulate(
        &self,
        emulation: &emulation::Emulation,
        manifest: &Manifest,
        name: &str,
        modules: &[(String, PathBuf)],
        output: &mut BuildOutput,
    ) -> Result<Vec<Problem>, BuildError> {
        let dir = match emulation.sanitizer {
            None => "emu".to_owned(),
            Some(sanitizer) => format!("emu-{}", sanitizer.name()),
        };
        let compiler = emulation::EmulatedCompiler {
            manifest,
            manifest_name: name,
            out_dir: self.out_dir.join(dir),
            include_dirs: std::iter::once(&self.kernels_dir).chain(&self.include_dirs).cloned().collect(),
            kernels_dir: &self.kernels_dir,
            emulation,
            jobs: self.jobs,
        };
        let emulated = compiler.build(modules)?;
        output.emulated = emulated.libraries;
        output.emulation_driver = emulated.driver;
        output.emulated_recompiled = emulated.recompiled;
        Ok(emulated.problems)
    }

    /// nvcc's flags for every module: the defaults, the include directories, the user's flags,
    /// the manifest's `[defines]` and the targets' `-gencode`s.
    fn nvcc_args(&self, manifest: &Manifest, plan: &Plan) -> Vec<String> {
        let includes = std::iter::once(&self.kernels_dir).chain(&self.include_dirs);
        BASE_FLAGS
            .iter()
            .map(|flag| (*flag).to_owned())
            .chain(includes.map(|dir| format!("-I{}", dir.display())))
            .chain(self.nvcc_flags.iter().cloned())
            .chain(manifest.defines.iter().map(|define| format!("-D{}={}", define.name, define.value)))
            .chain(plan.gencode_flags())
            .collect()
    }

    /// Every module the manifest lists, once, in manifest order, with its absolute source; a
    /// problem for each one without a source.
    fn modules(
        &self,
        manifest: &Manifest,
        name: &str,
        problems: &mut Vec<Problem>,
    ) -> Vec<(String, PathBuf)> {
        let mut modules: Vec<(String, PathBuf)> = Vec::new();
        // A set, not a scan of `modules`: a manifest may list 100,000 modules.
        let mut seen = std::collections::HashSet::new();
        for entry in manifest.tables.iter().flat_map(|table| &table.entries) {
            if !seen.insert(entry.module.as_str()) {
                continue;
            }
            let path = self.kernels_dir.join(format!("{}.cu", entry.module));
            match std::path::absolute(&path) {
                Ok(source) if source.is_file() => modules.push((entry.module.clone(), source)),
                _ => problems.push(Problem::MissingSource {
                    listed_at: problem::listed_at(name, entry),
                    module: entry.module.clone(),
                    path,
                }),
            }
        }
        modules
    }

    fn write_generated(
        &self,
        name: &str,
        manifest: Option<&Manifest>,
        defines: &[crate::Define],
        output: &BuildOutput,
        missing: Option<&str>,
        toolkit: (u32, u32),
    ) -> Result<(), BuildError> {
        let problems: Vec<String> = output
            .problems
            .iter()
            .map(|problem| match problem.diagnostics() {
                Some(all) if self.full_diagnostics => {
                    format!("{problem}\nThe compiler's whole output:\n{all}")
                }
                _ => problem.to_string(),
            })
            .collect();
        let generated = embed::Generated {
            manifest_key: name,
            manifest,
            defines,
            images: &output.images,
            emulated: self.emulation.as_ref().map(|emulation| {
                (output.emulated.as_slice(), emulation.sanitizer, output.emulation_driver.as_deref())
            }),
            missing,
            problems: &problems,
            toolkit,
        };
        write(&output.generated, &generated.source())
    }

    /// The manifest as the derive names it, and so as messages and the namespace key do: its
    /// path relative to the crate root (`kernels.toml`), else its file name.
    fn manifest_name(&self) -> String {
        let relative = self.crate_root.as_deref().and_then(|root| self.manifest.strip_prefix(root).ok());
        let name = match relative {
            Some(relative) => relative.to_string_lossy().into_owned(),
            None => self.manifest.file_name().map_or_else(
                || self.manifest.display().to_string(),
                |name| name.to_string_lossy().into_owned(),
            ),
        };
        crate::manifest::namespace::manifest_key(&name)
    }

    /// `path` against the crate root, when it is relative and there is one.
    fn rooted(&self, path: &Path) -> PathBuf {
        match &self.crate_root {
            Some(root) if path.is_relative() => root.join(path),
            _ => path.to_owned(),
        }
    }

    fn rerun_if_changed(&self) {
        if !self.cargo_directives {
            return;
        }
        // A directory is scanned whole: sources and headers alike.
        let emulated_includes = self.emulation.iter().flat_map(|emulation| &emulation.include_dirs);
        let inputs = std::iter::once(&self.kernels_dir).chain(&self.include_dirs).chain(emulated_includes);
        for path in inputs.chain([&self.manifest]) {
            println!("cargo::rerun-if-changed={}", path.display());
        }
        for var in ENV_VARS {
            println!("cargo::rerun-if-env-changed={var}");
        }
    }
}

/// Adds the emulated build's `emulated` problems to `problems` (nvcc's, and the sources'), except
/// those about an entry a problem already names or a module nvcc rejected: both builds check the
/// same entries, and the user reads each mistake once, nvcc's report first.
fn merge_emulated(problems: &mut Vec<Problem>, emulated: Vec<Problem>) {
    let rejected: Vec<&str> = problems
        .iter()
        .filter(|problem| matches!(problem, Problem::Compile { .. }))
        .filter_map(module_of)
        .collect();
    let named: Vec<&str> = problems.iter().filter_map(entry_listed_at).collect();
    let kept: Vec<Problem> = emulated
        .into_iter()
        .filter(|problem| {
            !module_of(problem).is_some_and(|module| rejected.contains(&module))
                && !entry_listed_at(problem).is_some_and(|at| named.contains(&at))
        })
        .collect();
    problems.extend(kept);
}

/// Where the manifest lists the entry `problem` is about, when it is about one entry.
fn entry_listed_at(problem: &Problem) -> Option<&str> {
    match problem {
        Problem::Entry(problem) => Some(&problem.listed_at),
        Problem::Signature(problem) => Some(&problem.listed_at),
        Problem::Emulation { listed_at, .. } => Some(listed_at),
        _ => None,
    }
}

/// The module `problem` is about, when it is about a compiled module or one of its entries.
fn module_of(problem: &Problem) -> Option<&str> {
    match problem {
        Problem::Compile { path, .. } | Problem::Emulation { path, .. } => path.file_stem()?.to_str(),
        Problem::Entry(EntryProblem { symbol, .. }) | Problem::Signature(SignatureProblem { symbol, .. }) => {
            symbol.split("::").next()
        }
        _ => None,
    }
}

/// `error` as cargo directives: one `cargo::error=` line per line of its message.
fn cargo_errors(error: &BuildError) -> Vec<String> {
    error.to_string().lines().map(|line| format!("cargo::error={line}")).collect()
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
    use super::*;

    #[test]
    fn a_build_error_reaches_cargo_as_an_error_directive_per_line_of_its_message() {
        assert_eq!(
            cargo_errors(&BuildError::MissingEnv("OUT_DIR")),
            ["cargo::error=environment variable OUT_DIR is not set (is this running from build.rs?)"]
        );
        let io = BuildError::Io {
            path: PathBuf::from("out/a.rs"),
            source: std::io::Error::other("disk full\nand more"),
        };
        assert_eq!(cargo_errors(&io), ["cargo::error=out/a.rs: disk full", "cargo::error=and more"]);
    }

    #[test]
    fn the_sanitizer_switch_names_a_sanitizer_or_none_and_anything_else_is_an_error_listing_them() {
        use emulation::Sanitizer;
        let named = |value: &str| sanitizer_named(Some(value.into()));
        assert!(matches!(sanitizer_named(None), Ok(None)));
        assert!(matches!(named(""), Ok(None)));
        assert!(matches!(named("none"), Ok(None)));
        assert!(matches!(named("address"), Ok(Some(Sanitizer::Address))));
        assert!(matches!(named("thread"), Ok(Some(Sanitizer::Thread))));
        for wrong in ["Address", "memory", "address,thread", " thread"] {
            let error = named(wrong).expect_err(wrong);
            assert_eq!(
                error.to_string(),
                format!(
                    "KDA_EMULATOR_SANITIZER={wrong:?}: expected `address` (AddressSanitizer + UBSan), \
                     `thread` (ThreadSanitizer) or `none`"
                )
            );
        }
    }
}
