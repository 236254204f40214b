//! The replayed decode step (`DecodeReplay`) on the CPU reference and on the test fake: the same
//! results as `decode_batch`, bit for bit, in every dispatch class; the same kernels launched;
//! nothing allocated once a class is recorded; and the same refusals, before anything runs.

mod support;

use kda::block::{BlockError, Glm5NextKdaBlock, KdaStatePool, SlotError};
use kda::geometry::KdaGeometry;
use kda::kernels::Glm5NextKda;
use kda::weights::{HostWeights, synthetic_hidden};
use kda_runtime::GpuBackendExt;
use kda_runtime::record::RecordingBackend;
use support::decode::{assert_replay_is_decode_batch, pool_bits, prefilled_pool, scrambled_slots};

/// A pool of `capacity` slots, all held, all zero.
fn held_pool(block: &Glm5NextKdaBlock<'_>, capacity: u32) -> KdaStatePool {
    let mut pool = block.new_pool(capacity).unwrap();
    for slot in 0..capacity {
        assert_eq!(block.acquire(&mut pool).unwrap(), slot);
    }
    pool
}

#[test]
fn a_replay_is_decode_batch_bit_for_bit_in_every_dispatch_class() {
    let gpu = kda::reference::backend();
    // 1: the GEMV; 2, 7, 16: the batched GEMV at 16 rows; 17, 64: the GEMM at 64 rows.
    let counts = assert_replay_is_decode_batch(&gpu, KdaGeometry::tiny(), 70, 64, &[1, 2, 7, 16, 17, 64]);
    assert_eq!(counts, (3, 0), "three classes recorded, no graphs on the CPU");
    // A replay whose largest batch is under 16 runs the batched GEMV at that many rows.
    assert_eq!(assert_replay_is_decode_batch(&gpu, KdaGeometry::tiny(), 9, 5, &[3, 5]), (1, 0));
}

#[test]
fn a_replay_launches_what_decode_batch_launches_and_allocates_nothing() {
    let gpu = RecordingBackend::new().with_table::<Glm5NextKda>();
    let geometry = KdaGeometry::tiny();
    let block = Glm5NextKdaBlock::new(&gpu, geometry, &HostWeights::synthetic(&geometry, 3)).unwrap();
    let mut pool = held_pool(&block, 40);
    let mut replay = block.decode_replay(32).unwrap();
    for b in [1u32, 9, 16, 17, 32] {
        let slots = scrambled_slots(40, b);
        let hidden = gpu.upload(&synthetic_hidden(&geometry, b as usize, 5)).unwrap();
        // At the class's row count, `decode_batch` launches the kernels the recording holds.
        let rows = replay.rows_for(b);
        let padded = gpu.upload(&synthetic_hidden(&geometry, rows as usize, 5)).unwrap();
        let launched = gpu.launches().len();
        block.decode_batch(&mut pool, &scrambled_slots(40, rows), &padded).unwrap();
        let direct = gpu.launches()[launched..].to_vec();

        replay.prepare(&mut pool, b).unwrap();
        for _ in 0..2 {
            let (allocated, launched) = (gpu.allocations(), gpu.launches().len());
            replay.decode(&mut pool, &slots, &hidden).unwrap();
            assert_eq!(gpu.allocations(), allocated, "B = {b}: a replay allocated");
            assert_eq!(gpu.launches()[launched..], direct[..], "B = {b}: other launches than decode_batch's");
        }
    }
    assert_eq!(replay.recorded(), 3);
}

#[test]
fn where_the_backend_has_graphs_a_step_is_one_graph_launch_captured_per_pool() {
    let gpu = RecordingBackend::new().with_table::<Glm5NextKda>().with_graphs();
    let geometry = KdaGeometry::tiny();
    let block = Glm5NextKdaBlock::new(&gpu, geometry, &HostWeights::synthetic(&geometry, 3)).unwrap();
    let mut pools = [held_pool(&block, 20), held_pool(&block, 20)];
    let mut replay = block.decode_replay(20).unwrap();
    let slots = scrambled_slots(20, 18);
    let hidden = gpu.upload(&synthetic_hidden(&geometry, 18, 5)).unwrap();
    let launched = gpu.launches().len();
    block
        .decode_batch(
            &mut pools[0],
            &scrambled_slots(20, 20),
            &gpu.upload(&synthetic_hidden(&geometry, 20, 5)).unwrap(),
        )
        .unwrap();
    let direct = gpu.launches()[launched..].to_vec();
    replay.prepare(&mut pools[0], 18).unwrap();
    let allocated = gpu.allocations();
    // The first pool twice (captured once), the second (captured again), the first again
    // (captured again: a graph holds the addresses of one pool).
    for (step, (which, captures)) in [(0, 1), (0, 1), (1, 2), (0, 3)].into_iter().enumerate() {
        let launched = gpu.launches().len();
        replay.decode(&mut pools[which], &slots, &hidden).unwrap();
        assert_eq!(gpu.graph_launches(), step + 1, "step {step}: not one graph launch");
        assert_eq!(gpu.captures(), captures, "step {step}");
        assert_eq!(gpu.launches()[launched..], direct[..], "step {step}: other launches than decode_batch's");
    }
    assert_eq!(gpu.allocations(), allocated, "a replay allocated");
}

#[test]
fn a_pool_of_another_capacity_is_recorded_again() {
    let gpu = kda::reference::backend();
    let geometry = KdaGeometry::tiny();
    let block = Glm5NextKdaBlock::new(&gpu, geometry, &HostWeights::synthetic(&geometry, 4)).unwrap();
    let mut replay = block.decode_replay(8).unwrap();
    for capacity in [8, 12, 8] {
        let (mut replayed, mut direct) =
            (prefilled_pool(&block, &gpu, capacity), prefilled_pool(&block, &gpu, capacity));
        let slots = scrambled_slots(capacity, 6);
        let hidden = gpu.upload(&synthetic_hidden(&geometry, 6, u64::from(capacity))).unwrap();
        let want =
            gpu.download::<half::bf16>(&block.decode_batch(&mut direct, &slots, &hidden).unwrap()).unwrap();
        let got = replay.decode(&mut replayed, &slots, &hidden).unwrap();
        let got = gpu.download::<half::bf16>(got.buffer()).unwrap()[got.range()].to_vec();
        assert_eq!(got, want, "capacity {capacity}");
        assert_eq!(pool_bits(&gpu, &replayed), pool_bits(&gpu, &direct), "capacity {capacity}");
    }
}

#[test]
fn a_replay_refuses_what_decode_batch_refuses_before_anything_runs() {
    let gpu = kda::reference::backend();
    let geometry = KdaGeometry::tiny();
    let block = Glm5NextKdaBlock::new(&gpu, geometry, &HostWeights::synthetic(&geometry, 6)).unwrap();
    assert!(matches!(block.decode_replay(0), Err(BlockError::Input { .. })));
    let mut replay = block.decode_replay(2).unwrap();
    let mut pool = prefilled_pool(&block, &gpu, 4);
    pool.release(3).unwrap();
    let before = pool_bits(&gpu, &pool);
    let two = gpu.upload(&synthetic_hidden(&geometry, 2, 9)).unwrap();
    let three = gpu.upload(&synthetic_hidden(&geometry, 3, 9)).unwrap();
    let refusals = [
        (replay.decode(&mut pool, &[0, 4], &two).err(), "out of range"),
        (replay.decode(&mut pool, &[1, 1], &two).err(), "repeated"),
        (replay.decode(&mut pool, &[0, 3], &two).err(), "free"),
        (replay.decode(&mut pool, &[0, 1], &three).err(), "three rows for two slots"),
        (replay.decode(&mut pool, &[0, 1, 2], &three).err(), "more than max_batch"),
    ];
    let slot_error = |error: &Option<BlockError>, expected: SlotError| matches!(error, Some(BlockError::Slot(found)) if *found == expected);
    assert!(slot_error(&refusals[0].0, SlotError::OutOfRange { slot: 4, capacity: 4 }), "{refusals:?}");
    assert!(slot_error(&refusals[1].0, SlotError::Repeated { slot: 1 }), "{refusals:?}");
    assert!(slot_error(&refusals[2].0, SlotError::Free { slot: 3 }), "{refusals:?}");
    for (error, what) in &refusals[3..] {
        assert!(matches!(error, Some(BlockError::Input { .. })), "{what}: {error:?}");
    }
    assert_eq!(pool_bits(&gpu, &pool), before, "a refused step changed the pool");
    assert_eq!(replay.recorded(), 0, "a refused step recorded something");
}

#[test]
fn preparing_a_class_moves_no_sequence_and_a_copied_pool_steps_on_its_own() {
    let gpu = kda::reference::backend();
    let geometry = KdaGeometry::tiny();
    let block = Glm5NextKdaBlock::new(&gpu, geometry, &HostWeights::synthetic(&geometry, 7)).unwrap();
    let mut pool = prefilled_pool(&block, &gpu, 6);
    let prefilled = pool_bits(&gpu, &pool);
    let mut replay = block.decode_replay(6).unwrap();
    for b in [1, 4, 6] {
        replay.prepare(&mut pool, b).unwrap();
    }
    assert_eq!(replay.recorded(), 2, "1, then 4 and 6 in the batched GEMV's class");
    assert_eq!(pool_bits(&gpu, &pool), prefilled, "recording moved a sequence");
    assert!(matches!(replay.prepare(&mut pool, 7), Err(BlockError::Input { .. })));

    let mut copy = block.copy_pool(&pool).unwrap();
    assert_eq!(pool_bits(&gpu, &copy), prefilled);
    assert_eq!((copy.capacity(), copy.in_use()), (6, 6));
    let hidden = gpu.upload(&synthetic_hidden(&geometry, 4, 8)).unwrap();
    let slots = scrambled_slots(6, 4);
    let out = block.decode_batch(&mut copy, &slots, &hidden).unwrap();
    assert_eq!(pool_bits(&gpu, &pool), prefilled, "stepping the copy moved the original");
    let replayed = replay.decode(&mut pool, &slots, &hidden).unwrap();
    let replayed = gpu.download::<half::bf16>(replayed.buffer()).unwrap()[replayed.range()].to_vec();
    assert_eq!(replayed, gpu.download::<half::bf16>(&out).unwrap());
    assert_eq!(pool_bits(&gpu, &pool), pool_bits(&gpu, &copy), "the same step from the same states");
}

#[test]
fn a_staged_step_launches_as_decode_does_each_time_from_the_input_staged() {
    let gpu = kda::reference::backend();
    let geometry = KdaGeometry::tiny();
    let block = Glm5NextKdaBlock::new(&gpu, geometry, &HostWeights::synthetic(&geometry, 8)).unwrap();
    let (mut staged, mut direct) = (prefilled_pool(&block, &gpu, 6), prefilled_pool(&block, &gpu, 6));
    let mut replay = block.decode_replay(4).unwrap();
    let before = pool_bits(&gpu, &staged);
    let unstaged = replay.launch_staged(&mut staged).err();
    assert!(matches!(unstaged, Some(BlockError::Input { .. })), "{unstaged:?}");
    assert!(replay.output().is_none());
    assert_eq!(pool_bits(&gpu, &staged), before, "a launch with nothing staged moved a sequence");

    let slots = scrambled_slots(6, 3);
    let mut hidden = gpu.upload(&synthetic_hidden(&geometry, 3, 11)).unwrap();
    replay.stage(&mut staged, &slots, &hidden).unwrap();
    let input = synthetic_hidden(&geometry, 3, 11);
    // What the caller's buffer holds after staging is not the step's input: the workspace is.
    gpu.write(&synthetic_hidden(&geometry, 3, 12), &mut hidden).unwrap();
    let same_input = gpu.upload(&input).unwrap();
    for launch in 0..2 {
        let want = block.decode_batch(&mut direct, &slots, &same_input).unwrap();
        let got = replay.launch_staged(&mut staged).unwrap();
        let got = gpu.download::<half::bf16>(got.buffer()).unwrap()[got.range()].to_vec();
        assert_eq!(got, gpu.download::<half::bf16>(&want).unwrap(), "launch {launch}");
        assert_eq!(pool_bits(&gpu, &staged), pool_bits(&gpu, &direct), "launch {launch}");
        let output = replay.output().unwrap();
        assert_eq!(gpu.download::<half::bf16>(output.buffer()).unwrap()[output.range()], got[..]);
    }
    let mut other = block.new_pool(5).unwrap();
    let refused = replay.launch_staged(&mut other).err();
    assert!(matches!(refused, Some(BlockError::Input { .. })), "another pool's capacity: {refused:?}");
}

#[test]
fn launching_a_staged_step_allocates_nothing() {
    let gpu = RecordingBackend::new().with_table::<Glm5NextKda>();
    let geometry = KdaGeometry::tiny();
    let block = Glm5NextKdaBlock::new(&gpu, geometry, &HostWeights::synthetic(&geometry, 3)).unwrap();
    let mut pool = held_pool(&block, 8);
    let mut replay = block.decode_replay(8).unwrap();
    let hidden = gpu.upload(&synthetic_hidden(&geometry, 5, 5)).unwrap();
    replay.stage(&mut pool, &scrambled_slots(8, 5), &hidden).unwrap();
    let (allocated, launched) = (gpu.allocations(), gpu.launches().len());
    replay.launch_staged(&mut pool).unwrap();
    replay.launch_staged(&mut pool).unwrap();
    assert_eq!(gpu.allocations(), allocated);
    assert!(gpu.launches().len() > launched, "nothing launched");
}
