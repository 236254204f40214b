//! The main job: a prompt through chunked prefill and some decode steps of the block on synthetic
//! weights, timed, then the same tokens one at a time, to show the two paths agree.

use std::time::{Duration, Instant};

use kda_runtime::bf16;
use kda_runtime::{BackendError, GpuBackend, GpuBackendExt};

use kda::block::{BlockError, Glm5NextKdaBlock, KdaState};
use kda::compare::Agreement;
use kda::geometry::KdaGeometry;
use kda::weights::{HostWeights, synthetic_hidden};

/// What to run.
#[derive(Clone, Copy, Debug)]
pub struct JobOptions {
    /// The layer's geometry.
    pub geometry: KdaGeometry,
    /// Prompt tokens, run through chunked prefill.
    pub prompt: u32,
    /// Decode steps after the prompt.
    pub decode: u32,
    /// Seed of the synthetic weights and inputs.
    pub seed: u64,
}

/// What the job measured.
#[derive(Clone, Copy, Debug)]
pub struct JobReport {
    /// Prompt tokens per second through chunked prefill.
    pub prefill_tokens_per_s: f64,
    /// Tokens per second of the decode steps after the prompt.
    pub decode_tokens_per_s: f64,
    /// Tokens per second of the per-token path over prompt and decode.
    pub per_token_tokens_per_s: f64,
    /// Block outputs, chunked path against per-token path.
    pub outputs: Agreement,
    /// The recurrent state after the last token, chunked path against per-token path.
    pub state: Agreement,
}

/// Why the job failed.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// The block failed.
    #[error(transparent)]
    Block(#[from] BlockError),
    /// A copy failed.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The two paths gave nothing comparable (empty, all zero or not finite).
    #[error("the {0} of the two paths cannot be compared: empty, all zero or not finite")]
    Incomparable(&'static str),
    /// The options ask for more tokens than the block takes at the geometry.
    #[error(
        "{option} = {tokens} tokens: the block takes at most {max} tokens at this geometry \
         (its kernels' sizes are 32-bit)"
    )]
    TooManyTokens {
        /// The options, as the command line names them: `--prompt`, `--prompt + --decode`.
        option: &'static str,
        /// The tokens they ask for (wider than `u32`: a sum of two `u32` options).
        tokens: u64,
        /// [`KdaGeometry::max_tokens`].
        max: u32,
    },
    /// An option that counts something is zero.
    #[error("{0} must be at least 1")]
    Zero(&'static str),
}

impl JobOptions {
    /// The tokens the job runs, prompt then decode: an error past the block's bound
    /// ([`KdaGeometry::max_tokens`]), checked before anything is allocated.
    pub fn tokens(&self) -> Result<u32, JobError> {
        let max = self.geometry.max_tokens();
        check_tokens("--prompt", Some(self.prompt), u64::from(self.prompt), max)?;
        // The prompt and decode tokens are one sequence, held whole on the host and run by the
        // per-token path: the sum is bounded like one call, and must not wrap.
        let total = self.prompt.checked_add(self.decode);
        check_tokens("--prompt + --decode", total, u64::from(self.prompt) + u64::from(self.decode), max)
    }
}

/// `tokens` (`None` where computing it overflowed `u32`; `asked` is its exact value, for the
/// message), if at most `max`.
pub(crate) fn check_tokens(
    option: &'static str,
    tokens: Option<u32>,
    asked: u64,
    max: u32,
) -> Result<u32, JobError> {
    tokens.filter(|&tokens| tokens <= max).ok_or(JobError::TooManyTokens { option, tokens: asked, max })
}

/// Runs the job on `gpu`; `progress(done, total)` hears about the per-token path as it goes.
pub fn run(
    gpu: &dyn GpuBackend,
    options: &JobOptions,
    progress: &mut dyn FnMut(u32, u32),
) -> Result<JobReport, JobError> {
    let JobOptions { geometry, prompt, decode, seed } = *options;
    // Before the weights and inputs are allocated: those of a count past the bound may not fit
    // in memory at all.
    let total = options.tokens()?;
    let weights = HostWeights::synthetic(&geometry, seed);
    let block = Glm5NextKdaBlock::new(gpu, geometry, &weights)?;
    let width = geometry.hidden as usize;
    let hidden = synthetic_hidden(&geometry, total as usize, seed.wrapping_add(1));
    let rows: Vec<&[bf16]> = hidden.chunks(width).collect();

    // Chunked prefill of the prompt, then decode.
    let mut chunked_state = block.new_state()?;
    let mut chunked = Vec::with_capacity(hidden.len());
    let (prefill_time, ()) = timed(|| -> Result<(), JobError> {
        if prompt > 0 {
            let out = block.prefill(&mut chunked_state, &gpu.upload(&hidden[..prompt as usize * width])?)?;
            chunked.extend(gpu.download::<bf16>(&out)?);
        }
        Ok(())
    })?;
    let (decode_time, ()) = timed(|| -> Result<(), JobError> {
        for row in &rows[prompt as usize..] {
            chunked.extend(decode_step(gpu, &block, &mut chunked_state, row)?);
        }
        Ok(())
    })?;

    // The same tokens, one decode step each.
    let mut per_token_state = block.new_state()?;
    let mut per_token = Vec::with_capacity(hidden.len());
    let (per_token_time, ()) = timed(|| -> Result<(), JobError> {
        for (done, row) in rows.iter().enumerate() {
            per_token.extend(decode_step(gpu, &block, &mut per_token_state, row)?);
            progress(done as u32 + 1, total);
        }
        Ok(())
    })?;

    let outputs =
        Agreement::of(&widen(&chunked), &widen(&per_token)).ok_or(JobError::Incomparable("outputs"))?;
    let state = Agreement::of(
        &widen(&gpu.download::<f32>(chunked_state.recurrent())?),
        &widen(&gpu.download::<f32>(per_token_state.recurrent())?),
    )
    .ok_or(JobError::Incomparable("recurrent states"))?;
    Ok(JobReport {
        prefill_tokens_per_s: rate(prompt, prefill_time),
        decode_tokens_per_s: rate(decode, decode_time),
        per_token_tokens_per_s: rate(total, per_token_time),
        outputs,
        state,
    })
}

fn decode_step(
    gpu: &dyn GpuBackend,
    block: &Glm5NextKdaBlock<'_>,
    state: &mut KdaState,
    row: &[bf16],
) -> Result<Vec<bf16>, JobError> {
    let out = block.decode_step(state, &gpu.upload(row)?)?;
    Ok(gpu.download(&out)?)
}

/// `work`'s result and the host time it took.
pub(crate) fn timed<T, E>(work: impl FnOnce() -> Result<T, E>) -> Result<(Duration, T), E> {
    let start = Instant::now();
    let value = work()?;
    Ok((start.elapsed(), value))
}

/// `tokens` per second of `time`.
pub(crate) fn rate(tokens: u32, time: Duration) -> f64 {
    f64::from(tokens) / time.as_secs_f64().max(f64::MIN_POSITIVE)
}

/// Exact widening of any float slice to f64.
pub fn widen<T: Copy + Into<f64>>(values: &[T]) -> Vec<f64> {
    values.iter().map(|&x| x.into()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The job of `prompt` then `decode` tokens at `tiny`, on the CPU reference.
    fn job(prompt: u32, decode: u32) -> Result<JobReport, JobError> {
        let options = JobOptions { geometry: KdaGeometry::tiny(), prompt, decode, seed: 1 };
        run(&kda::reference::backend(), &options, &mut |_, _| {})
    }

    #[test]
    fn a_prompt_and_decode_that_overflow_u32_are_refused_not_wrapped() {
        let max = KdaGeometry::tiny().max_tokens();
        // The prompt alone is past the bound.
        let error = job(u32::MAX, 1).unwrap_err().to_string();
        assert_eq!(
            error,
            format!(
                "--prompt = 4294967295 tokens: the block takes at most {max} tokens at this geometry \
                 (its kernels' sizes are 32-bit)"
            )
        );
        // A short prompt whose sum with the decode steps wraps.
        let error = job(1, u32::MAX).unwrap_err().to_string();
        assert!(error.starts_with("--prompt + --decode = 4294967296 tokens: "), "{error}");
        assert!(error.contains(&format!("at most {max} tokens")), "{error}");
    }

    #[test]
    fn token_counts_past_the_bound_are_refused_before_allocating() {
        // 25.6 GB of f32 inputs at `tiny` if anything were allocated first.
        let error = job(100_000_000, 16).unwrap_err();
        assert!(matches!(error, JobError::TooManyTokens { option: "--prompt", tokens: 100_000_000, .. }));
        let max = KdaGeometry::tiny().max_tokens();
        let error = job(max, 1).unwrap_err();
        assert!(matches!(error, JobError::TooManyTokens { option: "--prompt + --decode", .. }), "{error}");
    }

    #[test]
    fn counts_at_the_bound_are_accepted() {
        let geometry = KdaGeometry::tiny();
        let max = geometry.max_tokens();
        let options = |prompt, decode| JobOptions { geometry, prompt, decode, seed: 1 };
        assert_eq!(options(max, 0).tokens().unwrap(), max);
        assert_eq!(options(max - 5, 5).tokens().unwrap(), max);
        assert_eq!(options(3, 2).tokens().unwrap(), 5);
    }
}
