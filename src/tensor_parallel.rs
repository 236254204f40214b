//! The KDA layer split across ranks by heads, the way engines shard linear attention (tensor
//! parallelism, `docs/tensor-parallel.md`): each rank runs an ordinary [`Glm5NextKdaBlock`] over
//! `H / ranks` of the heads, and the ranks' outputs summed are the layer's output.
//!
//! Nothing in the layer mixes heads before the output projection: the q/k L2 norm and the output
//! norm are per head, the forget gate, beta and the recurrence per head or per channel. So the
//! weights that produce a head's channels are split by rows (column-parallel: q/k/v_proj, the
//! conv's taps, f_b, g_b, dt_bias, a_log, b_proj), the recurrent state and the conv window stay on
//! the rank of their heads, and `o_proj` is split by columns (row-parallel): each rank's product
//! is a partial sum of every output, and the all-reduce of the partials is the output. The
//! low-rank down projections `f_a` and `g_a` read the whole block input and feed every head, and
//! `o_norm` is one `[D]` weight every head applies, so those three are replicated. The layer has
//! no bias and no residual add, so no rank adds anything the others do not.
//!
//! ```
//! use kda::block::Glm5NextKdaBlock;
//! use kda::geometry::KdaGeometry;
//! use kda::tensor_parallel::HeadShard;
//! use kda::weights::{HostWeights, synthetic_hidden};
//! use kda_runtime::{GpuBackendExt, bf16};
//!
//! let layer = KdaGeometry::tiny(); // 2 heads: 1 a rank
//! let weights = HostWeights::synthetic(&layer, 1);
//! let tokens = synthetic_hidden(&layer, 3, 2);
//! let gpu = kda::reference::backend(); // in an engine, each rank's own device
//! let mut output = vec![0.0f32; tokens.len()];
//! for shard in HeadShard::all(&layer, 2)? {
//!     let block = Glm5NextKdaBlock::new(&gpu, shard.geometry(), &shard.weights(&weights)?)?;
//!     let mut state = block.new_state()?; // this rank's heads' state
//!     let partial = block.prefill(&mut state, &gpu.upload(&tokens)?)?;
//!     // The all-reduce (an engine's NCCL sum; here on the host).
//!     for (sum, x) in output.iter_mut().zip(gpu.download::<bf16>(&partial)?) {
//!         *sum += x.to_f32();
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`Glm5NextKdaBlock`]: crate::block::Glm5NextKdaBlock

use std::ops::Range;

use crate::geometry::{CONV_WIDTH, GeometryError, KdaGeometry};
use crate::weights::{HostWeights, WeightsError};

/// Why a layer cannot be split as asked.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ShardError {
    /// A split across no rank.
    #[error("a layer is split across at least 1 rank, not 0")]
    NoRanks,
    /// A rank past the last.
    #[error("rank {rank} is outside the {ranks} ranks (0..{ranks})")]
    Rank {
        /// The rank asked for.
        rank: u32,
        /// The ranks of the split.
        ranks: u32,
    },
    /// The heads do not split evenly.
    #[error("{heads} heads do not split evenly across {ranks} ranks: the ranks must divide the heads")]
    Heads {
        /// The layer's heads.
        heads: u32,
        /// The ranks of the split.
        ranks: u32,
    },
    /// The layer's or the shard's geometry is not one the kernels run.
    #[error("invalid geometry: {0}")]
    Geometry(#[from] GeometryError),
    /// The weights to split do not have the layer's shapes.
    #[error(transparent)]
    Weights(#[from] WeightsError),
}

/// One rank's share of a KDA layer split by heads across `ranks` ranks: rank `r` holds heads
/// `r·H/ranks .. (r+1)·H/ranks`, their channels of q, k and v, their recurrent states and their
/// columns of `o_proj`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeadShard {
    /// The whole layer's geometry.
    layer: KdaGeometry,
    rank: u32,
    ranks: u32,
}

impl HeadShard {
    /// Rank `rank` of `layer` split across `ranks` ranks: an `Err` where the layer's geometry is
    /// not one the kernels run, `rank` is not below `ranks`, or `ranks` does not divide the heads.
    pub fn new(layer: &KdaGeometry, rank: u32, ranks: u32) -> Result<Self, ShardError> {
        layer.validate()?;
        if ranks == 0 {
            return Err(ShardError::NoRanks);
        }
        if rank >= ranks {
            return Err(ShardError::Rank { rank, ranks });
        }
        if !layer.heads.is_multiple_of(ranks) {
            return Err(ShardError::Heads { heads: layer.heads, ranks });
        }
        let shard = Self { layer: *layer, rank, ranks };
        // Fewer heads only shrink every size the layer's own check bounds, but the shard is a
        // geometry of its own that the block will check: refuse it here, where the split is named.
        shard.geometry().validate()?;
        Ok(shard)
    }

    /// Every rank of `layer` split across `ranks` ranks, in rank order.
    pub fn all(layer: &KdaGeometry, ranks: u32) -> Result<Vec<Self>, ShardError> {
        (0..ranks.max(1)).map(|rank| Self::new(layer, rank, ranks)).collect()
    }

    /// This shard's rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// The ranks of the split.
    pub fn ranks(&self) -> u32 {
        self.ranks
    }

    /// The whole layer's geometry.
    pub fn layer(&self) -> &KdaGeometry {
        &self.layer
    }

    /// The geometry of the block this rank runs: its `H / ranks` heads, the layer's head
    /// dimension, width, chunk, gate law and epsilons.
    pub fn geometry(&self) -> KdaGeometry {
        KdaGeometry { heads: self.layer.heads / self.ranks, ..self.layer }
    }

    /// The layer's heads this rank holds.
    pub fn heads(&self) -> Range<u32> {
        let per_rank = self.layer.heads / self.ranks;
        self.rank * per_rank..(self.rank + 1) * per_rank
    }

    /// [`Self::heads`] as indices of the per-head weights' rows.
    fn head_indices(&self) -> Range<usize> {
        let heads = self.heads();
        heads.start as usize..heads.end as usize
    }

    /// This rank's channels of each of q, k and v (each `qkv` wide): its heads' `D` channels.
    pub fn channels(&self) -> Range<usize> {
        let (heads, d) = (self.head_indices(), self.layer.head_dim as usize);
        heads.start * d..heads.end * d
    }

    /// This rank's channels of the conv's `3·qkv` (q, then k, then v): its channels of each part.
    pub fn conv_channels(&self) -> [Range<usize>; 3] {
        let (channels, qkv) = (self.channels(), self.layer.qkv() as usize);
        [0, 1, 2].map(|part| part * qkv + channels.start..part * qkv + channels.end)
    }

    /// This rank's weights of the layer's `weights`: its rows of the column-parallel ones, its
    /// columns of `o_proj`, and the replicated `f_a`, `g_a` and `o_norm` whole. An `Err` where
    /// `weights` do not have the layer's shapes.
    pub fn weights(&self, weights: &HostWeights) -> Result<HostWeights, ShardError> {
        weights.check(&self.layer)?;
        let layer = &self.layer;
        let (hidden, d) = (layer.hidden as usize, layer.head_dim as usize);
        let (channels, heads) = ([self.channels()], [self.head_indices()]);
        Ok(HostWeights {
            q_proj: rows(&weights.q_proj, hidden, &channels),
            k_proj: rows(&weights.k_proj, hidden, &channels),
            v_proj: rows(&weights.v_proj, hidden, &channels),
            conv: rows(&weights.conv, CONV_WIDTH as usize, &self.conv_channels()),
            f_a: weights.f_a.clone(),
            f_b: rows(&weights.f_b, d, &channels),
            dt_bias: rows(&weights.dt_bias, 1, &channels),
            a_log: rows(&weights.a_log, 1, &heads),
            b_proj: rows(&weights.b_proj, hidden, &heads),
            g_a: weights.g_a.clone(),
            g_b: rows(&weights.g_b, d, &channels),
            o_norm: weights.o_norm.clone(),
            o_proj: columns(&weights.o_proj, layer.qkv() as usize, self.channels()),
        })
    }
}

/// The rows `ranges` of `matrix` (rows of `width` values), in order, one after the other.
fn rows<T: Copy>(matrix: &[T], width: usize, ranges: &[Range<usize>]) -> Vec<T> {
    ranges.iter().flat_map(|range| &matrix[range.start * width..range.end * width]).copied().collect()
}

/// The columns `range` of every row of `matrix` (rows of `width` values).
fn columns<T: Copy>(matrix: &[T], width: usize, range: Range<usize>) -> Vec<T> {
    matrix.chunks_exact(width).flat_map(|row| &row[range.clone()]).copied().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 4 heads of 32 over hidden 64.
    fn four_heads() -> KdaGeometry {
        KdaGeometry { heads: 4, ..KdaGeometry::tiny() }
    }

    #[test]
    fn each_rank_takes_its_heads_channels_and_o_proj_columns() {
        let layer = four_heads();
        let weights = HostWeights::synthetic(&layer, 11);
        // Rank 1 of 2: heads 2 and 3, channels 64..128 of each 128-wide part.
        let shard = HeadShard::new(&layer, 1, 2).unwrap();
        assert_eq!(shard.geometry(), KdaGeometry { heads: 2, ..layer });
        assert_eq!(shard.heads(), 2..4);
        assert_eq!(shard.conv_channels(), [64..128, 192..256, 320..384]);
        let part = shard.weights(&weights).unwrap();
        part.check(&shard.geometry()).unwrap();
        assert_eq!(part.q_proj, weights.q_proj[64 * 64..128 * 64]);
        assert_eq!(part.v_proj, weights.v_proj[64 * 64..128 * 64]);
        let conv_rows = |first: usize| &weights.conv[first * 4..(first + 64) * 4];
        assert_eq!(part.conv, [conv_rows(64), conv_rows(192), conv_rows(320)].concat());
        assert_eq!(part.f_b, weights.f_b[64 * 32..128 * 32]);
        assert_eq!(part.dt_bias, weights.dt_bias[64..128]);
        assert_eq!(part.a_log, weights.a_log[2..4]);
        assert_eq!(part.b_proj, weights.b_proj[2 * 64..4 * 64]);
        assert_eq!((&part.f_a, &part.g_a, &part.o_norm), (&weights.f_a, &weights.g_a, &weights.o_norm));
        // o_proj [64, 256]: each output row's columns 64..128.
        assert_eq!(part.o_proj.len(), 64 * 64);
        for (row, shard_row) in part.o_proj.chunks_exact(64).enumerate() {
            assert_eq!(shard_row, &weights.o_proj[row * 128 + 64..row * 128 + 128]);
        }
    }

    #[test]
    fn one_rank_holds_the_whole_layer() {
        let layer = four_heads();
        let weights = HostWeights::synthetic(&layer, 5);
        let whole = HeadShard::new(&layer, 0, 1).unwrap().weights(&weights).unwrap();
        assert_eq!((whole.q_proj, whole.conv, whole.o_proj), (weights.q_proj, weights.conv, weights.o_proj));
    }

    #[test]
    fn splits_that_do_not_exist_are_refused() {
        let layer = four_heads();
        assert_eq!(HeadShard::new(&layer, 0, 0), Err(ShardError::NoRanks));
        assert_eq!(HeadShard::new(&layer, 2, 2), Err(ShardError::Rank { rank: 2, ranks: 2 }));
        assert_eq!(HeadShard::new(&layer, 0, 3), Err(ShardError::Heads { heads: 4, ranks: 3 }));
        assert_eq!(HeadShard::new(&layer, 0, 8), Err(ShardError::Heads { heads: 4, ranks: 8 }));
        assert_eq!(HeadShard::all(&layer, 0), Err(ShardError::NoRanks));
        let odd_dim = KdaGeometry { head_dim: 48, ..layer };
        assert_eq!(HeadShard::new(&odd_dim, 0, 2), Err(ShardError::Geometry(GeometryError::HeadDim(48))));
        let tiny_weights = HostWeights::synthetic(&KdaGeometry::tiny(), 1);
        let shard = HeadShard::new(&layer, 0, 2).unwrap();
        assert!(matches!(
            shard.weights(&tiny_weights),
            Err(ShardError::Weights(WeightsError { name: "q_proj", .. }))
        ));
    }
}
