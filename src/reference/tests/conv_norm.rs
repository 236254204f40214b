//! causal_conv1d: decode, and prefill into q, k and v, each with the L2 norm of q and k.

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
        pool: state.view_mut().into(),
        slot: slot.view().into(),
        x: x.view().into(),
        weight: weight.view().into(),
        out: out.view_mut().into(),
        b: 1,
        slots: 1,
        dim,
        ldx: dim,
        width: WIDTH as u32,
        qk_channels,
        head_dim,
        eps: 1e-6,
    };
    let result = dev.kernels.launch_conv_decode(&dev.gpu, launch::conv_decode(dim, head_dim, 1), args);
    Launched { result, written: (dev.down(&state), dev.down(&out)) }
}

/// What a prefill writes: the state, then q, k and v.
type PrefillWritten = (Vec<f32>, [Vec<f32>; 3]);

/// A prefill of `t` tokens of `3·qkv` channels on `inputs` into q, k and v holding `parts`.
fn try_prefill(inputs: &ConvInputs, parts: [&[f32]; 3], sizes: [usize; 3]) -> Launched<PrefillWritten> {
    let [qkv, head_dim, t] = u32s(sizes);
    let dev = Device::new();
    let (mut state, x, weight) = (dev.up(&inputs.state), dev.up(&inputs.x), dev.up(&inputs.weight));
    let [mut q, mut k, mut v] = parts.map(|part| dev.up(part));
    let args = glm5next_kda::conv_prefill {
        state: state.view_mut().into(),
        x: x.view().into(),
        weight: weight.view().into(),
        q: q.view_mut().into(),
        k: k.view_mut().into(),
        v: v.view_mut().into(),
        t,
        qkv,
        ldx: 3 * qkv,
        width: WIDTH as u32,
        head_dim,
        eps: 1e-6,
    };
    let result = dev.kernels.launch_conv_prefill(&dev.gpu, launch::conv_prefill(qkv, head_dim, t), args);
    Launched { result, written: (dev.down(&state), [&q, &k, &v].map(|part| dev.down(part))) }
}

/// The value a prefill must leave in the row of q, k and v past its tokens.
const PAD: f32 = -7.0;

/// `(state, [q, k, v])` after a prefill of `t` tokens into buffers of `t + 1` rows, whose last
/// row must come back as it was.
fn prefill(inputs: &ConvInputs, qkv: usize, head_dim: usize, t: usize) -> PrefillWritten {
    let pad = vec![PAD; (t + 1) * qkv];
    let (state, parts) = try_prefill(inputs, [&pad, &pad, &pad], [qkv, head_dim, t]).ok();
    for part in &parts {
        assert!(part[t * qkv..].iter().all(|&x| x == PAD), "the row past t was written");
    }
    (
        state,
        parts.map(|mut part| {
            part.truncate(t * qkv);
            part
        }),
    )
}

/// `values`, which must all be bf16 values, as bf16.
fn exactly_bf16(what: &str, values: &[f32]) -> Vec<bf16> {
    values
        .iter()
        .map(|&x| {
            let narrow = bf16::from_f32(x);
            assert_eq!(narrow.to_f32().to_bits(), x.to_bits(), "{what}: {x} is not a bf16 value");
            narrow
        })
        .collect()
}

/// `(state, out)` after a decode step.
fn decode(inputs: &ConvInputs, dim: usize, qk: usize, head_dim: usize) -> ConvWritten {
    try_decode(inputs, &vec![bf16::ZERO; dim], [dim, qk, head_dim]).ok()
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
fn conv_prefill_matches_f64_normalises_q_and_k_and_keeps_the_last_inputs() {
    // H = 2 heads of D = 32: q, k and v are 64 channels each.
    let (qkv, head_dim) = (64, 32);
    let dim = 3 * qkv;
    for t in [1, 2, 7] {
        let inputs = conv_inputs(11 + t as u64, dim, t);
        let (state, parts) = prefill(&inputs, qkv, head_dim, t);
        let (mut want, want_state) = conv64(&inputs.state, &inputs.x, &inputs.weight, dim, t);
        want.chunks_mut(dim).for_each(|row| l2_heads64(&mut row[..2 * qkv], head_dim, 1e-6));
        for (index, part) in parts.iter().enumerate() {
            let what = format!("conv prefill, t = {t}, {}", ["q", "k", "v"][index]);
            let want: Vec<f64> =
                want.chunks(dim).flat_map(|row| &row[index * qkv..][..qkv]).copied().collect();
            assert_bf16_rounded(&what, &exactly_bf16(&what, part), &want);
        }
        // Moving values around is exact, so the f64 state is the f32 one widened.
        assert_eq!(widen_f32(&state), want_state, "t = {t}");
    }
}

#[test]
fn conv_state_after_two_tokens_keeps_the_old_tail() {
    let (qkv, head_dim) = (32, 32);
    let dim = 3 * qkv;
    let inputs = ConvInputs {
        state: (0..dim).flat_map(|c| [1.0, 2.0, 3.0, 4.0].map(|x| x + c as f32)).collect(),
        x: bf16s(&[[5.0; 96], [6.0; 96]].concat()),
        // Only the newest tap is on: y = silu(x).
        weight: bf16s(&[0.0, 0.0, 0.0, 1.0].repeat(dim)),
    };
    let (state, [q, k, v]) = prefill(&inputs, qkv, head_dim, 2);
    for c in 0..dim {
        let old = c as f32;
        assert_eq!(state[c * WIDTH..][..WIDTH], [3.0 + old, 4.0 + old, 5.0, 6.0], "channel {c}");
    }
    // v is not normalised; a q or k head of 32 equal values y becomes 1/sqrt(32) each.
    let silu = |x: f64| bf16::from_f64(silu64(x)).to_f32();
    assert_eq!(v, [[silu(5.0); 32], [silu(6.0); 32]].concat());
    let unit = bf16::from_f64(1.0 / 32f64.sqrt()).to_f32();
    assert_eq!((q.clone(), k), (vec![unit; 64], q));
}

#[test]
fn conv_prefill_is_decode_token_by_token() {
    let (qkv, head_dim, t) = (64, 32, 5);
    let dim = 3 * qkv;
    let inputs = conv_inputs(12, dim, t);
    let (prefill_state, parts) = prefill(&inputs, qkv, head_dim, t);
    let mut state = inputs.state.clone();
    for tau in 0..t {
        let step = ConvInputs {
            state,
            x: inputs.x[tau * dim..(tau + 1) * dim].to_vec(),
            weight: inputs.weight.clone(),
        };
        let (next, out) = decode(&step, dim, 2 * qkv, head_dim);
        for (index, part) in parts.iter().enumerate() {
            let decoded: Vec<f32> = out[index * qkv..][..qkv].iter().map(|x| x.to_f32()).collect();
            assert_eq!(decoded, part[tau * qkv..][..qkv], "token {tau}, part {index}");
        }
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
}

#[test]
fn conv_prefill_refuses_bad_sizes() {
    let (qkv, head_dim) = (32, 32);
    let part = vec![0.5f32; 3 * qkv];
    let before = |inputs: &ConvInputs| (inputs.state.clone(), [part.clone(), part.clone(), part.clone()]);
    // Two tokens of input for a prefill of three.
    let inputs = ConvInputs { x: vec![bf16::ZERO; 2 * 3 * qkv], ..conv_inputs(14, 3 * qkv, 0) };
    let reason = try_prefill(&inputs, [&part, &part, &part], [qkv, head_dim, 3]).refused(&before(&inputs));
    assert_eq!(
        reason,
        "`glm5next_kda.conv_prefill.x`: expected at least 288 elements (`(t-1)*ldx+3*qkv`), found a view of 192 elements"
    );
    // Heads that do not divide q, k and v.
    let inputs = conv_inputs(15, 3 * 48, 1);
    let reason = try_prefill(&inputs, [&part, &part, &part], [48, head_dim, 1]).refused(&before(&inputs));
    let refusal = "`glm5next_kda.conv_prefill`: the launch does not meet `qkv % head_dim == 0`";
    assert!(reason.starts_with(refusal), "{reason}");
}
