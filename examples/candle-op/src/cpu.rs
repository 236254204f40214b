//! The host side of the ops' `cpu_fwd`: an operand's elements, and the precision the kernels
//! compute in.

use candle_core::{CpuStorage, Layout, Result, WithDType};

use crate::operands::contiguous_range;

/// The elements of the contiguous operand `name` (`layout` in `storage`).
pub(crate) fn elements<'a, T: WithDType>(
    name: &str,
    storage: &'a CpuStorage,
    layout: &Layout,
) -> Result<&'a [T]> {
    Ok(&storage.as_slice::<T>()?[contiguous_range(name, layout)?])
}

/// `value` as f32, the precision the kernels compute in (exact for f32 and bf16).
pub(crate) fn to_f32<T: WithDType>(value: T) -> f32 {
    value.to_f64() as f32
}

/// `value` rounded once to `T`, as the kernels store it (f32 to f64 is exact, so rounding from f64
/// is rounding from f32).
pub(crate) fn from_f32<T: WithDType>(value: f32) -> T {
    T::from_f64(f64::from(value))
}
