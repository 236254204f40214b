//! What each sanitizer an emulated build can compile in ([`Sanitizer`], named in kda-types so the
//! runtime can read which one a set was built with) means to the compiler. Each needs its runtime
//! in the executable, so a sanitized library runs only in a program built with the same flags
//! (the sanitizer driver), not in a Rust test binary.

pub use kda_types::Sanitizer;

/// The compile and link flags of `sanitizer`, or the plain build's.
pub(crate) fn compile_flags(sanitizer: Option<Sanitizer>) -> &'static [&'static str] {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_sanitizer_compiles_in_its_runtime() {
        assert!(compile_flags(Some(Sanitizer::Address)).contains(&"-fsanitize=address,undefined"));
        assert!(compile_flags(Some(Sanitizer::Thread)).contains(&"-fsanitize=thread"));
        assert!(!compile_flags(None).iter().any(|flag| flag.starts_with("-fsanitize")));
    }
}
