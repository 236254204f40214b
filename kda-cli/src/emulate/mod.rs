//! `kda emulate`: a crate's kernels built for the emulator, with a sanitizer compiled in by
//! default (AddressSanitizer + UBSan), and every entry with a launch contract launched several
//! times at launches drawn from the contract alone ([`launches`]): scalars and a geometry that
//! keep its `requires`, each buffer allocated at exactly its extent. It needs no test of the
//! crate's and no reference: what it finds is what a kernel does wrong whatever it computes: a
//! read or write past a buffer's extent or a `__shared__` array (a sanitizer report), undefined
//! behaviour, a barrier or warp collective some threads miss, a parameter type the manifest
//! contradicts. Integer buffers hold zeros (every index and count they could hold is the
//! kernel's own business), float buffers values in [-1, 1).

pub mod contract;
pub mod launches;

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::bail;
use kda_build::Manifest;
use kda_build::cuda::KernelBuild;
use kda_build::cuda::emulation::{Emulation, Sanitizer};
use kda_build::manifest::read_manifest;
use kda_runtime::emu::EmuBackend;
use kda_runtime::signature::{Access, ParamKind};
use kda_runtime::{
    BackendError, DType, DeviceBuffer, EmulatedSet, GpuBackend, KernelArg, KernelEntry, LaunchGeometry,
    Signature, bf16, f16,
};

use launches::{Draw, Launch};

/// What `kda emulate` runs.
#[derive(Clone, Debug)]
pub struct EmulateOptions {
    /// The manifest.
    pub manifest: PathBuf,
    /// The kernels directory (`kernels/` beside the manifest).
    pub kernels: PathBuf,
    /// Where the emulated build goes (a directory per sanitizer under it).
    pub out_dir: PathBuf,
    /// The sanitizer compiled in, if any.
    pub sanitizer: Option<Sanitizer>,
    /// Launches per entry.
    pub launches: u32,
    /// Seed of the launches, the inputs and the block orders.
    pub seed: u64,
    /// Keep a sanitizer's whole report, not only its lines that say what and where.
    pub full_reports: bool,
}

/// Candidates drawn for one launch before an entry counts as having none its `requires` allow.
const TRIES: u32 = 4000;

/// What became of one entry.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Every launch ran.
    Passed {
        /// How many.
        launches: u32,
    },
    /// A launch failed: the launch and why.
    Failed {
        /// The launch, spelled as scalars and geometry.
        launch: String,
        /// The backend's error, a sanitizer's report among them.
        error: String,
    },
    /// The lookup failed (the library's C types contradict the manifest, say).
    NotResolved(String),
    /// No drawn launch kept every requirement.
    NoLaunch,
    /// The entry has no `params`, so no launch of it can be checked.
    NoContract,
    /// What the kernel touches through this parameter depends on data the caller guarantees
    /// (the manifest's `safety`), which drawn data would not keep.
    Trusted {
        /// The parameter.
        param: &'static str,
    },
}

/// One entry's report.
#[derive(Clone, Debug, PartialEq)]
pub struct EntryReport {
    /// `module::entry`.
    pub name: String,
    /// Its line in the manifest.
    pub line: u32,
    /// What became of it.
    pub outcome: Outcome,
}

impl EntryReport {
    /// Whether it is a finding (a failed launch or lookup).
    pub fn failed(&self) -> bool {
        matches!(self.outcome, Outcome::Failed { .. } | Outcome::NotResolved(_))
    }
}

impl fmt::Display for EntryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (line {}): ", self.name, self.line)?;
        match &self.outcome {
            Outcome::Passed { launches } => write!(f, "ok, {launches} launches"),
            Outcome::Failed { launch, error } => write!(f, "FAILED at {launch}:\n{error}"),
            Outcome::NotResolved(error) => write!(f, "FAILED to resolve: {error}"),
            Outcome::NoLaunch => {
                write!(f, "not run: no launch of {TRIES} drawn keeps every `requires`")
            }
            Outcome::NoContract => write!(f, "not run: no `params`, so no launch can be checked"),
            Outcome::Trusted { param } => {
                write!(
                    f,
                    "not run: its reach through `{param}` depends on data its `safety` guarantees, not drawn data"
                )
            }
        }
    }
}

/// Builds the kernels for the emulator and launches every entry; `log` gets a line as each entry
/// is done.
pub fn run(options: &EmulateOptions, log: &mut dyn FnMut(&str)) -> anyhow::Result<Vec<EntryReport>> {
    let file = options.manifest.display().to_string();
    let text = read_manifest(&options.manifest, &file)?;
    let manifest = Manifest::parse(&file, &text)?;
    let namespace: &'static str = Box::leak(format!("kda-emulate:{file}").into_boxed_str());
    let entries = contract::entries(&manifest, namespace);
    let set = build_emulated(
        &options.manifest,
        &options.kernels,
        &options.out_dir,
        options.sanitizer,
        namespace,
        &entries,
    )?;
    // In process, or through the sanitized driver: as the set was built.
    let gpu = EmuBackend::new(&[set])?.with_seed(options.seed);
    log(&format!("{} entries of {file} on {}", entries.len(), gpu.describe()));
    let mut draw = Draw::new(options.seed);
    let mut reports = Vec::new();
    for entry in &entries {
        let report = EntryReport {
            name: format!("{}::{}", entry.module, entry.entry),
            line: entry.line,
            outcome: run_entry(&gpu, entry, options.launches, options.full_reports, &mut draw),
        };
        log(&report.to_string());
        reports.push(report);
    }
    Ok(reports)
}

/// The manifest's modules of `kernels` built for the emulator with `sanitizer` into
/// `out_dir/<plain | sanitizer>`, as the set the emulation backends take, in `namespace`, proving
/// the signatures `entries` (the manifest's) give its kernels (leaked: make one per run). A build
/// problem is an `Err` listing every problem, located in the manifest.
pub fn build_emulated(
    manifest: &Path,
    kernels: &Path,
    out_dir: &Path,
    sanitizer: Option<Sanitizer>,
    namespace: &'static str,
    entries: &[KernelEntry],
) -> anyhow::Result<&'static EmulatedSet> {
    let variant = sanitizer.map_or("plain", Sanitizer::name);
    let built = KernelBuild::new(manifest, kernels, out_dir.join(variant))
        .without_nvcc()
        .emulation(Emulation { sanitizer, ..Emulation::default() })
        .run()?;
    if !built.problems.is_empty() {
        let problems: Vec<String> = built.problems.iter().map(ToString::to_string).collect();
        bail!("the emulated build failed:\n{}", problems.join("\n"));
    }
    let paths: Vec<String> =
        built.emulated.iter().map(|library| library.path.display().to_string()).collect();
    let libraries =
        built.emulated.iter().zip(&paths).map(|(library, path)| (&*library.module, &*library.entry, &**path));
    let driver = built.emulation_driver.as_ref().map(|driver| driver.display().to_string());
    // SAFETY: the libraries and the driver are what the emulated build just wrote from this
    // manifest's modules with `sanitizer`, and `entries` are that manifest's (the emulator compares each
    // library's C parameter types with its entry's signature at lookup).
    #[allow(unsafe_code)]
    let set = unsafe { EmulatedSet::leak(namespace, libraries, entries, sanitizer, driver.as_deref()) };
    Ok(set)
}

fn run_entry(
    gpu: &dyn GpuBackend,
    entry: &KernelEntry,
    launches: u32,
    full_reports: bool,
    draw: &mut Draw,
) -> Outcome {
    let Some(signature) = entry.signature else { return Outcome::NoContract };
    if let Some((param, _)) = signature.trust() {
        return Outcome::Trusted { param };
    }
    let kernel = match gpu.lookup(entry) {
        Ok(kernel) => kernel,
        Err(error) => return Outcome::NotResolved(error.to_string()),
    };
    for done in 0..launches {
        let Some(launch) = launches::draw(signature, draw, TRIES) else {
            return if done == 0 { Outcome::NoLaunch } else { Outcome::Passed { launches: done } };
        };
        let result = buffers(gpu, signature, &launch, draw).and_then(|mut buffers| {
            let mut buffers = buffers.iter_mut();
            let mut args: Vec<KernelArg<'_>> = launch
                .scalars
                .iter()
                .zip(signature.params)
                .map(|(scalar, param)| match scalar {
                    Some(scalar) => KernelArg::Scalar(*scalar),
                    // One buffer per buffer parameter, in order (`buffers`).
                    None => match (buffers.next(), param.kind) {
                        (Some(buffer), ParamKind::Buffer { access: Access::Write, .. }) => {
                            KernelArg::from(buffer)
                        }
                        (Some(buffer), _) => KernelArg::from(&*buffer),
                        // One buffer per buffer parameter: not reached.
                        (None, _) => KernelArg::from(0u32),
                    },
                })
                .collect();
            gpu.launch(kernel, launch.geometry, &mut args)
        });
        if let Err(error) = result {
            let error = error.to_string();
            let error = if full_reports { error } else { condense(&error) };
            return Outcome::Failed { launch: describe(signature, &launch), error };
        }
    }
    Outcome::Passed { launches }
}

/// The lines of a launch error that say what went wrong and where: the first line, and of a
/// sanitizer's report its headline, the access, the kernel's frame, where the address lies and
/// the summary. An error that is no sanitizer report stays whole.
fn condense(error: &str) -> String {
    const KEPT: [&str; 6] =
        ["ERROR: ", "WARNING: ", "runtime error: ", " of size ", "is located", "SUMMARY: "];
    if !error.lines().any(|line| line.contains("SUMMARY: ") || line.contains("runtime error: ")) {
        return error.to_owned();
    }
    let mut lines = error.lines();
    let first = lines.next().unwrap_or_default();
    let mut frame_kept = false;
    let kept = lines.filter(|line| {
        let frame = line.trim_start().starts_with("#0 ") && !frame_kept;
        frame_kept |= frame;
        frame || KEPT.iter().any(|marker| line.contains(marker))
    });
    std::iter::once(first).chain(kept).collect::<Vec<_>>().join("\n")
}

/// One buffer per buffer parameter, exactly its extent long, float elements drawn in [-1, 1),
/// the others zero.
fn buffers(
    gpu: &dyn GpuBackend,
    signature: &Signature,
    launch: &Launch,
    draw: &mut Draw,
) -> Result<Vec<DeviceBuffer>, BackendError> {
    signature
        .params
        .iter()
        .zip(&launch.extents)
        .filter_map(|(param, extent)| match param.kind {
            ParamKind::Buffer { dtype, .. } => Some((dtype, (*extent)?)),
            ParamKind::Scalar(_) => None,
        })
        .map(|(dtype, extent)| {
            // `MAX_ELEMENTS` bounds every drawn extent.
            let len = extent as usize;
            let mut buffer = gpu.alloc(dtype, len)?;
            let bytes: Vec<u8> = match dtype {
                DType::F32 => (0..len).flat_map(|_| draw.unit().to_le_bytes()).collect(),
                DType::F64 => (0..len).flat_map(|_| f64::from(draw.unit()).to_le_bytes()).collect(),
                DType::Bf16 => (0..len).flat_map(|_| bf16::from_f32(draw.unit()).to_le_bytes()).collect(),
                DType::F16 => (0..len).flat_map(|_| f16::from_f32(draw.unit()).to_le_bytes()).collect(),
                // The rest hold zeros: integers (indices and counts are the kernel's business)
                // and fp8 (whose zero is all bits clear).
                _ => vec![0; len * dtype.size()],
            };
            gpu.copy_to_device(&bytes, &mut buffer)?;
            Ok(buffer)
        })
        .collect()
}

/// A launch as scalars and geometry: `n = 7, grid = (1, 1, 1), block = (32, 1, 1), shared = 0`.
fn describe(signature: &Signature, launch: &Launch) -> String {
    let scalars = signature
        .params
        .iter()
        .zip(&launch.scalars)
        .filter_map(|(param, scalar)| Some(format!("{} = {}", param.name, (*scalar)?)));
    let LaunchGeometry { grid, block, shared_mem_bytes } = launch.geometry;
    scalars
        .chain([
            format!("grid = {grid:?}"),
            format!("block = {block:?}"),
            format!("shared = {shared_mem_bytes} bytes"),
        ])
        .collect::<Vec<_>>()
        .join(", ")
}
