//! Batched decode over a state pool, on the CPU reference backend: a batched step is one
//! `decode_step` per sequence (bit for bit: on the reference every dense dispatch class sums in
//! the GEMV's order), the slots a step does not name come back unchanged, a bad slot is refused
//! before anything runs, and a released slot starts a fresh sequence.

use half::bf16;
use kda::block::{BlockError, Glm5NextKdaBlock, KdaState, KdaStatePool, SlotError};
use kda::geometry::KdaGeometry;
use kda::rng::SplitMix64;
use kda::weights::{HostWeights, synthetic_hidden};
use kda_runtime::{GpuBackend, GpuBackendExt};

/// Every slot's conv window and recurrent state, on the host.
#[derive(Debug, PartialEq)]
struct PoolContents {
    conv: Vec<u32>,
    recurrent: Vec<u32>,
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|x| x.to_bits()).collect()
}

fn contents(gpu: &dyn GpuBackend, pool: &KdaStatePool) -> PoolContents {
    PoolContents {
        conv: bits(&gpu.download::<f32>(pool.conv()).unwrap()),
        recurrent: bits(&gpu.download::<f32>(pool.recurrent()).unwrap()),
    }
}

impl PoolContents {
    /// Slot `slot`'s window and state.
    fn slot(&self, slot: usize, capacity: usize) -> (&[u32], &[u32]) {
        let (conv, recurrent) = (self.conv.len() / capacity, self.recurrent.len() / capacity);
        (&self.conv[slot * conv..][..conv], &self.recurrent[slot * recurrent..][..recurrent])
    }
}

/// A single sequence's window and state, on the host.
fn state_bits(gpu: &dyn GpuBackend, state: &KdaState) -> (Vec<u32>, Vec<u32>) {
    (
        bits(&gpu.download::<f32>(state.conv()).unwrap()),
        bits(&gpu.download::<f32>(state.recurrent()).unwrap()),
    )
}

/// `n` of `0..capacity` in a seeded order.
fn shuffled_slots(capacity: u32, n: usize, seed: u64) -> Vec<u32> {
    let mut rng = SplitMix64::new(seed);
    let mut slots: Vec<u32> = (0..capacity).collect();
    for i in (1..slots.len()).rev() {
        slots.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    slots.truncate(n);
    slots
}

/// The prompt of sequence `slot`: 1 to 5 tokens, its own.
fn prompt(geometry: &KdaGeometry, slot: u32) -> Vec<bf16> {
    synthetic_hidden(geometry, 1 + slot as usize % 5, 100 + u64::from(slot))
}

/// A pool of `capacity` held slots, each prefilled with its prompt, and the same sequences each
/// in a state of its own, prefilled the same way.
fn sequences(
    block: &Glm5NextKdaBlock<'_>,
    gpu: &dyn GpuBackend,
    capacity: u32,
) -> (KdaStatePool, Vec<KdaState>) {
    let mut pool = block.new_pool(capacity).unwrap();
    let mut singles = Vec::new();
    for expected in 0..capacity {
        assert_eq!(block.acquire(&mut pool).unwrap(), expected, "slots are handed out in order");
        let prompt = gpu.upload(&prompt(block.geometry(), expected)).unwrap();
        let pooled = block.prefill_slot(&mut pool, expected, &prompt).unwrap();
        let mut single = block.new_state().unwrap();
        let alone = block.prefill(&mut single, &prompt).unwrap();
        assert_eq!(gpu.download::<bf16>(&pooled).unwrap(), gpu.download::<bf16>(&alone).unwrap());
        singles.push(single);
    }
    (pool, singles)
}

#[test]
fn a_batched_step_is_one_decode_step_per_sequence_in_any_slot_order() {
    let gpu = kda::reference::backend();
    let geometry = KdaGeometry::tiny();
    let block = Glm5NextKdaBlock::new(&gpu, geometry, &HostWeights::synthetic(&geometry, 7)).unwrap();
    let width = geometry.hidden as usize;
    // 1: the GEMV; 2, 7, 16: the batched GEMV; 17, 64: the GEMM.
    for b in [1usize, 2, 7, 16, 17, 64] {
        let capacity = b as u32 + 3;
        let (mut pool, mut singles) = sequences(&block, &gpu, capacity);
        let prefilled = contents(&gpu, &pool);
        for (slot, single) in singles.iter().enumerate() {
            let (conv, recurrent) = prefilled.slot(slot, capacity as usize);
            assert_eq!(
                state_bits(&gpu, single),
                (conv.to_vec(), recurrent.to_vec()),
                "B = {b}, slot {slot} prefilled"
            );
        }

        let slots = shuffled_slots(capacity, b, b as u64);
        let hidden = synthetic_hidden(&geometry, b, 500 + b as u64);
        let out = block.decode_batch(&mut pool, &slots, &gpu.upload(&hidden).unwrap()).unwrap();
        let out = gpu.download::<bf16>(&out).unwrap();
        assert_eq!(out.len(), b * width);

        let after = contents(&gpu, &pool);
        for (row, &slot) in slots.iter().enumerate() {
            let token = gpu.upload(&hidden[row * width..][..width]).unwrap();
            let single = &mut singles[slot as usize];
            let alone = gpu.download::<bf16>(&block.decode_step(single, &token).unwrap()).unwrap();
            let got: Vec<u16> = out[row * width..][..width].iter().map(|x| x.to_bits()).collect();
            let want: Vec<u16> = alone.iter().map(|x| x.to_bits()).collect();
            assert_eq!(got, want, "B = {b}: row {row} (slot {slot})");
            let (conv, recurrent) = after.slot(slot as usize, capacity as usize);
            assert_eq!(state_bits(&gpu, single), (conv.to_vec(), recurrent.to_vec()), "B = {b}: slot {slot}");
        }
        for slot in (0..capacity).filter(|slot| !slots.contains(slot)) {
            let slot = slot as usize;
            assert_eq!(
                after.slot(slot, capacity as usize),
                prefilled.slot(slot, capacity as usize),
                "B = {b}: slot {slot}, not named, changed"
            );
        }
    }
}

#[test]
fn a_step_naming_a_bad_slot_is_refused_before_anything_runs() {
    let gpu = kda::reference::backend();
    let geometry = KdaGeometry::tiny();
    let block = Glm5NextKdaBlock::new(&gpu, geometry, &HostWeights::synthetic(&geometry, 8)).unwrap();
    let (mut pool, _) = sequences(&block, &gpu, 4);
    pool.release(3).unwrap();
    let before = contents(&gpu, &pool);
    let two = gpu.upload(&synthetic_hidden(&geometry, 2, 9)).unwrap();
    // The slot error each step must give; `None`: the wrong row count, an input error.
    let refusals: [(&[u32], Option<SlotError>); 5] = [
        (&[0, 4], Some(SlotError::OutOfRange { slot: 4, capacity: 4 })),
        (&[0, u32::MAX], Some(SlotError::OutOfRange { slot: u32::MAX, capacity: 4 })),
        (&[1, 1], Some(SlotError::Repeated { slot: 1 })),
        (&[0, 3], Some(SlotError::Free { slot: 3 })),
        (&[0, 1, 2], None),
    ];
    for (slots, expected) in refusals {
        let result = block.decode_batch(&mut pool, slots, &two);
        let refused = match (&result, expected) {
            (Err(BlockError::Slot(found)), Some(expected)) => *found == expected,
            (Err(BlockError::Input { .. }), None) => true,
            _ => false,
        };
        assert!(refused, "slots {slots:?}: {result:?}");
        assert_eq!(contents(&gpu, &pool), before, "slots {slots:?}: the pool changed");
    }
    let one = gpu.upload(&synthetic_hidden(&geometry, 1, 10)).unwrap();
    let result = block.prefill_slot(&mut pool, 3, &one);
    assert!(matches!(result, Err(BlockError::Slot(SlotError::Free { slot: 3 }))), "{result:?}");
    assert_eq!(pool.release(3), Err(SlotError::Free { slot: 3 }));
    assert_eq!(pool.release(9), Err(SlotError::OutOfRange { slot: 9, capacity: 4 }));
    assert_eq!(contents(&gpu, &pool), before);
}

#[test]
fn a_released_slot_starts_a_fresh_sequence_and_a_full_pool_is_an_error() {
    let gpu = kda::reference::backend();
    let geometry = KdaGeometry::tiny();
    let block = Glm5NextKdaBlock::new(&gpu, geometry, &HostWeights::synthetic(&geometry, 11)).unwrap();
    let (mut pool, _) = sequences(&block, &gpu, 3);
    let full = block.acquire(&mut pool);
    assert!(matches!(full, Err(BlockError::Slot(SlotError::Full { capacity: 3 }))), "{full:?}");
    assert_eq!(pool.in_use(), 3);

    let before = contents(&gpu, &pool);
    pool.release(1).unwrap();
    assert!(!pool.holds(1));
    assert_eq!(block.acquire(&mut pool).unwrap(), 1, "the freed slot is handed out again");
    let reset = contents(&gpu, &pool);
    let (conv, recurrent) = reset.slot(1, 3);
    assert!(conv.iter().chain(recurrent).all(|&x| x == 0), "a reacquired slot starts from zero");
    for slot in [0, 2] {
        assert_eq!(reset.slot(slot, 3), before.slot(slot, 3), "slot {slot} changed");
    }

    // The new sequence runs as one that was never anywhere else.
    let mut fresh = block.new_state().unwrap();
    let tokens = synthetic_hidden(&geometry, 3, 12);
    let width = geometry.hidden as usize;
    for token in tokens.chunks_exact(width) {
        let token = gpu.upload(token).unwrap();
        let pooled = block.decode_batch(&mut pool, &[1], &token).unwrap();
        let alone = block.decode_step(&mut fresh, &token).unwrap();
        assert_eq!(gpu.download::<bf16>(&pooled).unwrap(), gpu.download::<bf16>(&alone).unwrap());
    }
    let (conv, recurrent) = state_bits(&gpu, &fresh);
    let after = contents(&gpu, &pool);
    assert_eq!(after.slot(1, 3), (conv.as_slice(), recurrent.as_slice()));
}
