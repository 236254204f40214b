//! The states of the sequences a block decodes: a pool of slots, each one sequence's conv window
//! and recurrent state, addressed by index the way a serving engine's scheduler addresses them.

use kda_runtime::{DType, DeviceBuffer, GpuBackend, View, ViewMut};

use super::{BlockError, elements};
use crate::geometry::{CONV_WIDTH, KdaGeometry};

/// Why a slot of a [`KdaStatePool`] could not be used.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SlotError {
    /// An index past the pool.
    #[error("slot {slot} is outside the pool of {capacity} sequences")]
    OutOfRange {
        /// The index named.
        slot: u32,
        /// The pool's size.
        capacity: u32,
    },
    /// One step names a slot twice.
    #[error("slot {slot} is named twice in one step")]
    Repeated {
        /// The index named twice.
        slot: u32,
    },
    /// A slot that no sequence holds (never acquired, or released).
    #[error("slot {slot} holds no sequence: acquire it first")]
    Free {
        /// The index named.
        slot: u32,
    },
    /// Every slot holds a sequence.
    #[error("all {capacity} slots of the pool hold a sequence")]
    Full {
        /// The pool's size.
        capacity: u32,
    },
}

/// The conv windows and recurrent states of up to `capacity` sequences, one slot each, made by
/// [`Glm5NextKdaBlock::new_pool`](super::Glm5NextKdaBlock::new_pool) for that block's geometry and
/// backend. A step names its slots by index; the slots it does not name are not touched.
///
/// [`Glm5NextKdaBlock::acquire`](super::Glm5NextKdaBlock::acquire) hands out a free slot holding
/// a fresh sequence (zero window, zero state); [`KdaStatePool::release`] gives it back.
#[derive(Debug)]
pub struct KdaStatePool {
    geometry: KdaGeometry,
    /// f32 `[capacity, 3·qkv, W]`: per slot, channel-major, position `W-1` the newest input.
    conv: DeviceBuffer,
    /// f32 `[capacity, H, D, D]`: per slot, K-major.
    recurrent: DeviceBuffer,
    /// Whether each slot holds a sequence.
    held: Vec<bool>,
}

impl KdaStatePool {
    /// A pool of `capacity` free slots on `gpu`.
    pub(super) fn new(
        gpu: &dyn GpuBackend,
        geometry: KdaGeometry,
        capacity: u32,
    ) -> Result<Self, BlockError> {
        let g = &geometry;
        let conv = elements("slots·3·qkv·W", &[capacity, g.conv_dim(), CONV_WIDTH])?;
        let recurrent = elements("slots·H·D·D", &[capacity, g.heads, g.head_dim, g.head_dim])?;
        Ok(Self {
            geometry,
            conv: gpu.alloc(DType::F32, conv)?,
            recurrent: gpu.alloc(DType::F32, recurrent)?,
            held: vec![false; capacity as usize],
        })
    }

    /// A pool of the same capacity on the same backend holding the same sequences in the same
    /// slots: a snapshot that steps independently of this one.
    pub(super) fn duplicate(&self, gpu: &dyn GpuBackend) -> Result<Self, BlockError> {
        let copy = |buffer: &DeviceBuffer| -> Result<DeviceBuffer, BlockError> {
            let mut copy = gpu.alloc(buffer.dtype(), buffer.len())?;
            gpu.copy_on_device(buffer.view(), copy.view_mut())?;
            Ok(copy)
        };
        Ok(Self {
            geometry: self.geometry,
            conv: copy(&self.conv)?,
            recurrent: copy(&self.recurrent)?,
            held: self.held.clone(),
        })
    }

    /// How many sequences the pool holds at most.
    pub fn capacity(&self) -> u32 {
        self.held.len() as u32
    }

    /// How many slots hold a sequence.
    pub fn in_use(&self) -> usize {
        self.held.iter().filter(|&&held| held).count()
    }

    /// Whether `slot` holds a sequence.
    pub fn holds(&self, slot: u32) -> bool {
        self.held.get(slot as usize).copied().unwrap_or(false)
    }

    /// Gives `slot` back: its sequence ends, and the slot may be acquired for a new one.
    pub fn release(&mut self, slot: u32) -> Result<(), SlotError> {
        self.check_held(slot)?;
        self.held[slot as usize] = false;
        Ok(())
    }

    /// The geometry the pool was made for.
    pub fn geometry(&self) -> &KdaGeometry {
        &self.geometry
    }

    /// Every slot's conv window: f32 `[capacity, 3·qkv, W]`.
    pub fn conv(&self) -> &DeviceBuffer {
        &self.conv
    }

    /// Every slot's recurrent state: f32 `[capacity, H, D, D]`, K-major within a slot.
    pub fn recurrent(&self) -> &DeviceBuffer {
        &self.recurrent
    }

    /// Elements of one slot's conv window and of its recurrent state.
    fn slot_lens(&self) -> (usize, usize) {
        let capacity = self.held.len().max(1);
        (self.conv.len() / capacity, self.recurrent.len() / capacity)
    }

    /// One slot's conv window and recurrent state, read-only.
    pub fn slot(&self, slot: u32) -> Result<(View<'_>, View<'_>), SlotError> {
        self.check_range(slot)?;
        let (conv, recurrent) = self.slot_lens();
        let at = slot as usize;
        Ok((
            self.conv.slice(at * conv..(at + 1) * conv),
            self.recurrent.slice(at * recurrent..(at + 1) * recurrent),
        ))
    }

    /// One held slot's conv window and recurrent state, for a kernel that updates one sequence.
    pub(super) fn slot_mut(&mut self, slot: u32) -> Result<(ViewMut<'_>, ViewMut<'_>), SlotError> {
        self.check_held(slot)?;
        let (conv, recurrent) = self.slot_lens();
        let at = slot as usize;
        Ok((
            self.conv.slice_mut(at * conv..(at + 1) * conv),
            self.recurrent.slice_mut(at * recurrent..(at + 1) * recurrent),
        ))
    }

    /// Both pool buffers, for the batched kernels, which address the slots themselves.
    pub(super) fn buffers_mut(&mut self) -> (&mut DeviceBuffer, &mut DeviceBuffer) {
        (&mut self.conv, &mut self.recurrent)
    }

    /// The first free slot, now marked held (its contents are the caller's to reset).
    pub(super) fn take_free(&mut self) -> Result<u32, SlotError> {
        let free =
            self.held.iter().position(|&held| !held).ok_or(SlotError::Full { capacity: self.capacity() })?;
        self.held[free] = true;
        Ok(free as u32)
    }

    /// Checks the slots of one step: each held, none twice.
    pub(super) fn check_step(&self, slots: &[u32]) -> Result<(), SlotError> {
        let mut named = vec![false; self.held.len()];
        for &slot in slots {
            self.check_held(slot)?;
            if std::mem::replace(&mut named[slot as usize], true) {
                return Err(SlotError::Repeated { slot });
            }
        }
        Ok(())
    }

    fn check_range(&self, slot: u32) -> Result<(), SlotError> {
        if (slot as usize) < self.held.len() {
            Ok(())
        } else {
            Err(SlotError::OutOfRange { slot, capacity: self.capacity() })
        }
    }

    fn check_held(&self, slot: u32) -> Result<(), SlotError> {
        self.check_range(slot)?;
        if self.held[slot as usize] { Ok(()) } else { Err(SlotError::Free { slot }) }
    }
}

/// One sequence's state between calls: a pool of one slot, made by
/// [`Glm5NextKdaBlock::new_state`](super::Glm5NextKdaBlock::new_state) for that block's geometry
/// and backend, with the slot held. The single-sequence calls (`decode_step`, `prefill`) run the
/// batched kernels on it with a batch of one.
#[derive(Debug)]
pub struct KdaState {
    pub(super) pool: KdaStatePool,
}

impl KdaState {
    /// The conv window: f32 `[3·qkv, W]`, channel-major, position `W-1` the newest input.
    pub fn conv(&self) -> &DeviceBuffer {
        self.pool.conv()
    }

    /// The recurrent state: f32 `[H, D, D]`, K-major (`S[h][k][v]` at `(h·D + k)·D + v`).
    pub fn recurrent(&self) -> &DeviceBuffer {
        self.pool.recurrent()
    }

    /// The geometry it was made for.
    pub fn geometry(&self) -> &KdaGeometry {
        self.pool.geometry()
    }
}
