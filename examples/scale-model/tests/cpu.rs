//! The example's table resolved on its CPU backend: every kernel launched through the generated
//! launchers, checked against values computed here, and the launches the manifest refuses.

use kda_example::defines::BLOCK;
use kda_example::{ScaleModelKernels, model, reference, scale_model};
use kda_runtime::cpu::CpuBackend;
use kda_runtime::{BackendError, GpuBackendExt, LaunchGeometry};

const X: [f32; 5] = [1.0, -2.0, 0.5, 4.0, 3.0];
const Y: [f32; 5] = [10.0, 20.0, 30.0, 40.0, 50.0];

fn resolved() -> (CpuBackend, ScaleModelKernels) {
    let gpu = reference::cpu_backend();
    let kernels = ScaleModelKernels::resolve(&gpu).expect("the CPU backend carries every entry");
    (gpu, kernels)
}

#[test]
fn scale_multiplies_the_first_n_elements() -> Result<(), BackendError> {
    let (gpu, kernels) = resolved();
    let mut x = gpu.upload(&X)?;
    let args = scale_model::scale { x: x.view_mut().into(), n: 4, factor: 3.0 };
    kernels.launch_scale(&gpu, LaunchGeometry::linear(4, BLOCK), args)?;
    // The fifth element is beyond `n`: untouched.
    assert_eq!(gpu.download::<f32>(&x)?, [3.0, -6.0, 1.5, 12.0, 3.0]);
    Ok(())
}

#[test]
fn axpy_adds_a_multiple_of_x() -> Result<(), BackendError> {
    let (gpu, kernels) = resolved();
    let (x, mut y) = (gpu.upload(&X)?, gpu.upload(&Y)?);
    let args = scale_model::axpy { x: x.view().into(), y: y.view_mut().into(), n: 5, a: -2.0 };
    kernels.launch_axpy(&gpu, LaunchGeometry::linear(5, BLOCK), args)?;
    let expected: Vec<f32> = X.iter().zip(Y).map(|(x, y)| y - 2.0 * x).collect();
    assert_eq!(gpu.download::<f32>(&y)?, expected);
    Ok(())
}

#[test]
fn sum_squares_sums_the_squares_of_the_first_n() -> Result<(), BackendError> {
    let (gpu, kernels) = resolved();
    let (x, mut out) = (gpu.upload(&X)?, gpu.zeros::<f32>(1)?);
    let args = scale_model::sum_squares { x: x.view().into(), out: out.view_mut().into(), n: 4 };
    kernels.launch_sum_squares(&gpu, LaunchGeometry::linear(1, BLOCK), args)?;
    // 1 + 4 + 0.25 + 16, all exact in f32.
    assert_eq!(gpu.download::<f32>(&out)?, [21.25]);
    Ok(())
}

#[test]
fn model_step_composes_the_three_kernels() -> Result<(), BackendError> {
    let (gpu, kernels) = resolved();
    let (x, mut y) = (gpu.upload(&X)?, gpu.upload(&Y)?);
    let norm = model::step(&gpu, &kernels, &x, &mut y, 0.5, 2.0)?;
    let mut expected = Y;
    for (y, x) in expected.iter_mut().zip(X) {
        *y = 2.0 * (*y + 0.5 * x);
    }
    assert_eq!(gpu.download::<f32>(&y)?, expected);
    let mut squares = 0.0;
    for y in expected {
        squares += y * y;
    }
    assert_eq!(norm, squares);
    Ok(())
}

#[test]
fn a_buffer_shorter_than_its_extent_is_refused_naming_the_parameter() -> Result<(), BackendError> {
    let (gpu, kernels) = resolved();
    let (x, mut y) = (gpu.upload(&X[..3])?, gpu.upload(&Y)?);
    let args = scale_model::axpy { x: x.view().into(), y: y.view_mut().into(), n: 5, a: 1.0 };
    let error = kernels.launch_axpy(&gpu, LaunchGeometry::linear(5, BLOCK), args).unwrap_err();
    assert!(matches!(error, BackendError::Argument { param: "x", .. }), "{error:?}");
    assert!(error.to_string().contains("`scale_model.axpy.x`"), "{error}");
    // Refused before the kernel ran: `y` is as uploaded.
    assert_eq!(gpu.download::<f32>(&y)?, Y);
    // The model function reaches the same check.
    let error = model::step(&gpu, &kernels, &x, &mut y, 1.0, 1.0).unwrap_err();
    assert!(matches!(error, BackendError::Argument { param: "x", .. }), "{error:?}");
    Ok(())
}

#[test]
fn a_launch_that_breaks_a_requirement_is_refused() -> Result<(), BackendError> {
    let (gpu, kernels) = resolved();
    let (x, mut out) = (gpu.upload(&X)?, gpu.zeros::<f32>(1)?);
    let args = scale_model::sum_squares { x: x.view().into(), out: out.view_mut().into(), n: 5 };
    // Two blocks, where `sum_squares` requires one.
    let error = kernels.launch_sum_squares(&gpu, LaunchGeometry::linear(2 * BLOCK, BLOCK), args).unwrap_err();
    assert!(
        matches!(error, BackendError::Requirement { requirement: "grid.x * grid.y * grid.z == 1", .. }),
        "{error:?}"
    );
    Ok(())
}
