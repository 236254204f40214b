//! Reading ptxas's verbose report (`--resource-usage`), as nvcc 13.0 prints it on stderr: per
//! SASS target, one block per entry, and one per device function that was not inlined.
//!
//! ```text
//! ptxas info    : 0 bytes gmem
//! ptxas info    : Compiling entry function 'dense_gemm_bf16' for 'sm_90'
//! ptxas info    : Function properties for dense_gemm_bf16
//!     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//! ptxas info    : Used 115 registers, used 1 barriers, 46080 bytes smem
//! ptxas info    : Compile time = 148.033 ms
//! ptxas info    : Function properties for _Z6helperPfi
//!     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//! ```
//!
//! The `Used` line may also list `N bytes cmem[B]` (ptxas 13.0 does for sm_80, not for sm_90)
//! and `N bytes cumulative stack size`; a field this reader does not know is skipped, so a newer
//! ptxas that adds one still reads. The report is read in order: the build runs ptxas for one
//! target at a time, as nvcc does unless told `--threads`.

use super::{EntryResources, ResourceUsage};
use crate::cuda::Arch;

/// Every entry's resources in ptxas's `report` (nvcc's stderr with `--resource-usage`), in the
/// order ptxas compiled them; lines of any other kind are skipped. Device functions are not
/// entries: their own blocks are skipped too (an entry's frame includes what its calls need).
pub(crate) fn parse_resource_usage(report: &str) -> Vec<EntryResources> {
    let mut found = Vec::new();
    // The entry whose block is being read.
    let mut current: Option<EntryResources> = None;
    // Whether the line before announced the current entry's properties (its frame line).
    let mut frame_of_current = false;
    for line in report.lines() {
        let line = line.trim();
        let announced_frame = std::mem::take(&mut frame_of_current);
        if let Some(info) = info(line) {
            if let Some(rest) = info.strip_prefix("Compiling entry function ") {
                found.extend(current.take());
                current = compiling(rest);
            } else if let Some(function) = info.strip_prefix("Function properties for ") {
                frame_of_current = current.as_ref().is_some_and(|entry| entry.entry == function.trim());
            } else if let Some(used) = info.strip_prefix("Used ")
                && let Some(entry) = &mut current
            {
                read_used(used, &mut entry.usage);
            }
        } else if announced_frame && let Some(entry) = &mut current {
            read_frame(line, &mut entry.usage);
        }
    }
    found.extend(current);
    found
}

/// nvcc's `diagnostics` without ptxas's resource report: what is left when a compile fails is
/// the errors and warnings.
pub(crate) fn without_resource_usage(diagnostics: &str) -> String {
    let mut kept = Vec::new();
    let mut after_properties = false;
    for line in diagnostics.lines() {
        let properties = std::mem::take(&mut after_properties);
        match info(line.trim()) {
            Some(info) => after_properties = info.starts_with("Function properties for "),
            None if properties && line.contains("bytes stack frame") => {}
            None => kept.push(line),
        }
    }
    kept.join("\n").trim().to_owned()
}

/// What follows `ptxas info    :`, if `line` is one of ptxas's informational lines.
fn info(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("ptxas info")?.trim_start();
    Some(rest.strip_prefix(':')?.trim())
}

/// The entry of `'dense_gemm_bf16' for 'sm_90'`, with nothing used yet.
fn compiling(rest: &str) -> Option<EntryResources> {
    let (entry, target) = rest.rsplit_once(" for ")?;
    let unquote = |text: &str| text.trim().strip_prefix('\'')?.strip_suffix('\'').map(str::to_owned);
    let arch = unquote(target)?.strip_prefix("sm_").and_then(Arch::parse)?;
    Some(EntryResources { entry: unquote(entry)?, arch, usage: ResourceUsage::default() })
}

/// `0 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads`.
fn read_frame(line: &str, usage: &mut ResourceUsage) {
    for (bytes, what) in fields(line) {
        match what {
            "bytes stack frame" => usage.stack_frame = bytes,
            "bytes spill stores" => usage.spill_stores = bytes,
            "bytes spill loads" => usage.spill_loads = bytes,
            _ => {}
        }
    }
}

/// What follows `Used `: `115 registers, used 1 barriers, 46080 bytes smem, 372 bytes cmem[0]`.
fn read_used(used: &str, usage: &mut ResourceUsage) {
    for (number, what) in fields(used) {
        match what {
            "registers" => usage.registers = number,
            "barriers" => usage.barriers = number,
            "bytes smem" => usage.shared = number,
            what if what.starts_with("bytes cmem[") => usage.constant = usage.constant.saturating_add(number),
            _ => {}
        }
    }
}

/// The comma-separated `NUMBER WHAT` fields of a line, each number with a leading `used ` dropped
/// and the parts of a sum (`1024+0 bytes smem`, as older ptxas wrote it) added; fields that do not
/// start with a number are skipped.
fn fields(line: &str) -> impl Iterator<Item = (u32, &str)> {
    line.split(',').filter_map(|field| {
        let field = field.trim();
        let field = field.strip_prefix("used ").or_else(|| field.strip_prefix("Used ")).unwrap_or(field);
        let (number, what) = field.split_once(' ')?;
        let number =
            number.split('+').try_fold(0u32, |sum, part| Some(sum.saturating_add(part.parse().ok()?)))?;
        Some((number, what.trim()))
    })
}

#[cfg(test)]
mod tests {
    //! On reports captured from nvcc 13.0.88 (`captured/`): the real GEMM and causal-conv modules
    //! with the manifest's defines, the spill fixture (`tests/fixtures/cuda/kernels/spill.cu`),
    //! and a probe for two targets (sm_90, sm_80) with a `__constant__` table, a `__device__`
    //! global, a `__noinline__` device function with a local array, a `printf`, and a kernel of
    //! 64 unrolled accumulators under `__launch_bounds__(1024)`.

    use super::*;

    const SM_80: Arch = Arch { major: 8, minor: 0, specific: false };
    const SM_90: Arch = Arch { major: 9, minor: 0, specific: false };

    fn entry(entry: &str, arch: Arch, usage: ResourceUsage) -> EntryResources {
        EntryResources { entry: entry.to_owned(), arch, usage }
    }

    #[test]
    fn the_gemm_reads_as_its_registers_barrier_and_shared_memory() {
        let report = include_str!("captured/gemm.sm_90.txt");
        let usage = ResourceUsage { registers: 115, barriers: 1, shared: 46080, ..ResourceUsage::default() };
        assert_eq!(parse_resource_usage(report), [entry("dense_gemm_bf16", SM_90, usage)]);
    }

    #[test]
    fn a_stack_frame_is_read_from_the_properties_of_its_own_entry() {
        let report = include_str!("captured/causal_conv1d.sm_90.txt");
        assert_eq!(
            parse_resource_usage(report),
            [
                entry(
                    "causal_conv1d_update_prefill",
                    SM_90,
                    ResourceUsage { registers: 39, stack_frame: 16, ..ResourceUsage::default() }
                ),
                entry(
                    "causal_conv1d_update_l2norm",
                    SM_90,
                    ResourceUsage { registers: 28, barriers: 1, shared: 32, ..ResourceUsage::default() }
                ),
            ]
        );
    }

    #[test]
    fn spills_are_read_and_a_kernel_that_fits_reads_as_none() {
        let resources = parse_resource_usage(include_str!("captured/spill.sm_90.txt"));
        let usage = ResourceUsage {
            registers: 64,
            spill_stores: 1044,
            spill_loads: 1044,
            stack_frame: 632,
            ..ResourceUsage::default()
        };
        assert_eq!(
            resources,
            [
                entry(
                    "spill_free_values",
                    SM_90,
                    ResourceUsage { registers: 48, ..ResourceUsage::default() }
                ),
                entry("spill_live_values", SM_90, usage),
            ]
        );
        assert!(!resources[0].usage.spills() && resources[1].usage.spills());
    }

    #[test]
    fn every_target_is_read_and_device_functions_and_module_lines_are_not_entries() {
        let resources = parse_resource_usage(include_str!("captured/probe.sm_90.sm_80.txt"));
        let spill = |stack_frame, spill_stores, spill_loads, constant| ResourceUsage {
            registers: 32,
            spill_stores,
            spill_loads,
            stack_frame,
            constant,
            ..ResourceUsage::default()
        };
        assert_eq!(
            resources,
            [
                entry("spill_kernel", SM_90, spill(1288, 2480, 2964, 0)),
                entry("with_const", SM_90, spill(144, 0, 0, 0)),
                // sm_80 lists the parameter bank; the module's cmem[3] and cmem[4] are no entry's.
                entry("spill_kernel", SM_80, spill(1304, 2488, 2932, 372)),
                entry("with_const", SM_80, spill(144, 0, 0, 364)),
            ]
        );
    }

    #[test]
    fn other_lines_are_skipped_and_unknown_fields_ignored() {
        let report = "\
/src/kernels/x.cu(3): warning #177-D: variable \"unused\" was declared but never referenced
ptxas info    : Compiling entry function 'k' for 'sm_90a'\r
ptxas info    : Function properties for k
    8 bytes stack frame, 4 bytes spill stores, 0 bytes spill loads, 2 bytes something new
ptxas info    : Used 12 registers, 3 textures, 1024+16 bytes smem, 4 bytes cmem[0], 8 bytes cmem[2]
ptxas info    : Compiling entry function 'no properties' for 'sm_100'
ptxas info    : Used 7 registers
ptxas info    : Compiling entry function 'odd' for 'compute_90'
    64 bytes stack frame, 64 bytes spill stores, 64 bytes spill loads
";
        let specific = Arch { major: 9, minor: 0, specific: true };
        let usage = ResourceUsage {
            registers: 12,
            spill_stores: 4,
            stack_frame: 8,
            shared: 1040,
            constant: 12,
            ..ResourceUsage::default()
        };
        let sm_100 = Arch { major: 10, minor: 0, specific: false };
        assert_eq!(
            parse_resource_usage(report),
            [
                entry("k", specific, usage),
                entry("no properties", sm_100, ResourceUsage { registers: 7, ..ResourceUsage::default() })
            ]
        );
        assert!(parse_resource_usage("").is_empty());
        assert!(parse_resource_usage("    0 bytes stack frame, 8 bytes spill stores\n").is_empty());
    }

    #[test]
    fn a_failed_compile_keeps_its_errors_without_the_report() {
        let diagnostics = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'big' for 'sm_90'
ptxas info    : Function properties for big
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas error   : Entry function 'big' uses too much shared data (0x10100 bytes, 0xc000 max)
ptxas warning : Value of threads per SM for entry big is out of range
    an indented line of a message
";
        assert_eq!(
            without_resource_usage(diagnostics),
            "ptxas error   : Entry function 'big' uses too much shared data (0x10100 bytes, 0xc000 max)\n\
             ptxas warning : Value of threads per SM for entry big is out of range\n    \
             an indented line of a message"
        );
        assert_eq!(
            without_resource_usage("x.cu(1): error: expected a \")\"\n"),
            "x.cu(1): error: expected a \")\""
        );
    }
}
