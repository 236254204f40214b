//! Tests of the reference kernels, launched through [`backend`](super::backend) the way model code
//! launches them, against hand-computed values and independent f64 implementations of the ABI
//! math written here (never against the code under test).

mod chunk;
mod conv_norm;
mod dense;
mod layer_ops;
mod recurrent;

use half::bf16;
use kda_runtime::cpu::CpuBackend;
use kda_runtime::{
    BackendError, DType, DeviceBuffer, GpuBackend, GpuBackendExt, KernelArg, KernelTable, LaunchGeometry,
};

use crate::kernels::Glm5NextKda;

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

/// A host-side launch argument: buffers are uploaded, the `Mut` ones downloaded afterwards.
enum Arg {
    Bf16(Vec<bf16>),
    Bf16Mut(Vec<bf16>),
    F32(Vec<f32>),
    F32Mut(Vec<f32>),
    U32(u32),
    Scalar(f32),
}

/// The contents of a written buffer after a launch.
#[derive(Debug)]
enum Out {
    Bf16(Vec<bf16>),
    F32(Vec<f32>),
}

impl Out {
    fn bf16(self) -> Vec<bf16> {
        match self {
            Out::Bf16(data) => data,
            Out::F32(_) => panic!("an f32 buffer, not bf16"),
        }
    }

    fn f32(self) -> Vec<f32> {
        match self {
            Out::F32(data) => data,
            Out::Bf16(_) => panic!("a bf16 buffer, not f32"),
        }
    }
}

/// Uploads `args`, launches `module::entry` on `gpu` and returns the written buffers, in order.
fn try_launch(gpu: &CpuBackend, module: &str, entry: &str, args: Vec<Arg>) -> Result<Vec<Out>, BackendError> {
    enum Slot {
        Buffer(DeviceBuffer, bool),
        U32(u32),
        F32(f32),
    }
    let mut slots = args
        .into_iter()
        .map(|arg| {
            Ok(match arg {
                Arg::Bf16(data) => Slot::Buffer(gpu.upload(&data)?, false),
                Arg::Bf16Mut(data) => Slot::Buffer(gpu.upload(&data)?, true),
                Arg::F32(data) => Slot::Buffer(gpu.upload(&data)?, false),
                Arg::F32Mut(data) => Slot::Buffer(gpu.upload(&data)?, true),
                Arg::U32(value) => Slot::U32(value),
                Arg::Scalar(value) => Slot::F32(value),
            })
        })
        .collect::<Result<Vec<_>, BackendError>>()?;
    let kernel = gpu.lookup(module, entry).unwrap_or_else(|error| panic!("{error}"));
    let mut kernel_args: Vec<KernelArg<'_>> = slots
        .iter_mut()
        .map(|slot| match slot {
            Slot::Buffer(buffer, true) => KernelArg::BufferMut(buffer),
            Slot::Buffer(buffer, false) => KernelArg::Buffer(buffer),
            Slot::U32(value) => KernelArg::U32(*value),
            Slot::F32(value) => KernelArg::F32(*value),
        })
        .collect();
    gpu.launch(kernel, LaunchGeometry::linear(1, 1), &mut kernel_args)?;
    drop(kernel_args);
    slots
        .iter()
        .filter_map(|slot| match slot {
            Slot::Buffer(buffer, true) => Some(buffer),
            _ => None,
        })
        .map(|buffer| {
            Ok(match buffer.dtype() {
                DType::Bf16 => Out::Bf16(gpu.download(buffer)?),
                DType::F32 => Out::F32(gpu.download(buffer)?),
            })
        })
        .collect()
}

/// [`try_launch`] on a fresh reference backend, which must accept the launch.
fn launch(module: &str, entry: &str, args: Vec<Arg>) -> Vec<Out> {
    try_launch(&super::backend(), module, entry, args)
        .unwrap_or_else(|error| panic!("{module}::{entry}: {error}"))
}

/// The reason a launch on a fresh reference backend is refused; panics if it is accepted.
fn refusal(module: &str, entry: &str, args: Vec<Arg>) -> String {
    match try_launch(&super::backend(), module, entry, args) {
        Err(BackendError::Launch { reason, .. }) => reason,
        other => panic!("{module}::{entry}: expected a refusal, got {other:?}"),
    }
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

/// Elementwise relative error ≤ `tolerance` (for outputs that never cross zero).
fn assert_relative(what: &str, got: &[f32], want: &[f64], tolerance: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    checked_peak(what, want);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let rel = (f64::from(g) - w).abs() / w.abs();
        assert!(rel <= tolerance, "{what}[{i}]: {g} vs {w}, relative {rel:.3e}");
    }
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
    assert_eq!(Glm5NextKda::ENTRIES.len(), 16);
    for entry in Glm5NextKda::ENTRIES {
        assert!(gpu.lookup(entry.module, entry.entry).is_ok(), "{entry}");
    }
    assert!(Glm5NextKda::resolve(&gpu).is_ok());
    assert_eq!(gpu.describe(), "CPU reference backend");
}

#[test]
fn the_optional_entries_can_be_left_out() {
    let gpu = super::backend()
        .without("dense_gemv_bf16_batchm", "dense_gemv_bf16_batchm")
        .without("kda_recurrent", "kda_recurrent_decode_bf16_smem");
    assert!(!gpu.has_module("dense_gemv_bf16_batchm"));
    assert!(gpu.has_module("kda_recurrent"));
    assert!(Glm5NextKda::resolve(&gpu).is_ok());
}
