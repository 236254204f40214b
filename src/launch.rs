//! The launch geometry of every kernel of `[glm5next_kda]`, in one place: the block launches
//! through these, and the CUDA kernels are written for them. The CPU reference ignores geometry.

use kda_runtime::LaunchGeometry;

/// Threads per block of the elementwise kernels.
pub const ELEMENTWISE_BLOCK: u32 = 256;

/// Rows and columns of a GEMM output tile.
pub const GEMM_TILE: u32 = 16;

/// Output rows of a GEMV block: one warp per row.
pub const GEMV_ROWS_PER_BLOCK: u32 = 8;

/// One thread per element.
pub fn elementwise(n: u32) -> LaunchGeometry {
    LaunchGeometry::linear(n, ELEMENTWISE_BLOCK)
}

/// `dense_gemm_bf16`: one `GEMM_TILE²` block per output tile of `c [m, n]`.
pub fn gemm(m: u32, n: u32) -> LaunchGeometry {
    LaunchGeometry {
        grid: (n.div_ceil(GEMM_TILE), m.div_ceil(GEMM_TILE), 1),
        block: (GEMM_TILE, GEMM_TILE, 1),
        shared_mem_bytes: 0,
    }
}

/// `dense_gemv_bf16` and `dense_gemv_bf16_batchm`: one warp per output column of the weight.
pub fn gemv(n: u32) -> LaunchGeometry {
    LaunchGeometry {
        grid: (n.div_ceil(GEMV_ROWS_PER_BLOCK), 1, 1),
        block: (32 * GEMV_ROWS_PER_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Kernels that give each head (or each row × head) one block of up to 128 threads.
pub fn per_head(blocks: u32, head_dim: u32) -> LaunchGeometry {
    LaunchGeometry { grid: (blocks.max(1), 1, 1), block: (head_dim.min(128), 1, 1), shared_mem_bytes: 0 }
}

/// `kda_chunk_prepare`: one block per (chunk, head).
pub fn chunk_prepare(chunks: u32, heads: u32) -> LaunchGeometry {
    LaunchGeometry { grid: (chunks.max(1), heads, 1), block: (128, 1, 1), shared_mem_bytes: 0 }
}
