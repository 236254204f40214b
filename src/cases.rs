//! Launch cases: one launch of each kernel of `[glm5next_kda]` at a layer geometry and a token
//! count, with seeded host inputs at the scales the block feeds it, the launch geometry of
//! [`launch`](crate::launch), how each written buffer must agree with the CPU reference
//! (`KERNEL-ABI.md`, "Tolerances") and the bytes a launch moves.
//!
//! The GPU parity tests (`tests/gpu.rs`) run every case on CUDA and on the CPU reference and
//! compare what each wrote; `kda bench` times them. A case is plain data: its arguments are
//! [`CaseArg`]s in the kernel's parameter order, so every kernel is described the same way and
//! uploaded, launched and downloaded by the same code.
//!
//! ```
//! use kda::cases::KernelCase;
//! use kda::geometry::KdaGeometry;
//! use kda::kernels::Glm5NextKdaKernels;
//!
//! let gpu = kda::reference::backend();
//! let kernels = Glm5NextKdaKernels::resolve(&gpu)?;
//! for case in KernelCase::all(&KdaGeometry::tiny(), 3, 7)? {
//!     for output in case.run(&gpu, &kernels)? {
//!         assert!(output.data.is_finite(), "{}: {}", case.field(), output.name);
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::ops::Range;

use half::bf16;
use kda_runtime::{
    BackendError, DType, DeviceBuffer, GpuBackend, GpuBackendExt, KernelArg, KernelEntry, KernelHandle,
    LaunchGeometry,
};

use crate::compare::Agreement;
use crate::geometry::{CONV_WIDTH, GeometryError, KdaGeometry};
use crate::kernels::Glm5NextKdaKernels;
use crate::kernels::defines::DENSE_GEMV_BATCHM_MAX_M;
use crate::launch;
use crate::rng::SplitMix64;

/// What the positions of a buffer a kernel must not touch hold: chunk padding of the inputs (which
/// the kernels must read as zero) and the parts of outputs a kernel must leave alone. Exactly
/// representable in bf16 and f32, and far from every real value.
pub const POISON: f32 = 7.5;

/// Host data of one buffer.
#[derive(Clone, PartialEq)]
pub enum HostData {
    /// bf16 elements.
    Bf16(Vec<bf16>),
    /// f32 elements.
    F32(Vec<f32>),
}

impl HostData {
    /// `len` elements of `dtype`, each [`POISON`].
    pub fn poison(dtype: DType, len: usize) -> Self {
        match dtype {
            DType::Bf16 => HostData::Bf16(vec![bf16::from_f32(POISON); len]),
            DType::F32 => HostData::F32(vec![POISON; len]),
        }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            HostData::Bf16(_) => DType::Bf16,
            HostData::F32(_) => DType::F32,
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        match self {
            HostData::Bf16(data) => data.len(),
            HostData::F32(data) => data.len(),
        }
    }

    /// Whether there is no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements, widened exactly to f64.
    pub fn to_f64(&self) -> Vec<f64> {
        match self {
            HostData::Bf16(data) => data.iter().map(|x| x.to_f64()).collect(),
            HostData::F32(data) => data.iter().map(|&x| f64::from(x)).collect(),
        }
    }

    /// The elements' bit patterns (bf16 in the low 16 bits).
    pub fn bits(&self) -> Vec<u32> {
        match self {
            HostData::Bf16(data) => data.iter().map(|x| u32::from(x.to_bits())).collect(),
            HostData::F32(data) => data.iter().map(|x| x.to_bits()).collect(),
        }
    }

    /// Whether every element is finite.
    pub fn is_finite(&self) -> bool {
        match self {
            HostData::Bf16(data) => data.iter().all(|x| x.is_finite()),
            HostData::F32(data) => data.iter().all(|x| x.is_finite()),
        }
    }

    /// Whether every element is zero (of either sign); true when empty.
    pub fn is_all_zero(&self) -> bool {
        self.to_f64().iter().all(|&x| x == 0.0)
    }

    /// The bf16 elements, if these are bf16.
    pub fn as_bf16(&self) -> Option<&[bf16]> {
        match self {
            HostData::Bf16(data) => Some(data),
            HostData::F32(_) => None,
        }
    }

    /// The f32 elements, if these are f32.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match self {
            HostData::F32(data) => Some(data),
            HostData::Bf16(_) => None,
        }
    }

    fn upload(&self, gpu: &dyn GpuBackend) -> Result<DeviceBuffer, BackendError> {
        match self {
            HostData::Bf16(data) => gpu.upload(data),
            HostData::F32(data) => gpu.upload(data),
        }
    }

    fn download(gpu: &dyn GpuBackend, buffer: &DeviceBuffer) -> Result<Self, BackendError> {
        Ok(match buffer.dtype() {
            DType::Bf16 => HostData::Bf16(gpu.download(buffer)?),
            DType::F32 => HostData::F32(gpu.download(buffer)?),
        })
    }
}

impl fmt::Debug for HostData {
    /// The type and length only: the data runs to millions of elements.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} × {}", self.dtype(), self.len())
    }
}

impl From<Vec<bf16>> for HostData {
    fn from(data: Vec<bf16>) -> Self {
        HostData::Bf16(data)
    }
}

impl From<Vec<f32>> for HostData {
    fn from(data: Vec<f32>) -> Self {
        HostData::F32(data)
    }
}

/// How a kernel uses a buffer argument; a written buffer says how it must agree with the
/// reference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Access {
    /// `const T*`: only read.
    Read,
    /// `T*`, written without being read (its initial contents are [`POISON`]).
    Write(Check),
    /// `T*`, read and written in place (a state).
    ReadWrite(Check),
}

/// A buffer argument.
#[derive(Clone, Debug, PartialEq)]
pub struct BufferArg {
    /// The ABI's name of the parameter (`state`, `out`, ...).
    pub name: &'static str,
    /// The contents uploaded before the launch.
    pub data: HostData,
    /// How the kernel uses it.
    pub access: Access,
    /// The prefix the kernel uses: elements past it are padding, never read as data and, in a
    /// written buffer, left untouched (checked bit for bit).
    pub used: usize,
    /// Elements the kernel must read (or write) once each: `used`, unless the kernel touches
    /// only part of the prefix (the L2 norm leaves the v channels alone).
    pub moved: usize,
}

/// One argument of a launch case, in the kernel's parameter order.
#[derive(Clone, Debug, PartialEq)]
pub enum CaseArg {
    /// A buffer of its own.
    Buffer(BufferArg),
    /// Elements `range` of a read-only buffer holding `data`: the `pointer + offset` the block
    /// passes for q, k and v of the packed conv output.
    Slice {
        /// The ABI's name of the parameter.
        name: &'static str,
        /// The whole buffer.
        data: HostData,
        /// The part the kernel gets.
        range: Range<usize>,
    },
    /// A `u32` scalar.
    U32(u32),
    /// An `f32` scalar.
    F32(f32),
}

/// How a written buffer must agree with the CPU reference, from `KERNEL-ABI.md` ("Tolerances").
/// Every check fails a comparison of zero elements, or against an all-zero or non-finite
/// reference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Check {
    /// Bit for bit: pack, split_widen, fill, the conv state, and untouched padding.
    Exact,
    /// Every element within this relative error: gate and sigmoid (1e-6).
    Relative(f64),
    /// Dense products (gemm, gemv, batchm): within 1 bf16 ulp where `|ref| ≥ 1e-2·rms(ref)`, and
    /// within an absolute floor of `2⁻⁸·rms(ref)` everywhere.
    Dense,
    /// bf16 outputs of one rounding (conv, L2 norm, output norm): within 1 bf16 ulp, and at least
    /// 99 % of the elements bit-exact.
    Bf16Rounded,
    /// f32 results of long sums (recurrent, chunk prepare and scan, the block): relative RMS
    /// within the bound, and no element off by more than 10× the bound times the peak.
    RelativeRms(f64),
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Check::Exact => write!(f, "bit-exact"),
            Check::Relative(bound) => write!(f, "relative ≤ {bound:.0e}"),
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
    /// The largest error in ulps of the reference element, in the buffer's own type.
    pub max_ulps: f64,
    /// `‖result − reference‖₂ / ‖reference‖₂`.
    pub relative_rms: f64,
    /// The largest `|result − reference| / |reference|` over nonzero reference elements.
    pub max_relative: f64,
    /// The same over elements with `|reference| ≥ 1e-3·peak` (see [`Agreement`]).
    pub guarded_max_relative: f64,
    /// The largest `|result − reference|` over the peak `|reference|`.
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

fn mismatch(reason: String) -> Mismatch {
    Mismatch { reason, measurement: None }
}

/// One ulp at `x` in `dtype`: the gap from `|x|` to the next representable value up (down from
/// the largest finite one). `x` must be a value of that type.
fn ulp(dtype: DType, x: f64) -> f64 {
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
            max_error_over_peak: 0.0,
            padding: result.len() - used,
            first_difference: None,
            largest_error_at: 0,
        };
        let mut largest_error = 0.0;
        let mut dense_violations = 0usize;
        for (i, (&r, &e)) in got.iter().zip(want).enumerate() {
            let error = (r - e).abs();
            if got_bits[i] == want_bits[i] {
                measurement.exact += 1;
            } else if measurement.first_difference.is_none() {
                measurement.first_difference = Some(i);
            }
            if error > largest_error {
                (largest_error, measurement.largest_error_at) = (error, i);
            }
            measurement.max_ulps = measurement.max_ulps.max(error / ulp(dtype, e));
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
            Check::Relative(bound) if measurement.max_relative > bound => {
                fail(format!("relative error {:.3e} exceeds {bound:.0e}", measurement.max_relative))
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

/// Why cases could not be built.
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    /// The geometry is not one the kernels run.
    #[error("invalid geometry: {0}")]
    Geometry(#[from] GeometryError),
    /// A case needs at least one token.
    #[error("a launch case needs at least one token")]
    NoTokens,
    /// The padded token count times a row overflows the kernels' 32-bit sizes.
    #[error("{0} tokens overflow the kernels' 32-bit sizes at this geometry")]
    TooManyTokens(u32),
    /// A table entry without a case: every entry of `[glm5next_kda]` needs one here.
    #[error("no launch case for entry `{0}`: add one to src/cases.rs")]
    NoCase(String),
    /// The reference run that makes the chunk scan's inputs failed.
    #[error("the reference run behind the chunk scan's inputs failed: {0}")]
    Reference(String),
}

/// The shape every case is built from.
#[derive(Clone, Copy, Debug)]
struct Shape {
    geometry: KdaGeometry,
    t: u32,
    t_pad: u32,
    h: u32,
    d: u32,
    qkv: u32,
    dim: u32,
    hidden: u32,
}

impl Shape {
    fn new(geometry: &KdaGeometry, t: u32) -> Result<Self, CaseError> {
        geometry.validate()?;
        if t == 0 {
            return Err(CaseError::NoTokens);
        }
        let t_pad = u64::from(t).div_ceil(u64::from(geometry.chunk)) * u64::from(geometry.chunk);
        if t_pad * u64::from(geometry.conv_dim()) > u64::from(u32::MAX) {
            return Err(CaseError::TooManyTokens(t));
        }
        Ok(Self {
            geometry: *geometry,
            t,
            t_pad: t_pad as u32,
            h: geometry.heads,
            d: geometry.head_dim,
            qkv: geometry.qkv(),
            dim: geometry.conv_dim(),
            hidden: geometry.hidden,
        })
    }
}

/// Picks the handle of one entry out of the resolved table.
type Handle = fn(&Glm5NextKdaKernels) -> Option<KernelHandle>;

/// One launch of one kernel of `[glm5next_kda]`: its arguments with their host data, its launch
/// geometry, and how to find its handle in a resolved table.
#[derive(Clone, Debug)]
pub struct KernelCase {
    entry: KernelEntry,
    handle: Handle,
    launch: LaunchGeometry,
    args: Vec<CaseArg>,
    tokens: u32,
}

/// A case's arguments on a backend, ready for repeated launches.
pub struct PreparedCase {
    slots: Vec<Slot>,
}

enum Slot {
    Buffer(DeviceBuffer, bool),
    Slice(DeviceBuffer, Range<usize>),
    U32(u32),
    F32(f32),
}

impl KernelCase {
    /// One case per entry of `[glm5next_kda]`, in manifest order, at `geometry` with `t` tokens
    /// (prefill kernels take all `t`; decode kernels one token; the batched GEMV `t` rows clamped
    /// to 2..=16), inputs drawn from `seed`. Fails for an entry without a case.
    pub fn all(geometry: &KdaGeometry, t: u32, seed: u64) -> Result<Vec<KernelCase>, CaseError> {
        Glm5NextKdaKernels::ENTRIES.iter().map(|entry| Self::new(entry.field, geometry, t, seed)).collect()
    }

    /// The case of entry `field` (see [`KernelCase::all`]). Each case draws its inputs from its
    /// own stream of `seed`; `recurrent` and `recurrent_smem` draw the same inputs, as do the two
    /// chunk kernels (the scan's `gc`, `u` and `w` are the reference prepare's outputs).
    pub fn new(field: &str, geometry: &KdaGeometry, t: u32, seed: u64) -> Result<KernelCase, CaseError> {
        let s = Shape::new(geometry, t)?;
        let entry = *Glm5NextKdaKernels::ENTRIES
            .iter()
            .find(|entry| entry.field == field)
            .ok_or_else(|| CaseError::NoCase(field.to_owned()))?;
        let mut rng = stream(seed, field);
        let (handle, launch, args): (Handle, _, _) = match field {
            "gemm" => {
                let (m, n, k) = (s.t, s.qkv, s.hidden);
                let args = dense_args(activations(&mut rng, m * k), linear(&mut rng, n, k), Some(m), n, k);
                (|k| Some(k.gemm), launch::gemm(m, n), args)
            }
            "gemv" => {
                let (n, k) = (s.qkv, s.hidden);
                let args = dense_args(activations(&mut rng, k), linear(&mut rng, n, k), None, n, k);
                (|k| Some(k.gemv), launch::gemv(1, n), args)
            }
            "gemv_batchm" => {
                let (m, n, k) = (s.t.clamp(2, DENSE_GEMV_BATCHM_MAX_M), s.qkv, s.hidden);
                let args = dense_args(activations(&mut rng, m * k), linear(&mut rng, n, k), Some(m), n, k);
                (|k| k.gemv_batchm, launch::gemv(m, n), args)
            }
            "conv_decode" => {
                let (state, weight) = conv_inputs(&mut rng, s);
                let args = vec![
                    update("state", state, Check::Exact),
                    read("x", activations(&mut rng, s.dim)),
                    read("weight", weight),
                    write(DType::Bf16, "out", s.dim, Check::Bf16Rounded),
                    CaseArg::U32(s.dim),
                    CaseArg::U32(CONV_WIDTH),
                    CaseArg::U32(2 * s.qkv),
                    CaseArg::U32(s.d),
                    CaseArg::F32(s.geometry.l2_eps),
                ];
                (|k| Some(k.conv_decode), launch::conv(s.dim), args)
            }
            "conv_prefill" => {
                let (state, weight) = conv_inputs(&mut rng, s);
                let args = vec![
                    update("state", state, Check::Exact),
                    read("x", activations(&mut rng, s.t * s.dim)),
                    read("weight", weight),
                    write(DType::Bf16, "out", s.t * s.dim, Check::Bf16Rounded),
                    CaseArg::U32(s.dim),
                    CaseArg::U32(CONV_WIDTH),
                    CaseArg::U32(s.t),
                ];
                (|k| Some(k.conv_prefill), launch::conv(s.dim), args)
            }
            "l2" => {
                let data = silu_outputs(&mut rng, s.t * s.dim);
                let mut data = update("data", data, Check::Bf16Rounded);
                if let CaseArg::Buffer(buffer) = &mut data {
                    // Only the q and k channels, two thirds of each row, are read and written.
                    buffer.moved = (s.t * 2 * s.qkv) as usize;
                }
                let args = vec![
                    data,
                    CaseArg::U32(s.t),
                    CaseArg::U32(s.dim),
                    CaseArg::U32(2 * s.h),
                    CaseArg::U32(s.d),
                    CaseArg::F32(s.geometry.l2_eps),
                ];
                (|k| Some(k.l2), launch::norm(s.t * 2 * s.h, s.d), args)
            }
            "gate" => {
                let law = s.geometry.gate_law;
                let args = vec![
                    read("g_raw", activations(&mut rng, s.t * s.qkv)),
                    // Biases as trained, in [−4, −1]: σ's argument mostly negative, mild decays.
                    read("dt_bias", uniform(&mut rng, s.qkv, -4.0, -1.0)),
                    read("a_log", uniform(&mut rng, s.h, -0.5, 0.5)),
                    write(DType::F32, "gate", s.t * s.qkv, Check::Relative(1e-6)),
                    CaseArg::U32(s.t),
                    CaseArg::U32(s.h),
                    CaseArg::U32(s.d),
                    CaseArg::U32(law.code()),
                    CaseArg::F32(law.lower_bound()),
                ];
                (|k| Some(k.gate), launch::elementwise(s.t * s.qkv), args)
            }
            "chunk_prepare" => {
                let args = ChunkInputs::draw(&mut stream(seed, "chunk"), s).prepare_args();
                (|k| Some(k.chunk_prepare), launch::chunk_prepare(s.t_pad / s.geometry.chunk, s.h), args)
            }
            "chunk_scan" => {
                let args = chunk_scan_args(seed, s)?;
                (|k| Some(k.chunk_scan), launch::chunk_scan(s.h, s.d), args)
            }
            "recurrent" => {
                let args = recurrent_args(&mut stream(seed, "recurrent"), s);
                (|k| Some(k.recurrent), launch::recurrent(s.h, s.d), args)
            }
            "recurrent_smem" => {
                let args = recurrent_args(&mut stream(seed, "recurrent"), s);
                (|k| k.recurrent_smem, launch::recurrent(s.h, s.d), args)
            }
            "o_norm" => {
                let rows = s.t * s.h;
                let args = vec![
                    read("x", uniform(&mut rng, rows * s.d, -1.0, 1.0)),
                    read("gate", activations(&mut rng, rows * s.d)),
                    read("weight", bf16_vec(&uniform(&mut rng, s.d, 0.9, 1.1))),
                    write(DType::Bf16, "out", rows * s.d, Check::Bf16Rounded),
                    CaseArg::U32(rows),
                    CaseArg::U32(s.d),
                    CaseArg::F32(s.geometry.norm_eps),
                ];
                (|k| Some(k.o_norm), launch::norm(rows, s.d), args)
            }
            "split_widen" => {
                let (real, padded) = (s.t * s.qkv, s.t_pad * s.qkv);
                // Rows ≥ t of the padded outputs must stay as they were.
                let out = |name| write_prefix(DType::F32, name, padded, real, Check::Exact);
                let args = vec![
                    read("src", activations(&mut rng, s.t * s.dim)),
                    out("q"),
                    out("k"),
                    out("v"),
                    CaseArg::U32(s.t),
                    CaseArg::U32(s.qkv),
                ];
                (|k| Some(k.split_widen), launch::elementwise(s.t * s.dim), args)
            }
            "sigmoid" => {
                let n = s.t * s.h;
                let args = vec![
                    read("x", activations(&mut rng, n)),
                    write(DType::F32, "y", n, Check::Relative(1e-6)),
                    CaseArg::U32(n),
                ];
                (|k| Some(k.sigmoid), launch::elementwise(n), args)
            }
            "fill" => {
                // The real rows of a padded buffer: the rows past them must stay as they were.
                let (n, len) = (s.t * s.qkv, s.t_pad * s.qkv);
                let args = vec![
                    write_prefix(DType::F32, "dst", len, n, Check::Exact),
                    CaseArg::U32(n),
                    CaseArg::F32(0.25),
                ];
                (|k| Some(k.fill), launch::elementwise(len), args)
            }
            "pack" => {
                let n = s.t * s.qkv;
                let args = vec![
                    read("q", activations(&mut rng, n)),
                    read("k", activations(&mut rng, n)),
                    read("v", activations(&mut rng, n)),
                    write(DType::Bf16, "dst", 3 * n, Check::Exact),
                    CaseArg::U32(s.t),
                    CaseArg::U32(s.qkv),
                ];
                (|k| Some(k.pack), launch::elementwise(3 * n), args)
            }
            other => return Err(CaseError::NoCase(other.to_owned())),
        };
        Ok(KernelCase { entry, handle, launch, args, tokens: t })
    }

    /// The table field this case launches.
    pub fn field(&self) -> &'static str {
        self.entry.field
    }

    /// The manifest entry this case launches.
    pub fn entry(&self) -> &KernelEntry {
        &self.entry
    }

    /// The token count the case was built for.
    pub fn tokens(&self) -> u32 {
        self.tokens
    }

    /// The arguments, in the kernel's parameter order.
    pub fn args(&self) -> &[CaseArg] {
        &self.args
    }

    /// The buffer argument called `name`.
    pub fn buffer(&self, name: &str) -> Option<&BufferArg> {
        self.args.iter().find_map(|arg| match arg {
            CaseArg::Buffer(buffer) if buffer.name == name => Some(buffer),
            _ => None,
        })
    }

    /// The launch geometry, from [`launch`](crate::launch).
    pub fn launch_geometry(&self) -> LaunchGeometry {
        self.launch
    }

    /// The case's kernel in a resolved table; `None` for an optional entry the target lacks.
    pub fn kernel(&self, kernels: &Glm5NextKdaKernels) -> Option<KernelHandle> {
        (self.handle)(kernels)
    }

    /// The bytes one launch must move at least: each input read once, each output written once,
    /// each in/out buffer read and written once (padding neither).
    pub fn bytes_moved(&self) -> u64 {
        let bytes = |len: usize, dtype: DType| (len * dtype.size()) as u64;
        self.args
            .iter()
            .map(|arg| match arg {
                CaseArg::Buffer(BufferArg { data, access, moved, .. }) => match access {
                    Access::Read | Access::Write(_) => bytes(*moved, data.dtype()),
                    Access::ReadWrite(_) => 2 * bytes(*moved, data.dtype()),
                },
                CaseArg::Slice { data, range, .. } => bytes(range.len(), data.dtype()),
                CaseArg::U32(_) | CaseArg::F32(_) => 0,
            })
            .sum()
    }

    /// Uploads the arguments to `gpu`.
    pub fn prepare(&self, gpu: &dyn GpuBackend) -> Result<PreparedCase, BackendError> {
        let slots = self
            .args
            .iter()
            .map(|arg| {
                Ok(match arg {
                    CaseArg::Buffer(buffer) => {
                        Slot::Buffer(buffer.data.upload(gpu)?, buffer.access != Access::Read)
                    }
                    CaseArg::Slice { data, range, .. } => Slot::Slice(data.upload(gpu)?, range.clone()),
                    CaseArg::U32(value) => Slot::U32(*value),
                    CaseArg::F32(value) => Slot::F32(*value),
                })
            })
            .collect::<Result<_, BackendError>>()?;
        Ok(PreparedCase { slots })
    }

    /// Launches the kernel once on `prepared` (which [`KernelCase::prepare`] made on the same
    /// `gpu`); in/out buffers carry over from launch to launch.
    pub fn launch(
        &self,
        gpu: &dyn GpuBackend,
        kernels: &Glm5NextKdaKernels,
        prepared: &mut PreparedCase,
    ) -> Result<(), BackendError> {
        let kernel = self.kernel(kernels).ok_or_else(|| BackendError::Launch {
            module: self.entry.module.to_owned(),
            entry: self.entry.entry.to_owned(),
            reason: format!(
                "the optional entry `{}` is not resolved on {}",
                self.entry.field,
                gpu.describe()
            ),
        })?;
        let mut args: Vec<KernelArg<'_>> = prepared
            .slots
            .iter_mut()
            .map(|slot| match slot {
                Slot::Buffer(buffer, true) => KernelArg::BufferMut(buffer),
                Slot::Buffer(buffer, false) => KernelArg::Buffer(buffer),
                Slot::Slice(buffer, range) => buffer.slice(range.clone()),
                Slot::U32(value) => KernelArg::U32(*value),
                Slot::F32(value) => KernelArg::F32(*value),
            })
            .collect();
        gpu.launch(kernel, self.launch, &mut args)
    }

    /// Every buffer the kernel writes (in/out ones included), downloaded from `prepared`, in
    /// parameter order.
    pub fn outputs(
        &self,
        gpu: &dyn GpuBackend,
        prepared: &PreparedCase,
    ) -> Result<Vec<HostOutput>, BackendError> {
        self.args
            .iter()
            .zip(&prepared.slots)
            .filter_map(|(arg, slot)| match (arg, slot) {
                (CaseArg::Buffer(buffer), Slot::Buffer(device, true)) => Some((buffer, device)),
                _ => None,
            })
            .map(|(buffer, device)| {
                let check = match buffer.access {
                    Access::Write(check) | Access::ReadWrite(check) => check,
                    Access::Read => Check::Exact,
                };
                Ok(HostOutput {
                    name: buffer.name,
                    data: HostData::download(gpu, device)?,
                    check,
                    used: buffer.used,
                })
            })
            .collect()
    }

    /// Uploads, launches once, and downloads every written buffer.
    pub fn run(
        &self,
        gpu: &dyn GpuBackend,
        kernels: &Glm5NextKdaKernels,
    ) -> Result<Vec<HostOutput>, BackendError> {
        let mut prepared = self.prepare(gpu)?;
        self.launch(gpu, kernels, &mut prepared)?;
        self.outputs(gpu, &prepared)
    }

    /// For a `gemv_batchm` case: the `gemv` case of its row `row` (that row of `x`, the same
    /// weight), whose output must be bit-identical to that row of the batched output. `None` for
    /// another case or a row past `m`.
    pub fn gemv_row(&self, row: u32) -> Option<KernelCase> {
        let (m, n, k) = match self.args[3..] {
            [CaseArg::U32(m), CaseArg::U32(n), CaseArg::U32(k)] if self.field() == "gemv_batchm" => (m, n, k),
            _ => return None,
        };
        let (x, w) = (self.buffer("x")?.data.as_bf16()?, self.buffer("w")?.data.as_bf16()?);
        let x = x.chunks_exact(k as usize).take(m as usize).nth(row as usize)?;
        let gemv = *Glm5NextKdaKernels::ENTRIES.iter().find(|entry| entry.field == "gemv")?;
        Some(KernelCase {
            entry: gemv,
            handle: |k| Some(k.gemv),
            launch: launch::gemv(1, n),
            args: dense_args(x.to_vec(), w.to_vec(), None, n, k),
            tokens: 1,
        })
    }
}

/// `x, w, y[, m], n, k` of a dense product (`m` absent for the GEMV), `y` poisoned.
fn dense_args(x: Vec<bf16>, w: Vec<bf16>, m: Option<u32>, n: u32, k: u32) -> Vec<CaseArg> {
    let rows = m.unwrap_or(1);
    let mut args = vec![read("x", x), read("w", w), write(DType::Bf16, "y", rows * n, Check::Dense)];
    args.extend(m.map(CaseArg::U32));
    args.extend([CaseArg::U32(n), CaseArg::U32(k)]);
    args
}

/// A conv state (the last W inputs, bf16 projections widened) and conv taps within ±0.5.
fn conv_inputs(rng: &mut SplitMix64, s: Shape) -> (Vec<f32>, Vec<bf16>) {
    let window = s.dim * CONV_WIDTH;
    let state = activations(rng, window).iter().map(|x| x.to_f32()).collect();
    (state, bf16_vec(&uniform(rng, window, -0.5, 0.5)))
}

/// The inputs of the chunked prefill, `[t_pad, ...]` with the padding poisoned.
struct ChunkInputs {
    s: Shape,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    gate: Vec<f32>,
    beta: Vec<f32>,
}

impl ChunkInputs {
    /// q and k L2-normalised per head and rounded to bf16 (as the conv and L2 kernels leave
    /// them), v the SiLU outputs of the conv, negative log-decays, β in (0, 1).
    fn draw(rng: &mut SplitMix64, s: Shape) -> Self {
        let padded = (s.t_pad * s.qkv) as usize;
        let widen = |x: Vec<bf16>| x.iter().map(|x| x.to_f32()).collect::<Vec<_>>();
        let k = poisoned(widen(unit_heads(rng, s.t * s.h, s.d)), padded);
        let v = poisoned(widen(silu_outputs(rng, s.t * s.qkv)), padded);
        let gate = poisoned(log_decays(rng, s.t * s.qkv), padded);
        let beta = poisoned(betas(rng, s.t * s.h), (s.t_pad * s.h) as usize);
        let q = poisoned(widen(unit_heads(rng, s.t * s.h, s.d)), padded);
        Self { s, q, k, v, gate, beta }
    }

    fn prepare_args(self) -> Vec<CaseArg> {
        let s = self.s;
        let len = s.t_pad * s.qkv;
        let (real, beta_real) = ((s.t * s.qkv) as usize, (s.t * s.h) as usize);
        // Prepare writes every position, the padding as if its inputs were zero.
        let out = |name| write(DType::F32, name, len, Check::RelativeRms(1e-5));
        vec![
            read_prefix("k", self.k, real),
            read_prefix("v", self.v, real),
            read_prefix("gate", self.gate, real),
            read_prefix("beta", self.beta, beta_real),
            out("gc"),
            out("u"),
            out("w"),
            CaseArg::U32(s.t),
            CaseArg::U32(s.h),
            CaseArg::U32(s.d),
            CaseArg::U32(s.geometry.chunk),
        ]
    }
}

/// The scan's arguments: the chunk inputs' q and k, `gc`, `u` and `w` from the reference prepare
/// of the same inputs (padding poisoned again), a nonzero state.
fn chunk_scan_args(seed: u64, s: Shape) -> Result<Vec<CaseArg>, CaseError> {
    let mut rng = stream(seed, "chunk");
    let ChunkInputs { q, k, .. } = ChunkInputs::draw(&mut rng, s);
    // The prepare case draws the same inputs from the same stream.
    let prepare = KernelCase::new("chunk_prepare", &s.geometry, s.t, seed)?;
    let gpu = crate::reference::backend();
    let failed = |error: &dyn fmt::Display| CaseError::Reference(error.to_string());
    let kernels = Glm5NextKdaKernels::resolve(&gpu).map_err(|error| failed(&error))?;
    let outputs = prepare.run(&gpu, &kernels).map_err(|error| failed(&error))?;
    let real = (s.t * s.qkv) as usize;
    let output = |name: &str| -> Result<Vec<f32>, CaseError> {
        let data = outputs.iter().find(|output| output.name == name).and_then(|output| output.data.as_f32());
        let mut data = data.ok_or_else(|| failed(&format!("no f32 output `{name}`")))?.to_vec();
        data[real..].fill(POISON);
        Ok(data)
    };
    let (gc, u, w) = (output("gc")?, output("u")?, output("w")?);
    let len = s.t_pad * s.qkv;
    Ok(vec![
        read_prefix("q", q, real),
        read_prefix("k", k, real),
        read_prefix("gc", gc, real),
        read_prefix("u", u, real),
        read_prefix("w", w, real),
        update("state", state_values(&mut rng, s), Check::RelativeRms(1e-5)),
        // Rows ≥ t of the output are not written.
        write_prefix(DType::F32, "out", len, s.t * s.qkv, Check::RelativeRms(1e-5)),
        CaseArg::U32(s.t),
        CaseArg::U32(s.h),
        CaseArg::U32(s.d),
        CaseArg::U32(s.geometry.chunk),
        CaseArg::F32(s.geometry.scale()),
    ])
}

/// One decode step: q, k and v as slices of the packed conv output (q and k L2-normalised per
/// head, v SiLU outputs), negative log-decays, β in (0, 1), a nonzero state.
fn recurrent_args(rng: &mut SplitMix64, s: Shape) -> Vec<CaseArg> {
    let qkv = s.qkv as usize;
    let mut packed = unit_heads(rng, 2 * s.h, s.d);
    packed.extend(silu_outputs(rng, s.qkv));
    let packed = HostData::Bf16(packed);
    let slice = |name, part: usize| CaseArg::Slice {
        name,
        data: packed.clone(),
        range: part * qkv..(part + 1) * qkv,
    };
    vec![
        slice("q", 0),
        slice("k", 1),
        slice("v", 2),
        read("gate", log_decays(rng, s.qkv)),
        read("beta", betas(rng, s.h)),
        update("state", state_values(rng, s), Check::RelativeRms(1e-5)),
        write(DType::F32, "out", s.qkv, Check::RelativeRms(1e-5)),
        CaseArg::U32(s.h),
        CaseArg::U32(s.d),
        CaseArg::F32(s.geometry.scale()),
    ]
}

/// A buffer the kernel reads whole.
fn read(name: &'static str, data: impl Into<HostData>) -> CaseArg {
    let data = data.into();
    let len = data.len();
    CaseArg::Buffer(BufferArg { name, data, access: Access::Read, used: len, moved: len })
}

/// A buffer the kernel reads the first `used` elements of (the rest is poisoned padding).
fn read_prefix(name: &'static str, data: Vec<f32>, used: usize) -> CaseArg {
    let data = HostData::F32(data);
    CaseArg::Buffer(BufferArg { name, data, access: Access::Read, used, moved: used })
}

/// A poisoned buffer of `len` the kernel writes whole.
fn write(dtype: DType, name: &'static str, len: u32, check: Check) -> CaseArg {
    write_prefix(dtype, name, len, len, check)
}

/// A poisoned buffer of `len` the kernel writes the first `used` elements of.
fn write_prefix(dtype: DType, name: &'static str, len: u32, used: u32, check: Check) -> CaseArg {
    let data = HostData::poison(dtype, len as usize);
    let used = used as usize;
    CaseArg::Buffer(BufferArg { name, data, access: Access::Write(check), used, moved: used })
}

/// A buffer the kernel reads and writes in place.
fn update(name: &'static str, data: impl Into<HostData>, check: Check) -> CaseArg {
    let data = data.into();
    let len = data.len();
    CaseArg::Buffer(BufferArg { name, data, access: Access::ReadWrite(check), used: len, moved: len })
}

/// The generator of one case's inputs: `seed` mixed with the FNV-1a hash of `key`, so that each
/// case's inputs stay the same when other cases change.
fn stream(seed: u64, key: &str) -> SplitMix64 {
    let hash =
        key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    SplitMix64::new(seed ^ hash)
}

/// `n` values uniform in `[lo, hi)`.
fn uniform(rng: &mut SplitMix64, n: u32, lo: f32, hi: f32) -> Vec<f32> {
    (0..n).map(|_| lo + (hi - lo) * rng.next_unit()).collect()
}

fn bf16_vec(values: &[f32]) -> Vec<bf16> {
    values.iter().copied().map(bf16::from_f32).collect()
}

/// Unit-variance activations (a normed residual stream, the projections of one).
fn activations(rng: &mut SplitMix64, n: u32) -> Vec<bf16> {
    bf16_vec(&uniform(rng, n, -1.7, 1.7))
}

/// A Linear weight `[out, inputs]` with variance `1/inputs`: unit-variance outputs.
fn linear(rng: &mut SplitMix64, out: u32, inputs: u32) -> Vec<bf16> {
    let bound = (3.0 / inputs as f32).sqrt();
    bf16_vec(&uniform(rng, out * inputs, -bound, bound))
}

/// What the conv leaves: `silu` of unit-scale sums, in bf16.
fn silu_outputs(rng: &mut SplitMix64, n: u32) -> Vec<bf16> {
    let silu = |x: f32| x / (1.0 + (-x).exp());
    bf16_vec(&uniform(rng, n, -3.0, 3.0).into_iter().map(silu).collect::<Vec<_>>())
}

/// `heads` vectors of `d`, each L2-normalised, in bf16 (what the q/k L2 norm leaves).
fn unit_heads(rng: &mut SplitMix64, heads: u32, d: u32) -> Vec<bf16> {
    let mut values = uniform(rng, heads * d, -1.0, 1.0);
    for head in values.chunks_mut(d as usize) {
        let norm = head.iter().map(|x| x * x).sum::<f32>().sqrt();
        head.iter_mut().for_each(|x| *x /= norm);
    }
    bf16_vec(&values)
}

/// Log-decays as the bounded gate makes them: `−5·σ(x)`, x in [−5, 0): from ≈ −0.03 to −2.5.
fn log_decays(rng: &mut SplitMix64, n: u32) -> Vec<f32> {
    uniform(rng, n, -5.0, 0.0).into_iter().map(|x| -5.0 / (1.0 + (-x).exp())).collect()
}

/// β = σ(x), x in [−3, 3): within (0.04, 0.96).
fn betas(rng: &mut SplitMix64, n: u32) -> Vec<f32> {
    uniform(rng, n, -3.0, 3.0).into_iter().map(|x| 1.0 / (1.0 + (-x).exp())).collect()
}

/// A recurrent state `[h, d, d]` of a sequence under way: nonzero, within ±0.5.
fn state_values(rng: &mut SplitMix64, s: Shape) -> Vec<f32> {
    uniform(rng, s.h * s.d * s.d, -0.5, 0.5)
}

/// `values` followed by [`POISON`] up to `len`.
fn poisoned(mut values: Vec<f32>, len: usize) -> Vec<f32> {
    values.resize(len, POISON);
    values
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::GateLaw;

    fn reference() -> (kda_runtime::cpu::CpuBackend, Glm5NextKdaKernels) {
        let gpu = crate::reference::backend();
        let kernels = Glm5NextKdaKernels::resolve(&gpu).unwrap();
        (gpu, kernels)
    }

    /// Geometries covering every head dim and both chunk sizes, and both gate laws.
    fn geometries() -> [KdaGeometry; 3] {
        let tiny = KdaGeometry::tiny();
        [
            tiny,
            KdaGeometry {
                hidden: 96,
                heads: 2,
                head_dim: 64,
                chunk: 64,
                gate_law: GateLaw::Softplus,
                ..tiny
            },
            KdaGeometry { hidden: 128, heads: 1, head_dim: 128, chunk: 64, ..tiny },
        ]
    }

    #[test]
    fn there_is_one_case_per_entry_of_the_table_in_manifest_order() {
        let cases = KernelCase::all(&KdaGeometry::tiny(), 5, 1).unwrap();
        let fields: Vec<_> = cases.iter().map(KernelCase::field).collect();
        let entries: Vec<_> = Glm5NextKdaKernels::ENTRIES.iter().map(|entry| entry.field).collect();
        assert_eq!(fields, entries);
        assert_eq!(cases.len(), Glm5NextKdaKernels::ENTRY_POINTS);
    }

    #[test]
    fn each_case_launches_the_kernel_of_its_own_entry() {
        let (gpu, kernels) = reference();
        for case in KernelCase::all(&KdaGeometry::tiny(), 5, 1).unwrap() {
            let entry = case.entry();
            let expected = gpu.lookup(entry.module, entry.entry).unwrap();
            assert_eq!(case.kernel(&kernels), Some(expected), "{}", case.field());
        }
        // On a target without the optional entries, their cases have no kernel and say so.
        let lacking = crate::reference::backend()
            .without("dense_gemv_bf16_batchm", "dense_gemv_bf16_batchm")
            .without("kda_recurrent", "kda_recurrent_decode_bf16_smem");
        let kernels = Glm5NextKdaKernels::resolve(&lacking).unwrap();
        let case = KernelCase::new("recurrent_smem", &KdaGeometry::tiny(), 1, 1).unwrap();
        assert_eq!(case.kernel(&kernels), None);
        let error = case.run(&lacking, &kernels).unwrap_err().to_string();
        assert!(error.contains("`recurrent_smem` is not resolved"), "{error}");
    }

    #[test]
    fn every_case_runs_on_the_reference_and_writes_finite_nonzero_outputs() {
        let (gpu, kernels) = reference();
        for geometry in geometries() {
            for t in [1, 45, 64] {
                for case in KernelCase::all(&geometry, t, 3).unwrap() {
                    let what = format!("{} at {geometry}, t = {t}", case.field());
                    let outputs = case.run(&gpu, &kernels).unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert!(!outputs.is_empty(), "{what}: writes nothing");
                    for output in outputs {
                        let what = format!("{what}, `{}`", output.name);
                        let before = &case.buffer(output.name).unwrap().data;
                        assert!(output.data.is_finite(), "{what}: not finite");
                        assert!(!output.data.is_all_zero(), "{what}: all zero");
                        assert_ne!(output.data.bits()[..output.used], before.bits()[..output.used], "{what}");
                        // The reference agrees with itself under every output's check.
                        output.compare(&output).unwrap_or_else(|e| panic!("{what}: {e}"));
                    }
                }
            }
        }
    }

    #[test]
    fn inputs_are_at_the_scales_the_block_feeds_the_kernels() {
        let geometry = KdaGeometry::tiny();
        let (t, d) = (45, geometry.head_dim as usize);
        let real = t * geometry.qkv() as usize;
        let scan = KernelCase::new("chunk_scan", &geometry, t as u32, 9).unwrap();
        let prepare = KernelCase::new("chunk_prepare", &geometry, t as u32, 9).unwrap();
        let f32s = |case: &KernelCase, name| case.buffer(name).unwrap().data.as_f32().unwrap().to_vec();
        for (case, name) in [(&scan, "q"), (&scan, "k"), (&prepare, "k")] {
            let values = f32s(case, name);
            assert_eq!(values.len(), 64 * geometry.qkv() as usize, "padded to whole chunks");
            for head in values[..real].chunks(d) {
                let norm = head.iter().map(|x| x * x).sum::<f32>().sqrt();
                assert!((norm - 1.0).abs() < 1e-2, "{name}: |head| = {norm}");
            }
            assert!(values[real..].iter().all(|&x| x == POISON), "{name}: padding poisoned");
        }
        // The two chunk kernels see the same k; the scan gets the reference prepare's outputs.
        assert_eq!(f32s(&scan, "k"), f32s(&prepare, "k"));
        let (gpu, kernels) = reference();
        let gc = prepare.run(&gpu, &kernels).unwrap().remove(0);
        assert_eq!(gc.data.as_f32().unwrap()[..real], f32s(&scan, "gc")[..real]);
        assert!(f32s(&prepare, "gate")[..real].iter().all(|&g| (-5.0..0.0).contains(&g)));
        assert!(f32s(&prepare, "beta")[..t * 2].iter().all(|&b| b > 0.0 && b < 1.0));
        assert!(f32s(&scan, "state").iter().any(|&x| x != 0.0));

        // recurrent and recurrent_smem launch on the same inputs; q and k are unit heads.
        let recurrent = KernelCase::new("recurrent", &geometry, 1, 9).unwrap();
        let smem = KernelCase::new("recurrent_smem", &geometry, 1, 9).unwrap();
        assert_eq!(recurrent.args(), smem.args());
        let CaseArg::Slice { data, range, .. } = &recurrent.args()[1] else { panic!("k is a slice") };
        let k = &data.as_bf16().unwrap()[range.clone()];
        for head in k.chunks(d) {
            let norm = head.iter().map(|x| x.to_f32().powi(2)).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-2, "k: |head| = {norm}");
        }
        // Different seeds draw different inputs; the same seed the same.
        assert_eq!(
            KernelCase::new("gemv", &geometry, 1, 9).unwrap().args(),
            KernelCase::new("gemv", &geometry, 1, 9).unwrap().args()
        );
        assert_ne!(
            KernelCase::new("gemv", &geometry, 1, 9).unwrap().args(),
            KernelCase::new("gemv", &geometry, 1, 10).unwrap().args()
        );
    }

    #[test]
    fn bytes_moved_counts_each_input_and_output_once_and_states_twice() {
        let tiny = KdaGeometry::tiny();
        // gemv: x [64], w [64, 64], y [64], bf16.
        assert_eq!(KernelCase::new("gemv", &tiny, 7, 1).unwrap().bytes_moved(), (64 + 64 * 64 + 64) * 2);
        // recurrent: q, k, v [64] bf16; gate [64], beta [2], state [2, 32, 32] twice, out [64] f32.
        let recurrent = 3 * 64 * 2 + (64 + 2 + 2 * 2 * 32 * 32 + 64) * 4;
        assert_eq!(KernelCase::new("recurrent", &tiny, 7, 1).unwrap().bytes_moved(), recurrent);
        // fill of t = 7 real rows of a padded buffer: 7 · 64 f32 written.
        assert_eq!(KernelCase::new("fill", &tiny, 7, 1).unwrap().bytes_moved(), 7 * 64 * 4);
        // l2 reads and writes the q and k channels of 7 rows of 192: 7 · 128 bf16, twice.
        assert_eq!(KernelCase::new("l2", &tiny, 7, 1).unwrap().bytes_moved(), 2 * 7 * 128 * 2);
    }

    #[test]
    fn a_prepared_case_launches_repeatedly_carrying_its_state() {
        let (gpu, kernels) = reference();
        let case = KernelCase::new("conv_decode", &KdaGeometry::tiny(), 1, 2).unwrap();
        let once = case.run(&gpu, &kernels).unwrap();
        let mut prepared = case.prepare(&gpu).unwrap();
        case.launch(&gpu, &kernels, &mut prepared).unwrap();
        assert_eq!(case.outputs(&gpu, &prepared).unwrap(), once);
        case.launch(&gpu, &kernels, &mut prepared).unwrap();
        let twice = case.outputs(&gpu, &prepared).unwrap();
        assert_ne!(twice[0].data, once[0].data, "the conv window moved on");
    }

    #[test]
    fn batchm_rows_become_gemv_cases_with_the_same_weight() {
        let (gpu, kernels) = reference();
        let batchm = KernelCase::new("gemv_batchm", &KdaGeometry::tiny(), 5, 4).unwrap();
        let batched = batchm.run(&gpu, &kernels).unwrap().remove(0);
        let n = 64;
        for i in 0..5 {
            let row = batchm.gemv_row(i).unwrap();
            assert_eq!(row.field(), "gemv");
            assert_eq!(row.buffer("w"), batchm.buffer("w"));
            let y = row.run(&gpu, &kernels).unwrap().remove(0);
            let i = i as usize;
            assert_eq!(y.data.bits(), batched.data.bits()[i * n..(i + 1) * n]);
        }
        assert!(batchm.gemv_row(5).is_none());
        assert!(KernelCase::new("gemv", &KdaGeometry::tiny(), 5, 4).unwrap().gemv_row(0).is_none());
    }

    #[test]
    fn cases_refuse_what_the_kernels_cannot_run() {
        let tiny = KdaGeometry::tiny();
        assert!(matches!(KernelCase::all(&tiny, 0, 1), Err(CaseError::NoTokens)));
        assert!(matches!(KernelCase::new("nope", &tiny, 1, 1), Err(CaseError::NoCase(_))));
        let bad = KdaGeometry { head_dim: 48, ..tiny };
        assert!(matches!(KernelCase::all(&bad, 1, 1), Err(CaseError::Geometry(_))));
        assert!(matches!(
            KernelCase::all(&KdaGeometry::glm5_flash(), u32::MAX, 1),
            Err(CaseError::TooManyTokens(_))
        ));
    }

    fn bf16s(values: &[f32]) -> HostData {
        HostData::Bf16(bf16_vec(values))
    }

    /// `value` moved by `ulps` bf16 ulps (away from zero for positive `ulps`).
    fn nudge(value: f32, ulps: i32) -> bf16 {
        bf16::from_bits((i32::from(bf16::from_f32(value).to_bits()) + ulps) as u16)
    }

    #[test]
    fn checks_pass_what_the_abi_allows_and_fail_what_it_does_not() {
        let want: Vec<f32> = (1..=200).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
        let reference = bf16s(&want);
        let HostData::Bf16(exact) = reference.clone() else { unreachable!() };
        let n = exact.len();
        // At the peak, where two ulps exceed the dense check's floor of 2⁻⁸·rms.
        let at = (0..n).max_by(|&a, &b| want[a].abs().total_cmp(&want[b].abs())).unwrap();
        let mut one_ulp = exact.clone();
        one_ulp[at] = nudge(want[at], 1);
        let mut two_ulps = exact.clone();
        two_ulps[at] = nudge(want[at], 2);
        let one_ulp = HostData::Bf16(one_ulp);
        let two_ulps = HostData::Bf16(two_ulps);
        // Bit-exact only passes exact data.
        assert_eq!(Check::Exact.compare(&reference, &reference, n).unwrap().exact, n);
        assert!(Check::Exact.compare(&one_ulp, &reference, n).is_err());
        // One ulp passes the dense and rounded checks, two do not.
        for check in [Check::Dense, Check::Bf16Rounded] {
            let measured = check.compare(&one_ulp, &reference, n).unwrap();
            assert_eq!((measured.max_ulps, measured.exact), (1.0, n - 1), "{check}");
            assert_eq!((measured.first_difference, measured.largest_error_at), (Some(at), at), "{check}");
            assert!(check.compare(&two_ulps, &reference, n).is_err(), "{check}");
        }
        // Over 1 % of the elements off by one ulp fails the rounded check, not the dense one.
        let HostData::Bf16(mut many) = reference.clone() else { unreachable!() };
        (0..3).for_each(|i| many[i * 50] = nudge(want[i * 50], 1));
        let many = HostData::Bf16(many);
        assert!(Check::Bf16Rounded.compare(&many, &reference, n).is_err());
        assert!(Check::Dense.compare(&many, &reference, n).is_ok());
        // Relative error on f32 data.
        let f32s = HostData::F32(want.clone());
        let off = HostData::F32(want.iter().map(|x| x * (1.0 + 2e-6)).collect());
        assert!(Check::Relative(1e-6).compare(&f32s, &f32s, n).is_ok());
        assert!(Check::Relative(1e-6).compare(&off, &f32s, n).is_err());
        assert!(Check::Relative(1e-5).compare(&off, &f32s, n).is_ok());
        // Relative RMS, and one element far off under a small RMS.
        assert!(Check::RelativeRms(1e-5).compare(&off, &f32s, n).is_ok());
        // (A long buffer, where one element can hide in the RMS: ‖ref‖ ≈ 300, peak 3.)
        let long: Vec<f32> = (0..20_000).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
        let mut spike = long.clone();
        spike[3] += 0.1;
        let (long, spike) = (HostData::F32(long), HostData::F32(spike));
        let measured = Check::RelativeRms(1e-3).compare(&spike, &long, 20_000).unwrap_err();
        assert!(measured.measurement.unwrap().relative_rms < 1e-3);
        assert!(measured.reason.contains("·peak"), "{measured}");
    }

    #[test]
    fn comparisons_of_nothing_or_against_nothing_fail() {
        let zeros = HostData::F32(vec![0.0; 8]);
        let ones = HostData::F32(vec![1.0; 8]);
        let nan = HostData::F32(vec![f32::NAN; 8]);
        for check in
            [Check::Exact, Check::Relative(1e-6), Check::Dense, Check::Bf16Rounded, Check::RelativeRms(1e-5)]
        {
            assert!(check.compare(&zeros, &zeros, 8).unwrap_err().reason.contains("all zero"), "{check}");
            assert!(check.compare(&ones, &ones, 0).unwrap_err().reason.contains("no element"), "{check}");
            assert!(check.compare(&nan, &nan, 8).unwrap_err().reason.contains("not finite"), "{check}");
            assert!(check.compare(&nan, &ones, 8).unwrap_err().reason.contains("8 of 8 results"), "{check}");
            assert!(check.compare(&ones, &HostData::F32(vec![1.0; 9]), 8).is_err(), "{check}");
            assert!(check.compare(&ones, &HostData::Bf16(vec![bf16::ONE; 8]), 8).is_err(), "{check}");
        }
    }

    #[test]
    fn padding_must_come_back_untouched() {
        let reference = HostData::F32(vec![1.0, 2.0, POISON, POISON]);
        let touched = HostData::F32(vec![1.0, 2.0, POISON, 0.0]);
        let measured = Check::RelativeRms(1e-5).compare(&reference, &reference, 2).unwrap();
        assert_eq!((measured.elements, measured.padding), (2, 2));
        let error = Check::RelativeRms(1e-5).compare(&touched, &reference, 2).unwrap_err();
        assert!(error.reason.contains("1 of 2 padding values"), "{error}");
    }

    #[test]
    fn ulps_are_the_gap_to_the_next_value_up() {
        assert_eq!(ulp(DType::Bf16, 1.0), 1.0 / 128.0);
        assert_eq!(ulp(DType::Bf16, -3.0), 1.0 / 64.0);
        assert_eq!(ulp(DType::F32, 1.0), f64::from(f32::EPSILON));
        assert_eq!(ulp(DType::Bf16, bf16::MAX.to_f64()), ulp(DType::Bf16, bf16::MAX.to_f64() / 2.0) * 2.0);
        assert!(ulp(DType::F32, 0.0) > 0.0);
    }
}
