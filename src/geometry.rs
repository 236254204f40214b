//! The shape of one KDA layer, its presets, and the checks that keep kernels inside what they
//! accept.

use std::fmt;

/// The width of the short causal convolution (taps per channel).
pub const CONV_WIDTH: u32 = 4;

/// Head dimensions the kernels accept.
pub const HEAD_DIMS: [u32; 3] = [32, 64, 128];

/// Chunk sizes the chunked prefill accepts.
pub const CHUNK_SIZES: [u32; 2] = [32, 64];

/// How the forget gate turns the f projection into a log-decay (`docs/kernels.md`, `gate`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum GateLaw {
    /// `lower_bound · σ(e^{a_log} · (g + dt_bias))`: GLM-5.3-Flash, `lower_bound = -5`.
    Bounded {
        /// The most negative log-decay, in `[-5, 0)` for GLM-5.3-Flash.
        lower_bound: f32,
    },
    /// `-e^{a_log} · softplus(g + dt_bias)`: Kimi-Linear-48B.
    Softplus,
}

impl GateLaw {
    /// The `law` argument of `chunk_prepare` and the recurrent kernels.
    pub fn code(self) -> u32 {
        match self {
            GateLaw::Bounded { .. } => 0,
            GateLaw::Softplus => 1,
        }
    }

    /// The `lower_bound` argument of `chunk_prepare` and the recurrent kernels (unused by the
    /// softplus law).
    pub fn lower_bound(self) -> f32 {
        match self {
            GateLaw::Bounded { lower_bound } => lower_bound,
            GateLaw::Softplus => 0.0,
        }
    }
}

/// The geometry of one KDA layer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KdaGeometry {
    /// Model width.
    pub hidden: u32,
    /// KDA heads (q, k and v share them).
    pub heads: u32,
    /// Head dimension (K = V = D).
    pub head_dim: u32,
    /// Tokens per chunk of the chunked prefill.
    pub chunk: u32,
    /// The forget-gate law.
    pub gate_law: GateLaw,
    /// The epsilon of the q/k L2 norm, inside the square root.
    pub l2_eps: f32,
    /// The epsilon of the output RMS norm.
    pub norm_eps: f32,
}

/// A geometry the kernels cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GeometryError {
    /// The head dimension is not one the kernels accept.
    #[error("head_dim {0} is not supported: the kernels accept 32, 64 or 128")]
    HeadDim(u32),
    /// The chunk size is not one the chunked prefill accepts.
    #[error("chunk size {0} is not supported: use 32 or 64")]
    Chunk(u32),
    /// A dimension is zero.
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    /// The bounded gate's lower bound is not negative and finite.
    #[error("the bounded gate's lower_bound must be finite and negative, got {0}")]
    LowerBound(f32),
    /// Sizes overflow the kernels' 32-bit indices.
    #[error("{what} = {value} overflows the kernels' 32-bit sizes")]
    Overflow {
        /// Which size.
        what: &'static str,
        /// Its value.
        value: u64,
    },
    /// More tokens than one call takes at this geometry.
    #[error(
        "{tokens} tokens in one call: at this geometry a call takes at most {max} (the kernels' sizes are 32-bit)"
    )]
    TooManyTokens {
        /// The tokens asked for.
        tokens: usize,
        /// [`KdaGeometry::max_tokens`].
        max: u32,
    },
    /// No preset of that name.
    #[error("no preset named `{0}`: choose one of tiny, mid, glm5-flash")]
    UnknownPreset(String),
}

impl KdaGeometry {
    /// The preset names, in size order.
    pub const PRESETS: [&'static str; 3] = ["tiny", "mid", "glm5-flash"];

    /// For tests: hidden 64, 2 heads of 32, chunk 32.
    pub fn tiny() -> Self {
        Self::glm5_like(64, 2, 32, 32)
    }

    /// For benchmarks on a CPU: hidden 1024, 8 heads of 64, chunk 32.
    pub fn mid() -> Self {
        Self::glm5_like(1024, 8, 64, 32)
    }

    /// GLM-5.3-Flash: hidden 4096, 64 heads of 128, chunk 64.
    pub fn glm5_flash() -> Self {
        Self::glm5_like(4096, 64, 128, 64)
    }

    fn glm5_like(hidden: u32, heads: u32, head_dim: u32, chunk: u32) -> Self {
        Self {
            hidden,
            heads,
            head_dim,
            chunk,
            gate_law: GateLaw::Bounded { lower_bound: -5.0 },
            l2_eps: 1e-6,
            norm_eps: 1e-5,
        }
    }

    /// The preset called `name` (see [`Self::PRESETS`]).
    pub fn preset(name: &str) -> Result<Self, GeometryError> {
        match name {
            "tiny" => Ok(Self::tiny()),
            "mid" => Ok(Self::mid()),
            "glm5-flash" => Ok(Self::glm5_flash()),
            other => Err(GeometryError::UnknownPreset(other.to_owned())),
        }
    }

    /// Checks the geometry against what the kernels accept.
    pub fn validate(&self) -> Result<(), GeometryError> {
        for (what, value) in [("hidden", self.hidden), ("heads", self.heads)] {
            if value == 0 {
                return Err(GeometryError::Zero(what));
            }
        }
        if !HEAD_DIMS.contains(&self.head_dim) {
            return Err(GeometryError::HeadDim(self.head_dim));
        }
        if !CHUNK_SIZES.contains(&self.chunk) {
            return Err(GeometryError::Chunk(self.chunk));
        }
        if let GateLaw::Bounded { lower_bound } = self.gate_law
            && !(lower_bound.is_finite() && lower_bound < 0.0)
        {
            return Err(GeometryError::LowerBound(lower_bound));
        }
        let state = u64::from(self.heads) * u64::from(self.head_dim) * u64::from(self.head_dim);
        let conv = 3 * self.qkv_u64() * u64::from(CONV_WIDTH);
        for (what, value) in
            [("3·qkv·W", conv), ("H·D·D", state), ("hidden·qkv", u64::from(self.hidden) * self.qkv_u64())]
        {
            if value > u64::from(u32::MAX) {
                return Err(GeometryError::Overflow { what, value });
            }
        }
        if self.max_tokens() == 0 {
            let value = self.token_width() * u64::from(self.chunk);
            return Err(GeometryError::Overflow { what: "one chunk of tokens", value });
        }
        Ok(())
    }

    /// The widest row a token has anywhere in the block: the conv's 3·qkv channels or the model
    /// width.
    fn token_width(&self) -> u64 {
        (3 * self.qkv_u64()).max(u64::from(self.hidden))
    }

    /// The most tokens one prefill takes: every buffer of the call, padded to whole chunks, must
    /// stay within the kernels' 32-bit sizes. At `glm5-flash` that is 174,720 tokens.
    pub fn max_tokens(&self) -> u32 {
        let chunk = u64::from(self.chunk.max(1));
        let rows = u64::from(u32::MAX) / self.token_width().max(1);
        // Rounded down to whole chunks, so the padded count fits too.
        u32::try_from(rows / chunk * chunk).unwrap_or(u32::MAX)
    }

    /// `tokens` as a kernel size, if one call takes that many (see [`Self::max_tokens`]).
    pub fn check_tokens(&self, tokens: usize) -> Result<u32, GeometryError> {
        let max = self.max_tokens();
        u32::try_from(tokens).ok().filter(|&t| t <= max).ok_or(GeometryError::TooManyTokens { tokens, max })
    }

    fn qkv_u64(&self) -> u64 {
        u64::from(self.heads) * u64::from(self.head_dim)
    }

    /// `H·D`: the width of each of q, k and v.
    pub fn qkv(&self) -> u32 {
        self.heads * self.head_dim
    }

    /// Channels of the convolution: q, k and v.
    pub fn conv_dim(&self) -> u32 {
        3 * self.qkv()
    }

    /// `1/√D`, applied to q.
    pub fn scale(&self) -> f32 {
        1.0 / (self.head_dim as f32).sqrt()
    }

    /// `t` rounded up to whole chunks; an error past [`Self::max_tokens`].
    pub fn padded(&self, t: u32) -> Result<u32, GeometryError> {
        let t = self.check_tokens(t as usize)?;
        // t ≤ max_tokens, a whole number of chunks below u32::MAX, so this cannot overflow.
        Ok(t.div_ceil(self.chunk) * self.chunk)
    }
}

impl fmt::Display for KdaGeometry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "hidden {}, {} heads × {}, chunk {}, {} gate",
            self.hidden,
            self.heads,
            self.head_dim,
            self.chunk,
            match self.gate_law {
                GateLaw::Bounded { .. } => "bounded",
                GateLaw::Softplus => "softplus",
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid_and_glm5_flash_has_the_published_shape() {
        for name in KdaGeometry::PRESETS {
            KdaGeometry::preset(name).unwrap().validate().unwrap();
        }
        let glm = KdaGeometry::glm5_flash();
        assert_eq!((glm.hidden, glm.heads, glm.head_dim, glm.chunk), (4096, 64, 128, 64));
        assert_eq!(glm.qkv(), 8192);
        assert_eq!(glm.conv_dim(), 24576);
    }

    #[test]
    fn geometries_the_kernels_cannot_run_are_refused() {
        let tiny = KdaGeometry::tiny();
        assert_eq!(KdaGeometry { head_dim: 48, ..tiny }.validate(), Err(GeometryError::HeadDim(48)));
        assert_eq!(KdaGeometry { chunk: 16, ..tiny }.validate(), Err(GeometryError::Chunk(16)));
        assert_eq!(KdaGeometry { heads: 0, ..tiny }.validate(), Err(GeometryError::Zero("heads")));
        let positive = KdaGeometry { gate_law: GateLaw::Bounded { lower_bound: 1.0 }, ..tiny };
        assert_eq!(positive.validate(), Err(GeometryError::LowerBound(1.0)));
        let huge = KdaGeometry { hidden: 1 << 20, heads: 1 << 12, head_dim: 128, ..tiny };
        assert!(matches!(huge.validate(), Err(GeometryError::Overflow { .. })));
        assert!(matches!(KdaGeometry::preset("huge"), Err(GeometryError::UnknownPreset(_))));
    }

    #[test]
    fn padding_rounds_up_to_whole_chunks() {
        let tiny = KdaGeometry::tiny();
        assert_eq!(tiny.padded(1), Ok(32));
        assert_eq!(tiny.padded(32), Ok(32));
        assert_eq!(tiny.padded(45), Ok(64));
    }

    #[test]
    fn a_call_takes_only_the_tokens_whose_sizes_fit_32_bits() {
        let glm = KdaGeometry::glm5_flash();
        // 3·qkv = 24,576 channels: 174,762 tokens fit in u32, rounded down to chunks of 64.
        assert_eq!(glm.max_tokens(), 174_720);
        assert_eq!(glm.check_tokens(174_720), Ok(174_720));
        for tokens in [174_721, 174_763, usize::MAX] {
            assert_eq!(glm.check_tokens(tokens), Err(GeometryError::TooManyTokens { tokens, max: 174_720 }));
        }
        assert!(glm.padded(174_763).is_err());
        let max = glm.max_tokens() as u64;
        assert!(glm.padded(glm.max_tokens()).unwrap() as u64 * 24_576 <= u64::from(u32::MAX));
        assert!((max + 64) * 24_576 > u64::from(u32::MAX), "the bound is not needlessly low");
    }
}
