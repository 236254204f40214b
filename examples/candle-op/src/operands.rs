//! What both forwards of an op require of its operands: one shape, contiguous layouts, an element
//! type the kernels are built for.

use candle_core::{DType, Error, Layout, Result, Shape};

/// The shape every operand shares, or an error naming the first that differs. `operands` is each
/// operand's name and layout, the first giving the shape.
pub(crate) fn same_shape(op: &'static str, operands: &[(&str, &Layout)]) -> Result<Shape> {
    let [(_, first), rest @ ..] = operands else {
        return Err(Error::msg(format!("{op}: no operand")));
    };
    if let Some((_, differing)) = rest.iter().find(|(_, layout)| layout.shape() != first.shape()) {
        return Err(Error::ShapeMismatchBinaryOp {
            lhs: first.shape().clone(),
            rhs: differing.shape().clone(),
            op,
        }
        .bt());
    }
    Ok(first.shape().clone())
}

/// Where the elements of a contiguous operand begin and end in its storage, or an error naming it.
pub(crate) fn contiguous_range(name: &str, layout: &Layout) -> Result<std::ops::Range<usize>> {
    let (start, end) = layout
        .contiguous_offsets()
        .ok_or_else(|| Error::msg(format!("`{name}` must be contiguous, its layout is {layout:?}")))?;
    Ok(start..end)
}

/// The error for an element type the kernels are not built for.
pub(crate) fn unsupported(op: &str, dtype: DType) -> Error {
    Error::msg(format!("{op}: no kernel for {dtype:?} (f32 and bf16 only)"))
}
