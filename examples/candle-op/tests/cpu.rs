//! The ops' CPU forwards (`cpu_fwd`) against candle's own ops on the CPU: no GPU needed, though the
//! test binary links candle's CUDA libraries.

mod support;

use candle_core::{Device, Result};

#[test]
fn silu_mul_matches_candle() -> Result<()> {
    support::silu_mul_matches_candle(&Device::Cpu)
}

#[test]
fn weighted_sum_matches_candle() -> Result<()> {
    support::weighted_sum_matches_candle(&Device::Cpu)
}

#[test]
fn the_ops_refuse_what_they_cannot_run() -> Result<()> {
    support::the_ops_refuse_what_they_cannot_run(&Device::Cpu)
}
