//! `kda-block emulate`: the CUDA kernels of a kernels directory built for the emulator, plain or with a
//! sanitizer compiled in, and checked against the CPU reference over a set of shapes: every
//! kernel's launch case at each geometry and token count, the dense products at their edge
//! shapes, and the whole block. Plain builds run in this process; sanitized ones one launch per
//! process through the sanitized driver (`EmuBackend` chooses by the build), since a sanitizer's
//! runtime must be in the executable.
//!
//! It builds from any kernels directory against this crate's manifest, so a copy of `kernels/`
//! with a change in it (the mutation script's) is checked without rebuilding anything else.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use kda::cases::KernelCase;
use kda::cases::parity::{BlockComparison, compare_block, head_dim_64};
use kda::geometry::{GateLaw, KdaGeometry};
use kda::kernels::{Glm5NextKdaEntry, Glm5NextKdaKernels};
use kda_build::cuda::emulation::Sanitizer;
use kda_runtime::emu::EmuBackend;
use kda_runtime::{EmulatedSet, GpuBackend};

/// Which shapes a run covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shapes {
    /// Enough to reach every barrier path of every kernel, for CI: head dims 32, 64 and 128,
    /// chunks of 32 and 64, token counts across a chunk boundary and one of whole chunks, the
    /// dense edge shapes.
    Ci,
    /// The whole grid: head dims {32, 64, 128} × chunks {32, 64} × t ∈ {1, 5, C − 1, C, C + 1,
    /// 2C + 1, 100}, and the dense products at every m of 1..=17 and 65, n and k off the tiles,
    /// aligned and not.
    Edge,
}

/// What `kda-block emulate` runs.
#[derive(Clone, Debug)]
pub struct EmulateOptions {
    /// The manifest (this crate's).
    pub manifest: PathBuf,
    /// The kernels directory to build.
    pub kernels: PathBuf,
    /// Where the emulated build goes.
    pub out_dir: PathBuf,
    /// The sanitizer to compile in, if any.
    pub sanitizer: Option<Sanitizer>,
    /// The shapes.
    pub shapes: Shapes,
    /// Seed of the inputs and of the block orders.
    pub seed: u64,
    /// Stop at the first failure (for the mutation script).
    pub fail_fast: bool,
    /// The table fields whose cases run (all of them if empty); the block runs either way. The
    /// mutation script names the kernels of the file it changed.
    pub only: Vec<String>,
}

/// What a run found.
#[derive(Debug, Default)]
pub struct EmulateReport {
    /// Buffers compared with the reference.
    pub compared: usize,
    /// One line per buffer outside its tolerance, or launch that failed.
    pub failures: Vec<String>,
    /// The emulated build.
    pub build: Duration,
    /// The runs.
    pub run: Duration,
}

/// The model's kernels built for the emulator with `sanitizer` into `out_dir/<variant>`, as a set
/// the emulation backends take (leaked: make one per run).
pub fn emulated_build(
    manifest: &Path,
    kernels: &Path,
    out_dir: &Path,
    sanitizer: Option<Sanitizer>,
) -> anyhow::Result<&'static EmulatedSet> {
    let (namespace, entries) = (Glm5NextKdaKernels::NAMESPACE, &Glm5NextKdaKernels::ENTRIES);
    kda_cli::emulate::build_emulated(manifest, kernels, out_dir, sanitizer, namespace, entries)
}

/// Builds the kernels and runs every shape; `log` gets a line per compared buffer.
pub fn run(options: &EmulateOptions, log: &mut dyn FnMut(&str)) -> anyhow::Result<EmulateReport> {
    let started = Instant::now();
    let set = emulated_build(&options.manifest, &options.kernels, &options.out_dir, options.sanitizer)?;
    let selected = selection(&options.only)?;
    let picked = |cases: Vec<KernelCase>| cases.into_iter().filter(|case| selected(case.table_entry()));
    let mut report = EmulateReport { build: started.elapsed(), ..EmulateReport::default() };
    // In process, or through the sanitized driver: as the set was built.
    let gpu = EmuBackend::new(&[set])?.with_seed(options.seed);
    log(&format!("on {}", gpu.describe()));
    let kernels = Glm5NextKdaKernels::resolve(&gpu)?;
    let reference = kda::reference::backend();
    let reference_kernels = Glm5NextKdaKernels::resolve(&reference)?;
    let running = Instant::now();
    let mut check = |what: String, case: &KernelCase, report: &mut EmulateReport| match case
        .compare((&gpu, &kernels), (&reference, &reference_kernels))
    {
        Ok(comparisons) => {
            for comparison in comparisons {
                report.compared += 1;
                let line = format!("{what} {:<6} [{}]", comparison.output, comparison.check);
                match comparison.result {
                    Ok(measured) => log(&format!("{line} ok {measured}")),
                    Err(mismatch) => report.failures.push(format!("{line} FAIL {mismatch}")),
                }
            }
        }
        Err(error) => report.failures.push(format!("{what} FAILED to run: {error}")),
    };
    for (name, geometry, tokens) in geometries(options.shapes)? {
        for t in tokens {
            for case in picked(KernelCase::all(&geometry, t, options.seed)?) {
                check(format!("{name:<10} t = {t:<4} {:<15}", case.field()), &case, &mut report);
                if options.fail_fast && !report.failures.is_empty() {
                    return Ok(finish(report, running));
                }
            }
        }
    }
    for case in picked(KernelCase::dense_edges(options.seed, options.shapes == Shapes::Edge)?) {
        let what = format!("dense      m = {:<4} {:<15}", case.tokens(), case.field());
        check(what, &case, &mut report);
        if options.fail_fast && !report.failures.is_empty() {
            return Ok(finish(report, running));
        }
    }
    // One block for everything: the norm walks row after row, the GEMM refills its pipeline for
    // further tiles, the prefill conv walks further heads and token tiles, the GEMVs further
    // column blocks, the chunk kernels further chunks, heads and column tiles.
    let one_block = [
        (Glm5NextKdaEntry::o_norm, 5),
        (Glm5NextKdaEntry::gemm, 130),
        (Glm5NextKdaEntry::conv_prefill, 65),
        (Glm5NextKdaEntry::gemv, 1),
        (Glm5NextKdaEntry::gemv_batchm, 5),
        (Glm5NextKdaEntry::chunk_prepare, 65),
        (Glm5NextKdaEntry::chunk_scan, 65),
    ];
    for (entry, t) in one_block.into_iter().filter(|&(entry, _)| selected(entry)) {
        let case = KernelCase::new(entry, &head_dim_64(), t, options.seed)?.with_blocks(1);
        check(format!("one block  t = {t:<4} {:<15}", entry.field()), &case, &mut report);
    }
    // Every pointer one element off alignment: each kernel's path for unaligned operands, which
    // the sanitizers check for misaligned accesses (the driver allocates each view at its
    // alignment). The chunk kernels' also at t = C, where their last row ends the buffers.
    let d64 = head_dim_64();
    let mut misaligned = KernelCase::all(&d64, 5, options.seed)?;
    for entry in [Glm5NextKdaEntry::chunk_prepare, Glm5NextKdaEntry::chunk_scan] {
        misaligned.push(KernelCase::new(entry, &d64, d64.chunk, options.seed)?);
    }
    for case in picked(misaligned) {
        let case = case.with_offset(1);
        check(format!("offset 1   t = {:<4} {:<15}", case.tokens(), case.field()), &case, &mut report);
    }
    for (name, geometry) in [("tiny", KdaGeometry::tiny()), ("d64", head_dim_64())] {
        block(&gpu, name, geometry, options.seed, &mut report, log);
    }
    Ok(finish(report, running))
}

/// Whether an entry's cases run: every entry if `only` is empty, else the entries whose fields it
/// names, each of which must be one of the table's.
fn selection(only: &[String]) -> anyhow::Result<impl Fn(Glm5NextKdaEntry) -> bool> {
    let chosen = only
        .iter()
        .map(|field| {
            Glm5NextKdaEntry::from_field(field).with_context(|| {
                let fields: Vec<&str> = Glm5NextKdaEntry::ALL.iter().map(|entry| entry.field()).collect();
                format!("`{field}` is not a kernel of the table ({})", fields.join(", "))
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(move |entry| chosen.is_empty() || chosen.contains(&entry))
}

fn finish(mut report: EmulateReport, running: Instant) -> EmulateReport {
    report.run = running.elapsed();
    report
}

/// The geometries of a run and the token counts at each.
fn geometries(shapes: Shapes) -> anyhow::Result<Vec<(String, KdaGeometry, Vec<u32>)>> {
    let mut runs = Vec::new();
    for head_dim in [32, 64, 128] {
        // Head dim 128 under the softplus law, the others the bounded one: every run takes both.
        let gate_law = if head_dim == 128 { GateLaw::Softplus } else { KdaGeometry::tiny().gate_law };
        for chunk in [32, 64] {
            let geometry = KdaGeometry {
                hidden: 2 * head_dim,
                heads: 2,
                head_dim,
                chunk,
                gate_law,
                ..KdaGeometry::tiny()
            };
            geometry.validate().with_context(|| format!("head dim {head_dim}, chunk {chunk}"))?;
            let tokens = match shapes {
                // t ≡ 1 (mod C) reaches the chunk kernels' one-row tail; C − 1 a partial chunk;
                // t = C a last chunk that is whole, ending at the buffers' last row.
                Shapes::Ci if (head_dim, chunk) == (32, 32) => vec![1, 32, 33],
                Shapes::Ci if (head_dim, chunk) == (64, 64) => vec![65],
                Shapes::Ci if (head_dim, chunk) == (128, 64) => vec![63],
                Shapes::Ci => continue,
                Shapes::Edge => vec![1, 5, chunk - 1, chunk, chunk + 1, 2 * chunk + 1, 100],
            };
            let law = if gate_law == GateLaw::Softplus { ", softplus" } else { "" };
            runs.push((format!("d{head_dim} c{chunk}{law}"), geometry, tokens));
        }
    }
    Ok(runs)
}

/// The block on `gpu` and on the reference: a prefill of 40 tokens, one of 5 on the carried
/// state, 3 decode steps; outputs and final states within the block's bound.
fn block(
    gpu: &dyn GpuBackend,
    name: &str,
    geometry: KdaGeometry,
    seed: u64,
    report: &mut EmulateReport,
    log: &mut dyn FnMut(&str),
) {
    let comparisons = match compare_block(gpu, geometry, seed, &[40, 5], 48) {
        Ok(comparisons) => comparisons,
        Err(error) => {
            report.failures.push(format!("block {name} FAILED to run: {error}"));
            return;
        }
    };
    for BlockComparison { what, check, result } in comparisons {
        report.compared += 1;
        let mut line = String::new();
        let _ = write!(line, "block {name:<5} prefill 40 + 5, 3 decode {what:<16} [{check}]");
        match result {
            Ok(measured) => log(&format!("{line} ok {measured}")),
            Err(mismatch) => report.failures.push(format!("{line} FAIL {mismatch}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ci_shapes_reach_each_barrier_path_and_the_edge_shapes_are_the_whole_grid() {
        let ci = geometries(Shapes::Ci).unwrap();
        let has = |head_dim: u32, chunk: u32, t: u32| {
            ci.iter().any(|(_, g, tokens)| g.head_dim == head_dim && g.chunk == chunk && tokens.contains(&t))
        };
        // Every head dim; both chunks with a partial chunk; t ≡ 1 (mod C) at both chunk sizes; a
        // whole last chunk.
        assert!(has(32, 32, 33) && has(64, 64, 65) && has(128, 64, 63) && has(32, 32, 1), "{ci:?}");
        assert!(has(32, 32, 32), "{ci:?}");
        let laws = |runs: &[(String, KdaGeometry, Vec<u32>)]| {
            runs.iter().map(|(_, g, _)| g.gate_law).collect::<Vec<_>>()
        };
        assert!(laws(&ci).contains(&GateLaw::Softplus) && laws(&ci).contains(&KdaGeometry::tiny().gate_law));
        let edge = geometries(Shapes::Edge).unwrap();
        assert_eq!(edge.len(), 6);
        for (_, geometry, tokens) in &edge {
            let c = geometry.chunk;
            assert_eq!(tokens, &[1, 5, c - 1, c, c + 1, 2 * c + 1, 100]);
        }
    }

    #[test]
    fn only_runs_the_named_kernels_and_refuses_a_name_the_table_lacks() {
        use Glm5NextKdaEntry::{chunk_prepare, chunk_scan, gemm, gemv, recurrent};
        let every = selection(&[]).unwrap();
        assert!(every(chunk_scan) && every(gemv));
        let only = ["chunk_prepare".to_owned(), "chunk_scan".to_owned()];
        let chunk = selection(&only).unwrap();
        assert!(chunk(chunk_prepare) && chunk(chunk_scan));
        assert!(!chunk(gemm) && !chunk(recurrent));
        let error = selection(&["chunk_prep".to_owned()]).err().unwrap().to_string();
        assert!(
            error.starts_with("`chunk_prep` is not a kernel of the table (gemm, gemm_splitk, "),
            "{error}"
        );
    }

    #[test]
    fn the_dense_edge_cases_cover_every_dispatch_class_unaligned_and_off_the_tiles() {
        let quick = KernelCase::dense_edges(1, false).unwrap();
        let thorough = KernelCase::dense_edges(1, true).unwrap();
        for cases in [&quick, &thorough] {
            for entry in [Glm5NextKdaEntry::gemm, Glm5NextKdaEntry::gemv, Glm5NextKdaEntry::gemv_batchm] {
                assert!(cases.iter().any(|case| case.table_entry() == entry), "no {entry:?} case");
            }
        }
        let gemm_rows: Vec<u32> = thorough
            .iter()
            .filter(|case| case.table_entry() == Glm5NextKdaEntry::gemm)
            .map(KernelCase::tokens)
            .collect();
        assert!((1..=17).chain([65]).all(|m| gemm_rows.contains(&m)), "{gemm_rows:?}");
    }
}
