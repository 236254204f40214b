//! The C ABI of an emulated library (`cpp/kda_abi.h` declares its functions): the version both
//! sides must agree on, the size of a launch's failure message, and the Rust types of the
//! functions. The constants are defined here and reach the C++ through the generated header.

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};

/// The version of the ABI: a library answers it from `kda_emu_abi_version`, and a loader refuses
/// any other.
pub const ABI_VERSION: u32 = 1;

/// The bytes a launch's failure message may take, its terminating NUL included.
pub const MESSAGE_CAPACITY: usize = 4096;

/// `unsigned kda_emu_abi_version(void)`.
pub type AbiVersionFn = unsafe extern "C" fn() -> c_uint;
/// `int kda_emu_find(const char* name)`.
pub type FindFn = unsafe extern "C" fn(*const c_char) -> c_int;
/// `const char* kda_emu_params(int entry)`.
pub type ParamsFn = unsafe extern "C" fn(c_int) -> *const c_char;
/// `unsigned long long kda_emu_static_shared_bytes(void)`.
pub type StaticSharedFn = unsafe extern "C" fn() -> c_ulonglong;
/// `int kda_emu_launch(int entry, void* const* args, unsigned arg_count, const unsigned grid[3],
/// const unsigned block[3], unsigned dynamic_shared, unsigned long long seed, char* message,
/// size_t capacity)`.
pub type LaunchFn = unsafe extern "C" fn(
    c_int,
    *const *mut c_void,
    c_uint,
    *const c_uint,
    *const c_uint,
    c_uint,
    c_ulonglong,
    *mut c_char,
    usize,
) -> c_int;

/// The ABI's constants as C preprocessor definitions, `(name, value)`.
pub(crate) fn defines() -> Vec<(&'static str, String)> {
    vec![
        ("KDA_EMU_ABI_VERSION", format!("{ABI_VERSION}u")),
        ("KDA_EMU_MESSAGE_CAPACITY", MESSAGE_CAPACITY.to_string()),
    ]
}

/// Each function of the ABI as `kda_abi.h` declares it, beside the Rust type above: the header
/// is checked against this list (`the_header_declares_every_function_as_the_loader_calls_it`).
#[cfg(test)]
const DECLARATIONS: [&str; 5] = [
    "unsigned kda_emu_abi_version(void);",
    "int kda_emu_find(const char* name);",
    "const char* kda_emu_params(int entry);",
    "unsigned long long kda_emu_static_shared_bytes(void);",
    "int kda_emu_launch(int entry, void* const* args, unsigned arg_count, const unsigned grid[3], const unsigned block[3], unsigned dynamic_shared, unsigned long long seed, char* message, size_t capacity);",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_declares_every_function_as_the_loader_calls_it() {
        let header = crate::shim::file("kda_abi.h").expect("the shim carries kda_abi.h");
        // Each declaration starts a line with `KDA_EMU_API` and ends at its `;`.
        let declared: Vec<String> = header
            .split("\nKDA_EMU_API ")
            .skip(1)
            .filter_map(|text| text.split_once(';'))
            .map(|(text, _)| format!("{};", text.split_whitespace().collect::<Vec<_>>().join(" ")))
            .collect();
        assert_eq!(declared, DECLARATIONS);
        // The Rust types take as many arguments as the declarations name.
        let arity = |declaration: &str| {
            let list = &declaration[declaration.find('(').unwrap() + 1..declaration.rfind(')').unwrap()];
            if list == "void" { 0 } else { list.split(',').count() }
        };
        let rust: [usize; 5] = [
            fn_arity::<AbiVersionFn>(),
            fn_arity::<FindFn>(),
            fn_arity::<ParamsFn>(),
            fn_arity::<StaticSharedFn>(),
            fn_arity::<LaunchFn>(),
        ];
        assert_eq!(DECLARATIONS.map(arity), rust);
    }

    /// The number of parameters of an `unsafe extern "C" fn` type.
    fn fn_arity<F: Arity>() -> usize {
        F::ARITY
    }

    trait Arity {
        const ARITY: usize;
    }
    impl<R> Arity for unsafe extern "C" fn() -> R {
        const ARITY: usize = 0;
    }
    impl<A, R> Arity for unsafe extern "C" fn(A) -> R {
        const ARITY: usize = 1;
    }
    impl<A, B, C, D, E, F, G, H, I, R> Arity for unsafe extern "C" fn(A, B, C, D, E, F, G, H, I) -> R {
        const ARITY: usize = 9;
    }

    #[test]
    fn the_constants_reach_the_generated_header() {
        let header = crate::shim::config_header(&crate::DeviceLimits::SM_90);
        assert!(header.contains(&format!("#define KDA_EMU_ABI_VERSION {ABI_VERSION}u\n")));
        assert!(header.contains(&format!("#define KDA_EMU_MESSAGE_CAPACITY {MESSAGE_CAPACITY}\n")));
    }
}
