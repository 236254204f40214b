//! The checks both test files run, each on the device it is given: each op against the same math in
//! candle's own ops on that device, for f32 and bf16, on operands that start inside candle's storage
//! and end in a partial block; and the operands the ops refuse.

use candle_core::{DType, Device, Result, Tensor};
use kda_example_candle_op::{silu_mul, weighted_sum};

/// Elements of each operand: not a multiple of the kernels' block, so the last block is partial.
const N: usize = 100_003;

/// `N` values in [-4, 4) from candle's generator, as `dtype`, taken from 7 elements into a larger
/// tensor: the ops see an offset into candle's storage.
fn operand(device: &Device, dtype: DType) -> Result<Tensor> {
    Tensor::rand(-4f32, 4f32, N + 9, device)?.to_dtype(dtype)?.narrow(0, 7, N)
}

/// Asserts that `found` has `expected`'s shape and element type, and differs from it by at most
/// `tolerance(dtype)` of the largest magnitude in `expected`.
fn assert_close(found: &Tensor, expected: &Tensor) -> Result<()> {
    assert_eq!((found.dims(), found.dtype()), (expected.dims(), expected.dtype()));
    let found = found.to_dtype(DType::F32)?.to_vec1::<f32>()?;
    let values = expected.to_dtype(DType::F32)?.to_vec1::<f32>()?;
    let scale = values.iter().fold(0f32, |max, e| max.max(e.abs()));
    let worst = found.iter().zip(&values).fold(0f32, |max, (f, e)| max.max((f - e).abs()));
    let dtype = expected.dtype();
    assert!(worst <= tolerance(dtype) * scale, "{dtype:?}: off by {worst}, {} of {scale}", worst / scale);
    Ok(())
}

/// How far an op may be from candle's ops in `dtype`, relative: the op computes in f32 and rounds
/// once, candle's ops round after each (one bf16 rounding is up to 2⁻⁸ relative).
fn tolerance(dtype: DType) -> f32 {
    match dtype {
        DType::BF16 => 1.0 / 64.0,
        _ => 1e-5,
    }
}

/// `silu_mul` against candle's `silu` then `mul`.
pub fn silu_mul_matches_candle(device: &Device) -> Result<()> {
    for dtype in [DType::F32, DType::BF16] {
        let (gate, up) = (operand(device, dtype)?, operand(device, dtype)?);
        assert_close(&silu_mul(&gate, &up)?, &(gate.silu()? * &up)?)?;
    }
    Ok(())
}

/// `weighted_sum` against candle's `affine`s then adds.
pub fn weighted_sum_matches_candle(device: &Device) -> Result<()> {
    let weights = [0.5f32, -1.25, 3.0];
    let [a, b, c] = weights.map(f64::from);
    for dtype in [DType::F32, DType::BF16] {
        let [x, y, z, w] = [(); 4].map(|()| operand(device, dtype));
        let (x, y, z, w) = (x?, y?, z?, w?);
        let expected = (((x.affine(a, 0.0)? + y.affine(b, 0.0)?)? + z.affine(c, 0.0)?)? + &w)?;
        assert_close(&weighted_sum(&x, &y, &z, &w, weights)?, &expected)?;
    }
    Ok(())
}

/// An operand that is not contiguous, operands of two shapes, and an element type without a kernel:
/// each an `Err` naming what is wrong.
pub fn the_ops_refuse_what_they_cannot_run(device: &Device) -> Result<()> {
    let square = Tensor::rand(-1f32, 1f32, (64, 64), device)?;
    let error = silu_mul(&square.t()?, &square).expect_err("a transposed gate");
    assert!(error.to_string().contains("`gate` must be contiguous"), "{error}");

    let shorter = square.narrow(0, 0, 63)?;
    let error = weighted_sum(&square, &square, &square, &shorter, [1.0; 3]).expect_err("a shorter `w`");
    assert!(error.to_string().contains("shape mismatch"), "{error}");

    let integers = square.to_dtype(DType::U32)?;
    let error = silu_mul(&integers, &integers).expect_err("u32 operands");
    assert!(error.to_string().contains("no kernel for U32"), "{error}");
    Ok(())
}
