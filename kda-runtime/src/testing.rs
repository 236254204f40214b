//! Test doubles: [`FakeBackend`] carries exactly the kernels a test lists, can make a module fail,
//! and records every lookup and launch so tests can assert which kernel a dispatch chose.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::host::{HostMemory, check_range};
use crate::registry::KernelRegistry;
use crate::{
    BackendError, BackendId, DType, DeviceBuffer, GpuBackend, KernelArg, KernelHandle, KernelTable,
    LaunchGeometry, LookupError,
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
        /// Passed as `BufferMut`.
        writable: bool,
    },
    /// A `u32` scalar.
    U32(u32),
    /// An `i32` scalar.
    I32(i32),
    /// An `f32` scalar.
    F32(f32),
}

#[derive(Default)]
struct Record {
    lookups: Vec<(String, String)>,
    launches: Vec<FakeLaunch>,
}

/// A backend that carries the kernels it is told to and computes nothing: launches are checked
/// (handle and buffers must be its own) and recorded. Memory is real host memory, so copies
/// round-trip.
///
/// ```
/// use kda_runtime::testing::FakeBackend;
/// use kda_runtime::{GpuBackend, LookupError};
///
/// let gpu = FakeBackend::new()
///     .with_kernel("gemm", "dense_gemm_bf16")
///     .failing_module("kda_recurrent", "image built for sm_100");
/// assert!(matches!(gpu.lookup("gemm", "dense_gemm_f32"), Err(LookupError::EntryNotInModule { .. })));
/// assert!(matches!(gpu.lookup("norm", "l2_norm_bf16"), Err(LookupError::ModuleNotCarried { .. })));
/// assert!(matches!(gpu.lookup("kda_recurrent", "kda_recurrent_decode_bf16"), Err(LookupError::Failed { .. })));
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

    /// Also carries `module::entry`.
    pub fn with_kernel(mut self, module: &str, entry: &str) -> Self {
        self.kernels.insert(module, entry, ());
        self
    }

    /// Also carries every entry of the table `T`.
    pub fn with_table<T: KernelTable>(self) -> Self {
        T::ENTRIES.iter().fold(self, |gpu, entry| gpu.with_kernel(entry.module, entry.entry))
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
            KernelArg::Buffer(buffer) => self.describe_buffer(buffer, false)?,
            KernelArg::BufferMut(buffer) => self.describe_buffer(buffer, true)?,
            KernelArg::Slice(buffer, range) => {
                self.memory.storage(buffer)?;
                check_range(buffer, range)?;
                FakeArg::Buffer { dtype: buffer.dtype(), len: range.len(), writable: false }
            }
            KernelArg::U32(value) => FakeArg::U32(*value),
            KernelArg::I32(value) => FakeArg::I32(*value),
            KernelArg::F32(value) => FakeArg::F32(*value),
        })
    }

    fn describe_buffer(&self, buffer: &DeviceBuffer, writable: bool) -> Result<FakeArg, BackendError> {
        self.memory.storage(buffer)?;
        Ok(FakeArg::Buffer { dtype: buffer.dtype(), len: buffer.len(), writable })
    }
}

impl GpuBackend for FakeBackend {
    fn describe(&self) -> String {
        "fake backend (test double)".to_owned()
    }

    fn has_module(&self, module: &str) -> bool {
        self.kernels.has_module(module) || self.failing.contains_key(module)
    }

    fn lookup(&self, module: &str, entry: &str) -> Result<KernelHandle, LookupError> {
        self.record().lookups.push((module.to_owned(), entry.to_owned()));
        if let Some(message) = self.failing.get(module) {
            return Err(LookupError::Failed {
                module: module.to_owned(),
                entry: entry.to_owned(),
                source: BackendError::Driver {
                    operation: format!("loading module `{module}`"),
                    source: message.clone().into(),
                },
            });
        }
        self.kernels.lookup(module, entry)
    }

    crate::host::host_memory_methods!(memory);

    fn launch(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        let registered = self.kernels.get(kernel, &self.describe())?;
        let args = args.iter().map(|arg| self.describe_arg(arg)).collect::<Result<_, _>>()?;
        self.record().launches.push(FakeLaunch {
            module: registered.module.clone(),
            entry: registered.entry.clone(),
            geometry,
            args,
        });
        Ok(())
    }

    fn synchronize(&self) -> Result<(), BackendError> {
        Ok(())
    }
}
