//! The C ABI of an emulated library (`cpp/kda_abi.h` declares its functions): the version both
//! sides must agree on, the failure record a launch fills, and the Rust types of the functions.
//! The constants are defined here and reach the C++ through the generated header.

use std::ffi::{c_char, c_int, c_longlong, c_uint, c_ulonglong, c_void};

use crate::fault::{Fault, FaultKind, Place};

/// The version of the ABI: a library answers it from `kda_emu_abi_version`, and a loader refuses
/// any other.
pub const ABI_VERSION: u32 = 3;

/// The bytes a launch's failure message may take, its terminating NUL included.
pub const MESSAGE_CAPACITY: usize = 4096;

/// The bytes the name of a `__shared__` variable in a fault may take, its NUL included.
pub const VARIABLE_CAPACITY: usize = 64;

/// `struct kda_emu_fault`: what a failed launch reports. The runtime answers its size from
/// `kda_emu_fault_size`, which a loader compares with this one's.
#[repr(C)]
#[derive(Clone, Debug)]
pub struct RawFault {
    /// A [`FaultKind`] code.
    pub kind: c_uint,
    /// 1 when `block` and `thread` name the thread that failed.
    pub has_thread: c_uint,
    /// `blockIdx` of that thread.
    pub block: [c_uint; 3],
    /// `threadIdx` of that thread.
    pub thread: [c_uint; 3],
    /// The parameter an out-of-bounds access went through, or -1.
    pub parameter: c_int,
    /// The `__shared__` array (or "dynamic shared memory") it went through, NUL-terminated, or
    /// empty.
    pub variable: [c_char; VARIABLE_CAPACITY],
    /// The element index of that access (a byte's in dynamic shared memory; negative before the
    /// first).
    pub index: c_longlong,
    /// The message, NUL-terminated.
    pub message: [c_char; MESSAGE_CAPACITY],
}

impl RawFault {
    /// An empty record for a launch to fill.
    pub fn new() -> Box<Self> {
        Box::new(RawFault {
            kind: FaultKind::None as c_uint,
            has_thread: 0,
            block: [0; 3],
            thread: [0; 3],
            parameter: -1,
            variable: [0; VARIABLE_CAPACITY],
            index: 0,
            message: [0; MESSAGE_CAPACITY],
        })
    }

    /// The record as an owned [`Fault`]; its strings end at their NUL or their capacity.
    pub fn to_fault(&self) -> Fault {
        let text = |chars: &[c_char]| {
            let bytes: Vec<u8> = chars.iter().take_while(|c| **c != 0).map(|c| *c as u8).collect();
            String::from_utf8_lossy(&bytes).into_owned()
        };
        let place = (self.has_thread != 0).then_some(Place { block: self.block, thread: self.thread });
        Fault::from_parts(
            self.kind,
            place,
            self.parameter,
            text(&self.variable),
            self.index,
            text(&self.message),
        )
    }
}

/// `unsigned kda_emu_abi_version(void)`.
pub type AbiVersionFn = unsafe extern "C" fn() -> c_uint;
/// `int kda_emu_find(const char* name)`.
pub type FindFn = unsafe extern "C" fn(*const c_char) -> c_int;
/// `const char* kda_emu_params(int entry)`.
pub type ParamsFn = unsafe extern "C" fn(c_int) -> *const c_char;
/// `unsigned long long kda_emu_static_shared_bytes(void)`.
pub type StaticSharedFn = unsafe extern "C" fn() -> c_ulonglong;
/// `unsigned long long kda_emu_fault_size(void)`.
pub type FaultSizeFn = unsafe extern "C" fn() -> c_ulonglong;
/// `int kda_emu_launch(int entry, void* const* args, const unsigned long long* sizes, unsigned
/// arg_count, const unsigned grid[3], const unsigned block[3], unsigned dynamic_shared, unsigned
/// long long seed, struct kda_emu_fault* fault)`.
pub type LaunchFn = unsafe extern "C" fn(
    c_int,
    *const *mut c_void,
    *const c_ulonglong,
    c_uint,
    *const c_uint,
    *const c_uint,
    c_uint,
    c_ulonglong,
    *mut RawFault,
) -> c_int;

/// The ABI's constants as C preprocessor definitions, `(name, value)`.
pub(crate) fn defines() -> Vec<(&'static str, String)> {
    let kinds = FaultKind::ALL.into_iter().map(|kind| (kind.c_name(), format!("{}u", kind as u32)));
    [
        ("KDA_EMU_ABI_VERSION", format!("{ABI_VERSION}u")),
        ("KDA_EMU_MESSAGE_CAPACITY", MESSAGE_CAPACITY.to_string()),
        ("KDA_EMU_VARIABLE_CAPACITY", VARIABLE_CAPACITY.to_string()),
    ]
    .into_iter()
    .chain(kinds)
    .collect()
}

/// Each function of the ABI as `kda_abi.h` declares it, beside the Rust type above: the header
/// is checked against this list (`the_header_declares_every_function_as_the_loader_calls_it`).
#[cfg(test)]
const DECLARATIONS: [&str; 6] = [
    "unsigned kda_emu_abi_version(void);",
    "int kda_emu_find(const char* name);",
    "const char* kda_emu_params(int entry);",
    "unsigned long long kda_emu_static_shared_bytes(void);",
    "unsigned long long kda_emu_fault_size(void);",
    "int kda_emu_launch(int entry, void* const* args, const unsigned long long* sizes, unsigned arg_count, const unsigned grid[3], const unsigned block[3], unsigned dynamic_shared, unsigned long long seed, struct kda_emu_fault* fault);",
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
        let rust: [usize; 6] = [
            fn_arity::<AbiVersionFn>(),
            fn_arity::<FindFn>(),
            fn_arity::<ParamsFn>(),
            fn_arity::<StaticSharedFn>(),
            fn_arity::<FaultSizeFn>(),
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
