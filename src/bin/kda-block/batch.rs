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

use crate::job::{JobError, check_tokens, rate, timed, widen};

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

impl BatchOptions {
    /// The decode tokens across the batch, `batch × steps`: an error where a count is zero or
    /// past the block's bound ([`KdaGeometry::max_tokens`]), checked before anything is
    /// allocated.
    pub fn decode_tokens(&self) -> Result<u32, JobError> {
        // A zero batch or step count leaves nothing to time or compare (and divides by zero).
        for (option, count) in [("--batch", self.batch), ("--decode", self.steps)] {
            if count == 0 {
                return Err(JobError::Zero(option));
            }
        }
        let max = self.geometry.max_tokens();
        // Each sequence's prompt is one prefill call.
        check_tokens("--prompt", Some(self.prompt), u64::from(self.prompt), max)?;
        // Every step's tokens are held on the device at once, in one output buffer.
        let tokens = self.batch.checked_mul(self.steps);
        check_tokens("--batch × --decode", tokens, u64::from(self.batch) * u64::from(self.steps), max)
    }
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
    let decoded = options.decode_tokens()?;
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
    Ok(BatchReport {
        single_tokens_per_s: rate(decoded, single_time),
        batched_tokens_per_s: rate(decoded, batched_time),
        replayed_tokens_per_s: rate(decoded, replayed_time),
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

    /// The batched job of `batch` sequences at `tiny`.
    fn options(batch: u32, prompt: u32, steps: u32) -> BatchOptions {
        BatchOptions { geometry: KdaGeometry::tiny(), batch, prompt, steps, seed: 9 }
    }

    #[test]
    fn counts_past_the_bound_or_zero_are_refused_before_anything_runs() {
        let gpu = kda::reference::backend();
        let max = KdaGeometry::tiny().max_tokens();
        // A prompt of 4294967295 tokens would be a terabyte of inputs per sequence.
        let error = run(&gpu, &options(2, u32::MAX, 1)).unwrap_err();
        assert!(matches!(error, JobError::TooManyTokens { option: "--prompt", .. }), "{error}");
        // 65,535 × 65,538 wraps in u32.
        let error = run(&gpu, &options(65_535, 1, 65_538)).unwrap_err().to_string();
        assert_eq!(
            error,
            format!(
                "--batch × --decode = 4295032830 tokens: the block takes at most {max} tokens at this \
                 geometry (its kernels' sizes are 32-bit)"
            )
        );
        // No steps: nothing to time (the replayed step's mean divided by zero).
        let error = run(&gpu, &options(2, 1, 0)).unwrap_err().to_string();
        assert_eq!(error, "--decode must be at least 1");
        let error = run(&gpu, &options(0, 1, 1)).unwrap_err().to_string();
        assert_eq!(error, "--batch must be at least 1");
    }
}
