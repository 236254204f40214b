//! Test doubles: [`FakeBackend`] carries exactly the kernels a test lists, can make a module fail,
//! and records every lookup and launch so tests can assert which kernel a dispatch chose.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::host::HostMemory;
use crate::registry::KernelRegistry;
use crate::{
    BackendError, BackendId, DType, GpuBackend, KernelArg, KernelEntry, KernelHandle, KernelTable,
    LaunchGeometry, LookupError, signature,
};

/// A launch as [`FakeBackend`] saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct FakeLaunch {
    /// The launched kernel's module.
    pub module: String,
    /// The launched kernel's entry point.
    pub entry: String,
    /// The launch geometry.
    pub geometry: LaunchGeometry,
    /// The arguments, described.
    pub args: Vec<FakeArg>,
}

/// A launch argument as [`FakeBackend`] saw it.
#[derive(Clone, Debug, PartialEq)]
pub enum FakeArg {
    /// A device buffer: its element type, length and whether the kernel could write it.
    Buffer {
        /// Element type.
        dtype: DType,
        /// Elements.
        len: usize,
        /// Passed as a mutable view.
        writable: bool,
    },
    /// A `u32` scalar.
    U32(u32),
    /// An `i32` scalar.
    I32(i32),
    /// A `u64` scalar.
    U64(u64),
    /// An `f32` scalar.
    F32(f32),
}

#[derive(Default)]
struct Record {
    lookups: Vec<(String, String)>,
    launches: Vec<FakeLaunch>,
    allocations: usize,
}

/// A backend that carries the kernels it is told to and computes nothing: launches are checked
/// (handle and buffers must be its own, and safe launches against the entry's signature, as on
/// every backend) and recorded. Memory is real host memory, so copies
/// round-trip.
///
/// ```
/// use kda_runtime::testing::FakeBackend;
/// use kda_runtime::{GpuBackend, KernelEntry, LookupError};
///
/// let gpu = FakeBackend::new()
///     .with_kernel("gemm", "dense_gemm_bf16")
///     .failing_module("kda_recurrent", "image built for sm_100");
/// let lookup = |module, entry| gpu.lookup(&KernelEntry::named(module, entry));
/// assert!(matches!(lookup("gemm", "dense_gemm_f32"), Err(LookupError::EntryNotInModule { .. })));
/// assert!(matches!(lookup("norm", "l2_norm_bf16"), Err(LookupError::ModuleNotCarried { .. })));
/// assert!(matches!(lookup("kda_recurrent", "kda_recurrent_decode_bf16"), Err(LookupError::Failed { .. })));
/// ```
pub struct FakeBackend {
    memory: HostMemory,
    kernels: KernelRegistry<()>,
    /// module → the message its lookups fail with.
    failing: HashMap<String, String>,
    record: Mutex<Record>,
}

impl Default for FakeBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeBackend {
    /// A backend that carries nothing.
    pub fn new() -> Self {
        let id = BackendId::fresh();
        Self {
            memory: HostMemory::new(id),
            kernels: KernelRegistry::new(id),
            failing: HashMap::new(),
            record: Mutex::default(),
        }
    }

    /// Also carries `module::entry`, without a signature (only unchecked launches run it).
    pub fn with_kernel(self, module: &'static str, entry: &'static str) -> Self {
        self.with_entry(&KernelEntry::named(module, entry))
    }

    /// Also carries `entry`, launched against its signature.
    pub fn with_entry(mut self, entry: &KernelEntry) -> Self {
        self.kernels.insert(*entry, ());
        self
    }

    /// Also carries every entry of the table `T`.
    pub fn with_table<T: KernelTable>(self) -> Self {
        T::ENTRIES.iter().fold(self, |gpu, entry| gpu.with_entry(entry))
    }

    /// No longer carries `module::entry`; a module left with no entry is no longer carried.
    pub fn without(mut self, module: &str, entry: &str) -> Self {
        self.kernels.remove(module, entry);
        self
    }

    /// Lookups in `module` fail with `message`, as a module that does not load would.
    pub fn failing_module(mut self, module: &str, message: &str) -> Self {
        self.failing.insert(module.to_owned(), message.to_owned());
        self
    }

    /// Every lookup so far, as `(module, entry)`, in order.
    pub fn lookups(&self) -> Vec<(String, String)> {
        self.record().lookups.clone()
    }

    /// Every launch so far, in order.
    pub fn launches(&self) -> Vec<FakeLaunch> {
        self.record().launches.clone()
    }

    /// The number of buffers allocated so far.
    pub fn allocations(&self) -> usize {
        self.record().allocations
    }

    /// The launched kernels so far, as `module::entry`, in order.
    pub fn launched(&self) -> Vec<String> {
        let record = self.record();
        record.launches.iter().map(|l| format!("{}::{}", l.module, l.entry)).collect()
    }

    fn record(&self) -> MutexGuard<'_, Record> {
        // A test that panicked while holding the lock left a consistent record behind.
        self.record.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn describe_arg(&self, arg: &KernelArg<'_>) -> Result<FakeArg, BackendError> {
        Ok(match arg {
            KernelArg::Read(view) => {
                self.memory.storage(view.buffer())?;
                view.checked_range()?;
                FakeArg::Buffer { dtype: view.dtype(), len: view.len(), writable: false }
            }
            KernelArg::Write(view) => {
                self.memory.storage(view.buffer())?;
                view.checked_range()?;
                FakeArg::Buffer { dtype: view.dtype(), len: view.len(), writable: true }
            }
            KernelArg::U32(value) => FakeArg::U32(*value),
            KernelArg::I32(value) => FakeArg::I32(*value),
            KernelArg::U64(value) => FakeArg::U64(*value),
            KernelArg::F32(value) => FakeArg::F32(*value),
        })
    }

    /// Records a launch, checked against the entry's signature or not.
    fn record_launch(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &[KernelArg<'_>],
        checked: bool,
    ) -> Result<(), BackendError> {
        let registered = self.kernels.get(kernel, &self.describe())?;
        if checked {
            signature::check(&registered.entry, &geometry, args)?;
        }
        let args = args.iter().map(|arg| self.describe_arg(arg)).collect::<Result<_, _>>()?;
        self.record().launches.push(FakeLaunch {
            module: registered.entry.module.to_owned(),
            entry: registered.entry.entry.to_owned(),
            geometry,
            args,
        });
        Ok(())
    }
}

impl GpuBackend for FakeBackend {
    fn describe(&self) -> String {
        "fake backend (test double)".to_owned()
    }

    fn has_module(&self, module: &str) -> bool {
        self.kernels.has_module(module) || self.failing.contains_key(module)
    }

    fn lookup(&self, entry: &KernelEntry) -> Result<KernelHandle, LookupError> {
        let (module, name) = (entry.module, entry.entry);
        self.record().lookups.push((module.to_owned(), name.to_owned()));
        if let Some(message) = self.failing.get(module) {
            return Err(LookupError::Failed {
                module: module.to_owned(),
                entry: name.to_owned(),
                source: BackendError::Driver {
                    operation: format!("loading module `{module}`"),
                    source: message.clone().into(),
                },
            });
        }
        self.kernels.lookup(entry)
    }

    fn alloc(&self, dtype: DType, len: usize) -> Result<crate::DeviceBuffer, BackendError> {
        self.record().allocations += 1;
        self.memory.alloc(dtype, len)
    }

    crate::host::host_copy_methods!(memory);

    fn launch(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        self.record_launch(kernel, geometry, args, true)
    }

    /// Records the launch without the signature check; nothing runs, so nothing here relies on
    /// the caller's promises.
    unsafe fn launch_unchecked(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        self.record_launch(kernel, geometry, args, false)
    }

    fn synchronize(&self) -> Result<(), BackendError> {
        Ok(())
    }
}
