//! Safe code against the launch contract on the emulator, which runs the kernels' real code: each
//! test is an attack written with safe public API only that once wrote past a heap allocation,
//! and is now refused before the kernel runs. The CPU and recording backends' part is
//! `kda-runtime/tests/abuse.rs`. The same attacks under AddressSanitizer, on every entry, are
//! classes of the launch fuzz (`kda-block emulate --sanitizer address --fuzz-launches N`:
//! `swapped_storage`, `forged_signature`), which CI runs.
#![cfg(feature = "emulation")]

use kda::kernels::{EMULATED_KERNELS, glm5next_kda};
use kda_runtime::emu::EmuBackend;
use kda_runtime::host::HostStorage;
use kda_runtime::signature::{Access, KernelParam, Op, Signature};
use kda_runtime::{GpuBackend, GpuBackendExt, KernelEntry, LaunchGeometry, LookupError};

fn emulator() -> EmuBackend {
    EmuBackend::new(&[&EMULATED_KERNELS]).unwrap_or_else(|error| panic!("{error}"))
}

const N: u32 = 16_384;

#[test]
fn fill_refuses_a_buffer_whose_storage_was_replaced_by_a_shorter_one() {
    let gpu = emulator();
    let kernels = kda::kernels::Glm5NextKdaKernels::resolve(&gpu).unwrap();
    let mut dst = gpu.zeros::<f32>(N as usize).unwrap();
    *dst.storage_mut::<HostStorage>().unwrap() = HostStorage::from_slice(&[0.0f32; 16]).unwrap();
    let args = glm5next_kda::fill { dst: dst.view_mut().into(), n: N, value: 2.0 };
    let error = kernels.launch_fill(&gpu, LaunchGeometry::linear(N, 256), args).unwrap_err();
    assert!(error.to_string().contains("a view of 16 elements"), "{error}");
    assert_eq!(gpu.download::<f32>(&dst).unwrap(), [0.0; 16], "the kernel ran");
}

#[test]
fn a_signature_made_by_the_caller_does_not_resolve_on_the_emulator() {
    // `fill`'s own parameters, with `dst` bounded by nothing: a launch checked against it would
    // write 16,384 floats into any buffer at all.
    let real = glm5next_kda::fill::ENTRY.signature.unwrap();
    let dst = KernelParam::buffer("dst", kda_runtime::DType::F32, Access::Write, "0", &[Op::Literal(0)]);
    let params: &'static [KernelParam] = Box::leak(Box::new([dst, real.params[1], real.params[2]]));
    let weak: &'static Signature = Box::leak(Box::new(Signature { params, requires: &[] }));
    let forged = KernelEntry { signature: Some(weak), ..*glm5next_kda::fill::ENTRY };
    let gpu = emulator();
    match gpu.lookup(&forged) {
        Err(LookupError::SignatureMismatch { reason, .. }) => {
            assert!(reason.contains("not the one the build proved"), "{reason}")
        }
        other => panic!("a forged signature resolved on the emulator: {other:?}"),
    }
    // The build's own signature, copied to another address, is the same contract.
    let copy = KernelEntry { signature: Some(Box::leak(Box::new(*real))), ..*glm5next_kda::fill::ENTRY };
    assert!(gpu.lookup(&copy).is_ok());
}
