//! The weights of one KDA layer: synthetic ones from a seeded generator, on the host, and their
//! copy on a backend.

use std::ops::Range;

use half::bf16;
use kda_runtime::{BackendError, DeviceBuffer, GpuBackend, GpuBackendExt};

use crate::geometry::{CONV_WIDTH, KdaGeometry};
use crate::ops::StridedRows;
use crate::rng::SplitMix64;

/// One layer's weights on the host (Linear layout `[out, in]`; bf16 but `dt_bias`, `a_log`).
#[derive(Clone, Debug)]
pub struct HostWeights {
    /// `[qkv, hidden]`.
    pub q_proj: Vec<bf16>,
    /// `[qkv, hidden]`.
    pub k_proj: Vec<bf16>,
    /// `[qkv, hidden]`.
    pub v_proj: Vec<bf16>,
    /// Depthwise conv taps `[3·qkv, W]`, tap 0 on the oldest input.
    pub conv: Vec<bf16>,
    /// Gate low-rank down projection `[D, hidden]`.
    pub f_a: Vec<bf16>,
    /// Gate low-rank up projection `[qkv, D]`.
    pub f_b: Vec<bf16>,
    /// Gate bias, one per channel, f32 `[qkv]`.
    pub dt_bias: Vec<f32>,
    /// Gate log-rate, one per head, f32 `[H]`.
    pub a_log: Vec<f32>,
    /// Beta projection `[H, hidden]`.
    pub b_proj: Vec<bf16>,
    /// Output-gate down projection `[D, hidden]`.
    pub g_a: Vec<bf16>,
    /// Output-gate up projection `[qkv, D]`.
    pub g_b: Vec<bf16>,
    /// Output norm weight `[D]`.
    pub o_norm: Vec<bf16>,
    /// Output projection `[hidden, qkv]`.
    pub o_proj: Vec<bf16>,
}

/// A weight whose length is not the one its shape has at the block's geometry.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("weight `{name}` {shape} must hold {expected} values at this geometry, it holds {found}")]
pub struct WeightsError {
    /// The weight.
    pub name: &'static str,
    /// Its shape.
    pub shape: &'static str,
    /// Its length at the geometry.
    pub expected: u64,
    /// Its length.
    pub found: usize,
}

/// One layer's weights on a backend: the fields of [`HostWeights`], but the six projections of
/// the block input stacked into one (see [`InputProjection`]), so that one product reads the block
/// input once for all of them.
#[derive(Debug)]
#[allow(missing_docs)] // Each field is documented on `HostWeights`.
pub struct DeviceWeights {
    /// `[3·qkv + 2·D + H, hidden]`: the rows of `q_proj`, `k_proj`, `v_proj`, `f_a`, `g_a`, then
    /// `b_proj`; [`InputProjection::columns`] gives each projection's rows.
    pub input_proj: DeviceBuffer,
    pub conv: DeviceBuffer,
    pub f_b: DeviceBuffer,
    pub dt_bias: DeviceBuffer,
    pub a_log: DeviceBuffer,
    pub g_b: DeviceBuffer,
    pub o_norm: DeviceBuffer,
    pub o_proj: DeviceBuffer,
}

impl DeviceWeights {
    /// Every weight, in field order: what a recorded step binds as read-only.
    pub fn buffers(&self) -> [&DeviceBuffer; 8] {
        [
            &self.input_proj,
            &self.conv,
            &self.f_b,
            &self.dt_bias,
            &self.a_log,
            &self.g_b,
            &self.o_norm,
            &self.o_proj,
        ]
    }
}

/// The projections of the block input, in the order their weights are stacked in
/// [`DeviceWeights::input_proj`]: one product over the stacked weight writes rows of
/// [`Self::stacked_width`] outputs, each projection's in its [`Self::columns`]. Its consumers read
/// those columns in place, with the stacked row as their row stride.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputProjection {
    /// q | k | v per row (`3·qkv`), the conv's input.
    Qkv,
    /// The gate's low-rank down projection (`D`).
    GateDown,
    /// The output gate's down projection (`D`).
    OutGateDown,
    /// The beta projection, before the sigmoid (`H`).
    Beta,
}

impl InputProjection {
    /// All of them, in stacking order.
    pub const ALL: [Self; 4] = [Self::Qkv, Self::GateDown, Self::OutGateDown, Self::Beta];

    /// Its outputs per row of the block input.
    pub fn width(self, geometry: &KdaGeometry) -> u32 {
        match self {
            Self::Qkv => 3 * geometry.qkv(),
            Self::GateDown | Self::OutGateDown => geometry.head_dim,
            Self::Beta => geometry.heads,
        }
    }

    /// The outputs of all of them per row: the stacked weight's rows.
    pub fn stacked_width(geometry: &KdaGeometry) -> u32 {
        Self::ALL.iter().map(|p| p.width(geometry)).sum()
    }

    /// Its outputs within a stacked row (after those of the projections before it), which are
    /// also its rows of the stacked weight.
    pub fn columns(self, geometry: &KdaGeometry) -> Range<u32> {
        let before: u32 = Self::ALL.iter().take_while(|&&p| p != self).map(|p| p.width(geometry)).sum();
        before..before + self.width(geometry)
    }

    /// Its outputs in `stacked`, rows of the stacked products: `[rows, width]` in place, its
    /// columns of each row, a stacked row apart.
    pub fn outputs<'a>(self, geometry: &KdaGeometry, stacked: &'a DeviceBuffer) -> StridedRows<'a> {
        let first = self.columns(geometry).start as usize;
        StridedRows { view: stacked.slice(first..stacked.len()), ld: Self::stacked_width(geometry) }
    }
}

impl HostWeights {
    /// Weights drawn from `seed` at the scales of a trained layer: Linear weights uniform with
    /// variance `1/in` (unit-variance outputs), conv taps within ±0.5, gate biases in `[-4, -1]`
    /// and log-rates within ±0.5, norm weights near 1.
    pub fn synthetic(geometry: &KdaGeometry, seed: u64) -> Self {
        let mut rng = SplitMix64::new(seed);
        let (hidden, heads, d, qkv) = (
            geometry.hidden as usize,
            geometry.heads as usize,
            geometry.head_dim as usize,
            geometry.qkv() as usize,
        );
        let mut linear = |out: usize, inputs: usize| bf16_vec(&rng_linear(&mut rng, out, inputs));
        let q_proj = linear(qkv, hidden);
        let k_proj = linear(qkv, hidden);
        let v_proj = linear(qkv, hidden);
        let f_a = linear(d, hidden);
        let f_b = linear(qkv, d);
        let b_proj = linear(heads, hidden);
        let g_a = linear(d, hidden);
        let g_b = linear(qkv, d);
        let o_proj = linear(hidden, qkv);
        Self {
            q_proj,
            k_proj,
            v_proj,
            conv: bf16_vec(&rng.uniform_vec(3 * qkv * CONV_WIDTH as usize, 0.5)),
            f_a,
            f_b,
            // σ(-4..-1) · lower_bound: log-decays from ≈ -0.1 to -1.3, short and long memories.
            dt_bias: rng.uniform_vec(qkv, 1.5).iter().map(|x| x - 2.5).collect(),
            a_log: rng.uniform_vec(heads, 0.5),
            b_proj,
            g_a,
            g_b,
            o_norm: bf16_vec(&rng.uniform_vec(d, 0.1).iter().map(|x| 1.0 + x).collect::<Vec<_>>()),
            o_proj,
        }
    }

    /// Checks that every weight has the shape `geometry` gives it.
    pub fn check(&self, geometry: &KdaGeometry) -> Result<(), WeightsError> {
        let (hidden, heads, d, qkv) = (
            u64::from(geometry.hidden),
            u64::from(geometry.heads),
            u64::from(geometry.head_dim),
            u64::from(geometry.heads) * u64::from(geometry.head_dim),
        );
        let expected: [(&'static str, usize, u64, &'static str); 13] = [
            ("q_proj", self.q_proj.len(), qkv * hidden, "[qkv, hidden]"),
            ("k_proj", self.k_proj.len(), qkv * hidden, "[qkv, hidden]"),
            ("v_proj", self.v_proj.len(), qkv * hidden, "[qkv, hidden]"),
            ("conv", self.conv.len(), 3 * qkv * u64::from(CONV_WIDTH), "[3·qkv, W]"),
            ("f_a", self.f_a.len(), d * hidden, "[D, hidden]"),
            ("f_b", self.f_b.len(), qkv * d, "[qkv, D]"),
            ("dt_bias", self.dt_bias.len(), qkv, "[qkv]"),
            ("a_log", self.a_log.len(), heads, "[H]"),
            ("b_proj", self.b_proj.len(), heads * hidden, "[H, hidden]"),
            ("g_a", self.g_a.len(), d * hidden, "[D, hidden]"),
            ("g_b", self.g_b.len(), qkv * d, "[qkv, D]"),
            ("o_norm", self.o_norm.len(), d, "[D]"),
            ("o_proj", self.o_proj.len(), hidden * qkv, "[hidden, qkv]"),
        ];
        match expected.into_iter().find(|&(_, found, expected, _)| found as u64 != expected) {
            Some((name, found, expected, shape)) => Err(WeightsError { name, shape, expected, found }),
            None => Ok(()),
        }
    }

    /// The weights of `projection`, `[width, hidden]` together.
    fn projection(&self, projection: InputProjection) -> Vec<&[bf16]> {
        match projection {
            InputProjection::Qkv => vec![&self.q_proj, &self.k_proj, &self.v_proj],
            InputProjection::GateDown => vec![&self.f_a],
            InputProjection::OutGateDown => vec![&self.g_a],
            InputProjection::Beta => vec![&self.b_proj],
        }
    }

    /// A copy of these weights on `gpu`, the projections of the block input stacked.
    pub fn upload(&self, gpu: &dyn GpuBackend) -> Result<DeviceWeights, BackendError> {
        let stacked: Vec<bf16> =
            InputProjection::ALL.iter().flat_map(|&p| self.projection(p).concat()).collect();
        Ok(DeviceWeights {
            input_proj: gpu.upload(&stacked)?,
            conv: gpu.upload(&self.conv)?,
            f_b: gpu.upload(&self.f_b)?,
            dt_bias: gpu.upload(&self.dt_bias)?,
            a_log: gpu.upload(&self.a_log)?,
            g_b: gpu.upload(&self.g_b)?,
            o_norm: gpu.upload(&self.o_norm)?,
            o_proj: gpu.upload(&self.o_proj)?,
        })
    }
}

/// A Linear weight `[out, inputs]`, uniform with variance `1/inputs`.
fn rng_linear(rng: &mut SplitMix64, out: usize, inputs: usize) -> Vec<f32> {
    rng.uniform_vec(out * inputs, (3.0 / inputs as f32).sqrt())
}

/// `values` rounded to bf16.
pub fn bf16_vec(values: &[f32]) -> Vec<bf16> {
    values.iter().copied().map(bf16::from_f32).collect()
}

/// `t` synthetic block inputs `[t, hidden]` from `seed`: unit-scale activations, as a normed
/// residual stream is.
pub fn synthetic_hidden(geometry: &KdaGeometry, t: usize, seed: u64) -> Vec<bf16> {
    bf16_vec(&SplitMix64::new(seed).uniform_vec(t * geometry.hidden as usize, 1.7))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_projection_finds_its_own_weights_in_the_stacked_one() {
        // tiny: hidden 64, 2 heads of 32, so q | k | v 192 rows, f_a and g_a 32, b_proj 2.
        let g = KdaGeometry::tiny();
        assert_eq!(InputProjection::stacked_width(&g), 192 + 32 + 32 + 2);
        let host = HostWeights::synthetic(&g, 3);
        let gpu = crate::reference::backend();
        let stacked: Vec<bf16> = gpu.download(&host.upload(&gpu).unwrap().input_proj).unwrap();
        assert_eq!(stacked.len(), 258 * 64);
        let hidden = g.hidden as usize;
        let rows = |p: InputProjection| {
            let columns = p.columns(&g);
            &stacked[columns.start as usize * hidden..columns.end as usize * hidden]
        };
        assert_eq!(rows(InputProjection::Qkv), [&host.q_proj[..], &host.k_proj, &host.v_proj].concat());
        assert_eq!(rows(InputProjection::GateDown), host.f_a);
        assert_eq!(rows(InputProjection::OutGateDown), host.g_a);
        assert_eq!(rows(InputProjection::Beta), host.b_proj);
        assert_eq!(InputProjection::Qkv.columns(&g), 0..192);
        assert_eq!(InputProjection::OutGateDown.columns(&g), 224..256);
        assert_eq!(InputProjection::Beta.columns(&g), 256..258);
    }
}
