//! The resolution report: each entry of the table, resolved or absent, and what an absent
//! optional entry falls back to.

use std::fmt::Write;

use kda_runtime::{GpuBackend, KernelEntry, try_kernel};

use kda::kernels::Glm5NextKdaKernels;

/// What the block runs instead of each optional entry a target lacks.
pub const FALLBACKS: [(&str, &str); 4] = [
    ("gemm_splitk", "gemm with K unsplit (so does a target without gemm_reduce)"),
    ("gemm_reduce", "gemm with K unsplit (so does a target without gemm_splitk)"),
    ("gemv_batchm", "gemm for 2..=16 rows"),
    ("recurrent_regs", "recurrent (reads and writes the state twice)"),
];

/// The fallback of the optional entry `field`.
pub fn fallback_of(field: &str) -> Option<&'static str> {
    FALLBACKS.iter().find(|(optional, _)| *optional == field).map(|(_, fallback)| *fallback)
}

/// One line per entry of `[glm5next_kda]` as `gpu` answers its lookup.
pub fn resolution(gpu: &dyn GpuBackend) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "kernel table glm5next_kda on {}:", gpu.describe());
    let width = Glm5NextKdaKernels::ENTRIES.iter().map(|e| e.field.len()).max().unwrap_or(0);
    for entry in &Glm5NextKdaKernels::ENTRIES {
        let _ = writeln!(
            out,
            "  {:width$}  {:48}  {}",
            entry.field,
            format!("{}::{}", entry.module, entry.entry),
            status(gpu, entry)
        );
    }
    out
}

fn status(gpu: &dyn GpuBackend, entry: &KernelEntry) -> String {
    match try_kernel(gpu, entry) {
        Ok(Some(_)) => "resolved".to_owned(),
        Ok(None) if entry.required => "MISSING (required)".to_owned(),
        Ok(None) => format!("absent: falls back to {}", fallback_of(entry.field).unwrap_or("nothing")),
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
        let optional: Vec<&str> =
            Glm5NextKdaKernels::ENTRIES.iter().filter(|e| !e.required).map(|e| e.field).collect();
        let with_fallback: Vec<&str> = FALLBACKS.iter().map(|(field, _)| *field).collect();
        assert_eq!(optional, with_fallback);
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
