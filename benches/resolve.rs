//! The generated `Glm5NextKdaKernels::resolve` against the hand-written, seed-style resolve it
//! replaces (one `lookup(..)?` per required entry, `try_kernel` per optional one), both on the
//! CPU reference backend, side by side. Goal: generated / hand-written ≤ 1.05.
//!
//! `cargo bench --bench resolve`. Both run the same fixed sample size: divan otherwise picks
//! different iteration counts per benchmark, and a sample of one iteration carries the timer's
//! own overhead.

use kda::kernels::Glm5NextKdaKernels;
use kda_runtime::{GpuBackend, KernelHandle, LookupError, try_kernel};

fn main() {
    divan::main();
}

/// The seed's table: the same 16 entries, written out by hand.
#[allow(dead_code)] // The fields are read by nothing but `black_box`.
struct SeedKernels {
    gemm: KernelHandle,
    gemv: KernelHandle,
    gemv_batchm: Option<KernelHandle>,
    conv_decode: KernelHandle,
    conv_prefill: KernelHandle,
    l2: KernelHandle,
    gate: KernelHandle,
    chunk_prepare: KernelHandle,
    chunk_scan: KernelHandle,
    recurrent: KernelHandle,
    recurrent_smem: Option<KernelHandle>,
    o_norm: KernelHandle,
    split_widen: KernelHandle,
    sigmoid: KernelHandle,
    fill: KernelHandle,
    pack: KernelHandle,
}

impl SeedKernels {
    fn resolve(gpu: &dyn GpuBackend) -> Result<Self, LookupError> {
        Ok(Self {
            gemm: gpu.lookup("gemm", "dense_gemm_bf16")?,
            gemv: gpu.lookup("gemv", "dense_gemv_bf16")?,
            gemv_batchm: try_kernel(gpu, "dense_gemv_bf16_batchm", "dense_gemv_bf16_batchm")?,
            conv_decode: gpu.lookup("causal_conv1d", "causal_conv1d_update_l2norm")?,
            conv_prefill: gpu.lookup("causal_conv1d", "causal_conv1d_update_prefill")?,
            l2: gpu.lookup("norm", "l2_norm_bf16")?,
            gate: gpu.lookup("kda_gate", "kda_gate_bf16")?,
            chunk_prepare: gpu.lookup("kda_chunk", "kda_chunk_prepare")?,
            chunk_scan: gpu.lookup("kda_chunk", "kda_chunk_scan")?,
            recurrent: gpu.lookup("kda_recurrent", "kda_recurrent_decode_bf16")?,
            recurrent_smem: try_kernel(gpu, "kda_recurrent", "kda_recurrent_decode_bf16_smem")?,
            o_norm: gpu.lookup("kda_layer_ops", "kda_o_norm_gated_bf16")?,
            split_widen: gpu.lookup("kda_layer_ops", "kda_split_widen")?,
            sigmoid: gpu.lookup("kda_layer_ops", "kda_sigmoid_bf16_f32")?,
            fill: gpu.lookup("kda_layer_ops", "kda_fill_f32")?,
            pack: gpu.lookup("kda_layer_ops", "kda_pack_qkv_bf16")?,
        })
    }
}

#[divan::bench(sample_count = 3000, sample_size = 16)]
fn generated(bencher: divan::Bencher) {
    let gpu = kda::reference::backend();
    bencher.bench(|| Glm5NextKdaKernels::resolve(divan::black_box(&gpu)).unwrap());
}

#[divan::bench(sample_count = 3000, sample_size = 16)]
fn hand_written_seed(bencher: divan::Bencher) {
    let gpu = kda::reference::backend();
    bencher.bench(|| SeedKernels::resolve(divan::black_box(&gpu)).unwrap());
}
