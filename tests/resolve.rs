//! `Glm5NextKdaKernels::resolve` against `RecordingBackend`: what is found, what may be absent, and
//! what must never be swallowed.

use kda::kernels::glm5next_kda;
use kda::kernels::{Glm5NextKda, Glm5NextKdaKernels, KERNEL_IMAGES};
use kda_runtime::record::RecordingBackend;
use kda_runtime::{GpuBackend, KernelEntry, KernelTable, LaunchGeometry, LookupError, try_kernel};

#[test]
fn the_table_counts_13_entries_9_required_4_optional() {
    assert_eq!(Glm5NextKdaKernels::ENTRY_POINTS, 13);
    assert_eq!(Glm5NextKdaKernels::REQUIRED_ENTRY_POINTS, 9);
    assert_eq!(Glm5NextKdaKernels::OPTIONAL_ENTRY_POINTS, 4);
    assert_eq!(<Glm5NextKda as KernelTable>::NAME, "glm5next_kda");
    assert_eq!(<Glm5NextKda as KernelTable>::ENTRIES, &Glm5NextKdaKernels::ENTRIES);
}

#[test]
fn entries_carry_the_manifest_lines_in_order() {
    let text = include_str!("../kernels.toml");
    for entry in Glm5NextKdaKernels::ENTRIES {
        let line = text.lines().nth(entry.line as usize - 1).unwrap();
        assert!(line.starts_with(&format!("{} ", entry.field)), "line {} is {line:?}", entry.line);
        assert!(line.contains(&format!("module = \"{}\"", entry.module)));
        assert!(line.contains(&format!("entry = \"{}\"", entry.entry)));
        assert_eq!(line.contains("optional = true"), !entry.required);
    }
    let lines: Vec<u32> = Glm5NextKdaKernels::ENTRIES.iter().map(|e| e.line).collect();
    assert!(lines.is_sorted());
}

#[test]
fn the_entries_resolve_in_the_namespace_of_the_images_built_from_their_manifest() {
    let namespace = Glm5NextKdaKernels::NAMESPACE;
    assert_eq!(namespace, concat!("kda@", env!("CARGO_PKG_VERSION"), ":kernels.toml"));
    assert!(Glm5NextKdaKernels::ENTRIES.iter().all(|entry| entry.namespace == namespace));
    assert_eq!(KERNEL_IMAGES.namespace(), namespace);
    // Another crate's table of the same modules is not carried by a target carrying this one.
    let gpu = RecordingBackend::new().with_table::<Glm5NextKda>();
    let theirs = KernelEntry { namespace: "theirs@1.0.0:kernels.toml", ..*glm5next_kda::gemm::ENTRY };
    let error = gpu.lookup(&theirs).unwrap_err();
    assert_eq!(
        error.to_string(),
        "module `gemm` of `theirs@1.0.0:kernels.toml` is not built for this target"
    );
}

#[test]
fn every_entry_present_resolves_each_once_in_manifest_order() {
    let gpu = RecordingBackend::new().with_table::<Glm5NextKda>();
    let kernels = Glm5NextKdaKernels::resolve(&gpu).unwrap();
    let expected: Vec<(String, String)> =
        Glm5NextKdaKernels::ENTRIES.iter().map(|e| (e.module.to_owned(), e.entry.to_owned())).collect();
    assert_eq!(gpu.lookups(), expected);
    assert_eq!(kernels.gemm, gpu.lookup(glm5next_kda::gemm::ENTRY).unwrap());
    assert_eq!(kernels.fill, gpu.lookup(glm5next_kda::fill::ENTRY).unwrap());
    assert!(kernels.gemv_batchm.is_some() && kernels.recurrent_regs.is_some());
    assert_ne!(kernels.recurrent, kernels.recurrent_regs.unwrap());
}

#[test]
fn an_absent_optional_entry_is_none() {
    let gpu = RecordingBackend::new()
        .with_table::<Glm5NextKda>()
        .without("kda_recurrent", "kda_recurrent_decode_bf16_regs")
        .without("dense_gemv_bf16_batchm", "dense_gemv_bf16_batchm");
    let kernels = Glm5NextKdaKernels::resolve(&gpu).unwrap();
    assert_eq!(kernels.recurrent_regs, None);
    assert_eq!(kernels.gemv_batchm, None);
    assert_eq!(kernels.recurrent, gpu.lookup(glm5next_kda::recurrent::ENTRY).unwrap());
}

#[test]
fn three_missing_required_entries_are_named_in_one_error() {
    let gpu = RecordingBackend::new()
        .with_table::<Glm5NextKda>()
        // The whole gemm module (its optional split-K pair too): a module the target lacks.
        .without("gemm", "dense_gemm_bf16")
        .without("gemm", "dense_gemm_bf16_splitk")
        .without("gemm", "dense_gemm_splitk_reduce_bf16")
        .without("kda_chunk", "kda_chunk_scan")
        .without("kda_layer_ops", "kda_fill_f32");
    let error = Glm5NextKdaKernels::resolve(&gpu).unwrap_err();
    let missing: Vec<&str> = error.missing().map(|e| e.field).collect();
    assert_eq!(missing, ["gemm", "chunk_scan", "fill"]);
    assert_eq!(error.failures().count(), 0);
    // Nothing stops early: every entry was looked up.
    assert_eq!(gpu.lookups().len(), 13);
    let message = error.to_string();
    let namespace = Glm5NextKdaKernels::NAMESPACE;
    assert_eq!(
        message,
        format!(
            "kernel table `glm5next_kda` cannot be resolved on recording backend (computes nothing): \
             3 required entry points missing\n  \
             - field `gemm`: gemm::dense_gemm_bf16 (required, kernels.toml:13): module `gemm` of `{namespace}` is not built for this target\n  \
             - field `chunk_scan`: kda_chunk::kda_chunk_scan (required, kernels.toml:45): module `kda_chunk` of `{namespace}` has no entry point `kda_chunk_scan`\n  \
             - field `fill`: kda_layer_ops::kda_fill_f32 (required, kernels.toml:61): module `kda_layer_ops` of `{namespace}` has no entry point `kda_fill_f32`"
        )
    );
}

#[test]
fn a_failing_module_under_an_optional_entry_is_an_error_not_none() {
    let gpu = RecordingBackend::new()
        .with_table::<Glm5NextKda>()
        .failing_module("dense_gemv_bf16_batchm", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION");
    let error = Glm5NextKdaKernels::resolve(&gpu).unwrap_err();
    assert_eq!(error.missing().count(), 0);
    let failures: Vec<&str> = error.failures().map(|p| p.entry.field).collect();
    assert_eq!(failures, ["gemv_batchm"]);
    let message = error.to_string();
    assert!(message.contains("1 lookup failed"), "{message}");
    assert!(message.contains("CUDA_ERROR_UNSUPPORTED_PTX_VERSION"), "{message}");
    assert!(message.contains("(optional, kernels.toml:29)"), "{message}");
}

#[test]
fn try_kernel_is_none_only_for_not_found() {
    let gpu = RecordingBackend::new()
        .with_kernel("kda_recurrent", "kda_recurrent_decode_bf16")
        .failing_module("kda_chunk", "module image is corrupt");
    let named = |module, entry| KernelEntry::named(module, entry);
    assert!(try_kernel(&gpu, &named("kda_recurrent", "kda_recurrent_decode_bf16")).unwrap().is_some());
    assert_eq!(try_kernel(&gpu, &named("kda_recurrent", "kda_recurrent_decode_bf16_regs")).unwrap(), None);
    assert_eq!(try_kernel(&gpu, &named("kda_layer_ops", "kda_fill_f32")).unwrap(), None);
    let error = try_kernel(&gpu, &named("kda_chunk", "kda_chunk_scan")).unwrap_err();
    assert!(matches!(error, LookupError::Failed { .. }));
    assert_eq!(
        error.to_string(),
        "looking up `kda_chunk::kda_chunk_scan` failed: loading module `kda_chunk` failed: module image is corrupt"
    );
}

#[test]
fn a_handle_launches_only_on_the_backend_that_issued_it() {
    let first = RecordingBackend::new().with_table::<Glm5NextKda>();
    let second = RecordingBackend::new().with_table::<Glm5NextKda>();
    let kernels = Glm5NextKdaKernels::resolve(&first).unwrap();
    let geometry = LaunchGeometry::linear(8, 256);
    let mut buffer = first.alloc(kda_runtime::DType::F32, 8).unwrap();
    fn fill(dst: kda_runtime::ViewMut<'_>) -> glm5next_kda::fill<'_> {
        glm5next_kda::fill { dst: dst.into(), n: 8, value: 0.0 }
    }
    kernels.launch_fill(&first, geometry, fill(buffer.view_mut())).unwrap();
    assert_eq!(first.launched(), ["kda_layer_ops::kda_fill_f32"]);

    let foreign = kernels.launch_fill(&second, geometry, fill(buffer.view_mut()));
    assert!(matches!(foreign, Err(kda_runtime::BackendError::ForeignResource { .. })), "{foreign:?}");
    // Nor may a buffer cross over.
    let second_kernels = Glm5NextKdaKernels::resolve(&second).unwrap();
    let foreign_buffer = second_kernels.launch_fill(&second, geometry, fill(buffer.view_mut()));
    assert!(matches!(foreign_buffer, Err(kda_runtime::BackendError::ForeignResource { .. })));
    assert!(second.launched().is_empty());
}

#[test]
fn every_entry_of_the_table_carries_its_signature_from_the_manifest() {
    for entry in Glm5NextKdaKernels::ENTRIES {
        let signature = entry.signature.unwrap_or_else(|| panic!("{} has no params", entry.field));
        assert!(!signature.params.is_empty(), "{}", entry.field);
        assert_eq!(entry.table, "glm5next_kda");
    }
    let gemm = glm5next_kda::gemm::ENTRY.signature.unwrap();
    let names: Vec<&str> = gemm.params.iter().map(|p| p.name).collect();
    assert_eq!(names, ["a", "b", "c", "m", "n", "k", "lda"]);
    assert_eq!(gemm.params[0].kind.to_string(), "const bf16[(m-1)*lda+k]");
    assert_eq!(gemm.params[2].kind.to_string(), "bf16[m*n]");
    // The two kernels of the bit-identical pair share one contract.
    assert_eq!(glm5next_kda::recurrent::ENTRY.signature, glm5next_kda::recurrent_regs::ENTRY.signature);
}

#[test]
fn a_launch_of_an_absent_optional_entry_is_an_error() {
    let gpu = RecordingBackend::new()
        .with_table::<Glm5NextKda>()
        .without("dense_gemv_bf16_batchm", "dense_gemv_bf16_batchm");
    let kernels = Glm5NextKdaKernels::resolve(&gpu).unwrap();
    let (x, w) =
        (gpu.alloc(kda_runtime::DType::Bf16, 8).unwrap(), gpu.alloc(kda_runtime::DType::Bf16, 8).unwrap());
    let mut y = gpu.alloc(kda_runtime::DType::Bf16, 4).unwrap();
    let args = glm5next_kda::gemv_batchm {
        x: x.view().into(),
        w: w.view().into(),
        y: y.view_mut().into(),
        m: 2,
        n: 2,
        k: 4,
        ldx: 4,
    };
    let error = kernels.launch_gemv_batchm(&gpu, kda::launch::gemv(2, 2), args).unwrap_err();
    assert_eq!(
        error.to_string(),
        "`glm5next_kda.gemv_batchm` (dense_gemv_bf16_batchm::dense_gemv_bf16_batchm) is optional and this \
         target does not carry it"
    );
    assert!(gpu.launched().is_empty());
}
