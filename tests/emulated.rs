//! The CUDA kernels themselves against the CPU reference, without a GPU: every kernel of
//! `[glm5next_kda]` built from `kernels/*.cu` as C++ for the emulator (feature `emulation`) and
//! run on host threads through kda-runtime's emulation backend, on its launch case
//! (`kda::cases`) within the tolerances of `docs/kernels.md`; the ABI's bit-identical pairs; and
//! the whole block, prefill then decode. The same checks as the GPU suite (tests/gpu.rs), at
//! shapes small enough for host threads and chosen to reach every barrier path: head dims 32, 64
//! and 128, chunks of 32 and 64, token counts on both sides of a chunk boundary.
//!
//! A failing launch names its block-order seed; `KDA_EMU_SEED=<seed>` replays it.
#![cfg(feature = "emulation")]

mod support;

use kda::cases::KernelCase;
use kda::cases::parity::{head_dim_64, head_dim_128};
use kda::geometry::{GateLaw, KdaGeometry};
use kda::kernels::{EMULATED_KERNELS, Glm5NextKdaEntry, Glm5NextKdaKernels};
use kda::launch;
use kda_runtime::emu::{DriverBackend, EmuBackend};
use kda_runtime::{GpuBackend, GpuBackendExt, KernelArg, LaunchGeometry, bf16};
use support::decode::{assert_batch_agrees, assert_replay_is_decode_batch};
use support::{
    assert_batchm_rows_are_gemv, assert_block_agrees, assert_parity, assert_prefill_conv_is_decode_conv,
    assert_recurrent_pair_identical, tiny,
};

/// The emulation backend with the resolved table; every entry, optional ones included, must be
/// there, since every module is built.
fn emulated() -> (EmuBackend, Glm5NextKdaKernels) {
    let gpu = EmuBackend::new(&[&EMULATED_KERNELS]).unwrap_or_else(|error| panic!("{error}"));
    let kernels = Glm5NextKdaKernels::resolve(&gpu).unwrap_or_else(|error| panic!("{error}"));
    assert!(
        kernels.gemv_batchm.is_some() && kernels.recurrent_regs.is_some(),
        "an optional entry is missing"
    );
    println!("on {}", gpu.describe());
    (gpu, kernels)
}

#[test]
fn every_kernel_matches_the_reference_at_head_dim_32() {
    let (gpu, kernels) = emulated();
    let softplus = KdaGeometry { gate_law: GateLaw::Softplus, ..tiny() };
    // Chunks of 32: one token, C - 1, C, C + 1 and 2C + 1 tokens.
    assert_parity(
        &gpu,
        &kernels,
        &[("tiny", tiny(), &[1, 31, 32, 33, 65]), ("tiny-softplus", softplus, &[5])],
    );
}

#[test]
fn every_kernel_matches_the_reference_at_head_dims_64_and_128() {
    let (gpu, kernels) = emulated();
    // Chunks of 64: t ≡ 1 (mod 64) reaches the single-row tail of the chunk kernels.
    assert_parity(&gpu, &kernels, &[("d64", head_dim_64(), &[1, 65]), ("d128", head_dim_128(), &[5, 100])]);
}

#[test]
fn gemv_batchm_rows_are_bit_identical_to_gemv() {
    let (gpu, kernels) = emulated();
    // A batch in each of the kernel's row buckets (2, 4, 8, 16 rows of accumulators).
    for m in [2, 3, 5, 9, 16] {
        assert_batchm_rows_are_gemv(&gpu, &kernels, "tiny", tiny(), m);
    }
}

#[test]
fn recurrent_regs_is_bit_identical_to_recurrent() {
    let (gpu, kernels) = emulated();
    // Each head dim has its own unrolled code in both kernels.
    for (name, geometry) in [("tiny", tiny()), ("d64", head_dim_64()), ("d128", head_dim_128())] {
        assert_recurrent_pair_identical(&gpu, &kernels, name, geometry);
    }
}

#[test]
fn the_prefill_conv_is_the_decode_conv_token_by_token() {
    let (gpu, kernels) = emulated();
    // Every head dim; 66 tokens cross a token tile (64) with a window seeded from x.
    for (name, geometry, t) in [("tiny", tiny(), 66), ("d64", head_dim_64(), 5), ("d128", head_dim_128(), 3)]
    {
        assert_prefill_conv_is_decode_conv(&gpu, &kernels, name, geometry, t);
    }
}

#[test]
fn the_block_agrees_with_the_reference() {
    let (gpu, _) = emulated();
    // A chunked prefill of 40 tokens, a second of 5 on the carried state (5 rows: the batched
    // GEMV), then 3 decode steps.
    assert_block_agrees(&gpu, &[("tiny", tiny()), ("d64", head_dim_64())], &[40, 5], 48);
}

#[test]
fn a_batched_step_agrees_with_the_reference() {
    let (gpu, _) = emulated();
    // Seven of nine sequences, in a scrambled slot order: the batched GEMV and the pooled kernels.
    assert_batch_agrees(&gpu, tiny(), 9, 7);
}

#[test]
fn a_replayed_decode_step_is_decode_batch_bit_for_bit() {
    let (gpu, _) = emulated();
    // The GEMV, the batched GEMV at 16 rows and the GEMM at 20 rows, padded rows skipped.
    assert_eq!(assert_replay_is_decode_batch(&gpu, tiny(), 22, 20, &[1, 7, 17]), (3, 0));
}

#[test]
fn the_driver_runs_every_kernel_in_a_process_of_its_own_with_the_same_results() {
    // The sanitizer runs go through the driver; here it is the plain build's, so this checks the
    // request and response path itself: every argument there and every written buffer back.
    let driver = EMULATED_KERNELS.driver().expect("the emulated build makes a driver");
    let gpu = DriverBackend::new(driver, &[&EMULATED_KERNELS], 7).unwrap();
    let kernels = Glm5NextKdaKernels::resolve(&gpu).unwrap_or_else(|error| panic!("{error}"));
    assert_parity(&gpu, &kernels, &[("tiny", tiny(), &[33])]);
}

#[test]
fn the_dense_products_agree_at_their_edge_shapes() {
    // Off the tiles, k % 8 != 0, unaligned operands: both GEMM paths and the GEMVs' tails.
    let (gpu, kernels) = emulated();
    let cases = KernelCase::dense_edges(support::SEED, false).unwrap();
    let mut failures = Vec::new();
    for case in &cases {
        let what = format!("m = {} {}", case.tokens(), case.field());
        failures.extend(support::compare_case(&gpu, &kernels, &what, case).1);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_gemm_launched_short_of_its_dynamic_shared_memory_writes_nothing() {
    // The launch contract refuses such a launch (`shared.bytes`); launched unchecked, the
    // kernel's own check must keep it from staging through memory it was not given.
    let (gpu, kernels) = emulated();
    let (m, n, k) = (64u32, 130u32, 264u32);
    let a = gpu.upload(&vec![bf16::ONE; (m * k) as usize]).unwrap();
    let b = gpu.upload(&vec![bf16::ONE; (n * k) as usize]).unwrap();
    let before = vec![bf16::from_f32(7.0); (m * n) as usize];
    let mut c = gpu.upload(&before).unwrap();
    for shared in [0, launch::GEMM_SHARED_BYTES - 16] {
        let geometry = LaunchGeometry { shared_mem_bytes: shared, ..launch::gemm(m, n) };
        let mut args: [KernelArg<'_>; 7] =
            [(&a).into(), (&b).into(), (&mut c).into(), m.into(), n.into(), k.into(), k.into()];
        // SAFETY: the arguments are `gemm`'s parameters in order and of their C types (bf16 views
        // of m·k, n·k and m·n elements, c written; m, n, k, lda as u32); only the geometry lacks
        // the dynamic shared memory, which the kernel checks before it stages anything.
        unsafe { gpu.launch_unchecked(kernels.gemm, geometry, &mut args) }.unwrap();
        assert_eq!(gpu.download::<bf16>(&c).unwrap(), before, "{shared} bytes of shared memory");
    }
}

#[test]
fn the_convs_read_strided_rows_on_their_vector_paths() {
    // Four heads of 128: the stacked row is 3·512 + 2·128 + 4 = 1796 elements, a multiple of a
    // lane's 4 channels, so the convs read x a stacked row apart with 8-byte loads (at two heads
    // the row is 1026 and they go element by element).
    let (gpu, kernels) = emulated();
    let geometry = KdaGeometry { heads: 4, ..head_dim_128() };
    let mut failures = Vec::new();
    for (entry, t) in [(Glm5NextKdaEntry::conv_decode, 5), (Glm5NextKdaEntry::conv_prefill, 70)] {
        let case = KernelCase::new(entry, &geometry, t, support::SEED).unwrap();
        failures.extend(support::compare_case(&gpu, &kernels, entry.field(), &case).1);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_kernel_agrees_with_every_pointer_off_alignment() {
    // A safe launch may pass views at any element offset: each kernel's path for operands off
    // 16-byte alignment (element loads instead of vector loads and cp.async) against the
    // reference, which gets the same views.
    let (gpu, kernels) = emulated();
    let mut failures = Vec::new();
    for (geometry, t) in [(tiny(), 33), (head_dim_64(), 5)] {
        for case in KernelCase::all(&geometry, t, support::SEED).unwrap() {
            let case = case.with_offset(1);
            let what = format!("offset 1, t = {t}, {}", case.field());
            failures.extend(support::compare_case(&gpu, &kernels, &what, &case).1);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_grid_stride_kernels_agree_on_one_block() {
    // One block for everything: the output norm's warps walk further rows; the GEMM's
    // tensor-core path loops over two row and two column tiles, reusing its pipeline's shared
    // stages (and over three column tiles on its 64-row tile), and its scalar path (odd k, unaligned views) over the same tiles, reusing its
    // sub-tiles' shared buffer; split K walks every range of every tile; the prefill conv's warps
    // walk further heads and two token tiles, the first of which alone carries the state; the
    // GEMVs walk four column blocks, rewriting their part totals in shared memory for each; the
    // chunk kernels walk every (chunk, head) and every (head, column tile).
    let (gpu, kernels) = emulated();
    let one_block =
        |entry, tokens| KernelCase::new(entry, &head_dim_64(), tokens, support::SEED).unwrap().with_blocks(1);
    let cases = [
        one_block(Glm5NextKdaEntry::o_norm, 5),
        one_block(Glm5NextKdaEntry::conv_prefill, 65),
        one_block(Glm5NextKdaEntry::gemv, 1),
        one_block(Glm5NextKdaEntry::gemv_batchm, 5),
        one_block(Glm5NextKdaEntry::chunk_prepare, 65),
        one_block(Glm5NextKdaEntry::chunk_scan, 65),
        KernelCase::dense(Glm5NextKdaEntry::gemm, (130, 129, 264), 264, 0, support::SEED)
            .unwrap()
            .with_blocks(1),
        KernelCase::dense(Glm5NextKdaEntry::gemm, (64, 300, 264), 264, 0, support::SEED)
            .unwrap()
            .with_blocks(1),
        KernelCase::dense(Glm5NextKdaEntry::gemm, (130, 129, 263), 263, 1, support::SEED)
            .unwrap()
            .with_blocks(1),
        KernelCase::split_k((130, 129, 264), 264, 3, 0, support::SEED).unwrap().with_blocks(1),
    ];
    let mut failures = Vec::new();
    for case in &cases {
        failures.extend(support::compare_case(&gpu, &kernels, case.field(), case).1);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
