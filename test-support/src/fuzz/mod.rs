//! The manifest fuzzer shared by every front end's test (`kda-build/tests/fuzz_manifest.rs`,
//! `kda-cli/tests/fuzz_list.rs`): seeded inputs, the parser's checks, a parallel runner with a per-input
//! time bound and a watchdog, and the per-stage report.
//!
//! The generator is our own SplitMix64-driven one rather than proptest's strategies: each case
//! draws from `Rng::for_case(seed, index)`, so case N is the same whatever ran before it and can
//! be rerun alone (`KDA_FUZZ_ONLY=N`), the cases split across threads without coordination, and
//! nothing is spent on shrinking (a failing input is saved whole instead).
//!
//! Environment: `KDA_FUZZ_CASES` (how many random inputs), `KDA_FUZZ_SEED`, `KDA_FUZZ_ONLY`
//! (one case), `KDA_FUZZ_THREADS`, `KDA_FUZZ_DIR` (the scratch directory), `KDA_FUZZ_VERBOSE`
//! (one line per input: its stage and first error).

pub mod generate;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kda_build::{Manifest, ManifestError};

pub use generate::{Input, Origin};

/// The seed of the documented runs.
pub const DEFAULT_SEED: u64 = 0x6B64_615F_6675_7A7A;

/// How long one input may take in one front end before it is reported as slow. Debug builds
/// are some ten times slower.
pub fn slow_limit() -> Duration {
    if cfg!(debug_assertions) { Duration::from_secs(20) } else { Duration::from_secs(2) }
}

/// The time rows of whole inputs, checks included, per origin.
const WHOLE: [&str; 5] = [
    "(whole inputs: valid)",
    "(whole inputs: mutated)",
    "(whole inputs: garbage)",
    "(whole inputs: pathological)",
    "(whole inputs: named)",
];

/// After this long on one input the watchdog reports a hang and aborts the run.
fn hang_limit() -> Duration {
    slow_limit() * 15
}

/// What one run covers, and on how many threads.
pub struct Config {
    /// The seed every random input is drawn from (`KDA_FUZZ_SEED`, else [`DEFAULT_SEED`]).
    pub seed: u64,
    /// How many random inputs, after the named ones (`KDA_FUZZ_CASES`).
    pub cases: u64,
    /// Only this random case, without the named ones (`KDA_FUZZ_ONLY`).
    pub only: Option<u64>,
    /// How many workers (`KDA_FUZZ_THREADS`, else the available parallelism).
    pub threads: usize,
}

impl Config {
    /// From the environment, with `default_cases` random inputs.
    pub fn from_env(default_cases: u64) -> Self {
        let var = |name: &str| std::env::var(name).ok().map(|v| v.replace('_', ""));
        let number = |name: &str| {
            var(name).map(|v| {
                let parsed = match v.strip_prefix("0x") {
                    Some(hex) => u64::from_str_radix(hex, 16),
                    None => v.parse(),
                };
                parsed.unwrap_or_else(|_| panic!("{name}={v:?} is not a number"))
            })
        };
        let threads = std::thread::available_parallelism().map_or(2, usize::from);
        Config {
            seed: number("KDA_FUZZ_SEED").unwrap_or(DEFAULT_SEED),
            cases: number("KDA_FUZZ_CASES").unwrap_or(default_cases),
            only: number("KDA_FUZZ_ONLY"),
            threads: number("KDA_FUZZ_THREADS").map_or(threads, |n| n as usize).max(1),
        }
    }
}

/// How an input fared in the parser: the report's rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// The bytes are not UTF-8: every front end refuses to read them.
    NotUtf8,
    /// TOML syntax (`toml`'s parser).
    Syntax,
    /// The shape: a table or entry of the wrong type, unknown or missing keys, values of the
    /// wrong type (serde).
    Shape,
    /// Names, duplicates, empty tables.
    Validation,
    /// The `params` and `requires` parser.
    Contract,
    /// Every step passed: a manifest.
    Accepted,
}

impl Stage {
    /// Every stage, in pipeline order (the order of the report's rows).
    pub const ALL: [Stage; 6] =
        [Stage::NotUtf8, Stage::Syntax, Stage::Shape, Stage::Validation, Stage::Contract, Stage::Accepted];

    /// The stage's row in the report.
    pub fn name(self) -> &'static str {
        match self {
            Stage::NotUtf8 => "rejected: not UTF-8",
            Stage::Syntax => "rejected: TOML syntax",
            Stage::Shape => "rejected: shape (serde/keys)",
            Stage::Validation => "rejected: validation",
            Stage::Contract => "rejected: params/requires",
            Stage::Accepted => "accepted",
        }
    }
}

/// What the parser made of an input.
pub struct Parsed {
    /// The first step that rejected the input, or [`Stage::Accepted`].
    pub stage: Stage,
    /// The text, where the bytes are UTF-8.
    pub text: Option<String>,
    /// What the parser returned, where it ran on the text and did not panic.
    pub result: Option<Result<Manifest, ManifestError>>,
}

/// The file name every front end is told, so that messages can be compared.
pub const FILE: &str = "kernels.toml";

/// Runs the parser on `bytes` as the front ends do (they read the file with `read_to_string`,
/// so bytes that are not UTF-8 never reach it: the lossy text is parsed instead, to reach the
/// parser with whatever the mutation left) and checks every diagnostic.
pub fn parse(case: &mut Case<'_>, bytes: &[u8]) -> Parsed {
    let Ok(text) = std::str::from_utf8(bytes) else {
        let lossy = String::from_utf8_lossy(bytes).into_owned();
        if let Ok(result) = case.guard("parser (lossy text)", || Manifest::parse(FILE, &lossy)) {
            case.check(check_result(&lossy, &result));
            case.count("lossy text of non-UTF-8 input", if result.is_ok() { "accepted" } else { "rejected" });
        }
        return Parsed { stage: Stage::NotUtf8, text: None, result: None };
    };
    let Ok(result) = case.guard("parser", || Manifest::parse(FILE, text)) else {
        return Parsed { stage: Stage::Accepted, text: Some(text.to_owned()), result: None };
    };
    case.check(check_result(text, &result));
    let stage = match &result {
        Ok(_) => Stage::Accepted,
        Err(error) => {
            let stage = stage_of(text, error);
            // A manifest past the syntax goes through every other step, each adding its errors.
            let mut reported: Vec<Stage> = if stage == Stage::Syntax {
                vec![Stage::Syntax]
            } else {
                error.diagnostics.iter().map(|diagnostic| stage_of_message(&diagnostic.message)).collect()
            };
            reported.sort();
            reported.dedup();
            for stage in reported {
                case.count("1b. parser: inputs with errors from", stage.name());
            }
            stage
        }
    };
    if std::env::var_os("KDA_FUZZ_VERBOSE").is_some() {
        let first = result.as_ref().err().map(|error| short(&error.diagnostics[0].render(FILE)));
        eprintln!(
            "case {} ({}): {}: {}",
            case.index,
            case.input.origin.name(),
            stage.name(),
            first.unwrap_or_default()
        );
    }
    Parsed { stage, text: Some(text.to_owned()), result: Some(result) }
}

/// The first step of the parser that rejected `text`.
fn stage_of(text: &str, error: &ManifestError) -> Stage {
    let (_, syntax) = toml::de::DeTable::parse_recoverable(text);
    if !syntax.is_empty() {
        return Stage::Syntax;
    }
    error
        .diagnostics
        .iter()
        .map(|diagnostic| stage_of_message(&diagnostic.message))
        .min()
        .unwrap_or(Stage::Shape)
}

/// The step a message comes from, by its wording (see `kda-build/src/manifest`).
fn stage_of_message(message: &str) -> Stage {
    const SERDE: [&str; 7] = [
        "unknown field",
        "missing field",
        "invalid type",
        "invalid value",
        "invalid length",
        "duplicate field",
        "unknown variant",
    ];
    if message.starts_with("`defines` must be")
        || message.starts_with("define `")
        || message.contains("` is not a kernel table")
        || (message.starts_with("entry `") && message.contains("` must be a table such as"))
    {
        return Stage::Shape;
    }
    if message.starts_with("field name ")
        || message.starts_with("module ")
        || message.starts_with("entry point ")
        || message.starts_with("define \"")
        || message.contains("` lists no kernel entries")
        || message.contains("` is listed twice in `[")
    {
        return Stage::Validation;
    }
    if let Some(rest) = message.strip_prefix("entry `") {
        if let Some(at) = rest.find("`: ") {
            let rest = &rest[at + 3..];
            if SERDE.iter().any(|serde| rest.starts_with(serde)) {
                return Stage::Shape;
            }
        }
        return Stage::Contract;
    }
    Stage::Shape
}

/// The parser's promises: an error has diagnostics, each inside the file, at the right line and
/// column, in file order, each rendered as one `FILE:LINE:COL: message` line; a manifest holds
/// only valid names.
pub fn check_result(text: &str, result: &Result<Manifest, ManifestError>) -> Result<(), String> {
    match result {
        Ok(manifest) => check_manifest(text, manifest),
        Err(error) => check_error(text, error),
    }
}

fn check_error(text: &str, error: &ManifestError) -> Result<(), String> {
    if error.diagnostics.is_empty() {
        return Err("an error without diagnostics".into());
    }
    if error.file != FILE {
        return Err(format!("the error names {:?}, not {FILE:?}", error.file));
    }
    let lines = text.split('\n').count() as u32;
    let mut previous = None;
    for (diagnostic, expected) in
        error.diagnostics.iter().zip(locations(text, error.diagnostics.iter().map(|d| d.span.start)))
    {
        let location = diagnostic.location;
        if diagnostic.span.start > text.len()
            || diagnostic.span.end > text.len()
            || diagnostic.span.start > diagnostic.span.end
        {
            return Err(format!(
                "span {:?} outside the {}-byte file: {}",
                diagnostic.span,
                text.len(),
                short(&diagnostic.message)
            ));
        }
        if location.line == 0 || location.line > lines + 1 || location.column == 0 {
            return Err(format!("{location} outside the {lines}-line file: {}", short(&diagnostic.message)));
        }
        if location != expected {
            return Err(format!("span {:?} is at {expected}, reported at {location}", diagnostic.span));
        }
        if previous.is_some_and(|previous| previous > location) {
            return Err(format!("diagnostics out of file order: {location} after {}", previous.unwrap()));
        }
        previous = Some(location);
        if diagnostic.message.trim().is_empty() {
            return Err(format!("an empty message at {location}"));
        }
        if diagnostic.message.contains('\n') {
            return Err(format!("a message of several lines at {location}: {}", short(&diagnostic.message)));
        }
    }
    let starts: Vec<usize> = error.diagnostics.iter().map(|d| d.span.start).collect();
    if !starts.is_sorted() {
        return Err(format!("diagnostics out of file order: {:?}", &starts[..starts.len().min(20)]));
    }
    let rendered = error.to_string();
    let mut shown = 0;
    for (line, diagnostic) in rendered.split('\n').zip(&error.diagnostics) {
        let prefix = format!("{FILE}:{}:{}: ", diagnostic.location.line, diagnostic.location.column);
        if !line.starts_with(&prefix) {
            return Err(format!("rendered {:?}, not located as {prefix:?}", short(line)));
        }
        shown += 1;
    }
    if shown != error.diagnostics.len() {
        return Err("the rendered error does not show one line per diagnostic".into());
    }
    Ok(())
}

fn check_manifest(text: &str, manifest: &Manifest) -> Result<(), String> {
    use kda_build::manifest::{is_c_identifier, is_rust_field_name};
    let lines = text.split('\n').count() as u32;
    let inside =
        |location: kda_build::Location| location.line >= 1 && location.line <= lines && location.column >= 1;
    for table in &manifest.tables {
        if table.entries.is_empty() || !inside(table.location) {
            return Err(format!("table `{}` accepted empty or outside the file", short(&table.name)));
        }
        for entry in &table.entries {
            if !is_rust_field_name(&entry.field)
                || !is_c_identifier(&entry.module)
                || !is_c_identifier(&entry.entry)
            {
                return Err(format!("entry `{}` accepted with a bad name", short(&entry.field)));
            }
            if !inside(entry.location) {
                return Err(format!("entry `{}` located outside the file", short(&entry.field)));
            }
            if entry.params.is_none() && !entry.requires.is_empty() {
                return Err(format!("entry `{}` has requires without params", short(&entry.field)));
            }
            for param in entry.params.iter().flatten() {
                if !is_c_identifier(&param.name)
                    || !is_rust_field_name(&param.name)
                    || !inside(param.location)
                {
                    return Err(format!(
                        "parameter `{}` accepted with a bad name or location",
                        short(&param.name)
                    ));
                }
            }
        }
    }
    for define in &manifest.defines {
        if !is_c_identifier(&define.name) || !inside(define.location) {
            return Err(format!("define `{}` accepted with a bad name or location", short(&define.name)));
        }
    }
    Ok(())
}

/// The location of each byte offset (ascending, else the later ones are not checked), computed
/// in one pass over `text`: independent of the parser's `LineIndex`.
fn locations(text: &str, offsets: impl Iterator<Item = usize>) -> Vec<kda_build::Location> {
    let (mut line, mut column, mut at) = (1u32, 1u32, 0usize);
    let mut chars = text.char_indices().peekable();
    offsets
        .map(|offset| {
            let offset = offset.min(text.len());
            if offset < at {
                // Out of order: reported by the order check.
                return kda_build::Location::of_offset(text, offset);
            }
            while let Some(&(index, c)) = chars.peek() {
                if index + c.len_utf8() > offset {
                    break;
                }
                chars.next();
                if c == '\n' {
                    (line, column) = (line + 1, 1)
                } else {
                    column += 1
                }
                at = index + c.len_utf8();
            }
            kda_build::Location { line, column }
        })
        .collect()
}

/// `text` cut for a report.
pub fn short(text: &str) -> String {
    match text.char_indices().nth(160) {
        Some((cut, _)) => format!("{}… ({} bytes)", &text[..cut], text.len()),
        None => text.to_owned(),
    }
}

/// Whether `message` starts `FILE:LINE:COL: ` with LINE at most `lines + 1`; the location.
pub fn located(message: &str, file: &str, lines: usize) -> Option<(u32, u32)> {
    let rest = message.strip_prefix(file)?.strip_prefix(':')?;
    let (line, rest) = rest.split_once(':')?;
    let (column, rest) = rest.split_once(':')?;
    let (line, column): (u32, u32) = (line.parse().ok()?, column.parse().ok()?);
    (rest.starts_with(' ') && line >= 1 && line as usize <= lines + 1 && column >= 1)
        .then_some((line, column))
}

// ---------------------------------------------------------------------------------------------
// The runner.

/// The counts and failures of one worker, merged at the end.
#[derive(Default)]
struct Tally {
    /// `(section, rank, row)` → inputs per origin; the parser's rows rank in pipeline order.
    counts: BTreeMap<(String, usize, String), [u64; 5]>,
    time: BTreeMap<&'static str, Duration>,
    failures: Vec<String>,
    slow: Vec<String>,
    bytes: u64,
    largest: usize,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        for (key, counts) in other.counts {
            let mine = self.counts.entry(key).or_default();
            for (a, b) in mine.iter_mut().zip(counts) {
                *a += b;
            }
        }
        for (stage, time) in other.time {
            *self.time.entry(stage).or_default() += time;
        }
        self.failures.extend(other.failures);
        self.slow.extend(other.slow);
        self.bytes += other.bytes;
        self.largest = self.largest.max(other.largest);
    }
}

/// A front end panicked in [`Case::guard`]: the panic is recorded as the case's failure already.
#[derive(Debug)]
pub struct Panicked;

/// One input being run: where its file is, and what to record.
pub struct Case<'a> {
    /// The case's number: `KDA_FUZZ_ONLY` reruns a random one; named ones count down from
    /// `u64::MAX`.
    pub index: u64,
    /// The input itself.
    pub input: &'a Input,
    /// The input, written to disk (the derive, the build and `kda list` read files).
    pub path: &'a Path,
    /// The worker's own scratch directory.
    pub dir: &'a Path,
    /// The run's directory, where failing inputs are saved.
    root: &'a Path,
    tally: &'a mut Tally,
    failed: bool,
}

impl Case<'_> {
    /// Counts the input under `row` of `section`.
    pub fn count(&mut self, section: &str, row: &str) {
        let rank = Stage::ALL.iter().position(|stage| stage.name() == row).unwrap_or(Stage::ALL.len());
        let counts = self.tally.counts.entry((section.to_owned(), rank, row.to_owned())).or_default();
        counts[self.input.origin.index()] += 1;
    }

    /// Runs one front end, timed, its panics caught and reported.
    pub fn guard<T>(&mut self, stage: &'static str, run: impl FnOnce() -> T) -> Result<T, Panicked> {
        let start = Instant::now();
        let result = catch_unwind(AssertUnwindSafe(run));
        let elapsed = start.elapsed();
        *self.tally.time.entry(stage).or_default() += elapsed;
        if elapsed > slow_limit() {
            let what = self.describe();
            self.tally.slow.push(format!("{stage} took {elapsed:.2?} on {what}"));
        }
        result.map_err(|panic| {
            self.fail(format!("PANIC in {stage}: {}", panic_message(&*panic)));
            Panicked
        })
    }

    /// Records a failed check.
    pub fn check(&mut self, result: Result<(), String>) {
        if let Err(message) = result {
            self.fail(message);
        }
    }

    /// Records a failure; the first of a case saves its input under the run's `failures/`.
    pub fn fail(&mut self, message: String) {
        let saved = if self.failed { String::new() } else { save(self.root, self.index, &self.input.bytes) };
        self.failed = true;
        let what = self.describe();
        self.tally.failures.push(format!("{what}: {message}{saved}"));
    }

    fn describe(&self) -> String {
        format!(
            "case {} ({}, {}, {} bytes)",
            self.index,
            self.input.origin.name(),
            short(&self.input.what),
            self.input.bytes.len()
        )
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("(no message)")
}

fn save(root: &Path, index: u64, bytes: &[u8]) -> String {
    let dir = root.join("failures");
    let path = dir.join(format!("case-{index}.toml"));
    match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, bytes)) {
        Ok(()) => format!(" [input saved to {}]", path.display()),
        Err(error) => format!(" [input not saved: {error}]"),
    }
}

/// Where a fuzzer writes: `KDA_FUZZ_DIR`, else `default` (the test's `CARGO_TARGET_TMPDIR`).
pub fn scratch_root(default: &str) -> PathBuf {
    std::env::var_os("KDA_FUZZ_DIR").map_or_else(|| PathBuf::from(default), PathBuf::from)
}

/// The named cases first (indices from `u64::MAX` down, so they never collide with random
/// ones), then `config.cases` random inputs, over `config.threads` workers; `run` drives one
/// input through the front ends. Prints the report and fails on any panic, failed check, slow
/// input or hang.
pub fn run(name: &str, root: &Path, config: &Config, run: impl Fn(&mut Case<'_>) + Sync) {
    let named = generate::named();
    let named_count = if config.only.is_some() { 0 } else { named.len() as u64 };
    let total = named_count + config.only.map_or(config.cases, |_| 1);
    let input_of = |n: u64| -> (u64, Input) {
        if n < named_count {
            let (what, bytes) = &named[n as usize];
            let input = Input {
                bytes: bytes.clone(),
                origin: Origin::Named,
                table: "t".into(),
                what: (*what).into(),
            };
            (u64::MAX - n, input)
        } else {
            let index = config.only.unwrap_or(n - named_count);
            (index, generate::input(config.seed, index))
        }
    };
    // Last run's workers and failures go; the runs of other fuzzers beside it stay.
    let _ = std::fs::remove_dir_all(root);
    println!(
        "{name}: {total} inputs ({named_count} named, seed {:#x}), {} threads; each input is written \
         to {}/w*/{FILE} before it runs, so a crash leaves it there (rerun one with KDA_FUZZ_ONLY=N)",
        config.seed,
        config.threads,
        root.display()
    );
    let next = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let started = Instant::now();
    // Per worker: the case it runs (+1; 0 when idle) and when it started it (ms since start).
    let current: Vec<(AtomicU64, AtomicU64)> =
        (0..config.threads).map(|_| (AtomicU64::new(0), AtomicU64::new(0))).collect();
    let total_tally = Mutex::new(Tally::default());
    std::thread::scope(|scope| {
        let watchdog = scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                let now = started.elapsed().as_millis() as u64;
                for (worker, (case, since)) in current.iter().enumerate() {
                    let case = case.load(Ordering::Relaxed);
                    if case != 0
                        && now.saturating_sub(since.load(Ordering::Relaxed)) > hang_limit().as_millis() as u64
                    {
                        eprintln!(
                            "HANG: worker {worker} has spent over {:?} on input {} ({}); aborting",
                            hang_limit(),
                            case - 1,
                            root.join(format!("w{worker}")).join(FILE).display()
                        );
                        std::process::abort();
                    }
                }
            }
        });
        let workers: Vec<_> = (0..config.threads)
            .map(|worker| {
                let (next, current, total_tally, run, input_of) =
                    (&next, &current, &total_tally, &run, &input_of);
                std::thread::Builder::new()
                    .name(format!("fuzz-w{worker}"))
                    // The stack of a main thread (the CLI, a build script) and of rustc's
                    // expansion thread.
                    .stack_size(8 << 20)
                    .spawn_scoped(scope, move || {
                        let dir = root.join(format!("w{worker}"));
                        std::fs::create_dir_all(&dir).expect("the scratch directory");
                        let path = dir.join(FILE);
                        let mut tally = Tally::default();
                        loop {
                            let n = next.fetch_add(1, Ordering::Relaxed);
                            if n >= total || tally.failures.len() >= 20 {
                                break;
                            }
                            let (index, input) = input_of(n);
                            std::fs::write(&path, &input.bytes).expect("writing the input");
                            current[worker].1.store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
                            current[worker].0.store(n + 1, Ordering::Relaxed);
                            tally.bytes += input.bytes.len() as u64;
                            tally.largest = tally.largest.max(input.bytes.len());
                            let mut case = Case {
                                index,
                                input: &input,
                                path: &path,
                                dir: &dir,
                                root,
                                tally: &mut tally,
                                failed: false,
                            };
                            // A panic here is the harness's own: the front ends run guarded.
                            let start = Instant::now();
                            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| run(&mut case))) {
                                case.fail(format!("PANIC in the harness: {}", panic_message(&*panic)));
                            }
                            let elapsed = start.elapsed();
                            if std::env::var_os("KDA_FUZZ_VERBOSE").is_some() {
                                eprintln!("case {index}: {elapsed:.2?} ({})", short(&input.what));
                            }
                            *case.tally.time.entry(WHOLE[input.origin.index()]).or_default() += elapsed;
                            if elapsed > slow_limit() * 2 {
                                let what = case.describe();
                                case.tally.slow.push(format!("the input took {elapsed:.2?} in all: {what}"));
                            }
                            current[worker].0.store(0, Ordering::Relaxed);
                        }
                        total_tally.lock().unwrap().merge(tally);
                    })
                    .expect("a worker thread")
            })
            .collect();
        for worker in workers {
            // A worker's panic is outside any front end: the harness itself.
            if worker.join().is_err() {
                total_tally.lock().unwrap().failures.push("a worker panicked outside the front ends".into());
            }
        }
        done.store(true, Ordering::Relaxed);
        watchdog.join().unwrap();
    });
    let wall = started.elapsed();
    let tally = total_tally.into_inner().unwrap();
    print!("{}", report(name, total, wall, &tally));
    let mut problems = String::new();
    for failure in &tally.failures {
        let _ = writeln!(problems, "  {failure}");
    }
    for slow in &tally.slow {
        let _ = writeln!(problems, "  SLOW (over {:?}): {slow}", slow_limit());
    }
    assert!(
        problems.is_empty(),
        "{name}: {} failures, {} slow inputs:\n{problems}",
        tally.failures.len(),
        tally.slow.len()
    );
}

fn report(name: &str, total: u64, wall: Duration, tally: &Tally) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n{name}: {total} inputs ({:.1} MB, largest {} bytes) in {wall:.2?}: {:.0} inputs/s",
        tally.bytes as f64 / 1e6,
        tally.largest,
        total as f64 / wall.as_secs_f64()
    );
    let mut section = "";
    for ((sect, _, row), counts) in &tally.counts {
        if sect != section {
            section = sect;
            let _ = write!(out, "\n{sect:<34}");
            for origin in Origin::ALL {
                let _ = write!(out, "{:>10}", origin.name());
            }
            let _ = writeln!(out, "{:>10}", "total");
        }
        let _ = write!(out, "  {row:<32}");
        for count in counts {
            let _ = write!(out, "{count:>10}");
        }
        let _ = writeln!(out, "{:>10}", counts.iter().sum::<u64>());
    }
    let _ = writeln!(out, "\ntime per front end (summed over threads):");
    for (stage, time) in &tally.time {
        let _ = writeln!(out, "  {stage:<32}{time:>12.2?}");
    }
    let _ = writeln!(out, "failures: {}, slow inputs: {}", tally.failures.len(), tally.slow.len());
    out
}
