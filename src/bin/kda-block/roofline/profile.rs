//! The model's scenarios run for real: the block at the model's layer on a backend, each launch of
//! each scenario's call timed on its own ([`LaunchTimer`]). [`RooflineReport::with_profile`] sets
//! the times beside the model's launches, which are the same block's launches in the same order.

use kda::block::Glm5NextKdaBlock;
use kda::geometry::KdaGeometry;
use kda::weights::HostWeights;
use kda_runtime::GpuBackend;
use kda_runtime::profile::{LaunchTimer, TimedLaunch};

use super::{RooflineError, Scenario};

/// The launches of each of `scenarios`' calls, timed, in order, of the block at `geometry` on
/// `gpu` with synthetic weights of `seed` (inputs of zeros: the kernels' work does not depend on
/// the values). What sets a call up (a pool's slots) is not timed, and each call runs twice, the
/// second timed: the first pays for what a device does once (loading a module's code on its first
/// launch, warming the caches of the weights).
pub fn profile(
    gpu: &dyn GpuBackend,
    geometry: &KdaGeometry,
    scenarios: &[Scenario],
    seed: u64,
) -> Result<Vec<Vec<TimedLaunch>>, RooflineError> {
    let timer = LaunchTimer::new(gpu);
    let block = Glm5NextKdaBlock::new(&timer, *geometry, &HostWeights::synthetic(geometry, seed))?;
    scenarios
        .iter()
        .map(|scenario| {
            for _ in 0..2 {
                scenario.run(&timer, &block, &mut || drop(timer.take()))?;
            }
            Ok(timer.take())
        })
        .collect()
}
