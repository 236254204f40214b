//! The launch geometry of every kernel of `[glm5next_kda]`, in one place: the block launches
//! through these, and the CUDA kernels (`kernels/*.cu`) are written for exactly these shapes. The
//! CPU reference ignores geometry.
//!
//! The constants both sides need come from the `[defines]` table of `kernels.toml` (nvcc gets
//! them as `-DNAME=VALUE`); a kernel launched with a block shape other than the one documented
//! here returns without writing anything, so the two sides must agree.
//!
//! The GEMMs stage their operands through dynamic shared memory ([`GEMM_SHARED_BYTES`], 64 KiB:
//! past the 48 KiB a block gets without opting in, which the CUDA backend makes for the launch);
//! every other kernel uses static shared memory only, and its geometry has `shared_mem_bytes: 0`.

use kda_runtime::LaunchGeometry;

/// Threads per block of the elementwise kernels (they grid-stride, so any block size works).
pub const ELEMENTWISE_BLOCK: u32 = 256;

/// Threads per block of the kernels that give each unit of work one warp (the output norm a head
/// row, the convs a head of a row or of a token tile), 8 units a block: a sizing choice of this
/// file, those kernels take any block of whole warps.
pub const WARP_BLOCK: u32 = 256;

/// The constants the kernels are compiled with, from the `[defines]` of `kernels.toml` (each
/// documented there).
pub use crate::kernels::defines::{
    CHUNK_SCAN_THREADS, CHUNK_SCAN_VT, CHUNK_THREADS, CONV_MAX_WIDTH, CONV_PREFILL_TOKENS,
    DENSE_GEMV_BATCHM_MAX_M, GEMM_STAGES, GEMM_THREADS, GEMM_TILE_K, GEMM_TILE_M, GEMM_TILE_N,
    GEMV_BATCHM_ROW_GROUPS, GEMV_COLS_PER_BLOCK, GEMV_WARPS, KDA_MAX_CHUNK, KDA_MAX_HEAD_DIM, RECURRENT_VPB,
};

/// A geometry without dynamic shared memory; an empty grid dimension becomes 1 (the kernels
/// bounds-check, so a launch over nothing writes nothing).
fn blocks(grid: (u32, u32, u32), block: (u32, u32, u32)) -> LaunchGeometry {
    LaunchGeometry { grid: (grid.0.max(1), grid.1.max(1), grid.2.max(1)), block, shared_mem_bytes: 0 }
}

/// The elementwise kernels (`kda_fill_f32`, `dense_gemm_splitk_reduce_bf16`): one thread per
/// element of `n`. They grid-stride, so this is a sizing choice, not a contract.
pub fn elementwise(n: u32) -> LaunchGeometry {
    LaunchGeometry::linear(n, ELEMENTWISE_BLOCK)
}

/// `dense_gemm_bf16` on `c [m, n]`: one block of [`GEMM_THREADS`] per
/// [`GEMM_TILE_M`] × [`GEMM_TILE_N`] output tile.
pub fn gemm(m: u32, n: u32) -> LaunchGeometry {
    gemm_splitk(m, n, 1)
}

/// `dense_gemm_bf16_splitk` on `c [m, n]` over `splits` ranges of K: one block per output tile
/// and range (a grid `splits` times [`gemm`]'s in y, at most the 65,535 rows CUDA allows, past
/// which the kernels' grid-stride loop takes the rest).
pub fn gemm_splitk(m: u32, n: u32, splits: u32) -> LaunchGeometry {
    let rows = m.div_ceil(GEMM_TILE_M).saturating_mul(splits).min(MAX_GRID_Y);
    LaunchGeometry {
        shared_mem_bytes: GEMM_SHARED_BYTES,
        ..blocks((n.div_ceil(GEMM_TILE_N), rows, 1), (GEMM_THREADS, 1, 1))
    }
}

/// The dynamic shared memory of a GEMM block: [`GEMM_STAGES`] K tiles of its operands' rows
/// ([`GEMM_TILE_M`] of a, [`GEMM_TILE_N`] of b, [`GEMM_TILE_K`] bf16 each). The kernels write
/// nothing when a launch gives them less.
pub const GEMM_SHARED_BYTES: u32 = GEMM_STAGES * (GEMM_TILE_M + GEMM_TILE_N) * GEMM_TILE_K * 2;

/// The most blocks a CUDA grid has in y (and z).
const MAX_GRID_Y: u32 = 65_535;

/// `dense_gemv_bf16` (`m = 1`) and `dense_gemv_bf16_batchm` (`2 ≤ m ≤ 16`) on `y [m, n]`: one block
/// per [`GEMV_COLS_PER_BLOCK`] output columns, `(32, GEMV_WARPS)` threads for the GEMV and
/// `(32, GEMV_BATCHM_ROW_GROUPS)` for the batched GEMV (the two kernels check their block shape).
pub fn gemv(m: u32, n: u32) -> LaunchGeometry {
    let groups = if m <= 1 { GEMV_WARPS } else { GEMV_BATCHM_ROW_GROUPS };
    blocks((n.div_ceil(GEMV_COLS_PER_BLOCK), 1, 1), (GEMV_COLS_PER_BLOCK, groups, 1))
}

/// The most sequences one batched decode step takes: the decode kernels give each its own grid
/// row (y for the conv, z for the recurrent step), and CUDA grids hold at most 65,535 in y and z.
pub const MAX_DECODE_BATCH: u32 = 65_535;

/// `causal_conv1d_update_l2norm` on one token of each of `rows` sequences, `dim` channels: one
/// warp per head of `head_dim` channels and row (the kernel grid-strides over them by warp, so
/// this is a sizing choice).
pub fn conv_decode(dim: u32, head_dim: u32, rows: u32) -> LaunchGeometry {
    warp_per_unit(rows.saturating_mul(dim / head_dim.max(1)))
}

/// `causal_conv1d_prefill_l2norm_split` on `t` tokens of packed q | k | v rows of `3·qkv`
/// channels: one warp per head of `head_dim` channels and tile of [`CONV_PREFILL_TOKENS`] tokens
/// (the kernel grid-strides over them by warp, so this is a sizing choice).
pub fn conv_prefill(qkv: u32, head_dim: u32, t: u32) -> LaunchGeometry {
    let heads = 3 * (qkv / head_dim.max(1));
    warp_per_unit(t.div_ceil(CONV_PREFILL_TOKENS).saturating_mul(heads))
}

/// `kda_o_norm_gated_bf16` on `rows` = tokens × heads: one warp per head row (the kernel
/// grid-strides over the rows by warp, so this is a sizing choice).
pub fn norm(rows: u32) -> LaunchGeometry {
    warp_per_unit(rows)
}

/// One warp per unit of `units`, [`WARP_BLOCK`] threads a block.
fn warp_per_unit(units: u32) -> LaunchGeometry {
    blocks((units.div_ceil(WARP_BLOCK / 32), 1, 1), (WARP_BLOCK, 1, 1))
}

/// `kda_recurrent_decode_bf16` and `kda_recurrent_decode_bf16_regs` (the same geometry, so decode
/// can launch either) on `batch` sequences: grid `(heads, head_dim / RECURRENT_VPB, batch)`,
/// [`RECURRENT_VPB`] threads, one per state column.
pub fn recurrent(heads: u32, head_dim: u32, batch: u32) -> LaunchGeometry {
    blocks((heads, head_dim.div_ceil(RECURRENT_VPB), batch), (RECURRENT_VPB, 1, 1))
}

/// `kda_chunk_prepare`: one block of [`CHUNK_THREADS`] per (chunk, head).
pub fn chunk_prepare(chunks: u32, heads: u32) -> LaunchGeometry {
    blocks((chunks, heads, 1), (CHUNK_THREADS, 1, 1))
}

/// `kda_chunk_scan`: one block of [`CHUNK_SCAN_THREADS`] per (head, [`CHUNK_SCAN_VT`] state
/// columns); each walks all chunks of its head in order.
pub fn chunk_scan(heads: u32, head_dim: u32) -> LaunchGeometry {
    blocks((heads, head_dim.div_ceil(CHUNK_SCAN_VT), 1), (CHUNK_SCAN_THREADS, 1, 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_conv_gives_each_head_of_each_row_a_warp() {
        // glm5-flash: 3 · 64 heads of 128 a row, 8 warps a block.
        assert_eq!(conv_decode(24576, 128, 1).grid, (192 / 8, 1, 1));
        assert_eq!(conv_decode(24576, 128, 64).grid, (64 * 192 / 8, 1, 1));
        assert_eq!(conv_decode(24576, 128, 1).block, (WARP_BLOCK, 1, 1));
        // Whole warps a head at every head dim the kernels take.
        for head_dim in crate::geometry::HEAD_DIMS {
            assert_eq!(head_dim % 32, 0, "head_dim {head_dim}");
            assert!(head_dim <= KDA_MAX_HEAD_DIM);
        }
    }

    #[test]
    fn prefill_conv_gives_each_head_and_token_tile_a_warp() {
        // glm5-flash: 3 · 64 heads of 128 over 4096 / 64 tiles, 8 warps a block.
        assert_eq!(conv_prefill(8192, 128, 4096).grid, (3 * 64 * 4096 / CONV_PREFILL_TOKENS / 8, 1, 1));
        assert_eq!(conv_prefill(8192, 128, 4096).block, (WARP_BLOCK, 1, 1));
        // tiny: 3 · 2 heads of 32, one tile of 5 tokens.
        assert_eq!(conv_prefill(64, 32, 5).grid, (1, 1, 1));
        assert_eq!(conv_prefill(64, 32, 0).grid, (1, 1, 1));
    }

    #[test]
    fn column_splits_cover_every_head_dim_exactly() {
        for head_dim in crate::geometry::HEAD_DIMS {
            assert_eq!(head_dim % RECURRENT_VPB, 0, "head_dim {head_dim}");
            assert_eq!(head_dim % CHUNK_SCAN_VT, 0, "head_dim {head_dim}");
            assert_eq!(recurrent(64, head_dim, 1).grid, (64, head_dim / RECURRENT_VPB, 1));
            assert_eq!(recurrent(64, head_dim, 9).grid.2, 9);
            assert_eq!(chunk_scan(64, head_dim).grid, (64, head_dim / CHUNK_SCAN_VT, 1));
        }
        for chunk in crate::geometry::CHUNK_SIZES {
            assert!(chunk <= KDA_MAX_CHUNK, "chunk {chunk}");
            // One thread per chunk row in the prepare kernel's substitution.
            assert!(chunk <= CHUNK_THREADS, "chunk {chunk}");
        }
    }

    #[test]
    fn gemv_blocks_are_one_lane_per_column() {
        assert_eq!(gemv(1, 8192).block, (32, 16, 1));
        assert_eq!(gemv(1, 8192).grid, (256, 1, 1));
        assert_eq!(gemv(16, 100).block, (32, GEMV_BATCHM_ROW_GROUPS, 1));
        assert_eq!(gemv(16, 100).grid, (4, 1, 1));
        assert_eq!(gemm(65, 8192).grid, (64, 1, 1));
        assert_eq!(gemm(129, 100).grid, (1, 2, 1));
        assert_eq!(gemm(4096, 8192).grid, (64, 32, 1));
    }

    #[test]
    fn norm_blocks_hold_a_warp_per_row() {
        assert_eq!(norm(10).block, (WARP_BLOCK, 1, 1));
        assert_eq!(WARP_BLOCK % 32, 0);
        assert_eq!(norm(16).grid, (2, 1, 1));
        assert_eq!(norm(17).grid, (3, 1, 1));
        assert_eq!(norm(0).grid, (1, 1, 1));
    }

    #[test]
    fn only_the_gemms_ask_for_dynamic_shared_memory() {
        // Four stages of 128 + 128 rows of 32 bf16: 64 KiB, past the 48 KiB without opt-in.
        assert_eq!(GEMM_SHARED_BYTES, 65_536);
        assert_eq!(gemm(3, 5).shared_mem_bytes, GEMM_SHARED_BYTES);
        assert_eq!(gemm_splitk(64, 4096, 8).shared_mem_bytes, GEMM_SHARED_BYTES);
        let all = [
            elementwise(1000),
            gemv(1, 5),
            gemv(7, 5),
            conv_decode(768, 64, 3),
            conv_prefill(256, 64, 100),
            norm(4),
            recurrent(2, 128, 5),
            chunk_prepare(3, 2),
            chunk_scan(2, 128),
        ];
        assert!(all.iter().all(|g| g.shared_mem_bytes == 0));
    }
}
