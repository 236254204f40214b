//! The sanitizers the emulator's build can compile into a crate's kernels: named once here
//! because the build step records which one a set of emulated kernels carries and the runtime
//! reads it to choose how to run them (the compiler flags of each are kda-emu's).

use core::fmt;

/// A sanitizer for the emulated kernels. Each needs its runtime in the executable, so kernels
/// built with one run only in the emulator's driver built with the same flags, never in a Rust
/// test binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sanitizer {
    /// AddressSanitizer and UndefinedBehaviorSanitizer: reads and writes outside a buffer,
    /// misaligned vector loads, overflow and other undefined behaviour. Each `__shared__`
    /// variable is followed by a redzone, so an index past one array into the next is a report.
    Address,
    /// ThreadSanitizer: data races between the threads of a block (a missing barrier).
    Thread,
}

impl Sanitizer {
    /// Every sanitizer, in the order a full run takes them.
    pub const ALL: [Sanitizer; 2] = [Sanitizer::Address, Sanitizer::Thread];

    /// Its name on a command line, in `KDA_EMULATOR_SANITIZER` and in directory names:
    /// `address`, `thread`.
    pub const fn name(self) -> &'static str {
        match self {
            Sanitizer::Address => "address",
            Sanitizer::Thread => "thread",
        }
    }

    /// The sanitizer called `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|sanitizer| sanitizer.name() == name)
    }

    /// What it is called in a report: `AddressSanitizer + UBSan`, `ThreadSanitizer`.
    pub const fn title(self) -> &'static str {
        match self {
            Sanitizer::Address => "AddressSanitizer + UBSan",
            Sanitizer::Thread => "ThreadSanitizer",
        }
    }
}

impl fmt::Display for Sanitizer {
    /// Its title.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.title())
    }
}
