//! The vendor's GEMM beside the table's: `kda-block bench` times a [`GemmBaseline`] (cuBLAS on
//! CUDA, [`cublas::CublasGemm`]) at the sizes of the `gemm` launch case, in the same run, and
//! reports the table's `gemm` as a fraction of it.

#[cfg(feature = "cuda")]
pub mod cublas;

use std::fmt;
use std::time::Duration;

use kda_runtime::BackendError;

/// A GEMM of the table's shape (`c[m,n] = a[m,k] · b[n,k]ᵀ`, bf16, f32 accumulation) to time
/// the table's `gemm` against.
pub trait GemmBaseline {
    /// What it is and where it runs, for the report.
    fn describe(&self) -> String;

    /// The time of one `m×n×k` product, over `iterations` launches after a warm-up.
    fn time(&self, m: u32, n: u32, k: u32, iterations: u32) -> Result<Duration, BackendError>;
}

/// The table's `gemm` and the baseline at one shape.
#[derive(Clone, Debug, PartialEq)]
pub struct GemmComparison {
    /// `(m, n, k)`.
    pub shape: (u32, u32, u32),
    /// One launch of the table's `gemm`.
    pub ours: Duration,
    /// The baseline's description and its time for one product, or why it could not run.
    pub vendor: Result<(String, Duration), String>,
}

impl GemmComparison {
    /// Times `baseline` at `shape`, beside `ours` (the table's time there); a baseline that
    /// cannot open or fails is reported, not an error of the benchmark.
    pub fn measure(
        baseline: Result<&dyn GemmBaseline, String>,
        shape: (u32, u32, u32),
        ours: Duration,
        iterations: u32,
    ) -> Self {
        let (m, n, k) = shape;
        let vendor = baseline.and_then(|baseline| match baseline.time(m, n, k, iterations) {
            Ok(time) => Ok((baseline.describe(), time)),
            Err(error) => Err(format!("{}: {error}", baseline.describe())),
        });
        Self { shape, ours, vendor }
    }

    /// The baseline's time for one product, where it ran.
    pub fn theirs(&self) -> Option<Duration> {
        self.vendor.as_ref().ok().map(|(_, time)| *time)
    }

    /// The table's speed as a fraction of the baseline's (its time over ours).
    pub fn fraction(&self) -> Option<f64> {
        self.theirs().map(|theirs| theirs.as_secs_f64() / self.ours.as_secs_f64().max(f64::MIN_POSITIVE))
    }

    /// The rate of a product that takes `time`, in TFLOPS (10¹²): `2·m·n·k` FLOPs.
    pub fn tflops(&self, time: Duration) -> f64 {
        let (m, n, k) = self.shape;
        2.0 * f64::from(m) * f64::from(n) * f64::from(k) / time.as_secs_f64().max(f64::MIN_POSITIVE) / 1e12
    }
}

impl fmt::Display for GemmComparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (m, n, k) = self.shape;
        writeln!(f, "gemm against the vendor's GEMM at {m}×{n}×{k}:")?;
        let row = |f: &mut fmt::Formatter<'_>, name: &str, time: Duration| {
            writeln!(f, "  {name:<8}{:>11.2} µs  {:>7.1} TFLOPS", time.as_secs_f64() * 1e6, self.tflops(time))
        };
        row(f, "gemm", self.ours)?;
        match &self.vendor {
            Ok((name, theirs)) => {
                row(f, "vendor", *theirs)?;
                let percent = 100.0 * self.fraction().unwrap_or_default();
                writeln!(f, "  gemm runs at {percent:.1} % of the vendor's speed ({name})")
            }
            Err(why) => writeln!(f, "  vendor  not measured: {why}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A baseline that takes a fixed time, or fails.
    struct Fixed(Result<Duration, ()>);

    impl GemmBaseline for Fixed {
        fn describe(&self) -> String {
            "fixed".to_owned()
        }

        fn time(&self, _: u32, _: u32, _: u32, _: u32) -> Result<Duration, BackendError> {
            self.0
                .map_err(|()| BackendError::Unavailable { backend: "fixed".into(), reason: "broken".into() })
        }
    }

    #[test]
    fn the_fraction_is_the_baselines_time_over_ours() {
        let baseline = Fixed(Ok(Duration::from_micros(700)));
        let comparison =
            GemmComparison::measure(Ok(&baseline), (1024, 2048, 512), Duration::from_millis(1), 3);
        assert_eq!(comparison.theirs(), Some(Duration::from_micros(700)));
        assert!((comparison.fraction().unwrap() - 0.7).abs() < 1e-12);
        // 2 · 1024 · 2048 · 512 FLOPs in 1 ms: 2.147… TFLOPS.
        assert!((comparison.tflops(Duration::from_millis(1)) - 2.147_483_648).abs() < 1e-9);
        let text = comparison.to_string();
        assert!(text.contains("at 1024×2048×512"), "{text}");
        assert!(text.contains("gemm runs at 70.0 % of the vendor's speed (fixed)"), "{text}");
    }

    #[test]
    fn a_baseline_that_fails_or_is_missing_is_reported() {
        let broken = Fixed(Err(()));
        let failed = GemmComparison::measure(Ok(&broken), (1, 1, 1), Duration::from_micros(1), 1);
        assert_eq!((failed.theirs(), failed.fraction()), (None, None));
        assert!(failed.to_string().contains("not measured: fixed: fixed is unavailable: broken"), "{failed}");
        let missing =
            GemmComparison::measure(Err("no libcublas".into()), (1, 1, 1), Duration::from_micros(1), 1);
        assert!(missing.to_string().contains("vendor  not measured: no libcublas"), "{missing}");
    }
}
