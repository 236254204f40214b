//! Safe code against the library's own kernels on the emulator: each test is an attack from the
//! soundness reviews, written with safe public API only, that once reached memory outside a
//! launch's buffers (or a division by zero in a kernel) and is now refused with an `Err` before
//! the kernel runs. The CPU and recording backends' part is kda-runtime's `tests/abuse.rs`.
#![cfg(feature = "emulation")]

use kda_example_library::kernel_library;
use kda_example_library::{EMULATED_KERNELS, KernelLibraryKernels};
use kda_runtime::emu::EmuBackend;
use kda_runtime::{
    BackendError, DType, DeviceBuffer, GpuBackend, GpuBackendExt, KernelArg, KernelEntry, KernelHandle,
    LaunchGeometry, LookupError, View, ViewMut,
};

/// The emulator carrying the library, and its resolved table.
fn library() -> (EmuBackend, KernelLibraryKernels) {
    let gpu = EmuBackend::new(&[&EMULATED_KERNELS]).unwrap_or_else(|error| panic!("{error}"));
    let kernels = KernelLibraryKernels::resolve(&gpu).unwrap_or_else(|error| panic!("{error}"));
    (gpu, kernels)
}

const ONE_BLOCK: LaunchGeometry = LaunchGeometry { grid: (1, 1, 1), block: (32, 1, 1), shared_mem_bytes: 0 };

/// A backend of the caller's making over the emulator: it forwards everything, but its
/// `copy_to_device` writes strides of 2^40 where it is given 1.
struct Liar(EmuBackend);

impl GpuBackend for Liar {
    fn describe(&self) -> String {
        "a liar over the emulator".to_owned()
    }
    fn has_module(&self, module: &str) -> bool {
        self.0.has_module(module)
    }
    fn lookup(&self, entry: &KernelEntry) -> Result<KernelHandle, LookupError> {
        self.0.lookup(entry)
    }
    fn alloc(&self, dtype: DType, len: usize) -> Result<DeviceBuffer, BackendError> {
        self.0.alloc(dtype, len)
    }
    fn copy_to_device(&self, src: &[u8], dst: &mut DeviceBuffer) -> Result<(), BackendError> {
        let lie: Vec<u8> = src
            .chunks(8)
            .flat_map(|word| {
                if word == 1u64.to_ne_bytes() { (1u64 << 40).to_ne_bytes().to_vec() } else { word.to_vec() }
            })
            .collect();
        self.0.copy_to_device(&lie, dst)
    }
    fn copy_to_host(&self, src: &DeviceBuffer, dst: &mut [u8]) -> Result<(), BackendError> {
        self.0.copy_to_host(src, dst)
    }
    fn copy_on_device(&self, src: View<'_>, dst: ViewMut<'_>) -> Result<(), BackendError> {
        self.0.copy_on_device(src, dst)
    }
    fn launch(
        &self,
        kernel: KernelHandle,
        geometry: LaunchGeometry,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        self.0.launch(kernel, geometry, args)
    }
    unsafe fn launch_unchecked(
        &self,
        _: KernelHandle,
        _: LaunchGeometry,
        _: &mut [KernelArg<'_>],
    ) -> Result<(), BackendError> {
        Err(BackendError::Replay("not forwarded".to_owned()))
    }
    fn synchronize(&self) -> Result<(), BackendError> {
        self.0.synchronize()
    }
}

#[test]
fn a_layout_uploaded_through_a_backend_of_the_callers_is_refused_not_trusted() {
    let (gpu, kernels) = library();
    let liar = Liar(gpu);
    // dims [2], strides [1] as the check would read them; strides [2^40] in memory.
    let error = liar.upload_const(&[2u64, 1]).expect_err("a caller's backend made a layout");
    assert!(error.to_string().contains("only kda's own backends make a ConstBuffer"), "{error}");
    // The emulator's own upload, through the same wrapper's launches: the layout the kernel reads
    // is the one the check read, and the launch computes.
    let info = liar.0.upload_const(&[2u64, 1]).unwrap();
    let inp = liar.0.upload(&[1.0f32, 2.0]).unwrap();
    let mut out = liar.0.zeros::<f32>(2).unwrap();
    let args = kernel_library::neg_f32 {
        numel: 2,
        num_dims: 1,
        info: info.view().into(),
        inp: inp.view().into(),
        out: out.view_mut().into(),
    };
    kernels.launch_neg_f32(&liar, ONE_BLOCK, args).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(liar.0.download::<f32>(&out).unwrap(), [-1.0, -2.0]);
}

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
