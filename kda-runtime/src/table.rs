//! The trait `#[derive(KernelTable)]` implements for a marker type.

use crate::{GpuBackend, KernelEntry, ResolveError};

/// A kernel table: a manifest table, described without resolving it.
///
/// Implemented by `#[derive(KernelTable)]` on a marker type; the handles struct it generates is
/// [`KernelTable::Kernels`]. Generic code (tests, reports, backends that register a whole table)
/// works from this trait.
pub trait KernelTable {
    /// The generated struct of resolved handles.
    type Kernels;
    /// The manifest table, e.g. `"my_model"`.
    const NAME: &'static str;
    /// Every entry of the table, in manifest order.
    const ENTRIES: &'static [KernelEntry];
    /// Looks every entry up on `gpu`; see [`crate::Resolver`] for the semantics.
    fn resolve(gpu: &dyn GpuBackend) -> Result<Self::Kernels, ResolveError>;
}
