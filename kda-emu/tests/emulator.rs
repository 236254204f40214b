//! The CUDA emulator itself, on fixture kernels built for this test from `tests/fixtures/` as
//! C++. What a kernel does right gives the GPU's answer: a barrier and a shuffle warp sum on 2D
//! and 3D blocks of several blocks, cp.async data after its wait, the tensor cores (every lane's
//! ldmatrix words; a bf16 and a tf32 mma tile, exact in the emulator's summation order; the
//! rounding to tf32). What a kernel does wrong is a launch `Err` naming the kernel, the block, the
//! thread and the block-order seed, never a hang or a silent wrong answer: a barrier some threads
//! skip, a shuffle with lanes missing or lanes the warp lacks, a deadlock (an mma one lane skips
//! among them), a misaligned cp.async or ldmatrix row, an ldmatrix row outside shared memory, a
//! geometry or a shared memory size the device refuses. Shared memory (static and dynamic) and
//! pending cp.async destinations read as NaN; block order is a seeded permutation; lookups check
//! the kernel's C parameter types; a fixture that does not compile is a problem located in its
//! manifest. A kernel's own fault (an integer division by zero, a read far off a view or through a
//! null pointer, a trap) is the launch's `Err` and the next launch runs, while a fault outside any
//! kernel still reaches Rust's handler or the default action. Under the sanitizers (built per
//! test): ThreadSanitizer reports each hand-off CUDA leaves unordered, AddressSanitizer an index
//! one past a `__shared__` array, UBSan a division by zero.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::Duration;

use half::bf16;
use kda_build::cuda::emulation::{Emulation, Sanitizer};
use kda_build::cuda::{BuildOutput, Problem};
use kda_emu::FaultKind;
use kda_emu::fault::{self, Place};
use kda_runtime::emu::{DriverBackend, EmuBackend};
use kda_runtime::signature::{Access, KernelParam, Op, ScalarKind, Signature};
use kda_runtime::{
    BackendError, DType, Element, EmulatedSet, Fp8E4M3, Fp8E5M2, GpuBackend, GpuBackendExt, In, KernelArg,
    KernelEntry, LaunchGeometry, LookupError,
};
use kda_test_support::emulator::{Bits, assert_built, emulated_set};

// ---- The fixtures: built once, as the set an `EmuBackend` carries. ----

/// The namespace the fixture set and its entries share.
const NAMESPACE: &str = "fixtures@0:kernels.toml";

/// How long a launch may take before the test calls it a hang (each takes well under a second).
const HANG: Duration = Duration::from_secs(120);

fn fixture_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join(name)
}

/// Builds the manifest of `dir` as C++ for the emulator only, into the test's temporary directory.
fn build(dir: &Path, out: &str) -> BuildOutput {
    build_with(dir, out, Emulation::default())
}

fn build_with(dir: &Path, out: &str, emulation: Emulation) -> BuildOutput {
    kda_test_support::emulator::build(dir, &Path::new(env!("CARGO_TARGET_TMPDIR")).join(out), emulation)
}

/// The fixtures of `tests/fixtures/kernels.toml`, built once for every test.
fn fixtures() -> &'static EmulatedSet {
    static SET: OnceLock<&'static EmulatedSet> = OnceLock::new();
    SET.get_or_init(|| {
        let output = build(&fixture_dir("fixtures"), "emulator-fixtures");
        assert_built(&output, "the fixtures");
        emulated_set(NAMESPACE, &output.emulated, &FIXTURES, None)
    })
}

/// A backend carrying the fixtures, whose first launch has block-order seed `seed`.
fn backend(seed: u64) -> EmuBackend {
    EmuBackend::new(&[fixtures()]).unwrap_or_else(|error| panic!("{error}")).with_seed(seed)
}

/// Runs `work` on its own thread and fails the test if it has not finished within [`HANG`]: a
/// misuse the emulator does not catch hangs the launch, and must not hang the suite with it.
fn without_hanging<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    let (send, receive) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let _ = send.send(work());
    });
    match receive.recv_timeout(HANG) {
        Ok(value) => value,
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The work panicked: rethrow its panic here.
            std::panic::resume_unwind(worker.join().expect_err("no value and no panic"))
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("the launch still runs after {HANG:?}: it hangs"),
    }
}

/// Launches `entry` checked against its signature; the launch error as its message.
fn launch(
    gpu: &EmuBackend,
    entry: &KernelEntry,
    geometry: LaunchGeometry,
    args: &mut [KernelArg<'_>],
) -> Result<(), String> {
    let kernel = gpu.lookup(entry).unwrap_or_else(|error| panic!("{error}"));
    gpu.launch(kernel, geometry, args).map_err(|error| error.to_string())
}

fn geometry(grid: (u32, u32, u32), block: (u32, u32, u32)) -> LaunchGeometry {
    LaunchGeometry { grid, block, shared_mem_bytes: 0 }
}

/// The thread a launch message names, `block (x, y, z), thread (x, y, z): `.
fn thread_named(message: &str) -> [u32; 3] {
    let at = message.find("thread (").unwrap_or_else(|| panic!("no thread named in: {message}"));
    let rest = &message[at + "thread (".len()..];
    let inside = &rest[..rest.find(')').expect("a closing parenthesis")];
    let numbers: Vec<u32> = inside.split(", ").map(|n| n.parse().expect("a thread index")).collect();
    numbers.try_into().expect("three thread indices")
}

/// The entry `name` of module `module` in the fixtures' namespace.
const fn entry(module: &'static str, name: &'static str, signature: &'static Signature) -> KernelEntry {
    KernelEntry {
        namespace: NAMESPACE,
        table: "fixtures",
        field: name,
        module,
        entry: name,
        required: true,
        line: 0,
        signature: Some(signature),
    }
}

const fn read(name: &'static str, dtype: DType, text: &'static str, program: &'static [Op]) -> KernelParam {
    KernelParam::buffer(name, dtype, Access::Read, text, program)
}

const fn write(name: &'static str, dtype: DType, text: &'static str, program: &'static [Op]) -> KernelParam {
    KernelParam::buffer(name, dtype, Access::Write, text, program)
}

const U32: ScalarKind = ScalarKind::U32;

/// `const f32 x[n], f32 sums[blocks], u32 ids[n*6], u32 dims[6], u32 n, u32 blocks`.
const BLOCK_SUMS: KernelEntry = entry(
    "warp_sum",
    "block_sums",
    &Signature {
        params: &[
            read("x", DType::F32, "n", &[Op::Scalar(4)]),
            write("sums", DType::F32, "blocks", &[Op::Scalar(5)]),
            write("ids", DType::U32, "n*6", &[Op::Scalar(4), Op::Literal(6), Op::Mul]),
            write("dims", DType::U32, "6", &[Op::Literal(6)]),
            KernelParam::scalar("n", U32),
            KernelParam::scalar("blocks", U32),
        ],
        requires: &[],
    },
);

/// `u32 log[blocks+1], u32 blocks`.
const RECORD_ORDER: KernelEntry = entry(
    "order",
    "record_order",
    &Signature {
        params: &[
            write("log", DType::U32, "blocks+1", &[Op::Scalar(1), Op::Literal(1), Op::Add]),
            KernelParam::scalar("blocks", U32),
        ],
        requires: &[],
    },
);

/// `record_order` as a stale manifest might declare it: `blocks` a u64.
const RECORD_ORDER_U64: KernelEntry = entry(
    "order",
    "record_order",
    &Signature {
        params: &[
            write("log", DType::U32, "blocks+1", &[Op::Scalar(1), Op::Literal(1), Op::Add]),
            KernelParam::scalar("blocks", ScalarKind::U64),
        ],
        requires: &[],
    },
);

/// One output buffer of `len` elements: `u32 out[LEN]` or `f32 out[LEN]`.
macro_rules! one_output {
    ($module:literal, $name:literal, $dtype:expr, $len:literal) => {
        entry(
            $module,
            $name,
            &Signature {
                params: &[write("out", $dtype, stringify!($len), &[Op::Literal($len)])],
                requires: &[],
            },
        )
    };
}

const BARRIER_SKIPPED: KernelEntry = one_output!("misuse", "barrier_skipped", DType::U32, 32);
const SHUFFLE_LANES_GONE: KernelEntry = one_output!("misuse", "shuffle_lanes_gone", DType::F32, 32);
const SHUFFLE_PAST_WARP: KernelEntry = one_output!("misuse", "shuffle_past_warp", DType::F32, 48);
const SHUFFLE_DEADLOCK: KernelEntry = one_output!("misuse", "shuffle_deadlock", DType::F32, 64);

/// `u32 out[n], u32 n`.
const SHARED_UNWRITTEN: KernelEntry = entry(
    "shared",
    "shared_unwritten",
    &Signature {
        params: &[write("out", DType::U32, "n", &[Op::Scalar(1)]), KernelParam::scalar("n", U32)],
        requires: &[],
    },
);

/// `u32 out[64], u32 order[3]`.
const SHARED_PER_BLOCK: KernelEntry = entry(
    "shared",
    "shared_per_block",
    &Signature {
        params: &[
            write("out", DType::U32, "64", &[Op::Literal(64)]),
            write("order", DType::U32, "3", &[Op::Literal(3)]),
        ],
        requires: &[],
    },
);

/// `u32 out[256], u32 info[12]`.
const DYNAMIC_WORDS: KernelEntry = entry(
    "dynamic",
    "dynamic_words",
    &Signature {
        params: &[
            write("out", DType::U32, "256", &[Op::Literal(256)]),
            write("info", DType::U32, "12", &[Op::Literal(12)]),
        ],
        requires: &[],
    },
);

/// `f32 out[n], u32 n`, for the two shared memory sizes.
macro_rules! out_n {
    ($name:literal) => {
        entry(
            "shared",
            $name,
            &Signature {
                params: &[write("out", DType::F32, "n", &[Op::Scalar(1)]), KernelParam::scalar("n", U32)],
                requires: &[],
            },
        )
    };
}

const SMALL_SHARED: KernelEntry = out_n!("small_shared");
const BIG_SHARED: KernelEntry = out_n!("big_shared");

/// `const f32 src[4*n], u32 before[4*n], u32 after[4*n], u32 n`.
const CP_ASYNC_WINDOW: KernelEntry = entry(
    "cp_async",
    "cp_async_window",
    &Signature {
        params: &[
            read("src", DType::F32, "4*n", &[Op::Literal(4), Op::Scalar(3), Op::Mul]),
            write("before", DType::U32, "4*n", &[Op::Literal(4), Op::Scalar(3), Op::Mul]),
            write("after", DType::U32, "4*n", &[Op::Literal(4), Op::Scalar(3), Op::Mul]),
            KernelParam::scalar("n", U32),
        ],
        requires: &[],
    },
);

/// `const f32 src[4*n+4], u32 out[4*n], u32 n`.
const CP_ASYNC_MISALIGNED: KernelEntry = entry(
    "cp_async",
    "cp_async_misaligned",
    &Signature {
        params: &[
            read(
                "src",
                DType::F32,
                "4*n+4",
                &[Op::Literal(4), Op::Scalar(2), Op::Mul, Op::Literal(4), Op::Add],
            ),
            write("out", DType::U32, "4*n", &[Op::Literal(4), Op::Scalar(2), Op::Mul]),
            KernelParam::scalar("n", U32),
        ],
        requires: &[],
    },
);

/// `const f32 src[4], u32 out[4]`.
const CP_ASYNC_EMPTY: KernelEntry = entry(
    "cp_async",
    "cp_async_empty",
    &Signature {
        params: &[
            read("src", DType::F32, "4", &[Op::Literal(4)]),
            write("out", DType::U32, "4", &[Op::Literal(4)]),
        ],
        requires: &[],
    },
);

/// `const bf16 a[256], const bf16 b[128], const f32 c[128], f32 d[128]`.
const MMA_TILE: KernelEntry = entry(
    "mma",
    "mma_tile",
    &Signature {
        params: &[
            read("a", DType::Bf16, "256", &[Op::Literal(256)]),
            read("b", DType::Bf16, "128", &[Op::Literal(128)]),
            read("c", DType::F32, "128", &[Op::Literal(128)]),
            write("d", DType::F32, "128", &[Op::Literal(128)]),
        ],
        requires: &[],
    },
);

/// `const f32 a[128], const f32 b[64], const f32 c[128], f32 d[128], u32 rounded[128]`.
const MMA_TF32_TILE: KernelEntry = entry(
    "mma",
    "mma_tf32_tile",
    &Signature {
        params: &[
            read("a", DType::F32, "128", &[Op::Literal(128)]),
            read("b", DType::F32, "64", &[Op::Literal(64)]),
            read("c", DType::F32, "128", &[Op::Literal(128)]),
            write("d", DType::F32, "128", &[Op::Literal(128)]),
            write("rounded", DType::U32, "128", &[Op::Literal(128)]),
        ],
        requires: &[],
    },
);

/// `const u32 rows[128], u32 out[192]`.
const LDMATRIX_LANES: KernelEntry = entry(
    "mma",
    "ldmatrix_lanes",
    &Signature {
        params: &[
            read("rows", DType::U32, "128", &[Op::Literal(128)]),
            write("out", DType::U32, "192", &[Op::Literal(192)]),
        ],
        requires: &[],
    },
);

const MMA_LANE_SKIPS: KernelEntry = one_output!("mma", "mma_lane_skips", DType::F32, 32);

/// `u32 out[32], u32 mode`.
const LDMATRIX_MISADDRESSED: KernelEntry = entry(
    "mma",
    "ldmatrix_misaddressed",
    &Signature {
        params: &[write("out", DType::U32, "32", &[Op::Literal(32)]), KernelParam::scalar("mode", U32)],
        requires: &[],
    },
);

/// `const u16 bits[n], f32 as_float[n], const f32 values[n], f16 to_half[n], f32
/// bf16_as_float[n], bf16 to_bf16[n], u32 n`.
const F16_CONVERSIONS: KernelEntry = entry(
    "halves",
    "f16_conversions",
    &Signature {
        params: &[
            read("bits", DType::U16, "n", &[Op::Scalar(6)]),
            write("as_float", DType::F32, "n", &[Op::Scalar(6)]),
            read("values", DType::F32, "n", &[Op::Scalar(6)]),
            write("to_half", DType::F16, "n", &[Op::Scalar(6)]),
            write("bf16_as_float", DType::F32, "n", &[Op::Scalar(6)]),
            write("to_bf16", DType::Bf16, "n", &[Op::Scalar(6)]),
            KernelParam::scalar("n", U32),
        ],
        requires: &[],
    },
);

/// `const u8 bits[n], f32 from_e4m3[n], f32 from_e5m2[n], const f32 values[n], fp8e4m3 to_e4m3[n],
/// fp8e5m2 to_e5m2[n], u8 unsaturated[2*n], u32 n`.
const FP8_CONVERSIONS: KernelEntry = entry(
    "fp8",
    "fp8_conversions",
    &Signature {
        params: &[
            read("bits", DType::U8, "n", &[Op::Scalar(7)]),
            write("from_e4m3", DType::F32, "n", &[Op::Scalar(7)]),
            write("from_e5m2", DType::F32, "n", &[Op::Scalar(7)]),
            read("values", DType::F32, "n", &[Op::Scalar(7)]),
            write("to_e4m3", DType::Fp8E4M3, "n", &[Op::Scalar(7)]),
            write("to_e5m2", DType::Fp8E5M2, "n", &[Op::Scalar(7)]),
            write("unsaturated", DType::U8, "2*n", &[Op::Literal(2), Op::Scalar(7), Op::Mul]),
            KernelParam::scalar("n", U32),
        ],
        requires: &[],
    },
);

const ARCH_GATED: KernelEntry = one_output!("shared", "arch_gated", DType::U32, 1);

/// Every fixture entry with the signature its kernel takes: what the fixture set proves, as the
/// build proves a manifest's. `RECORD_ORDER_U64` is not among them: it describes its kernel
/// wrongly.
const FIXTURES: [KernelEntry; 22] = [
    BLOCK_SUMS,
    RECORD_ORDER,
    BARRIER_SKIPPED,
    SHUFFLE_LANES_GONE,
    SHUFFLE_PAST_WARP,
    SHUFFLE_DEADLOCK,
    SHARED_UNWRITTEN,
    SHARED_PER_BLOCK,
    DYNAMIC_WORDS,
    SMALL_SHARED,
    BIG_SHARED,
    CP_ASYNC_WINDOW,
    CP_ASYNC_MISALIGNED,
    CP_ASYNC_EMPTY,
    MMA_TILE,
    MMA_TF32_TILE,
    LDMATRIX_LANES,
    MMA_LANE_SKIPS,
    LDMATRIX_MISADDRESSED,
    F16_CONVERSIONS,
    FP8_CONVERSIONS,
    ARCH_GATED,
];

const NAN_BITS: u32 = 0xffff_ffff;

// ---- What a correct kernel computes. ----

/// Runs `block_sums` at one shape and checks every block's sum and every thread's indices
/// against what the shape means, computed here.
fn check_block_sums(grid: (u32, u32, u32), block: (u32, u32, u32)) {
    let gpu = backend(7);
    let threads = block.0 * block.1 * block.2;
    let blocks = grid.0 * grid.1 * grid.2;
    let n = threads * blocks;
    let x: Vec<f32> = (0..n).map(|i| (i % 7) as f32 - 3.0 + (i / 64) as f32).collect();
    let (mut sums, mut ids, mut dims) = (
        gpu.upload(&vec![f32::NAN; blocks as usize]).unwrap(),
        gpu.zeros::<u32>(6 * n as usize).unwrap(),
        gpu.zeros::<u32>(6).unwrap(),
    );
    let x_buffer = gpu.upload(&x).unwrap();
    launch(
        &gpu,
        &BLOCK_SUMS,
        geometry(grid, block),
        &mut [
            (&x_buffer).into(),
            (&mut sums).into(),
            (&mut ids).into(),
            (&mut dims).into(),
            n.into(),
            blocks.into(),
        ],
    )
    .unwrap_or_else(|error| panic!("{error}"));

    // Integers well inside f32's exact range: every summation order gives the same sum.
    let expected: Vec<f32> = x
        .chunks(threads as usize)
        .map(|slice| slice.iter().map(|&v| f64::from(v)).sum::<f64>() as f32)
        .collect();
    assert_eq!(gpu.download::<f32>(&sums).unwrap(), expected, "block sums at grid {grid:?}, block {block:?}");
    assert_eq!(gpu.download::<u32>(&dims).unwrap(), [block.0, block.1, block.2, grid.0, grid.1, grid.2]);
    let ids = gpu.download::<u32>(&ids).unwrap();
    let mut i = 0;
    for bz in 0..grid.2 {
        for by in 0..grid.1 {
            for bx in 0..grid.0 {
                for tz in 0..block.2 {
                    for ty in 0..block.1 {
                        for tx in 0..block.0 {
                            assert_eq!(
                                ids[6 * i..6 * i + 6],
                                [tx, ty, tz, bx, by, bz],
                                "the indices of element {i} at grid {grid:?}, block {block:?}"
                            );
                            i += 1;
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn a_barrier_and_a_shuffle_warp_sum_give_every_block_its_sum_on_3d_blocks_and_grids() {
    // Two warps a block, each spanning several rows and planes of the block.
    check_block_sums((3, 2, 2), (8, 4, 2));
}

#[test]
fn a_barrier_and_a_shuffle_warp_sum_give_every_block_its_sum_on_2d_blocks_and_grids() {
    check_block_sums((2, 3, 1), (16, 4, 1));
    check_block_sums((1, 2, 3), (4, 8, 1));
}

// ---- Block order. ----

/// The order `record_order` saw the 16 blocks of one launch run in.
fn block_order(gpu: &EmuBackend) -> Vec<u32> {
    const BLOCKS: u32 = 16;
    let mut log = gpu.zeros::<u32>(BLOCKS as usize + 1).unwrap();
    launch(gpu, &RECORD_ORDER, geometry((BLOCKS, 1, 1), (32, 1, 1)), &mut [(&mut log).into(), BLOCKS.into()])
        .unwrap_or_else(|error| panic!("{error}"));
    let log = gpu.download::<u32>(&log).unwrap();
    assert_eq!(log[0], BLOCKS, "every block ran once");
    let order = log[1..].to_vec();
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..BLOCKS).collect::<Vec<_>>(), "the order {order:?} is a permutation of the blocks");
    order
}

#[test]
fn blocks_run_in_an_order_the_seed_shuffles_and_replays() {
    let first = block_order(&backend(1));
    let second = block_order(&backend(2));
    assert_ne!(first, second, "seeds 1 and 2 give one order");
    assert_ne!(first, (0..16).collect::<Vec<_>>(), "seed 1 leaves the blocks in grid order");
    assert_eq!(block_order(&backend(1)), first, "seed 1 gives another order the second time");
    // A launch's seed is the backend's plus the launch's number: the second launch of a backend
    // seeded 1 replays the first of one seeded 2.
    let gpu = backend(1);
    assert_eq!(block_order(&gpu), first);
    assert_eq!(block_order(&gpu), second);
}

// ---- Barriers and shuffles used wrongly. ----

#[test]
fn a_barrier_some_threads_skip_is_an_err_naming_the_kernel_the_thread_and_the_seed() {
    let (first, second, out) = without_hanging(|| {
        let gpu = backend(0x5eed);
        let mut out = gpu.zeros::<u32>(32).unwrap();
        let first = launch(&gpu, &BARRIER_SKIPPED, geometry((1, 1, 1), (32, 1, 1)), &mut [(&mut out).into()]);
        let second =
            launch(&gpu, &BARRIER_SKIPPED, geometry((1, 1, 1), (32, 1, 1)), &mut [(&mut out).into()]);
        let out = gpu.download::<u32>(&out).unwrap();
        (
            first.expect_err("a barrier threads 8.. skip launched"),
            second.expect_err("the second launch ran"),
            out,
        )
    });
    // The threads that waited at the barrier never went past it.
    assert_eq!(out, [0; 32], "a thread passed the broken barrier");
    for message in [&first, &second] {
        assert!(message.contains("`misuse::barrier_skipped`"), "{message}");
        assert!(message.contains("barrier_skipped: block (0, 0, 0), thread ("), "{message}");
        assert!(message.contains("__syncthreads"), "{message}");
        assert!(message.contains("a barrier every thread of the block must reach"), "{message}");
        // Whichever came first, the thread named is the one that did it: a returning thread
        // (8..) while others wait, or a waiting one (..8) after some returned.
        let [x, y, z] = thread_named(message);
        assert_eq!((y, z), (0, 0), "{message}");
        if message.contains("returned while") {
            assert!(x >= 8, "thread {x} returned, but only threads 8.. do: {message}");
        } else {
            assert!(message.contains("__syncthreads reached after"), "{message}");
            assert!(x < 8, "thread {x} reached the barrier, but only threads ..8 do: {message}");
        }
    }
    // Each launch names its own seed, from which it can be replayed.
    assert!(first.contains("(block 1 of 1 in the order of seed 0x0000000000005eed)"), "{first}");
    assert!(second.contains("(block 1 of 1 in the order of seed 0x0000000000005eee)"), "{second}");
}

#[test]
fn a_failing_block_is_named_among_several_and_stops_the_launch() {
    let message = without_hanging(|| {
        let gpu = backend(3);
        let mut out = gpu.zeros::<u32>(32).unwrap();
        launch(&gpu, &BARRIER_SKIPPED, geometry((2, 2, 2), (32, 1, 1)), &mut [(&mut out).into()])
            .expect_err("a barrier threads 8.. skip launched")
    });
    // Every block fails the same way: the first to run ends the launch.
    assert!(message.contains("(block 1 of 8 in the order of seed 0x0000000000000003)"), "{message}");
    assert!(message.contains("barrier_skipped: block ("), "{message}");
}

#[test]
fn a_shuffle_whose_mask_names_lanes_that_returned_is_an_err_naming_the_shuffle() {
    let message = without_hanging(|| {
        let gpu = backend(11);
        let mut out = gpu.zeros::<f32>(32).unwrap();
        launch(&gpu, &SHUFFLE_LANES_GONE, geometry((1, 1, 1), (32, 1, 1)), &mut [(&mut out).into()])
            .expect_err("a shuffle with lanes 16.. gone launched")
    });
    assert!(message.contains("`misuse::shuffle_lanes_gone`"), "{message}");
    assert!(message.contains("__shfl_xor_sync"), "{message}");
    assert!(message.contains("mask 0xffffffff"), "{message}");
    assert!(message.contains("seed 0x000000000000000b"), "{message}");
    // Either a lane reached the shuffle after lanes of its mask returned, or a lane of the mask
    // returned while others waited for it.
    let [x, _, _] = thread_named(&message);
    if message.contains("have returned") {
        assert!(x < 16, "{message}");
    } else {
        assert!(message.contains("returned while lanes"), "{message}");
        assert!(x >= 16, "{message}");
    }
}

#[test]
fn a_full_mask_shuffle_in_a_partial_warp_is_an_err_naming_the_missing_lanes() {
    let message = without_hanging(|| {
        let gpu = backend(12);
        let mut out = gpu.zeros::<f32>(48).unwrap();
        launch(&gpu, &SHUFFLE_PAST_WARP, geometry((1, 1, 1), (48, 1, 1)), &mut [(&mut out).into()])
            .expect_err("a 48-thread block's second warp shuffled with a full mask")
    });
    assert!(message.contains("`misuse::shuffle_past_warp`"), "{message}");
    assert!(
        message.contains(
            "__shfl_xor_sync with mask 0xffffffff names lanes warp 1 does not have (lanes 0x0000ffff)"
        ),
        "{message}"
    );
    let [x, _, _] = thread_named(&message);
    assert!((32..48).contains(&x), "thread {x} is not of the second warp: {message}");
}

#[test]
fn a_shuffle_waiting_for_lanes_at_a_barrier_is_a_deadlock_err() {
    let message = without_hanging(|| {
        let gpu = backend(13);
        let mut out = gpu.zeros::<f32>(64).unwrap();
        launch(&gpu, &SHUFFLE_DEADLOCK, geometry((1, 1, 1), (64, 1, 1)), &mut [(&mut out).into()])
            .expect_err("a deadlocked block launched")
    });
    assert!(message.contains("`misuse::shuffle_deadlock`"), "{message}");
    // Found when the last thread starts to wait: all 64 wait, none has returned.
    assert!(
        message.contains(
            "deadlock: 48 threads wait at __syncthreads; lanes 0x0000ffff of warp 0 wait in __shfl_xor_sync \
             for lanes 0xffff0000"
        ),
        "{message}"
    );
}

// ---- Shared memory. ----

#[test]
fn shared_memory_no_thread_wrote_reads_as_nan() {
    let gpu = backend(21);
    let mut out = gpu.zeros::<u32>(64).unwrap();
    launch(&gpu, &SHARED_UNWRITTEN, geometry((1, 1, 1), (64, 1, 1)), &mut [(&mut out).into(), 64u32.into()])
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(gpu.download::<u32>(&out).unwrap(), vec![NAN_BITS; 64]);
}

#[test]
fn shared_memory_is_nan_again_for_every_block_whatever_the_order() {
    let gpu = backend(0);
    let mut orders = Vec::new();
    for _ in 0..16 {
        let mut out = gpu.zeros::<u32>(64).unwrap();
        let mut order = gpu.zeros::<u32>(3).unwrap();
        launch(
            &gpu,
            &SHARED_PER_BLOCK,
            geometry((2, 1, 1), (32, 1, 1)),
            &mut [(&mut out).into(), (&mut order).into()],
        )
        .unwrap_or_else(|error| panic!("{error}"));
        let out = gpu.download::<u32>(&out).unwrap();
        let order = gpu.download::<u32>(&order).unwrap();
        // Block 0 reads what it wrote, reversed.
        let written: Vec<u32> = (0..32).rev().map(|t| (1.0f32 + t as f32).to_bits()).collect();
        assert_eq!(out[..32], written, "block 0 in the order {order:?}");
        // Block 1 reads NaN, even right after block 0 wrote the same storage.
        assert_eq!(out[32..], [NAN_BITS; 32], "block 1 in the order {order:?}");
        orders.push([order[1], order[2]]);
    }
    assert!(orders.contains(&[0, 1]) && orders.contains(&[1, 0]), "16 seeds gave only the orders {orders:?}");
}

#[test]
fn dynamic_shared_memory_is_the_launchs_size_aligned_and_nan_again_for_every_block() {
    // Past the 48 KiB a block has without opting in, up to the device's 227 KiB.
    for (seed, bytes) in [(23, 256u32), (24, 100_000), (25, 227 * 1024)] {
        let gpu = backend(seed);
        let mut out = gpu.zeros::<u32>(256).unwrap();
        let mut info = gpu.zeros::<u32>(12).unwrap();
        let geometry = LaunchGeometry { shared_mem_bytes: bytes, ..geometry((4, 1, 1), (32, 1, 1)) };
        launch(&gpu, &DYNAMIC_WORDS, geometry, &mut [(&mut out).into(), (&mut info).into()])
            .unwrap_or_else(|error| panic!("{bytes} bytes: {error}"));
        let (out, info) = (gpu.download::<u32>(&out).unwrap(), gpu.download::<u32>(&info).unwrap());
        for b in 0..4u32 {
            let (found, read_back) = out[64 * b as usize..][..64].split_at(32);
            // Unwritten whatever block ran before it on the same storage.
            assert_eq!(found, [NAN_BITS; 32], "{bytes} bytes, block {b}");
            let written: Vec<u32> = (0..32).rev().map(|t| 1000 * (b + 1) + t).collect();
            assert_eq!(read_back, written, "{bytes} bytes, block {b}");
            // Its size, 128-byte aligned, and its last word is the block's own.
            assert_eq!(info[3 * b as usize..][..3], [bytes, 0, 7 + b], "{bytes} bytes, block {b}");
        }
    }
}

#[test]
fn static_shared_memory_over_48_kib_is_an_err_and_each_entry_reports_its_own() {
    let gpu = backend(22);
    let big = gpu.static_shared_bytes(&BIG_SHARED).unwrap_or_else(|error| panic!("{error}"));
    let small = gpu.static_shared_bytes(&SMALL_SHARED).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(big, 49 * 1024, "big_shared's bytes");
    // The same module, another entry: only its own 64 floats (each library links one kernel).
    assert_eq!(small, 256, "small_shared's bytes");

    let mut out = gpu.upload(&[-1.0f32; 256]).unwrap();
    let message =
        launch(&gpu, &BIG_SHARED, geometry((1, 1, 1), (256, 1, 1)), &mut [(&mut out).into(), 256u32.into()])
            .expect_err("49 KiB of static shared memory launched");
    assert!(message.contains("`shared::big_shared`"), "{message}");
    assert!(message.contains(&format!("{big} bytes of static shared memory")), "{message}");
    assert!(message.contains("49152"), "{message}");
    assert_eq!(gpu.download::<f32>(&out).unwrap(), [-1.0; 256], "the kernel ran");

    let mut out = gpu.upload(&[-1.0f32; 64]).unwrap();
    launch(&gpu, &SMALL_SHARED, geometry((1, 1, 1), (64, 1, 1)), &mut [(&mut out).into(), 64u32.into()])
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(gpu.download::<f32>(&out).unwrap(), (0..64).rev().map(|t| t as f32).collect::<Vec<_>>());
}

// ---- cp.async. ----

#[test]
fn a_cp_async_destination_reads_nan_before_its_wait_and_the_data_after() {
    let gpu = backend(31);
    let src: Vec<f32> = (0..128).map(|i| i as f32 + 0.5).collect();
    let src_buffer = gpu.upload(&src).unwrap();
    let (mut before, mut after) = (gpu.zeros::<u32>(128).unwrap(), gpu.zeros::<u32>(128).unwrap());
    launch(
        &gpu,
        &CP_ASYNC_WINDOW,
        geometry((1, 1, 1), (32, 1, 1)),
        &mut [(&src_buffer).into(), (&mut before).into(), (&mut after).into(), 32u32.into()],
    )
    .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(gpu.download::<u32>(&before).unwrap(), vec![NAN_BITS; 128]);
    assert_eq!(gpu.download::<u32>(&after).unwrap(), src.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
}

#[test]
fn a_misaligned_cp_async_is_an_err() {
    let message = without_hanging(|| {
        let gpu = backend(32);
        let src = gpu.upload(&[1.0f32; 132]).unwrap();
        let mut out = gpu.zeros::<u32>(128).unwrap();
        launch(
            &gpu,
            &CP_ASYNC_MISALIGNED,
            geometry((1, 1, 1), (32, 1, 1)),
            &mut [(&src).into(), (&mut out).into(), 32u32.into()],
        )
        .expect_err("a 16-byte cp.async from a 4-byte-aligned source launched")
    });
    assert!(message.contains("`cp_async::cp_async_misaligned`"), "{message}");
    assert!(message.contains("cp.async of 16 bytes"), "{message}");
    assert!(message.contains("must be aligned to the size"), "{message}");
    assert!(message.contains("block (0, 0, 0), thread ("), "{message}");
}

#[test]
fn a_cp_async_of_no_bytes_is_an_err_not_a_crash() {
    let message = without_hanging(|| {
        let gpu = backend(33);
        let src = gpu.upload(&[1.0f32; 4]).unwrap();
        let mut out = gpu.zeros::<u32>(4).unwrap();
        launch(&gpu, &CP_ASYNC_EMPTY, geometry((1, 1, 1), (1, 1, 1)), &mut [(&src).into(), (&mut out).into()])
            .expect_err("a cp.async of 0 bytes launched")
    });
    assert!(message.contains("`cp_async::cp_async_empty`"), "{message}");
    assert!(message.contains("cp.async of 0 bytes"), "{message}");
    assert!(message.contains("it copies 4, 8 or 16"), "{message}");
}

// ---- Tensor cores: ldmatrix, mma.m16n8k16 (bf16) and mma.m16n8k8 (tf32). ----

/// A bf16 of either sign, magnitude in [2^-4, 2^4), any significand: products and sums stay far
/// inside f32's range, but the sums of a tile do not fit f32's significand, so their order shows
/// in the last bits.
fn bf16_any(bits: &mut Bits) -> bf16 {
    let r = bits.next_u64();
    let (sign, exponent, significand) = (r & 1, 123 + (r >> 1) % 8, (r >> 8) & 0x7f);
    bf16::from_bits(u16::try_from(sign << 15 | exponent << 7 | significand).expect("16 bits"))
}

/// D = (C + A·B) + A·B in f32 with A [16][16] and B given as [8][16] (n, k), each sum over k in
/// ascending order onto the accumulator, `k_order` giving the order (the emulator's: 0..16).
fn mma_tile_reference(a: &[bf16], b: &[bf16], c: &[f32], k_order: &[usize]) -> Vec<f32> {
    let mut d = c.to_vec();
    for m in 0..16 {
        for n in 0..8 {
            let mut acc = c[m * 8 + n];
            for _ in 0..2 {
                for &k in k_order {
                    acc += a[m * 16 + k].to_f32() * b[n * 16 + k].to_f32();
                }
            }
            d[m * 8 + n] = acc;
        }
    }
    d
}

#[test]
fn ldmatrix_and_two_accumulating_mmas_give_the_f32_tile_summed_in_ascending_k() {
    let gpu = backend(61);
    let mut bits = Bits(0x6d6d_6131);
    let a: Vec<bf16> = (0..256).map(|_| bf16_any(&mut bits)).collect();
    let b: Vec<bf16> = (0..128).map(|_| bf16_any(&mut bits)).collect();
    let c: Vec<f32> = (0..128).map(|_| bf16_any(&mut bits).to_f32() * 4.0).collect();
    let (a_buffer, b_buffer, c_buffer) =
        (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap(), gpu.upload(&c).unwrap());
    let mut d = gpu.upload(&[f32::NAN; 128]).unwrap();
    launch(
        &gpu,
        &MMA_TILE,
        geometry((1, 1, 1), (32, 1, 1)),
        &mut [(&a_buffer).into(), (&b_buffer).into(), (&c_buffer).into(), (&mut d).into()],
    )
    .unwrap_or_else(|error| panic!("{error}"));
    let ascending: Vec<usize> = (0..16).collect();
    let expected = mma_tile_reference(&a, &b, &c, &ascending);
    let got = gpu.download::<f32>(&d).unwrap();
    for (i, (got, expected)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(got.to_bits(), expected.to_bits(), "D[{}][{}]: {got} != {expected}", i / 8, i % 8);
    }
    // The comparison sees the order: summed from k = 15 down, the same inputs round otherwise.
    let descending: Vec<usize> = (0..16).rev().collect();
    assert_ne!(
        mma_tile_reference(&a, &b, &c, &descending),
        expected,
        "the inputs do not tell the orders apart"
    );
}

/// x rounded to tf32 as cvt.rna.tf32.f32 does, found by distance: the tf32 values on either side
/// of a finite x (its 13 low bits cleared, and one tf32 step further from zero), the nearer one, a
/// tie going away from zero.
fn tf32_nearest(x: f32) -> f32 {
    let toward_zero = f32::from_bits(x.to_bits() & !0x1fff);
    let away = f32::from_bits(toward_zero.to_bits() + 0x2000);
    let (below, above) = (f64::from(x) - f64::from(toward_zero), f64::from(away) - f64::from(x));
    if above.abs() <= below.abs() { away } else { toward_zero }
}

/// D = C + A·B with A [16][8], B [8][8] (k, n) as given, each sum onto C in `k_order`.
fn tf32_tile_reference(a: &[f32], b: &[f32], c: &[f32], k_order: &[usize]) -> Vec<f32> {
    (0..128)
        .map(|at| {
            let (m, n) = (at / 8, at % 8);
            k_order.iter().fold(c[at], |acc, &k| acc + a[m * 8 + k] * b[k * 8 + n])
        })
        .collect()
}

#[test]
fn to_tf32_rounds_to_nearest_ties_away_and_the_tf32_mma_sums_exact_products_in_ascending_k() {
    let gpu = backend(65);
    let mut bits = Bits(0x7466_3332);
    let mut a: Vec<f32> = (0..128).map(|_| bits.f32_any()).collect();
    // Exact ties of either sign, and the values one bit either side of a tie.
    for (at, low) in [(0, 0x1000), (9, 0x1000), (17, 0x0fff), (30, 0x1001), (41, 0x3000)] {
        let sign = if at % 2 == 0 { 0 } else { 0x8000_0000 };
        a[at] = f32::from_bits(sign | 0x3fa0_0000 | low);
    }
    let b: Vec<f32> = (0..64).map(|_| bits.f32_any()).collect();
    let c: Vec<f32> = (0..128).map(|_| bits.f32_any() * 4.0).collect();
    let (a_buffer, b_buffer, c_buffer) =
        (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap(), gpu.upload(&c).unwrap());
    let mut d = gpu.upload(&[f32::NAN; 128]).unwrap();
    let mut rounded = gpu.zeros::<u32>(128).unwrap();
    launch(
        &gpu,
        &MMA_TF32_TILE,
        geometry((1, 1, 1), (32, 1, 1)),
        &mut [
            (&a_buffer).into(),
            (&b_buffer).into(),
            (&c_buffer).into(),
            (&mut d).into(),
            (&mut rounded).into(),
        ],
    )
    .unwrap_or_else(|error| panic!("{error}"));

    let a_tf32: Vec<f32> = a.iter().map(|&x| tf32_nearest(x)).collect();
    let got_rounded = gpu.download::<u32>(&rounded).unwrap();
    for (at, (&got, &x)) in got_rounded.iter().zip(&a).enumerate() {
        assert_eq!(got, a_tf32[at].to_bits(), "to_tf32(A[{at}] = {x:e} = {:#010x})", x.to_bits());
    }
    assert_eq!(a_tf32[0].to_bits(), 0x3fa0_2000, "a positive tie goes up, away from zero");
    assert_eq!(a_tf32[9].to_bits(), 0xbfa0_2000, "a negative tie goes down, away from zero");

    let b_tf32: Vec<f32> = b.iter().map(|&x| tf32_nearest(x)).collect();
    let ascending: Vec<usize> = (0..8).collect();
    let expected = tf32_tile_reference(&a_tf32, &b_tf32, &c, &ascending);
    let got = gpu.download::<f32>(&d).unwrap();
    for (at, (got, expected)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(got.to_bits(), expected.to_bits(), "D[{}][{}]: {got} != {expected}", at / 8, at % 8);
    }
    // The comparison sees the order and the rounding: summed from k = 7 down, or from the f32
    // inputs, the same tile comes out otherwise.
    let descending: Vec<usize> = (0..8).rev().collect();
    assert_ne!(tf32_tile_reference(&a_tf32, &b_tf32, &c, &descending), expected, "the orders look alike");
    assert_ne!(tf32_tile_reference(&a, &b, &c, &ascending), expected, "rounding to tf32 changes nothing");
}

#[test]
fn ldmatrix_gives_every_lane_its_words_of_the_rows_the_lanes_address() {
    let gpu = backend(62);
    // Word w of shared row r holds its two bf16 elements' indices, r·8 + 2w (low half) and
    // r·8 + 2w + 1 (high half).
    let rows: Vec<u32> = (0..128).map(|i| (2 * i) | (2 * i + 1) << 16).collect();
    let rows_buffer = gpu.upload(&rows).unwrap();
    let mut out = gpu.zeros::<u32>(192).unwrap();
    launch(
        &gpu,
        &LDMATRIX_LANES,
        geometry((1, 1, 1), (32, 1, 1)),
        &mut [(&rows_buffer).into(), (&mut out).into()],
    )
    .unwrap_or_else(|error| panic!("{error}"));
    let out = gpu.download::<u32>(&out).unwrap();
    // Lane l's register i holds word l % 4 of row l / 4 of matrix i, whose address lane
    // 8i + l / 4 gave: row (5·lane + 3) % 32 of the tile for the x4, (3·lane + 7) % 32 for the x2.
    for lane in 0..32 {
        let word =
            |address_lane: usize, row_of: fn(usize) -> usize| rows[4 * row_of(address_lane) + lane % 4];
        let x4: Vec<u32> = (0..4).map(|i| word(8 * i + lane / 4, |l| (5 * l + 3) % 32)).collect();
        let x2: Vec<u32> = (0..2).map(|i| word(8 * i + lane / 4, |l| (3 * l + 7) % 32)).collect();
        assert_eq!(out[6 * lane..6 * lane + 4], x4, "lane {lane}'s ldmatrix_x4 registers");
        assert_eq!(out[6 * lane + 4..6 * lane + 6], x2, "lane {lane}'s ldmatrix_x2 registers");
    }
}

#[test]
fn an_mma_one_lane_skips_is_a_deadlock_err_not_a_hang() {
    let message = without_hanging(|| {
        let gpu = backend(63);
        let mut out = gpu.zeros::<f32>(32).unwrap();
        launch(&gpu, &MMA_LANE_SKIPS, geometry((1, 1, 1), (32, 1, 1)), &mut [(&mut out).into()])
            .expect_err("an mma lane 5 skipped launched")
    });
    assert!(message.contains("`mma::mma_lane_skips`"), "{message}");
    assert!(
        message.contains(
            "deadlock: 1 threads wait at __syncthreads; lanes 0xffffffdf of warp 0 wait in \
             mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 for lanes 0x00000020"
        ),
        "{message}"
    );
    assert!(message.contains("seed 0x000000000000003f"), "{message}");
}

#[test]
fn an_ldmatrix_row_address_misaligned_or_outside_shared_memory_is_an_err_naming_the_lane() {
    let launch_mode = |mode: u32| {
        without_hanging(move || {
            let gpu = backend(64);
            let mut out = gpu.zeros::<u32>(32).unwrap();
            launch(
                &gpu,
                &LDMATRIX_MISADDRESSED,
                geometry((1, 1, 1), (32, 1, 1)),
                &mut [(&mut out).into(), mode.into()],
            )
            .expect_err(&format!("an ldmatrix with a wrong row address (mode {mode}) launched"))
        })
    };
    let misaligned = launch_mode(0);
    let outside = launch_mode(1);
    for message in [&misaligned, &outside] {
        assert!(message.contains("`mma::ldmatrix_misaddressed`"), "{message}");
        assert!(message.contains("ldmatrix.sync.aligned.m8n8.x4.shared.b16 from 0x"), "{message}");
        assert!(message.contains("(lane 3's row of matrix 0)"), "{message}");
        assert_eq!(thread_named(message), [3, 0, 0], "{message}");
    }
    assert!(misaligned.contains("a row address must be aligned to 16 bytes"), "{misaligned}");
    assert!(
        outside.contains("the 16-byte row is not in shared memory (the block's 512 static bytes at 0x"),
        "{outside}"
    );
}

// ---- Launch geometry. ----

#[test]
fn a_geometry_the_device_refuses_is_an_err_before_any_thread_runs() {
    let gpu = backend(41);
    let refused: [(LaunchGeometry, &str); 7] = [
        (geometry((1, 1, 1), (1025, 1, 1)), "a block (1025, 1, 1) of 1025 threads"),
        (geometry((1, 1, 1), (1, 1, 65)), "a block (1, 1, 65) of 65 threads"),
        (geometry((1, 1, 1), (32, 33, 1)), "of 1056 threads"),
        (geometry((0, 1, 1), (64, 1, 1)), "a grid (0, 1, 1) of blocks (64, 1, 1) has an empty dimension"),
        (geometry((1, 65536, 1), (64, 1, 1)), "a grid (1, 65536, 1)"),
        (
            // small_shared has 256 static bytes: 1 byte past the device's 227 KiB in all.
            LaunchGeometry { shared_mem_bytes: 227 * 1024 - 255, ..geometry((1, 1, 1), (64, 1, 1)) },
            "232449 bytes of shared memory (256 static, 232193 dynamic): over the device's 232448 per block",
        ),
        (
            LaunchGeometry { shared_mem_bytes: u32::MAX, ..geometry((1, 1, 1), (64, 1, 1)) },
            "4294967295 dynamic",
        ),
    ];
    for (geometry, expected) in refused {
        let mut out = gpu.upload(&[-1.0f32; 64]).unwrap();
        let message = launch(&gpu, &SMALL_SHARED, geometry, &mut [(&mut out).into(), 64u32.into()])
            .expect_err(&format!("{geometry:?} launched"));
        assert!(message.contains("`shared::small_shared`"), "{message}");
        assert!(message.contains(expected), "{geometry:?}: {message}");
        assert_eq!(gpu.download::<f32>(&out).unwrap(), [-1.0; 64], "{geometry:?} ran the kernel");
    }
    // The same kernel at a geometry the device takes: the largest block.
    let mut out = gpu.upload(&[-1.0f32; 64]).unwrap();
    launch(&gpu, &SMALL_SHARED, geometry((1, 1, 1), (16, 1, 64)), &mut [(&mut out).into(), 64u32.into()])
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(gpu.download::<f32>(&out).unwrap(), (0..64).rev().map(|t| t as f32).collect::<Vec<_>>());
}

// ---- Lookup. ----

#[test]
fn an_entry_whose_signature_disagrees_with_the_kernels_c_types_is_a_signature_mismatch() {
    let gpu = backend(51);
    match gpu.lookup(&RECORD_ORDER_U64) {
        Err(LookupError::SignatureMismatch { entry, reason }) => {
            assert_eq!((entry.module, entry.entry), ("order", "record_order"));
            assert_eq!(reason, "parameter `blocks` is `u32` in the kernel, `u64` in the signature");
        }
        Err(other) => panic!("not a signature mismatch: {other}"),
        Ok(_) => panic!("a u64 `blocks` was looked up against a u32 kernel"),
    }
    // Not "absent": the kernel is there, wrongly described.
    assert!(!gpu.lookup(&RECORD_ORDER_U64).unwrap_err().is_not_found());
    // The right signature finds it.
    assert!(gpu.lookup(&RECORD_ORDER).is_ok());
}

#[test]
fn an_entry_the_fixture_set_does_not_have_is_not_found() {
    let gpu = backend(52);
    let absent = [
        KernelEntry { entry: "no_such_kernel", field: "no_such_kernel", ..RECORD_ORDER },
        KernelEntry { module: "no_such_module", ..RECORD_ORDER },
        KernelEntry { namespace: "another@0:kernels.toml", ..RECORD_ORDER },
    ];
    for entry in absent {
        let error = gpu
            .lookup(&entry)
            .expect_err(&format!("{}::{} in {} was found", entry.module, entry.entry, entry.namespace));
        assert!(error.is_not_found(), "{}::{}: {error}", entry.module, entry.entry);
    }
    assert!(matches!(gpu.lookup(&absent[0]), Err(LookupError::EntryNotInModule { .. })));
    assert!(matches!(gpu.lookup(&absent[1]), Err(LookupError::ModuleNotCarried { .. })));
}

// ---- The build. ----

#[test]
fn active_inline_ptx_is_one_error_for_its_module_at_its_own_line() {
    let output = build(&fixture_dir("fixtures/inline_ptx"), "emulator-inline-ptx");
    match output.problems.as_slice() {
        [problem @ Problem::Emulation { path, .. }] => {
            assert!(path.ends_with("ptx.cu"), "{}", path.display());
            let message = problem.to_string();
            // Listed at the module's first entry; the error is the statement's, named for what it is.
            assert!(
                message.starts_with("kernels.toml:5:1: the emulated build (C++) failed on "),
                "{message}"
            );
            assert!(message.contains("ptx.cu:4:"), "{message}");
            assert!(message.contains("kda_emu_inline_ptx_is_not_emulated"), "{message}");
            assert!(!message.contains("Error: no such instruction"), "no assembler output: {message}");
        }
        problems => panic!("not one emulation problem: {problems:#?}"),
    }
    assert!(output.emulated.is_empty(), "{:?}", output.emulated);
}

#[test]
fn a_fixture_that_does_not_compile_is_a_problem_located_in_its_manifest() {
    let dir = fixture_dir("fixtures/broken");
    let output = build(&dir, "emulator-broken");
    let manifest = std::fs::read_to_string(dir.join("kernels.toml")).unwrap();
    let line =
        manifest.lines().position(|line| line.starts_with("uses_match")).expect("the entry's line") + 1;
    let listed = format!("kernels.toml:{line}:1");
    match output.problems.as_slice() {
        [problem @ Problem::Emulation { listed_at, path, diagnostics }] => {
            assert_eq!(*listed_at, listed);
            assert!(path.ends_with("matching.cu"), "{}", path.display());
            // The compiler's own error, about what the shim does not declare.
            assert!(
                diagnostics.contains("__match_any_sync") && diagnostics.contains("error"),
                "{diagnostics}"
            );
            let message = problem.to_string();
            assert!(
                message.starts_with(&format!("{listed}: the emulated build (C++) failed on ")),
                "{message}"
            );
            assert!(message.contains("__match_any_sync"), "{message}");
        }
        problems => panic!("not one emulation problem: {problems:#?}"),
    }
    // The entry beside it still builds.
    let built: Vec<(&str, &str)> =
        output.emulated.iter().map(|library| (library.module.as_str(), library.entry.as_str())).collect();
    assert_eq!(built, [("fine", "fine_copy")]);
}

#[test]
fn a_buffer_for_writing_reads_as_nan_until_a_kernel_writes_it() {
    // The emulator poisons what `alloc_for_write` leaves unspecified, so a kernel that reads such a
    // buffer before writing it shows in every comparison; `alloc` stays zeroed.
    let gpu = backend(1);
    let unwritten = gpu.alloc_for_write(DType::F32, 5).unwrap();
    assert!(gpu.download::<f32>(&unwritten).unwrap().iter().all(|x| x.is_nan()));
    let halves = gpu.alloc_for_write(DType::Bf16, 3).unwrap();
    assert!(gpu.download::<kda_runtime::bf16>(&halves).unwrap().iter().all(|x| x.is_nan()));
    assert_eq!(gpu.download::<f32>(&gpu.alloc(DType::F32, 5).unwrap()).unwrap(), [0.0; 5]);
}

// ---- The sanitizers, on fixtures built for them. ----

/// The fixtures of `tests/fixtures/<dir>` (manifest namespace `namespace`) built with `sanitizer`,
/// on the driver that build made.
fn sanitized_fixtures(
    dir: &str,
    namespace: &'static str,
    proved: &[KernelEntry],
    sanitizer: Sanitizer,
    seed: u64,
) -> DriverBackend {
    let output = build_with(
        &fixture_dir("fixtures").join(dir),
        &format!("emulator-{dir}-{}", sanitizer.name()),
        Emulation { sanitizer: Some(sanitizer), ..Emulation::default() },
    );
    assert_built(&output, &format!("the fixtures of {dir}"));
    let driver = output.emulation_driver.as_deref().expect("a sanitized build makes its driver");
    let set = emulated_set(namespace, &output.emulated, proved, Some(driver));
    DriverBackend::new(driver, &[set], seed).unwrap_or_else(|error| panic!("{error}"))
}

/// Launches `entry` (`T out[32], u32 scalar`) on one block of `threads`: its 32 outputs, or the
/// launch's error (a sanitizer's report among them).
fn launch_on_one_block<T: Element>(
    gpu: &DriverBackend,
    entry: &KernelEntry,
    threads: u32,
    scalar: u32,
) -> Result<Vec<T>, String> {
    let mut out = gpu.zeros::<T>(32).unwrap();
    let kernel = gpu.lookup(entry).unwrap_or_else(|error| panic!("{error}"));
    gpu.launch(kernel, geometry((1, 1, 1), (threads, 1, 1)), &mut [(&mut out).into(), scalar.into()])
        .map_err(|error| error.to_string())?;
    Ok(gpu.download::<T>(&out).unwrap())
}

// ThreadSanitizer: the memory order CUDA gives, no more.

/// The namespace of `tests/fixtures/races`.
const RACES_NAMESPACE: &str = "races@0:kernels.toml";

/// `u32 out[32], u32 mode`.
const HANDOFF: Signature = Signature {
    params: &[write("out", DType::U32, "32", &[Op::Literal(32)]), KernelParam::scalar("mode", U32)],
    requires: &[],
};

const fn handoff(name: &'static str) -> KernelEntry {
    KernelEntry { namespace: RACES_NAMESPACE, table: "races", ..entry("handoff", name, &HANDOFF) }
}

#[test]
fn thread_sanitizer_reports_each_hand_off_cuda_leaves_unordered_and_no_other() {
    let proved = [handoff("handoff_across_warps"), handoff("handoff_within_a_warp")];
    let gpu = sanitized_fixtures("races", RACES_NAMESPACE, &proved, Sanitizer::Thread, 3);
    let run =
        |entry: &KernelEntry, threads: u32, mode: u32| launch_on_one_block::<u32>(&gpu, entry, threads, mode);
    // Warp 1 reads what warp 0 wrote: ordered by a __syncthreads, not by each warp's __syncwarp
    // (which the emulator's one lock per block used to order anyway).
    let across = proved[0];
    let words: Vec<u32> = (1..=32).collect();
    assert_eq!(run(&across, 64, 1), Ok(words), "a __syncthreads orders the hand-off");
    let report =
        run(&across, 64, 0).expect_err("two warps' __syncwarp ordered warp 0's writes before warp 1's reads");
    assert!(report.contains("ThreadSanitizer: data race"), "{report}");
    // A lane reads its neighbour's word: ordered by a __syncwarp, not by a shuffle.
    let within = proved[1];
    let neighbours: Vec<u32> = (0..32).map(|lane| (lane + 1) % 32 + 1).collect();
    assert_eq!(run(&within, 32, 1), Ok(neighbours), "a __syncwarp orders the hand-off");
    let report = run(&within, 32, 0).expect_err("a shuffle ordered the lanes' writes before their reads");
    assert!(report.contains("ThreadSanitizer: data race"), "{report}");
}

// AddressSanitizer: a redzone after every __shared__ variable.

/// The namespace of `tests/fixtures/overruns`.
const OVERRUNS_NAMESPACE: &str = "overruns@0:kernels.toml";

/// `f32 out[32], u32 past`.
const ONE_PAST: Signature = Signature {
    params: &[write("out", DType::F32, "32", &[Op::Literal(32)]), KernelParam::scalar("past", U32)],
    requires: &[],
};

#[test]
fn address_sanitizer_reports_an_index_one_past_a_shared_array_into_the_next() {
    let one_past = KernelEntry {
        namespace: OVERRUNS_NAMESPACE,
        table: "overruns",
        ..entry("neighbours", "one_past", &ONE_PAST)
    };
    let gpu = sanitized_fixtures("overruns", OVERRUNS_NAMESPACE, &[one_past], Sanitizer::Address, 5);
    // In bounds: the runtime's NaN fill before the block leaves the redzones alone.
    let written: Vec<f32> = (1..=32).map(|t| t as f32).collect();
    assert_eq!(launch_on_one_block(&gpu, &one_past, 32, 0), Ok(written), "each thread's own element");
    // Thread 31 writes first[32], on the device a word of whatever variable lies next.
    let report = launch_on_one_block::<f32>(&gpu, &one_past, 32, 1)
        .expect_err("a write one past a __shared__ array went unreported");
    assert!(report.contains("AddressSanitizer: global-buffer-overflow"), "{report}");
    assert!(report.contains("neighbours.cu:6"), "the report names the kernel's line: {report}");
}

// ---- Out of bounds: without a sanitizer the emulator catches what a kernel reaches outside its
// views, a `__shared__` array or the dynamic shared memory; `extern __shared__` arrays. ----

/// The namespace of `tests/fixtures/bounds`.
const BOUNDS_NAMESPACE: &str = "bounds@0:kernels.toml";

const fn bounds_entry(
    module: &'static str,
    name: &'static str,
    signature: &'static Signature,
) -> KernelEntry {
    KernelEntry { namespace: BOUNDS_NAMESPACE, table: "bounds", ..entry(module, name, signature) }
}

/// `n` (scalar 2), then `cdiv(n, 2)`.
const N: &[Op] = &[Op::Scalar(2)];
const HALF_N: &[Op] = &[Op::Scalar(2), Op::Literal(2), Op::Cdiv];

/// `const f32 x[n], f32 y[cdiv(n, 2)], u32 n`.
const PAIR_SUM: KernelEntry = bounds_entry(
    "pairs",
    "pair_sum",
    &Signature {
        params: &[
            read("x", DType::F32, "n", N),
            write("y", DType::F32, "cdiv(n, 2)", HALF_N),
            KernelParam::scalar("n", U32),
        ],
        requires: &[],
    },
);

/// `const f32 x[cdiv(n, 2)], f32 y[n], u32 n`.
const PAIR_SPLIT: KernelEntry = bounds_entry(
    "pairs",
    "pair_split",
    &Signature {
        params: &[
            read("x", DType::F32, "cdiv(n, 2)", HALF_N),
            write("y", DType::F32, "n", N),
            KernelParam::scalar("n", U32),
        ],
        requires: &[],
    },
);

/// `const f32 x[n], f32 y[n], u32 n, u32 back`.
const SHIFT_BACK: KernelEntry = bounds_entry(
    "pairs",
    "shift_back",
    &Signature {
        params: &[
            read("x", DType::F32, "n", N),
            write("y", DType::F32, "n", N),
            KernelParam::scalar("n", U32),
            KernelParam::scalar("back", U32),
        ],
        requires: &[],
    },
);

/// `const f32 x[n], f32 y[n], u32 n, u32 back`, adding atomically.
const ATOMIC_SHIFT_BACK: KernelEntry =
    bounds_entry("pairs", "atomic_shift_back", SHIFT_BACK.signature.expect("a signature"));

/// `const f32 x[n], f32 out[blocks], u32 n, u32 blocks`.
const BLOCK_SUM: KernelEntry = bounds_entry(
    "reduce",
    "block_sum",
    &Signature {
        params: &[
            read("x", DType::F32, "n", N),
            write("out", DType::F32, "blocks", &[Op::Scalar(3)]),
            KernelParam::scalar("n", U32),
            KernelParam::scalar("blocks", U32),
        ],
        requires: &[],
    },
);

/// `f32 out[32], u32 past`.
const DYN_FLOATS: KernelEntry = bounds_entry("dynamic_extern", "dyn_floats", &ONE_PAST);
const DYN_PAIRS: KernelEntry = bounds_entry(
    "dynamic_extern",
    "dyn_pairs",
    &Signature { params: &[write("out", DType::U32, "64", &[Op::Literal(64)])], requires: &[] },
);
const DYN_ALIAS: KernelEntry = bounds_entry(
    "dynamic_extern",
    "dyn_alias",
    &Signature { params: &[write("out", DType::U32, "32", &[Op::Literal(32)])], requires: &[] },
);

/// `nullable const f32 bias[n], f32 y[n], u32 n`.
const ADD_BIAS: KernelEntry = bounds_entry(
    "nullable",
    "add_bias",
    &Signature {
        params: &[
            read("bias", DType::F32, "n", N).nullable(),
            write("y", DType::F32, "n", N),
            KernelParam::scalar("n", U32),
        ],
        requires: &[],
    },
);

/// The instantiation `name` of the template `scale<T, 3>` (`const T x[n], T y[n], u32 n`).
const fn scale_entry(name: &'static str, signature: &'static Signature) -> KernelEntry {
    bounds_entry("templates", name, signature)
}
const SCALE_F32: KernelEntry = scale_entry(
    "scale<float, 3>",
    &Signature {
        params: &[
            read("x", DType::F32, "n", N),
            write("y", DType::F32, "n", N),
            KernelParam::scalar("n", U32),
        ],
        requires: &[],
    },
);
const SCALE_F64: KernelEntry = scale_entry(
    "scale<double, 3>",
    &Signature {
        params: &[
            read("x", DType::F64, "n", N),
            write("y", DType::F64, "n", N),
            KernelParam::scalar("n", U32),
        ],
        requires: &[],
    },
);

const BOUNDS: [KernelEntry; 11] = [
    PAIR_SUM,
    PAIR_SPLIT,
    SHIFT_BACK,
    ATOMIC_SHIFT_BACK,
    BLOCK_SUM,
    DYN_FLOATS,
    DYN_PAIRS,
    DYN_ALIAS,
    ADD_BIAS,
    SCALE_F32,
    SCALE_F64,
];

/// The build of `tests/fixtures/bounds` without a sanitizer, once for every test.
fn bounds_build() -> &'static BuildOutput {
    static OUTPUT: OnceLock<BuildOutput> = OnceLock::new();
    OUTPUT.get_or_init(|| {
        let output = build(&fixture_dir("fixtures").join("bounds"), "emulator-bounds");
        assert_built(&output, "the fixtures of bounds");
        output
    })
}

/// The bounds fixtures on both executors without a sanitizer: in process, and through the
/// driver the same build made.
fn bounds_backends(seed: u64) -> (EmuBackend, DriverBackend) {
    static SET: OnceLock<&'static EmulatedSet> = OnceLock::new();
    let output = bounds_build();
    let driver = output.emulation_driver.as_deref().expect("the emulated build makes its driver");
    let set = *SET.get_or_init(|| emulated_set(BOUNDS_NAMESPACE, &output.emulated, &BOUNDS, Some(driver)));
    let emu = EmuBackend::new(&[set]).unwrap_or_else(|error| panic!("{error}")).with_seed(seed);
    let plain = DriverBackend::new(driver, &[set], seed).unwrap_or_else(|error| panic!("{error}"));
    (emu, plain)
}

/// Runs `check` on each executor, named for messages.
fn on_both(seed: u64, check: impl Fn(&str, &dyn GpuBackend) + Send + 'static) {
    without_hanging(move || {
        let (emu, driver) = bounds_backends(seed);
        check("in process", &emu);
        check("through the driver", &driver);
    });
}

/// Launches `entry` checked against its signature on `gpu`; the launch error as its message.
fn launch_on(
    gpu: &dyn GpuBackend,
    entry: &KernelEntry,
    geometry: LaunchGeometry,
    args: &mut [KernelArg<'_>],
) -> Result<(), String> {
    let kernel = gpu.lookup(entry).unwrap_or_else(|error| panic!("{error}"));
    gpu.launch(kernel, geometry, args).map_err(|error| error.to_string())
}

/// `pair_sum` over the `n` elements of `x` from `start`, one block of 32 threads: `y`, or the
/// launch's message.
fn pair_sum(gpu: &dyn GpuBackend, x: &[f32], start: usize, n: u32) -> Result<Vec<f32>, String> {
    let buffer = gpu.upload(x).unwrap();
    let mut y = gpu.zeros::<f32>(n.div_ceil(2) as usize).unwrap();
    let view = buffer.slice(start..start + n as usize);
    launch_on(
        gpu,
        &PAIR_SUM,
        geometry((1, 1, 1), (32, 1, 1)),
        &mut [view.into(), (&mut y).into(), n.into()],
    )?;
    Ok(gpu.download::<f32>(&y).unwrap())
}

#[test]
fn a_template_instantiation_the_build_made_runs_under_its_own_name() {
    on_both(29, |backend, gpu| {
        let one_block = geometry((1, 1, 1), (32, 1, 1));
        let x = gpu.upload(&[1.5f32, -2.0]).unwrap();
        let mut y = gpu.zeros::<f32>(2).unwrap();
        launch_on(gpu, &SCALE_F32, one_block, &mut [(&x).into(), (&mut y).into(), 2u32.into()])
            .unwrap_or_else(|error| panic!("{backend}: {error}"));
        assert_eq!(gpu.download::<f32>(&y).unwrap(), [4.5, -6.0], "{backend}");
        let x = gpu.upload(&[0.25f64]).unwrap();
        let mut y = gpu.zeros::<f64>(1).unwrap();
        launch_on(gpu, &SCALE_F64, one_block, &mut [(&x).into(), (&mut y).into(), 1u32.into()])
            .unwrap_or_else(|error| panic!("{backend}: {error}"));
        assert_eq!(gpu.download::<f64>(&y).unwrap(), [0.75], "{backend}");
        // An instantiation the manifest does not list was not built.
        let absent = scale_entry("scale<float, 4>", SCALE_F32.signature.unwrap());
        assert!(gpu.lookup(&absent).is_err(), "{backend}");
    });
}

#[test]
fn a_nullable_buffer_reaches_the_kernel_as_a_null_pointer() {
    on_both(30, |backend, gpu| {
        let bias = gpu.upload(&[0.5f32, -1.0, 4.0]).unwrap();
        let mut y = gpu.upload(&[1.0f32, 2.0, 3.0]).unwrap();
        let one_block = geometry((1, 1, 1), (32, 1, 1));
        launch_on(gpu, &ADD_BIAS, one_block, &mut [Some(bias.view()).into(), (&mut y).into(), 3u32.into()])
            .unwrap_or_else(|error| panic!("{backend}: {error}"));
        assert_eq!(gpu.download::<f32>(&y).unwrap(), [2.5, 3.0, 10.0], "{backend}");
        // The null pointer stays null in the kernel: the emulator stages views, not nulls.
        launch_on(gpu, &ADD_BIAS, one_block, &mut [KernelArg::Null, (&mut y).into(), 3u32.into()])
            .unwrap_or_else(|error| panic!("{backend}: {error}"));
        assert_eq!(gpu.download::<f32>(&y).unwrap(), [5.0, 6.0, 20.0], "{backend}");
        // A parameter that is not nullable refuses one.
        let error = launch_on(gpu, &ADD_BIAS, one_block, &mut [(&bias).into(), KernelArg::Null, 3u32.into()])
            .expect_err("a null pointer for `y`");
        assert!(error.contains("found a null pointer"), "{backend}: {error}");
    });
}

#[test]
fn a_read_one_past_an_input_view_is_an_err_naming_the_parameter_the_thread_and_the_element() {
    on_both(31, |backend, gpu| {
        let x: Vec<f32> = (0..8).map(|i| i as f32).collect();
        assert_eq!(pair_sum(gpu, &x, 0, 8), Ok(vec![1.0, 5.0, 9.0, 13.0]), "{backend}: an even n");
        // n = 7: thread 3 reads x[7], past the view (and its buffer) of 7 elements.
        let message = pair_sum(gpu, &x[..7], 0, 7).expect_err(backend);
        assert!(
            message.contains(
                "pair_sum: block (0, 0, 0), thread (3, 0, 0): a read of element 7 of parameter 0 `x`, outside its 7 \
                 elements"
            ),
            "{backend}: {message}"
        );
        assert!(message.contains("in the order of seed"), "{backend}: {message}");
    });
}

#[test]
fn a_read_just_past_a_view_inside_a_larger_buffer_is_an_err() {
    on_both(32, |backend, gpu| {
        // The view is elements 5..14 of 64: x[9] is element 14 of the buffer, which the launch
        // did not hand the kernel.
        let x: Vec<f32> = (0..64).map(|i| i as f32).collect();
        let message = pair_sum(gpu, &x, 5, 9).expect_err(backend);
        assert!(
            message
                .contains("thread (4, 0, 0): a read of element 9 of parameter 0 `x`, outside its 9 elements"),
            "{backend}: {message}"
        );
        assert_eq!(pair_sum(gpu, &x, 5, 10), Ok(vec![11.0, 15.0, 19.0, 23.0, 27.0]), "{backend}");
    });
}

#[test]
fn a_write_one_past_an_output_view_is_an_err_naming_the_parameter_the_thread_and_the_element() {
    on_both(33, |backend, gpu| {
        let run = |n: u32| {
            let x = gpu.upload(&(1..=n.div_ceil(2)).map(|i| i as f32).collect::<Vec<_>>()).unwrap();
            let mut y = gpu.zeros::<f32>(n as usize).unwrap();
            launch_on(
                gpu,
                &PAIR_SPLIT,
                geometry((1, 1, 1), (32, 1, 1)),
                &mut [(&x).into(), (&mut y).into(), n.into()],
            )
            .map(|()| gpu.download::<f32>(&y).unwrap())
        };
        assert_eq!(run(4), Ok(vec![1.0, -1.0, 2.0, -2.0]), "{backend}");
        let message = run(7).expect_err(backend);
        assert!(
            message.contains(
                "thread (3, 0, 0): a write of element 7 of parameter 1 `y`, outside its 7 elements"
            ),
            "{backend}: {message}"
        );
    });
}

#[test]
fn a_write_before_an_output_view_plain_or_atomic_is_an_err_naming_the_thread() {
    on_both(34, |backend, gpu| {
        let run = |entry: &KernelEntry, back: u32| {
            let x = gpu.upload(&(0..100).map(|i| i as f32).collect::<Vec<_>>()).unwrap();
            let mut y = gpu.zeros::<f32>(100).unwrap();
            let args = &mut [(&x).into(), (&mut y).into(), 100u32.into(), back.into()];
            launch_on(gpu, entry, geometry((4, 1, 1), (32, 1, 1)), args)
                .map(|()| gpu.download::<f32>(&y).unwrap())
        };
        for entry in [&SHIFT_BACK, &ATOMIC_SHIFT_BACK] {
            let what = format!("{backend}, {}", entry.entry);
            assert_eq!(run(entry, 0), Ok((0..100).map(|i| i as f32).collect::<Vec<_>>()), "{what}");
        }
        // Thread 0 of block 0 writes y[-1]: the access check stops it there.
        let message = run(&SHIFT_BACK, 1).expect_err(backend);
        assert!(
            message.contains(
                "block (0, 0, 0), thread (0, 0, 0): a write of element -1 of parameter 1 `y`, outside its 100 elements"
            ),
            "{backend}: {message}"
        );
        // The same through an atomic add, whose builtins are instrumented too (the float add
        // reads before it writes: its compare-exchange loop's first load is what is stopped).
        let message = run(&ATOMIC_SHIFT_BACK, 1).expect_err(backend);
        assert!(message.contains("block (0, 0, 0), thread (0, 0, 0): a "), "{backend}: {message}");
        assert!(
            message.contains("of element -1 of parameter 1 `y`, outside its 100 elements"),
            "{backend}: {message}"
        );
    });
}

#[test]
fn an_index_past_a_shared_array_is_an_err_naming_the_array_the_thread_and_the_index() {
    on_both(35, |backend, gpu| {
        let run = |threads: u32| {
            let x = gpu.upload(&vec![1.0f32; threads as usize * 2]).unwrap();
            let mut out = gpu.zeros::<f32>(2).unwrap();
            let args = &mut [(&x).into(), (&mut out).into(), (threads * 2).into(), 2u32.into()];
            launch_on(gpu, &BLOCK_SUM, geometry((2, 1, 1), (threads, 1, 1)), args)
                .map(|()| gpu.download::<f32>(&out).unwrap())
        };
        assert_eq!(run(128), Ok(vec![128.0, 128.0]), "{backend}");
        // 256 threads: each of threads 128.. writes partial[t], past `__shared__ float partial[128]`.
        let message = run(256).expect_err(backend);
        let [t, _, _] = thread_named(&message);
        assert!(t >= 128, "{backend}: {message}");
        assert!(
            message.contains(&format!("index {t} out of bounds for `partial` (float [128]) at ")),
            "{backend}: {message}"
        );
        assert!(message.contains("reduce.cu:7:14"), "{backend}: the kernel's line and column: {message}");
    });
}

/// Launches `entry` (one written `u32` or `f32` output of `len`, then `scalars`) on one block of 32
/// threads with `dynamic` bytes of dynamic shared memory: the output, or the launch's message.
fn launch_dynamic<T: Element>(
    gpu: &dyn GpuBackend,
    entry: &KernelEntry,
    len: usize,
    dynamic: u32,
    scalars: &[u32],
) -> Result<Vec<T>, String> {
    let mut out = gpu.zeros::<T>(len).unwrap();
    let mut args: Vec<KernelArg<'_>> = vec![(&mut out).into()];
    args.extend(scalars.iter().map(|&scalar| KernelArg::from(scalar)));
    let geometry = LaunchGeometry { shared_mem_bytes: dynamic, ..geometry((1, 1, 1), (32, 1, 1)) };
    launch_on(gpu, entry, geometry, &mut args)?;
    drop(args);
    Ok(gpu.download::<T>(&out).unwrap())
}

#[test]
fn extern_shared_arrays_of_any_type_and_scope_alias_the_dynamic_shared_memory() {
    on_both(36, |backend, gpu| {
        // A function-scope float array.
        let floats: Vec<f32> = (0..32).rev().map(|t| t as f32 + 0.5).collect();
        assert_eq!(launch_dynamic(gpu, &DYN_FLOATS, 32, 128, &[0]), Ok(floats), "{backend}");
        // A namespace-scope array of a struct, written through a helper.
        let pairs: Vec<u32> = (0..32u32).rev().flat_map(|t| [(1.5 * t as f32).to_bits(), t + 7]).collect();
        assert_eq!(launch_dynamic(gpu, &DYN_PAIRS, 64, 256, &[]), Ok(pairs), "{backend}");
        // Words through one name, read back byte by byte through another.
        let words: Vec<u32> = (0..32u32).rev().map(|t| 0x0101_0101 * t + 0x0001_0203).collect();
        assert_eq!(launch_dynamic(gpu, &DYN_ALIAS, 32, 128, &[]), Ok(words), "{backend}");
    });
}

#[test]
fn an_access_past_the_dynamic_shared_memory_is_an_err() {
    on_both(37, |backend, gpu| {
        // 128 bytes: element 32 is the guard page's first byte.
        let message = launch_dynamic::<f32>(gpu, &DYN_FLOATS, 32, 128, &[32]).expect_err(backend);
        assert!(
            message.contains(
                "thread (0, 0, 0): a write of byte 128 of the launch's dynamic shared memory, outside its 128 bytes"
            ),
            "{backend}: {message}"
        );
        // 100 bytes: threads 25.. write past them, into the bytes the 128-byte alignment leaves
        // before the guard, which the access check catches in whichever thread gets there first.
        let message = launch_dynamic::<f32>(gpu, &DYN_FLOATS, 32, 100, &[0]).expect_err(backend);
        let [thread, ..] = thread_named(&message);
        assert!(thread >= 25, "{backend}: {message}");
        let expected = format!(
            "a write of byte {} of the launch's dynamic shared memory, outside its 100 bytes",
            4 * thread
        );
        assert!(message.contains(&expected), "{backend}: {message}");
        // None at all: every element is past it.
        let message = launch_dynamic::<f32>(gpu, &DYN_FLOATS, 32, 0, &[0]).expect_err(backend);
        assert!(
            message.contains("of the launch's dynamic shared memory, outside its 0 bytes"),
            "{backend}: {message}"
        );
    });
}

#[test]
fn a_compile_error_in_a_module_with_extern_shared_arrays_is_on_the_modules_line() {
    // The build carries the module rewritten; its `#line`s keep the compiler on the module's lines.
    let output = build(&fixture_dir("fixtures").join("extern_broken"), "emulator-extern-broken");
    match output.problems.as_slice() {
        [Problem::Emulation { path, diagnostics, .. }] => {
            assert!(path.ends_with("extern_broken.cu"), "{}", path.display());
            assert!(diagnostics.contains("extern_broken.cu:7:"), "{diagnostics}");
            assert!(diagnostics.contains("undeclared_name"), "{diagnostics}");
            assert!(!diagnostics.contains("conflicting specifiers"), "{diagnostics}");
        }
        problems => panic!("not one emulation problem: {problems:#?}"),
    }
}

#[test]
fn launches_on_several_threads_at_once_each_report_their_own_fault() {
    without_hanging(|| {
        let (gpu, _) = bounds_backends(38);
        std::thread::scope(|scope| {
            for round in 0..4u32 {
                let gpu = &gpu;
                scope.spawn(move || {
                    for _ in 0..8 {
                        let x: Vec<f32> = (0..64).map(|i| i as f32).collect();
                        let n = 9 + 2 * round;
                        let message = pair_sum(gpu, &x, 0, n).expect_err("a read past x");
                        let expected =
                            format!("a read of element {n} of parameter 0 `x`, outside its {n} elements");
                        assert!(message.contains(&expected), "{message}");
                        assert!(pair_sum(gpu, &x, 0, n + 1).is_ok(), "an even n");
                        let message =
                            launch_dynamic::<f32>(gpu, &DYN_FLOATS, 32, 128, &[32 + round]).expect_err("");
                        assert!(message.contains(&format!("byte {}", 4 * (32 + round))), "{message}");
                    }
                });
            }
        });
    });
}

#[test]
fn an_out_of_bounds_launch_fills_the_fault_record_with_its_access() {
    let output = bounds_build();
    let path = |entry: &str| {
        let built =
            output.emulated.iter().find(|library| library.entry == entry).expect("the fixture library");
        built.path.to_str().expect("a UTF-8 path").to_owned()
    };
    // SAFETY: libraries the emulated build just wrote from the fixtures.
    let (pairs, reduce) = unsafe {
        (
            kda_emu::library::Library::open(&path("pair_sum")),
            kda_emu::library::Library::open(&path("block_sum")),
        )
    };
    let (pairs, reduce) = (pairs.unwrap(), reduce.unwrap());
    let x = [1.0f32; 7];
    let mut y = [0.0f32; 4];
    let (mut x_pointer, mut y_pointer, mut n) = (x.as_ptr() as u64, y.as_mut_ptr() as u64, 7u32);
    let args =
        [((&raw mut x_pointer).cast(), 28), ((&raw mut y_pointer).cast(), 16), ((&raw mut n).cast(), 0)];
    let index = pairs.find("pair_sum").expect("the kernel is registered");
    // SAFETY: the kernel takes `const float*, float*, unsigned`; the views hold the 28 and 16
    // bytes given, which the runtime stages; everything outlives the call.
    let fault = unsafe { pairs.launch(index, &args, [1, 1, 1], [32, 1, 1], 0, 1) }
        .expect_err("a read one past x launched");
    assert_eq!(fault.kind, FaultKind::OutOfBounds, "{fault:?}");
    assert_eq!(fault.place, Some(Place { block: [0, 0, 0], thread: [3, 0, 0] }), "{fault:?}");
    assert_eq!(
        fault.access,
        Some(fault::Access { parameter: Some(0), variable: None, index: 7 }),
        "{fault:?}"
    );

    let x = [1.0f32; 512];
    let mut out = [0.0f32; 2];
    let (mut x_pointer, mut out_pointer, mut n, mut blocks) =
        (x.as_ptr() as u64, out.as_mut_ptr() as u64, 512u32, 2u32);
    let args = [
        ((&raw mut x_pointer).cast(), 2048),
        ((&raw mut out_pointer).cast(), 8),
        ((&raw mut n).cast(), 0),
        ((&raw mut blocks).cast(), 0),
    ];
    let index = reduce.find("block_sum").expect("the kernel is registered");
    // SAFETY: the kernel takes `const float*, float*, unsigned, unsigned`; the views hold the
    // 2048 and 8 bytes given; everything outlives the call.
    let fault = unsafe { reduce.launch(index, &args, [2, 1, 1], [256, 1, 1], 0, 1) }
        .expect_err("a write past partial[128] launched");
    assert_eq!(fault.kind, FaultKind::OutOfBounds, "{fault:?}");
    let place = fault.place.expect("the thread that wrote");
    assert!(place.thread[0] >= 128, "{fault:?}");
    let expected = fault::Access {
        parameter: None,
        variable: Some("partial".to_owned()),
        index: i64::from(place.thread[0]),
    };
    assert_eq!(fault.access, Some(expected), "{fault:?}");
}

// ---- A kernel's own faults: without a sanitizer an integer division by zero, an access outside
// any memory the launch has (far off a view, through a null pointer) and a trap are the launch's
// failure, not the end of the test process; the next launch runs. ----

/// The namespace of `tests/fixtures/faults`.
const FAULTS_NAMESPACE: &str = "faults@0:kernels.toml";

const fn faults_entry(name: &'static str, signature: &'static Signature) -> KernelEntry {
    KernelEntry { namespace: FAULTS_NAMESPACE, table: "faults", ..entry("faults", name, signature) }
}

/// `u32 out[n], u32 n, u32 period`.
const WRAP: KernelEntry = faults_entry(
    "wrap",
    &Signature {
        params: &[
            write("out", DType::U32, "n", &[Op::Scalar(1)]),
            KernelParam::scalar("n", U32),
            KernelParam::scalar("period", U32),
        ],
        requires: &[],
    },
);

/// `const f32 x[n], f32 y[n], u32 n, u64 <last>`.
macro_rules! read_through {
    ($name:literal, $last:literal) => {
        faults_entry(
            $name,
            &Signature {
                params: &[
                    read("x", DType::F32, "n", N),
                    write("y", DType::F32, "n", N),
                    KernelParam::scalar("n", U32),
                    KernelParam::scalar($last, ScalarKind::U64),
                ],
                requires: &[],
            },
        )
    };
}
const FAR_READ: KernelEntry = read_through!("far_read", "offset");
const MASKED_READ: KernelEntry = read_through!("masked_read", "mask");

/// `u32 out[32], u32 at`.
const TRAP_AT: KernelEntry = faults_entry(
    "trap_at",
    &Signature {
        params: &[write("out", DType::U32, "32", &[Op::Literal(32)]), KernelParam::scalar("at", U32)],
        requires: &[],
    },
);

const FAULTS: [KernelEntry; 4] = [WRAP, FAR_READ, MASKED_READ, TRAP_AT];

/// The build of `tests/fixtures/faults` without a sanitizer, once for every test.
fn faults_build() -> &'static BuildOutput {
    static OUTPUT: OnceLock<BuildOutput> = OnceLock::new();
    OUTPUT.get_or_init(|| {
        let output = build(&fixture_dir("fixtures").join("faults"), "emulator-faults");
        assert_built(&output, "the fixtures of faults");
        output
    })
}

/// Runs `check` on the faults fixtures in process and through the plain driver, named for
/// messages.
fn on_both_faulting(seed: u64, check: impl Fn(&str, &dyn GpuBackend) + Send + 'static) {
    static SET: OnceLock<&'static EmulatedSet> = OnceLock::new();
    without_hanging(move || {
        let output = faults_build();
        let driver = output.emulation_driver.as_deref().expect("the emulated build makes its driver");
        let set =
            *SET.get_or_init(|| emulated_set(FAULTS_NAMESPACE, &output.emulated, &FAULTS, Some(driver)));
        let emu = EmuBackend::new(&[set]).unwrap_or_else(|error| panic!("{error}")).with_seed(seed);
        let plain = DriverBackend::new(driver, &[set], seed).unwrap_or_else(|error| panic!("{error}"));
        check("in process", &emu);
        check("through the driver", &plain);
    });
}

/// `wrap` over `n` elements on blocks of 32 threads: `out`, or the launch's message.
fn wrap(gpu: &dyn GpuBackend, n: u32, period: u32) -> Result<Vec<u32>, String> {
    let mut out = gpu.zeros::<u32>(n as usize).unwrap();
    launch_on(
        gpu,
        &WRAP,
        geometry((n.div_ceil(32), 1, 1), (32, 1, 1)),
        &mut [(&mut out).into(), n.into(), period.into()],
    )?;
    Ok(gpu.download::<u32>(&out).unwrap())
}

/// `entry` (`far_read` or `masked_read`, its last argument `last`) over 32 elements of x on one
/// block: `y`, or the launch's message.
fn read_through(gpu: &dyn GpuBackend, entry: &KernelEntry, last: u64) -> Result<Vec<f32>, String> {
    let x: Vec<f32> = (0..32).map(|i| i as f32 + 0.5).collect();
    let x = gpu.upload(&x).unwrap();
    let mut y = gpu.zeros::<f32>(32).unwrap();
    launch_on(
        gpu,
        entry,
        geometry((1, 1, 1), (32, 1, 1)),
        &mut [(&x).into(), (&mut y).into(), 32u32.into(), last.into()],
    )?;
    Ok(gpu.download::<f32>(&y).unwrap())
}

/// Asserts that a launch message names the kernel, then the block and a thread of it, and the seed.
fn assert_names_the_kernel_and_a_thread(message: &str, kernel: &str, backend: &str) {
    assert!(message.contains(&format!("failed: {kernel}: block (")), "{backend}: {message}");
    assert!(thread_named(message)[0] < 32, "{backend}: {message}");
    assert!(message.contains("in the order of seed"), "{backend}: {message}");
}

#[test]
fn an_integer_division_by_zero_is_an_err_naming_the_kernel_and_the_thread_and_the_next_launch_runs() {
    on_both_faulting(41, |backend, gpu| {
        let message = wrap(gpu, 64, 0).expect_err(backend);
        assert_names_the_kernel_and_a_thread(&message, "wrap", backend);
        assert!(message.contains("): integer division by zero"), "{backend}: {message}");
        assert!(message.contains("(SIGFPE, FPE_INTDIV)"), "{backend}: {message}");
        let wrapped: Vec<u32> = (0..64).map(|i| i % 7).collect();
        assert_eq!(wrap(gpu, 64, 7), Ok(wrapped), "{backend}: the launch after the fault");
    });
}

#[test]
fn a_read_far_off_a_parameter_is_an_err_naming_the_kernel_and_the_thread_and_the_next_launch_runs() {
    on_both_faulting(42, |backend, gpu| {
        // 2^45 elements of 4 bytes past x: 2^47 bytes, past every address a process maps. Without
        // 5-level paging it is outside the address space, which the processor refuses before any
        // page is looked up, with no address (a general-protection or stack-segment fault).
        let message = read_through(gpu, &FAR_READ, 1 << 45).expect_err(backend);
        assert_names_the_kernel_and_a_thread(&message, "far_read", backend);
        assert!(
            message.contains("a memory access the processor refused without giving its address (SIG")
                || message
                    .contains("outside the launch's memory (SIGSEGV, SEGV_MAPERR: nothing is mapped there)"),
            "{backend}: {message}"
        );
        let x: Vec<f32> = (0..32).map(|i| i as f32 + 0.5).collect();
        assert_eq!(read_through(gpu, &FAR_READ, 0), Ok(x), "{backend}: the launch after the fault");
    });
}

#[test]
fn a_null_pointer_a_kernel_computes_is_an_err_naming_the_address_and_the_thread() {
    on_both_faulting(43, |backend, gpu| {
        let message = read_through(gpu, &MASKED_READ, 0).expect_err(backend);
        assert_names_the_kernel_and_a_thread(&message, "masked_read", backend);
        // Thread t reads p[t], at 4t.
        let [t, _, _] = thread_named(&message);
        let expected = format!(
            "a read of address {:#x} (through a null pointer), outside the launch's memory (SIGSEGV, \
             SEGV_MAPERR: nothing is mapped there)",
            4 * t
        );
        assert!(message.contains(&expected), "{backend}: {message}");
        let x: Vec<f32> = (0..32).map(|i| i as f32 + 0.5).collect();
        assert_eq!(read_through(gpu, &MASKED_READ, u64::MAX), Ok(x), "{backend}: the launch after the fault");
    });
}

#[test]
fn a_trap_is_an_err_naming_the_thread_that_trapped() {
    on_both_faulting(44, |backend, gpu| {
        let run = |at: u32| {
            let mut out = gpu.zeros::<u32>(32).unwrap();
            launch_on(gpu, &TRAP_AT, geometry((1, 1, 1), (32, 1, 1)), &mut [(&mut out).into(), at.into()])
                .map(|()| gpu.download::<u32>(&out).unwrap())
        };
        let message = run(5).expect_err(backend);
        assert!(
            message.contains("failed: trap_at: block (0, 0, 0), thread (5, 0, 0): "),
            "{backend}: {message}"
        );
        assert!(message.contains("an illegal instruction"), "{backend}: {message}");
        assert!(message.contains("(SIGILL, "), "{backend}: {message}");
        assert_eq!(run(32), Ok((0..32).collect::<Vec<u32>>()), "{backend}: the launch after the fault");
    });
}

#[test]
fn a_kernels_fault_fills_the_fault_record_with_its_kind_and_the_thread_its_message_names() {
    let output = faults_build();
    let built = output.emulated.iter().find(|library| library.entry == "wrap").expect("the fixture library");
    let path = built.path.to_str().expect("a UTF-8 path");
    // SAFETY: a library the emulated build just wrote from the fixtures.
    let library = unsafe { kda_emu::library::Library::open(path) }.unwrap_or_else(|error| panic!("{error}"));
    let index = library.find("wrap").expect("the kernel is registered");
    let mut out = [0u32; 32];
    let mut wrap = |period: u32| {
        let (mut pointer, mut n, mut period) = (out.as_mut_ptr() as u64, 32u32, period);
        let args =
            [((&raw mut pointer).cast(), 128), ((&raw mut n).cast(), 0), ((&raw mut period).cast(), 0)];
        // SAFETY: the kernel takes `unsigned int*, unsigned, unsigned` and writes out[0..32] (128
        // bytes) at a block of 32; `out` outlives the call.
        unsafe { library.launch(index, &args, [1, 1, 1], [32, 1, 1], 0, 3) }
    };
    let fault = wrap(0).expect_err("a division by zero launched");
    assert_eq!(fault.kind, FaultKind::Kernel, "{fault:?}");
    let place = fault.place.expect("a thread's fault has its place");
    assert_eq!(place, Place { block: [0, 0, 0], thread: thread_named(&fault.message) }, "{fault:?}");
    assert_eq!(fault.access, None, "{fault:?}");
    assert!(fault.message.starts_with("wrap: block (0, 0, 0), thread ("), "{fault:?}");
    // The library stays usable.
    wrap(5).unwrap_or_else(|fault| panic!("{fault}"));
    assert_eq!(out, std::array::from_fn(|i| i as u32 % 5));
}

/// Set, this test binary is the child of
/// `a_fault_outside_a_kernel_goes_to_rusts_handler_or_the_default_action`, which faults its own
/// thread after a launch installed the runtime's handlers: `stack` by overflowing its stack,
/// `wild` by reading an address nothing is mapped at.
const FAULT_OUTSIDE_A_KERNEL: &str = "KDA_EMU_TEST_FAULT_OUTSIDE_A_KERNEL";

/// Recurses `depth` times, each frame holding a page the optimizer cannot drop.
fn recurse(depth: u64) -> u64 {
    let frame = std::hint::black_box([depth as u8; 4096]);
    if depth == 0 { 0 } else { recurse(depth - 1) + u64::from(frame[0]) }
}

#[test]
fn a_fault_outside_a_kernel_goes_to_rusts_handler_or_the_default_action() {
    use std::os::unix::process::ExitStatusExt;

    const NAME: &str = "a_fault_outside_a_kernel_goes_to_rusts_handler_or_the_default_action";
    if let Ok(how) = std::env::var(FAULT_OUTSIDE_A_KERNEL) {
        // The child: a launch installs the handlers and has one fault of a kernel's made its Err.
        let output = faults_build();
        let built = output.emulated.iter().find(|library| library.entry == "wrap").expect("the library");
        // SAFETY: a library the emulated build wrote from the fixtures.
        let library = unsafe { kda_emu::library::Library::open(built.path.to_str().expect("a UTF-8 path")) }
            .unwrap_or_else(|error| panic!("{error}"));
        let index = library.find("wrap").expect("the kernel is registered");
        let mut out = [0u32; 32];
        let (mut pointer, mut n, mut period) = (out.as_mut_ptr() as u64, 32u32, 0u32);
        let args =
            [((&raw mut pointer).cast(), 128), ((&raw mut n).cast(), 0), ((&raw mut period).cast(), 0)];
        // SAFETY: as in `a_kernels_fault_fills_the_fault_record_with_its_kind_and_the_thread_its_message_names`.
        let fault = unsafe { library.launch(index, &args, [1, 1, 1], [32, 1, 1], 0, 3) };
        assert_eq!(fault.map_err(|fault| fault.kind), Err(FaultKind::Kernel));
        match how.as_str() {
            "stack" => eprintln!("{}", recurse(u64::MAX)),
            // SAFETY: none: the read faults, which is what the child is for (its first page is
            // never mapped; not null, which the read's debug check would refuse first).
            _ => eprintln!("{}", unsafe { std::ptr::read_volatile(std::ptr::without_provenance::<u64>(8)) }),
        }
        return;
    }
    let child = |how: &str| {
        std::process::Command::new(std::env::current_exe().expect("this test binary"))
            .args(["--exact", NAME, "--test-threads=1", "--nocapture"])
            .env(FAULT_OUTSIDE_A_KERNEL, how)
            .output()
            .expect("the test binary runs again")
    };
    // Rust's handler tells a stack overflow and aborts.
    let overflow = child("stack");
    let report = String::from_utf8_lossy(&overflow.stderr);
    assert!(report.contains("has overflowed its stack"), "{:?}: {report}", overflow.status);
    assert_eq!(overflow.status.signal(), Some(6), "{report}");
    // Any other fault takes the default action, as without the runtime's handlers.
    let wild = child("wild");
    let report = String::from_utf8_lossy(&wild.stderr);
    assert_eq!(wild.status.signal(), Some(11), "{:?}: {report}", wild.status);
}

#[test]
fn undefined_behaviour_sanitizer_reports_an_integer_division_by_zero() {
    let gpu = sanitized_fixtures("faults", FAULTS_NAMESPACE, &FAULTS, Sanitizer::Address, 45);
    let run = |period: u32| {
        let mut out = gpu.zeros::<u32>(32).unwrap();
        launch_on(
            &gpu,
            &WRAP,
            geometry((1, 1, 1), (32, 1, 1)),
            &mut [(&mut out).into(), 32u32.into(), period.into()],
        )
        .map(|()| gpu.download::<u32>(&out).unwrap())
    };
    assert_eq!(run(3), Ok((0..32).map(|i| i % 3).collect::<Vec<u32>>()));
    let report = run(0).expect_err("a division by zero went unreported");
    assert!(report.contains("reported an error in this launch"), "{report}");
    assert!(report.contains("division by zero"), "{report}");
    assert!(report.contains("faults.cu:7"), "the report names the kernel's line: {report}");
}

// ---- The raw layer's fault record. ----

/// The fixture library of `module::entry`, opened by kda-emu's raw layer.
fn raw_library(module: &str, entry: &str) -> kda_emu::library::Library {
    let output = build(&fixture_dir("fixtures"), "emulator-fixtures");
    let built = output.emulated.iter().find(|library| library.module == module && library.entry == entry);
    let path = built.expect("the fixture library").path.to_str().expect("a UTF-8 path").to_owned();
    // SAFETY: a library the emulated build just wrote from the fixtures.
    unsafe { kda_emu::library::Library::open(&path) }.unwrap_or_else(|error| panic!("{error}"))
}

#[test]
fn a_failed_launch_fills_the_fault_record_with_its_kind_and_the_thread_its_message_names() {
    let fault = without_hanging(|| {
        let library = raw_library("misuse", "barrier_skipped");
        let index = library.find("barrier_skipped").expect("the kernel is registered");
        let mut out = [0u32; 32];
        let mut pointer = out.as_mut_ptr() as u64;
        let args = [((&raw mut pointer).cast::<std::ffi::c_void>(), 128)];
        // SAFETY: the kernel takes one `unsigned int*` and touches out[0..32] (128 bytes) at a
        // block of 32; `out` outlives the call.
        unsafe { library.launch(index, &args, [1, 1, 1], [32, 1, 1], 0, 9) }
            .expect_err("a barrier threads 8.. skip launched")
    });
    assert_eq!(fault.kind, FaultKind::Kernel, "{fault:?}");
    let place = fault.place.expect("a thread's failure has its place");
    assert_eq!(place.block, [0, 0, 0]);
    assert_eq!(place.thread, thread_named(&fault.message), "{fault:?}");
    assert_eq!(fault.access, None);
    assert!(fault.message.starts_with("barrier_skipped: block (0, 0, 0), thread ("), "{fault:?}");

    // Refused before any thread ran: no place.
    let library = raw_library("misuse", "barrier_skipped");
    let index = library.find("barrier_skipped").expect("the kernel is registered");
    let mut pointer = 0u64;
    let args = [((&raw mut pointer).cast::<std::ffi::c_void>(), 0)];
    // SAFETY: the launch is refused before the kernel runs: no thread reads the argument.
    let fault = unsafe { library.launch(index, &args, [1, 1, 1], [2048, 1, 1], 0, 9) }
        .expect_err("a block of 2048 threads launched");
    assert_eq!((fault.kind, fault.place), (FaultKind::Refused, None), "{fault:?}");
    assert!(fault.message.contains("the device allows at most 1024 threads per block"), "{fault:?}");
}

// ---- f16 through the emulator's <cuda_fp16.h>. ----

#[test]
fn f16_and_bf16_convert_like_the_half_crate_on_every_bit_pattern_and_at_every_rounding_edge() {
    use half::f16;
    let bits: Vec<u16> = (0..=u16::MAX).collect();
    // Every f16 value as f32 (exact), the midpoint above each (a tie: nearest even), a quarter
    // step either side of it, and the edges: overflow, subnormals, zeros, infinities, NaN.
    let mut values: Vec<f32> = Vec::new();
    for pattern in (0..0x7c00u16).chain(0x8000..0xfc00) {
        let (value, next) = (f16::from_bits(pattern).to_f64(), f16::from_bits(pattern + 1).to_f64());
        let step = next - value;
        values.extend(
            [value, value + step / 2.0, value + step / 4.0, value + 3.0 * step / 4.0].map(|x| x as f32),
        );
    }
    values.extend([65504.0, 65519.99, 65520.0, 1e10, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, -0.0]);
    values.extend([5.960_464_5e-8, 2.980_232_2e-8, 2.980_232_3e-8, 1e-9, f32::MIN_POSITIVE]);
    let n = values.len().max(bits.len());
    let (mut bits, mut values) = (bits, values);
    bits.resize(n, 0);
    values.resize(n, 0.0);
    let gpu = backend(71);
    let (bits_buffer, values_buffer) = (gpu.upload(&bits).unwrap(), gpu.upload(&values).unwrap());
    let mut as_float = gpu.zeros::<f32>(n).unwrap();
    let mut to_half = gpu.zeros::<f16>(n).unwrap();
    let (mut bf16_as_float, mut to_bf16) = (gpu.zeros::<f32>(n).unwrap(), gpu.zeros::<bf16>(n).unwrap());
    let count = u32::try_from(n).unwrap();
    launch(
        &gpu,
        &F16_CONVERSIONS,
        geometry((count.div_ceil(256), 1, 1), (256, 1, 1)),
        &mut [
            (&bits_buffer).into(),
            (&mut as_float).into(),
            (&values_buffer).into(),
            (&mut to_half).into(),
            (&mut bf16_as_float).into(),
            (&mut to_bf16).into(),
            count.into(),
        ],
    )
    .unwrap_or_else(|error| panic!("{error}"));
    let as_float = gpu.download::<f32>(&as_float).unwrap();
    for (pattern, got) in bits.iter().zip(&as_float) {
        let expected = f16::from_bits(*pattern).to_f32();
        let same = if expected.is_nan() { got.is_nan() } else { got.to_bits() == expected.to_bits() };
        assert!(same, "__half2float({pattern:#06x}) = {got:e}, half says {expected:e}");
    }
    let to_half = gpu.download::<f16>(&to_half).unwrap();
    for (value, got) in values.iter().zip(&to_half) {
        let expected = f16::from_f32(*value);
        let same = if expected.is_nan() { got.is_nan() } else { got.to_bits() == expected.to_bits() };
        assert!(
            same,
            "__float2half_rn({value:e}) = {:#06x}, half says {:#06x}",
            got.to_bits(),
            expected.to_bits()
        );
    }
}

// ---- fp8 through the emulator's <cuda_fp8.h>, against the OCP formats. ----

/// An OCP fp8 format, for the reference: its field widths and bias, and whether its all-ones
/// exponent holds infinities and NaNs (E5M2) or values and one NaN pattern (E4M3).
struct Fp8Format {
    exponent_bits: u32,
    significand_bits: u32,
    bias: i32,
    ieee: bool,
}

const E4M3: Fp8Format = Fp8Format { exponent_bits: 4, significand_bits: 3, bias: 7, ieee: false };
const E5M2: Fp8Format = Fp8Format { exponent_bits: 5, significand_bits: 2, bias: 15, ieee: true };

impl Fp8Format {
    /// The value of `bits`, from the format's definition (NaN for a NaN pattern).
    fn decode(&self, bits: u8) -> f64 {
        let sign = if bits & 0x80 != 0 { -1.0 } else { 1.0 };
        let (m, top) = (self.significand_bits, (1u32 << self.exponent_bits) - 1);
        let exponent = (u32::from(bits) >> m) & top;
        let fraction = u32::from(bits) & ((1 << m) - 1);
        if exponent == top && self.ieee {
            return if fraction == 0 { sign * f64::INFINITY } else { f64::NAN };
        }
        if exponent == top && fraction == (1 << m) - 1 {
            return f64::NAN;
        }
        let significand = f64::from(fraction) / f64::from(1u32 << m);
        if exponent == 0 {
            sign * significand * 2f64.powi(1 - self.bias)
        } else {
            sign * (1.0 + significand) * 2f64.powi(exponent as i32 - self.bias)
        }
    }

    /// The bits of `x` rounded to the nearest value (a tie to the even pattern), found by search:
    /// every non-negative finite pattern, and the pattern just past the largest, which the
    /// rounding reaches as an overflow (to the largest when saturating, else infinity or NaN).
    fn encode(&self, x: f32, saturate: bool) -> Option<u8> {
        if x.is_nan() {
            return None;
        }
        let magnitude = f64::from(x.abs());
        let finite: Vec<(u8, f64)> =
            (0..0x80u8).map(|b| (b, self.decode(b))).filter(|(_, v)| v.is_finite()).collect();
        let &(largest_bits, largest) = finite.last().expect("a largest value");
        let past_bits = largest_bits + 1;
        let past = largest + (largest - finite[finite.len() - 2].1);
        let candidates = finite.iter().copied().chain([(past_bits, past)]);
        let distance = |value: f64| (value - magnitude).abs();
        let (bits, _) = candidates
            .min_by(|(a, va), (b, vb)| distance(*va).total_cmp(&distance(*vb)).then((a & 1).cmp(&(b & 1))))
            .expect("candidates");
        // Infinity is equally far from everything: it is past the largest.
        let bits = if magnitude.is_infinite() { past_bits } else { bits };
        let bits = if bits != past_bits {
            bits
        } else if saturate {
            largest_bits
        } else if self.ieee {
            0x7c
        } else {
            return None;
        };
        Some(if x.is_sign_negative() { bits | 0x80 } else { bits })
    }
}

#[test]
fn fp8_converts_as_the_ocp_formats_define_on_every_pattern_and_rounds_to_nearest_even() {
    // Every value of both formats, the midpoint above each (a tie), a quarter step either side,
    // past the largest, zeros, infinities and NaN, of both signs.
    let mut values: Vec<f32> = vec![0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1e-12, 1e9];
    for format in [&E4M3, &E5M2] {
        let finite: Vec<f64> = (0..0x80u8).map(|b| format.decode(b)).filter(|v| v.is_finite()).collect();
        for pair in finite.windows(2) {
            let (low, step) = (pair[0], pair[1] - pair[0]);
            for x in [low, low + step / 2.0, low + step / 4.0, low + 3.0 * step / 4.0] {
                values.extend([x as f32, -x as f32]);
            }
        }
        let (largest, step) = (finite[finite.len() - 1], finite[finite.len() - 1] - finite[finite.len() - 2]);
        for x in [largest, largest + step / 4.0, largest + step / 2.0, largest + step, largest * 4.0] {
            values.extend([x as f32, -x as f32]);
        }
    }
    let n = values.len().max(256);
    values.resize(n, 0.0);
    let bits: Vec<u8> = (0..n).map(|i| i as u8).collect();
    let gpu = backend(73);
    let (bits_buffer, values_buffer) = (gpu.upload(&bits).unwrap(), gpu.upload(&values).unwrap());
    let (mut from_e4m3, mut from_e5m2) = (gpu.zeros::<f32>(n).unwrap(), gpu.zeros::<f32>(n).unwrap());
    let (mut to_e4m3, mut to_e5m2) = (gpu.zeros::<Fp8E4M3>(n).unwrap(), gpu.zeros::<Fp8E5M2>(n).unwrap());
    let mut unsaturated = gpu.zeros::<u8>(2 * n).unwrap();
    let count = u32::try_from(n).unwrap();
    launch(
        &gpu,
        &FP8_CONVERSIONS,
        geometry((count.div_ceil(128), 1, 1), (128, 1, 1)),
        &mut [
            (&bits_buffer).into(),
            (&mut from_e4m3).into(),
            (&mut from_e5m2).into(),
            (&values_buffer).into(),
            (&mut to_e4m3).into(),
            (&mut to_e5m2).into(),
            (&mut unsaturated).into(),
            count.into(),
        ],
    )
    .unwrap_or_else(|error| panic!("{error}"));
    let same = |got: f64, expected: f64| if expected.is_nan() { got.is_nan() } else { got == expected };
    for (format, name, decoded) in [(&E4M3, "e4m3", &from_e4m3), (&E5M2, "e5m2", &from_e5m2)] {
        let decoded = gpu.download::<f32>(decoded).unwrap();
        for pattern in 0..=255u8 {
            let (got, expected) = (f64::from(decoded[usize::from(pattern)]), format.decode(pattern));
            assert!(same(got, expected), "{name} {pattern:#04x} is {got:e}, the format says {expected:e}");
        }
    }
    let to_e4m3 = gpu.download::<Fp8E4M3>(&to_e4m3).unwrap();
    let to_e5m2 = gpu.download::<Fp8E5M2>(&to_e5m2).unwrap();
    let unsaturated = gpu.download::<u8>(&unsaturated).unwrap();
    for (i, &x) in values.iter().enumerate() {
        let results = [
            (&E4M3, "saturated e4m3", to_e4m3[i].0, true),
            (&E5M2, "saturated e5m2", to_e5m2[i].0, true),
            (&E4M3, "unsaturated e4m3", unsaturated[2 * i], false),
            (&E5M2, "unsaturated e5m2", unsaturated[2 * i + 1], false),
        ];
        for (format, name, got, saturate) in results {
            match format.encode(x, saturate) {
                Some(expected) => {
                    assert_eq!(got, expected, "{name} of {x:e}: {got:#04x}, the format says {expected:#04x}")
                }
                None => assert!(format.decode(got).is_nan(), "{name} of {x:e}: {got:#04x}, not a NaN"),
            }
        }
    }
}

#[test]
fn code_gated_on_the_architecture_is_compiled_for_the_emulated_device() {
    let gpu = backend(81);
    let mut out = gpu.zeros::<u32>(1).unwrap();
    launch(&gpu, &ARCH_GATED, geometry((1, 1, 1), (32, 1, 1)), &mut [(&mut out).into()])
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(gpu.download::<u32>(&out).unwrap(), [kda_emu::DeviceLimits::SM_90.arch]);
    assert_eq!(kda_emu::DeviceLimits::SM_90.arch, 900);
}

#[test]
fn borrowed_device_memory_is_refused_naming_the_backend_checked_or_not() {
    on_both(32, |backend, gpu| {
        let kernel = gpu.lookup(&PAIR_SUM).unwrap_or_else(|error| panic!("{error}"));
        let mut y = gpu.zeros::<f32>(2).unwrap();
        // SAFETY: the emulator dereferences no device address: it refuses it.
        let x = || unsafe { In::<f32>::from_device_ptr(0x1000, 4) };
        let expected = format!(
            "memory at device address 0x1000 (4 f32 elements) does not belong to {}, which refuses it",
            gpu.describe()
        );
        let checked = gpu.launch(
            kernel,
            geometry((1, 1, 1), (32, 1, 1)),
            &mut [x().into(), (&mut y).into(), 4u32.into()],
        );
        // SAFETY: `pair_sum`'s parameters in order, `x` of n = 4 elements and `y` of cdiv(4, 2).
        let unchecked = unsafe {
            gpu.launch_unchecked(
                kernel,
                geometry((1, 1, 1), (32, 1, 1)),
                &mut [x().into(), (&mut y).into(), 4u32.into()],
            )
        };
        for refused in [checked, unchecked] {
            let error = refused.expect_err(backend);
            assert!(matches!(error, BackendError::ForeignResource { .. }), "{backend}: {error}");
            assert_eq!(error.to_string(), expected, "{backend}");
        }
    });
}
