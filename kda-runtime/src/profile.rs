//! Per-launch timings of real model code: [`LaunchTimer`] stands in for a backend, passes every
//! call through to it, and times each launch on its own with the backend's
//! [`time`](GpuBackend::time) (CUDA events on a device). Model code runs on it unchanged, so the
//! profile is of the launches the code really makes, at its real sizes, in its order.
//!
//! Each launch is timed between two synchronizations, so nothing overlaps it: the figures are each
//! kernel's own time, without the launch gaps a stream or a graph would hide or add.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use crate::{BackendError, GpuBackend, KernelArg, KernelEntry, KernelHandle, LaunchGeometry, LookupError};

/// One timed launch: the kernel by module and entry point, and the device time it took.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimedLaunch {
    /// The kernel's module.
    pub module: String,
    /// The kernel's entry point.
    pub entry: String,
    /// How long the launch ran.
    pub time: Duration,
}

/// A backend that times every launch made through it on the backend it wraps (see the module).
pub struct LaunchTimer<'a> {
    gpu: &'a dyn GpuBackend,
    /// The entry each handle looked up through the timer was issued for.
    entries: Mutex<HashMap<KernelHandle, (String, String)>>,
    launches: Mutex<Vec<TimedLaunch>>,
}

impl<'a> LaunchTimer<'a> {
    /// A timer over `gpu`, with no launch timed yet.
    pub fn new(gpu: &'a dyn GpuBackend) -> Self {
        Self { gpu, entries: Mutex::default(), launches: Mutex::default() }
    }

    /// The launches timed so far, in issue order, leaving none behind.
    pub fn take(&self) -> Vec<TimedLaunch> {
        std::mem::take(&mut *lock(&self.launches))
    }

    /// Runs `launch` on the wrapped backend, timed, and records it under `kernel`'s entry.
    fn timed(
        &self,
        kernel: KernelHandle,
        launch: &mut dyn FnMut() -> Result<(), BackendError>,
    ) -> Result<(), BackendError> {
        let time = self.gpu.time(launch)?;
        // A handle this timer did not look up is the wrapped backend's to refuse: the launch above
        // failed before anything ran, so it never reaches this point.
        let (module, entry) = lock(&self.entries).get(&kernel).cloned().unwrap_or_default();
        lock(&self.launches).push(TimedLaunch { module, entry, time });
        Ok(())
    }
}

/// The data behind `mutex`, also after a panic elsewhere poisoned it (a map and a list stay
/// consistent between two pushes).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl GpuBackend for LaunchTimer<'_> {
    crate::forward::forwarded_methods!(
        gpu: describe,
        has_module,
        alloc,
        alloc_for_write,
        copy_to_device,
        upload_const_bytes,
        copy_to_host,
        copy_on_device,
        synchronize,
        time,
    );

    fn lookup(&self, entry: &KernelEntry) -> Result<KernelHandle, LookupError> {
        let handle = self.gpu.lookup(entry)?;
        lock(&self.entries).insert(handle, (entry.module.to_owned(), entry.entry.to_owned()));
        Ok(handle)
    }

    fn is_handle_of(&self, kernel: KernelHandle, entry: &KernelEntry) -> bool {
        self.gpu.is_handle_of(kernel, entry)
    }

    fn launch(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        self.timed(kernel, &mut || self.gpu.launch(kernel, geometry, args))
    }

    unsafe fn launch_unchecked(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        // SAFETY: the caller upholds `launch_unchecked`'s contract for these arguments, and it is
        // the same contract on the wrapped backend, which receives them unchanged.
        self.timed(kernel, &mut || unsafe { self.gpu.launch_unchecked(kernel, geometry, args) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::CpuBackend;
    use crate::fixtures::{signed, write};
    use crate::signature::{KernelParam, Op, ScalarKind, Signature};
    use crate::{DType, GpuBackendExt};

    const FILL_SIGNATURE: Signature = Signature {
        params: &[write("out", DType::F32, "n", &[Op::Scalar(1)]), KernelParam::scalar("n", ScalarKind::U32)],
        requires: &[],
    };
    const FILL: KernelEntry = signed("ops", "fill", &FILL_SIGNATURE);
    const SLOW_FILL: KernelEntry = signed("ops", "slow_fill", &FILL_SIGNATURE);

    #[test]
    fn every_launch_is_timed_in_order_under_its_entry_and_still_runs() {
        let fill = |mut args: crate::cpu::CpuArgs<'_>, pause: Duration| {
            std::thread::sleep(pause);
            args.mut_f32(0)?.fill(1.0);
            Ok(())
        };
        let cpu = CpuBackend::new()
            .with_kernel(&FILL, move |args| fill(args, Duration::ZERO))
            .with_kernel(&SLOW_FILL, move |args| fill(args, Duration::from_millis(30)));
        let timer = LaunchTimer::new(&cpu);
        let (quick, slow) = (timer.lookup(&FILL).unwrap(), timer.lookup(&SLOW_FILL).unwrap());
        let mut out = timer.zeros::<f32>(4).unwrap();
        let geometry = LaunchGeometry::linear(4, 32);
        for kernel in [slow, quick, slow] {
            timer.launch(kernel, geometry, &mut [(&mut out).into(), 4u32.into()]).unwrap();
        }
        assert_eq!(timer.download::<f32>(&out).unwrap(), [1.0; 4], "the launches ran");
        let launches = timer.take();
        let names: Vec<&str> = launches.iter().map(|launch| launch.entry.as_str()).collect();
        assert_eq!(names, ["slow_fill", "fill", "slow_fill"]);
        assert!(launches.iter().all(|launch| launch.module == "ops"));
        // The slow kernel's pause is inside its timing, the quick one's is not.
        assert!(
            launches[0].time >= Duration::from_millis(30) && launches[2].time >= Duration::from_millis(30)
        );
        assert!(launches[1].time < Duration::from_millis(30), "{launches:?}");
        assert!(timer.take().is_empty(), "take leaves nothing behind");
    }

    #[test]
    fn a_refused_launch_is_an_err_and_not_timed() {
        let cpu = CpuBackend::new().with_kernel(&FILL, |mut args| {
            args.mut_f32(0)?.fill(1.0);
            Ok(())
        });
        let timer = LaunchTimer::new(&cpu);
        let fill = timer.lookup(&FILL).unwrap();
        let mut short = timer.zeros::<f32>(2).unwrap();
        let geometry = LaunchGeometry::linear(4, 32);
        let refused = timer.launch(fill, geometry, &mut [(&mut short).into(), 4u32.into()]);
        assert!(refused.is_err());
        assert!(timer.take().is_empty());
    }
}
