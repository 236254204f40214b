//! Launches whose safety rests partly on the caller: entries whose reach depends on data kda
//! cannot check before the launch (an index buffer's contents, a layout that lives on the
//! device), which the manifest's `safety` names. Their typed launchers are `unsafe fn`s whose
//! `# Safety` states each condition, and call [`launch_trusting`]; a safe launch of such an entry
//! is refused ([`BackendError::Trusted`]).

use crate::signature;
use crate::{BackendError, GpuBackend, KernelArg, KernelEntry, KernelHandle, LaunchGeometry};

/// Launches `kernel`, `gpu`'s handle for `entry`, after checking everything kda can check of
/// `args` and `geometry` against `entry`'s signature, as a safe launch does
/// ([`signature::check`]), less the refusal of an entry with `safety` conditions. A handle that is
/// not the one `gpu` looks `entry` up to (a table's public field overwritten, another entry's
/// handle) is refused.
///
/// # Safety
///
/// The caller guarantees every condition of `entry`'s signature (each buffer parameter's
/// [`Extent::trust`](crate::signature::Extent::trust)) for these arguments and this geometry:
/// with it, every view holds what the kernel touches through it.
pub unsafe fn launch_trusting(
    gpu: &dyn GpuBackend,
    entry: &KernelEntry,
    kernel: KernelHandle,
    geometry: LaunchGeometry,
    args: &mut [KernelArg<'_>],
) -> Result<(), BackendError> {
    // A lookup is idempotent (one handle per entry and signature on every backend), so this is
    // the handle whose kernel the backend proved `entry`'s signature for.
    let proved = gpu.lookup(entry).ok();
    if proved != Some(kernel) {
        return Err(BackendError::ForeignResource {
            what: format!("{kernel}, which is not the handle of `{}`,", entry.path()),
            backend: gpu.describe(),
        });
    }
    signature::check_trusting(entry, &geometry, args)?;
    // SAFETY: `launch_unchecked`'s conditions hold as they do for a safe launch (see
    // `CudaBackend::launch`): `check_trusting` just proved the argument count, kinds, element
    // types, access, every extent and every requirement against `entry`'s signature, which is
    // `kernel`'s (the lookup above) and which the build and the lookup proved against the
    // kernel's C declaration; what the kernel touches beyond the extents is the caller's
    // condition.
    unsafe { gpu.launch_unchecked(kernel, geometry, args) }
}
