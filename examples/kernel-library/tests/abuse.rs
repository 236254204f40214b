//! Safe code against the library's own kernels on the emulator: each test is an attack from the
//! soundness reviews, written with safe public API only, that once reached memory outside a
//! launch's buffers (or a division by zero in a kernel) and is now refused with an `Err` before
//! the kernel runs. The CPU and recording backends' part is kda-runtime's `tests/abuse.rs`, with
//! the backend of the caller's making that would write a layout other than its host copy (which
//! no backend but kda's own can make, on any backend).
#![cfg(feature = "emulation")]

use kda_example_library::kernel_library;
use kda_example_library::{EMULATED_KERNELS, KernelLibraryKernels};
use kda_runtime::emu::EmuBackend;
use kda_runtime::{BackendError, DType, GpuBackend, GpuBackendExt, LaunchGeometry};

/// The emulator carrying the library, and its resolved table.
fn library() -> (EmuBackend, KernelLibraryKernels) {
    let gpu = EmuBackend::new(&[&EMULATED_KERNELS]).unwrap_or_else(|error| panic!("{error}"));
    let kernels = KernelLibraryKernels::resolve(&gpu).unwrap_or_else(|error| panic!("{error}"));
    (gpu, kernels)
}

const ONE_BLOCK: LaunchGeometry = LaunchGeometry { grid: (1, 1, 1), block: (32, 1, 1), shared_mem_bytes: 0 };

#[test]
fn a_zero_dim_is_refused_before_the_kernel_takes_an_index_modulo_it() {
    let (gpu, kernels) = library();
    // `neg` with dims [0], an empty input and numel 4: `i % dims[0]` would divide by zero.
    let info = gpu.upload_const(&[0u64, 1]).unwrap();
    let inp = gpu.zeros::<f32>(0).unwrap();
    let mut out = gpu.upload(&[7.0f32; 4]).unwrap();
    let args = kernel_library::neg_f32 {
        numel: 4,
        num_dims: 1,
        info: info.view().into(),
        inp: inp.view().into(),
        out: out.view_mut().into(),
    };
    let error = kernels.launch_neg_f32(&gpu, ONE_BLOCK, args).expect_err("a zero dim launched");
    assert!(matches!(error, BackendError::Argument { param: "inp", .. }), "{error}");
    assert!(error.to_string().contains("a dim of 0"), "{error}");
    assert_eq!(gpu.download::<f32>(&out).unwrap(), [7.0; 4], "a refused launch wrote");
}

#[test]
fn a_void_view_of_blocks_at_an_odd_byte_is_refused_before_the_kernel_reads_a_half_there() {
    let (gpu, kernels) = library();
    let blocks = gpu.zeros::<u8>(35).unwrap();
    let mut y = gpu.zeros::<f32>(32).unwrap();
    // One block of 34 bytes from byte 1: its `__half` scale at an odd address.
    let args =
        kernel_library::dequantize_f32 { vx: blocks.slice(1..35).into(), y: y.view_mut().into(), k: 32 };
    let error = kernels.launch_dequantize_f32(&gpu, ONE_BLOCK, args).expect_err("a misaligned view launched");
    assert!(matches!(error, BackendError::Argument { param: "vx", .. }), "{error}");
    assert!(error.to_string().contains("memory starting at byte 1"), "{error}");
    // From byte 0 the same block decodes (all zero).
    let args =
        kernel_library::dequantize_f32 { vx: blocks.slice(0..34).into(), y: y.view_mut().into(), k: 32 };
    kernels.launch_dequantize_f32(&gpu, ONE_BLOCK, args).unwrap_or_else(|error| panic!("{error}"));
}

#[test]
fn a_bool_buffer_on_the_emulator_holds_only_0_or_1() {
    let (gpu, _) = library();
    let mut flags = gpu.alloc(DType::Bool, 2).unwrap();
    let error = gpu.copy_to_device(&[1, 0x80], &mut flags).expect_err("a bool of 0x80 was copied");
    assert!(matches!(error, BackendError::InvalidElement { index: 1, byte: 0x80, .. }), "{error}");
    // The emulator poisons memory a kernel is to write whole (NaN, 0xFF bytes); a bool's poison
    // is `true`.
    let poisoned = gpu.alloc_for_write(DType::Bool, 4).unwrap();
    let mut bytes = [0xAA; 4];
    gpu.copy_to_host(&poisoned, &mut bytes).unwrap();
    assert!(bytes.iter().all(|&byte| byte <= 1), "{bytes:?}");
}
