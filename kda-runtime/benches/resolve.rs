//! The generated `resolve` of a model-sized table (13 entries, 4 optional) against the
//! hand-written, seed-style resolve it replaces (one `lookup(..)?` per required entry,
//! `try_kernel` per optional one), both on the CPU backend, in interleaved rounds. Goal:
//! generated / hand-written ≤ 1.05.
//!
//! `cargo bench -p kda-runtime --bench resolve`.

#[path = "support/interleave.rs"]
mod interleave;

use kda_runtime::cpu::CpuBackend;
use kda_runtime::{GpuBackend, KernelHandle, KernelTable, LookupError, try_kernel};

#[derive(KernelTable)]
#[kernel_table(manifest = "benches/kernels.toml")]
#[expect(dead_code, reason = "the marker type: only what the derive generates for it is used")]
struct Model;

use model as table;

fn main() {
    // Every entry carried, each a kernel that does nothing: only the lookups are timed.
    let gpu =
        ModelKernels::ENTRIES.iter().fold(CpuBackend::new(), |gpu, entry| gpu.with_kernel(entry, |_| Ok(())));
    let comparison = interleave::compare(
        200,
        2_000,
        || ModelKernels::resolve(&gpu).unwrap(),
        || SeedKernels::resolve(&gpu).unwrap(),
    );
    comparison.report("resolve [model] on the CPU backend", "generated", "hand-written");
}

/// The seed's table: the same 13 entries, written out by hand.
#[allow(dead_code)] // The fields are read by nothing but `black_box`.
struct SeedKernels {
    gemm: KernelHandle,
    gemm_splitk: Option<KernelHandle>,
    gemm_reduce: Option<KernelHandle>,
    gemv: KernelHandle,
    gemv_batch: Option<KernelHandle>,
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
            gemv_batch: try_kernel(gpu, table::gemv_batch::ENTRY)?,
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
