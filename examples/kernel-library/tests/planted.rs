//! The library's kernels with a bug planted in each, as a library's own bugs look: the same
//! sources built for the emulator with `tests/planted/` among the include directories, whose
//! header makes `kernels/utils.cuh` turn a loop bound `i < n` into `i <= n`, leave a
//! `__syncthreads` out and write an atomic add as a plain `+=`. Each overrun is an `Err` of the
//! default emulator (no sanitizer) naming the kernel, the thread, the parameter and the element;
//! each race a ThreadSanitizer report. `tests/emulated.rs` launches the clean build of the same
//! kernels, plainly and under each sanitizer: the right answer and no report.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use kda_build::cuda::KernelBuild;
use kda_build::cuda::emulation::{Emulation, Sanitizer};
use kda_example_library::{KernelLibraryKernels, kernel_library};
use kda_runtime::emu::{DriverBackend, EmuBackend};
use kda_runtime::{Element, EmulatedSet, GpuBackendExt, LaunchGeometry, bf16, f16};
use kda_test_support::emulator::{assert_built, emulated_set};

/// The crate's manifest and kernels built with the bugs planted (once for every test), under
/// `sanitizer` or none: the set of libraries a backend carries, and the build's driver.
fn planted_build(sanitizer: Option<Sanitizer>) -> &'static (&'static EmulatedSet, PathBuf) {
    static PLAIN: OnceLock<(&'static EmulatedSet, PathBuf)> = OnceLock::new();
    static THREAD: OnceLock<(&'static EmulatedSet, PathBuf)> = OnceLock::new();
    let once = match sanitizer {
        None => &PLAIN,
        Some(Sanitizer::Thread) => &THREAD,
        Some(Sanitizer::Address) => {
            unreachable!("the planted bugs are overruns for the default emulator, races for TSan")
        }
    };
    once.get_or_init(|| {
        let name = sanitizer.map_or("plain", Sanitizer::name);
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("kernel-library-planted-{name}"));
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let emulation = Emulation { sanitizer, include_dirs: vec![root.join("tests/planted")] };
        let output = KernelBuild::new(root.join("kernels.toml"), root.join("kernels"), out)
            .without_nvcc()
            .emulation(emulation)
            .run()
            .unwrap_or_else(|error| panic!("the planted build failed: {error}"));
        assert_built(&output, "the planted kernel library");
        let driver = output.emulation_driver.expect("an emulated build makes its driver");
        let entries = &KernelLibraryKernels::ENTRIES;
        (
            emulated_set(KernelLibraryKernels::NAMESPACE, &output.emulated, entries, Some(driver.as_path())),
            driver,
        )
    })
}

/// The planted kernels on the default emulator, in process, and their table.
fn planted() -> (EmuBackend, KernelLibraryKernels) {
    let (set, _) = planted_build(None);
    let gpu = EmuBackend::new(&[set]).unwrap_or_else(|error| panic!("{error}"));
    let kernels = KernelLibraryKernels::resolve(&gpu).unwrap_or_else(|error| panic!("{error}"));
    (gpu, kernels)
}

/// The planted kernels under ThreadSanitizer, through its driver, and their table.
fn planted_under_thread_sanitizer() -> (DriverBackend, KernelLibraryKernels) {
    let (set, driver) = planted_build(Some(Sanitizer::Thread));
    let gpu = DriverBackend::new(driver, &[set], 7).unwrap_or_else(|error| panic!("{error}"));
    let kernels = KernelLibraryKernels::resolve(&gpu).unwrap_or_else(|error| panic!("{error}"));
    (gpu, kernels)
}

/// Asserts that `result` failed with a message holding each of `expected`.
fn assert_reported<T: std::fmt::Debug>(
    what: &str,
    result: Result<T, impl std::fmt::Display>,
    expected: &[&str],
) {
    let message = match result {
        Ok(value) => panic!("{what}: the planted bug launched and gave {value:?}"),
        Err(error) => error.to_string(),
    };
    for part in expected {
        assert!(message.contains(part), "{what}: `{part}` not in: {message}");
    }
}

/// Two blocks of 64 threads.
const TWO_BLOCKS: LaunchGeometry = LaunchGeometry { grid: (2, 1, 1), block: (64, 1, 1), shared_mem_bytes: 0 };

/// Asserts that `neg` of `T` over 12 contiguous elements (dims [12], strides [1]) is an `Err`
/// naming `kernel`: the planted loop runs on to i = 12, thread 12.
fn assert_neg_writes_one_past<T: Element + kernel_library::neg_type>(one: T, kernel: &str) {
    let (gpu, kernels) = planted();
    let info = gpu.upload_const(&[12u64, 1]).unwrap();
    let (inp, mut out) = (gpu.upload(&[one; 12]).unwrap(), gpu.zeros::<T>(12).unwrap());
    let args = kernel_library::neg {
        numel: 12,
        num_dims: 1,
        info: info.view().into(),
        inp: inp.view().into(),
        out: out.view_mut().into(),
    };
    let want = format!(
        "{kernel}: block (0, 0, 0), thread (12, 0, 0): a write of element 12 of parameter 4 `out`, outside its 12 elements"
    );
    assert_reported(kernel, kernels.launch_neg::<T>(&gpu, TWO_BLOCKS, args), &[&want]);
}

#[test]
fn a_16_bit_float_op_one_element_past_its_output_is_an_err() {
    assert_neg_writes_one_past(f16::ONE, "uneg_f16");
    assert_neg_writes_one_past(bf16::ONE, "uneg_bf16");
}

#[test]
fn warp_vote_compaction_reading_one_past_its_input_is_an_err() {
    let (gpu, kernels) = planted();
    // 1,000 elements on 128 threads: element 1,000 is lane 8 of the warp whose round starts at
    // 992, thread 1000 % 128 = 104 of the grid, 40 of block 1.
    let x = gpu.upload(&[1.0f32; 1000]).unwrap();
    let (mut out, mut count) = (gpu.zeros::<f32>(1000).unwrap(), gpu.zeros::<u32>(1).unwrap());
    let args = kernel_library::compact {
        x: x.view().into(),
        out: out.view_mut().into(),
        count: count.view_mut().into(),
        n: 1000,
    };
    assert_reported(
        "compact",
        kernels.launch_compact(&gpu, TWO_BLOCKS, args),
        &[
            "compact_positive_f32: block (1, 0, 0), thread (40, 0, 0): a read of element 1000 of parameter 0 `x`, outside its 1000 elements",
        ],
    );
}

#[test]
fn a_template_instantiation_reading_one_past_its_input_is_an_err() {
    let (gpu, kernels) = planted();
    // 1,001 elements, four a thread: thread 250 (122 of block 1) handles 1,000 .. 1,003.
    let x = gpu.upload(&[1.0f32; 1001]).unwrap();
    let mut y = gpu.zeros::<f32>(1001).unwrap();
    let geometry = LaunchGeometry { grid: (2, 1, 1), block: (128, 1, 1), shared_mem_bytes: 0 };
    let args = kernel_library::affine_f32 {
        x: x.view().into(),
        y: y.view_mut().into(),
        scale: 2.0,
        shift: 0.0,
        n: 1001,
    };
    assert_reported(
        "affine<float, 4>",
        kernels.launch_affine_f32(&gpu, geometry, args),
        &[
            "block (1, 0, 0), thread (122, 0, 0): a read of element 1001 of parameter 0 `x`, outside its 1001 elements",
        ],
    );
}

/// Asserts that `result` is a ThreadSanitizer race report whose stacks name `module`'s source.
fn assert_race<T: std::fmt::Debug>(what: &str, result: Result<T, impl std::fmt::Display>, module: &str) {
    assert_reported(what, result, &["ThreadSanitizer: data race", &format!("{module}.cu")]);
}

/// Asserts that scatter_add of `T` without its atomics is a race: 64 threads of one block adding
/// 32 rows of 2 `value`s into 2 rows, each element contended by 16.
fn assert_scatter_add_races<T: Element + kernel_library::scatter_add_type>(value: T) {
    let (gpu, kernels) = planted_under_thread_sanitizer();
    let ids: Vec<u32> = (0..32).map(|i| i % 2).collect();
    let one_block = LaunchGeometry { grid: (1, 1, 1), block: (64, 1, 1), shared_mem_bytes: 0 };
    let (index, src) = (gpu.upload(&ids).unwrap(), gpu.upload(&[value; 64]).unwrap());
    let mut dst = gpu.zeros::<T>(4).unwrap();
    let args = kernel_library::scatter_add {
        ids: index.view().into(),
        src: src.view().into(),
        dst: dst.view_mut().into(),
        n: 32,
        d: 2,
    };
    let what = format!("scatter_add of {:?}", T::DTYPE);
    // SAFETY: every id is 0 or 1, the rows of the two-row `dst`.
    assert_race(&what, unsafe { kernels.launch_scatter_add::<T>(&gpu, one_block, args) }, "indexing");
}

#[test]
fn a_scatter_add_without_its_atomics_is_a_race_on_every_architecture_path() {
    assert_scatter_add_races(0.5f32);
    // The bf16 kernel, compiled for sm_80 and later only (the emulated device is sm_90).
    assert_scatter_add_races(bf16::ONE);
}

#[test]
fn a_block_reduction_without_its_barrier_is_a_race() {
    let (gpu, kernels) = planted_under_thread_sanitizer();
    // Two warps a row: warp 0 reads the partial warp 1 wrote with no barrier between.
    let geometry = LaunchGeometry { grid: (2, 1, 1), block: (64, 1, 1), shared_mem_bytes: 8 };
    let x = gpu.upload(&[1.0f32; 200]).unwrap();
    let mut out = gpu.zeros::<f32>(2).unwrap();
    let args = kernel_library::sum_rows { x: x.view().into(), out: out.view_mut().into(), d: 100 };
    assert_race("sum_rows", kernels.launch_sum_rows(&gpu, geometry, args), "reduce");
    let mut y = gpu.zeros::<f32>(200).unwrap();
    let args = kernel_library::softmax { x: x.view().into(), y: y.view_mut().into(), d: 100 };
    assert_race("softmax", kernels.launch_softmax(&gpu, geometry, args), "reduce");
    let args = kernel_library::rmsnorm_f32 {
        x: x.view().into(),
        y: y.view_mut().into(),
        alpha: None,
        d: 100,
        eps: 1e-5,
        unit_offset: false,
    };
    assert_race("rmsnorm", kernels.launch_rmsnorm_f32(&gpu, geometry, args), "norm");
    let mut out = gpu.zeros::<f32>(2).unwrap();
    let args = kernel_library::max_rows_64 { x: x.view().into(), out: out.view_mut().into(), d: 100 };
    let geometry = LaunchGeometry { shared_mem_bytes: 0, ..geometry };
    assert_race("max_rows<64>", kernels.launch_max_rows_64(&gpu, geometry, args), "templates");
}

#[test]
fn a_histogram_counting_before_its_bins_are_cleared_is_a_race() {
    let (gpu, kernels) = planted_under_thread_sanitizer();
    // 64 bins cleared by 64 threads, then counted into by all of them with no barrier between.
    let values: Vec<u32> = (0..256).map(|i| (i * 7) % 64).collect();
    let (input, mut hist) = (gpu.upload(&values).unwrap(), gpu.zeros::<u32>(64).unwrap());
    let geometry = LaunchGeometry { grid: (1, 1, 1), block: (64, 1, 1), shared_mem_bytes: 256 };
    let args = kernel_library::histogram {
        values: input.view().into(),
        hist: hist.view_mut().into(),
        n: 256,
        bins: 64,
    };
    assert_race("histogram", kernels.launch_histogram(&gpu, geometry, args), "histogram");
}
