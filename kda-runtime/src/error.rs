//! The error of a backend operation other than a lookup.

use crate::{DType, KernelEntry};

/// Why a backend operation (allocation, copy, launch, synchronize) failed.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The backend cannot run here at all (no driver, no device, no kernel images).
    #[error("{backend} is unavailable: {reason}")]
    Unavailable {
        /// The backend, e.g. "CUDA".
        backend: String,
        /// What is missing, and what to do about it.
        reason: String,
    },
    /// A handle or buffer of another backend instance was passed in.
    #[error("{what} does not belong to {backend}, which refuses it")]
    ForeignResource {
        /// What was foreign: "kernel handle 3 of backend #2", "device buffer 7 (allocated by
        /// backend #2)".
        what: String,
        /// The backend it was passed to.
        backend: String,
    },
    /// A handle this backend never issued.
    #[error("{backend} issued no kernel handle with index {index}")]
    UnknownHandle {
        /// The backend.
        backend: String,
        /// The handle's index.
        index: u32,
    },
    /// A host slice or buffer of the wrong size.
    #[error("size mismatch: expected {expected} bytes, got {found}")]
    SizeMismatch {
        /// The size the operation needed.
        expected: usize,
        /// The size it was given.
        found: usize,
    },
    /// A slice argument that does not lie inside its buffer.
    #[error("slice {range:?} does not lie inside a buffer of {len} elements")]
    SliceOutOfBounds {
        /// The element range asked for.
        range: std::ops::Range<usize>,
        /// The buffer's length.
        len: usize,
    },
    /// A buffer of the wrong element type.
    #[error("element type mismatch: expected {expected}, found {found}")]
    DTypeMismatch {
        /// The element type the operation needed.
        expected: DType,
        /// The buffer's element type.
        found: DType,
    },
    /// Host data holding a byte that is no element of the buffer's type: a `bool` is 0 or 1.
    #[error(
        "byte {index} of the data for a {dtype} buffer is {byte:#04x}, which is no {dtype} (a {dtype} is 0 or 1)"
    )]
    InvalidElement {
        /// The buffer's element type.
        dtype: DType,
        /// The first byte that is no element.
        index: usize,
        /// Its value.
        byte: u8,
    },
    /// A buffer whose byte size overflows, or that the device cannot hold.
    #[error("{len} elements of {dtype} cannot be allocated: the size overflows or exceeds the device")]
    TooLarge {
        /// The element type.
        dtype: DType,
        /// The elements asked for.
        len: usize,
    },
    /// A launch of an optional entry the target does not carry.
    #[error("`{}` ({}::{}) is optional and this target does not carry it", entry.path(), entry.module, entry.entry)]
    Absent {
        /// The entry.
        entry: Box<KernelEntry>,
    },
    /// A safe launch of an entry whose reach depends on what only the caller can guarantee.
    #[error(
        "`{}` ({}::{}): what the kernel touches through `{param}` depends on data kda cannot check \
         ({condition}), so it launches only through its typed launcher, which is `unsafe`",
        entry.path(), entry.module, entry.entry
    )]
    Trusted {
        /// The entry.
        entry: Box<KernelEntry>,
        /// The parameter the manifest's `safety` names.
        param: &'static str,
        /// What the caller guarantees.
        condition: &'static str,
    },
    /// A safe launch of an entry the manifest gives no `params`: nothing to check it against.
    #[error(
        "`{}` ({}::{}) has no `params` in the manifest, so a launch of it cannot be checked: \
         add its params, or launch it with `launch_unchecked`",
        entry.path(), entry.module, entry.entry
    )]
    NoSignature {
        /// The entry.
        entry: Box<KernelEntry>,
    },
    /// A launch with the wrong number of arguments.
    #[error("`{}`: expected {expected} arguments, found {found}", entry.path())]
    ArgumentCount {
        /// The entry.
        entry: Box<KernelEntry>,
        /// The parameters, spelled out.
        expected: String,
        /// The number of arguments passed.
        found: usize,
    },
    /// An argument that does not fit its parameter.
    #[error("`{}.{param}`: expected {expected}, found {found}", entry.path())]
    Argument {
        /// The entry.
        entry: Box<KernelEntry>,
        /// The parameter.
        param: &'static str,
        /// What the signature asks for.
        expected: String,
        /// What was passed.
        found: String,
    },
    /// A precondition of the entry that the launch does not meet.
    #[error("`{}`: the launch does not meet `{requirement}` ({detail})", entry.path())]
    Requirement {
        /// The entry.
        entry: Box<KernelEntry>,
        /// The requirement, as the manifest writes it.
        requirement: &'static str,
        /// The launch's scalars and geometry, or why the requirement could not be evaluated.
        detail: String,
    },
    /// An operation on kda's own memory (a launch on kda buffers, an allocation, a copy) on a
    /// stream capturing a graph of the caller's, which takes borrowed memory only, and kda's
    /// buffers within `CudaBackend::admitting_own_buffers`.
    #[error(
        "{operation} on {backend}: its stream is capturing a graph of the caller's, which takes the \
         caller's memory (In/Out from its cudarc slices); kda buffers only within \
         CudaBackend::admitting_own_buffers, and never an allocation or a copy from or to the host"
    )]
    InCallersCapture {
        /// What was refused.
        operation: String,
        /// The backend, described.
        backend: String,
    },
    /// Buffers admitted into a graph of the caller's (`CudaBackend::admitting_own_buffers`) by a
    /// backend whose buffers are ordered between streams by events, which a capture cannot take.
    #[error(
        "{backend} orders its buffers between streams by events, which a graph the caller captures \
         can neither wait for nor record: make the backend on a stream of a context whose event \
         tracking is off (CudaContext::disable_event_tracking) to capture its buffers"
    )]
    OrderedByEvents {
        /// The backend, described.
        backend: String,
    },
    /// A written argument at a device address overlaps another argument of the launch.
    #[error("`{}`: the written argument `{written}` overlaps `{other}` in device memory", entry.path())]
    Aliased {
        /// The entry.
        entry: Box<KernelEntry>,
        /// The parameter of the written argument.
        written: &'static str,
        /// The parameter of the argument it overlaps.
        other: &'static str,
    },
    /// A launch was refused or failed; names the kernel.
    #[error("launch of `{module}::{entry}` failed: {reason}")]
    Launch {
        /// The kernel's module.
        module: String,
        /// The kernel's entry point.
        entry: String,
        /// Why.
        reason: String,
    },
    /// A recording or a replay of a launch list was refused: a step that allocates or copies
    /// while recorded, a view of a buffer the recording is not bound to, a replay bound to
    /// buffers of other sizes.
    #[error("launch list: {0}")]
    Replay(String),
    /// Two image sets given to one backend carry the same module of one namespace.
    #[error(transparent)]
    DuplicateModule(#[from] crate::modules::DuplicateModule),
    /// A driver or runtime call failed.
    #[error("{operation} failed: {source}")]
    Driver {
        /// The operation, e.g. "loading module `gemm`".
        operation: String,
        /// The driver's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}
