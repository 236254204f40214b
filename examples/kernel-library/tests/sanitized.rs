//! The library's manifest built at test time for the emulator under AddressSanitizer + UBSan and
//! under ThreadSanitizer, each launch run by a driver process with every view cut to exactly its
//! extent: the reductions over the launch's dynamic shared memory, the strided reads, the void
//! blocks and the trusted gather are no ASan report, and the atomics and the barriers between a
//! row's reductions no TSan race. Each launch's result is checked too, so a launch that ran
//! nothing cannot pass.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use kda_build::cuda::KernelBuild;
use kda_build::cuda::emulation::{Emulation, Sanitizer};
use kda_example_library::{KernelLibraryKernels, kernel_library};
use kda_runtime::emu::DriverBackend;
use kda_runtime::{EmulatedSet, GpuBackendExt, LaunchGeometry, bf16};
use kda_test_support::emulator::{assert_built, emulated_set};

/// The crate's own manifest and kernels built with `sanitizer` (once for every test), as the set
/// of libraries a driver backend carries and that driver's path.
fn sanitized_build(sanitizer: Sanitizer) -> &'static (&'static EmulatedSet, PathBuf) {
    static ADDRESS: OnceLock<(&'static EmulatedSet, PathBuf)> = OnceLock::new();
    static THREAD: OnceLock<(&'static EmulatedSet, PathBuf)> = OnceLock::new();
    let once = match sanitizer {
        Sanitizer::Address => &ADDRESS,
        Sanitizer::Thread => &THREAD,
    };
    once.get_or_init(|| {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("kernel-library-{}", sanitizer.name()));
        let emulation = Emulation { sanitizer: Some(sanitizer), ..Emulation::default() };
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        // As `build.rs` builds it, for the emulator only: the sanitizers need no nvcc.
        let output = KernelBuild::new(root.join("kernels.toml"), root.join("kernels"), out)
            .without_nvcc()
            .emulation(emulation)
            .run()
            .unwrap_or_else(|error| panic!("the sanitized build failed: {error}"));
        assert_built(&output, "the kernel library");
        let driver = output.emulation_driver.expect("a sanitized build makes its driver");
        let entries = &KernelLibraryKernels::ENTRIES;
        (
            emulated_set(KernelLibraryKernels::NAMESPACE, &output.emulated, entries, Some(driver.as_path())),
            driver,
        )
    })
}

/// A driver backend of the `sanitizer` build, and the table resolved there.
fn sanitized(sanitizer: Sanitizer) -> (DriverBackend, KernelLibraryKernels) {
    let (set, driver) = sanitized_build(sanitizer);
    let gpu = DriverBackend::new(driver, &[set], 7).unwrap_or_else(|error| panic!("{error}"));
    let kernels = KernelLibraryKernels::resolve(&gpu).unwrap_or_else(|error| panic!("{error}"));
    (gpu, kernels)
}

/// One block of 32 threads.
const ONE_WARP: LaunchGeometry = LaunchGeometry { grid: (1, 1, 1), block: (32, 1, 1), shared_mem_bytes: 0 };

/// One block per row, `block` threads each, and a float per warp of dynamic shared memory.
fn rows(rows: u32, block: u32) -> LaunchGeometry {
    LaunchGeometry { grid: (rows, 1, 1), block: (block, 1, 1), shared_mem_bytes: block / 32 * 4 }
}

/// Softmax of 2 rows of 100 on 4 warps: two block reductions a row through the same shared
/// partials, the second safe only after the first's trailing barrier. Each row of equal values
/// is uniform, 1/100 each (`exp(0) / 100`, exact but for the division's rounding).
fn check_softmax(gpu: &DriverBackend, kernels: &KernelLibraryKernels) {
    let (x, mut y) = (gpu.upload(&[0.25f32; 200]).unwrap(), gpu.zeros::<f32>(200).unwrap());
    let args = kernel_library::softmax { x: x.view(), y: y.view_mut(), d: 100 };
    kernels.launch_softmax(gpu, rows(2, 128), args).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(gpu.download::<f32>(&y).unwrap(), [1.0f32 / 100.0; 200]);
}

#[test]
fn address_sanitizer_reports_nothing_for_reductions_strided_reads_and_a_gather() {
    let (gpu, kernels) = sanitized(Sanitizer::Address);
    // Rows of 1..=70 over two warps: each row's partials in exactly the 8 bytes of dynamic shared
    // memory the launch asks for.
    let input: Vec<f32> = (0..3).flat_map(|row| (1..=70).map(move |i| (i * (row + 1)) as f32)).collect();
    let (x, mut out) = (gpu.upload(&input).unwrap(), gpu.zeros::<f32>(3).unwrap());
    let args = kernel_library::sum_rows { x: x.view(), out: out.view_mut(), d: 70 };
    kernels.launch_sum_rows(&gpu, rows(3, 64), args).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(gpu.download::<f32>(&out).unwrap(), [2485.0, 4970.0, 7455.0]);
    check_softmax(&gpu, &kernels);

    // A 2 × 3 input stored column-major: the view is exactly the 6 elements the layout reaches.
    let info = gpu.upload_const(&[2u64, 3, 1, 2]).unwrap();
    let inp = gpu.upload(&[1.0f32, 4.0, 2.0, 5.0, 3.0, 6.0]).unwrap();
    let mut negated = gpu.zeros::<f32>(6).unwrap();
    let args = kernel_library::neg_f32 {
        numel: 6,
        num_dims: 2,
        info: info.view(),
        inp: inp.view(),
        out: negated.view_mut(),
    };
    kernels.launch_neg_f32(&gpu, ONE_WARP, args).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(gpu.download::<f32>(&negated).unwrap(), [-1.0, -2.0, -3.0, -4.0, -5.0, -6.0]);

    // Gathering the last row of `src` reads its last element, the one before ASan's redzone.
    let (ids, src) =
        (gpu.upload(&[2i64, 0]).unwrap(), gpu.upload(&[0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0]).unwrap());
    let mut gathered = gpu.zeros::<f32>(4).unwrap();
    let args = kernel_library::index_select_i64 {
        ids: ids.view(),
        src: src.view(),
        out: gathered.view_mut(),
        n: 2,
        d: 2,
    };
    // SAFETY: ids 2 and 0 are rows of the three-row `src`.
    unsafe { kernels.launch_index_select_i64(&gpu, ONE_WARP, args) }
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(gpu.download::<f32>(&gathered).unwrap(), [4.0, 5.0, 0.0, 1.0]);
}

#[test]
fn thread_sanitizer_finds_no_race_in_the_atomics_or_between_a_rows_reductions() {
    let (gpu, kernels) = sanitized(Sanitizer::Thread);
    // 256 threads of one block adding 128 rows of 2 into 2 rows: every element contended by 64
    // threads at once. Halves and ones keep every partial sum exact in f32 and bf16.
    let ids: Vec<u32> = (0..128).map(|i| i % 2).collect();
    let one_block = LaunchGeometry { grid: (1, 1, 1), block: (256, 1, 1), shared_mem_bytes: 0 };
    let (index, src) = (gpu.upload(&ids).unwrap(), gpu.upload(&[0.5f32; 256]).unwrap());
    let mut dst = gpu.zeros::<f32>(4).unwrap();
    let args = kernel_library::scatter_add_f32 {
        ids: index.view(),
        src: src.view(),
        dst: dst.view_mut(),
        n: 128,
        d: 2,
    };
    // SAFETY: every id is 0 or 1, the rows of the two-row `dst`.
    unsafe { kernels.launch_scatter_add_f32(&gpu, one_block, args) }
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(gpu.download::<f32>(&dst).unwrap(), [32.0; 4]);
    let src = gpu.upload(&[bf16::ONE; 256]).unwrap();
    let mut dst = gpu.zeros::<bf16>(4).unwrap();
    let args = kernel_library::scatter_add_bf16 {
        ids: index.view(),
        src: src.view(),
        dst: dst.view_mut(),
        n: 128,
        d: 2,
    };
    // SAFETY: as above.
    unsafe { kernels.launch_scatter_add_bf16(&gpu, one_block, args) }
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(gpu.download::<bf16>(&dst).unwrap(), [bf16::from_f32(64.0); 4]);
    check_softmax(&gpu, &kernels);
}

#[test]
fn address_sanitizer_reports_nothing_for_void_blocks_read_to_their_last_byte() {
    let (gpu, kernels) = sanitized(Sanitizer::Address);
    // Two q8_0 blocks, scale 2 then -1, each value its index in the block: 68 bytes, no more.
    let blocks: Vec<u8> = [2.0f32, -1.0]
        .into_iter()
        .flat_map(|scale| kda_runtime::f16::from_f32(scale).to_le_bytes().into_iter().chain(0..32u8))
        .collect();
    let (vx, mut y) = (gpu.upload(&blocks).unwrap(), gpu.zeros::<f32>(64).unwrap());
    let args = kernel_library::dequantize_f32 { vx: vx.view(), y: y.view_mut(), k: 64 };
    kernels.launch_dequantize_f32(&gpu, ONE_WARP, args).unwrap_or_else(|error| panic!("{error}"));
    let want: Vec<f32> =
        [2.0, -1.0].into_iter().flat_map(|scale| (0..32).map(move |i| scale * i as f32)).collect();
    assert_eq!(gpu.download::<f32>(&y).unwrap(), want);
}
