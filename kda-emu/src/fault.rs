//! Why an emulated launch failed, as the runtime reports it through the ABI
//! ([`RawFault`](crate::abi::RawFault)) and the driver through the wire: its kind, the thread
//! where it happened, and for an access outside its memory what it went through and where.

use std::fmt;

/// What kind of failure a launch had.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum FaultKind {
    /// No failure (a record not filled).
    None = 0,
    /// The launch was refused before any thread ran: an argument count, a geometry or a shared
    /// memory size the device refuses, a parameter type the kernel does not take.
    Refused = 1,
    /// A thread did what CUDA forbids: a barrier or warp collective some threads miss, a
    /// deadlock, a misaligned or misplaced `cp.async` or `ldmatrix`, an exception; or it faulted
    /// (an integer division by zero, an access the processor refuses outside the launch's memory
    /// such as through a null pointer, a trap), the message naming the signal and the address.
    Kernel = 2,
    /// A thread read or wrote outside the memory it reached it through.
    OutOfBounds = 3,
    /// The emulator itself failed (threads or memory it could not have).
    Emulator = 4,
}

impl FaultKind {
    /// Every kind.
    pub const ALL: [FaultKind; 5] =
        [FaultKind::None, FaultKind::Refused, FaultKind::Kernel, FaultKind::OutOfBounds, FaultKind::Emulator];

    /// The kind of the ABI's code, if it is one.
    pub fn from_code(code: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| *kind as u32 == code)
    }

    /// Its C name, `KDA_EMU_FAULT_<NAME>`.
    pub(crate) fn c_name(self) -> &'static str {
        match self {
            FaultKind::None => "KDA_EMU_FAULT_NONE",
            FaultKind::Refused => "KDA_EMU_FAULT_REFUSED",
            FaultKind::Kernel => "KDA_EMU_FAULT_KERNEL",
            FaultKind::OutOfBounds => "KDA_EMU_FAULT_OUT_OF_BOUNDS",
            FaultKind::Emulator => "KDA_EMU_FAULT_EMULATOR",
        }
    }
}

/// The thread a failure happened in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    /// `blockIdx`.
    pub block: [u32; 3],
    /// `threadIdx`.
    pub thread: [u32; 3],
}

/// An access outside its memory: what it went through, and the element.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Access {
    /// The kernel parameter (by position) it went through, if it went through one.
    pub parameter: Option<u32>,
    /// The `__shared__` array it went through (its name, or its type where the runtime cannot
    /// read the name from the source), or `dynamic shared memory`, if it went through one.
    pub variable: Option<String>,
    /// The element's index: a byte's in dynamic shared memory, negative before the first.
    pub index: i64,
}

/// Why a launch failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// What kind of failure.
    pub kind: FaultKind,
    /// The thread, where the failure has one.
    pub place: Option<Place>,
    /// The access, for [`FaultKind::OutOfBounds`].
    pub access: Option<Access>,
    /// The runtime's message, the kernel named first.
    pub message: String,
}

impl Fault {
    /// A fault from its parts as the ABI and the wire carry them.
    pub(crate) fn from_parts(
        kind: u32,
        place: Option<Place>,
        parameter: i32,
        variable: String,
        index: i64,
        message: String,
    ) -> Self {
        let kind = FaultKind::from_code(kind).unwrap_or(FaultKind::Emulator);
        let access = (kind == FaultKind::OutOfBounds).then(|| Access {
            parameter: u32::try_from(parameter).ok(),
            variable: (!variable.is_empty()).then_some(variable),
            index,
        });
        Fault { kind, place, access, message }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Fault {}
