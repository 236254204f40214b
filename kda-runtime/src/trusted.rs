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
    // The handle a lookup of `entry` gives (one per entry and signature on every backend) is
    // the one whose kernel the backend proved `entry`'s signature for.
    if !gpu.is_handle_of(kernel, entry) {
        return Err(BackendError::ForeignResource {
            what: format!("{kernel}, which is not the handle of `{}`,", entry.path()),
            backend: gpu.describe(),
        });
    }
    signature::check_trusting(entry, &geometry, args)?;
    // SAFETY: `launch_unchecked`'s conditions hold as they do for a safe launch (see
    // `CudaBackend::launch`): `check_trusting` just proved the argument count, kinds, element
    // types, access, every extent and every requirement against `entry`'s signature, which is
    // `kernel`'s (`is_handle_of` above) and which the build and the lookup proved against the
    // kernel's C declaration; what the kernel touches beyond the extents is the caller's
    // condition.
    unsafe { gpu.launch_unchecked(kernel, geometry, args) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GpuBackendExt;
    use crate::fixtures::{AXPY, AXPY_SIGNATURE, signed};
    use crate::record::RecordingBackend;

    #[test]
    fn a_trusted_launch_proves_its_handle_without_a_lookup_and_refuses_any_other() {
        // Another entry of the same contract: its handle still is not `axpy`'s.
        const SCALE: KernelEntry = signed("blas", "scale", &AXPY_SIGNATURE);
        let gpu = RecordingBackend::new().with_entry(&AXPY).with_entry(&SCALE);
        let other = RecordingBackend::new().with_entry(&AXPY);
        let (axpy, scale) = (gpu.lookup(&AXPY).unwrap(), gpu.lookup(&SCALE).unwrap());
        let foreign = other.lookup(&AXPY).unwrap();
        let (x, mut y) = (gpu.zeros::<f32>(4).unwrap(), gpu.zeros::<f32>(4).unwrap());
        let mut launch = |kernel| {
            let args = &mut [x.view().into(), y.view_mut().into(), 4u32.into(), 2.0f32.into()];
            // SAFETY: `axpy` has no `safety` conditions, and the recording backend runs nothing.
            unsafe { launch_trusting(&gpu, &AXPY, kernel, LaunchGeometry::linear(4, 32), args) }
        };
        launch(axpy).unwrap();
        for kernel in [scale, foreign] {
            let error = launch(kernel).unwrap_err();
            let refused = error.to_string();
            assert!(matches!(error, BackendError::ForeignResource { .. }), "{refused}");
            assert!(refused.contains("which is not the handle of `test.axpy`"), "{refused}");
        }
        assert_eq!(gpu.launches().len(), 1);
        assert_eq!(gpu.lookups().len(), 2, "the lookups above, none for the launches");
    }
}
