//! The comparison the CUDA backend runs at resolve (`cuFuncGetParamInfo` against the manifest),
//! tested without a GPU: on the parameter layouts of the compiled kernels, read from the PTX the
//! build leaves beside the images. What the driver reports for a loaded function is this layout:
//! each parameter at its offset in the parameter buffer, with its size.

use kda::kernels::{Glm5NextKdaKernels, KERNEL_IMAGES};
use kda_build::cuda::ptx_params;
use kda_runtime::signature::{KernelParam, ParamSlot, ScalarKind, Signature, compare_layout};

/// The layout of `entry` in the PTX of `module`, as the build compiled it.
fn compiled_layout(module: &str, entry: &str) -> Vec<ParamSlot> {
    let path = std::path::Path::new(env!("OUT_DIR")).join(format!("{module}.ptx"));
    let ptx = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    let params = ptx_params(&ptx, entry).unwrap_or_else(|| panic!("`{entry}` is not in {}", path.display()));
    params.iter().map(|p| ParamSlot { offset: p.offset as usize, size: p.size as usize }).collect()
}

/// Whether this build compiled the kernels (CI always does: `KDA_REQUIRE_NVCC=1`).
fn compiled() -> bool {
    match KERNEL_IMAGES.missing() {
        Some(why) => {
            assert!(std::env::var("KDA_REQUIRE_NVCC").as_deref() != Ok("1"), "nvcc is required: {why}");
            eprintln!("no kernels were compiled ({why}): nothing to compare");
            false
        }
        None => true,
    }
}

#[test]
fn every_compiled_kernel_has_the_layout_its_manifest_entry_declares() {
    if !compiled() {
        return;
    }
    for entry in &Glm5NextKdaKernels::ENTRIES {
        let signature = entry.signature.expect("every entry of [glm5next_kda] has params");
        let layout = compiled_layout(entry.module, entry.entry);
        compare_layout(signature, &layout).unwrap_or_else(|error| panic!("{}: {error}", entry.field));
    }
}

#[test]
fn a_stale_image_is_told_apart_naming_the_parameter() {
    if !compiled() {
        return;
    }
    let gemm = Glm5NextKdaKernels::ENTRIES[0].signature.unwrap();
    let layout = compiled_layout("gemm", "dense_gemm_bf16");
    // A manifest that lost the kernel's last parameter, and one whose `m` became 64-bit.
    let shorter = Signature { params: &gemm.params[..6], requires: &[] };
    let error = compare_layout(&shorter, &layout).unwrap_err();
    assert!(error.starts_with("the manifest declares 6 parameters ("), "{error}");
    assert!(error.ends_with("the loaded kernel takes 7"), "{error}");
    let wide_m: &'static [KernelParam] = Box::leak(
        gemm.params
            .iter()
            .map(|p| if p.name == "m" { KernelParam::scalar("m", ScalarKind::U64) } else { *p })
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    let error = compare_layout(&Signature { params: wide_m, requires: &[] }, &layout).unwrap_err();
    assert!(error.starts_with("parameter `m` (`u64`) should take 8 bytes at offset 24"), "{error}");
}
