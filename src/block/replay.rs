//! The batched decode step recorded once per dispatch class and replayed: a serving loop's step
//! without the host work of choosing kernels and sizes, and without allocating. Where the backend
//! has device graphs (CUDA), the recording is captured into one and a step is one graph launch.
//!
//! A step of `B` rows runs on the recording of its class, at the class's row count: 1 (the GEMV),
//! up to 16 (the batched GEMV), up to 128 (the GEMM on one row of tiles, which may split K) and up
//! to the replay's `max_batch` (the GEMM). The rows past `B` get slot `u32::MAX`, which the
//! stateful kernels skip, so they touch no sequence; every row's projections are computed on its
//! own, the same way for every row count of a class, so a padded row changes no other row's
//! result.

use kda_runtime::replay::{CapturedList, LaunchList, LaunchRecorder};
use kda_runtime::{DType, DeviceBuffer, GpuBackendExt, View};

use super::workspace::DecodeScratch;
use super::{BlockError, DecodeRows, Glm5NextKdaBlock, KdaStatePool, elements};
use crate::geometry::KdaGeometry;
use crate::kernels::defines::{DENSE_GEMV_BATCHM_MAX_M, GEMM_TILE_M};
use crate::launch;

/// The slot of a row that carries no sequence: outside every pool, so the kernels skip it.
const NO_SLOT: u32 = u32::MAX;

/// A block's batched decode step, recorded on first use for each dispatch class of the batch
/// size and for the pool's capacity, then replayed: [`DecodeReplay::decode`] is
/// [`Glm5NextKdaBlock::decode_batch`] with the same results (bit for bit), on buffers it keeps.
///
/// After a class is recorded, a step copies its input and slots into the class's workspace and
/// replays the launch list: it allocates no device memory. A pool of another capacity is
/// recorded again.
pub struct DecodeReplay<'b, 'g> {
    block: &'b Glm5NextKdaBlock<'g>,
    max_batch: u32,
    /// The recording of each class: 1 row, the batched GEMV's rows, one row of GEMM tiles,
    /// `max_batch` rows.
    classes: [Option<RecordedStep>; 4],
    /// The slots of the current step, padded with [`NO_SLOT`]: the host side of the upload.
    slot_rows: Vec<u32>,
    /// Whether to capture device graphs: until the backend first makes none.
    graphs: bool,
    /// The step whose input the workspace of its class holds.
    staged: Option<Staged>,
}

/// A step staged ([`DecodeReplay::stage`]): its class and batch size.
#[derive(Clone, Copy)]
struct Staged {
    class: usize,
    b: u32,
}

impl Staged {
    /// The elements of the step's output, `[b, hidden]`, the first of its class's workspace.
    fn output_len(self, g: &KdaGeometry) -> usize {
        self.b as usize * g.hidden as usize
    }
}

/// One class's recording and the buffers it is bound to.
struct RecordedStep {
    workspace: DecodeWorkspace,
    launches: LaunchList,
    /// The launches captured into a device graph on the buffers of the last pool replayed, where
    /// the backend has graphs.
    graph: Option<CapturedList>,
    /// The capacity of the pool it was recorded on: the pool buffers' lengths follow from it.
    pool_capacity: u32,
}

/// The buffers of a recorded step of `rows` rows, kept between steps.
struct DecodeWorkspace {
    /// `[rows, hidden]` bf16: the step's input, copied in before each replay.
    hidden: DeviceBuffer,
    /// `[rows]` u32: the pool slot of each row, [`NO_SLOT`] past the step's batch.
    slot: DeviceBuffer,
    scratch: DecodeScratch,
    /// `[rows, hidden]` bf16: the step's output.
    out: DeviceBuffer,
}

/// A recording's bindings: what it reads and what it writes, in a fixed order.
struct Bindings<'a> {
    shared: Vec<&'a DeviceBuffer>,
    exclusive: Vec<&'a mut DeviceBuffer>,
}

impl DecodeWorkspace {
    fn new(block: &Glm5NextKdaBlock<'_>, rows: u32) -> Result<Self, BlockError> {
        let (gpu, g) = (block.gpu, &block.geometry);
        let width = elements("B·hidden", &[rows, g.hidden])?;
        Ok(Self {
            hidden: gpu.alloc(DType::Bf16, width)?,
            slot: gpu.upload(&vec![NO_SLOT; rows as usize])?,
            scratch: DecodeScratch::new(gpu, g, rows, block.partials_len(rows))?,
            out: gpu.alloc(DType::Bf16, width)?,
        })
    }

    fn rows(&self) -> usize {
        self.slot.len()
    }

    /// The weights, the input and the slots (read only within the step); the scratch, the output
    /// and the pool (written).
    fn bindings<'a>(
        &'a mut self,
        block: &'a Glm5NextKdaBlock<'_>,
        pool: &'a mut KdaStatePool,
    ) -> Bindings<'a> {
        let mut shared = block.weights.buffers().to_vec();
        shared.extend([&self.hidden, &self.slot]);
        let (conv, recurrent) = pool.buffers_mut();
        let exclusive = self.scratch.buffers_mut().chain([&mut self.out, conv, recurrent]).collect();
        Bindings { shared, exclusive }
    }
}

impl<'b, 'g> DecodeReplay<'b, 'g> {
    /// A replay of `block`'s decode step for batches of 1 to `max_batch` sequences; nothing is
    /// recorded or allocated until a class is first used.
    pub(super) fn new(block: &'b Glm5NextKdaBlock<'g>, max_batch: u32) -> Result<Self, BlockError> {
        if !(1..=launch::MAX_DECODE_BATCH).contains(&max_batch) {
            return Err(BlockError::Input {
                expected: format!("a batch of 1 to {} sequences", launch::MAX_DECODE_BATCH),
                found: format!("{max_batch}"),
            });
        }
        Ok(Self {
            block,
            max_batch,
            classes: [None, None, None, None],
            slot_rows: Vec::new(),
            graphs: true,
            staged: None,
        })
    }

    /// The most sequences one step takes.
    pub fn max_batch(&self) -> u32 {
        self.max_batch
    }

    /// The row count a step of `b` sequences runs at: the largest batch of its dispatch class.
    pub fn rows_for(&self, b: u32) -> u32 {
        self.class_of(b).1
    }

    /// How many classes have been recorded.
    pub fn recorded(&self) -> usize {
        self.classes.iter().flatten().count()
    }

    /// How many recorded classes run as a device graph (none where the backend has no graphs).
    pub fn captured(&self) -> usize {
        self.classes.iter().flatten().filter(|step| step.graph.is_some()).count()
    }

    /// One token for each of `slots.len()` sequences of `pool`, as
    /// [`Glm5NextKdaBlock::decode_batch`] (the same checks, before anything runs, and the same
    /// results); returns the `[B, hidden]` bf16 output, which the next step overwrites.
    /// [`Self::stage`] then [`Self::launch_staged`].
    pub fn decode(
        &mut self,
        pool: &mut KdaStatePool,
        slots: &[u32],
        hidden: &DeviceBuffer,
    ) -> Result<View<'_>, BlockError> {
        self.stage(pool, slots, hidden)?;
        self.launch_staged(pool)
    }

    /// The first half of [`Self::decode`]: checks the step as it does, records its class if it is
    /// not yet recorded, and copies `slots` and `hidden` into the class's workspace, launching
    /// nothing. The step is then [`Self::launch_staged`], as often as the caller likes.
    ///
    /// This is how an engine replays the step in a CUDA graph of its own: it stages each step's
    /// input outside its capture (a capture cannot take a copy from the host), and captures
    /// `launch_staged` once (see `docs/engines.md`, "A model's step in the engine's graph").
    pub fn stage(
        &mut self,
        pool: &mut KdaStatePool,
        slots: &[u32],
        hidden: &DeviceBuffer,
    ) -> Result<(), BlockError> {
        let block = self.block;
        let b = block.check_decode(pool, slots, hidden, self.max_batch)?;
        let (class, rows) = self.class_of(b);
        self.staged = None;
        let step = recorded_step(&mut self.classes[class], block, rows, pool)?;
        let slot_rows = &mut self.slot_rows;
        slot_rows.clear();
        slot_rows.extend(slots);
        slot_rows.resize(step.workspace.rows(), NO_SLOT);
        let gpu = block.gpu;
        gpu.write(slot_rows, &mut step.workspace.slot)?;
        gpu.copy_on_device(hidden.view(), step.workspace.hidden.slice_mut(0..hidden.len()))?;
        self.staged = Some(Staged { class, b });
        Ok(())
    }

    /// The second half of [`Self::decode`]: the launches of the step last staged
    /// ([`Self::stage`]) on `pool`, with no copy and no allocation; returns the step's output,
    /// as [`Self::output`]. An `Err` where no step is staged, or `pool` is not one of the
    /// capacity the step was staged for.
    pub fn launch_staged(&mut self, pool: &mut KdaStatePool) -> Result<View<'_>, BlockError> {
        let block = self.block;
        block.check_pool(pool)?;
        let staged = self.staged.ok_or_else(|| BlockError::Input {
            expected: "a staged step (DecodeReplay::stage)".to_owned(),
            found: "none".to_owned(),
        })?;
        let step = self.classes[staged.class].as_mut().filter(|step| step.pool_capacity == pool.capacity());
        let step = step.ok_or_else(|| BlockError::Input {
            expected: "the pool the step was staged for".to_owned(),
            found: format!("a pool of {} slots", pool.capacity()),
        })?;
        let (gpu, width) = (block.gpu, staged.output_len(&block.geometry));
        let Bindings { shared, mut exclusive } = step.workspace.bindings(block, pool);
        // A device graph where the backend has graphs, captured again for another pool's buffers;
        // else the launches one by one. A backend that made no graph is not asked again, so steps
        // on one without graphs do no capture work.
        let bound = step.graph.as_ref().is_some_and(|graph| graph.is_bound_to(&shared, &exclusive));
        if self.graphs && !bound {
            step.graph = step.launches.capture(gpu, &shared, &mut exclusive)?;
            self.graphs = step.graph.is_some();
        }
        match &step.graph {
            Some(graph) => graph.launch(&shared, &mut exclusive)?,
            None => step.launches.replay(gpu, &shared, &mut exclusive)?,
        }
        Ok(step.workspace.out.slice(0..width))
    }

    /// The `[B, hidden]` bf16 output of the step last staged, as its last launch left it.
    pub fn output(&self) -> Option<View<'_>> {
        let staged = self.staged?;
        let step = self.classes[staged.class].as_ref()?;
        Some(step.workspace.out.slice(0..staged.output_len(&self.block.geometry)))
    }

    /// Records the step of `b` sequences on pools of `pool`'s capacity now, if it is not yet
    /// recorded, so that the first [`Self::decode`] of that class replays too (a serving loop
    /// records its classes before it takes requests). No sequence of `pool` moves.
    pub fn prepare(&mut self, pool: &mut KdaStatePool, b: u32) -> Result<(), BlockError> {
        self.block.check_pool(pool)?;
        if !(1..=self.max_batch).contains(&b) {
            return Err(BlockError::Input {
                expected: format!("a batch of 1 to {} sequences", self.max_batch),
                found: format!("{b}"),
            });
        }
        let (class, rows) = self.class_of(b);
        let recorded = self.classes[class].as_ref().is_some_and(|step| step.pool_capacity == pool.capacity());
        if !recorded && self.staged.is_some_and(|staged| staged.class == class) {
            // Recording the class again makes its workspace anew: the staged input is gone.
            self.staged = None;
        }
        recorded_step(&mut self.classes[class], self.block, rows, pool).map(drop)
    }

    /// The class of a batch of `b` and its row count: the dense products' dispatch
    /// ([`crate::ops::dense_mm_kernel`]) is the same for every batch of a class.
    fn class_of(&self, b: u32) -> (usize, u32) {
        match b {
            0 | 1 => (0, 1),
            2..=DENSE_GEMV_BATCHM_MAX_M => (1, DENSE_GEMV_BATCHM_MAX_M.min(self.max_batch)),
            _ if b <= GEMM_TILE_M => (2, GEMM_TILE_M.min(self.max_batch)),
            _ => (3, self.max_batch),
        }
    }
}

/// The recording of a class of `rows` rows in `recorded`, recorded now if there is none for
/// `pool`'s capacity.
fn recorded_step<'r>(
    recorded: &'r mut Option<RecordedStep>,
    block: &Glm5NextKdaBlock<'_>,
    rows: u32,
    pool: &mut KdaStatePool,
) -> Result<&'r mut RecordedStep, BlockError> {
    let step = match recorded.take() {
        Some(step) if step.pool_capacity == pool.capacity() => step,
        _ => record(block, rows, pool)?,
    };
    Ok(recorded.insert(step))
}

/// Runs one step of `rows` rows on `pool` with every slot [`NO_SLOT`] (so no sequence moves) and
/// records its launches.
fn record(
    block: &Glm5NextKdaBlock<'_>,
    rows: u32,
    pool: &mut KdaStatePool,
) -> Result<RecordedStep, BlockError> {
    let mut workspace = DecodeWorkspace::new(block, rows)?;
    let recorder = {
        let Bindings { shared, exclusive } = workspace.bindings(block, pool);
        let exclusive: Vec<&DeviceBuffer> = exclusive.into_iter().map(|buffer| &*buffer).collect();
        LaunchRecorder::new(block.gpu, &shared, &exclusive)
    };
    let DecodeWorkspace { hidden, slot, scratch, out } = &mut workspace;
    let rows = DecodeRows { hidden: hidden.view(), slot: slot.view(), out: out.view_mut() };
    block.decode_into(&recorder, rows, scratch, pool)?;
    Ok(RecordedStep { launches: recorder.finish(), graph: None, workspace, pool_capacity: pool.capacity() })
}
