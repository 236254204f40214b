//! The FLOPs of each kernel's launch, derived from its math.

use kda::kernels::Glm5NextKdaEntry;

use super::{LaunchModel, RooflineError};

/// The FLOPs of one launch, from its kernel and scalars; `docs/kernels.md` §2 has each kernel's
/// math, and each count below follows it under the conventions of the [roofline](super) module's docs.
///
/// - **`gemm`, `gemm_splitk`, `gemv_batchm`**: `2·m·n·k`; **`gemv`**: `2·n·k` (m = 1). One
///   multiply and one add per term of each of the m·n sums of k terms (split or not).
/// - **`gemm_reduce`**: `(splits − 1)·m·n`: the partial sums of each output added.
/// - **`conv_decode`**: `b·(dim·(2·width + 4) + 3·qk_channels + 2·qk_channels/head_dim)`. Per
///   channel: the `width` taps' products and sums (2·width), then SiLU `a·σ(a)` with
///   `σ(a) = 1/(1 + e^{−a})` (exp, add, divide, multiply: 4). Per q/k channel the L2 norm: square
///   and sum (2), divide by the root (1); per q/k head: `+ eps` and `sqrt` (2). The window shift
///   moves data only.
/// - **`conv_prefill`**: the same per token, over `dim = 3·qkv` channels of which
///   `qk_channels = 2·qkv` are normalised, with `t` in place of `b`; the split into q, k and v
///   moves data only.
/// - **The forget gate and beta**, which `chunk_prepare` and the recurrent kernels take from the
///   raw projections: per (token, head) `G·d + 3`, with `G` = 6 under law 0 and 4 under law 1.
///   Per channel `x = g + dt_bias` (1); law 0 `lower_bound·σ(e·x)`: multiply, σ (exp, add,
///   divide), multiply (5); law 1 `−e·softplus(x)` = `−e·log1p(e^x)`: exp, log1p, multiply (3).
///   Beta: σ per (token, head): exp, add, divide (3). `e = exp(a_log)` once per head of a chunk
///   or a batch row (1).
/// - **`o_norm`**: `rows·(8·d + 4)`. Per value: square and sum (2), `x·r`, `·w` (2), σ of the
///   gate (3), the gating product (1); per row: `/d`, `+ eps`, `sqrt`, the reciprocal (4).
/// - **`recurrent`, `recurrent_regs`**: `b·h·(7·d² + (4 + G)·d + 4)`. Per (row, head): the gate
///   and beta (`G·d + 4`, above), `α = exp(g)` and `q·scale` (2·d); per state column v (d of
///   them): pass 1 over k `s = S·α` and `kv += s·k` (3·d), `δ = β·(v − kv)` (2), pass 2 over k
///   `s += k·δ` and `o += s·q` (4·d).
/// - **`chunk_prepare`**: per (chunk, head), `cdiv(t, c)·h` of them, with `P = c(c−1)/2` pairs
///   j < i, `R = c(c+1)/2` pairs j ≤ i and `Q = c(c−1)(c−2)/6` triples j < m < i:
///   the gates and betas of its c positions (`c·(G·d + 3) + 1`, above); their in-chunk prefix
///   sums (c·d);
///   `A[i][j]` for j < i: per channel `k_i·k_j`, `gc_i − gc_j`, exp, product, sum (5·d), then
///   `·(−β_i)` (1); `aqk[i][j]` for j ≤ i over the same exponentials: `q_s = q·scale` (c·d), the
///   diagonal's own `gc_i − gc_i` and exp (2·c·d), per pair and channel `q_s·k_j`, product, sum
///   (3·d); the forward substitution: a product and a sum per triple (2·Q) and the update of each
///   pair (P); `u`: `a = A[i][j]·β_j` per pair (1) and `a·v` summed per channel (2·d); `w`:
///   `k̃ = k·exp(gc)` once per (position, channel) (2·c·d) and `a·k̃` summed per pair and channel
///   (2·d); what the scan takes: `qdec = q_s·exp(gc)` over the same `q_s` (2·c·d),
///   `kdec = k·exp(gc_l − gc_i)` (3·c·d) and the closing decay `sdec = exp(gc_l)` (d). In all
///   `c·(G·d + 3) + 1 + 11·c·d + P·(5·d + 2) + 2·Q + R·(7·d + 1) + d`.
/// - **`chunk_scan`**: per (chunk, head): `6·c·d² + 2·c·d + 2·R·d + 2·d²`. `vnew = u − w·S`
///   (c·d·(2·d + 1)); `inter = qdec·S` (2·c·d²); `out = inter + aqk·vnew` (2·R·d + c·d); the
///   state update: `sdec` applied (d²), `kdec`'s product with `vnew` summed over the chunk
///   (2·c·d²), added to the decayed state (d²).
/// - **`fill`**: 0: data movement only.
pub fn flops(launch: &LaunchModel) -> Result<u64, RooflineError> {
    use Glm5NextKdaEntry::*;
    let s = |name| launch.need(name);
    Ok(match launch.entry {
        gemm | gemm_splitk | gemv_batchm => 2 * s("m")? * s("n")? * s("k")?,
        gemm_reduce => s("splits")?.saturating_sub(1) * s("m")? * s("n")?,
        gemv => 2 * s("n")? * s("k")?,
        conv_decode => s("b")? * conv_token(s("dim")?, s("qk_channels")?, s("width")?, s("head_dim")?),
        conv_prefill => {
            let qkv = s("qkv")?;
            s("t")? * conv_token(3 * qkv, 2 * qkv, s("width")?, s("head_dim")?)
        }
        o_norm => s("rows")? * (8 * s("d")? + 4),
        recurrent | recurrent_regs => {
            let d = s("d")?;
            s("b")? * s("h")? * (7 * d * d + 4 * d + gate_row(s("law")?, d) + 1)
        }
        chunk_prepare | chunk_scan => {
            let (c, d) = (s("c")?, s("d")?);
            let chunks = s("t")?.div_ceil(c.max(1));
            let pairs_below = c * c.saturating_sub(1) / 2;
            let pairs = c * (c + 1) / 2;
            let triples = c * c.saturating_sub(1) * c.saturating_sub(2) / 6;
            let per_chunk_head = if launch.entry == chunk_prepare {
                let gates = c * gate_row(s("law")?, d) + 1;
                gates + 11 * c * d + pairs_below * (5 * d + 2) + 2 * triples + pairs * (7 * d + 1) + d
            } else {
                6 * c * d * d + 2 * c * d + 2 * pairs * d + 2 * d * d
            };
            chunks * s("h")? * per_chunk_head
        }
        fill => 0,
    })
}

/// The gate of one (token, head) of `d` channels under `law`, and its beta (see [`flops`]).
fn gate_row(law: u64, d: u64) -> u64 {
    let per_channel = if law == 0 { 6 } else { 4 };
    per_channel * d + 3
}

/// One token of the conv over `dim` channels, `qk_channels` of them L2-normalised in heads of
/// `head_dim` (see [`flops`], `conv_decode`).
fn conv_token(dim: u64, qk_channels: u64, width: u64, head_dim: u64) -> u64 {
    dim * (2 * width + 4) + 3 * qk_channels + 2 * (qk_channels / head_dim.max(1))
}
