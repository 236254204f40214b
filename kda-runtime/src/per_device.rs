//! One resolved kernel table per device, for an engine with several GPUs.
//!
//! Each device is its own backend (on CUDA, its own context), and a table's handles are the
//! backend's they were resolved on: another backend refuses them. So an engine resolves its table
//! once per device and launches each device's work with that device's handles. [`PerDevice`]
//! holds the pairs, resolved from the backends in order; a device that cannot resolve the table
//! is a [`DeviceResolveError`] naming it.
//!
//! ```
//! use kda_runtime::record::RecordingBackend;
//! use kda_runtime::{
//!     BackendError, GpuBackend, KernelEntry, KernelHandle, KernelTable, LaunchGeometry, PerDevice,
//!     ResolveError, Resolver, Signature,
//! };
//!
//! // By hand here, what `#[derive(KernelTable)]` writes: a table of one kernel of no parameters.
//! const NOOP: KernelEntry = KernelEntry {
//!     signature: Some(&Signature { params: &[], requires: &[] }),
//!     ..KernelEntry::named("ops", "noop")
//! };
//! struct Ops;
//! impl KernelTable for Ops {
//!     type Kernels = KernelHandle;
//!     const NAME: &'static str = "ops";
//!     const ENTRIES: &'static [KernelEntry] = &[NOOP];
//!     fn resolve(gpu: &dyn GpuBackend) -> Result<KernelHandle, ResolveError> {
//!         let mut resolver = Resolver::new(gpu, Self::NAME, "kernels.toml");
//!         let noop = resolver.required(&NOOP);
//!         resolver.finish(noop)
//!     }
//! }
//!
//! // Two devices (on CUDA: `CudaBackend::new(ordinal, ...)` for each ordinal).
//! let devices = PerDevice::<_, Ops>::resolve([
//!     RecordingBackend::new().with_table::<Ops>(),
//!     RecordingBackend::new().with_table::<Ops>(),
//! ])?;
//! let geometry = LaunchGeometry::linear(1, 32);
//! for (gpu, &noop) in devices.iter() {
//!     gpu.launch(noop, geometry, &mut [])?;
//! }
//! // Device 0's handle is not device 1's.
//! let ((_, &first), (second, _)) = (devices.device(0).unwrap(), devices.device(1).unwrap());
//! let refused = second.launch(first, geometry, &mut []);
//! assert!(matches!(refused, Err(BackendError::ForeignResource { .. })));
//! assert_eq!(second.launched(), ["ops::noop"]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::{GpuBackend, KernelTable, ResolveError};

/// The table `T` resolved on each of several backends, one per device, in the order given.
pub struct PerDevice<B, T: KernelTable> {
    devices: Vec<(B, T::Kernels)>,
}

/// A device of a [`PerDevice`] on which its table could not be resolved.
#[derive(Debug, thiserror::Error)]
#[error("device {device}: {source}")]
pub struct DeviceResolveError {
    /// The device's position among the backends given (a CUDA ordinal, where the backends were
    /// made in ordinal order).
    pub device: usize,
    /// What resolving the table there reported, the backend's description included.
    #[source]
    pub source: ResolveError,
}

impl<B: GpuBackend, T: KernelTable> PerDevice<B, T> {
    /// Resolves `T` on each of `backends`, in order; the first device that cannot is the `Err`,
    /// and the backends are dropped.
    pub fn resolve(backends: impl IntoIterator<Item = B>) -> Result<Self, DeviceResolveError> {
        let resolve = |(device, backend): (usize, B)| match T::resolve(&backend) {
            Ok(kernels) => Ok((backend, kernels)),
            Err(source) => Err(DeviceResolveError { device, source }),
        };
        let devices = backends.into_iter().enumerate().map(resolve).collect::<Result<_, _>>()?;
        Ok(Self { devices })
    }
}

impl<B, T: KernelTable> PerDevice<B, T> {
    /// Device `index`'s backend and the table's handles there; `None` past the last device.
    pub fn device(&self, index: usize) -> Option<(&B, &T::Kernels)> {
        self.devices.get(index).map(|(backend, kernels)| (backend, kernels))
    }

    /// Each device's backend and handles, in device order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&B, &T::Kernels)> {
        self.devices.iter().map(|(backend, kernels)| (backend, kernels))
    }

    /// The number of devices.
    pub fn len(&self) -> usize {
        self.devices.len()
    }

    /// Whether there are no devices (no backends were given).
    pub fn is_empty(&self) -> bool {
        self.devices.is_empty()
    }
}

impl<B, T: KernelTable> IntoIterator for PerDevice<B, T> {
    type Item = (B, T::Kernels);
    type IntoIter = std::vec::IntoIter<(B, T::Kernels)>;

    /// Each device's backend and handles, in device order, to move each to the thread that
    /// drives that device.
    fn into_iter(self) -> Self::IntoIter {
        self.devices.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error;

    use super::*;
    use crate::fixtures::AXPY;
    use crate::record::{RecordedArg, RecordingBackend};
    use crate::{BackendError, GpuBackendExt, KernelEntry, KernelHandle, LaunchGeometry, Resolver};

    /// A table of the one required entry `blas::axpy`.
    struct Axpy;

    impl KernelTable for Axpy {
        type Kernels = KernelHandle;
        const NAME: &'static str = "test";
        const ENTRIES: &'static [KernelEntry] = &[AXPY];

        fn resolve(gpu: &dyn GpuBackend) -> Result<KernelHandle, ResolveError> {
            let mut resolver = Resolver::new(gpu, Self::NAME, "kernels.toml");
            let axpy = resolver.required(&AXPY);
            resolver.finish(axpy)
        }
    }

    fn carrying_axpy() -> RecordingBackend {
        RecordingBackend::new().with_table::<Axpy>()
    }

    /// Launches `axpy` on `gpu` over `n` elements of buffers `gpu` allocates.
    fn launch_axpy(gpu: &RecordingBackend, axpy: KernelHandle, n: u32) -> Result<(), BackendError> {
        let x = gpu.zeros::<f32>(n as usize)?;
        let mut y = gpu.zeros::<f32>(n as usize)?;
        let args = &mut [x.view().into(), y.view_mut().into(), n.into(), 2f32.into()];
        gpu.launch(axpy, LaunchGeometry::linear(n, 128), args)
    }

    #[test]
    fn each_device_launches_its_own_table_on_its_own_backend() {
        let devices =
            PerDevice::<_, Axpy>::resolve([carrying_axpy(), carrying_axpy(), carrying_axpy()]).unwrap();
        assert_eq!(devices.len(), 3);
        assert!(devices.device(3).is_none());
        // Each device's n is its own, so a launch recorded on the wrong backend would show.
        for ((gpu, &axpy), n) in devices.iter().zip([5, 6, 7]) {
            launch_axpy(gpu, axpy, n).unwrap();
        }
        for (device, n) in [5u32, 6, 7].into_iter().enumerate() {
            let (gpu, _) = devices.device(device).unwrap();
            let launches = gpu.launches();
            assert_eq!(gpu.launched(), ["blas::axpy"], "device {device}");
            assert_eq!(launches[0].args[2], RecordedArg::from(n), "device {device}");
        }
        let owners: Vec<_> = devices.into_iter().map(|(_, axpy)| axpy.backend()).collect();
        assert!(owners[0] != owners[1] && owners[1] != owners[2] && owners[0] != owners[2], "{owners:?}");
    }

    #[test]
    fn a_table_resolved_on_one_device_is_refused_on_another() {
        let devices = PerDevice::<_, Axpy>::resolve([carrying_axpy(), carrying_axpy()]).unwrap();
        let ((first, &first_axpy), (second, &second_axpy)) =
            (devices.device(0).unwrap(), devices.device(1).unwrap());
        let refused = launch_axpy(second, first_axpy, 4);
        assert!(
            matches!(&refused, Err(BackendError::ForeignResource { what, .. }) if *what == first_axpy.to_string()),
            "{refused:?}"
        );
        assert!(second.launches().is_empty() && first.launches().is_empty());
        // The same launch with the device's own handle goes through.
        launch_axpy(second, second_axpy, 4).unwrap();
        assert_eq!(second.launched(), ["blas::axpy"]);
    }

    #[test]
    fn a_device_that_cannot_resolve_the_table_is_named() {
        let backends = [carrying_axpy(), RecordingBackend::new(), carrying_axpy()];
        let Err(error) = PerDevice::<_, Axpy>::resolve(backends) else {
            panic!("device 1 carries no kernel, yet the table resolved");
        };
        assert_eq!(error.device, 1);
        assert_eq!(error.source.missing().map(|entry| entry.entry).collect::<Vec<_>>(), ["axpy"]);
        let message = error.to_string();
        assert!(
            message.starts_with("device 1: kernel table `test` cannot be resolved on recording backend"),
            "{message}"
        );
        let source = error.source().and_then(|source| source.downcast_ref::<ResolveError>());
        assert_eq!(source.map(|source| source.table), Some("test"));
    }
}
