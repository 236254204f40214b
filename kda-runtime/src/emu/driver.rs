//! The driver executor: each launch in a process of its own, run by the emulator's driver
//! (`kda_emu_driver`, built by the emulated build with the libraries' flags). With a sanitizer
//! compiled into the driver and the libraries (AddressSanitizer + UBSan, ThreadSanitizer), which
//! a Rust test binary cannot load, every launch of the kernels runs sanitized; every buffer in the
//! driver is allocated at exactly its size, so a read or write past a view's buffer is a report.
//!
//! Memory is host memory in this process. A launch sends each view's elements up to its extent
//! (as the signature evaluates it at this launch; the whole view without a signature), which the
//! driver allocates exactly, at the view's alignment modulo 16, so a vector path is taken or
//! not as for the view here; it gets the written ones back. A sanitizer report is a launch `Err`
//! that names the sanitizer and carries its report; so is a driver that fails otherwise.

use std::ops::Range;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use kda_emu::wire::{self, ArgKind, Request};

use super::{Executor, c_type, c_type_of, fault_reason, scalar_bits, windows};
use crate::host::{HostMemory, HostStorage};
use crate::modules::{LoadError, ModuleLoader, Resolved};
use crate::{
    BackendError, BackendId, EmulatedModule, EmulatedSet, KernelArg, KernelEntry, LaunchGeometry,
    LookupError, Sanitizer,
};

/// Writes `bytes` to a file at `path` that did not exist (never through a symlink found there).
fn write_new(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::OpenOptions::new().write(true).create_new(true).open(path)?.write_all(bytes)
}

/// Runs each launch in the emulator's driver, a process of its own per launch, which finds each
/// entry's library by its path.
#[derive(Debug)]
pub struct Driver {
    /// The backend this executor runs for, which names its directory.
    backend: BackendId,
    driver: PathBuf,
    /// The sanitizer the sets it runs were built with (and so the driver, if it is theirs).
    sanitizer: Option<Sanitizer>,
    /// What the driver stands for, in messages.
    device: String,
    /// Where requests and responses go: a directory of this backend's own, made on the first
    /// launch and removed with the backend.
    exchange: OnceLock<Result<PrivateDir, String>>,
}

/// A directory only this user can enter (0700), made new (never one that already existed, so no
/// other user's planted file or symlink is inside), removed with everything in it when dropped.
#[derive(Debug)]
struct PrivateDir(PathBuf);

impl PrivateDir {
    /// A new directory under the system's temporary directory, named for this process and
    /// `backend`, with a number that makes it new.
    fn new(backend: BackendId) -> std::io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        let base = std::env::temp_dir();
        let mut attempt = 0u32;
        loop {
            let path = base.join(format!("kda-emu-{}-{}-{attempt}", std::process::id(), backend.number()));
            // `create` (not `create_all`) fails where the path exists, as anything, a symlink too.
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(Self(path)),
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists && attempt < 1000 => {
                    attempt += 1
                }
                Err(error) => return Err(error),
            }
        }
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl ModuleLoader for Driver {
    type Set = EmulatedSet;
    type Module = &'static EmulatedModule;
    type Function = &'static str;

    fn device(&self) -> &str {
        &self.device
    }

    fn load(&self, module: &'static EmulatedModule) -> Result<&'static EmulatedModule, LoadError> {
        Ok(module)
    }

    fn function(
        &self,
        module: &&'static EmulatedModule,
        entry: &KernelEntry,
        _: &str,
    ) -> Result<&'static str, LookupError> {
        module
            .libraries
            .iter()
            .find(|library| library.entry == entry.entry)
            .map(|library| library.path)
            .ok_or_else(|| LookupError::entry_not_in_module(entry))
    }
}

impl Driver {
    /// The executor of backend `backend`, running `driver` for sets built with `sanitizer`.
    pub(super) fn new(driver: PathBuf, backend: BackendId, sanitizer: Option<Sanitizer>) -> Self {
        let device = match sanitizer {
            Some(sanitizer) => format!("the CUDA emulator's driver under {sanitizer} ({})", driver.display()),
            None => format!("the CUDA emulator's driver {}", driver.display()),
        };
        Self { backend, driver, sanitizer, device, exchange: OnceLock::new() }
    }

    /// The sanitizer of the sets it runs.
    pub(super) fn sanitizer(&self) -> Option<Sanitizer> {
        self.sanitizer
    }

    /// The request of one launch: the library, the entry, the arguments' C types, the geometry,
    /// the seed, then each argument (a view as the elements of its window).
    fn request(
        &self,
        memory: &HostMemory,
        seed: u64,
        kernel: &Resolved<&'static str>,
        geometry: LaunchGeometry,
        args: &[KernelArg<'_>],
        windows: &[Option<Range<usize>>],
    ) -> Result<Vec<u8>, BackendError> {
        // The driver compares these with the library's own; the signature the lookup proved
        // against it gives each parameter's.
        let params = kernel.entry.signature.map(|signature| signature.params);
        let types: Vec<String> = args
            .iter()
            .enumerate()
            .map(|(index, arg)| {
                let param = params.and_then(|params| params.get(index)).map(|param| c_type(&param.kind));
                c_type_of(arg, param.as_deref().unwrap_or_default())
            })
            .collect();
        let LaunchGeometry { grid, block, shared_mem_bytes } = geometry;
        let mut request = Request::new(&wire::Launch {
            library: kernel.function,
            entry: kernel.entry.entry,
            params: &types.join(","),
            grid: [grid.0, grid.1, grid.2],
            block: [block.0, block.1, block.2],
            dynamic_shared: shared_mem_bytes,
            seed,
            arg_count: u32::try_from(args.len()).unwrap_or(u32::MAX),
        });
        for (arg, window) in args.iter().zip(windows) {
            let (kind, buffer, dtype, window) = match (arg, window) {
                (KernelArg::Read(view), Some(window)) => (ArgKind::Read, view.buffer(), view.dtype(), window),
                (KernelArg::Write(view), Some(window)) => {
                    (ArgKind::Write, view.buffer(), view.dtype(), window)
                }
                (scalar, _) => {
                    request.scalar(scalar_bits(scalar).unwrap_or_default());
                    continue;
                }
            };
            let bytes = memory.storage(buffer)?.bytes();
            let (start, end) = (window.start * dtype.size(), window.end * dtype.size());
            let misalignment = (bytes.as_ptr().addr() + start) as u64 % 16;
            request.buffer(kind, misalignment, &bytes[start..end]);
        }
        Ok(request.into_bytes())
    }

    /// Runs the driver on a request; `without_aslr` through `setarch -R`.
    fn run_driver(
        &self,
        request: &std::path::Path,
        response: &std::path::Path,
        without_aslr: bool,
    ) -> std::io::Result<std::process::Output> {
        let mut command = if without_aslr {
            let mut command = Command::new("setarch");
            command.arg(std::env::consts::ARCH).arg("-R").arg(&self.driver);
            command
        } else {
            Command::new(&self.driver)
        };
        command
            .arg(request)
            .arg(response)
            // Leaks are not what this run looks for; stop at the first report of anything else.
            .env(
                "ASAN_OPTIONS",
                std::env::var("ASAN_OPTIONS").unwrap_or_else(|_| "detect_leaks=0".to_owned()),
            )
            .env(
                "TSAN_OPTIONS",
                std::env::var("TSAN_OPTIONS").unwrap_or_else(|_| "halt_on_error=1".to_owned()),
            )
            .output()
    }
}

/// Copies the driver's written windows into the launch's mutable views' buffers.
fn write_back(
    memory: &HostMemory,
    args: &mut [KernelArg<'_>],
    windows: &[Option<Range<usize>>],
    written: Vec<&[u8]>,
) -> Result<(), String> {
    let mut written = written.into_iter();
    for (arg, window) in args.iter_mut().zip(windows) {
        if let (KernelArg::Write(view), Some(window)) = (arg, window) {
            let bytes = written.next().ok_or("fewer written buffers than mutable views")?;
            let size = view.dtype().size();
            let storage: &mut HostStorage =
                memory.storage_mut(view.buffer_mut()).map_err(|error| error.to_string())?;
            let target = &mut storage.bytes_mut()[window.start * size..window.end * size];
            if target.len() != bytes.len() {
                return Err(format!("{} bytes back for a window of {}", bytes.len(), target.len()));
            }
            target.copy_from_slice(bytes);
        }
    }
    Ok(())
}

impl Executor for Driver {
    /// Sends the launch to the driver. A checked launch sends each view up to its extent, an
    /// unchecked one whole views: the kernel runs in another process, which its mistakes cannot
    /// corrupt, and the driver compares the arguments' C types with the kernel's. Nothing here
    /// needs the safety condition.
    unsafe fn run(
        &self,
        memory: &HostMemory,
        kernel: &Resolved<&'static str>,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
        seed: u64,
        extents: Option<&[Option<u64>]>,
    ) -> Result<(), BackendError> {
        let failed = |reason: String| BackendError::Launch {
            module: kernel.entry.module.to_owned(),
            entry: kernel.entry.entry.to_owned(),
            reason,
        };
        let windows = windows(args, extents)?;
        let request = self.request(memory, seed, kernel, geometry, args, &windows)?;
        // Unique in this backend across threads.
        static REQUESTS: AtomicU64 = AtomicU64::new(0);
        let number = REQUESTS.fetch_add(1, Ordering::Relaxed);
        let exchange =
            self.exchange.get_or_init(|| PrivateDir::new(self.backend).map_err(|error| error.to_string()));
        let exchange =
            exchange.as_ref().map_err(|error| failed(format!("making the driver's directory: {error}")))?;
        let stem = exchange.0.join(number.to_string());
        let (request_path, response_path) = (stem.with_extension("request"), stem.with_extension("response"));
        let io = |operation: &str, error: std::io::Error| failed(format!("{operation}: {error}"));
        write_new(&request_path, &request).map_err(|e| io("writing the driver's request", e))?;
        let output = self.run_driver(&request_path, &response_path, false);
        // ThreadSanitizer cannot map its shadow memory under some kernels' address-space
        // randomisation; the same run without it is still a sanitized run.
        let output = match output {
            Ok(output) if String::from_utf8_lossy(&output.stderr).contains("unexpected memory mapping") => {
                self.run_driver(&request_path, &response_path, true)
            }
            other => other,
        };
        let _ = std::fs::remove_file(&request_path);
        let output = output.map_err(|e| io(&format!("running {}", self.driver.display()), e))?;
        let response = std::fs::read(&response_path);
        let _ = std::fs::remove_file(&response_path);
        if !output.status.success() {
            let report = String::from_utf8_lossy(&output.stderr);
            let (status, report) = (output.status, report.trim_end());
            return Err(failed(match self.sanitizer {
                // Every sanitizer's report names it (`ERROR: AddressSanitizer`,
                // `WARNING: ThreadSanitizer`) but UBSan's, which halts at its first
                // `<file>:<line>:<column>: runtime error: ...` without a summary.
                Some(sanitizer) if report.contains("Sanitizer") || report.contains(": runtime error: ") => {
                    format!(
                        "{sanitizer} reported an error in this launch (the driver exited with {status}):\n{report}"
                    )
                }
                _ => format!("the driver exited with {status}:\n{report}"),
            }));
        }
        let response = response.map_err(|e| io("reading the driver's response", e))?;
        let written = wire::parse_response(&response)
            .map_err(|why| failed(format!("a malformed response: {why}")))?
            .map_err(|fault| failed(fault_reason(&fault, &kernel.entry)))?;
        write_back(memory, args, &windows, written).map_err(failed)
    }

    fn write_fill(&self) -> Option<u8> {
        None
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{PermissionsExt, symlink};

    use super::*;

    #[test]
    fn the_driver_exchanges_files_in_a_new_directory_only_its_user_can_enter() {
        let backend = BackendId::fresh();
        // Another user's plant at the first name the backend would take: a symlink to a
        // directory of theirs.
        let theirs = std::env::temp_dir().join(format!("kda-emu-theirs-{}", backend.number()));
        std::fs::create_dir_all(&theirs).unwrap();
        let planted =
            std::env::temp_dir().join(format!("kda-emu-{}-{}-0", std::process::id(), backend.number()));
        symlink(&theirs, &planted).unwrap();
        let dir = PrivateDir::new(backend).unwrap();
        assert_ne!(dir.0, planted, "a planted path was taken as the backend's own directory");
        let metadata = std::fs::symlink_metadata(&dir.0).unwrap();
        assert!(metadata.is_dir() && !metadata.file_type().is_symlink());
        assert_eq!(metadata.permissions().mode() & 0o777, 0o700);
        // A request is written to a new file only, never through a symlink found at its path.
        let request = dir.0.join("0.request");
        symlink(theirs.join("victim"), &request).unwrap();
        assert!(write_new(&request, b"request").is_err());
        assert!(!theirs.join("victim").exists(), "the write followed the symlink");
        let path = dir.0.clone();
        drop(dir);
        assert!(!path.exists(), "the directory outlived its backend");
        std::fs::remove_file(&planted).unwrap();
        std::fs::remove_dir_all(&theirs).unwrap();
    }
}
