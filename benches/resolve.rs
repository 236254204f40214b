//! The generated `Glm5NextKdaKernels::resolve` against the hand-written, seed-style resolve it
//! replaces (one `lookup(..)?` per required entry, `try_kernel` per optional one), both on the
//! CPU reference backend, in interleaved rounds. Goal: generated / hand-written ≤ 1.05.
//!
//! `cargo bench --bench resolve`.

#[path = "support/interleave.rs"]
mod interleave;

use kda::kernels::{Glm5NextKdaKernels, glm5next_kda as table};
use kda_runtime::{GpuBackend, KernelHandle, LookupError, try_kernel};

fn main() {
    let gpu = kda::reference::backend();
    let comparison = interleave::compare(
        200,
        2_000,
        || Glm5NextKdaKernels::resolve(&gpu).unwrap(),
        || SeedKernels::resolve(&gpu).unwrap(),
    );
    comparison.report("resolve [glm5next_kda] on the CPU backend", "generated", "hand-written");
}

/// The seed's table: the same 13 entries, written out by hand.
#[allow(dead_code)] // The fields are read by nothing but `black_box`.
struct SeedKernels {
    gemm: KernelHandle,
    gemm_splitk: Option<KernelHandle>,
    gemm_reduce: Option<KernelHandle>,
    gemv: KernelHandle,
    gemv_batchm: Option<KernelHandle>,
    conv_decode: KernelHandle,
    conv_prefill: KernelHandle,
    chunk_prepare: KernelHandle,
    chunk_scan: KernelHandle,
    recurrent: KernelHandle,
    recurrent_regs: Option<KernelHandle>,
    o_norm: KernelHandle,
    fill: KernelHandle,
}

impl SeedKernels {
    fn resolve(gpu: &dyn GpuBackend) -> Result<Self, LookupError> {
        Ok(Self {
            gemm: gpu.lookup(table::gemm::ENTRY)?,
            gemm_splitk: try_kernel(gpu, table::gemm_splitk::ENTRY)?,
            gemm_reduce: try_kernel(gpu, table::gemm_reduce::ENTRY)?,
            gemv: gpu.lookup(table::gemv::ENTRY)?,
            gemv_batchm: try_kernel(gpu, table::gemv_batchm::ENTRY)?,
            conv_decode: gpu.lookup(table::conv_decode::ENTRY)?,
            conv_prefill: gpu.lookup(table::conv_prefill::ENTRY)?,
            chunk_prepare: gpu.lookup(table::chunk_prepare::ENTRY)?,
            chunk_scan: gpu.lookup(table::chunk_scan::ENTRY)?,
            recurrent: gpu.lookup(table::recurrent::ENTRY)?,
            recurrent_regs: try_kernel(gpu, table::recurrent_regs::ENTRY)?,
            o_norm: gpu.lookup(table::o_norm::ENTRY)?,
            fill: gpu.lookup(table::fill::ENTRY)?,
        })
    }
}
