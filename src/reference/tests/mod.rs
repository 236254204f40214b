//! Tests of the reference kernels, launched through [`backend`](super::backend) the way model code
//! launches them (the typed launchers of the table, with the geometries of [`launch`]), against
//! hand-computed values and independent f64 implementations of the ABI math written here (never
//! against the code under test); and launches that break the manifest's contract, refused before
//! a kernel runs, with their outputs untouched.

mod chunk;
mod conv_norm;
mod dense;
mod gate;
mod layer_ops;
mod recurrent;

use half::bf16;
use kda_runtime::cpu::CpuBackend;
use kda_runtime::{BackendError, DeviceBuffer, Element, GpuBackend, GpuBackendExt, KernelTable};

use crate::kernels::{Glm5NextKda, Glm5NextKdaKernels, glm5next_kda};
use crate::launch;

/// SplitMix64: seeded, so every run sees the same inputs.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi)`.
    fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let unit = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * unit
    }

    fn f32s(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }

    fn bf16s(&mut self, n: usize, lo: f32, hi: f32) -> Vec<bf16> {
        (0..n).map(|_| bf16::from_f32(self.uniform(lo, hi))).collect()
    }
}

/// The reference backend with its table resolved, and transfers that panic on failure: what each
/// test launches through.
struct Device {
    gpu: CpuBackend,
    kernels: Glm5NextKdaKernels,
}

impl Device {
    fn new() -> Self {
        let gpu = super::backend();
        let kernels = Glm5NextKdaKernels::resolve(&gpu).unwrap_or_else(|error| panic!("{error}"));
        Self { gpu, kernels }
    }

    /// A new buffer holding `data`.
    fn up<T: Element>(&self, data: &[T]) -> DeviceBuffer {
        self.gpu.upload(data).unwrap_or_else(|error| panic!("{error}"))
    }

    /// The contents of `buffer`.
    fn down<T: Element>(&self, buffer: &DeviceBuffer) -> Vec<T> {
        self.gpu.download(buffer).unwrap_or_else(|error| panic!("{error}"))
    }
}

/// A launch's result, and the contents of the buffers it may write, downloaded after it.
struct Launched<T> {
    result: Result<(), BackendError>,
    written: T,
}

impl<T: PartialEq + std::fmt::Debug> Launched<T> {
    /// The written buffers of a launch that must succeed.
    fn ok(self) -> T {
        if let Err(error) = self.result {
            panic!("launch refused: {error}");
        }
        self.written
    }

    /// The error of a launch that must be refused, after checking that it wrote nothing: `before`
    /// is what the written buffers held before it.
    fn refused(self, before: &T) -> String {
        let error = match self.result {
            Ok(()) => panic!("expected a refusal, the launch was accepted"),
            Err(error) => error.to_string(),
        };
        assert_eq!(&self.written, before, "the refused launch ({error}) wrote its outputs");
        error
    }
}

/// Sizes as the launchers take them.
fn u32s<const N: usize>(sizes: [usize; N]) -> [u32; N] {
    sizes.map(|size| u32::try_from(size).expect("a size that fits u32"))
}

fn bf16s(values: &[f32]) -> Vec<bf16> {
    values.iter().map(|&x| bf16::from_f32(x)).collect()
}

fn widen(values: &[bf16]) -> Vec<f64> {
    values.iter().map(|x| x.to_f64()).collect()
}

fn widen_f32(values: &[f32]) -> Vec<f64> {
    values.iter().map(|&x| f64::from(x)).collect()
}

fn sigmoid64(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// The peak |value| of a reference, after checking it is a meaningful one: not empty, finite,
/// not all zero.
fn checked_peak(what: &str, want: &[f64]) -> f64 {
    assert!(!want.is_empty(), "{what}: nothing compared");
    assert!(want.iter().all(|x| x.is_finite()), "{what}: non-finite reference");
    let peak = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    assert!(peak > 0.0, "{what}: all-zero reference");
    peak
}

/// f32 results against an f64 reference: relative RMS ≤ `tolerance`, and no element off by more
/// than `tolerance`·peak (a guarded max: elements near zero cannot dominate it).
fn assert_close(what: &str, got: &[f32], want: &[f64], tolerance: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let peak = checked_peak(what, want);
    let (mut err2, mut ref2, mut max_err) = (0.0f64, 0.0f64, 0.0f64);
    for (&g, &w) in got.iter().zip(want) {
        let err = (f64::from(g) - w).abs();
        err2 += err * err;
        ref2 += w * w;
        max_err = max_err.max(err);
    }
    let rel_rms = (err2 / ref2).sqrt();
    assert!(
        rel_rms <= tolerance && max_err <= tolerance * peak,
        "{what}: relative RMS {rel_rms:.3e}, max error {max_err:.3e} at peak {peak:.3e} \
         (tolerance {tolerance:.0e})"
    );
}

/// One bf16 ulp at the magnitude of `x` (normal range).
fn bf16_ulp(x: f64) -> f64 {
    2f64.powf(x.abs().log2().floor() - 7.0)
}

/// bf16 outputs of one rounding against an f64 reference: every element within one ulp and at
/// least 99 % exactly the nearest bf16.
fn assert_bf16_rounded(what: &str, got: &[bf16], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    checked_peak(what, want);
    let mut exact = 0;
    for (i, (g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g.to_f64() - w).abs();
        assert!(err <= bf16_ulp(w), "{what}[{i}]: {g} vs {w}");
        exact += usize::from(*g == bf16::from_f64(w));
    }
    assert!(exact * 100 >= got.len() * 99, "{what}: only {exact} of {} exact", got.len());
}

#[test]
fn the_backend_carries_every_entry_of_the_table() {
    let gpu = super::backend();
    assert_eq!(Glm5NextKda::ENTRIES.len(), 13);
    for entry in Glm5NextKda::ENTRIES {
        assert!(gpu.lookup(entry).is_ok(), "{entry}");
    }
    assert!(Glm5NextKda::resolve(&gpu).is_ok());
    assert_eq!(gpu.describe(), "CPU reference backend");
}

#[test]
fn the_optional_entries_can_be_left_out() {
    let gpu = super::backend()
        .without("dense_gemv_bf16_batchm", "dense_gemv_bf16_batchm")
        .without("kda_recurrent", "kda_recurrent_decode_bf16_regs");
    assert!(!gpu.has_module("dense_gemv_bf16_batchm"));
    assert!(gpu.has_module("kda_recurrent"));
    assert!(Glm5NextKda::resolve(&gpu).is_ok());
}
