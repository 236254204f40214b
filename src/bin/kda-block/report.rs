//! The resolution report: each entry of the table, resolved or absent, and what an absent
//! optional entry falls back to.

use std::fmt::Write;

use kda_runtime::{GpuBackend, KernelEntry, try_kernel};

use kda::kernels::Glm5NextKdaEntry;

/// What the block runs instead of `entry` where a target lacks it: `None` for a required entry,
/// which has nothing to fall back to.
pub fn fallback_of(entry: Glm5NextKdaEntry) -> Option<&'static str> {
    use Glm5NextKdaEntry::*;
    match entry {
        gemm_splitk => Some("gemm with K unsplit (so does a target without gemm_reduce)"),
        gemm_reduce => Some("gemm with K unsplit (so does a target without gemm_splitk)"),
        gemv_batchm => Some("gemm for 2..=16 rows"),
        recurrent_regs => Some("recurrent (reads and writes the state twice)"),
        gemm | gemv | conv_decode | conv_prefill | chunk_prepare | chunk_scan | recurrent | o_norm | fill => {
            None
        }
    }
}

/// One line per entry of `[glm5next_kda]` as `gpu` answers its lookup.
pub fn resolution(gpu: &dyn GpuBackend) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "kernel table glm5next_kda on {}:", gpu.describe());
    let width = Glm5NextKdaEntry::ALL.iter().map(|e| e.field().len()).max().unwrap_or(0);
    for entry in Glm5NextKdaEntry::ALL {
        let KernelEntry { field, module, entry: name, .. } = *entry.entry();
        let module_entry = format!("{module}::{name}");
        let _ = writeln!(out, "  {field:width$}  {module_entry:48}  {}", status(gpu, entry));
    }
    out
}

fn status(gpu: &dyn GpuBackend, entry: Glm5NextKdaEntry) -> String {
    match try_kernel(gpu, entry.entry()) {
        Ok(Some(_)) => "resolved".to_owned(),
        Ok(None) if entry.entry().required => "MISSING (required)".to_owned(),
        Ok(None) => format!("absent: falls back to {}", fallback_of(entry).unwrap_or("nothing")),
        Err(error) => format!("FAILED: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use kda_runtime::record::RecordingBackend;

    use super::*;
    use kda::kernels::Glm5NextKda;

    #[test]
    fn every_optional_entry_and_only_those_has_a_fallback() {
        for entry in Glm5NextKdaEntry::ALL {
            assert_eq!(fallback_of(entry).is_some(), !entry.entry().required, "{entry:?}");
        }
    }

    #[test]
    fn the_report_names_absent_failed_and_missing_entries() {
        let gpu = RecordingBackend::new()
            .with_table::<Glm5NextKda>()
            .without("kda_recurrent", "kda_recurrent_decode_bf16_regs")
            .without("gemm", "dense_gemm_bf16")
            .failing_module("dense_gemv_bf16_batchm", "image does not load");
        let report = resolution(&gpu);
        let line =
            |field: &str| report.lines().find(|l| l.trim_start().starts_with(field)).unwrap().to_owned();
        assert!(line("gemm ").ends_with("MISSING (required)"), "{report}");
        assert!(
            line("recurrent_regs")
                .ends_with("absent: falls back to recurrent (reads and writes the state twice)")
        );
        assert!(line("gemv_batchm").contains("FAILED: looking up"), "{report}");
        assert!(line("conv_prefill").ends_with("resolved"));
    }
}
