//! The kda_layer_ops kernels.

use half::bf16;

use super::*;

#[test]
fn o_norm_is_a_sigmoid_gated_rms_norm_per_head() {
    let (rows, d) = (6, 32);
    let mut rng = Rng::new(22);
    let x = rng.f32s(rows * d, -0.2, 0.2);
    let gate = rng.bf16s(rows * d, -3.0, 3.0);
    let weight = rng.bf16s(d, 0.5, 1.5);
    let dev = Device::new();
    let (x_buffer, gate_buffer, weight_buffer) = (dev.up(&x), dev.up(&gate), dev.up(&weight));
    let mut out = dev.up(&vec![bf16::ZERO; rows * d]);
    let [rows_u32, d_u32] = u32s([rows, d]);
    let args = glm5next_kda::o_norm {
        x: x_buffer.view().into(),
        gate: gate_buffer.view().into(),
        weight: weight_buffer.view().into(),
        out: out.view_mut().into(),
        rows: rows_u32,
        d: d_u32,
        eps: 1e-5,
    };
    dev.kernels.launch_o_norm(&dev.gpu, launch::norm(rows_u32), args).unwrap();
    let x = widen_f32(&x);
    let want: Vec<f64> = (0..rows * d)
        .map(|i| {
            let head = &x[i / d * d..][..d];
            let mean = head.iter().map(|x| x * x).sum::<f64>() / d as f64;
            x[i] / (mean + 1e-5).sqrt() * weight[i % d].to_f64() * sigmoid64(gate[i].to_f64())
        })
        .collect();
    assert_bf16_rounded("o_norm", &dev.down(&out), &want);
}

/// The first `n` elements of a `dst` holding `dst` set to `value`.
fn try_fill(dst: &[f32], n: u32, value: f32) -> Launched<Vec<f32>> {
    let dev = Device::new();
    let mut buffer = dev.up(dst);
    let args = glm5next_kda::fill { dst: buffer.view_mut().into(), n, value };
    let result = dev.kernels.launch_fill(&dev.gpu, launch::elementwise(n), args);
    Launched { result, written: dev.down(&buffer) }
}

#[test]
fn fill_writes_the_first_n() {
    assert_eq!(try_fill(&[1.0; 5], 3, 7.5).ok(), [7.5, 7.5, 7.5, 1.0, 1.0]);
    let reason = try_fill(&[1.0; 2], 3, 0.0).refused(&vec![1.0; 2]);
    assert_eq!(
        reason,
        "`glm5next_kda.fill.dst`: expected at least 3 elements (`n`), found a view of 2 elements"
    );
}
