//! The ops' CUDA forwards (kda's launches on candle's stream and memory) against candle's own ops on
//! the GPU. Each test needs a CUDA device, so each is ignored by default: `scripts/gpu-check.sh`
//! runs them with `--include-ignored` on the GPU machine.

mod support;

use candle_core::{Device, Result, Tensor};
use kda_example_candle_op::weighted_sum;

/// The GPU, or the test fails saying why.
fn gpu() -> Result<Device> {
    Device::new_cuda(0)
}

#[test]
#[ignore = "needs a GPU"]
fn silu_mul_matches_candle() -> Result<()> {
    support::silu_mul_matches_candle(&gpu()?)
}

#[test]
#[ignore = "needs a GPU"]
fn weighted_sum_matches_candle() -> Result<()> {
    support::weighted_sum_matches_candle(&gpu()?)
}

#[test]
#[ignore = "needs a GPU"]
fn the_ops_refuse_what_they_cannot_run() -> Result<()> {
    let device = gpu()?;
    support::the_ops_refuse_what_they_cannot_run(&device)?;
    // The fourth tensor on the host: the op sees it only through its own field, not candle's
    // dispatch, so it checks the device itself.
    let x = Tensor::zeros(16, candle_core::DType::F32, &device)?;
    let w = x.to_device(&Device::Cpu)?;
    let error = weighted_sum(&x, &x, &x, &w, [1.0; 3]).expect_err("`w` on the CPU");
    assert!(error.to_string().contains("`w` is on Cpu"), "{error}");
    Ok(())
}
