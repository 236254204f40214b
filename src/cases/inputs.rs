//! Seeded inputs at the scales the block feeds each kernel, and the argument lists shared by
//! several cases.

use std::fmt;

use half::bf16;

use crate::geometry::CONV_WIDTH;
use crate::kernels::{Glm5NextKdaEntry, Glm5NextKdaKernels};
use crate::rng::SplitMix64;
pub(super) use crate::weights::bf16_vec;

use super::*;

/// The names of the GEMM's `a [m, k]`, `b [n, k]`, `c [m, n]` and a's row stride.
pub(super) const GEMM: [&str; 4] = ["a", "b", "c", "lda"];

/// The names of the GEMVs' `x [m, k]`, `w [n, k]`, `y [m, n]` and x's row stride (the batched
/// GEMV's; the single-row one has none).
pub(super) const GEMV: [&str; 4] = ["x", "w", "y", "ldx"];

/// `x, w, y[, m], n, k[, ld]` of a dense product under the `names` ([`GEMM`] or [`GEMV`]; `m` and
/// the row stride absent for the single-row GEMV), x's rows packed, `y` poisoned.
pub(super) fn dense_args(
    names: [&'static str; 4],
    x: Vec<bf16>,
    w: Vec<bf16>,
    m: Option<u32>,
    n: u32,
    k: u32,
) -> Vec<CaseArg> {
    dense_args_at(names, x, w, (m, n, k), k, 0)
}

/// [`dense_args`] with x's rows `ld ≥ k` elements apart (poison between them; a single-row
/// product takes `ld = k`) and the operands `offset` elements into their buffers (poison before
/// them): `offset % 8 != 0` leaves them unaligned for 16-byte loads, as a slice of a packed buffer
/// is.
pub(super) fn dense_args_at(
    names: [&'static str; 4],
    x: Vec<bf16>,
    w: Vec<bf16>,
    (m, n, k): (Option<u32>, u32, u32),
    ld: u32,
    offset: usize,
) -> Vec<CaseArg> {
    let [x_name, w_name, y_name, ld_name] = names;
    let rows = m.unwrap_or(1);
    let x = spread_rows(&x, k, ld);
    let y = write::<bf16>(y_name, rows * n, Check::Dense);
    let operand = |name, data: Vec<bf16>| {
        if offset == 0 {
            return read(name, data);
        }
        let mut padded = vec![bf16::from_f32(POISON); offset];
        let range = offset..offset + data.len();
        padded.extend(data);
        CaseArg::Slice { name, data: HostData::Bf16(padded), range }
    };
    let mut args = vec![operand(x_name, x), operand(w_name, w), y];
    args.extend(m.map(|m| CaseArg::u32("m", m)));
    args.extend([CaseArg::u32("n", n), CaseArg::u32("k", k)]);
    args.extend(m.map(|_| CaseArg::u32(ld_name, ld)));
    args
}

/// The rows of `width` elements packed in `rows`, placed `ld ≥ width` apart with [`POISON`]
/// between them: a column range of a wider matrix, as the block's stacked projections leave each
/// projection's outputs. Ends with the last row.
pub(super) fn spread_rows(rows: &[bf16], width: u32, ld: u32) -> Vec<bf16> {
    let (width, ld) = (width as usize, ld as usize);
    if ld == width || rows.is_empty() {
        return rows.to_vec();
    }
    let count = rows.len() / width;
    let mut spread = vec![bf16::from_f32(POISON); (count - 1) * ld + width];
    for (row, values) in rows.chunks_exact(width).enumerate() {
        spread[row * ld..][..width].copy_from_slice(values);
    }
    spread
}

/// `x`, rows of `width` that a kernel reads `ld` apart (see [`spread_rows`]); a launch moves only
/// the rows.
pub(super) fn read_rows(name: &'static str, rows: Vec<bf16>, width: u32, ld: u32) -> CaseArg {
    let moved = rows.len();
    let mut arg = read(name, spread_rows(&rows, width, ld));
    if let CaseArg::Buffer(buffer) = &mut arg {
        buffer.moved = moved;
    }
    arg
}

/// A conv state (the last W inputs, bf16 projections widened) and conv taps within ±0.5.
pub(super) fn conv_inputs(rng: &mut SplitMix64, s: Shape) -> (Vec<f32>, Vec<bf16>) {
    conv_pool_inputs(rng, s, 1)
}

/// [`conv_inputs`] for a pool of `slots` sequences: `slots` windows, one set of taps.
pub(super) fn conv_pool_inputs(rng: &mut SplitMix64, s: Shape, slots: u32) -> (Vec<f32>, Vec<bf16>) {
    let window = s.dim * CONV_WIDTH;
    let state = activations(rng, slots * window).iter().map(|x| x.to_f32()).collect();
    (state, bf16_vec(&uniform(rng, window, -0.5, 0.5)))
}

/// The forget gate's raw inputs of `rows` tokens, as `chunk_prepare` and the recurrent kernels
/// take them: the gate's up projection, per-channel biases, per-head rates, and β's projection,
/// its rows the block's stacked width apart.
pub(super) struct GateInputs {
    g_raw: Vec<bf16>,
    dt_bias: Vec<f32>,
    a_log: Vec<f32>,
    b_raw: Vec<bf16>,
}

impl GateInputs {
    /// Each channel has a rate of its own: a bias in [−8, 0), moved by up to ±0.5 from row to
    /// row by g_raw, on heads of rate e^{a_log} within e^{±0.3}. Under the bounded law of −5 that
    /// is a log-decay from about −2e-5 to −3.7 a step, so that slow channels carry their keys
    /// across a whole chunk, as a model's do (gates drawn anew for every row leave nothing of a
    /// key 16 rows on, and with it no test of the chunk kernels' terms between sub-blocks). The
    /// last channel of each head has a bias of 100, past where e^x overflows f32: softplus must
    /// take x itself there, or its gate is −inf and the chunk form's differences of cumulative
    /// gates NaN. β's projections in [−3, 3): β within (0.04, 0.96).
    pub(super) fn draw(rng: &mut SplitMix64, s: Shape, rows: u32) -> Self {
        let mut dt_bias = uniform(rng, s.qkv, -8.0, 0.0);
        dt_bias.chunks_mut(s.d as usize).for_each(|head| *head.last_mut().unwrap() = 100.0);
        let a_log = uniform(rng, s.h, -0.3, 0.3);
        let g_raw = bf16_vec(&uniform(rng, rows * s.qkv, -0.5, 0.5));
        let b_raw = bf16_vec(&uniform(rng, rows * s.h, -3.0, 3.0));
        Self { g_raw, dt_bias, a_log, b_raw }
    }

    /// `g_raw, dt_bias, a_log, b_raw`.
    pub(super) fn buffers(self, s: Shape) -> [CaseArg; 4] {
        [
            read("g_raw", self.g_raw),
            read("dt_bias", self.dt_bias),
            read("a_log", self.a_log),
            read_rows("b_raw", self.b_raw, s.h, s.stacked),
        ]
    }
}

/// `ldb, law, scale, lower_bound`: the last scalars of `chunk_prepare` and the recurrent kernels.
pub(super) fn gate_and_scale_scalars(s: Shape) -> [CaseArg; 4] {
    let law = s.geometry.gate_law;
    [
        CaseArg::u32("ldb", s.stacked),
        CaseArg::u32("law", law.code()),
        CaseArg::f32("scale", s.geometry.scale()),
        CaseArg::f32("lower_bound", law.lower_bound()),
    ]
}

/// The inputs of the chunked prefill, `[t_pad, ...]` with the padding poisoned.
pub(super) struct ChunkInputs {
    s: Shape,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    gate: GateInputs,
}

impl ChunkInputs {
    /// q and k L2-normalised per head and rounded to bf16 (as the conv and L2 kernels leave
    /// them), v the SiLU outputs of the conv, the forget gate's raw inputs.
    pub(super) fn draw(rng: &mut SplitMix64, s: Shape) -> Self {
        let padded = (s.t_pad * s.qkv) as usize;
        let widen = |x: Vec<bf16>| x.iter().map(|x| x.to_f32()).collect::<Vec<_>>();
        let k = poisoned(widen(unit_heads(rng, s.t * s.h, s.d)), padded);
        let v = poisoned(widen(silu_outputs(rng, s.t * s.qkv)), padded);
        let gate = GateInputs::draw(rng, s, s.t);
        let q = poisoned(widen(unit_heads(rng, s.t * s.h, s.d)), padded);
        Self { s, q, k, v, gate }
    }

    pub(super) fn prepare_args(self) -> Vec<CaseArg> {
        let s = self.s;
        let len = s.t_pad * s.qkv;
        let real = (s.t * s.qkv) as usize;
        // Prepare writes every position, the padding as if its inputs were zero.
        let out = |name| write::<f32>(name, len, Check::RelativeRms(1e-5));
        let mut args = vec![
            read_prefix("q", self.q, real),
            read_prefix("k", self.k, real),
            read_prefix("v", self.v, real),
        ];
        args.extend(self.gate.buffers(s));
        args.extend([
            out("u"),
            out("w"),
            write::<f32>("aqk", s.t_pad * s.h * s.geometry.chunk, Check::RelativeRms(1e-5)),
            out("qdec"),
            out("kdec"),
            write::<f32>("sdec", s.t_pad / s.geometry.chunk * s.qkv, Check::RelativeRms(1e-5)),
            CaseArg::u32("t", s.t),
            CaseArg::u32("h", s.h),
            CaseArg::u32("d", s.d),
            CaseArg::u32("c", s.geometry.chunk),
        ]);
        args.extend(gate_and_scale_scalars(s));
        args
    }
}

/// The scan's arguments: `qdec`, `kdec`, `sdec`, `u`, `w` and `aqk` from the reference prepare of
/// the chunk inputs (padding poisoned again, and the entries of `aqk` above the diagonal or past t,
/// which the scan must not read), a nonzero state.
pub(super) fn chunk_scan_args(seed: u64, s: Shape) -> Result<Vec<CaseArg>, CaseError> {
    let mut rng = stream(seed, "chunk");
    // Drawn to move the stream past the inputs, as the prepare case does, before the state.
    ChunkInputs::draw(&mut rng, s);
    // The prepare case draws the same inputs from the same stream.
    let prepare = KernelCase::new(Glm5NextKdaEntry::chunk_prepare, &s.geometry, s.t, seed)?;
    let gpu = crate::reference::backend();
    let failed = |error: &dyn fmt::Display| CaseError::Reference(error.to_string());
    let kernels = Glm5NextKdaKernels::resolve(&gpu).map_err(|error| failed(&error))?;
    let outputs = prepare.run(&gpu, &kernels).map_err(|error| failed(&error))?;
    let real = (s.t * s.qkv) as usize;
    let output = |name: &str| -> Result<Vec<f32>, CaseError> {
        let data = outputs.iter().find(|output| output.name == name).and_then(|output| output.data.as_f32());
        Ok(data.ok_or_else(|| failed(&format!("no f32 output `{name}`")))?.to_vec())
    };
    let padded = |name: &str| -> Result<Vec<f32>, CaseError> {
        let mut data = output(name)?;
        data[real..].fill(POISON);
        Ok(data)
    };
    let (qdec, kdec, u, w) = (padded("qdec")?, padded("kdec")?, padded("u")?, padded("w")?);
    let mut aqk = output("aqk")?;
    let c = s.geometry.chunk as usize;
    for (block, values) in aqk.chunks_mut(c * c).enumerate() {
        // Block (chunk, head) = (block / h, block % h); its rows from position chunk·c.
        let first = block / s.h as usize * c;
        for (i, row) in values.chunks_mut(c).enumerate() {
            let unread = if first + i < s.t as usize { i + 1 } else { 0 };
            row[unread..].fill(POISON);
        }
    }
    let len = s.t_pad * s.qkv;
    Ok(vec![
        read_prefix("qdec", qdec, real),
        read_prefix("kdec", kdec, real),
        read("sdec", output("sdec")?),
        read_prefix("u", u, real),
        read_prefix("w", w, real),
        read("aqk", aqk),
        update("state", state_values(&mut rng, s), Check::RelativeRms(1e-5)),
        // Rows ≥ t of the output are not written.
        write_prefix::<f32>("out", len, s.t * s.qkv, Check::RelativeRms(1e-5)),
        CaseArg::u32("t", s.t),
        CaseArg::u32("h", s.h),
        CaseArg::u32("d", s.d),
        CaseArg::u32("c", s.geometry.chunk),
    ])
}

/// The slots of a batched decode case: `b` rows over a pool of `b + 2` sequences, so that slots
/// no row names must come back unchanged. The rows name distinct slots in a seeded order; from
/// `b = 3` on, row 1 repeats row 0's slot and the last row names one past the pool, rows the
/// kernels must skip without writing anything.
pub(super) struct DecodeBatch {
    pub(super) b: u32,
    pub(super) capacity: u32,
    pub(super) slot: Vec<u32>,
}

impl DecodeBatch {
    pub(super) fn new(rng: &mut SplitMix64, b: u32) -> Self {
        let capacity = b + 2;
        let mut order: Vec<u32> = (0..capacity).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
        }
        let mut slot = order[..b as usize].to_vec();
        if b >= 3 {
            slot[1] = slot[0];
            slot[b as usize - 1] = capacity + 3;
        }
        Self { b, capacity, slot }
    }

    /// The rows that update a slot.
    pub(super) fn live_rows(&self) -> usize {
        if self.b >= 3 { self.b as usize - 2 } else { self.b as usize }
    }

    /// The pool `name` of `slot_len` values per slot: `values` drawn for every slot, checked by
    /// `check`, of which one launch moves the live rows' slots.
    pub(super) fn pool(&self, name: &'static str, values: Vec<f32>, check: Check) -> CaseArg {
        let slot_len = values.len() / self.capacity as usize;
        let mut pool = update(name, values, check);
        if let CaseArg::Buffer(buffer) = &mut pool {
            buffer.moved = self.live_rows() * slot_len;
        }
        pool
    }

    /// `const u32 slot[b]`.
    pub(super) fn slot_arg(&self) -> CaseArg {
        read("slot", HostData::U32(self.slot.clone()))
    }
}

/// `qkv, g_raw, dt_bias, a_log, b_raw, pool, slot, out, b, slots, h, d, ldb, law, scale,
/// lower_bound` of a batched recurrent step: unit q and k heads, v at SiLU scale.
pub(super) fn recurrent_args(rng: &mut SplitMix64, s: Shape, batch: &DecodeBatch) -> Vec<CaseArg> {
    let b = batch.b;
    let mut qkv = Vec::with_capacity((b * 3 * s.qkv) as usize);
    for _ in 0..b {
        qkv.extend(unit_heads(rng, 2 * s.h, s.d));
        qkv.extend(silu_outputs(rng, s.qkv));
    }
    let gate = GateInputs::draw(rng, s, b);
    let states = (0..batch.capacity).flat_map(|_| state_values(rng, s)).collect();
    let mut args = vec![read("qkv", qkv)];
    args.extend(gate.buffers(s));
    args.extend([
        batch.pool("pool", states, Check::RelativeRms(1e-5)),
        batch.slot_arg(),
        write::<f32>("out", b * s.qkv, Check::RelativeRms(1e-5)),
        CaseArg::u32("b", b),
        CaseArg::u32("slots", batch.capacity),
        CaseArg::u32("h", s.h),
        CaseArg::u32("d", s.d),
    ]);
    args.extend(gate_and_scale_scalars(s));
    args
}

/// The generator of one case's inputs: `seed` mixed with the FNV-1a hash of `key`, so that each
/// case's inputs stay the same when other cases change.
pub(super) fn stream(seed: u64, key: &str) -> SplitMix64 {
    let hash =
        key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    SplitMix64::new(seed ^ hash)
}

/// `n` values uniform in `[lo, hi)`.
pub(super) fn uniform(rng: &mut SplitMix64, n: u32, lo: f32, hi: f32) -> Vec<f32> {
    (0..n).map(|_| lo + (hi - lo) * rng.next_unit()).collect()
}

/// Unit-variance activations (a normed residual stream, the projections of one).
pub(super) fn activations(rng: &mut SplitMix64, n: u32) -> Vec<bf16> {
    bf16_vec(&uniform(rng, n, -1.7, 1.7))
}

/// A Linear weight `[out, inputs]` with variance `1/inputs`: unit-variance outputs.
pub(super) fn linear(rng: &mut SplitMix64, out: u32, inputs: u32) -> Vec<bf16> {
    let bound = (3.0 / inputs as f32).sqrt();
    bf16_vec(&uniform(rng, out * inputs, -bound, bound))
}

/// What the conv leaves: `silu` of unit-scale sums, in bf16.
pub(super) fn silu_outputs(rng: &mut SplitMix64, n: u32) -> Vec<bf16> {
    let silu = |x: f32| x / (1.0 + (-x).exp());
    bf16_vec(&uniform(rng, n, -3.0, 3.0).into_iter().map(silu).collect::<Vec<_>>())
}

/// `heads` vectors of `d`, each L2-normalised, in bf16 (what the q/k L2 norm leaves).
pub(super) fn unit_heads(rng: &mut SplitMix64, heads: u32, d: u32) -> Vec<bf16> {
    let mut values = uniform(rng, heads * d, -1.0, 1.0);
    for head in values.chunks_mut(d as usize) {
        let norm = head.iter().map(|x| x * x).sum::<f32>().sqrt();
        head.iter_mut().for_each(|x| *x /= norm);
    }
    bf16_vec(&values)
}

/// A recurrent state `[h, d, d]` of a sequence under way: nonzero, within ±0.5.
pub(super) fn state_values(rng: &mut SplitMix64, s: Shape) -> Vec<f32> {
    uniform(rng, s.h * s.d * s.d, -0.5, 0.5)
}

/// `values` followed by [`POISON`] up to `len`.
pub(super) fn poisoned(mut values: Vec<f32>, len: usize) -> Vec<f32> {
    values.resize(len, POISON);
    values
}
