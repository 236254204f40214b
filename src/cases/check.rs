//! How a buffer a kernel wrote must agree with the CPU reference, and what a comparison measured.

use std::fmt;

use half::{bf16, f16};
use kda_runtime::DType;

use crate::compare::Agreement;

use super::*;

/// How a written buffer must agree with the CPU reference, from `docs/kernels.md` ("Tolerances").
/// Every check fails a comparison of zero elements, or against an all-zero or non-finite
/// reference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Check {
    /// Bit for bit: fill, the conv state, and untouched padding.
    Exact,
    /// Dense products (gemm, gemv, batchm): within 1 bf16 ulp where `|ref| ≥ 1e-2·rms(ref)`, and
    /// within an absolute floor of `2⁻⁸·rms(ref)` everywhere.
    Dense,
    /// bf16 values of one rounding (the convs with their L2 norm, the prefill's widened to f32;
    /// the output norm): within 1 bf16 ulp, and at least 99 % of the elements bit-exact.
    Bf16Rounded,
    /// f32 results of long sums (recurrent, chunk prepare and scan, the block): relative RMS
    /// within the bound, and no element off by more than 10× the bound times the peak.
    RelativeRms(f64),
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Check::Exact => write!(f, "bit-exact"),
            Check::Dense => write!(f, "≤ 1 ulp where |ref| ≥ 1e-2·rms, floor 2⁻⁸·rms"),
            Check::Bf16Rounded => write!(f, "≤ 1 ulp, ≥ 99 % exact"),
            Check::RelativeRms(bound) => write!(f, "relative RMS ≤ {bound:.0e}"),
        }
    }
}

/// What a comparison measured over the used part of a buffer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measurement {
    /// Elements compared (the used prefix).
    pub elements: usize,
    /// Of them, bit-identical to the reference.
    pub exact: usize,
    /// The largest error in ulps of the reference element: bf16 ulps under [`Check::Bf16Rounded`],
    /// whatever the buffer's type, else ulps of the buffer's own type.
    pub max_ulps: f64,
    /// `‖result − reference‖₂ / ‖reference‖₂`.
    pub relative_rms: f64,
    /// The largest `|result − reference| / |reference|` over nonzero reference elements.
    pub max_relative: f64,
    /// The same over elements with `|reference| ≥ 1e-3·peak` (see [`Agreement`]).
    pub guarded_max_relative: f64,
    /// The largest `|result − reference|`.
    pub max_error: f64,
    /// The same over the peak `|reference|`.
    pub max_error_over_peak: f64,
    /// Elements past the used prefix, compared bit for bit (the kernel must leave them alone).
    pub padding: usize,
    /// The first element whose bits differ, if any.
    pub first_difference: Option<usize>,
    /// The element with the largest absolute error (0 when none differs).
    pub largest_error_at: usize,
}

impl Measurement {
    /// The share of bit-exact elements, in percent.
    pub fn exact_percent(&self) -> f64 {
        100.0 * self.exact as f64 / self.elements.max(1) as f64
    }
}

impl fmt::Display for Measurement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} values, {:.2} % exact, max {:.2} ulp, rel RMS {:.2e}, max rel {:.2e} (guarded {:.2e})",
            self.elements,
            self.exact_percent(),
            self.max_ulps,
            self.relative_rms,
            self.max_relative,
            self.guarded_max_relative
        )?;
        if let Some(first) = self.first_difference {
            write!(f, "; first difference at [{first}], largest at [{}]", self.largest_error_at)?;
        }
        if self.padding > 0 {
            write!(f, "; {} padding values, compared bit for bit", self.padding)?;
        }
        Ok(())
    }
}

/// A comparison that failed: why, and what was measured where anything could be.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    /// What is wrong.
    pub reason: String,
    /// The figures, where the data could be compared at all.
    pub measurement: Option<Measurement>,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.measurement {
            Some(measurement) => write!(f, "{} ({measurement})", self.reason),
            None => f.write_str(&self.reason),
        }
    }
}

impl std::error::Error for Mismatch {}

pub(super) fn mismatch(reason: String) -> Mismatch {
    Mismatch { reason, measurement: None }
}

/// One ulp at `x` in `dtype`: the gap from `|x|` to the next representable value up (down from
/// the largest finite one; 1 for integers). `x` must be a value of that type.
pub(super) fn ulp(dtype: DType, x: f64) -> f64 {
    let x = x.abs();
    match dtype {
        DType::Bf16 => {
            let value = bf16::from_f64(x);
            let up = bf16::from_bits(value.to_bits() + 1);
            if up.is_finite() { up.to_f64() - x } else { x - bf16::from_bits(value.to_bits() - 1).to_f64() }
        }
        DType::F32 => {
            let value = x as f32;
            let up = f32::from_bits(value.to_bits() + 1);
            if up.is_finite() {
                f64::from(up) - x
            } else {
                x - f64::from(f32::from_bits(value.to_bits() - 1))
            }
        }
        DType::F16 => {
            let value = f16::from_f64(x);
            let up = f16::from_bits(value.to_bits() + 1);
            if up.is_finite() { up.to_f64() - x } else { x - f16::from_bits(value.to_bits() - 1).to_f64() }
        }
        DType::F64 => {
            let up = f64::from_bits(x.to_bits() + 1);
            if up.is_finite() { up - x } else { x - f64::from_bits(x.to_bits() - 1) }
        }
        // 3 and 2 significand bits; below the smallest normal (2^-6, 2^-14) the subnormal step.
        DType::Fp8E4M3 => 2f64.powi(x.log2().floor().max(-6.0) as i32 - 3),
        DType::Fp8E5M2 => 2f64.powi(x.log2().floor().max(-14.0) as i32 - 2),
        // The integers, `bool` and raw bytes.
        _ => 1.0,
    }
}

impl Check {
    /// Compares the first `used` elements of `result` with `reference` under this check, and the
    /// rest bit for bit (padding the kernel must leave alone).
    pub fn compare(
        self,
        result: &HostData,
        reference: &HostData,
        used: usize,
    ) -> Result<Measurement, Mismatch> {
        if result.dtype() != reference.dtype() || result.len() != reference.len() {
            return Err(mismatch(format!("{:?} compared with a reference of {:?}", result, reference)));
        }
        if used > result.len() {
            return Err(mismatch(format!("{used} used elements of a buffer of {}", result.len())));
        }
        let dtype = result.dtype();
        let ulp_type = if self == Check::Bf16Rounded { DType::Bf16 } else { dtype };
        let (got, want) = (result.to_f64(), reference.to_f64());
        let (got_bits, want_bits) = (result.bits(), reference.bits());
        let (got, want) = (&got[..used], &want[..used]);
        let changed_padding = got_bits[used..].iter().zip(&want_bits[used..]).filter(|(a, b)| a != b).count();

        let Some(agreement) = Agreement::of(got, want) else {
            let what = if used == 0 {
                "no element to compare".to_owned()
            } else if !want.iter().all(|x| x.is_finite()) {
                "the reference is not finite".to_owned()
            } else if want.iter().all(|&x| x == 0.0) {
                "the reference is all zero".to_owned()
            } else {
                let bad = got.iter().filter(|x| !x.is_finite()).count();
                format!("{bad} of {used} results are not finite")
            };
            return Err(mismatch(what));
        };
        let peak = want.iter().fold(0.0f64, |peak, x| peak.max(x.abs()));
        let rms = (want.iter().map(|x| x * x).sum::<f64>() / used as f64).sqrt();
        let mut measurement = Measurement {
            elements: used,
            exact: 0,
            max_ulps: 0.0,
            relative_rms: agreement.relative_rms,
            max_relative: 0.0,
            guarded_max_relative: agreement.max_relative,
            max_error: 0.0,
            max_error_over_peak: 0.0,
            padding: result.len() - used,
            first_difference: None,
            largest_error_at: 0,
        };
        let mut dense_violations = 0usize;
        for (i, (&r, &e)) in got.iter().zip(want).enumerate() {
            let error = (r - e).abs();
            if got_bits[i] == want_bits[i] {
                measurement.exact += 1;
            } else if measurement.first_difference.is_none() {
                measurement.first_difference = Some(i);
            }
            if error > measurement.max_error {
                (measurement.max_error, measurement.largest_error_at) = (error, i);
            }
            measurement.max_ulps = measurement.max_ulps.max(error / ulp(ulp_type, e));
            if e != 0.0 {
                measurement.max_relative = measurement.max_relative.max(error / e.abs());
            } else if r != 0.0 {
                measurement.max_relative = f64::INFINITY;
            }
            measurement.max_error_over_peak = measurement.max_error_over_peak.max(error / peak);
            let near = if e.abs() >= 1e-2 * rms { ulp(DType::Bf16, e) } else { 0.0 };
            dense_violations += usize::from(error > near.max(rms / 256.0));
        }
        let fail = |reason: String| Err(Mismatch { reason, measurement: Some(measurement) });
        if changed_padding > 0 {
            return fail(format!("{changed_padding} of {} padding values were changed", measurement.padding));
        }
        match self {
            Check::Exact if measurement.exact < used => {
                fail(format!("{} of {used} values differ in their bits", used - measurement.exact))
            }
            Check::Dense if dense_violations > 0 => fail(format!(
                "{dense_violations} of {used} values exceed 1 bf16 ulp (or the floor 2⁻⁸·rms = {:.3e})",
                rms / 256.0
            )),
            Check::Bf16Rounded if measurement.max_ulps > 1.0 => {
                fail(format!("an error of {:.2} ulp exceeds 1", measurement.max_ulps))
            }
            Check::Bf16Rounded if measurement.exact * 100 < used * 99 => {
                fail(format!("only {:.2} % of the values are exact, not 99 %", measurement.exact_percent()))
            }
            Check::RelativeRms(bound) if measurement.relative_rms > bound => {
                fail(format!("relative RMS {:.3e} exceeds {bound:.0e}", measurement.relative_rms))
            }
            Check::RelativeRms(bound) if measurement.max_error_over_peak > 10.0 * bound => fail(format!(
                "an error of {:.3e}·peak exceeds {:.0e}·peak",
                measurement.max_error_over_peak,
                10.0 * bound
            )),
            _ => Ok(measurement),
        }
    }
}

/// One written buffer of a case on a backend, compared with the reference's.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// The ABI's name of the buffer.
    pub output: &'static str,
    /// How it had to agree.
    pub check: Check,
    /// What was measured, or how it failed.
    pub result: Result<Measurement, Mismatch>,
}

/// The contents of a buffer a kernel wrote, downloaded after a launch.
#[derive(Clone, Debug, PartialEq)]
pub struct HostOutput {
    /// The ABI's name of the parameter.
    pub name: &'static str,
    /// The buffer's contents.
    pub data: HostData,
    /// How it must agree with the reference.
    pub check: Check,
    /// The prefix the kernel uses; the rest must be untouched.
    pub used: usize,
}

impl HostOutput {
    /// Compares this output with the same output of a reference run (see [`Check::compare`]).
    pub fn compare(&self, reference: &HostOutput) -> Result<Measurement, Mismatch> {
        if self.name != reference.name {
            return Err(mismatch(format!("output `{}` compared with `{}`", self.name, reference.name)));
        }
        self.check.compare(&self.data, &reference.data, self.used)
    }
}
