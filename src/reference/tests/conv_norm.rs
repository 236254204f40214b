//! causal_conv1d (decode and prefill) and l2_norm_bf16.

use half::bf16;

use super::*;

const WIDTH: usize = 4;

fn silu64(x: f64) -> f64 {
    x * sigmoid64(x)
}

/// The ABI's conv, literally: per token, shift the state left, append the input, sum the taps
/// over the window and apply SiLU. Returns the f64 outputs `[t, dim]` and the final state.
fn conv64(state: &[f32], x: &[bf16], weight: &[bf16], dim: usize, t: usize) -> (Vec<f64>, Vec<f64>) {
    let mut state = widen_f32(state);
    let weight = widen(weight);
    let mut out = vec![0.0; t * dim];
    for tau in 0..t {
        for c in 0..dim {
            let slots = &mut state[c * WIDTH..(c + 1) * WIDTH];
            slots.rotate_left(1);
            slots[WIDTH - 1] = x[tau * dim + c].to_f64();
            let a: f64 = (0..WIDTH).map(|s| slots[s] * weight[c * WIDTH + s]).sum();
            out[tau * dim + c] = silu64(a);
        }
    }
    (out, state)
}

/// Divides each `head_dim` group of `values` by `sqrt(Σ x² + eps)`, in f64.
fn l2_heads64(values: &mut [f64], head_dim: usize, eps: f64) {
    for head in values.chunks_mut(head_dim) {
        let norm = (head.iter().map(|x| x * x).sum::<f64>() + eps).sqrt();
        head.iter_mut().for_each(|x| *x /= norm);
    }
}

struct ConvInputs {
    state: Vec<f32>,
    x: Vec<bf16>,
    weight: Vec<bf16>,
}

fn conv_inputs(seed: u64, dim: usize, t: usize) -> ConvInputs {
    let mut rng = Rng::new(seed);
    ConvInputs {
        state: rng.f32s(dim * WIDTH, -1.0, 1.0),
        x: rng.bf16s(t * dim, -2.0, 2.0),
        weight: rng.bf16s(dim * WIDTH, -0.6, 0.6),
    }
}

/// What a conv launch writes: the state, then the output.
type ConvWritten = (Vec<f32>, Vec<bf16>);

/// A decode step on `inputs` into an output holding `out`.
fn try_decode(inputs: &ConvInputs, out: &[bf16], sizes: [usize; 3]) -> Launched<ConvWritten> {
    let [dim, qk_channels, head_dim] = u32s(sizes);
    let dev = Device::new();
    let (mut state, x, weight) = (dev.up(&inputs.state), dev.up(&inputs.x), dev.up(&inputs.weight));
    let (mut out, slot) = (dev.up(out), dev.up(&[0u32]));
    // A batch of one, the state a pool of one slot.
    let args = glm5next_kda::conv_decode {
        pool: state.view_mut(),
        slot: slot.view(),
        x: x.view(),
        weight: weight.view(),
        out: out.view_mut(),
        b: 1,
        slots: 1,
        dim,
        width: WIDTH as u32,
        qk_channels,
        head_dim,
        eps: 1e-6,
    };
    let result = dev.kernels.launch_conv_decode(&dev.gpu, launch::conv(dim, 1), args);
    Launched { result, written: (dev.down(&state), dev.down(&out)) }
}

/// A prefill of `t` tokens on `inputs` into an output holding `out`.
fn try_prefill(inputs: &ConvInputs, out: &[bf16], sizes: [usize; 2]) -> Launched<ConvWritten> {
    let [dim, t] = u32s(sizes);
    let dev = Device::new();
    let (mut state, x, weight) = (dev.up(&inputs.state), dev.up(&inputs.x), dev.up(&inputs.weight));
    let mut out = dev.up(out);
    let args = glm5next_kda::conv_prefill {
        state: state.view_mut(),
        x: x.view(),
        weight: weight.view(),
        out: out.view_mut(),
        dim,
        width: WIDTH as u32,
        t,
    };
    let result = dev.kernels.launch_conv_prefill(&dev.gpu, launch::conv(dim, 1), args);
    Launched { result, written: (dev.down(&state), dev.down(&out)) }
}

/// `(state, out)` after a decode step.
fn decode(inputs: &ConvInputs, dim: usize, qk: usize, head_dim: usize) -> ConvWritten {
    try_decode(inputs, &vec![bf16::ZERO; dim], [dim, qk, head_dim]).ok()
}

/// `(state, out)` after a prefill of `t` tokens.
fn prefill(inputs: &ConvInputs, dim: usize, t: usize) -> ConvWritten {
    try_prefill(inputs, &vec![bf16::ZERO; t * dim], [dim, t]).ok()
}

#[test]
fn conv_decode_normalises_q_and_k_heads_only() {
    // H = 2 heads of D = 32: q and k are 128 channels, v 64 more.
    let (dim, qk, head_dim) = (192, 128, 32);
    let inputs = conv_inputs(10, dim, 1);
    let (state, out) = decode(&inputs, dim, qk, head_dim);
    let (mut want, _) = conv64(&inputs.state, &inputs.x, &inputs.weight, dim, 1);
    l2_heads64(&mut want[..qk], head_dim, 1e-6);
    assert_bf16_rounded("conv decode", &out, &want);
    // The state shifts exactly: slots 1..4 move down, the input widens into slot 3.
    for c in 0..dim {
        let old = &inputs.state[c * WIDTH..(c + 1) * WIDTH];
        let new = &state[c * WIDTH..(c + 1) * WIDTH];
        assert_eq!(new, [old[1], old[2], old[3], inputs.x[c].to_f32()], "channel {c}");
    }
}

#[test]
fn conv_prefill_matches_f64_and_keeps_the_last_inputs() {
    let dim = 24;
    for t in [1, 2, 7] {
        let inputs = conv_inputs(11 + t as u64, dim, t);
        let (state, out) = prefill(&inputs, dim, t);
        let (want, want_state) = conv64(&inputs.state, &inputs.x, &inputs.weight, dim, t);
        assert_bf16_rounded(&format!("conv prefill, t = {t}"), &out, &want);
        // Moving values around is exact, so the f64 state is the f32 one widened.
        assert_eq!(widen_f32(&state), want_state, "t = {t}");
    }
}

#[test]
fn conv_state_after_two_tokens_keeps_the_old_tail() {
    let dim = 1;
    let inputs = ConvInputs {
        state: vec![1.0, 2.0, 3.0, 4.0],
        x: vec![bf16::from_f32(5.0), bf16::from_f32(6.0)],
        weight: vec![bf16::ZERO, bf16::ZERO, bf16::ZERO, bf16::ONE],
    };
    let (state, out) = prefill(&inputs, dim, 2);
    assert_eq!(state, [3.0, 4.0, 5.0, 6.0]);
    // Only the newest tap is on: y = silu(x).
    let want: Vec<bf16> = [5.0f64, 6.0].iter().map(|&x| bf16::from_f64(silu64(x))).collect();
    assert_eq!(out, want);
}

#[test]
fn conv_prefill_is_decode_without_the_norm_token_by_token() {
    let (dim, t) = (40, 5);
    let inputs = conv_inputs(12, dim, t);
    let (prefill_state, prefill_out) = prefill(&inputs, dim, t);
    let mut state = inputs.state.clone();
    for tau in 0..t {
        let step = ConvInputs {
            state,
            x: inputs.x[tau * dim..(tau + 1) * dim].to_vec(),
            weight: inputs.weight.clone(),
        };
        let (next, out) = decode(&step, dim, 0, 32);
        assert_eq!(out, prefill_out[tau * dim..(tau + 1) * dim], "token {tau}");
        state = next;
    }
    assert_eq!(state, prefill_state);
}

#[test]
fn conv_refuses_bad_sizes() {
    let (dim, qk, head_dim) = (64, 32, 32);
    let mut inputs = conv_inputs(13, dim, 1);
    let out = vec![bf16::ZERO; dim];
    let before = (inputs.state.clone(), out.clone());
    let reason = try_decode(&inputs, &out, [dim, 48, head_dim]).refused(&before);
    let refusal = "`glm5next_kda.conv_decode`: the launch does not meet `qk_channels % head_dim == 0`";
    assert!(reason.starts_with(refusal), "{reason}");
    let reason = try_decode(&inputs, &out, [dim, qk, 8]).refused(&before);
    let refusal = "`glm5next_kda.conv_decode`: the launch does not meet `head_dim == 32 || head_dim == 64 || head_dim == 128`";
    assert!(reason.starts_with(refusal), "{reason}");
    inputs.weight.pop();
    let reason = try_decode(&inputs, &out, [dim, qk, head_dim]).refused(&before);
    assert_eq!(
        reason,
        "`glm5next_kda.conv_decode.weight`: expected at least 256 elements (`dim*width`), found a view of 255 elements"
    );
    // Two tokens of input for a prefill of three.
    let inputs = ConvInputs { x: vec![bf16::ZERO; 2 * dim], ..conv_inputs(14, dim, 0) };
    let out = vec![bf16::ZERO; 3 * dim];
    let reason = try_prefill(&inputs, &out, [dim, 3]).refused(&(inputs.state.clone(), out.clone()));
    assert_eq!(
        reason,
        "`glm5next_kda.conv_prefill.x`: expected at least 192 elements (`t*dim`), found a view of 128 elements"
    );
}

/// The in-place L2 norm of `data` (eps 1e-6), one block per head row.
fn try_l2(data: &[bf16], sizes: [usize; 4]) -> Launched<Vec<bf16>> {
    let [rows, row_stride, heads, head_dim] = u32s(sizes);
    let dev = Device::new();
    let mut buffer = dev.up(data);
    let args = glm5next_kda::l2 { data: buffer.view_mut(), rows, row_stride, heads, head_dim, eps: 1e-6 };
    let result = dev.kernels.launch_l2(&dev.gpu, launch::norm(rows * heads), args);
    Launched { result, written: dev.down(&buffer) }
}

#[test]
fn l2_norm_normalises_the_leading_heads_of_each_row() {
    let (rows, stride, heads, head_dim) = (3, 192, 4, 32);
    let data = Rng::new(14).bf16s(rows * stride, -1.5, 1.5);
    let out = try_l2(&data, [rows, stride, heads, head_dim]).ok();
    let width = heads * head_dim;
    for r in 0..rows {
        let row = r * stride..(r + 1) * stride;
        let mut want = widen(&data[row.start..row.start + width]);
        l2_heads64(&mut want, head_dim, 1e-6);
        assert_bf16_rounded(&format!("l2 row {r}"), &out[row.start..row.start + width], &want);
        assert_eq!(out[row.start + width..row.end], data[row.start + width..row.end]);
    }
}

#[test]
fn l2_norm_of_a_hand_case() {
    // (3, 4) / 5 = (0.6, 0.8) up to eps = 1e-6.
    let data = [bf16::from_f32(3.0), bf16::from_f32(4.0)];
    let out = try_l2(&data, [1, 2, 1, 2]).ok();
    assert_eq!(out, [bf16::from_f32(0.6), bf16::from_f32(0.8)]);
}

#[test]
fn l2_norm_refuses_heads_wider_than_a_row_and_short_data() {
    let data = vec![bf16::ONE; 64];
    let reason = try_l2(&data, [2, 32, 2, 32]).refused(&data);
    let refusal = "`glm5next_kda.l2`: the launch does not meet `heads * head_dim <= row_stride`";
    assert!(reason.starts_with(refusal), "{reason}");
    let reason = try_l2(&data, [3, 32, 1, 32]).refused(&data);
    assert_eq!(
        reason,
        "`glm5next_kda.l2.data`: expected at least 96 elements (`rows*row_stride`), found a view of 64 elements"
    );
}
