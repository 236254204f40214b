//! An independent f64 model of the KDA math of `docs/kernels.md`, for tests (shared through
//! `#[path]`). Written from the ABI's formulas, sharing no code with `src/reference`: no rounding
//! anywhere, so it measures how far the bf16/f32 kernels sit from the exact math.
//!
//! - [`recurrent`]: the per-token delta rule on one set of heads;
//! - [`chunked`]: the WY/UT chunked form, with [`Mutant`]s that break it on purpose;
//! - [`Block`]: the whole layer, per token, with its state carried in and out.

#![allow(dead_code)] // Each test binary uses part of it.

/// `σ(x) = 1/(1+e^{-x})`.
pub fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// `silu(x) = x·σ(x)`.
pub fn silu(x: f64) -> f64 {
    x * sigmoid(x)
}

/// `softplus(x) = ln(1+e^x)`, and `x` past 20 (the ABI's threshold).
pub fn softplus(x: f64) -> f64 {
    if x > 20.0 { x } else { x.exp().ln_1p() }
}

/// `y[j] = Σ_p w[j][p]·x[p]` for a Linear weight `w [n, x.len()]`.
pub fn linear(w: &[f64], x: &[f64]) -> Vec<f64> {
    assert_eq!(w.len() % x.len(), 0, "weight is not [n, {}]", x.len());
    w.chunks_exact(x.len()).map(|row| row.iter().zip(x).map(|(a, b)| a * b).sum()).collect()
}

/// A sequence of `t` tokens on `h` heads of dim `d`: `q, k, v, gate` are `[t, h, d]`,
/// `beta [t, h]`. q and k are used as given (normalise them beforehand).
#[derive(Clone, Debug)]
pub struct Sequence {
    /// Tokens.
    pub t: usize,
    /// Heads.
    pub h: usize,
    /// Head dim (K = V = D).
    pub d: usize,
    /// `[t, h, d]`.
    pub q: Vec<f64>,
    /// `[t, h, d]`.
    pub k: Vec<f64>,
    /// `[t, h, d]`.
    pub v: Vec<f64>,
    /// `[t, h, d]` log-decays.
    pub gate: Vec<f64>,
    /// `[t, h]`.
    pub beta: Vec<f64>,
}

impl Sequence {
    fn at(&self, tau: usize, head: usize) -> std::ops::Range<usize> {
        let start = (tau * self.h + head) * self.d;
        start..start + self.d
    }
}

/// One token of the recurrence on all heads, `state [h, d, d]` K-major (`S[h][k][v]`), updated in
/// place; returns `out [h, d]` read from the updated state, with q scaled by `1/√d`.
#[allow(clippy::too_many_arguments)]
pub fn recurrent_step(
    state: &mut [f64],
    q: &[f64],
    k: &[f64],
    v: &[f64],
    gate: &[f64],
    beta: &[f64],
    h: usize,
    d: usize,
) -> Vec<f64> {
    assert_eq!(state.len(), h * d * d);
    let scale = 1.0 / (d as f64).sqrt();
    let mut out = vec![0.0; h * d];
    for head in 0..h {
        let s = &mut state[head * d * d..(head + 1) * d * d];
        let (q, k, v, g) =
            (&q[head * d..][..d], &k[head * d..][..d], &v[head * d..][..d], &gate[head * d..][..d]);
        // S ← Diag(e^g)·S: the decay runs along k, the rows.
        for kk in 0..d {
            let alpha = g[kk].exp();
            for vv in 0..d {
                s[kk * d + vv] *= alpha;
            }
        }
        // δ = β (v − Sᵀk); S ← S + k δᵀ; o = Sᵀ (scale·q).
        let delta: Vec<f64> = (0..d)
            .map(|vv| beta[head] * (v[vv] - (0..d).map(|kk| s[kk * d + vv] * k[kk]).sum::<f64>()))
            .collect();
        for kk in 0..d {
            for vv in 0..d {
                s[kk * d + vv] += k[kk] * delta[vv];
            }
        }
        for vv in 0..d {
            out[head * d + vv] = (0..d).map(|kk| s[kk * d + vv] * q[kk] * scale).sum();
        }
    }
    out
}

/// The recurrence over a whole sequence from `state` (updated in place): `out [t, h, d]`.
pub fn recurrent(seq: &Sequence, state: &mut [f64]) -> Vec<f64> {
    let (h, d) = (seq.h, seq.d);
    let row = h * d;
    let mut out = Vec::with_capacity(seq.t * row);
    for tau in 0..seq.t {
        let r = tau * row..(tau + 1) * row;
        let beta = &seq.beta[tau * h..(tau + 1) * h];
        out.extend(recurrent_step(
            state,
            &seq.q[r.clone()],
            &seq.k[r.clone()],
            &seq.v[r.clone()],
            &seq.gate[r],
            beta,
            h,
            d,
        ));
    }
    out
}

/// A deliberate error in the chunked form: each must change the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutant {
    /// The correct chunked form.
    None,
    /// One decay per head: every channel of a head decays by the head's mean log-decay.
    PerHeadDecay,
    /// `exp(gc_j − gc_i)` in `A` and in the intra-chunk scores, instead of `exp(gc_i − gc_j)`.
    ExpSignFlip,
    /// The intra-chunk output sums over `j ≥ i` instead of `j ≤ i`.
    TriangleFlip,
    /// The chunk's state update happens before its outputs read the state.
    UpdateBeforeOutput,
}

/// The chunked form with chunks of `c` from `state` (updated in place): `out [t, h, d]`.
/// Positions past `t` in the last chunk read as zero (k, v, gate, β).
#[allow(clippy::needless_range_loop)] // Indices read as the formulas do.
pub fn chunked(seq: &Sequence, state: &mut [f64], c: usize, mutant: Mutant) -> Vec<f64> {
    let (t, h, d) = (seq.t, seq.h, seq.d);
    assert!(c >= 1 && state.len() == h * d * d);
    let scale = 1.0 / (d as f64).sqrt();
    let mut out = vec![0.0; t * h * d];
    let exp_diff =
        |gi: f64, gj: f64| if mutant == Mutant::ExpSignFlip { (gj - gi).exp() } else { (gi - gj).exp() };
    for head in 0..h {
        let s = &mut state[head * d * d..(head + 1) * d * d];
        for start in (0..t).step_by(c) {
            // The chunk's inputs, zero past t.
            let valid = |i: usize| start + i < t;
            let take = |src: &[f64], i: usize| -> Vec<f64> {
                if valid(i) { src[seq.at(start + i, head)].to_vec() } else { vec![0.0; d] }
            };
            let q: Vec<Vec<f64>> = (0..c).map(|i| take(&seq.q, i)).collect();
            let k: Vec<Vec<f64>> = (0..c).map(|i| take(&seq.k, i)).collect();
            let v: Vec<Vec<f64>> = (0..c).map(|i| take(&seq.v, i)).collect();
            let mut g: Vec<Vec<f64>> = (0..c).map(|i| take(&seq.gate, i)).collect();
            if mutant == Mutant::PerHeadDecay {
                for row in &mut g {
                    let mean = row.iter().sum::<f64>() / d as f64;
                    row.fill(mean);
                }
            }
            let beta: Vec<f64> =
                (0..c).map(|i| if valid(i) { seq.beta[(start + i) * h + head] } else { 0.0 }).collect();
            // gc: cumulative log-decay within the chunk.
            let mut gc = vec![vec![0.0; d]; c];
            for i in 0..c {
                for dd in 0..d {
                    gc[i][dd] = g[i][dd] + if i > 0 { gc[i - 1][dd] } else { 0.0 };
                }
            }
            // L[i][j] = β_i Σ_d k_i k_j e^{gc_i − gc_j}, j < i; T = (I + L)⁻¹ by forward substitution:
            // T[i][i] = 1, T[i][j] = −Σ_{j≤m<i} L[i][m]·T[m][j].
            let mut l = vec![vec![0.0; c]; c];
            for i in 0..c {
                for j in 0..i {
                    l[i][j] = beta[i]
                        * (0..d).map(|dd| k[i][dd] * k[j][dd] * exp_diff(gc[i][dd], gc[j][dd])).sum::<f64>();
                }
            }
            let mut tm = vec![vec![0.0; c]; c];
            for i in 0..c {
                tm[i][i] = 1.0;
                for j in 0..i {
                    tm[i][j] = -(j..i).map(|m| l[i][m] * tm[m][j]).sum::<f64>();
                }
            }
            // u = T diag(β) V; w = T diag(β) (e^{gc} ⊙ K).
            let mut u = vec![vec![0.0; d]; c];
            let mut w = vec![vec![0.0; d]; c];
            for i in 0..c {
                for j in 0..=i {
                    let a = tm[i][j] * beta[j];
                    for dd in 0..d {
                        u[i][dd] += a * v[j][dd];
                        w[i][dd] += a * k[j][dd] * gc[j][dd].exp();
                    }
                }
            }
            // vnew = u − w S (the state before the chunk).
            let vnew: Vec<Vec<f64>> = (0..c)
                .map(|i| {
                    (0..d)
                        .map(|vv| u[i][vv] - (0..d).map(|kk| w[i][kk] * s[kk * d + vv]).sum::<f64>())
                        .collect()
                })
                .collect();
            let last = (t - start).min(c) - 1;
            let update = |s: &mut [f64]| {
                let mut next = vec![0.0; d * d];
                for kk in 0..d {
                    let keep = gc[last][kk].exp();
                    for vv in 0..d {
                        let carried = s[kk * d + vv] * keep;
                        let added: f64 = (0..=last)
                            .map(|i| k[i][kk] * (gc[last][kk] - gc[i][kk]).exp() * vnew[i][vv])
                            .sum();
                        next[kk * d + vv] = carried + added;
                    }
                }
                s.copy_from_slice(&next);
            };
            if mutant == Mutant::UpdateBeforeOutput {
                update(s);
            }
            for i in 0..=last {
                let inside = |j: usize| if mutant == Mutant::TriangleFlip { j >= i } else { j <= i };
                let intra: Vec<f64> = (0..c)
                    .map(|j| {
                        if inside(j) {
                            (0..d)
                                .map(|dd| q[i][dd] * scale * k[j][dd] * exp_diff(gc[i][dd], gc[j][dd]))
                                .sum()
                        } else {
                            0.0
                        }
                    })
                    .collect();
                let row = &mut out[seq.at(start + i, head)];
                for vv in 0..d {
                    let inter: f64 =
                        (0..d).map(|kk| q[i][kk] * scale * gc[i][kk].exp() * s[kk * d + vv]).sum();
                    let local: f64 = (0..c).map(|j| intra[j] * vnew[j][vv]).sum();
                    row[vv] = inter + local;
                }
            }
            if mutant != Mutant::UpdateBeforeOutput {
                update(s);
            }
        }
    }
    out
}

/// The forget-gate law, as in `KdaGeometry`'s `GateLaw`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Law {
    /// `lower_bound · σ(e^{a_log} · (g + dt_bias))`.
    Bounded(f64),
    /// `−e^{a_log} · softplus(g + dt_bias)`.
    Softplus,
    /// No decay at all (log-decay 0): a deliberately wrong block, to show a tolerance catches it.
    NoDecay,
}

/// The log-decay of one channel of head `head`: `g_raw` plus its per-channel `dt_bias`, scaled
/// by the per-head `a_log`.
pub fn gate(law: Law, g_raw: f64, dt_bias: f64, a_log: f64) -> f64 {
    match law {
        Law::Bounded(lower_bound) => lower_bound * sigmoid(a_log.exp() * (g_raw + dt_bias)),
        Law::Softplus => -a_log.exp() * softplus(g_raw + dt_bias),
        Law::NoDecay => 0.0,
    }
}

/// `x / sqrt(Σ x² + eps)` over each `d`-wide head of `x`, in place.
pub fn l2_heads(x: &mut [f64], d: usize, eps: f64) {
    for head in x.chunks_exact_mut(d) {
        let norm = (head.iter().map(|v| v * v).sum::<f64>() + eps).sqrt();
        head.iter_mut().for_each(|v| *v /= norm);
    }
}

/// One layer's weights in f64 (Linear layout `[out, in]`).
#[derive(Clone, Debug)]
pub struct Weights {
    /// `[qkv, hidden]` each.
    pub q_proj: Vec<f64>,
    /// `[qkv, hidden]`.
    pub k_proj: Vec<f64>,
    /// `[qkv, hidden]`.
    pub v_proj: Vec<f64>,
    /// `[3·qkv, W]`, tap 0 on the oldest input.
    pub conv: Vec<f64>,
    /// `[d, hidden]`.
    pub f_a: Vec<f64>,
    /// `[qkv, d]`.
    pub f_b: Vec<f64>,
    /// `[qkv]`, per channel.
    pub dt_bias: Vec<f64>,
    /// `[h]`, per head.
    pub a_log: Vec<f64>,
    /// `[h, hidden]`.
    pub b_proj: Vec<f64>,
    /// `[d, hidden]`.
    pub g_a: Vec<f64>,
    /// `[qkv, d]`.
    pub g_b: Vec<f64>,
    /// `[d]`.
    pub o_norm: Vec<f64>,
    /// `[hidden, qkv]`.
    pub o_proj: Vec<f64>,
}

/// The shape of the layer the f64 block runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    /// Model width.
    pub hidden: usize,
    /// Heads.
    pub h: usize,
    /// Head dim.
    pub d: usize,
    /// Conv taps.
    pub width: usize,
    /// The gate law.
    pub law: Law,
    /// The q/k L2 eps (inside the root).
    pub l2_eps: f64,
    /// The output RMS norm eps.
    pub norm_eps: f64,
}

impl Shape {
    /// `h·d`.
    pub fn qkv(&self) -> usize {
        self.h * self.d
    }
}

/// One sequence's state: conv window `[3·qkv, W]` channel-major (slot `W-1` the newest input) and
/// recurrent state `[h, d, d]` K-major.
#[derive(Clone, Debug, PartialEq)]
pub struct State {
    /// `[3·qkv, W]`.
    pub conv: Vec<f64>,
    /// `[h, d, d]`.
    pub recurrent: Vec<f64>,
}

/// The whole KDA layer in f64, one token at a time, no intermediate rounding.
#[derive(Clone, Debug)]
pub struct Block {
    /// Its shape.
    pub shape: Shape,
    /// Its weights.
    pub weights: Weights,
}

impl Block {
    /// A zero state.
    pub fn new_state(&self) -> State {
        let s = &self.shape;
        State { conv: vec![0.0; 3 * s.qkv() * s.width], recurrent: vec![0.0; s.h * s.d * s.d] }
    }

    /// One token `x [hidden]`: returns `[hidden]` and advances `state`.
    pub fn step(&self, state: &mut State, x: &[f64]) -> Vec<f64> {
        let (s, w) = (&self.shape, &self.weights);
        let (qkv, d, width) = (s.qkv(), s.d, s.width);
        assert_eq!(x.len(), s.hidden);
        // Projections, all from the block input.
        let mut packed = linear(&w.q_proj, x);
        packed.extend(linear(&w.k_proj, x));
        packed.extend(linear(&w.v_proj, x));
        let g_raw = linear(&w.f_b, &linear(&w.f_a, x));
        let gate: Vec<f64> =
            (0..qkv).map(|ch| gate(s.law, g_raw[ch], w.dt_bias[ch], w.a_log[ch / d])).collect();
        let beta: Vec<f64> = linear(&w.b_proj, x).into_iter().map(sigmoid).collect();
        let out_gate = linear(&w.g_b, &linear(&w.g_a, x));
        // The causal conv: shift the window, take the newest input, SiLU; L2 over q and k heads.
        let mut conv_out = vec![0.0; 3 * qkv];
        for (ch, y) in conv_out.iter_mut().enumerate() {
            let window = &mut state.conv[ch * width..(ch + 1) * width];
            window.rotate_left(1);
            window[width - 1] = packed[ch];
            let taps = &w.conv[ch * width..(ch + 1) * width];
            *y = silu(window.iter().zip(taps).map(|(a, b)| a * b).sum());
        }
        l2_heads(&mut conv_out[..2 * qkv], d, s.l2_eps);
        let (q, rest) = conv_out.split_at(qkv);
        let (k, v) = rest.split_at(qkv);
        let core = recurrent_step(&mut state.recurrent, q, k, v, &gate, &beta, s.h, d);
        // Sigmoid-gated RMS norm per head, plain weight; then the output projection.
        let mut normed = vec![0.0; qkv];
        for head in 0..s.h {
            let x = &core[head * d..(head + 1) * d];
            let r = 1.0 / (x.iter().map(|v| v * v).sum::<f64>() / d as f64 + s.norm_eps).sqrt();
            for j in 0..d {
                normed[head * d + j] = x[j] * r * w.o_norm[j] * sigmoid(out_gate[head * d + j]);
            }
        }
        linear(&w.o_proj, &normed)
    }

    /// `t` tokens `xs [t, hidden]` one after another: `[t, hidden]`.
    pub fn run(&self, state: &mut State, xs: &[f64]) -> Vec<f64> {
        xs.chunks_exact(self.shape.hidden).flat_map(|x| self.step(state, x)).collect()
    }
}
