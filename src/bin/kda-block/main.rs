//! `kda-block`: the GLM-5.3-Flash KDA block's own binary. Without a subcommand, the main job (the
//! block on the best backend available, checked against its per-token path); `bench`, its
//! kernels' timings and roofline model; `emulate`, its kernels and block on the CUDA emulator
//! against the CPU reference, under the sanitizers. `cargo run --release` at the repository
//! root runs it.
//!
//! Its modules: the main job ([`job`]) and its batched part ([`batch`]), the resolution report
//! ([`report`]), the kernel benchmark ([`bench`]) with its vendor baseline ([`baseline`]) and
//! roofline model ([`roofline`]), the emulated suite ([`emulate`]) and the fuzz of the launch
//! checks ([`launch_fuzz`]).

// `deny`, not `forbid`: `emulate` vouches, under its own `allow`, for the emulated libraries it
// has just built (`EmulatedSet::leak`).
#![deny(unsafe_code)]

mod baseline;
mod batch;
mod bench;
#[cfg(feature = "emulation")]
mod emulate;
mod job;
#[cfg(feature = "emulation")]
mod launch_fuzz;
mod report;
mod roofline;

use std::io::{IsTerminal, Write};
#[cfg(feature = "emulation")]
use std::path::PathBuf;

use anyhow::bail;
use clap::{Parser, Subcommand, ValueEnum};
use kda::geometry::KdaGeometry;
#[cfg(feature = "emulation")]
use kda_build::cuda::emulation::Sanitizer;
use kda_runtime::GpuBackend;

use baseline::{GemmBaseline, GemmComparison};
use batch::{BatchOptions, BatchReport};
use bench::BenchOptions;
use job::{JobOptions, JobReport};

/// The GLM-5.3-Flash KDA block on kda. Without a subcommand: resolves the kernel
/// table on the best backend, runs a prompt through chunked prefill and some decode steps on
/// synthetic weights, and checks them against the per-token path.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Where to run: the best available, the CPU reference, CUDA, or the emulated CUDA kernels.
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    backend: BackendChoice,
    /// Layer geometry: tiny, mid or glm5-flash.
    #[arg(long, default_value = "mid")]
    preset: String,
    /// Prompt tokens (chunked prefill).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    prompt: u32,
    /// Decode steps after the prompt.
    #[arg(long, default_value_t = 16)]
    decode: u32,
    /// Seed of the synthetic weights and inputs.
    #[arg(long, default_value_t = 5)]
    seed: u64,
    /// Also decode this many sequences together (each prefilled with its own prompt of
    /// `--prompt` tokens, then `--decode` steps): batched and replayed steps against one
    /// single-sequence step per sequence, from the same states.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(kda::launch::MAX_DECODE_BATCH)))]
    batch: Option<u32>,
}

#[derive(Subcommand)]
enum Command {
    /// Times one launch of each kernel of the table on its launch case and reports the bandwidth
    /// it achieves, against a device-to-device copy measured in the same run, and on CUDA the
    /// `gemm` against cuBLAS at the same sizes (where libcublas is installed); then the roofline
    /// model of one layer on an H200 (decode at B = 1 and 64, a prefill of `--tokens`), on CUDA
    /// with every launch of the block at that layer timed beside it.
    Bench {
        /// Where to run (default: the `--backend` given before `bench`, else the best available).
        #[arg(long, value_enum)]
        backend: Option<BackendChoice>,
        /// Layer geometry: tiny, mid or glm5-flash (default: glm5-flash on CUDA and for the
        /// roofline model, tiny for the timings on the CPU).
        #[arg(long)]
        preset: Option<String>,
        /// Tokens of the prefill kernels' cases (decode kernels take min(T, 64) sequences) and of
        /// the model's prefill (default: 4096; the CPU's timings 256).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        tokens: Option<u32>,
        /// Timed launches per kernel, after one warm-up launch.
        #[arg(long, default_value_t = BenchOptions::ITERATIONS, value_parser = clap::value_parser!(u32).range(1..))]
        iterations: u32,
        /// Print the roofline model alone: nothing is timed, no device is used.
        #[arg(long)]
        roofline: bool,
    },
    /// Builds the CUDA kernels for the emulator (with a sanitizer, if asked) and checks every
    /// kernel and the block against the CPU reference over a set of shapes; fails on any
    /// difference outside the tolerances, any launch error and any sanitizer report.
    #[cfg(feature = "emulation")]
    Emulate {
        /// A sanitizer to compile in: `address` (AddressSanitizer + UBSan) or `thread`.
        #[arg(long, value_parser = parse_sanitizer, conflicts_with = "all")]
        sanitizer: Option<Sanitizer>,
        /// Everything, one variant after another: plain, `address`, `thread`.
        #[arg(long)]
        all: bool,
        /// `ci`: every barrier path at a few shapes; `edge`: the whole grid of edge shapes.
        #[arg(long, default_value = "ci", value_parser = parse_shapes)]
        shapes: emulate::Shapes,
        /// The kernels directory to build (default: the model's `kernels/`).
        #[arg(long)]
        kernels: Option<PathBuf>,
        /// Where the emulated build goes (default: `target/kda-emulate`).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Stop at the first failure.
        #[arg(long)]
        fail_fast: bool,
        /// Only these kernels' cases (table fields, comma-separated); the block runs either way.
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// Print a line per compared buffer.
        #[arg(long)]
        verbose: bool,
        /// Instead of the suite, fuzz the launch checks with this many random launches through
        /// the safe API (`--sanitizer address` only; see `launch_fuzz`).
        #[arg(long)]
        fuzz_launches: Option<u64>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum BackendChoice {
    Auto,
    Cpu,
    Cuda,
    /// The CUDA kernels on the emulator (host threads; slow: for small presets).
    Emu,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Bench { backend, preset, tokens, iterations, roofline }) => {
            let options = BenchRun { preset, tokens, iterations, seed: cli.seed };
            if roofline { roofline_only(&options) } else { bench(backend.unwrap_or(cli.backend), &options) }
        }
        #[cfg(feature = "emulation")]
        Some(Command::Emulate { sanitizer, fuzz_launches: Some(launches), kernels, out, .. }) => {
            if sanitizer != Some(Sanitizer::Address) {
                bail!("--fuzz-launches needs --sanitizer address");
            }
            fuzz_launches(launches, kernels, out, cli.seed)
        }
        #[cfg(feature = "emulation")]
        Some(Command::Emulate { sanitizer, all, shapes, kernels, out, fail_fast, only, verbose, .. }) => {
            let variants = match (all, sanitizer) {
                (true, _) => vec![None, Some(Sanitizer::Address), Some(Sanitizer::Thread)],
                (false, sanitizer) => vec![sanitizer],
            };
            let options = EmulateRun { shapes, kernels, out, fail_fast, only, verbose, seed: cli.seed };
            let failed: Vec<&str> = variants
                .into_iter()
                .filter_map(|sanitizer| match emulate(sanitizer, &options) {
                    Ok(()) => None,
                    Err(error) => {
                        println!("{error:#}");
                        Some(sanitizer.map_or("plain", Sanitizer::name))
                    }
                })
                .collect();
            if !failed.is_empty() {
                bail!("the emulated suite failed: {}", failed.join(", "));
            }
            Ok(())
        }
        None => run(&cli),
    }
}

/// The model package's root, where its `kernels.toml` and `kernels/` are.
#[cfg(feature = "emulation")]
fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[cfg(feature = "emulation")]
fn parse_sanitizer(name: &str) -> Result<Sanitizer, String> {
    Sanitizer::from_name(name).ok_or_else(|| format!("`{name}`: expected `address` or `thread`"))
}

#[cfg(feature = "emulation")]
fn parse_shapes(name: &str) -> Result<emulate::Shapes, String> {
    match name {
        "ci" => Ok(emulate::Shapes::Ci),
        "edge" => Ok(emulate::Shapes::Edge),
        other => Err(format!("`{other}`: expected `ci` or `edge`")),
    }
}

/// What every variant of one `kda-block emulate` shares.
#[cfg(feature = "emulation")]
struct EmulateRun {
    shapes: emulate::Shapes,
    kernels: Option<PathBuf>,
    out: Option<PathBuf>,
    fail_fast: bool,
    only: Vec<String>,
    verbose: bool,
    seed: u64,
}

/// One variant of `kda-block emulate`: the emulated suite, its failures listed, an `Err` if there are
/// any.
#[cfg(feature = "emulation")]
fn emulate(sanitizer: Option<Sanitizer>, run: &EmulateRun) -> anyhow::Result<()> {
    let EmulateRun { shapes, fail_fast, verbose, seed, .. } = *run;
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repository().join("target"), PathBuf::from);
    let options = emulate::EmulateOptions {
        manifest: repository().join("kernels.toml"),
        kernels: run.kernels.clone().unwrap_or_else(|| repository().join("kernels")),
        out_dir: run.out.clone().unwrap_or_else(|| target.join("kda-emulate")),
        sanitizer,
        shapes,
        seed,
        fail_fast,
        only: run.only.clone(),
    };
    let report = emulate::run(&options, &mut |line| {
        if verbose || line.starts_with("on ") {
            println!("{line}");
        }
    })?;
    for failure in &report.failures {
        println!("{failure}");
    }
    let variant = sanitizer.map_or("plain", Sanitizer::name);
    println!(
        "emulated ({variant}, {shapes:?} shapes): {} buffers compared, {} failures; build {:.1} s, run {:.1} s",
        report.compared,
        report.failures.len(),
        report.build.as_secs_f64(),
        report.run.as_secs_f64()
    );
    if !report.failures.is_empty() {
        bail!("{} of the emulated checks failed", report.failures.len());
    }
    Ok(())
}

/// `kda-block emulate --sanitizer address --fuzz-launches N`: the fuzz of the launch checks, its table
/// printed; an `Err` on a sanitizer report or a failed negative control.
#[cfg(feature = "emulation")]
fn fuzz_launches(
    launches: u64,
    kernels: Option<PathBuf>,
    out: Option<PathBuf>,
    seed: u64,
) -> anyhow::Result<()> {
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repository().join("target"), PathBuf::from);
    let options = launch_fuzz::FuzzOptions {
        manifest: repository().join("kernels.toml"),
        kernels: kernels.unwrap_or_else(|| repository().join("kernels")),
        out_dir: out.unwrap_or_else(|| target.join("kda-emulate")),
        launches,
        seed,
    };
    let report = launch_fuzz::run(&options, &mut |line| println!("{line}"))?;
    println!("{}", report.table());
    if !report.passed() {
        bail!("the launch fuzz failed: {} sanitizer reports on safe launches", report.reports.len());
    }
    Ok(())
}

fn run(cli: &Cli) -> anyhow::Result<()> {
    let geometry = KdaGeometry::preset(&cli.preset)?;
    geometry.validate()?;
    let options = JobOptions { geometry, prompt: cli.prompt, decode: cli.decode, seed: cli.seed };
    let batch = cli.batch.map(|batch| {
        let options =
            BatchOptions { geometry, batch, prompt: cli.prompt, steps: cli.decode.max(1), seed: cli.seed };
        (batch, options)
    });
    // Token counts past the block's bound are refused before a backend is opened, and the
    // batched part's before the job runs: not after minutes of work.
    options.tokens()?;
    if let Some((_, options)) = &batch {
        options.decode_tokens()?;
    }
    let (gpu, _) = select_backend(cli.backend)?;
    print!("{}", report::resolution(gpu.as_ref()));
    println!(
        "\nblock: {} ({geometry}); prompt {} tokens, then {} decode steps; seed {}",
        cli.preset, cli.prompt, cli.decode, cli.seed
    );
    let report = job::run(gpu.as_ref(), &options, &mut progress)?;
    print_report(&report);
    if let Some((batch, options)) = batch {
        println!(
            "\nbatched decode: {batch} sequences, each a prompt of {} tokens, then {} steps",
            cli.prompt, cli.decode
        );
        print_batch_report(batch, &batch::run(gpu.as_ref(), &options)?);
    }
    Ok(())
}

/// The CPU reference backend, or CUDA where this binary can drive it; and which of the two
/// ([`BackendChoice::Cpu`] or [`BackendChoice::Cuda`]) it is.
fn select_backend(choice: BackendChoice) -> anyhow::Result<(Box<dyn GpuBackend>, BackendChoice)> {
    if let BackendChoice::Emu = choice {
        let gpu = emulated_backend()?;
        println!("backend: {}", gpu.describe());
        return Ok((gpu, BackendChoice::Emu));
    }
    match (choice, cuda_backend()) {
        (BackendChoice::Cuda, Err(why)) => bail!("--backend cuda: {why}"),
        (BackendChoice::Cuda | BackendChoice::Auto, Ok(gpu)) => {
            println!("backend: {}", gpu.describe());
            return Ok((gpu, BackendChoice::Cuda));
        }
        (BackendChoice::Auto, Err(why)) => println!("backend: CPU reference (CUDA not used: {why})"),
        (BackendChoice::Cpu | BackendChoice::Emu, _) => println!("backend: CPU reference (--backend cpu)"),
    }
    Ok((Box::new(kda::reference::backend()), BackendChoice::Cpu))
}

/// The arguments of `kda-block bench`.
struct BenchRun {
    preset: Option<String>,
    tokens: Option<u32>,
    iterations: u32,
    seed: u64,
}

impl BenchRun {
    /// The layer and prefill tokens of the roofline model: those given, else `glm5-flash` and
    /// 4096.
    fn model_layer(&self) -> anyhow::Result<(KdaGeometry, u32)> {
        let preset = self.preset.as_deref().unwrap_or(BenchOptions::CUDA_PRESET);
        Ok((KdaGeometry::preset(preset)?, self.tokens.unwrap_or(roofline::PREFILL_TOKENS)))
    }
}

/// `kda-block bench`: the launch cases of every kernel, timed on the chosen backend, then the roofline
/// model, on CUDA with every launch of the block at the model's layer timed beside it.
fn bench(choice: BackendChoice, run: &BenchRun) -> anyhow::Result<()> {
    let (gpu, chosen) = select_backend(choice)?;
    let on_cuda = matches!(chosen, BackendChoice::Cuda);
    let preset = run.preset.clone().unwrap_or_else(|| BenchOptions::default_preset(on_cuda).to_owned());
    let geometry = KdaGeometry::preset(&preset)?;
    let copy_bytes = BenchOptions::default_copy_bytes(on_cuda);
    let tokens = run.tokens.unwrap_or_else(|| BenchOptions::default_tokens(on_cuda));
    let options = BenchOptions { geometry, tokens, iterations: run.iterations, seed: run.seed, copy_bytes };
    println!("preset: {preset}");
    // A progress line only where someone watches: logs get the report alone.
    let terminal = std::io::stderr().is_terminal();
    let report = bench::run(gpu.as_ref(), &options, &mut |field| {
        if terminal {
            eprint!("\r  timing {field:<16}");
            let _ = std::io::stderr().flush();
        }
    })?;
    if terminal {
        eprint!("\r{:<26}\r", "");
    }
    print!("{report}");
    if let (true, Some((shape, ours))) = (on_cuda, report.gemm()) {
        let vendor = vendor_gemm();
        let vendor = vendor.as_deref().map_err(Clone::clone);
        print!("\n{}", GemmComparison::measure(vendor, shape, ours, run.iterations));
    }
    let (geometry, tokens) = run.model_layer()?;
    let model = if on_cuda {
        // The target's own table: its absent optional kernels are absent from the model too.
        let absent: Vec<_> =
            report.kernels.iter().filter(|kernel| kernel.per_launch.is_none()).map(|k| k.entry).collect();
        let profile = roofline::profile(gpu.as_ref(), &geometry, &roofline::Scenario::all(tokens), run.seed)?;
        roofline::model(&geometry, tokens, &absent)?.with_profile(&profile, &report.backend)?
    } else {
        roofline::model(&geometry, tokens, &[])?
    };
    print!("\n{model}");
    Ok(())
}

/// `kda-block bench --roofline`: the model alone, nothing timed.
fn roofline_only(run: &BenchRun) -> anyhow::Result<()> {
    let (geometry, tokens) = run.model_layer()?;
    print!("{}", roofline::model(&geometry, tokens, &[])?);
    Ok(())
}

/// The CUDA backend on device 0 with the kernel images built into this binary, or why not.
#[cfg(feature = "cuda")]
fn cuda_backend() -> anyhow::Result<Box<dyn GpuBackend>> {
    let gpu = kda_runtime::cuda::CudaBackend::new(0, &[&kda::kernels::KERNEL_IMAGES])?;
    if let Some(why) = kda::kernels::KERNEL_IMAGES.missing() {
        bail!("this binary carries no CUDA kernel images: {why}");
    }
    Ok(Box::new(gpu))
}

/// cuBLAS on device 0, the baseline of `kda-block bench`'s `gemm`, or why not.
#[cfg(feature = "cuda")]
fn vendor_gemm() -> Result<Box<dyn GemmBaseline>, String> {
    match baseline::cublas::CublasGemm::open(0) {
        Ok(blas) => Ok(Box::new(blas)),
        Err(error) => Err(error.to_string()),
    }
}

#[cfg(not(feature = "cuda"))]
fn vendor_gemm() -> Result<Box<dyn GemmBaseline>, String> {
    Err("this binary was built without the `cuda` feature".to_owned())
}

/// The emulation backend with the emulated kernels built into this binary.
#[cfg(feature = "emulation")]
fn emulated_backend() -> anyhow::Result<Box<dyn GpuBackend>> {
    Ok(Box::new(kda_runtime::emu::EmuBackend::new(&[&kda::kernels::EMULATED_KERNELS])?))
}

#[cfg(not(feature = "emulation"))]
fn emulated_backend() -> anyhow::Result<Box<dyn GpuBackend>> {
    bail!("this binary was built without the `emulation` feature")
}

#[cfg(not(feature = "cuda"))]
fn cuda_backend() -> anyhow::Result<Box<dyn GpuBackend>> {
    bail!("this binary was built without the `cuda` feature")
}

/// A progress line on stderr for runs long enough to need one.
fn progress(done: u32, total: u32) {
    if total >= 64 && (done.is_multiple_of((total / 10).max(1)) || done == total) {
        eprint!("\r  per-token path: {done}/{total} tokens");
        if done == total {
            eprintln!();
        }
        let _ = std::io::stderr().flush();
    }
}

fn print_report(report: &JobReport) {
    println!("\nthroughput:");
    println!("  chunked prefill   {:>10.1} tokens/s", report.prefill_tokens_per_s);
    println!("  decode            {:>10.1} tokens/s", report.decode_tokens_per_s);
    println!("  per-token path    {:>10.1} tokens/s", report.per_token_tokens_per_s);
    println!("agreement, chunked prefill + decode vs per-token decode:");
    // Prefill rounds q and k to bf16 twice (conv, then L2), decode once: the paths differ by
    // that rounding, not by the recurrence, whose kernels agree to ~1e-6 on equal inputs.
    let outputs = report.outputs;
    let state = report.state;
    println!(
        "  outputs  relative RMS {:.2e}, max relative {:.2e} over {} values (block bound 1e-2)",
        outputs.relative_rms, outputs.max_relative, outputs.elements
    );
    println!(
        "  state    relative RMS {:.2e}, max relative {:.2e} over {} values (block bound 1e-2)",
        state.relative_rms, state.max_relative, state.elements
    );
}

fn print_batch_report(batch: u32, report: &BatchReport) {
    let single = report.single_tokens_per_s;
    println!("throughput across the batch:");
    println!("  {:<26}{single:>10.1} tokens/s", format!("{batch} single-sequence steps"));
    for (path, tokens_per_s) in [
        ("one batched step", report.batched_tokens_per_s),
        ("one replayed step", report.replayed_tokens_per_s),
    ] {
        let ratio = tokens_per_s / single.max(f64::MIN_POSITIVE);
        println!("  {path:<26}{tokens_per_s:>10.1} tokens/s  ({ratio:.2}× the single steps)");
    }
    println!(
        "  one replayed step of all {batch} sequences: {:.1} µs",
        report.replayed_step.as_secs_f64() * 1e6
    );
    let yes_no = |identical| if identical { "bit-identical" } else { "not bit-identical" };
    let batched = report.batched;
    println!(
        "agreement: batched vs single steps {} (outputs relative RMS {:.2e} over {} values); replayed vs batched {}",
        yes_no(report.batched_identical),
        batched.relative_rms,
        batched.elements,
        yes_no(report.replayed_identical)
    );
}
