//! The library's CUDA kernels on the emulator, each launched through its typed launcher (the
//! generic `launch_<group>::<T>` of a variant group) against a reference written here, exact
//! where the kernel's arithmetic is exact and within a stated tolerance elsewhere: strided
//! (transposed and broadcast) inputs, every cast's type, rows counted by the grid, a null weight,
//! trusted ids and atomics; and the launches the manifest refuses before they run.
//!
//! Under `KDA_EMULATOR_SANITIZER=address` and `=thread` (CI runs both) the same tests launch each
//! kernel in the sanitized driver, its buffers and dynamic shared memory cut to their extents:
//! ASan + UBSan finds no access past a buffer (the reductions' shared partials, strided and
//! broadcast reads, a gather's last row, a void block's last byte, a compaction's and a template's
//! partial last round), TSan no race (the atomics, the barriers of the histogram and of the row
//! reductions), and each result check shows the launch ran. `tests/planted.rs` plants each kind
//! of bug and shows it reported.
#![cfg(feature = "emulation")]

use std::fmt::Debug;

use kda_example_library::kernel_library::{self, exp_type, neg_type, relu_type};
use kda_example_library::{EMULATED_KERNELS, KernelLibraryKernels};
use kda_runtime::emu::EmuBackend;
use kda_runtime::{
    BackendError, ConstBuffer, DeviceBuffer, Element, Fp8E4M3, Fp8E5M2, GpuBackendExt, LaunchGeometry, bf16,
    f16,
};
use kda_test_support::emulator::Bits;

/// The emulator carrying the library, and its resolved table.
fn library() -> (EmuBackend, KernelLibraryKernels) {
    let gpu = EmuBackend::new(&[&EMULATED_KERNELS]).unwrap_or_else(|error| panic!("{error}"));
    let kernels = KernelLibraryKernels::resolve(&gpu).unwrap_or_else(|error| panic!("{error}"));
    (gpu, kernels)
}

/// Two blocks of 64 threads: fewer threads than most launches have elements, so the grid-stride
/// loops go round.
const GRID_STRIDE: LaunchGeometry =
    LaunchGeometry { grid: (2, 1, 1), block: (64, 1, 1), shared_mem_bytes: 0 };

/// One block per row, `block` threads each, and a float per warp of dynamic shared memory.
fn rows(rows: u32, block: u32) -> LaunchGeometry {
    LaunchGeometry { grid: (rows, 1, 1), block: (block, 1, 1), shared_mem_bytes: block / 32 * 4 }
}

/// An element type of the tests, converted from and to f64.
trait Real: Element + Copy + Debug + PartialEq {
    /// `x` rounded to nearest even in this type (truncated for an integer, which the tests only
    /// give integers).
    fn of(x: f64) -> Self;
    fn get(self) -> f64;
    /// The relative error of one rounding to this type: half a unit in the last place.
    const ROUNDING: f64;
}

impl Real for f32 {
    fn of(x: f64) -> Self {
        x as f32
    }
    fn get(self) -> f64 {
        f64::from(self)
    }
    const ROUNDING: f64 = 1.0 / (1u64 << 24) as f64;
}

impl Real for f64 {
    fn of(x: f64) -> Self {
        x
    }
    fn get(self) -> f64 {
        self
    }
    const ROUNDING: f64 = f64::EPSILON / 2.0;
}

impl Real for f16 {
    fn of(x: f64) -> Self {
        f16::from_f64(x)
    }
    fn get(self) -> f64 {
        f64::from(self)
    }
    const ROUNDING: f64 = 1.0 / 2048.0;
}

impl Real for bf16 {
    fn of(x: f64) -> Self {
        bf16::from_f64(x)
    }
    fn get(self) -> f64 {
        f64::from(self)
    }
    const ROUNDING: f64 = 1.0 / 256.0;
}

impl Real for i64 {
    fn of(x: f64) -> Self {
        x as i64
    }
    fn get(self) -> f64 {
        self as f64
    }
    const ROUNDING: f64 = 0.0;
}

/// Asserts that every `got[i]` is within `tolerance(want[i])` of `want[i]`, naming the first that
/// is not.
fn assert_close(what: &str, got: &[f64], want: &[f64], tolerance: impl Fn(f64) -> f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (&got, &want)) in got.iter().zip(want).enumerate() {
        assert!((got - want).abs() <= tolerance(want), "{what}[{i}]: {got} against {want}");
    }
}

/// The elements of `buffer` as f64 (each exactly).
fn values<T: Real>(buffer: &[T]) -> Vec<f64> {
    buffer.iter().map(|x| x.get()).collect()
}

// ---- Strided layouts. ----

/// The offset of each element, in row-major order of `dims`, in a layout of `strides`: the
/// multi-index counted up like an odometer (the kernels divide instead).
fn offsets(dims: &[u64], strides: &[u64]) -> Vec<usize> {
    let numel: u64 = dims.iter().product();
    let mut index = vec![0u64; dims.len()];
    let mut offsets = Vec::new();
    for _ in 0..numel {
        offsets.push(index.iter().zip(strides).map(|(i, stride)| i * stride).sum::<u64>() as usize);
        for axis in (0..dims.len()).rev() {
            index[axis] += 1;
            if index[axis] < dims[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
    offsets
}

/// A 3 × 4 matrix stored column-major (its transpose's storage): dims [3, 4], strides [1, 3].
const TRANSPOSED: [u64; 4] = [3, 4, 1, 3];
/// One row of 4 broadcast over 3 rows: dims [3, 4], strides [0, 1].
const BROADCAST: [u64; 4] = [3, 4, 0, 1];

/// `len` values exact in every type of the tests (multiples of 3/8 of magnitude below 6),
/// negative ones and zero among them.
fn exact_inputs<T: Real>(len: usize) -> Vec<T> {
    (0..len).map(|i| T::of(0.375 * (i as f64 - 5.0))).collect()
}

#[derive(Clone, Copy, Debug)]
enum Unary {
    Neg,
    Exp,
    Relu,
}

/// Launches the unary `op` over the 12 elements of `layout` (`TRANSPOSED` or `BROADCAST`).
fn launch_unary<T: Real + neg_type + exp_type + relu_type>(
    gpu: &EmuBackend,
    kernels: &KernelLibraryKernels,
    op: Unary,
    layout: &ConstBuffer,
    inp: &DeviceBuffer,
    out: &mut DeviceBuffer,
) -> Result<(), BackendError> {
    let (numel, num_dims, info, inp, out) = (12, 2, layout.view(), inp.view(), out.view_mut());
    match op {
        Unary::Neg => kernels.launch_neg::<T>(
            gpu,
            GRID_STRIDE,
            kernel_library::neg { numel, num_dims, info: info.into(), inp: inp.into(), out: out.into() },
        ),
        Unary::Exp => kernels.launch_exp::<T>(
            gpu,
            GRID_STRIDE,
            kernel_library::exp { numel, num_dims, info: info.into(), inp: inp.into(), out: out.into() },
        ),
        Unary::Relu => kernels.launch_relu::<T>(
            gpu,
            GRID_STRIDE,
            kernel_library::relu { numel, num_dims, info: info.into(), inp: inp.into(), out: out.into() },
        ),
    }
}

/// Each unary op of `T` over `layout` against the op applied to the elements the layout
/// addresses: neg and relu exact, exp within `exp_tolerance` relative (the 16-bit floats' exp is
/// f32's rounded, so it may round once more than the reference).
fn check_unary<T: Real + neg_type + exp_type + relu_type>(
    layout: [u64; 4],
    stored: usize,
    exp_tolerance: f64,
) {
    let (gpu, kernels) = library();
    let input = exact_inputs::<T>(stored);
    let (info, inp) = (gpu.upload_const(&layout).unwrap(), gpu.upload(&input).unwrap());
    let addressed: Vec<f64> = offsets(&layout[..2], &layout[2..]).iter().map(|&at| input[at].get()).collect();
    for op in [Unary::Neg, Unary::Exp, Unary::Relu] {
        let mut out = gpu.zeros::<T>(12).unwrap();
        launch_unary::<T>(&gpu, &kernels, op, &info, &inp, &mut out)
            .unwrap_or_else(|error| panic!("{error}"));
        let got = values(&gpu.download::<T>(&out).unwrap());
        let what = format!("{op:?} of {:?} over {layout:?}", T::DTYPE);
        match op {
            Unary::Neg => assert_eq!(got, addressed.iter().map(|x| -x).collect::<Vec<_>>(), "{what}"),
            Unary::Relu => {
                assert_eq!(got, addressed.iter().map(|x| x.max(0.0)).collect::<Vec<_>>(), "{what}")
            }
            Unary::Exp => {
                let want: Vec<f64> = addressed.iter().map(|x| T::of(x.exp()).get()).collect();
                assert_close(&what, &got, &want, |want| exp_tolerance * want.abs());
            }
        }
    }
}

#[test]
fn unary_ops_of_every_type_follow_a_transposed_layout() {
    // exp: f32 and f64 within 2 units in the last place of the host's exp; the 16-bit floats one.
    check_unary::<f32>(TRANSPOSED, 12, 4.0 * f32::ROUNDING);
    check_unary::<f64>(TRANSPOSED, 12, 4.0 * f64::ROUNDING);
    check_unary::<f16>(TRANSPOSED, 12, 2.0 * f16::ROUNDING);
    check_unary::<bf16>(TRANSPOSED, 12, 2.0 * bf16::ROUNDING);
}

#[test]
fn a_broadcast_row_launches_on_the_elements_it_addresses() {
    // Stride 0 over the rows: 4 stored elements are the layout's whole reach.
    check_unary::<f32>(BROADCAST, 4, 4.0 * f32::ROUNDING);
    check_unary::<bf16>(BROADCAST, 4, 2.0 * bf16::ROUNDING);
}

#[test]
fn a_unary_launch_is_refused_before_it_runs_for_a_short_output_or_input() {
    let (gpu, kernels) = library();
    let inp = gpu.upload(&exact_inputs::<f32>(12)).unwrap();
    let transposed = gpu.upload_const(&TRANSPOSED).unwrap();
    let mut short = gpu.upload(&[7.0f32; 11]).unwrap();
    let error = launch_unary::<f32>(&gpu, &kernels, Unary::Neg, &transposed, &inp, &mut short).unwrap_err();
    assert!(matches!(error, BackendError::Argument { param: "out", .. }), "{error}");
    assert_eq!(gpu.download::<f32>(&short).unwrap(), [7.0; 11], "a refused launch wrote");
    // The transposed layout over a 4-element row reaches 12 elements: refused too.
    let row = gpu.upload(&exact_inputs::<f32>(4)).unwrap();
    let mut out = gpu.zeros::<f32>(12).unwrap();
    let error = launch_unary::<f32>(&gpu, &kernels, Unary::Neg, &transposed, &row, &mut out).unwrap_err();
    assert!(matches!(error, BackendError::Argument { param: "inp", .. }), "{error}");
}

/// `lhs + rhs` of `T`, the left input transposed and the right one a broadcast row: each sum
/// exact (integers below 64, in every type); the right input one element short of its layout's
/// reach is refused.
fn check_add<T: Real + kernel_library::add_type>() {
    let (gpu, kernels) = library();
    // dims [3, 4], the left strides [1, 3], the right strides [0, 1].
    let layout = [3u64, 4, 1, 3, 0, 1];
    let (left, right): (Vec<T>, Vec<T>) = (
        (0..12i32).map(|i| T::of(f64::from(i) - 6.0)).collect(),
        (0..4i32).map(|i| T::of(f64::from(10 * i))).collect(),
    );
    let dims_and_strides = gpu.upload_const(&layout).unwrap();
    let (lhs, rhs, mut out) =
        (gpu.upload(&left).unwrap(), gpu.upload(&right).unwrap(), gpu.zeros::<T>(12).unwrap());
    let add = |rhs: kda_runtime::View<'_>, out: &mut kda_runtime::DeviceBuffer| {
        let args = kernel_library::add {
            numel: 12,
            num_dims: 2,
            dims_and_strides: dims_and_strides.view().into(),
            lhs: lhs.view().into(),
            rhs: rhs.into(),
            out: out.view_mut().into(),
        };
        kernels.launch_add::<T>(&gpu, GRID_STRIDE, args)
    };
    add(rhs.view(), &mut out).unwrap_or_else(|error| panic!("{error}"));
    let (l, r) = (offsets(&layout[..2], &layout[2..4]), offsets(&layout[..2], &layout[4..]));
    let want: Vec<f64> = l.iter().zip(&r).map(|(&l, &r)| left[l].get() + right[r].get()).collect();
    assert_eq!(values(&gpu.download::<T>(&out).unwrap()), want, "add of {:?}", T::DTYPE);
    // The right layout reaches 4 elements: 3 of them are refused before the launch.
    let error = add(rhs.slice(0..3), &mut out).unwrap_err();
    assert!(matches!(error, BackendError::Argument { param: "rhs", .. }), "{error}");
}

#[test]
fn add_of_a_transposed_and_a_broadcast_input_is_exact_in_every_type() {
    check_add::<f32>();
    check_add::<f64>();
    check_add::<bf16>();
    check_add::<i64>();
}

// ---- Casts. ----

/// `inp` cast to f32 by the variant of `to_f32` for `T`.
fn to_f32<T: Element + kernel_library::to_f32_type>(inp: &[T]) -> Vec<f32> {
    let (gpu, kernels) = library();
    let (input, mut out) = (gpu.upload(inp).unwrap(), gpu.zeros::<f32>(inp.len()).unwrap());
    let args = kernel_library::to_f32 {
        inp: input.view().into(),
        out: out.view_mut().into(),
        numel: inp.len() as u64,
    };
    kernels.launch_to_f32::<T>(&gpu, GRID_STRIDE, args).unwrap_or_else(|error| panic!("{error}"));
    gpu.download::<f32>(&out).unwrap()
}

/// `inp` cast from f32 by the variant of `from_f32` for `T`.
fn from_f32<T: Element + kernel_library::from_f32_type>(inp: &[f32]) -> Vec<T> {
    let (gpu, kernels) = library();
    let (input, mut out) = (gpu.upload(inp).unwrap(), gpu.zeros::<T>(inp.len()).unwrap());
    let args = kernel_library::from_f32 {
        inp: input.view().into(),
        out: out.view_mut().into(),
        numel: inp.len() as u64,
    };
    kernels.launch_from_f32::<T>(&gpu, GRID_STRIDE, args).unwrap_or_else(|error| panic!("{error}"));
    gpu.download::<T>(&out).unwrap()
}

/// The value of an fp8 pattern with `exponent_bits` and `bias`, read from the OCP definition:
/// E4M3 has no infinity and one NaN pattern a sign (S.1111.111), E5M2 IEEE's specials.
fn fp8_value(bits: u8, exponent_bits: u32, bias: i32) -> f32 {
    let significand_bits = 7 - exponent_bits;
    let exponent = i32::from(bits >> significand_bits) & ((1 << exponent_bits) - 1);
    let significand = f64::from(bits & ((1 << significand_bits) - 1));
    let sign = if bits & 0x80 != 0 { -1.0 } else { 1.0 };
    let top = (1 << exponent_bits) - 1;
    let fraction = significand / f64::from(1u32 << significand_bits);
    let value = match (exponent_bits, exponent) {
        (4, e) if e == top && significand == 7.0 => f64::NAN,
        (5, e) if e == top => {
            if significand == 0.0 {
                f64::INFINITY
            } else {
                f64::NAN
            }
        }
        (_, 0) => fraction * 2f64.powi(1 - bias),
        (_, e) => (1.0 + fraction) * 2f64.powi(e - bias),
    };
    (sign * value) as f32
}

/// Asserts `got` and `want` are the same floats, bit for bit, a NaN matching any NaN.
fn assert_same_floats(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (got, want)) in got.iter().zip(want).enumerate() {
        let same = got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan());
        assert!(same, "{what}[{i}]: {got} against {want}");
    }
}

#[test]
fn casts_into_f32_are_exact_for_every_pattern_of_the_narrow_types() {
    let bytes: Vec<u8> = (0..=255).collect();
    let e4m3: Vec<f32> = bytes.iter().map(|&b| fp8_value(b, 4, 7)).collect();
    assert_same_floats("fp8e4m3", &to_f32(&bytes.iter().map(|&b| Fp8E4M3(b)).collect::<Vec<_>>()), &e4m3);
    let e5m2: Vec<f32> = bytes.iter().map(|&b| fp8_value(b, 5, 15)).collect();
    assert_same_floats("fp8e5m2", &to_f32(&bytes.iter().map(|&b| Fp8E5M2(b)).collect::<Vec<_>>()), &e5m2);
    // The extremes of E4M3 that saturating code relies on: 448 and the smallest subnormal 2^-9.
    assert_eq!((e4m3[0x7e], e4m3[0x01]), (448.0, 2f32.powi(-9)));

    let signed: Vec<i8> = (i8::MIN..=i8::MAX).collect();
    assert_eq!(to_f32(&signed), signed.iter().map(|&x| f32::from(x)).collect::<Vec<_>>());
    let shorts: Vec<i16> = (i16::MIN..=i16::MAX).step_by(97).chain([i16::MAX, -1, 0]).collect();
    assert_eq!(to_f32(&shorts), shorts.iter().map(|&x| f32::from(x)).collect::<Vec<_>>());
    let brains: Vec<bf16> = (0..=u16::MAX).step_by(61).map(bf16::from_bits).collect();
    let want: Vec<f32> = brains.iter().map(|x| x.to_f32()).collect();
    assert_same_floats("bf16", &to_f32(&brains), &want);
}

/// Floats at the edges of the casts out of f32: ties, halves, past the ranges, NaN and infinities.
const EDGES: [f32; 18] = [
    0.0,
    -0.0,
    0.5,
    1.5,
    2.5,
    -0.7,
    254.5,
    255.4,
    255.5,
    300.0,
    65_535.4,
    65_536.0,
    1.0e9,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::NAN,
    65_519.0,
    6.0e-8,
];

#[test]
fn casts_out_of_f32_round_to_nearest_even_and_the_integers_saturate() {
    let mut bits = Bits(0xca57);
    let inputs: Vec<f32> = EDGES.iter().copied().chain((0..200).map(|_| bits.f32_any() * 40.0)).collect();
    // f16: the half crate's rounding (to nearest even, past 65,504 infinite).
    let halves = from_f32::<f16>(&inputs);
    let want: Vec<f32> = inputs.iter().map(|&x| f16::from_f32(x).to_f32()).collect();
    assert_same_floats("f16", &halves.iter().map(|x| x.to_f32()).collect::<Vec<_>>(), &want);
    // The integers: rounded to nearest even, then saturated (Rust's `as` saturates, NaN to 0).
    let bytes = from_f32::<u8>(&inputs);
    assert_eq!(bytes, inputs.iter().map(|x| x.round_ties_even() as u8).collect::<Vec<_>>());
    assert_eq!(&bytes[..10], [0, 0, 0, 2, 2, 0, 254, 255, 255, 255]);
    let shorts = from_f32::<u16>(&inputs);
    assert_eq!(shorts, inputs.iter().map(|x| x.round_ties_even() as u16).collect::<Vec<_>>());
    assert_eq!(shorts[15], 0, "NaN");
}

// ---- Rows counted by the grid. ----

#[test]
fn sum_rows_sums_each_of_the_grids_rows_exactly() {
    let (gpu, kernels) = library();
    // 5 rows of 1,000 integers below 2^10: every partial sum is an integer below 2^24, exact in
    // any order. Two warps a block, so the sum crosses the shared partials.
    let (count, d) = (5u32, 1000usize);
    let input: Vec<f32> = (0..count as usize * d).map(|i| ((i * 7919) % 1021) as f32 - 510.0).collect();
    let (x, mut out) = (gpu.upload(&input).unwrap(), gpu.zeros::<f32>(count as usize).unwrap());
    for block in [64, 256] {
        let args = kernel_library::sum_rows { x: x.view().into(), out: out.view_mut().into(), d: d as u64 };
        kernels.launch_sum_rows(&gpu, rows(count, block), args).unwrap_or_else(|error| panic!("{error}"));
        let want: Vec<f32> = input.chunks(d).map(|row| row.iter().sum()).collect();
        assert_eq!(gpu.download::<f32>(&out).unwrap(), want, "{block} threads a row");
    }
}

#[test]
fn a_row_kernel_is_refused_for_an_output_short_of_the_grids_rows_or_too_little_shared_memory() {
    let (gpu, kernels) = library();
    let x = gpu.upload(&[1.0f32; 3 * 40]).unwrap();
    let mut out = gpu.upload(&[9.0f32; 2]).unwrap();
    let args = kernel_library::sum_rows { x: x.view().into(), out: out.view_mut().into(), d: 40 };
    let error = kernels.launch_sum_rows(&gpu, rows(3, 64), args).unwrap_err();
    assert!(matches!(error, BackendError::Argument { param: "out", .. }), "{error}");
    assert!(error.to_string().contains("`grid.x`"), "{error}");
    // Two rows fit it; the input needs 2 · 40 elements, which it has.
    let starved = LaunchGeometry { shared_mem_bytes: 4, ..rows(2, 64) };
    let args = kernel_library::sum_rows { x: x.view().into(), out: out.view_mut().into(), d: 40 };
    let error = kernels.launch_sum_rows(&gpu, starved, args).unwrap_err();
    assert!(
        matches!(error, BackendError::Requirement { requirement: "shared.bytes >= block.x / 32 * 4", .. }),
        "{error}"
    );
    assert_eq!(gpu.download::<f32>(&out).unwrap(), [9.0; 2], "a refused launch wrote");
}

#[test]
fn softmax_of_each_row_matches_an_f64_reference_even_where_exp_overflows_f32() {
    let (gpu, kernels) = library();
    let (count, d) = (4u32, 77usize);
    let mut bits = Bits(0x50f7);
    // The third row is shifted past where exp(x) overflows f32: the max subtracted keeps it finite.
    let input: Vec<f32> =
        (0..count as usize * d).map(|i| bits.f32_any() + if i / d == 2 { 1000.0 } else { 0.0 }).collect();
    let (x, mut y) = (gpu.upload(&input).unwrap(), gpu.zeros::<f32>(input.len()).unwrap());
    let args = kernel_library::softmax { x: x.view().into(), y: y.view_mut().into(), d: d as u64 };
    kernels.launch_softmax(&gpu, rows(count, 64), args).unwrap_or_else(|error| panic!("{error}"));
    let want: Vec<f64> = input
        .chunks(d)
        .flat_map(|row| {
            let max = row.iter().fold(f64::NEG_INFINITY, |max, &x| max.max(f64::from(x)));
            let exps: Vec<f64> = row.iter().map(|&x| (f64::from(x) - max).exp()).collect();
            let sum: f64 = exps.iter().sum();
            exps.into_iter().map(move |e| e / sum)
        })
        .collect();
    let got: Vec<f64> = gpu.download::<f32>(&y).unwrap().into_iter().map(f64::from).collect();
    // f32's exp and a sum of 77 terms: within 1e-5 relative of each probability.
    assert_close("softmax", &got, &want, |want| 1e-5 * want);
}

/// RMSNorm of `T` over 3 rows of 96 (two warps a row), with `alpha` or without, against an f64
/// reference: within two roundings to `T` and f32's error of the sum of squares.
fn check_rmsnorm<T: Real + kernel_library::rmsnorm_type>(weighted: bool, unit_offset: bool) {
    let (gpu, kernels) = library();
    let (count, d, eps) = (3u32, 96usize, 1e-5f32);
    let mut bits = Bits(0x4a5);
    let input: Vec<T> = (0..count as usize * d).map(|_| T::of(f64::from(bits.f32_any()))).collect();
    let weights: Vec<T> = (0..d).map(|_| T::of(f64::from(bits.f32_any()) / 8.0)).collect();
    let (x, alpha) = (gpu.upload(&input).unwrap(), gpu.upload(&weights).unwrap());
    let mut y = gpu.zeros::<T>(input.len()).unwrap();
    let args = kernel_library::rmsnorm {
        x: x.view().into(),
        y: y.view_mut().into(),
        alpha: weighted.then(|| alpha.view().into()),
        d: d as u64,
        eps,
        unit_offset,
    };
    kernels.launch_rmsnorm::<T>(&gpu, rows(count, 64), args).unwrap_or_else(|error| panic!("{error}"));
    let offset = if unit_offset { 1.0 } else { 0.0 };
    let weight = |col: usize| if weighted { weights[col].get() + offset } else { 1.0 };
    let want: Vec<f64> = input
        .chunks(d)
        .flat_map(|row| {
            let mean = row.iter().map(|x| x.get() * x.get()).sum::<f64>() / d as f64;
            let scale = 1.0 / (mean + f64::from(eps)).sqrt();
            row.iter().enumerate().map(move |(col, x)| x.get() * scale * weight(col))
        })
        .collect();
    let what = format!("rmsnorm of {:?} (weighted {weighted}, unit offset {unit_offset})", T::DTYPE);
    assert_close(&what, &values(&gpu.download::<T>(&y).unwrap()), &want, |want| {
        (2.0 * T::ROUNDING + 1e-5) * want.abs()
    });
}

#[test]
fn rmsnorm_scales_each_row_by_its_weight_or_by_one_for_a_null_weight() {
    for (weighted, unit_offset) in [(true, false), (true, true), (false, false), (false, true)] {
        check_rmsnorm::<f32>(weighted, unit_offset);
        check_rmsnorm::<f16>(weighted, unit_offset);
        check_rmsnorm::<bf16>(weighted, unit_offset);
    }
}

#[test]
fn a_null_weight_changes_the_result_and_a_short_weight_is_refused() {
    let (gpu, kernels) = library();
    let x = gpu.upload(&[3.0f32; 64]).unwrap();
    let (two, short) = (gpu.upload(&[2.0f32; 64]).unwrap(), gpu.upload(&[2.0f32; 63]).unwrap());
    let mut y = gpu.zeros::<f32>(64).unwrap();
    let mut normed = |alpha| {
        let args = kernel_library::rmsnorm_f32 {
            x: x.view().into(),
            y: y.view_mut().into(),
            alpha,
            d: 64,
            eps: 0.0,
            unit_offset: false,
        };
        kernels.launch_rmsnorm_f32(&gpu, rows(1, 32), args)?;
        gpu.download::<f32>(&y)
    };
    // A row of threes has RMS 3: normalised to ones, doubled by the weight.
    assert_eq!(normed(None).unwrap(), [1.0; 64]);
    assert_eq!(normed(Some(two.view().into())).unwrap(), [2.0; 64]);
    let error = normed(Some(short.view().into())).unwrap_err();
    assert!(matches!(error, BackendError::Argument { param: "alpha", .. }), "{error}");
}

/// Rope of `T` on 2 rows of 3 positions of 8 features, against the rotation in f64 of the
/// same (rounded) inputs: within one rounding to `T` and f32's error, of the pair's magnitude.
fn check_rope<T: Real + kernel_library::rope_type>() {
    let (gpu, kernels) = library();
    let (bh, positions, d) = (2u32, 3u32, 8u32);
    let td = positions * d;
    let mut bits = Bits(0x20be);
    let input: Vec<T> = (0..bh * td).map(|_| T::of(f64::from(bits.f32_any()))).collect();
    let angles: Vec<f64> =
        (0..td / 2).map(|i| f64::from(i % (d / 2) + 1) * 0.3 * f64::from(i / (d / 2) + 1)).collect();
    let cos: Vec<T> = angles.iter().map(|a| T::of(a.cos())).collect();
    let sin: Vec<T> = angles.iter().map(|a| T::of(a.sin())).collect();
    let (src, c, s) = (gpu.upload(&input).unwrap(), gpu.upload(&cos).unwrap(), gpu.upload(&sin).unwrap());
    let mut dst = gpu.zeros::<T>(input.len()).unwrap();
    let args = kernel_library::rope {
        src: src.view().into(),
        cos: c.view().into(),
        sin: s.view().into(),
        dst: dst.view_mut().into(),
        bh,
        td,
        d,
    };
    kernels.launch_rope::<T>(&gpu, GRID_STRIDE, args).unwrap_or_else(|error| panic!("{error}"));
    let (mut want, mut magnitude) = (vec![0.0; input.len()], vec![0.0; input.len()]);
    let half = (d / 2) as usize;
    for (row, position, i) in (0..bh as usize).flat_map(|row| {
        (0..positions as usize).flat_map(move |position| (0..half).map(move |i| (row, position, i)))
    }) {
        let first = row * td as usize + position * d as usize + i;
        let (x1, x2) = (input[first].get(), input[first + half].get());
        let (c, s) = (cos[position * half + i].get(), sin[position * half + i].get());
        (want[first], want[first + half]) = (x1 * c - x2 * s, x1 * s + x2 * c);
        (magnitude[first], magnitude[first + half]) = (x1.abs() + x2.abs(), x1.abs() + x2.abs());
    }
    let got = values(&gpu.download::<T>(&dst).unwrap());
    for (i, ((got, want), magnitude)) in got.iter().zip(&want).zip(&magnitude).enumerate() {
        let tolerance = T::ROUNDING * want.abs() + 1e-6 * magnitude;
        assert!((got - want).abs() <= tolerance, "rope of {:?} [{i}]: {got} against {want}", T::DTYPE);
    }
}

#[test]
fn rope_rotates_each_half_pair_by_its_positions_angle() {
    check_rope::<f32>();
    check_rope::<bf16>();
}

#[test]
fn rope_is_refused_for_rows_that_are_not_whole_positions() {
    let (gpu, kernels) = library();
    let table = gpu.upload(&[0.0f32; 10]).unwrap();
    let src = gpu.upload(&[0.0f32; 20]).unwrap();
    let mut dst = gpu.zeros::<f32>(20).unwrap();
    let args = kernel_library::rope_f32 {
        src: src.view().into(),
        cos: table.view().into(),
        sin: table.view().into(),
        dst: dst.view_mut().into(),
        bh: 1,
        td: 20,
        d: 8,
    };
    let error = kernels.launch_rope_f32(&gpu, GRID_STRIDE, args).unwrap_err();
    assert!(matches!(error, BackendError::Requirement { requirement: "td % d == 0", .. }), "{error}");
}

// ---- Trusted ids and atomics. ----

/// Five rows of three: row r is [10r, 10r + 1, 10r + 2].
fn five_rows() -> Vec<f32> {
    (0..5).flat_map(|row| (0..3).map(move |col| (10 * row + col) as f32)).collect()
}

/// index_select with ids of type `I` (each a row of the five).
fn check_index_select<I: Element + kernel_library::index_select_type>(ids: &[I], rows: &[usize]) {
    let (gpu, kernels) = library();
    let table = five_rows();
    let (index, src) = (gpu.upload(ids).unwrap(), gpu.upload(&table).unwrap());
    let mut out = gpu.zeros::<f32>(3 * ids.len()).unwrap();
    let args = kernel_library::index_select {
        ids: index.view().into(),
        src: src.view().into(),
        out: out.view_mut().into(),
        n: ids.len() as u64,
        d: 3,
    };
    // SAFETY: every id is a row of the five-row `src`.
    unsafe { kernels.launch_index_select::<I>(&gpu, GRID_STRIDE, args) }
        .unwrap_or_else(|error| panic!("{error}"));
    let want: Vec<f32> = rows.iter().flat_map(|&row| table[3 * row..3 * row + 3].to_vec()).collect();
    assert_eq!(gpu.download::<f32>(&out).unwrap(), want, "ids of {:?}", I::DTYPE);
}

#[test]
fn index_select_gathers_the_rows_its_ids_name_for_every_id_type() {
    let rows = [4, 0, 4, 2, 1];
    check_index_select(&rows.map(|row| row as u32), &rows);
    check_index_select(&rows.map(|row| row as i32), &rows);
    check_index_select(&rows.map(|row| row as i64), &rows);
}

#[test]
fn a_trusted_launch_still_refuses_a_short_output() {
    let (gpu, kernels) = library();
    let (ids, src) = (gpu.upload(&[1u32, 3]).unwrap(), gpu.upload(&five_rows()).unwrap());
    let mut out = gpu.upload(&[-1.0f32; 5]).unwrap();
    let args = kernel_library::index_select_u32 {
        ids: ids.view().into(),
        src: src.view().into(),
        out: out.view_mut().into(),
        n: 2,
        d: 3,
    };
    // SAFETY: ids 1 and 3 are rows of `src`; the launch is refused before it runs.
    let error = unsafe { kernels.launch_index_select_u32(&gpu, GRID_STRIDE, args) }.unwrap_err();
    assert!(matches!(error, BackendError::Argument { param: "out", .. }), "{error}");
    assert_eq!(gpu.download::<f32>(&out).unwrap(), [-1.0; 5], "a refused launch wrote");
}

/// scatter_add of `T`: 300 rows of 4 into 7, ids repeating across blocks, every value a quarter
/// below 2, so that each partial sum (below 64 in magnitude) is exact in bf16 and f32: any order
/// of the atomic adds gives the reference's sums.
fn check_scatter_add<T: Real + kernel_library::scatter_add_type>() {
    let (gpu, kernels) = library();
    let (n, d, targets) = (300usize, 4usize, 7usize);
    let mut bits = Bits(0x5ca7);
    let ids: Vec<u32> = (0..n).map(|_| (bits.next_u64() % targets as u64) as u32).collect();
    let rows: Vec<T> = (0..n * d).map(|_| T::of((bits.next_u64() % 16) as f64 * 0.25 - 2.0)).collect();
    let start: Vec<T> = (0..targets * d).map(|i| T::of(i as f64)).collect();
    let (index, src, mut dst) =
        (gpu.upload(&ids).unwrap(), gpu.upload(&rows).unwrap(), gpu.upload(&start).unwrap());
    let args = kernel_library::scatter_add {
        ids: index.view().into(),
        src: src.view().into(),
        dst: dst.view_mut().into(),
        n: n as u64,
        d: d as u64,
    };
    // Three blocks of 128 threads over 1,200 elements: threads of different blocks add to a row.
    let geometry = LaunchGeometry { grid: (3, 1, 1), block: (128, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: every id is below `targets`, the rows of `dst`.
    unsafe { kernels.launch_scatter_add::<T>(&gpu, geometry, args) }
        .unwrap_or_else(|error| panic!("{error}"));
    let mut want = values(&start);
    for (i, &id) in ids.iter().enumerate() {
        for col in 0..d {
            want[id as usize * d + col] += rows[i * d + col].get();
        }
    }
    assert_eq!(values(&gpu.download::<T>(&dst).unwrap()), want, "scatter_add of {:?}", T::DTYPE);
}

#[test]
fn scatter_add_adds_every_row_to_its_ids_row_atomically() {
    check_scatter_add::<f32>();
    // The kernel compiled for sm_80 and later only: the emulated device is sm_90.
    check_scatter_add::<bf16>();
}

// ---- Quantized blocks. ----

/// Three q8_0 blocks (an f16 scale, then 32 int8), as their 34 · 3 bytes, and each value's
/// product, exact in f32 (an 11-bit scale times an 8-bit integer).
fn q8_blocks() -> (Vec<u8>, Vec<f32>) {
    let (mut bytes, mut products) = (Vec::new(), Vec::new());
    for (block, scale) in [0.5f32, -0.125, 3.0].into_iter().enumerate() {
        bytes.extend(f16::from_f32(scale).to_le_bytes());
        for i in 0..32u8 {
            // Spread over the whole int8 range, each block's values its own.
            let q = (i * 8 + block as u8 * 3).wrapping_sub(128) as i8;
            bytes.push(q as u8);
            products.push(scale * f32::from(q));
        }
    }
    (bytes, products)
}

#[test]
fn dequantize_decodes_q8_0_blocks_behind_a_void_pointer() {
    let (gpu, kernels) = library();
    let (bytes, products) = q8_blocks();
    let vx = gpu.upload(&bytes).unwrap();
    let mut y = gpu.zeros::<f32>(96).unwrap();
    let args = kernel_library::dequantize { vx: vx.view().into(), y: y.view_mut().into(), k: 96 };
    kernels.launch_dequantize::<f32>(&gpu, GRID_STRIDE, args).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(gpu.download::<f32>(&y).unwrap(), products);
    let mut halves = gpu.zeros::<f16>(96).unwrap();
    let args = kernel_library::dequantize { vx: vx.view().into(), y: halves.view_mut().into(), k: 96 };
    kernels.launch_dequantize::<f16>(&gpu, GRID_STRIDE, args).unwrap_or_else(|error| panic!("{error}"));
    // The exact product, rounded once to f16.
    let want: Vec<f16> = products.iter().map(|&p| f16::from_f32(p)).collect();
    assert_eq!(gpu.download::<f16>(&halves).unwrap(), want);
}

#[test]
fn dequantize_is_refused_for_bytes_short_of_the_blocks_and_a_partial_block() {
    let (gpu, kernels) = library();
    let (bytes, _) = q8_blocks();
    // A view of any element type is a `void` buffer, measured in bytes: 101 of the 102.
    let short = gpu.upload(&bytes[..101]).unwrap();
    let mut y = gpu.zeros::<f32>(96).unwrap();
    let args = kernel_library::dequantize_f32 { vx: short.view().into(), y: y.view_mut().into(), k: 96 };
    let error = kernels.launch_dequantize_f32(&gpu, GRID_STRIDE, args).unwrap_err();
    assert!(matches!(error, BackendError::Argument { param: "vx", .. }), "{error}");
    let vx = gpu.upload(&bytes).unwrap();
    let args = kernel_library::dequantize_f32 { vx: vx.view().into(), y: y.view_mut().into(), k: 80 };
    let error = kernels.launch_dequantize_f32(&gpu, GRID_STRIDE, args).unwrap_err();
    assert!(matches!(error, BackendError::Requirement { requirement: "k % 32 == 0", .. }), "{error}");
}

// ---- Warp votes and atomics. ----

#[test]
fn compaction_keeps_the_positive_elements_in_each_warps_order() {
    let (gpu, kernels) = library();
    // 1,000 elements, not a multiple of 32: the last warp's round has lanes past `n`.
    let n = 1000usize;
    let mut bits = Bits(0xc0de);
    let input: Vec<f32> = (0..n).map(|_| bits.f32_any()).collect();
    let x = gpu.upload(&input).unwrap();
    let (mut out, mut count) = (gpu.upload(&vec![-7.0f32; n]).unwrap(), gpu.zeros::<u32>(1).unwrap());
    let args = kernel_library::compact {
        x: x.view().into(),
        out: out.view_mut().into(),
        count: count.view_mut().into(),
        n: n as u64,
    };
    kernels.launch_compact(&gpu, GRID_STRIDE, args).unwrap_or_else(|error| panic!("{error}"));
    let got = gpu.download::<f32>(&out).unwrap();
    let count = gpu.download::<u32>(&count).unwrap()[0] as usize;
    // Each warp's round of 32 elements: its positive ones, in order, as one run of the output.
    let runs: Vec<Vec<f32>> =
        input.chunks(32).map(|chunk| chunk.iter().copied().filter(|&x| x > 0.0).collect()).collect();
    assert_eq!(count, runs.iter().map(Vec::len).sum::<usize>(), "the count");
    assert!(got[count..].iter().all(|&x| x == -7.0), "written past the count");
    for run in runs.iter().filter(|run| !run.is_empty()) {
        // The inputs are distinct, so a run's first element places it.
        let at = got[..count].iter().position(|&x| x == run[0]).unwrap_or_else(|| panic!("{run:?} not kept"));
        assert_eq!(&got[at..at + run.len()], run.as_slice(), "a warp's run out of order or split");
    }
    let (mut kept, mut want): (Vec<f32>, Vec<f32>) = (got[..count].to_vec(), runs.concat());
    kept.sort_by(f32::total_cmp);
    want.sort_by(f32::total_cmp);
    assert_eq!(kept, want, "the kept elements");
}

#[test]
fn the_histogram_counts_every_value_below_its_bins_across_blocks() {
    let (gpu, kernels) = library();
    let (n, bins) = (3000usize, 37u32);
    let mut bits = Bits(0x4157);
    // Values up to 40: those of 37 and more are not counted.
    let values: Vec<u32> = (0..n).map(|_| (bits.next_u64() % 41) as u32).collect();
    let start: Vec<u32> = (0..bins).map(|b| 1000 * b).collect();
    let (input, mut hist) = (gpu.upload(&values).unwrap(), gpu.upload(&start).unwrap());
    let geometry = LaunchGeometry { grid: (3, 1, 1), block: (128, 1, 1), shared_mem_bytes: bins * 4 };
    let args = kernel_library::histogram {
        values: input.view().into(),
        hist: hist.view_mut().into(),
        n: n as u64,
        bins,
    };
    kernels.launch_histogram(&gpu, geometry, args).unwrap_or_else(|error| panic!("{error}"));
    let mut want = start;
    for &value in values.iter().filter(|&&value| value < bins) {
        want[value as usize] += 1;
    }
    assert_eq!(gpu.download::<u32>(&hist).unwrap(), want);
    // Shared memory short of a bin a count is refused before the launch.
    let short = LaunchGeometry { shared_mem_bytes: bins * 4 - 1, ..geometry };
    let args = kernel_library::histogram {
        values: input.view().into(),
        hist: hist.view_mut().into(),
        n: n as u64,
        bins,
    };
    let error = kernels.launch_histogram(&gpu, short, args).unwrap_err();
    assert!(
        matches!(error, BackendError::Requirement { requirement: "shared.bytes >= bins * 4", .. }),
        "{error}"
    );
}

// ---- C++ templates. ----

/// `affine<T, 4>` over 1,001 elements (a partial last group of four), against the f64 product
/// of the same inputs: within one rounding to `T` and f32's two.
fn check_affine<T: Real + kernel_library::affine_type>() {
    let (gpu, kernels) = library();
    let n = 1001usize;
    let mut bits = Bits(0xaff1);
    let input: Vec<T> = (0..n).map(|_| T::of(f64::from(bits.f32_any()))).collect();
    let (scale, shift) = (-1.75f32, 0.375f32);
    let x = gpu.upload(&input).unwrap();
    let mut y = gpu.zeros::<T>(n).unwrap();
    // 2 blocks of 128 threads, four elements each: 1,024 places for the 1,001.
    let geometry = LaunchGeometry { grid: (2, 1, 1), block: (128, 1, 1), shared_mem_bytes: 0 };
    let args =
        kernel_library::affine { x: x.view().into(), y: y.view_mut().into(), scale, shift, n: n as u64 };
    kernels.launch_affine::<T>(&gpu, geometry, args).unwrap_or_else(|error| panic!("{error}"));
    let want: Vec<f64> = input.iter().map(|x| x.get() * f64::from(scale) + f64::from(shift)).collect();
    let what = format!("affine of {:?}", T::DTYPE);
    assert_close(&what, &values(&gpu.download::<T>(&y).unwrap()), &want, |want| {
        (T::ROUNDING + 2.0 * f32::ROUNDING) * want.abs() + 1e-6
    });
}

#[test]
fn a_template_per_element_type_gives_the_affine_map() {
    check_affine::<f32>();
    check_affine::<f16>();
    check_affine::<bf16>();
}

#[test]
fn a_template_launch_is_refused_for_a_grid_short_of_its_elements() {
    let (gpu, kernels) = library();
    let x = gpu.upload(&[1.0f32; 1025]).unwrap();
    let mut y = gpu.zeros::<f32>(1025).unwrap();
    let geometry = LaunchGeometry { grid: (2, 1, 1), block: (128, 1, 1), shared_mem_bytes: 0 };
    let args = kernel_library::affine_f32 {
        x: x.view().into(),
        y: y.view_mut().into(),
        scale: 2.0,
        shift: 0.0,
        n: 1025,
    };
    let error = kernels.launch_affine_f32(&gpu, geometry, args).unwrap_err();
    assert!(
        matches!(error, BackendError::Requirement { requirement: "grid.x * block.x * 4 >= n", .. }),
        "{error}"
    );
}

#[test]
fn a_template_per_block_size_gives_each_rows_largest_element() {
    let (gpu, kernels) = library();
    let (count, d) = (3u32, 700usize);
    let mut bits = Bits(0x3a7);
    let input: Vec<f32> = (0..count as usize * d).map(|_| bits.f32_any()).collect();
    let want: Vec<f32> =
        input.chunks(d).map(|row| row.iter().copied().fold(f32::NEG_INFINITY, f32::max)).collect();
    let x = gpu.upload(&input).unwrap();
    let geometry = |block| LaunchGeometry { grid: (count, 1, 1), block: (block, 1, 1), shared_mem_bytes: 0 };
    let mut out = gpu.zeros::<f32>(count as usize).unwrap();
    let args = kernel_library::max_rows_64 { x: x.view().into(), out: out.view_mut().into(), d: d as u64 };
    kernels.launch_max_rows_64(&gpu, geometry(64), args).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(gpu.download::<f32>(&out).unwrap(), want, "64 threads a row");
    let mut out = gpu.zeros::<f32>(count as usize).unwrap();
    let args = kernel_library::max_rows_256 { x: x.view().into(), out: out.view_mut().into(), d: d as u64 };
    kernels.launch_max_rows_256(&gpu, geometry(256), args).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(gpu.download::<f32>(&out).unwrap(), want, "256 threads a row");
    // The block must be the instantiation's.
    let args = kernel_library::max_rows_256 { x: x.view().into(), out: out.view_mut().into(), d: d as u64 };
    let error = kernels.launch_max_rows_256(&gpu, geometry(64), args).unwrap_err();
    assert!(matches!(error, BackendError::Requirement { requirement: "block.x == BLOCK", .. }), "{error}");
}
