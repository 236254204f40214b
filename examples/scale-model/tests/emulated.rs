//! The example's CUDA kernels themselves, built for the emulator by the one-line `build.rs` (the
//! feature `emulation` is the switch) and run on host threads: the model step gives what the CPU
//! reference gives, and a launch the manifest refuses is refused here too.
#![cfg(feature = "emulation")]

use kda_example::defines::BLOCK;
use kda_example::{EMULATED_KERNELS, ScaleModelKernels, model, reference, scale_model};
use kda_runtime::emu::EmuBackend;
use kda_runtime::{BackendError, GpuBackend, GpuBackendExt, LaunchGeometry};

const X: [f32; 5] = [1.0, -2.0, 0.5, 4.0, 3.0];
const Y: [f32; 5] = [10.0, 20.0, 30.0, 40.0, 50.0];

/// `model::step` on `gpu`: the new `y` and the norm.
fn step(gpu: &dyn GpuBackend) -> Result<(Vec<f32>, f32), BackendError> {
    let kernels = ScaleModelKernels::resolve(gpu).expect("the backend carries every entry");
    let (x, mut y) = (gpu.upload(&X)?, gpu.upload(&Y)?);
    let norm = model::step(gpu, &kernels, &x, &mut y, 0.5, 2.0)?;
    Ok((gpu.download::<f32>(&y)?, norm))
}

#[test]
fn the_cuda_kernels_agree_with_the_reference_on_the_emulator() -> Result<(), BackendError> {
    let emulated = EmuBackend::new(&[&EMULATED_KERNELS])?;
    let (y, norm) = step(&emulated)?;
    // Every value is exact in f32, so the kernels and the reference agree bit for bit.
    assert_eq!((y.clone(), norm), step(&reference::cpu_backend())?);
    assert_eq!(y, [21.0, 38.0, 60.5, 84.0, 103.0]);
    Ok(())
}

#[test]
fn the_emulator_refuses_what_the_manifest_refuses() -> Result<(), BackendError> {
    let gpu = EmuBackend::new(&[&EMULATED_KERNELS])?;
    let kernels = ScaleModelKernels::resolve(&gpu).expect("the emulator carries every entry");
    let (x, mut out) = (gpu.upload(&X)?, gpu.zeros::<f32>(1)?);
    // `sum_squares` requires one block of exactly `BLOCK` threads.
    let two_blocks = LaunchGeometry::linear(2 * BLOCK, BLOCK);
    let args = scale_model::sum_squares { x: x.view().into(), out: out.view_mut().into(), n: 4 };
    let refused = kernels.launch_sum_squares(&gpu, two_blocks, args);
    assert!(matches!(refused, Err(BackendError::Requirement { .. })), "{refused:?}");
    assert_eq!(gpu.download::<f32>(&out)?, [0.0], "a refused launch wrote");
    Ok(())
}
