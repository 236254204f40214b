//! The library's manifest built at test time for the emulator under AddressSanitizer + UBSan and
//! under ThreadSanitizer, each launch run by a driver process with every view cut to exactly its
//! extent: the reductions over the launch's dynamic shared memory, the strided reads, the void
//! blocks, the trusted gather, a warp-vote compaction and a template's partial last group are no
//! ASan report, and the atomics, a privatized histogram and the barriers between a row's
//! reductions no TSan race (`tests/planted.rs` plants one in each). Each launch's result is
//! checked too, so a launch that ran nothing cannot pass.

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
    let args = kernel_library::softmax { x: x.view().into(), y: y.view_mut().into(), d: 100 };
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
    let args = kernel_library::sum_rows { x: x.view().into(), out: out.view_mut().into(), d: 70 };
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
        info: info.view().into(),
        inp: inp.view().into(),
        out: negated.view_mut().into(),
    };
    kernels.launch_neg_f32(&gpu, ONE_WARP, args).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(gpu.download::<f32>(&negated).unwrap(), [-1.0, -2.0, -3.0, -4.0, -5.0, -6.0]);

    // Gathering the last row of `src` reads its last element, the one before ASan's redzone.
    let (ids, src) =
        (gpu.upload(&[2i64, 0]).unwrap(), gpu.upload(&[0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0]).unwrap());
    let mut gathered = gpu.zeros::<f32>(4).unwrap();
    let args = kernel_library::index_select_i64 {
        ids: ids.view().into(),
        src: src.view().into(),
        out: gathered.view_mut().into(),
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
        ids: index.view().into(),
        src: src.view().into(),
        dst: dst.view_mut().into(),
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
        ids: index.view().into(),
        src: src.view().into(),
        dst: dst.view_mut().into(),
        n: 128,
        d: 2,
    };
    // SAFETY: as above.
    unsafe { kernels.launch_scatter_add_bf16(&gpu, one_block, args) }
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(gpu.download::<bf16>(&dst).unwrap(), [bf16::from_f32(64.0); 4]);
    check_softmax(&gpu, &kernels);
    check_races_planted_elsewhere(&gpu, &kernels);
}

/// The launches `tests/planted.rs` makes on the build with a race planted in each, here on the
/// clean build: the right answer and no report. A histogram of 64 bins cleared, then counted into
/// by every thread; RMSNorm and a template's tree reduction, each through `__shared__` partials.
fn check_races_planted_elsewhere(gpu: &DriverBackend, kernels: &KernelLibraryKernels) {
    let values: Vec<u32> = (0..256).map(|i| (i * 7) % 64).collect();
    let (input, mut hist) = (gpu.upload(&values).unwrap(), gpu.zeros::<u32>(64).unwrap());
    let geometry = LaunchGeometry { grid: (1, 1, 1), block: (64, 1, 1), shared_mem_bytes: 256 };
    let args = kernel_library::histogram {
        values: input.view().into(),
        hist: hist.view_mut().into(),
        n: 256,
        bins: 64,
    };
    kernels.launch_histogram(gpu, geometry, args).unwrap_or_else(|error| panic!("{error}"));
    // 7 is prime to 64: each bin gets 4 of the 256 values.
    assert_eq!(gpu.download::<u32>(&hist).unwrap(), [4; 64]);
    // Rows of 100 fours: RMS 4, normalised to ones; the largest is 4.
    let x = gpu.upload(&[4.0f32; 200]).unwrap();
    let mut y = gpu.zeros::<f32>(200).unwrap();
    let args = kernel_library::rmsnorm_f32 {
        x: x.view().into(),
        y: y.view_mut().into(),
        alpha: None,
        d: 100,
        eps: 0.0,
        unit_offset: false,
    };
    kernels.launch_rmsnorm_f32(gpu, rows(2, 64), args).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(gpu.download::<f32>(&y).unwrap(), [1.0; 200]);
    let mut out = gpu.zeros::<f32>(2).unwrap();
    let args = kernel_library::max_rows_64 { x: x.view().into(), out: out.view_mut().into(), d: 100 };
    kernels.launch_max_rows_64(gpu, rows(2, 64), args).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(gpu.download::<f32>(&out).unwrap(), [4.0; 2]);
}

#[test]
fn address_sanitizer_reports_nothing_for_a_compaction_or_a_template_whose_last_lanes_stop_at_the_end() {
    let (gpu, kernels) = sanitized(Sanitizer::Address);
    // 1,000 elements, every other one kept: the last warp's round has 24 lanes past the end,
    // which must not read x.
    let input: Vec<f32> = (0..1000).map(|i| if i % 2 == 0 { i as f32 + 1.0 } else { -1.0 }).collect();
    let x = gpu.upload(&input).unwrap();
    let (mut out, mut count) = (gpu.zeros::<f32>(1000).unwrap(), gpu.zeros::<u32>(1).unwrap());
    let args = kernel_library::compact {
        x: x.view().into(),
        out: out.view_mut().into(),
        count: count.view_mut().into(),
        n: 1000,
    };
    kernels.launch_compact(&gpu, ONE_WARP, args).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(gpu.download::<u32>(&count).unwrap(), [500]);
    // One warp: its rounds reserve in order, so the output is the kept elements in order.
    let kept: Vec<f32> = input.iter().copied().filter(|&x| x > 0.0).collect();
    assert_eq!(gpu.download::<f32>(&out).unwrap()[..500], kept);
    // 1,001 elements, four a thread: the last thread's group stops after its first.
    let x = gpu.upload(&[0.5f32; 1001]).unwrap();
    let mut y = gpu.zeros::<f32>(1001).unwrap();
    let geometry = LaunchGeometry { grid: (2, 1, 1), block: (128, 1, 1), shared_mem_bytes: 0 };
    let args = kernel_library::affine_f32 {
        x: x.view().into(),
        y: y.view_mut().into(),
        scale: 4.0,
        shift: -1.0,
        n: 1001,
    };
    kernels.launch_affine_f32(&gpu, geometry, args).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(gpu.download::<f32>(&y).unwrap(), [1.0; 1001]);
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
    let args = kernel_library::dequantize_f32 { vx: vx.view().into(), y: y.view_mut().into(), k: 64 };
    kernels.launch_dequantize_f32(&gpu, ONE_WARP, args).unwrap_or_else(|error| panic!("{error}"));
    let want: Vec<f32> =
        [2.0, -1.0].into_iter().flat_map(|scale| (0..32).map(move |i| scale * i as f32)).collect();
    assert_eq!(gpu.download::<f32>(&y).unwrap(), want);
}
