//! The sanitizers an emulated build can compile in. Each needs its runtime in the executable, so a
//! sanitized library runs only in a program built with the same flags (the sanitizer driver), not
//! in a Rust test binary.

/// A sanitizer for the emulated kernels.
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

    /// Its name on a command line and in directory names: `address`, `thread`.
    pub fn name(self) -> &'static str {
        match self {
            Sanitizer::Address => "address",
            Sanitizer::Thread => "thread",
        }
    }

    /// The sanitizer called `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|sanitizer| sanitizer.name() == name)
    }

    /// The compile and link flags of `sanitizer`, or the plain build's.
    pub(crate) fn compile_flags(sanitizer: Option<Self>) -> &'static [&'static str] {
        match sanitizer {
            None => &["-O2", "-g0"],
            Some(Sanitizer::Address) => &[
                "-O1",
                "-g",
                "-fno-omit-frame-pointer",
                "-fsanitize=address,undefined",
                "-fno-sanitize-recover=all",
            ],
            Some(Sanitizer::Thread) => &["-O1", "-g", "-fsanitize=thread"],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_sanitizer_is_found_by_its_name_and_compiles_in_its_runtime() {
        for sanitizer in Sanitizer::ALL {
            assert_eq!(Sanitizer::from_name(sanitizer.name()), Some(sanitizer));
        }
        assert_eq!(Sanitizer::from_name("memory"), None);
        assert!(Sanitizer::compile_flags(Some(Sanitizer::Address)).contains(&"-fsanitize=address,undefined"));
        assert!(Sanitizer::compile_flags(Some(Sanitizer::Thread)).contains(&"-fsanitize=thread"));
        assert!(!Sanitizer::compile_flags(None).iter().any(|flag| flag.starts_with("-fsanitize")));
    }
}
