//! The example model: one step that launches all three kernels through the resolved table, on
//! whatever backend carries it.

use kda_runtime::{BackendError, DType, DeviceBuffer, GpuBackend, GpuBackendExt, LaunchGeometry};

use crate::defines::BLOCK;
use crate::{ScaleModelKernels, scale_model};

/// One step: `y = factor · (y + a·x)` in place, then `‖y‖²`. `x` must hold at least as many
/// elements as `y`; the launch refuses anything else, naming the parameter.
pub fn step(
    gpu: &dyn GpuBackend,
    kernels: &ScaleModelKernels,
    x: &DeviceBuffer,
    y: &mut DeviceBuffer,
    a: f32,
    factor: f32,
) -> Result<f32, BackendError> {
    let n = u32::try_from(y.len()).map_err(|_| BackendError::TooLarge { dtype: DType::F32, len: y.len() })?;
    // The elementwise kernels grid-stride, so one thread per element is a sizing choice.
    let elementwise = LaunchGeometry::linear(n, BLOCK);
    kernels.launch_axpy(
        gpu,
        elementwise,
        scale_model::axpy { x: x.view().into(), y: y.view_mut().into(), n, a },
    )?;
    kernels.launch_scale(gpu, elementwise, scale_model::scale { x: y.view_mut().into(), n, factor })?;
    let mut sum = gpu.zeros::<f32>(1)?;
    // `sum_squares` requires one block of exactly `BLOCK` threads.
    let one_block = LaunchGeometry::linear(1, BLOCK);
    kernels.launch_sum_squares(
        gpu,
        one_block,
        scale_model::sum_squares { x: y.view().into(), out: sum.view_mut().into(), n },
    )?;
    Ok(gpu.download::<f32>(&sum)?[0])
}
