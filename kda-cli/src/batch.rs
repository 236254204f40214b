//! The batched part of the main job (`--batch B`): B sequences, each prefilled with a prompt of
//! its own, decoded three ways from the same states in one run: B single-sequence steps per
//! token, one batched step (`decode_batch`), and the recorded batched step replayed
//! (`DecodeReplay`); the throughput of each across the batch, and how closely they agree.

use std::time::Duration;

use kda_runtime::{DType, DeviceBuffer, GpuBackend, GpuBackendExt, bf16};

use kda::block::{Glm5NextKdaBlock, KdaStatePool};
use kda::compare::Agreement;
use kda::geometry::KdaGeometry;
use kda::weights::{HostWeights, synthetic_hidden};

use crate::job::{JobError, rate, timed, widen};

/// What the batched job runs.
#[derive(Clone, Copy, Debug)]
pub struct BatchOptions {
    /// The layer's geometry.
    pub geometry: KdaGeometry,
    /// Sequences decoded together.
    pub batch: u32,
    /// Prompt tokens of each sequence, through chunked prefill.
    pub prompt: u32,
    /// Decode steps of every sequence.
    pub steps: u32,
    /// Seed of the synthetic weights and inputs.
    pub seed: u64,
}

/// What the batched job measured: tokens per second across the batch, each path over the same
/// `batch × steps` tokens from the same states.
#[derive(Clone, Copy, Debug)]
pub struct BatchReport {
    /// B single-sequence steps per token.
    pub single_tokens_per_s: f64,
    /// One `decode_batch` per token.
    pub batched_tokens_per_s: f64,
    /// One replayed step per token.
    pub replayed_tokens_per_s: f64,
    /// The time of one replayed step of the whole batch, on average.
    pub replayed_step: Duration,
    /// The batched outputs against the single-sequence ones.
    pub batched: Agreement,
    /// Whether the batched outputs and states equal the single-sequence ones bit for bit (the
    /// reference and the batched GEMV guarantee it; a GEMM need not sum in the GEMV's order).
    pub batched_identical: bool,
    /// Whether the replayed outputs and states equal the batched ones bit for bit.
    pub replayed_identical: bool,
}

/// Runs the batched job on `gpu`.
pub fn run(gpu: &dyn GpuBackend, options: &BatchOptions) -> Result<BatchReport, JobError> {
    let BatchOptions { geometry, batch, prompt, steps, seed } = *options;
    let block = Glm5NextKdaBlock::new(gpu, geometry, &HostWeights::synthetic(&geometry, seed))?;
    let width = geometry.hidden as usize;
    let mut pool = block.new_pool(batch)?;
    for sequence in 0..batch {
        let slot = block.acquire(&mut pool)?;
        let tokens = synthetic_hidden(&geometry, prompt as usize, seed ^ (u64::from(sequence) << 32));
        block.prefill_slot(&mut pool, slot, &gpu.upload(&tokens)?)?;
    }
    let (mut single, mut batched) = (block.copy_pool(&pool)?, block.copy_pool(&pool)?);
    let mut replayed = pool;
    // Sequence r decodes in slot `slots[r]`: a scrambled order, as a scheduler's would be.
    let slots: Vec<u32> = (0..batch).rev().collect();
    let inputs = (0..steps)
        .map(|step| gpu.upload(&synthetic_hidden(&geometry, batch as usize, seed + 1 + u64::from(step))))
        .collect::<Result<Vec<_>, _>>()?;
    let rows = inputs
        .iter()
        .map(|step| {
            let host = gpu.download::<bf16>(step)?;
            host.chunks_exact(width).map(|row| gpu.upload(row)).collect::<Result<Vec<_>, _>>()
        })
        .collect::<Result<Vec<_>, _>>()?;

    let mut single_out = Vec::new();
    let single_time = synchronized(gpu, || {
        for step in &rows {
            for (row, &slot) in step.iter().zip(&slots) {
                single_out.push(block.decode_batch(&mut single, &[slot], row)?);
            }
        }
        Ok(())
    })?;
    let mut batched_out = Vec::new();
    let batched_time = synchronized(gpu, || {
        for input in &inputs {
            batched_out.push(block.decode_batch(&mut batched, &slots, input)?);
        }
        Ok(())
    })?;
    let mut replay = block.decode_replay(batch)?;
    replay.prepare(&mut replayed, batch)?;
    let step_len = batch as usize * width;
    let mut replayed_out = gpu.alloc(DType::Bf16, step_len * steps as usize)?;
    let replayed_time = synchronized(gpu, || {
        for (step, input) in inputs.iter().enumerate() {
            let out = replay.decode(&mut replayed, &slots, input)?;
            gpu.copy_on_device(out, replayed_out.slice_mut(step * step_len..(step + 1) * step_len))?;
        }
        Ok(())
    })?;

    let (single_host, batched_host) = (concat(gpu, &single_out)?, concat(gpu, &batched_out)?);
    let replayed_host = gpu.download::<bf16>(&replayed_out)?;
    let bits = |outputs: &[bf16], pool: &KdaStatePool| -> Result<_, JobError> {
        Ok((outputs.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), pool_bits(gpu, pool)?))
    };
    let single_bits = bits(&single_host, &single)?;
    let batched_bits = bits(&batched_host, &batched)?;
    let tokens = batch * steps;
    Ok(BatchReport {
        single_tokens_per_s: rate(tokens, single_time),
        batched_tokens_per_s: rate(tokens, batched_time),
        replayed_tokens_per_s: rate(tokens, replayed_time),
        replayed_step: replayed_time / steps,
        batched: Agreement::of(&widen(&batched_host), &widen(&single_host))
            .ok_or(JobError::Incomparable("batched outputs"))?,
        batched_identical: batched_bits == single_bits,
        replayed_identical: bits(&replayed_host, &replayed)? == batched_bits,
    })
}

/// The device time of `work`: host time up to a synchronization after it.
fn synchronized(
    gpu: &dyn GpuBackend,
    work: impl FnOnce() -> Result<(), JobError>,
) -> Result<Duration, JobError> {
    gpu.synchronize()?;
    let (time, ()) = timed(|| {
        work()?;
        Ok::<_, JobError>(gpu.synchronize()?)
    })?;
    Ok(time)
}

/// The outputs of one path, step after step, on the host.
fn concat(gpu: &dyn GpuBackend, outputs: &[DeviceBuffer]) -> Result<Vec<bf16>, JobError> {
    let mut host = Vec::new();
    for output in outputs {
        host.extend(gpu.download::<bf16>(output)?);
    }
    Ok(host)
}

/// The bits of both pool buffers.
fn pool_bits(gpu: &dyn GpuBackend, pool: &KdaStatePool) -> Result<Vec<u32>, JobError> {
    let mut bits = Vec::new();
    for buffer in [pool.conv(), pool.recurrent()] {
        bits.extend(gpu.download::<f32>(buffer)?.iter().map(|x| x.to_bits()));
    }
    Ok(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_paths_agree_bit_for_bit_on_the_reference() {
        let gpu = kda::reference::backend();
        // 1 sequence: the GEMV; 5: the batched GEMV; 17: the GEMM.
        for batch in [1, 5, 17] {
            let options = BatchOptions { geometry: KdaGeometry::tiny(), batch, prompt: 3, steps: 2, seed: 9 };
            let report = run(&gpu, &options).unwrap();
            assert!(report.batched_identical && report.replayed_identical, "B = {batch}: {report:?}");
            assert_eq!(report.batched.elements, (batch * 2 * 64) as usize);
            let rates =
                [report.single_tokens_per_s, report.batched_tokens_per_s, report.replayed_tokens_per_s];
            assert!(rates.iter().all(|r| r.is_finite() && *r > 0.0), "{rates:?}");
        }
    }
}
