//! Checks of the replayed decode step that every backend's suite runs: the CPU reference
//! (tests/replay.rs), the emulated CUDA kernels (tests/emulated.rs) and a GPU (tests/gpu.rs).

use kda::block::{Glm5NextKdaBlock, KdaStatePool};
use kda::geometry::KdaGeometry;
use kda::weights::{HostWeights, synthetic_hidden};
use kda_runtime::{GpuBackend, GpuBackendExt, bf16};

use kda::cases::{Check, HostData};

use kda::cases::parity::BLOCK_BOUND;

use super::SEED;

/// A pool of `capacity` held slots, slot `s` prefilled with a prompt of `1 + s % 5` tokens of its
/// own: the same contents every time it is made.
pub fn prefilled_pool(block: &Glm5NextKdaBlock<'_>, gpu: &dyn GpuBackend, capacity: u32) -> KdaStatePool {
    let mut pool = block.new_pool(capacity).unwrap();
    for slot in 0..capacity {
        assert_eq!(block.acquire(&mut pool).unwrap(), slot);
        let prompt = synthetic_hidden(block.geometry(), 1 + slot as usize % 5, 100 + u64::from(slot));
        block.prefill_slot(&mut pool, slot, &gpu.upload(&prompt).unwrap()).unwrap();
    }
    pool
}

/// The bits of every slot's conv window and recurrent state.
pub fn pool_bits(gpu: &dyn GpuBackend, pool: &KdaStatePool) -> (Vec<u32>, Vec<u32>) {
    let bits = |values: Vec<f32>| values.iter().map(|x| x.to_bits()).collect();
    (bits(gpu.download(pool.conv()).unwrap()), bits(gpu.download(pool.recurrent()).unwrap()))
}

/// `b` distinct slots of `0..capacity` in a scrambled order (a stride coprime to `capacity`).
pub fn scrambled_slots(capacity: u32, b: u32) -> Vec<u32> {
    let stride = (2..capacity).find(|s| gcd(*s, capacity) == 1).unwrap_or(1);
    (0..b).map(|i| (i * stride + 3) % capacity).collect()
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// On `gpu`, a replay for up to `max_batch` sequences and `decode_batch` run the same steps on
/// two identically prefilled pools of `capacity` slots: for each batch size of `batches`, two
/// steps on scrambled slots, outputs and both pools bit for bit equal after each. Returns how
/// many classes the replay recorded, and how many of them run as a device graph.
pub fn assert_replay_is_decode_batch(
    gpu: &dyn GpuBackend,
    geometry: KdaGeometry,
    capacity: u32,
    max_batch: u32,
    batches: &[u32],
) -> (usize, usize) {
    let weights = HostWeights::synthetic(&geometry, SEED);
    let block = Glm5NextKdaBlock::new(gpu, geometry, &weights).unwrap_or_else(|error| panic!("{error}"));
    let mut replay = block.decode_replay(max_batch).unwrap();
    let (mut replayed, mut direct) =
        (prefilled_pool(&block, gpu, capacity), prefilled_pool(&block, gpu, capacity));
    for &b in batches {
        for step in 0..2u64 {
            let slots = scrambled_slots(capacity, b);
            let hidden =
                gpu.upload(&synthetic_hidden(&geometry, b as usize, 700 + step + 10 * u64::from(b))).unwrap();
            let want =
                gpu.download::<bf16>(&block.decode_batch(&mut direct, &slots, &hidden).unwrap()).unwrap();
            let got = replay.decode(&mut replayed, &slots, &hidden).unwrap_or_else(|error| panic!("{error}"));
            let host = gpu.download::<bf16>(got.buffer()).unwrap()[got.range()].to_vec();
            let bits = |values: &[bf16]| values.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            let what = format!("{} B = {b} (rows {}), step {step}", gpu.describe(), replay.rows_for(b));
            assert!(want.iter().all(|x| x.is_finite()) && want.iter().any(|x| x.to_f32() != 0.0), "{what}");
            assert_eq!(bits(&host), bits(&want), "{what}: outputs");
            assert!(pool_bits(gpu, &replayed) == pool_bits(gpu, &direct), "{what}: pools differ");
        }
    }
    println!(
        "{}: {} classes recorded, {} as device graphs",
        gpu.describe(),
        replay.recorded(),
        replay.captured()
    );
    (replay.recorded(), replay.captured())
}

/// `b` sequences of a prefilled pool through two batched decode steps on `gpu` and on the CPU
/// reference: outputs and pools within the ABI's block bound.
pub fn assert_batch_agrees(gpu: &dyn GpuBackend, geometry: KdaGeometry, capacity: u32, b: u32) {
    let cpu = kda::reference::backend();
    let weights = HostWeights::synthetic(&geometry, SEED);
    let run = |gpu: &dyn GpuBackend| {
        let block = Glm5NextKdaBlock::new(gpu, geometry, &weights).unwrap_or_else(|error| panic!("{error}"));
        let mut pool = prefilled_pool(&block, gpu, capacity);
        let mut outputs = Vec::new();
        for step in 0..2 {
            let hidden = gpu.upload(&synthetic_hidden(&geometry, b as usize, 900 + step)).unwrap();
            let out = block.decode_batch(&mut pool, &scrambled_slots(capacity, b), &hidden).unwrap();
            outputs.extend(gpu.download::<bf16>(&out).unwrap());
        }
        (outputs, gpu.download::<f32>(pool.conv()).unwrap(), gpu.download::<f32>(pool.recurrent()).unwrap())
    };
    let (got, want) = (run(gpu), run(&cpu));
    let pairs = [
        ("outputs", HostData::Bf16(got.0), HostData::Bf16(want.0)),
        ("conv pool", HostData::F32(got.1), HostData::F32(want.1)),
        ("recurrent pool", HostData::F32(got.2), HostData::F32(want.2)),
    ];
    let check = Check::RelativeRms(BLOCK_BOUND);
    for (what, got, want) in pairs {
        let what = format!("{}: B = {b}, two batched steps, {what}", gpu.describe());
        match check.compare(&got, &want, want.len()) {
            Ok(measured) => println!("{what}: ok [{check}] {measured}"),
            Err(mismatch) => panic!("{what}: [{check}] {mismatch}"),
        }
    }
}
