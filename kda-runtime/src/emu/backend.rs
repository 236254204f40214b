//! [`EmuBackend`], the emulation backend a test is written against: it runs a crate's emulated
//! kernels as their build made them, so the same test runs in process in `cargo test` and under a
//! sanitizer with `KDA_EMULATOR_SANITIZER=address|thread cargo test`, unchanged.

use std::time::Duration;

use super::{Driver, Emulator, InProcess, fresh_seed, parse_seed};
use crate::{
    BackendError, ConstBuffer, DType, DeviceBuffer, DeviceGraph, EmulatedSet, GpuBackend, KernelArg,
    KernelEntry, KernelHandle, LaunchGeometry, LookupError, Sanitizer, View, ViewMut,
};

/// The emulation backend over one or more crates' emulated kernels, each in its namespace, with
/// the executor their build calls for, chosen when it is made: in this process
/// ([`InProcess`]) for kernels built without a sanitizer, through the sets' sanitized driver
/// ([`Driver`], one process per launch) for kernels built with one (`KDA_EMULATOR_SANITIZER`),
/// where a sanitizer's report is the launch's `Err`. [`DriverBackend`](super::DriverBackend)
/// runs a driver of the caller's choosing instead.
#[derive(Debug)]
pub struct EmuBackend(Chosen);

/// The executor [`EmuBackend::new`] chose.
#[derive(Debug)]
enum Chosen {
    InProcess(Emulator<InProcess>),
    Sanitized(Emulator<Driver>),
}

/// `$call` on the backend `$backend` chose, whichever it is.
macro_rules! on_chosen {
    ($backend:expr, $gpu:ident => $call:expr) => {
        match &$backend.0 {
            Chosen::InProcess($gpu) => $call,
            Chosen::Sanitized($gpu) => $call,
        }
    };
}

impl EmuBackend {
    /// A backend carrying the emulated kernels of `sets`; the block-order seed from
    /// `KDA_EMU_SEED` (decimal or `0x` hex), else a fresh one. Sets built without a sanitizer run
    /// in this process; sets built with one run in the driver their build made with it (the
    /// first set's: every driver of one sanitizer runs any library built with it). Sets built
    /// with different sanitizers (or some with one and some without), sanitized sets without a
    /// driver, and two distinct sets with one module of one namespace are an `Err`.
    pub fn new(sets: &[&'static EmulatedSet]) -> Result<Self, BackendError> {
        let seed =
            std::env::var("KDA_EMU_SEED").ok().and_then(|text| parse_seed(&text)).unwrap_or_else(fresh_seed);
        let chosen = match common_sanitizer(sets)? {
            // Only here is an in-process emulator made, and only of sets built without a
            // sanitizer: a sanitized library needs its runtime in the executable.
            None => Chosen::InProcess(Emulator::with_executor(|_| InProcess, sets, seed)?),
            Some(sanitizer) => {
                let driver =
                    sets.iter().find_map(|set| set.driver()).ok_or_else(|| BackendError::Unavailable {
                        backend: format!("the CUDA emulator under {sanitizer}"),
                        reason: "the emulated build made no driver to run the sanitized kernels in"
                            .to_owned(),
                    })?;
                Chosen::Sanitized(Emulator::<Driver>::new(driver, sets, seed)?)
            }
        };
        Ok(Self(chosen))
    }

    /// The sanitizer every launch runs under, if any: the sets'.
    pub fn sanitizer(&self) -> Option<Sanitizer> {
        match &self.0 {
            Chosen::InProcess(_) => None,
            Chosen::Sanitized(gpu) => gpu.modules.loader().sanitizer(),
        }
    }

    /// The same backend with block orders from `seed`.
    pub fn with_seed(self, seed: u64) -> Self {
        Self(match self.0 {
            Chosen::InProcess(gpu) => Chosen::InProcess(gpu.with_seed(seed)),
            Chosen::Sanitized(gpu) => Chosen::Sanitized(gpu.with_seed(seed)),
        })
    }

    /// The seed the block orders of this backend's launches derive from.
    pub fn seed(&self) -> u64 {
        on_chosen!(self, gpu => gpu.seed())
    }

    /// The static shared memory of `entry`'s kernel, in bytes (after looking it up), as the
    /// library in this process reports it; an `Err` for sanitized kernels, which run in the
    /// driver's process.
    pub fn static_shared_bytes(&self, entry: &KernelEntry) -> Result<u64, LookupError> {
        match &self.0 {
            Chosen::InProcess(gpu) => gpu.static_shared_bytes(entry),
            Chosen::Sanitized(gpu) => Err(LookupError::failed(
                entry,
                BackendError::Unavailable {
                    backend: gpu.describe(),
                    reason: "a sanitized kernel runs in the driver's process, which reports no static shared memory"
                        .to_owned(),
                },
            )),
        }
    }
}

/// The sanitizer every one of `sets` was built with; an `Err` naming each set's where they differ.
pub(super) fn common_sanitizer(sets: &[&'static EmulatedSet]) -> Result<Option<Sanitizer>, BackendError> {
    let first = sets.first().and_then(|set| set.sanitizer());
    if sets.iter().all(|set| set.sanitizer() == first) {
        return Ok(first);
    }
    let each: Vec<String> = sets
        .iter()
        .map(|set| {
            let built =
                set.sanitizer().map_or_else(|| "no sanitizer".to_owned(), |sanitizer| sanitizer.to_string());
            format!("`{}` with {built}", set.namespace())
        })
        .collect();
    Err(BackendError::Unavailable {
        backend: "the CUDA emulator".to_owned(),
        reason: format!(
            "its sets were built with different sanitizers ({}), and one backend runs one build's \
             kernels: build them with one KDA_EMULATOR_SANITIZER",
            each.join(", ")
        ),
    })
}

impl EmulatedSet {
    /// A backend over this set's kernels alone, run as they were built ([`EmuBackend::new`]): a
    /// crate's tests get one over its own kernels with `EMULATED_KERNELS.emulator()?`.
    pub fn emulator(&'static self) -> Result<EmuBackend, BackendError> {
        EmuBackend::new(&[self])
    }
}

impl GpuBackend for EmuBackend {
    fn describe(&self) -> String {
        on_chosen!(self, gpu => gpu.describe())
    }

    fn has_module(&self, module: &str) -> bool {
        on_chosen!(self, gpu => gpu.has_module(module))
    }

    fn lookup(&self, entry: &KernelEntry) -> Result<KernelHandle, LookupError> {
        on_chosen!(self, gpu => gpu.lookup(entry))
    }

    fn is_handle_of(&self, kernel: KernelHandle, entry: &KernelEntry) -> bool {
        on_chosen!(self, gpu => gpu.is_handle_of(kernel, entry))
    }

    fn alloc(&self, dtype: DType, len: usize) -> Result<DeviceBuffer, BackendError> {
        on_chosen!(self, gpu => gpu.alloc(dtype, len))
    }

    fn alloc_for_write(&self, dtype: DType, len: usize) -> Result<DeviceBuffer, BackendError> {
        on_chosen!(self, gpu => gpu.alloc_for_write(dtype, len))
    }

    fn copy_to_device(&self, src: &[u8], dst: &mut DeviceBuffer) -> Result<(), BackendError> {
        on_chosen!(self, gpu => gpu.copy_to_device(src, dst))
    }

    fn upload_const_bytes(&self, dtype: DType, contents: &[u8]) -> Result<ConstBuffer, BackendError> {
        on_chosen!(self, gpu => gpu.upload_const_bytes(dtype, contents))
    }

    fn copy_to_host(&self, src: &DeviceBuffer, dst: &mut [u8]) -> Result<(), BackendError> {
        on_chosen!(self, gpu => gpu.copy_to_host(src, dst))
    }

    fn copy_on_device(&self, src: View<'_>, dst: ViewMut<'_>) -> Result<(), BackendError> {
        on_chosen!(self, gpu => gpu.copy_on_device(src, dst))
    }

    fn launch(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        on_chosen!(self, gpu => gpu.launch(kernel, geometry, args))
    }

    unsafe fn launch_unchecked(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        // SAFETY: the caller upholds `launch_unchecked`'s contract, which is the chosen backend's.
        on_chosen!(self, gpu => unsafe { gpu.launch_unchecked(kernel, geometry, args) })
    }

    fn synchronize(&self) -> Result<(), BackendError> {
        on_chosen!(self, gpu => gpu.synchronize())
    }

    fn time(&self, work: &mut dyn FnMut() -> Result<(), BackendError>) -> Result<Duration, BackendError> {
        on_chosen!(self, gpu => gpu.time(work))
    }

    fn new_stream(&self) -> Result<Box<dyn GpuBackend + '_>, BackendError> {
        on_chosen!(self, gpu => gpu.new_stream())
    }

    fn capture(
        &self,
        work: &mut dyn FnMut(&dyn GpuBackend) -> Result<(), BackendError>,
    ) -> Result<Option<Box<dyn DeviceGraph>>, BackendError> {
        on_chosen!(self, gpu => gpu.capture(work))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A set of one library that is never loaded (a backend loads a module at its first lookup),
    /// built with `sanitizer` and carrying `driver`.
    fn set(
        namespace: &'static str,
        sanitizer: Option<Sanitizer>,
        driver: Option<&str>,
    ) -> &'static EmulatedSet {
        // SAFETY: nothing looks up, loads or launches these libraries or the driver; the tests
        // read which executor each backend chose.
        unsafe {
            EmulatedSet::leak(namespace, [("m", "e", "/nonexistent/libm.e.so")], &[], sanitizer, driver)
        }
    }

    #[test]
    fn the_backend_runs_plain_sets_in_process_and_sanitized_sets_in_their_driver() {
        let plain = EmuBackend::new(&[set("a@0:kernels.toml", None, Some("/out/emu/driver"))]).unwrap();
        assert_eq!(plain.sanitizer(), None);
        assert!(
            plain.describe().starts_with("the CUDA emulator (kernels as C++ on host threads)"),
            "{plain:?}"
        );
        for sanitizer in Sanitizer::ALL {
            let sets = [
                set("a@0:kernels.toml", Some(sanitizer), Some("/out/emu-x/driver")),
                set("b@0:kernels.toml", Some(sanitizer), None),
            ];
            let gpu = EmuBackend::new(&sets).unwrap();
            assert_eq!(gpu.sanitizer(), Some(sanitizer));
            assert!(
                gpu.describe().starts_with(&format!(
                    "the CUDA emulator's driver under {sanitizer} (/out/emu-x/driver)"
                )),
                "{}",
                gpu.describe()
            );
            assert_eq!(gpu.with_seed(9).seed(), 9);
        }
    }

    #[test]
    fn sets_of_different_sanitizers_or_a_sanitized_set_without_its_driver_make_no_backend() {
        let address = set("a@0:kernels.toml", Some(Sanitizer::Address), Some("/out/driver"));
        let plain = set("b@0:kernels.toml", None, None);
        let thread = set("c@0:kernels.toml", Some(Sanitizer::Thread), Some("/out/driver"));
        for sets in [[address, plain], [plain, address], [address, thread]] {
            let error = EmuBackend::new(&sets).unwrap_err().to_string();
            assert!(error.contains("its sets were built with different sanitizers"), "{error}");
            for set in sets {
                assert!(error.contains(set.namespace()), "{error}");
            }
            // A driver of the caller's naming runs one build's kernels too.
            assert!(super::super::DriverBackend::new("/out/driver", &sets, 1).is_err());
        }
        assert!(EmuBackend::new(&[address, plain]).unwrap_err().to_string().contains(
            "(`a@0:kernels.toml` with AddressSanitizer + UBSan, `b@0:kernels.toml` with no sanitizer)"
        ));
        let driverless = set("d@0:kernels.toml", Some(Sanitizer::Thread), None);
        let error = EmuBackend::new(&[driverless]).unwrap_err().to_string();
        assert_eq!(
            error,
            "the CUDA emulator under ThreadSanitizer is unavailable: the emulated build made no driver \
             to run the sanitized kernels in"
        );
    }
}
