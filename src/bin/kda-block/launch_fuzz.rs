//! `kda-block emulate --sanitizer address --fuzz-launches N`: a fuzz of the launch checks. Random
//! launches of every entry of `[glm5next_kda]`, each its launch case (`kda::cases`) at a small
//! geometry with one mutation applied (a view shortened, moved or out of its buffer, a wrong
//! element type, a buffer or handle of another backend, a scalar, the grid or block, an argument
//! dropped or added, a pool slot index out of the pool), go through the safe
//! [`GpuBackend::launch`] on the sanitized driver (AddressSanitizer + UBSan). Each launch either
//! runs or is refused; a sanitizer report on a safe launch is a hole in the checks and fails the
//! run.
//!
//! Negative controls show the run could see a hole: the same mutations through
//! `launch_unchecked`, which skips the signature check, with a view one element short of the
//! extent the kernel touches (the driver allocates each view's window exactly, so touching the
//! last element is a heap overflow ASan must report), or a scalar one past its view; and, for the
//! mutations the backend refuses below the signature (foreign buffers and handles, ranges outside
//! their buffer, C types, the argument count), that they are refused even unchecked.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::ops::Range;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use kda::cases::{Access, CaseArg, HostData, KernelCase, PreparedArg};
use kda::geometry::KdaGeometry;
use kda::kernels::{Glm5NextKdaEntry, Glm5NextKdaKernels};
use kda::rng::SplitMix64;
use kda_build::cuda::emulation::Sanitizer;

use crate::emulate::emulated_build;
use kda_runtime::emu::DriverBackend;
use kda_runtime::host::HostStorage;
use kda_runtime::signature::{KernelParam, Op, ParamKind, Signature};
use kda_runtime::{
    BackendError, DType, GpuBackend, KernelArg, KernelEntry, KernelHandle, LaunchGeometry, signature,
};

/// What a fuzz run does.
#[derive(Clone, Debug)]
pub struct FuzzOptions {
    /// The manifest (this crate's).
    pub manifest: PathBuf,
    /// The kernels directory to build.
    pub kernels: PathBuf,
    /// Where the emulated build goes (its `address` variant, shared with `kda-block emulate`).
    pub out_dir: PathBuf,
    /// How many fuzzed launches.
    pub launches: u64,
    /// Seed of the inputs, of the choices and of the block orders.
    pub seed: u64,
}

/// One kind of launch the fuzz makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// The case's own launch, unchanged.
    Valid,
    /// One view shortened by 1..=8 elements (or to nothing).
    ShortView,
    /// One view as far into a larger buffer (poison before it), same length.
    OffsetView,
    /// One view's range past its buffer's end, or reversed.
    OutOfRangeSlice,
    /// One buffer of another element type, the same length.
    WrongDtype,
    /// One buffer allocated by another backend.
    ForeignBuffer,
    /// The kernel handle looked up on another backend.
    ForeignHandle,
    /// One integer scalar changed (0, 1, ±1, doubled, halved, huge, random).
    Scalar,
    /// Grid, block or shared memory changed (0 included).
    GridBlock,
    /// An argument dropped or one added.
    ArgCount,
    /// One view's buffer given a shorter storage (`DeviceBuffer::storage_mut`), its range kept.
    SwappedStorage,
    /// The entry looked up with a signature of the caller's making (a buffer's extent 0).
    ForgedSignature,
    /// An index of the `slot` buffer (pool slots) at or past `slots`.
    SlotValue,
}

impl Class {
    /// Every class, in the order of the report.
    pub const ALL: [Class; 13] = [
        Class::Valid,
        Class::ShortView,
        Class::OffsetView,
        Class::OutOfRangeSlice,
        Class::WrongDtype,
        Class::ForeignBuffer,
        Class::ForeignHandle,
        Class::Scalar,
        Class::GridBlock,
        Class::ArgCount,
        Class::SwappedStorage,
        Class::ForgedSignature,
        Class::SlotValue,
    ];

    /// The name the report uses.
    pub fn name(self) -> &'static str {
        match self {
            Class::Valid => "valid",
            Class::ShortView => "short_view",
            Class::OffsetView => "offset_view",
            Class::OutOfRangeSlice => "out_of_range_slice",
            Class::WrongDtype => "wrong_dtype",
            Class::ForeignBuffer => "foreign_buffer",
            Class::ForeignHandle => "foreign_handle",
            Class::Scalar => "scalar",
            Class::GridBlock => "grid_block",
            Class::ArgCount => "arg_count",
            Class::SwappedStorage => "swapped_storage",
            Class::ForgedSignature => "forged_signature",
            Class::SlotValue => "slot_value",
        }
    }

    /// Whether the class applies to `case` (only the pooled decode kernels have slot indices).
    fn applies(self, case: &KernelCase) -> bool {
        self != Class::SlotValue || case.buffer("slot").is_some()
    }
}

/// How the launches of one class went.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClassCounts {
    /// Launches that ran.
    pub launched: u64,
    /// Launches refused by a check (nothing reached the kernel).
    pub refused: u64,
    /// Launches the driver ran and failed without a sanitizer report (the emulator's own checks).
    pub launch_errors: u64,
    /// Launches with a sanitizer report: holes in the checks.
    pub reports: u64,
}

/// How a negative control went.
#[derive(Clone, Debug)]
pub struct Control {
    /// The class it controls.
    pub class: Class,
    /// What it launched.
    pub what: String,
    /// What it must give: a sanitizer report, or a refusal even unchecked.
    pub expect: Expect,
    /// Whether it did.
    pub passed: bool,
}

/// What a negative control must give.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// A sanitizer report: the hole the signature check closes is there without it.
    Report,
    /// An `Err` even through `launch_unchecked`: the backend refuses it below the signature.
    Refusal,
}

/// What a fuzz run found.
#[derive(Debug, Default)]
pub struct FuzzReport {
    /// Per class.
    pub counts: BTreeMap<Class, ClassCounts>,
    /// Fuzzed launches per table field, every field of the table listed (0 where none was
    /// drawn).
    pub per_entry: BTreeMap<&'static str, u64>,
    /// The distinct first lines of launch errors without a report (numbers as `#`), with their
    /// counts.
    pub launch_errors: BTreeMap<String, u64>,
    /// Every launch with a sanitizer report, described, with the report.
    pub reports: Vec<String>,
    /// The negative controls.
    pub controls: Vec<Control>,
    /// The emulated build.
    pub build: Duration,
    /// The fuzzed launches.
    pub fuzz: Duration,
    /// The controls.
    pub control_time: Duration,
}

impl FuzzReport {
    /// Whether the run passed: no sanitizer report on a safe launch, every control as expected,
    /// and a launch of every entry of the table.
    pub fn passed(&self) -> bool {
        self.reports.is_empty()
            && self.controls.iter().all(|control| control.passed)
            && self.unlaunched().is_empty()
    }

    /// The entries no fuzzed launch reached.
    fn unlaunched(&self) -> Vec<&'static str> {
        self.per_entry.iter().filter(|&(_, &n)| n == 0).map(|(&field, _)| field).collect()
    }

    /// The per-class table, the controls and the times, as printed.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<20} {:>9} {:>9} {:>9} {:>9} {:>10}",
            "class", "launches", "launched", "refused", "emu_err", "sanitizer"
        );
        let mut total = ClassCounts::default();
        for (class, c) in &self.counts {
            let all = c.launched + c.refused + c.launch_errors + c.reports;
            let _ = writeln!(
                out,
                "{:<20} {all:>9} {:>9} {:>9} {:>9} {:>10}",
                class.name(),
                c.launched,
                c.refused,
                c.launch_errors,
                c.reports
            );
            total.launched += c.launched;
            total.refused += c.refused;
            total.launch_errors += c.launch_errors;
            total.reports += c.reports;
        }
        let all = total.launched + total.refused + total.launch_errors + total.reports;
        let _ = writeln!(
            out,
            "{:<20} {all:>9} {:>9} {:>9} {:>9} {:>10}",
            "total", total.launched, total.refused, total.launch_errors, total.reports
        );
        let entries: Vec<String> = self.per_entry.iter().map(|(field, n)| format!("{field} {n}")).collect();
        let _ = writeln!(out, "per entry: {}", entries.join(", "));
        for field in self.unlaunched() {
            let _ = writeln!(out, "NOT LAUNCHED: {field}: no fuzzed launch reached this entry");
        }
        for (line, n) in &self.launch_errors {
            let _ = writeln!(out, "emu_err × {n}: {line}");
        }
        for class in Class::ALL {
            let of: Vec<&Control> = self.controls.iter().filter(|control| control.class == class).collect();
            let Some(first) = of.first() else { continue };
            let passed = of.iter().filter(|control| control.passed).count();
            let expect = match first.expect {
                Expect::Report => "reported by ASan",
                Expect::Refusal => "refused unchecked",
            };
            let _ = writeln!(out, "control {:<20} {passed}/{} {expect}", class.name(), of.len());
        }
        for control in self.controls.iter().filter(|control| !control.passed) {
            let _ = writeln!(out, "CONTROL FAILED: {} ({:?} expected)", control.what, control.expect);
        }
        let _ = write!(
            out,
            "build {:.1} s, fuzz {:.1} s ({:.1} ms a launch), controls {:.1} s",
            self.build.as_secs_f64(),
            self.fuzz.as_secs_f64(),
            self.fuzz.as_secs_f64() * 1e3 / all.max(1) as f64,
            self.control_time.as_secs_f64()
        );
        out
    }
}

/// Builds the kernels with AddressSanitizer + UBSan, then fuzzes `options.launches` launches and
/// runs the controls; `log` gets a line per sanitizer report and per failed control.
pub fn run(options: &FuzzOptions, log: &mut dyn FnMut(&str)) -> anyhow::Result<FuzzReport> {
    let started = Instant::now();
    let set =
        emulated_build(&options.manifest, &options.kernels, &options.out_dir, Some(Sanitizer::Address))?;
    let driver = set.driver().context("the emulated build made no driver")?;
    let gpu = DriverBackend::new(driver, &[set], options.seed)?;
    let foreign = DriverBackend::new(driver, &[set], options.seed)?;
    log(&format!("on {}", gpu.describe()));
    let kernels = Glm5NextKdaKernels::resolve(&gpu)?;
    let cases = cases(options.seed)?;
    let per_entry = Glm5NextKdaKernels::ENTRIES.iter().map(|entry| (entry.field, 0)).collect();
    let mut report = FuzzReport { build: started.elapsed(), per_entry, ..FuzzReport::default() };
    let fuzzing = Instant::now();
    let mut rng = SplitMix64::new(options.seed ^ 0x6675_7a7a);
    let forged = Glm5NextKdaKernels::ENTRIES.iter().map(|entry| (entry.field, forged(entry))).collect();
    let fuzz = Fuzz { gpu: &gpu, foreign: &foreign, kernels: &kernels, forged };
    for number in 0..options.launches {
        let class = Class::ALL[(number % Class::ALL.len() as u64) as usize];
        let applicable: Vec<&KernelCase> = cases.iter().filter(|case| class.applies(case)).collect();
        let Some(case) = pick(&mut rng, &applicable) else { continue };
        fuzz.one(number, case, class, &mut rng, &mut report, log)?;
    }
    report.fuzz = fuzzing.elapsed();
    let controlling = Instant::now();
    controls(&fuzz, &cases, &mut report, log)?;
    report.control_time = controlling.elapsed();
    Ok(report)
}

/// The cases the fuzz draws from: every entry's at the tiny geometry (head dim 32, chunk 32), at
/// 1 token (a partial chunk, one decode sequence) and 3 (three sequences, a few rows); the
/// smallest the cases offer, so that each launch is cheap.
fn cases(seed: u64) -> anyhow::Result<Vec<KernelCase>> {
    let mut cases = Vec::new();
    for t in [1, 3] {
        cases.extend(KernelCase::all(&KdaGeometry::tiny(), t, seed)?);
    }
    Ok(cases)
}

/// A uniformly drawn element of `items`.
fn pick<'a, T>(rng: &mut SplitMix64, items: &'a [T]) -> Option<&'a T> {
    if items.is_empty() { None } else { items.get(below(rng, items.len() as u64) as usize) }
}

/// Uniform in `0..bound` (0 for a bound of 0).
fn below(rng: &mut SplitMix64, bound: u64) -> u64 {
    if bound == 0 { 0 } else { rng.next_u64() % bound }
}

/// One launch: the kernel, the geometry, the arguments.
struct Launch {
    kernel: KernelHandle,
    geometry: LaunchGeometry,
    slots: Vec<PreparedArg>,
}

/// The backends and the table a fuzz launches with.
struct Fuzz<'a> {
    gpu: &'a DriverBackend,
    foreign: &'a DriverBackend,
    kernels: &'a Glm5NextKdaKernels,
    /// Each entry with a signature of the caller's making, by field ([`forged`]).
    forged: BTreeMap<&'static str, KernelEntry>,
}

/// The host data behind a buffer argument, the part of it the kernel gets, and whether it writes.
fn buffer_of(arg: &CaseArg) -> Option<(&HostData, Range<usize>, bool)> {
    match arg {
        CaseArg::Buffer(buffer) => Some((&buffer.data, 0..buffer.data.len(), buffer.access != Access::Read)),
        CaseArg::Slice { data, range, .. } => Some((data, range.clone(), false)),
        CaseArg::U32 { .. } | CaseArg::F32 { .. } => None,
    }
}

/// `text` with each number that stands alone (not part of a name such as `conv1d`) as `#`.
fn numbers_as_hash(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut previous: Option<char> = None;
    for c in text.chars() {
        let in_name = previous.is_some_and(|p| p.is_alphanumeric() || p == '_');
        match (c.is_ascii_digit(), previous) {
            // The rest of a number already written as `#`.
            (true, Some(p)) if p.is_ascii_digit() && out.ends_with('#') => {}
            (true, _) if !in_name => out.push('#'),
            _ => out.push(c),
        }
        previous = Some(c);
    }
    out
}

/// Whether a launch error is a sanitizer's report: the lines a report starts or ends with, not a
/// sanitizer's name, which the backend's description (in any refusal) carries too.
fn is_report(message: &str) -> bool {
    [
        "ERROR: AddressSanitizer",
        "SUMMARY: UndefinedBehaviorSanitizer",
        "runtime error:",
        "ERROR: LeakSanitizer",
    ]
    .iter()
    .any(|marker| message.contains(marker))
}

impl Fuzz<'_> {
    /// The case's valid launch on the main backend.
    fn valid(&self, case: &KernelCase) -> anyhow::Result<Launch> {
        let kernel = case.kernel(self.kernels).with_context(|| format!("`{}` is absent", case.field()))?;
        let slots = case.prepare(self.gpu)?.into_args();
        Ok(Launch { kernel, geometry: case.launch_geometry(), slots })
    }

    /// One fuzzed launch: the case's valid launch, `class`'s mutation, the safe launch, counted.
    fn one(
        &self,
        number: u64,
        case: &KernelCase,
        class: Class,
        rng: &mut SplitMix64,
        report: &mut FuzzReport,
        log: &mut dyn FnMut(&str),
    ) -> anyhow::Result<()> {
        if class == Class::ForgedSignature {
            // The attack is the lookup: a handle keyed on the caller's signature would be
            // launched checked against it.
            *report.per_entry.entry(case.field()).or_default() += 1;
            let counts = report.counts.entry(class).or_default();
            let forged = self.forged.get(case.field()).context("no forged entry")?;
            match self.gpu.lookup(forged) {
                Err(_) => counts.refused += 1,
                Ok(_) => {
                    counts.reports += 1;
                    let what = format!("#{number} {}: a forged signature resolved", case.field());
                    log(&what);
                    report.reports.push(what);
                }
            }
            return Ok(());
        }
        let mut launch = self.valid(case)?;
        let mutation = self.mutate(case, class, &mut launch, rng)?;
        let what = format!("#{number} {} t = {} {}: {mutation}", case.field(), case.tokens(), class.name());
        let mut args: Vec<KernelArg<'_>> = launch.slots.iter_mut().map(PreparedArg::arg).collect();
        let result = self.gpu.launch(launch.kernel, launch.geometry, &mut args);
        *report.per_entry.entry(case.field()).or_default() += 1;
        let counts = report.counts.entry(class).or_default();
        match result {
            Ok(()) => counts.launched += 1,
            Err(error) => {
                let message = error.to_string();
                if is_report(&message) {
                    counts.reports += 1;
                    log(&format!("SANITIZER REPORT on a safe launch {what}:\n{message}"));
                    report.reports.push(format!("{what}\n{message}"));
                } else if let BackendError::Launch { .. } = error {
                    counts.launch_errors += 1;
                    // Grouped by the message's words: its numbers (the geometry) differ launch by
                    // launch.
                    let shape = numbers_as_hash(message.lines().next().unwrap_or_default());
                    *report
                        .launch_errors
                        .entry(format!("{} {}: {shape}", case.field(), class.name()))
                        .or_default() += 1;
                } else {
                    counts.refused += 1;
                }
            }
        }
        Ok(())
    }

    /// Applies `class`'s mutation to `launch`; what it did, for messages.
    fn mutate(
        &self,
        case: &KernelCase,
        class: Class,
        launch: &mut Launch,
        rng: &mut SplitMix64,
    ) -> anyhow::Result<String> {
        let views: Vec<usize> = (0..launch.slots.len())
            .filter(|&index| matches!(launch.slots[index], PreparedArg::View { .. }))
            .collect();
        let view = pick(rng, &views).copied();
        Ok(match (class, view) {
            (Class::Valid, _) => "unchanged".to_owned(),
            (Class::ShortView, Some(index)) => short_view(&mut launch.slots[index], rng, case, index),
            (Class::OffsetView, Some(index)) => {
                let (data, range, writable) = buffer_of(&case.args()[index]).context("not a buffer")?;
                let prefix = 1 + below(rng, 16) as usize;
                let buffer = data.upload_at(self.gpu, prefix)?;
                let range = prefix + range.start..prefix + range.end;
                let what = format!("`{}` at {range:?} of {}", case.args()[index].name(), buffer.len());
                launch.slots[index] = PreparedArg::View { buffer, range, writable };
                what
            }
            (Class::OutOfRangeSlice, Some(index)) => out_of_range(&mut launch.slots[index], rng, case, index),
            (Class::WrongDtype, Some(index)) => {
                let PreparedArg::View { buffer, .. } = &mut launch.slots[index] else { bail!("not a view") };
                let others: Vec<DType> =
                    DType::ALL.into_iter().filter(|&dtype| dtype != buffer.dtype()).collect();
                let dtype = others[below(rng, others.len() as u64) as usize];
                let what =
                    format!("`{}` as {dtype} instead of {}", case.args()[index].name(), buffer.dtype());
                *buffer = self.gpu.alloc(dtype, buffer.len())?;
                what
            }
            (Class::ForeignBuffer, Some(index)) => {
                let (data, _, _) = buffer_of(&case.args()[index]).context("not a buffer")?;
                let PreparedArg::View { buffer, .. } = &mut launch.slots[index] else { bail!("not a view") };
                *buffer = data.upload_at(self.foreign, 0)?;
                format!("`{}` of the other backend", case.args()[index].name())
            }
            (Class::ForeignHandle, _) => {
                launch.kernel = self.foreign.lookup(case.entry())?;
                "the other backend's handle".to_owned()
            }
            (Class::Scalar, _) => scalar(launch, rng, case),
            (Class::GridBlock, _) => {
                let was = launch.geometry;
                launch.geometry = grid_block(was, rng);
                format!("{was:?} → {:?}", launch.geometry)
            }
            (Class::ArgCount, _) => arg_count(launch, rng),
            (Class::SwappedStorage, Some(index)) => {
                let PreparedArg::View { buffer, range, .. } = &mut launch.slots[index] else {
                    bail!("not a view")
                };
                let len = range.end.saturating_sub(1 + below(rng, 8) as usize);
                let dtype = buffer.dtype();
                *buffer.storage_mut::<HostStorage>().context("not host memory")? =
                    HostStorage::zeroed(dtype, len)?;
                format!(
                    "`{}`'s storage replaced by {len} elements, the view {range:?} kept",
                    case.args()[index].name()
                )
            }
            (Class::ForgedSignature, _) => "a lookup, not a launch (`Fuzz::one`)".to_owned(),
            (Class::SlotValue, _) => self.slot_value(case, launch, rng)?,
            (_, None) => "no view to change".to_owned(),
        })
    }

    /// An index of the `slot` buffer set at or past `slots` (or to a random slot).
    fn slot_value(
        &self,
        case: &KernelCase,
        launch: &mut Launch,
        rng: &mut SplitMix64,
    ) -> anyhow::Result<String> {
        let index = case.args().iter().position(|arg| arg.name() == "slot").context("no `slot` argument")?;
        let slots = case
            .args()
            .iter()
            .find_map(|arg| match arg {
                CaseArg::U32 { name: "slots", value } => Some(*value),
                _ => None,
            })
            .context("no `slots` argument")?;
        let (data, range, writable) = buffer_of(&case.args()[index]).context("not a buffer")?;
        let HostData::U32(mut indices) = data.clone() else { bail!("`slot` is not u32") };
        let at = below(rng, indices.len() as u64) as usize;
        let value = match below(rng, 5) {
            0 => slots,
            1 => slots.saturating_add(1),
            2 => u32::MAX,
            3 => u32::MAX / 2 + 1,
            _ => rng.next_u64() as u32,
        };
        if let Some(slot) = indices.get_mut(at) {
            *slot = value;
        }
        let buffer = HostData::U32(indices).upload_at(self.gpu, 0)?;
        launch.slots[index] = PreparedArg::View { buffer, range, writable };
        Ok(format!("slot[{at}] = {value} of {slots} slots"))
    }
}

/// Shortens a view by 1..=8 elements, or to nothing.
fn short_view(slot: &mut PreparedArg, rng: &mut SplitMix64, case: &KernelCase, index: usize) -> String {
    let PreparedArg::View { range, .. } = slot else { return "not a view".to_owned() };
    let len = range.len() as u64;
    let by = if below(rng, 8) == 0 { len } else { (1 + below(rng, 8)).min(len) };
    range.end -= by as usize;
    format!("`{}` {by} short, {range:?}", case.args()[index].name())
}

/// Moves a view's range past its buffer's end, or reverses it.
fn out_of_range(slot: &mut PreparedArg, rng: &mut SplitMix64, case: &KernelCase, index: usize) -> String {
    let PreparedArg::View { buffer, range, .. } = slot else { return "not a view".to_owned() };
    let len = buffer.len();
    let by = 1 + below(rng, 8) as usize;
    *range = match below(rng, 4) {
        0 => range.start..len + by,
        1 => len + by..len + by + range.len(),
        2 => range.end..range.start.saturating_sub(by),
        _ => range.start + by..range.end + by,
    };
    if range.end <= len && range.start <= range.end {
        // A view that lay short of its buffer's end: push it past.
        *range = range.start..len + 1;
    }
    format!("`{}` {range:?} of {len}", case.args()[index].name())
}

/// Changes one integer scalar.
fn scalar(launch: &mut Launch, rng: &mut SplitMix64, case: &KernelCase) -> String {
    let scalars: Vec<usize> =
        (0..launch.slots.len()).filter(|&index| matches!(launch.slots[index], PreparedArg::U32(_))).collect();
    let Some(&index) = pick(rng, &scalars) else { return "no integer scalar".to_owned() };
    let PreparedArg::U32(value) = &mut launch.slots[index] else { return "not a scalar".to_owned() };
    let was = *value;
    *value = match below(rng, 10) {
        0 => 0,
        1 => 1,
        2 => was.wrapping_sub(1),
        3 => was.wrapping_add(1),
        4 => was.wrapping_mul(2),
        5 => was / 2,
        6 => u32::MAX,
        7 => u32::MAX / 2 + 1,
        8 => below(rng, 256) as u32,
        _ => rng.next_u64() as u32,
    };
    format!("`{}` {was} → {value}", case.args()[index].name())
}

/// A grid, block or shared memory of the kind a fuzzer would try: 0, 1, one off, doubled, a warp.
/// Grids stay at most 64 blocks a dimension and blocks 1,024 threads, so a launch stays cheap.
fn grid_block(was: LaunchGeometry, rng: &mut SplitMix64) -> LaunchGeometry {
    let grid = |rng: &mut SplitMix64, dim: u32| match below(rng, 6) {
        0 => 0,
        1 => 1,
        2 => dim.saturating_add(1).min(64),
        3 => dim.saturating_mul(2).min(64),
        4 => below(rng, 9) as u32,
        _ => dim,
    };
    let block = |rng: &mut SplitMix64, dim: u32| match below(rng, 7) {
        0 => 0,
        1 => 1,
        2 => 32,
        3 => dim.saturating_sub(32).max(1),
        4 => dim.saturating_mul(2).min(1024),
        5 => 1 + below(rng, 256) as u32,
        _ => dim,
    };
    let mut geometry = was;
    match below(rng, 4) {
        0 => geometry.grid = (grid(rng, was.grid.0), grid(rng, was.grid.1), grid(rng, was.grid.2)),
        1 => geometry.block = (block(rng, was.block.0), block(rng, was.block.1), block(rng, was.block.2)),
        2 => geometry.shared_mem_bytes = [0, 1, was.shared_mem_bytes / 2][below(rng, 3) as usize],
        _ => {
            geometry.grid.0 = grid(rng, was.grid.0);
            geometry.block.0 = block(rng, was.block.0);
        }
    }
    if geometry == was {
        geometry.grid.0 = was.grid.0.saturating_add(1).min(64);
    }
    geometry
}

/// `entry` with every buffer's extent made 0: a signature of the caller's making, under which a
/// checked launch could write any amount into any buffer. Leaked, once per entry a run.
fn forged(entry: &KernelEntry) -> KernelEntry {
    let Some(real) = entry.signature else { return *entry };
    let params: Vec<KernelParam> = real
        .params
        .iter()
        .map(|param| match param.kind {
            ParamKind::Buffer { dtype, access, .. } => {
                KernelParam::buffer(param.name, dtype, access, "0", &[Op::Literal(0)])
            }
            ParamKind::Scalar(_) => *param,
        })
        .collect();
    let signature = Signature { params: Box::leak(params.into_boxed_slice()), requires: real.requires };
    KernelEntry { signature: Some(Box::leak(Box::new(signature))), ..*entry }
}

/// Drops an argument or adds one.
fn arg_count(launch: &mut Launch, rng: &mut SplitMix64) -> String {
    let len = launch.slots.len() as u64;
    match below(rng, 3) {
        0 if len > 0 => {
            let index = below(rng, len) as usize;
            launch.slots.remove(index);
            format!("argument {index} dropped")
        }
        1 => {
            launch.slots.push(PreparedArg::U32(rng.next_u64() as u32));
            "a u32 added".to_owned()
        }
        _ => {
            launch.slots.push(PreparedArg::F32(1.0));
            "an f32 added".to_owned()
        }
    }
}

/// The buffers whose last element (at a case's extent) `entry` surely touches: outputs written
/// whole and inputs read whole, one or two per entry.
fn touched(entry: Glm5NextKdaEntry) -> &'static [&'static str] {
    use Glm5NextKdaEntry::*;
    match entry {
        gemm => &["c", "b"],
        gemm_splitk => &["b"],
        gemm_reduce => &["c"],
        gemv => &["y", "w"],
        gemv_batchm => &["y"],
        conv_decode => &["out"],
        conv_prefill | chunk_scan => &["state"],
        chunk_prepare => &["sdec"],
        recurrent | recurrent_regs | o_norm => &["out"],
        fill => &["dst"],
    }
}

/// The negative controls, each on the first case of its entry.
fn controls(
    fuzz: &Fuzz<'_>,
    cases: &[KernelCase],
    report: &mut FuzzReport,
    log: &mut dyn FnMut(&str),
) -> anyhow::Result<()> {
    let mut record = |control: Control, log: &mut dyn FnMut(&str)| {
        if !control.passed {
            log(&format!("CONTROL FAILED: {} ({:?} expected)", control.what, control.expect));
        }
        report.controls.push(control);
    };
    for entry in Glm5NextKdaEntry::ALL {
        let Some(case) = cases.iter().find(|case| case.table_entry() == entry) else { continue };
        if case.kernel(fuzz.kernels).is_none() {
            continue;
        }
        for param in touched(entry) {
            for class in [Class::ShortView, Class::OffsetView] {
                record(fuzz.one_short(case, param, class)?, log);
            }
        }
    }
    // A scalar one past its view, unchecked: `fill`'s n, `o_norm`'s rows.
    for (entry, scalar, view) in
        [(Glm5NextKdaEntry::fill, "n", "dst"), (Glm5NextKdaEntry::o_norm, "rows", "out")]
    {
        let Some(case) = cases.iter().find(|case| case.table_entry() == entry) else { continue };
        record(fuzz.scalar_past(case, scalar, view)?, log);
    }
    // Refused below the signature: the same mutations, unchecked.
    let mut rng = SplitMix64::new(0x636f_6e74);
    for class in [
        Class::OutOfRangeSlice,
        Class::WrongDtype,
        Class::ForeignBuffer,
        Class::ForeignHandle,
        Class::ArgCount,
        Class::SwappedStorage,
    ] {
        for case in cases.iter().filter(|case| case.tokens() == 1 && case.kernel(fuzz.kernels).is_some()) {
            let mut launch = fuzz.valid(case)?;
            let mutation = fuzz.mutate(case, class, &mut launch, &mut rng)?;
            let what = format!("{} {} unchecked: {mutation}", case.field(), class.name());
            let result = fuzz.unchecked(&mut launch);
            record(Control { class, what, expect: Expect::Refusal, passed: result.is_err() }, log);
        }
    }
    Ok(())
}

impl Fuzz<'_> {
    /// Launches unchecked on the driver backend.
    fn unchecked(&self, launch: &mut Launch) -> Result<(), BackendError> {
        let mut args: Vec<KernelArg<'_>> = launch.slots.iter_mut().map(PreparedArg::arg).collect();
        // SAFETY: the driver backend runs the kernel in a child process, which its mistakes
        // cannot corrupt (`DriverBackend::launch_unchecked`); handles and buffers are still
        // checked to be this backend's and views to lie inside their buffers.
        #[allow(unsafe_code)]
        unsafe {
            self.gpu.launch_unchecked(launch.kernel, launch.geometry, &mut args)
        }
    }

    /// The extent of `param` at `case`'s valid launch, and its argument index.
    fn extent(&self, case: &KernelCase, param: &str) -> anyhow::Result<(usize, usize)> {
        let mut launch = self.valid(case)?;
        let index = case.args().iter().position(|arg| arg.name() == param).context("no such parameter")?;
        let args: Vec<KernelArg<'_>> = launch.slots.iter_mut().map(PreparedArg::arg).collect();
        let extents = signature::extents(case.entry(), &launch.geometry, &args)?;
        let extent = extents.get(index).copied().flatten().context("no extent")?;
        Ok((index, usize::try_from(extent)?))
    }

    /// `param`'s view one element short of its extent (at an offset into its buffer for
    /// [`Class::OffsetView`]), launched unchecked: ASan must report the kernel's touch of it.
    fn one_short(&self, case: &KernelCase, param: &str, class: Class) -> anyhow::Result<Control> {
        let (index, extent) = self.extent(case, param)?;
        let mut launch = self.valid(case)?;
        let (data, _, writable) = buffer_of(&case.args()[index]).context("not a buffer")?;
        let prefix = if class == Class::OffsetView { 5 } else { 0 };
        let buffer = data.upload_at(self.gpu, prefix)?;
        let range = prefix..prefix + extent.saturating_sub(1);
        let what = format!(
            "{} t = {} `{param}` {range:?} of {} (extent {extent}) unchecked",
            case.field(),
            case.tokens(),
            buffer.len()
        );
        launch.slots[index] = PreparedArg::View { buffer, range, writable };
        let passed = matches!(self.unchecked(&mut launch), Err(error) if is_report(&error.to_string()));
        Ok(Control { class, what, expect: Expect::Report, passed })
    }

    /// `scalar` set one past `view`'s extent-giving value, launched unchecked: ASan must report.
    fn scalar_past(&self, case: &KernelCase, scalar: &str, view: &str) -> anyhow::Result<Control> {
        let (view_index, extent) = self.extent(case, view)?;
        let mut launch = self.valid(case)?;
        let index = case.args().iter().position(|arg| arg.name() == scalar).context("no such scalar")?;
        let PreparedArg::View { range, .. } = &mut launch.slots[view_index] else { bail!("not a view") };
        // The view exactly its extent, so a scalar one larger touches past it.
        *range = range.start..range.start + extent;
        let PreparedArg::U32(value) = &mut launch.slots[index] else { bail!("`{scalar}` is not a u32") };
        let was = *value;
        *value = was.saturating_add(1);
        let what =
            format!("{} `{scalar}` {was} → {} with `{view}` of {extent} unchecked", case.field(), *value);
        let passed = matches!(self.unchecked(&mut launch), Err(error) if is_report(&error.to_string()));
        Ok(Control { class: Class::Scalar, what, expect: Expect::Report, passed })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grid_block_mutation_always_changes_the_geometry_and_stays_cheap() {
        let mut rng = SplitMix64::new(3);
        let was = LaunchGeometry { grid: (2, 1, 1), block: (256, 1, 1), shared_mem_bytes: 64 };
        for _ in 0..1000 {
            let geometry = grid_block(was, &mut rng);
            assert_ne!(geometry, was);
            let (x, y, z) = geometry.grid;
            assert!(x <= 64 && y <= 64 && z <= 64, "{geometry:?}");
        }
    }

    #[test]
    fn numbers_that_stand_alone_are_grouped_and_names_kept() {
        assert_eq!(
            numbers_as_hash("causal_conv1d_update: a grid (0, 12, 1) of blocks (1024, 1, 1) x2"),
            "causal_conv1d_update: a grid (#, #, #) of blocks (#, #, #) x2"
        );
    }

    #[test]
    fn sanitizer_reports_are_told_from_refusals() {
        assert!(is_report("==1==ERROR: AddressSanitizer: heap-buffer-overflow"));
        assert!(is_report("kernel.cu:3:5: runtime error: shift exponent 40 is too large"));
        assert!(!is_report("the view `const f32[3] x` is shorter than its extent 4"));
        assert!(!is_report(
            "kernel handle 0 of backend #2 does not belong to the CUDA emulator's driver under AddressSanitizer + UBSan"
        ));
    }

    #[test]
    fn a_run_that_launched_no_entry_of_the_table_fails_naming_it() {
        let per_entry = Glm5NextKdaKernels::ENTRIES.iter().map(|entry| (entry.field, 3)).collect();
        let mut report = FuzzReport { per_entry, ..FuzzReport::default() };
        assert!(report.passed());
        report.per_entry.insert("fill", 0);
        assert!(!report.passed(), "an entry without a launch passed");
        assert!(report.table().contains("NOT LAUNCHED: fill"), "{}", report.table());
    }

    #[test]
    fn every_class_has_a_distinct_name_and_only_slot_value_needs_a_slot() {
        let names: std::collections::BTreeSet<&str> = Class::ALL.iter().map(|class| class.name()).collect();
        assert_eq!(names.len(), Class::ALL.len());
        let cases = cases(1).unwrap();
        let fill = cases.iter().find(|case| case.table_entry() == Glm5NextKdaEntry::fill).unwrap();
        let decode = cases.iter().find(|case| case.table_entry() == Glm5NextKdaEntry::conv_decode).unwrap();
        assert!(!Class::SlotValue.applies(fill) && Class::SlotValue.applies(decode));
        assert!(
            Class::ALL.iter().filter(|&&class| class != Class::SlotValue).all(|class| class.applies(fill))
        );
    }
}
