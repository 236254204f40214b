//! The CUDA kernels against the CPU reference, on a GPU: every kernel of `[glm5next_kda]` on its
//! launch case (`kda::cases`) at small geometries and at GLM-5.3-Flash, within the tolerances of
//! `docs/kernels.md`; the bit-identities the ABI promises on one backend (batched GEMV rows and the
//! GEMV, the two recurrent kernels); the whole block, prefill then decode; buffers shared by two
//! streams of the device, also when one of them is written through a lent cudarc view; the table
//! resolved on every device of the machine, launching on each; a table on an engine's own stream and
//! slices (`CudaBackend::on_stream`), a write there waited for after the engine drops the stream, and captured into the engine's own graph, a decode step of the
//! block too; and, with the feature `nccl`, the
//! all-reduce of a layer split by heads through a one-rank NCCL communicator.
//!
//! Every test needs a CUDA device, so every test is ignored: `scripts/gpu-check.sh` runs them on a
//! GPU machine (`--include-ignored`). Without a usable device a test panics with the backend's
//! reason ("no GPU: ..."). The measured figures are printed, so the run log records how close
//! each output came to its bound; run with `--nocapture` to see them.
#![cfg(feature = "cuda")]

mod support;

use kda::block::{BlockError, Glm5NextKdaBlock};
use kda::cases::parity::{head_dim_64, head_dim_128};
use kda::geometry::{GateLaw, KdaGeometry};
use kda::kernels::{Glm5NextKda, Glm5NextKdaKernels, KERNEL_IMAGES, glm5next_kda};
use kda::launch;
use kda::weights::{HostWeights, synthetic_hidden};
use kda_runtime::cuda::CudaBackend;
use kda_runtime::cudarc::driver::CudaContext;
use kda_runtime::{BackendError, DeviceBuffer, GpuBackend, GpuBackendExt, Out, PerDevice, bf16};
use support::decode::{
    assert_batch_agrees, assert_replay_is_decode_batch, pool_bits, prefilled_pool, scrambled_slots,
};
use support::{
    assert_batchm_rows_are_gemv, assert_block_agrees, assert_parity, assert_prefill_conv_is_decode_conv,
    assert_recurrent_pair_identical, tiny,
};

/// A panic that says why, where this test binary was built without CUDA kernel images.
fn assert_images_built() {
    if let Some(why) = KERNEL_IMAGES.missing() {
        panic!("no CUDA kernel images in this test binary: {why}");
    }
}

/// The CUDA backend on device 0 with its resolved table, or a panic that says why there is none.
fn cuda() -> (CudaBackend, Glm5NextKdaKernels) {
    assert_images_built();
    let gpu = CudaBackend::new(0, &[&KERNEL_IMAGES]).unwrap_or_else(|error| panic!("no GPU: {error}"));
    let kernels = Glm5NextKdaKernels::resolve(&gpu).unwrap_or_else(|error| panic!("{error}"));
    // Every module is built for the target, so the optional entries must resolve too.
    assert!(
        kernels.gemv_batchm.is_some() && kernels.recurrent_regs.is_some(),
        "an optional entry is missing on {}",
        gpu.describe()
    );
    println!("on {}", gpu.describe());
    (gpu, kernels)
}

#[test]
#[ignore = "needs a GPU: run by scripts/gpu-check.sh"]
fn every_kernel_matches_the_reference_at_small_geometries() {
    let (gpu, kernels) = cuda();
    let softplus = KdaGeometry { gate_law: GateLaw::Softplus, ..tiny() };
    // t not a multiple of C (7, 45, 77, 100), exactly one chunk (32), a single token (1).
    assert_parity(
        &gpu,
        &kernels,
        &[
            ("tiny", tiny(), &[1, 7, 32, 45, 100]),
            ("tiny-softplus", softplus, &[45]),
            ("d64", head_dim_64(), &[1, 77]),
            ("d128", head_dim_128(), &[1, 70]),
        ],
    );
}

#[test]
#[ignore = "needs a GPU: run by scripts/gpu-check.sh"]
fn every_kernel_matches_the_reference_at_glm5_flash() {
    let (gpu, kernels) = cuda();
    // Two whole chunks, a partial second chunk, and one token (decode kernels take one anyway).
    assert_parity(&gpu, &kernels, &[("glm5-flash", KdaGeometry::glm5_flash(), &[128, 100, 1])]);
}

#[test]
#[ignore = "needs a GPU: run by scripts/gpu-check.sh"]
fn gemv_batchm_rows_are_bit_identical_to_gemv() {
    let (gpu, kernels) = cuda();
    for (name, geometry) in
        [("tiny", tiny()), ("d128", head_dim_128()), ("glm5-flash", KdaGeometry::glm5_flash())]
    {
        // A batch in each of the kernel's row buckets (2, 4, 8, 16 rows of accumulators).
        for m in [2, 3, 5, 9, 16] {
            assert_batchm_rows_are_gemv(&gpu, &kernels, name, geometry, m);
        }
    }
}

#[test]
#[ignore = "needs a GPU: run by scripts/gpu-check.sh"]
fn recurrent_regs_is_bit_identical_to_recurrent() {
    let (gpu, kernels) = cuda();
    // Each head dim has its own unrolled code in both kernels.
    let geometries = [
        ("tiny", tiny()),
        ("d64", head_dim_64()),
        ("d128", head_dim_128()),
        ("glm5-flash", KdaGeometry::glm5_flash()),
    ];
    for (name, geometry) in geometries {
        assert_recurrent_pair_identical(&gpu, &kernels, name, geometry);
    }
}

#[test]
#[ignore = "needs a GPU: run by scripts/gpu-check.sh"]
fn the_prefill_conv_is_the_decode_conv_token_by_token() {
    let (gpu, kernels) = cuda();
    for (name, geometry, t) in
        [("tiny", tiny(), 66), ("d64", head_dim_64(), 5), ("glm5-flash", KdaGeometry::glm5_flash(), 3)]
    {
        assert_prefill_conv_is_decode_conv(&gpu, &kernels, name, geometry, t);
    }
}

#[test]
#[ignore = "needs a GPU: run by scripts/gpu-check.sh"]
fn the_block_agrees_with_the_reference() {
    let (gpu, _) = cuda();
    // A chunked prefill of 100 tokens, a second of 5 on the carried state (5 rows: the batched
    // GEMV), then 8 decode steps.
    assert_block_agrees(&gpu, &[("tiny", tiny()), ("glm5-flash", KdaGeometry::glm5_flash())], &[100, 5], 113);
}

#[test]
#[ignore = "needs a GPU: run by scripts/gpu-check.sh"]
fn a_batched_step_agrees_with_the_reference() {
    let (gpu, _) = cuda();
    assert_batch_agrees(&gpu, head_dim_128(), 80, 64);
}

#[test]
#[ignore = "needs a GPU: run by scripts/gpu-check.sh"]
fn a_replayed_decode_step_is_decode_batch_bit_for_bit() {
    let (gpu, _) = cuda();
    // Each class a CUDA graph: no stream of the device's own is open.
    assert_eq!(assert_replay_is_decode_batch(&gpu, head_dim_128(), 80, 64, &[1, 7, 16, 17, 64]), (3, 3));
}

#[test]
#[ignore = "needs a GPU: run by scripts/gpu-check.sh"]
fn a_buffer_written_on_one_stream_is_read_on_another_in_order() {
    let (gpu, kernels) = cuda();
    let (a, b) = (gpu.new_stream().unwrap(), gpu.new_stream().unwrap());
    let n = 1 << 22;
    let values = |offset: usize| (0..n).map(|i| ((i + offset) % 61) as f32 / 6.0 - 5.0).collect();
    let (first, second): (Vec<f32>, Vec<f32>) = (values(0), values(7));
    // Written on stream A, read by a kernel on stream B (`gemm_reduce` of one split: each value
    // rounded to bf16), then overwritten on A: the kernel must see the first write whole and none
    // of the second.
    let mut x = a.upload(&first).unwrap();
    let mut y = b.zeros::<bf16>(n).unwrap();
    let args = glm5next_kda::gemm_reduce {
        partial: x.view().into(),
        c: y.view_mut().into(),
        m: 1,
        n: n as u32,
        splits: 1,
    };
    kernels.launch_gemm_reduce(&*b, launch::elementwise(n as u32), args).unwrap();
    a.write(&second, &mut x).unwrap();
    let got = b.download::<bf16>(&y).unwrap();
    let wrong = got.iter().zip(&first).filter(|&(&y, &x)| y != bf16::from_f32(x)).count();
    assert_eq!(wrong, 0, "{wrong} of {n} elements are not the first write rounded to bf16");
    assert_eq!(gpu.download::<f32>(&x).unwrap(), second, "the second write, on the default stream");
}

#[test]
#[ignore = "needs a GPU: run by scripts/gpu-check.sh"]
fn a_buffer_lent_as_a_cudarc_view_is_ordered_with_its_other_uses() {
    let (gpu, kernels) = cuda();
    let b = gpu.new_stream().unwrap();
    let n = 1 << 22;
    let values = |offset: usize| (0..n).map(|i| ((i + offset) % 61) as f32 / 6.0 - 5.0).collect();
    let (first, second): (Vec<f32>, Vec<f32>) = (values(0), values(7));
    // Read by a kernel on stream B, then written through the lent view on the backend's stream:
    // the write must wait for the read.
    let mut x = gpu.upload(&first).unwrap();
    let mut y = b.zeros::<bf16>(n).unwrap();
    let args = glm5next_kda::gemm_reduce {
        partial: x.view().into(),
        c: y.view_mut().into(),
        m: 1,
        n: n as u32,
        splits: 1,
    };
    kernels.launch_gemm_reduce(&*b, launch::elementwise(n as u32), args).unwrap();
    // SAFETY: the one access, the copy, is issued on the stream the call gives.
    let copy =
        unsafe { gpu.with_view_mut::<f32, _>(&mut x, |stream, view| stream.memcpy_htod(&second[..], view)) };
    copy.unwrap().unwrap();
    let got = b.download::<bf16>(&y).unwrap();
    let wrong = got.iter().zip(&first).filter(|&(&y, &x)| y != bf16::from_f32(x)).count();
    assert_eq!(wrong, 0, "{wrong} of {n} elements are not the first values rounded to bf16");
    // Read on stream B after the lent write: it must see the write whole.
    assert_eq!(b.download::<f32>(&x).unwrap(), second, "the write through the view, read on stream B");

    // SAFETY (both): the closure does nothing.
    let wrong_type = unsafe { gpu.with_view_mut::<bf16, _>(&mut x, |_, _| ()) };
    assert!(matches!(wrong_type, Err(BackendError::DTypeMismatch { .. })), "{wrong_type:?}");
    let other = CudaBackend::new(0, &[&KERNEL_IMAGES]).unwrap();
    let mut foreign = other.zeros::<f32>(4).unwrap();
    let foreign = unsafe { gpu.with_view_mut::<f32, _>(&mut foreign, |_, _| ()) };
    assert!(matches!(foreign, Err(BackendError::ForeignResource { .. })), "{foreign:?}");
}

#[test]
#[ignore = "needs a GPU: run by scripts/gpu-check.sh"]
fn every_device_launches_the_table_resolved_on_it() {
    assert_images_built();
    let count = CudaBackend::device_count().unwrap_or_else(|error| panic!("no GPU: {error}"));
    assert!(count > 0, "no GPU: the driver reports no CUDA device");
    let backends = (0..count).map(|ordinal| {
        CudaBackend::new(ordinal, &[&KERNEL_IMAGES])
            .unwrap_or_else(|error| panic!("device {ordinal}: {error}"))
    });
    let devices = PerDevice::<_, Glm5NextKda>::resolve(backends).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(devices.len(), count);
    let n = 1000;
    // Each device's buffer filled with a value of its own, so a fill on the wrong device shows.
    let value = |device: usize| device as f32 + 0.5;
    let fill = |gpu: &dyn GpuBackend, handle, dst: &mut DeviceBuffer, value: f32| {
        gpu.launch(
            handle,
            launch::elementwise(n as u32),
            &mut [dst.view_mut().into(), (n as u32).into(), value.into()],
        )
    };
    let mut filled = Vec::new();
    for (device, (gpu, kernels)) in devices.iter().enumerate() {
        let mut dst = gpu.zeros::<f32>(n).unwrap();
        fill(gpu, kernels.fill, &mut dst, value(device))
            .unwrap_or_else(|error| panic!("device {device}: {error}"));
        filled.push(dst);
    }
    for (device, ((gpu, _), dst)) in devices.iter().zip(&filled).enumerate() {
        assert_eq!(
            gpu.download::<f32>(dst).unwrap(),
            vec![value(device); n],
            "device {device}: {}",
            gpu.describe()
        );
        println!("device {device}: {}", gpu.describe());
    }

    // A backend apart from the table's, on the last device, refuses device 0's handle and writes
    // nothing.
    let (_, first) = devices.device(0).unwrap();
    let other = CudaBackend::new(count - 1, &[&KERNEL_IMAGES]).unwrap();
    let mut untouched = other.zeros::<f32>(n).unwrap();
    let refused = fill(&other, first.fill, &mut untouched, 1.0);
    assert!(matches!(refused, Err(BackendError::ForeignResource { .. })), "{refused:?}");
    assert_eq!(other.download::<f32>(&untouched).unwrap(), vec![0.0; n]);
}

/// `fill` of `n` elements with `value` into `dst`, through `gpu`.
fn fill_slice(
    gpu: &CudaBackend,
    kernels: &Glm5NextKdaKernels,
    dst: Out<'_, f32>,
    n: usize,
    value: f32,
) -> Result<(), BackendError> {
    let args = glm5next_kda::fill { dst, n: n as u32, value };
    kernels.launch_fill(gpu, launch::elementwise(n as u32), args)
}

#[test]
#[ignore = "needs a GPU: run by scripts/gpu-check.sh"]
fn a_table_launches_on_the_engine_s_stream_and_slices() {
    assert_images_built();
    let context = CudaContext::new(0).unwrap_or_else(|error| panic!("no GPU: {error:?}"));
    let (first, second) = (context.new_stream().unwrap(), context.new_stream().unwrap());
    let gpu = CudaBackend::on_stream(first.clone(), &[&KERNEL_IMAGES]).unwrap();
    let kernels = Glm5NextKdaKernels::resolve(&gpu).unwrap_or_else(|error| panic!("{error}"));
    let n = 1000;
    let mut slice = first.alloc_zeros::<f32>(n).unwrap();
    fill_slice(&gpu, &kernels, (&mut slice).into(), n, 1.5).unwrap();
    assert_eq!(first.clone_dtoh(&slice).unwrap(), vec![1.5; n]);

    // A backend on another stream of the context shares the modules: the table resolved on the
    // first launches there, and the launch is ordered after the first stream's by the slice's
    // events (cudarc's tracking, on by default).
    let other = CudaBackend::on_stream(second.clone(), &[&KERNEL_IMAGES]).unwrap();
    fill_slice(&gpu, &kernels, (&mut slice).into(), n, 2.5).unwrap();
    fill_slice(&other, &kernels, (&mut slice.slice_mut(..n / 2)).into(), n / 2, 3.5).unwrap();
    let mut expected = vec![3.5; n / 2];
    expected.resize(n, 2.5);
    assert_eq!(second.clone_dtoh(&slice).unwrap(), expected);

    // A slice shorter than the extent is refused and nothing is written.
    let mut short = first.alloc_zeros::<f32>(n - 1).unwrap();
    let refused = fill_slice(&gpu, &kernels, (&mut short).into(), n, 1.0);
    assert!(matches!(refused, Err(BackendError::Argument { param: "dst", .. })), "{refused:?}");
    assert_eq!(first.clone_dtoh(&short).unwrap(), vec![0.0; n - 1]);

    // A slice of a context of another device is refused, where there is one.
    if CudaBackend::device_count().unwrap() > 1 {
        let elsewhere = CudaContext::new(1).unwrap().default_stream();
        let mut foreign = elsewhere.alloc_zeros::<f32>(n).unwrap();
        let refused = fill_slice(&gpu, &kernels, (&mut foreign).into(), n, 1.0);
        assert!(matches!(refused, Err(BackendError::ForeignResource { .. })), "{refused:?}");
    }
}

#[test]
#[ignore = "needs a GPU: run by scripts/gpu-check.sh"]
fn a_write_on_a_caller_s_stream_dropped_at_once_is_waited_for_by_the_default_stream() {
    assert_images_built();
    let context = CudaContext::new(0).unwrap_or_else(|error| panic!("no GPU: {error:?}"));
    // Backend A on the default stream, B on a stream of the engine's: with cudarc's event
    // tracking (on by default) their buffers are shared.
    let a = CudaBackend::on_stream(context.default_stream(), &[&KERNEL_IMAGES]).unwrap();
    let kernels = Glm5NextKdaKernels::resolve(&a).unwrap_or_else(|error| panic!("{error}"));
    let b = CudaBackend::on_stream(context.new_stream().unwrap(), &[&KERNEL_IMAGES]).unwrap();
    let n = 1 << 24;
    let values: Vec<f32> = (0..n).map(|i| (i % 61) as f32 / 6.0 - 5.0).collect();
    let partial = a.upload(&values).unwrap();
    let mut x = a.zeros::<bf16>(n).unwrap();
    // A long write of `x` on B's stream; then B and its stream are dropped at once, the last
    // stream of the context, so cudarc stops waiting for buffers' events. The default stream must
    // still read and free `x` after the write.
    let args = glm5next_kda::gemm_reduce {
        partial: partial.view().into(),
        c: x.view_mut().into(),
        m: 1,
        n: n as u32,
        splits: 1,
    };
    kernels.launch_gemm_reduce(&b, launch::elementwise(n as u32), args).unwrap();
    drop(b);
    assert!(!context.is_in_multi_stream_mode(), "the engine's stream was the last one");
    let got = a.download::<bf16>(&x).unwrap();
    let wrong = got.iter().zip(&values).filter(|&(&y, &x)| y != bf16::from_f32(x)).count();
    assert_eq!(wrong, 0, "{wrong} of {n} elements were read before the write on the dropped stream");
    drop(x);
    a.synchronize().unwrap();
    context.check_err().unwrap_or_else(|error| panic!("a drop recorded a driver error: {error:?}"));
}

#[test]
#[ignore = "needs a GPU: run by scripts/gpu-check.sh"]
fn an_engine_captures_kda_launches_on_its_slices_and_replays_them() {
    use kda_runtime::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
    assert_images_built();
    let context = CudaContext::new(0).unwrap_or_else(|error| panic!("no GPU: {error:?}"));
    // SAFETY: every use of this context's slices below is on its one stream.
    unsafe { context.disable_event_tracking() };
    let stream = context.new_stream().unwrap();
    let gpu = CudaBackend::on_stream(stream.clone(), &[&KERNEL_IMAGES]).unwrap();
    let kernels = Glm5NextKdaKernels::resolve(&gpu).unwrap_or_else(|error| panic!("{error}"));
    let n = 4096;
    let mut slice = stream.alloc_zeros::<f32>(n).unwrap();
    let mut own = gpu.zeros::<f32>(n).unwrap();
    let dropped = gpu.zeros::<f32>(n).unwrap();
    stream.synchronize().unwrap();

    stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).unwrap();
    let captured = fill_slice(&gpu, &kernels, (&mut slice).into(), n, 7.0);
    // A kda buffer dropped in the capture is not freed into the graph, which then still ends.
    drop(dropped);
    // kda's own memory is refused in the caller's capture: a launch on a kda buffer, an allocation.
    let args = glm5next_kda::fill { dst: own.view_mut().into(), n: n as u32, value: 1.0 };
    let refused = kernels.launch_fill(&gpu, launch::elementwise(n as u32), args);
    let allocation = gpu.zeros::<f32>(n).map(drop);
    let graph = stream.end_capture(CUgraphInstantiate_flags(0)).unwrap().expect("a graph with one launch");
    captured.unwrap();
    assert!(matches!(refused, Err(BackendError::InCallersCapture { .. })), "{refused:?}");
    assert!(matches!(allocation, Err(BackendError::InCallersCapture { .. })), "{allocation:?}");
    // Nothing ran during the capture.
    assert_eq!(stream.clone_dtoh(&slice).unwrap(), vec![0.0; n]);
    for _ in 0..2 {
        graph.launch().unwrap();
    }
    assert_eq!(stream.clone_dtoh(&slice).unwrap(), vec![7.0; n]);
    assert_eq!(gpu.download::<f32>(&own).unwrap(), vec![0.0; n]);
}

/// An engine's capture of a decode step of the block it owns (`DecodeReplay::launch_staged`,
/// within `CudaBackend::admitting_own_buffers`), replayed on inputs staged outside the capture:
/// each replay is `decode_batch` on the same input, bit for bit, output and pool; without the
/// admission the capture refuses the step, and a backend ordering its buffers by events admits
/// nothing.
#[test]
#[ignore = "needs a GPU: run by scripts/gpu-check.sh"]
fn an_engine_captures_a_decode_step_of_the_block_and_replays_it() {
    use kda_runtime::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
    let mode = CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    assert_images_built();
    let context = CudaContext::new(0).unwrap_or_else(|error| panic!("no GPU: {error:?}"));
    // SAFETY: every use of this context's memory below is on its one stream.
    unsafe { context.disable_event_tracking() };
    let stream = context.new_stream().unwrap();
    let gpu = CudaBackend::on_stream(stream.clone(), &[&KERNEL_IMAGES]).unwrap();
    let geometry = tiny();
    let block = Glm5NextKdaBlock::new(&gpu, geometry, &HostWeights::synthetic(&geometry, 5)).unwrap();
    let (mut captured, mut direct) = (prefilled_pool(&block, &gpu, 6), prefilled_pool(&block, &gpu, 6));
    let slots = scrambled_slots(6, 3);
    let mut replay = block.decode_replay(4).unwrap();
    let first = gpu.upload(&synthetic_hidden(&geometry, 3, 1)).unwrap();
    replay.stage(&mut captured, &slots, &first).unwrap();

    stream.begin_capture(mode).unwrap();
    let refused = replay.launch_staged(&mut captured).map(drop);
    drop(stream.end_capture(CUgraphInstantiate_flags(0)));
    assert!(
        matches!(refused, Err(BlockError::Backend(BackendError::InCallersCapture { .. }))),
        "{refused:?}"
    );

    stream.begin_capture(mode).unwrap();
    // SAFETY: the graph launches on `stream` only (`CudaGraph::launch`), and it is dropped before
    // `block`, `captured` and `replay`, which hold every buffer the step names.
    let step = unsafe { gpu.admitting_own_buffers(|| replay.launch_staged(&mut captured).map(drop)) };
    let graph = stream.end_capture(CUgraphInstantiate_flags(0)).unwrap().expect("a graph of the step");
    step.unwrap().unwrap();
    assert_eq!(pool_bits(&gpu, &captured), pool_bits(&gpu, &direct), "the capture ran the step");
    // A backend whose buffers are ordered by events (its context tracks them) admits nothing.
    let (tracking, _) = cuda();
    // SAFETY: `work` is not called: the admission is refused before it.
    let admitted: Result<(), _> = unsafe { tracking.admitting_own_buffers(|| panic!("admitted")) };
    assert!(matches!(admitted, Err(BackendError::OrderedByEvents { .. })), "{admitted:?}");
    for seed in [1, 2, 3] {
        let hidden = gpu.upload(&synthetic_hidden(&geometry, 3, seed)).unwrap();
        replay.stage(&mut captured, &slots, &hidden).unwrap();
        graph.launch().unwrap();
        let want = gpu.download::<bf16>(&block.decode_batch(&mut direct, &slots, &hidden).unwrap()).unwrap();
        let got = replay.output().unwrap();
        assert_eq!(gpu.download::<bf16>(got.buffer()).unwrap()[got.range()], want[..], "replay {seed}");
        assert_eq!(pool_bits(&gpu, &captured), pool_bits(&gpu, &direct), "replay {seed}");
    }
}

/// The all-reduce of a layer split by heads (`kda::all_reduce`) through a one-rank NCCL
/// communicator, the one a single GPU holds: the block's output, summed over its one rank, is that
/// output bit for bit, in bf16 and in f32; a communicator on another stream and a buffer of
/// another element type are refused.
#[cfg(feature = "nccl")]
#[test]
#[ignore = "needs a GPU and libnccl: run by scripts/gpu-check.sh"]
fn a_one_rank_all_reduce_is_the_partial_output_itself() {
    use cudarc::nccl::{Comm, Id};
    use kda::all_reduce::{AllReduceError, all_reduce_sum};
    use kda::block::Glm5NextKdaBlock;
    use kda::tensor_parallel::HeadShard;
    use kda::weights::{HostWeights, synthetic_hidden};

    let (gpu, _) = cuda();
    // SAFETY: only tries to open the NCCL library; no NCCL function is called.
    assert!(unsafe { cudarc::nccl::sys::is_culib_present() }, "no NCCL: libnccl is not on the library path");
    gpu.stream().context().bind_to_thread().unwrap();
    let one_rank = |stream| Comm::from_rank(stream, 0, 1, Id::new().unwrap()).unwrap();
    let comm = one_rank(gpu.stream().clone());

    let layer = tiny();
    let shard = HeadShard::new(&layer, 0, 1).unwrap();
    let weights = HostWeights::synthetic(&layer, 9);
    let block = Glm5NextKdaBlock::new(&gpu, shard.geometry(), &shard.weights(&weights).unwrap()).unwrap();
    let mut state = block.new_state().unwrap();
    let tokens = synthetic_hidden(&layer, 5, 10);
    // Issued right after the launches that write it: the stream orders the two.
    let mut partial = block.prefill(&mut state, &gpu.upload(&tokens).unwrap()).unwrap();
    let before = gpu.download::<bf16>(&partial).unwrap();
    assert!(before.iter().any(|x| x.to_f32() != 0.0), "the block wrote its output");
    all_reduce_sum(&gpu, &comm, &mut partial).unwrap();
    assert_eq!(gpu.download::<bf16>(&partial).unwrap(), before, "bf16 output summed over one rank");
    let values: Vec<f32> = (0..1000).map(|i| i as f32 / 7.0 - 50.0).collect();
    let mut wide = gpu.upload(&values).unwrap();
    all_reduce_sum(&gpu, &comm, &mut wide).unwrap();
    assert_eq!(gpu.download::<f32>(&wide).unwrap(), values, "f32 summed over one rank");

    let mut slots = gpu.upload(&[1u32, 2, 3]).unwrap();
    assert!(matches!(all_reduce_sum(&gpu, &comm, &mut slots), Err(AllReduceError::DType(_))));
    let elsewhere = one_rank(gpu.stream().context().new_stream().unwrap());
    assert!(matches!(all_reduce_sum(&gpu, &elsewhere, &mut wide), Err(AllReduceError::Stream)));
    assert_eq!(gpu.download::<f32>(&wide).unwrap(), values, "a refused all-reduce writes nothing");
}
