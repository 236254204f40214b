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
use kda_runtime::signature::{self, Access, ParamKind};
use kda_runtime::{
    BackendError, ConstBuffer, DType, DeviceBuffer, EmulatedSet, GpuBackend, KernelArg, KernelEntry,
    LaunchGeometry, Scalar, Signature, bf16, f16,
};

use launches::{Draw, Drawn, Launch};

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

/// Launches drawn for each launch asked before an entry stops: the check refuses some drawn
/// launches (a layout with a dim of 0), which are drawn again.
const DRAWS_PER_LAUNCH: u32 = 4;

/// What became of one entry.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Every launch ran.
    Passed,
    /// A launch failed: the launch and why.
    Failed {
        /// The launch, spelled as scalars, layouts and geometry.
        launch: String,
        /// The backend's error, a sanitizer's report among them.
        error: String,
    },
    /// The lookup failed (the library's C types contradict the manifest, say).
    NotResolved(String),
    /// No launch ran: no drawn launch kept every requirement, or the check refused each one
    /// drawn (the first refusal).
    NoLaunch {
        /// The check's first refusal, if it refused any.
        refusal: Option<String>,
    },
    /// The entry has no `params`, so no launch of it can be checked.
    NoContract,
    /// What the kernel touches through this parameter depends on data the caller guarantees
    /// (the manifest's `safety`), which drawn data would not keep.
    Trusted {
        /// The parameter.
        param: &'static str,
        /// What the caller guarantees, in the manifest's words.
        condition: &'static str,
    },
    /// Not launched, for the reason the manifest's `unlaunched` gives.
    Unlaunched(String),
}

/// One entry's report.
#[derive(Clone, Debug, PartialEq)]
pub struct EntryReport {
    /// `module::entry`.
    pub name: String,
    /// Its line in the manifest.
    pub line: u32,
    /// The launches that ran, a failed one included.
    pub launches: u32,
    /// The drawn launches the launch check refused, which did not run (a layout with a dim of 0).
    pub refused: u32,
    /// What became of it.
    pub outcome: Outcome,
}

impl EntryReport {
    /// Whether it fails the run: a failed launch or lookup, or no launch with no reason the
    /// manifest gives (its `unlaunched`, or a `safety` condition).
    pub fn failed(&self) -> bool {
        matches!(
            self.outcome,
            Outcome::Failed { .. } | Outcome::NotResolved(_) | Outcome::NoLaunch { .. } | Outcome::NoContract
        )
    }
}

impl fmt::Display for EntryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self { name, line, launches, refused, outcome } = self;
        write!(f, "{name} (line {line}): ")?;
        let refused = match refused {
            0 => String::new(),
            refused => format!(", {refused} refused by the check"),
        };
        const SAY_WHY: &str = "or say why in its entry: `unlaunched = \"...\"`";
        match outcome {
            Outcome::Passed => write!(f, "ok, {launches} launches{refused}"),
            Outcome::Failed { launch, error } => write!(f, "FAILED at launch {launches}: {launch}:\n{error}"),
            Outcome::NotResolved(error) => write!(f, "FAILED to resolve, 0 launches: {error}"),
            Outcome::NoLaunch { refusal: None } => write!(
                f,
                "FAILED, 0 launches: no launch of {TRIES} drawn keeps every `requires` (loosen them, {SAY_WHY})"
            ),
            Outcome::NoLaunch { refusal: Some(refusal) } => write!(
                f,
                "FAILED, 0 launches{refused}, the first: {refusal}\n(draw launches the check allows, {SAY_WHY})"
            ),
            Outcome::NoContract => write!(
                f,
                "FAILED, 0 launches: no `params`, so no launch can be checked (declare them, {SAY_WHY})"
            ),
            Outcome::Trusted { param, condition } => write!(
                f,
                "0 launches, by its `safety`: its reach through `{param}` depends on data the caller \
                 guarantees, not drawn data: \"{condition}\""
            ),
            Outcome::Unlaunched(reason) => write!(f, "0 launches, unlaunched: \"{reason}\""),
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
    // `entries` are the manifest's, in its order.
    let reasons =
        manifest.tables.iter().flat_map(|table| &table.entries).map(|entry| entry.unlaunched.clone());
    for (entry, reason) in entries.iter().zip(reasons) {
        let report = match reason {
            Some(reason) => EntryReport {
                name: format!("{}::{}", entry.module, entry.entry),
                line: entry.line,
                launches: 0,
                refused: 0,
                outcome: Outcome::Unlaunched(reason),
            },
            None => run_entry(&gpu, entry, options, &mut draw),
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

/// Launches `entry` `options.launches` times at drawn launches, drawing again each one the check
/// refuses (at most [`DRAWS_PER_LAUNCH`] draws a launch), until one fails.
fn run_entry(
    gpu: &dyn GpuBackend,
    entry: &KernelEntry,
    options: &EmulateOptions,
    draw: &mut Draw,
) -> EntryReport {
    let mut report = EntryReport {
        name: format!("{}::{}", entry.module, entry.entry),
        line: entry.line,
        launches: 0,
        refused: 0,
        outcome: Outcome::Passed,
    };
    let Some(signature) = entry.signature else {
        report.outcome = Outcome::NoContract;
        return report;
    };
    if let Some((param, condition)) = signature.trust() {
        report.outcome = Outcome::Trusted { param, condition };
        return report;
    }
    let kernel = match gpu.lookup(entry) {
        Ok(kernel) => kernel,
        Err(error) => {
            report.outcome = Outcome::NotResolved(error.to_string());
            return report;
        }
    };
    let mut first_refusal = None;
    for _ in 0..options.launches.saturating_mul(DRAWS_PER_LAUNCH) {
        if report.launches == options.launches {
            break;
        }
        let Some(launch) = launches::draw(signature, draw, TRIES) else { break };
        let result = arguments(gpu, &launch, draw).and_then(|mut arguments| {
            let mut args: Vec<KernelArg<'_>> = arguments
                .iter_mut()
                .zip(signature.params)
                .map(|(argument, param)| match (argument, param.kind) {
                    (Argument::Scalar(scalar), _) => KernelArg::Scalar(*scalar),
                    (Argument::Buffer(buffer), ParamKind::Buffer { access: Access::Write, .. }) => {
                        KernelArg::from(buffer)
                    }
                    (Argument::Buffer(buffer), _) => KernelArg::from(&*buffer),
                    (Argument::Layout(layout), _) => KernelArg::from(layout.view()),
                })
                .collect();
            // The check that `launch` runs first, run here to tell a refusal from a failure.
            if let Err(refusal) = signature::check(entry, &launch.geometry, &args) {
                return Ok(Err(refusal));
            }
            gpu.launch(kernel, launch.geometry, &mut args).map(Ok)
        });
        match result {
            Ok(Ok(())) => report.launches += 1,
            Ok(Err(refusal)) => {
                report.refused += 1;
                first_refusal.get_or_insert_with(|| refusal.to_string());
            }
            Err(error) => {
                report.launches += 1;
                let error = error.to_string();
                let error = if options.full_reports { error } else { condense(&error) };
                report.outcome = Outcome::Failed { launch: describe(signature, &launch), error };
                return report;
            }
        }
    }
    if report.launches == 0 {
        report.outcome = Outcome::NoLaunch { refusal: first_refusal };
    }
    report
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

/// What the runner passes for one parameter of a drawn launch.
enum Argument {
    Scalar(Scalar),
    Buffer(DeviceBuffer),
    Layout(ConstBuffer),
}

/// The arguments of `launch`: its scalars; a buffer per buffer parameter, exactly its extent
/// long, float elements drawn in [-1, 1), `bool` ones 0 or 1, the others zero; its layouts,
/// uploaded as a caller does ([`upload_const`](kda_runtime::GpuBackendExt::upload_const)).
fn arguments(gpu: &dyn GpuBackend, launch: &Launch, draw: &mut Draw) -> Result<Vec<Argument>, BackendError> {
    launch
        .arguments
        .iter()
        .map(|drawn| match drawn {
            Drawn::Scalar(scalar) => Ok(Argument::Scalar(*scalar)),
            Drawn::Layout(layout) => layout.upload(gpu).map(Argument::Layout),
            &Drawn::Buffer { dtype, elements } => {
                // `MAX_ELEMENTS` bounds every drawn extent.
                let len = elements as usize;
                let mut buffer = gpu.alloc(dtype, len)?;
                let bytes: Vec<u8> = match dtype {
                    DType::F32 => (0..len).flat_map(|_| draw.unit().to_le_bytes()).collect(),
                    DType::F64 => (0..len).flat_map(|_| f64::from(draw.unit()).to_le_bytes()).collect(),
                    DType::Bf16 => (0..len).flat_map(|_| bf16::from_f32(draw.unit()).to_le_bytes()).collect(),
                    DType::F16 => (0..len).flat_map(|_| f16::from_f32(draw.unit()).to_le_bytes()).collect(),
                    // A `bool` is 0 or 1: any other byte is no `bool` (`copy_to_device` refuses it).
                    DType::Bool => (0..len).map(|_| u8::from(draw.below(2) == 1)).collect(),
                    // The rest hold zeros: integers (indices and counts are the kernel's
                    // business), `void` (whatever the kernel reads through it) and fp8 (whose
                    // zero is all bits clear).
                    _ => vec![0; len * dtype.size()],
                };
                gpu.copy_to_device(&bytes, &mut buffer)?;
                Ok(Argument::Buffer(buffer))
            }
        })
        .collect()
}

/// A launch as scalars, layouts and geometry:
/// `numel = 7, info = [3, 2, 2, 1], grid = (1, 1, 1), block = (32, 1, 1), shared = 0 bytes`.
fn describe(signature: &Signature, launch: &Launch) -> String {
    let arguments = signature.params.iter().zip(&launch.arguments).filter_map(|(param, drawn)| match drawn {
        Drawn::Scalar(scalar) => Some(format!("{} = {scalar}", param.name)),
        Drawn::Layout(layout) => Some(format!("{} = {layout}", param.name)),
        Drawn::Buffer { .. } => None,
    });
    let LaunchGeometry { grid, block, shared_mem_bytes } = launch.geometry;
    arguments
        .chain([
            format!("grid = {grid:?}"),
            format!("block = {block:?}"),
            format!("shared = {shared_mem_bytes} bytes"),
        ])
        .collect::<Vec<_>>()
        .join(", ")
}
