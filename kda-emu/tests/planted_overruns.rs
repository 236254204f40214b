//! Out of bounds without a sanitizer, as a table: a planted access at 1, 2 and 4,096 elements
//! before and after its memory, read and written, through a global view (the whole buffer, and a
//! view sliced from a larger buffer whose memory past the view is valid), a `__shared__` array and
//! the launch's dynamic shared memory, in each kernel shape the emulator schedules differently (a
//! plain kernel, one whose threads wait at barriers, one whose lanes wait in shuffles and a vote).
//! Every cell is an `Err` from the in-process emulator naming the kernel, the memory, the thread
//! and the element; the same kernels with the access in bounds run and give their answer.

use std::path::Path;
use std::sync::OnceLock;

use kda_build::cuda::emulation::Emulation;
use kda_runtime::emu::EmuBackend;
use kda_runtime::signature::{Access, KernelParam, Op, ScalarKind, Signature};
use kda_runtime::{DType, EmulatedSet, GpuBackend, GpuBackendExt, KernelEntry, LaunchGeometry};
use kda_test_support::emulator::{assert_built, build, emulated_set};

/// The namespace of `tests/fixtures/planted`.
const NAMESPACE: &str = "planted@0:kernels.toml";

/// `f32 x[n], u32 n, i32 at, u32 write, u32 shape`.
const PLANTED: Signature = Signature {
    params: &[
        KernelParam::buffer("x", DType::F32, Access::Write, "n", &[Op::Scalar(1)]),
        KernelParam::scalar("n", ScalarKind::U32),
        KernelParam::scalar("at", ScalarKind::I32),
        KernelParam::scalar("write", ScalarKind::U32),
        KernelParam::scalar("shape", ScalarKind::U32),
    ],
    requires: &[],
};

const fn planted(name: &'static str) -> KernelEntry {
    KernelEntry {
        namespace: NAMESPACE,
        table: "planted",
        field: name,
        module: "planted",
        entry: name,
        required: true,
        line: 0,
        signature: Some(&PLANTED),
    }
}

const GLOBAL: KernelEntry = planted("planted_global");
const STATIC: KernelEntry = planted("planted_static");
const DYNAMIC: KernelEntry = planted("planted_dynamic");
const ASYNC: KernelEntry = planted("planted_async");

/// The fixtures built once, as the set the backend carries.
fn fixtures() -> &'static EmulatedSet {
    static SET: OnceLock<&'static EmulatedSet> = OnceLock::new();
    SET.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/planted");
        let output =
            build(&dir, &Path::new(env!("CARGO_TARGET_TMPDIR")).join("planted"), Emulation::default());
        assert_built(&output, "the planted fixtures");
        emulated_set(NAMESPACE, &output.emulated, &[GLOBAL, STATIC, DYNAMIC, ASYNC], None)
    })
}

/// Two blocks of 64 threads: the planted access is thread 37 of block 1.
const BLOCKS: u32 = 2;
const THREADS: u32 = 64;
/// The elements of the launch's `x`, one a thread.
const N: usize = (BLOCKS * THREADS) as usize;
/// The elements of the `__shared__` array and of the dynamic shared memory, one a thread.
const SHARED: usize = THREADS as usize;
/// How far the buffer a sliced view is cut from reaches on each side of the view.
const MARGIN: usize = 5000;

/// What the planted access goes through.
#[derive(Clone, Copy, Debug)]
enum Memory {
    /// `x`, the launch's whole buffer.
    Global,
    /// `x`, a view of `N` elements from `MARGIN` into a buffer of `N + 2 · MARGIN`.
    Sliced,
    /// `__shared__ float tile[64]`.
    Static,
    /// 256 bytes of dynamic shared memory, as `extern __shared__ float staged[]`.
    Dynamic,
}

/// The kernel's shape around the planted access (its `shape` argument).
#[derive(Clone, Copy, Debug)]
enum Shape {
    Plain = 0,
    Barriers = 1,
    WarpCollectives = 2,
}

impl Memory {
    fn entry(self) -> &'static KernelEntry {
        match self {
            Memory::Global | Memory::Sliced => &GLOBAL,
            Memory::Static => &STATIC,
            Memory::Dynamic => &DYNAMIC,
        }
    }

    /// The elements the access may reach.
    fn len(self) -> usize {
        match self {
            Memory::Global | Memory::Sliced => N,
            Memory::Static | Memory::Dynamic => SHARED,
        }
    }

    /// The culprit's own element, an access in bounds.
    fn own(self) -> i32 {
        match self {
            Memory::Global | Memory::Sliced => 64 + 37,
            Memory::Static | Memory::Dynamic => 37,
        }
    }

    /// What the fault names for element `index` of this memory, after the thread.
    fn named(self, index: i64, write: bool) -> String {
        let access = if write { "a write" } else { "a read" };
        match self {
            Memory::Global | Memory::Sliced => {
                format!("{access} of element {index} of parameter 0 `x`, outside its {N} elements")
            }
            Memory::Static => format!("index {index} out of bounds for `tile` (float [{SHARED}])"),
            Memory::Dynamic => format!(
                "{access} of byte {} of the launch's dynamic shared memory, outside its {} bytes",
                4 * index,
                4 * SHARED
            ),
        }
    }
}

/// The launch's `x`: element i is i + 1.
fn inputs() -> Vec<f32> {
    (0..N).map(|i| i as f32 + 1.0).collect()
}

/// Launches `memory`'s kernel with the planted access at `at`: `x` after the launch, or the
/// launch's message.
fn launch(gpu: &EmuBackend, memory: Memory, shape: Shape, at: i32, write: bool) -> Result<Vec<f32>, String> {
    launch_entry(gpu, memory.entry(), memory, shape, at, write)
}

/// [`launch`], of `entry` (one of `memory`'s kernels).
fn launch_entry(
    gpu: &EmuBackend,
    entry: &KernelEntry,
    memory: Memory,
    shape: Shape,
    at: i32,
    write: bool,
) -> Result<Vec<f32>, String> {
    let kernel = gpu.lookup(entry).unwrap_or_else(|error| panic!("{error}"));
    let geometry = LaunchGeometry {
        grid: (BLOCKS, 1, 1),
        block: (THREADS, 1, 1),
        shared_mem_bytes: if matches!(memory, Memory::Dynamic) { 4 * SHARED as u32 } else { 0 },
    };
    let scalars = (N as u32, at, u32::from(write), shape as u32);
    let result = if matches!(memory, Memory::Sliced) {
        // The elements around the view are valid memory of the buffer, which the launch did not
        // hand the kernel.
        let mut padded = vec![-1.0f32; MARGIN];
        padded.extend(inputs());
        padded.extend(vec![-1.0f32; MARGIN]);
        let mut buffer = gpu.upload(&padded).unwrap();
        let launched = gpu.launch(
            kernel,
            geometry,
            &mut [
                buffer.slice_mut(MARGIN..MARGIN + N).into(),
                scalars.0.into(),
                scalars.1.into(),
                scalars.2.into(),
                scalars.3.into(),
            ],
        );
        // Launched or not, nothing reached the buffer's elements around the view.
        let after = gpu.download::<f32>(&buffer).unwrap();
        let mut around = after[..MARGIN].iter().chain(&after[MARGIN + N..]);
        assert!(around.all(|&x| x == -1.0), "element {at} written around the view");
        launched.map(|()| after[MARGIN..MARGIN + N].to_vec())
    } else {
        let mut x = gpu.upload(&inputs()).unwrap();
        gpu.launch(
            kernel,
            geometry,
            &mut [(&mut x).into(), scalars.0.into(), scalars.1.into(), scalars.2.into(), scalars.3.into()],
        )
        .map(|()| gpu.download::<f32>(&x).unwrap())
    };
    result.map_err(|error| error.to_string())
}

const MEMORIES: [Memory; 4] = [Memory::Global, Memory::Sliced, Memory::Static, Memory::Dynamic];
const SHAPES: [Shape; 3] = [Shape::Plain, Shape::Barriers, Shape::WarpCollectives];

fn backend() -> EmuBackend {
    EmuBackend::new(&[fixtures()]).unwrap_or_else(|error| panic!("{error}")).with_seed(11)
}

#[test]
fn the_planted_kernels_with_the_access_in_bounds_give_their_answer() {
    let gpu = backend();
    for (memory, shape) in MEMORIES.into_iter().flat_map(|memory| SHAPES.map(|shape| (memory, shape))) {
        let what = format!("{memory:?}, {shape:?}");
        // The culprit reads its own element into its value: element 101 doubles.
        let mut doubled = inputs();
        doubled[64 + 37] *= 2.0;
        assert_eq!(launch(&gpu, memory, shape, memory.own(), false), Ok(doubled), "{what}, a read");
        // It writes its value where it was: nothing changes.
        assert_eq!(launch(&gpu, memory, shape, memory.own(), true), Ok(inputs()), "{what}, a write");
    }
}

#[test]
fn every_planted_access_outside_its_memory_is_an_err_naming_the_kernel_the_memory_the_thread_and_the_element()
{
    let gpu = backend();
    let (mut cells, mut missed) = (0, Vec::new());
    for memory in MEMORIES {
        for shape in SHAPES {
            for distance in [1i64, 2, 4096] {
                for index in [-distance, memory.len() as i64 - 1 + distance] {
                    for write in [false, true] {
                        cells += 1;
                        let cell = format!("{memory:?}, {shape:?}, element {index}, write {write}");
                        let at = i32::try_from(index).expect("an i32 index");
                        let want = format!(
                            "{}: block (1, 0, 0), thread (37, 0, 0): {}",
                            memory.entry().entry,
                            memory.named(index, write)
                        );
                        match launch(&gpu, memory, shape, at, write) {
                            Err(message) if message.contains(&want) => {}
                            Err(message) => missed.push(format!("{cell}: {message}")),
                            Ok(_) => missed.push(format!("{cell}: launched")),
                        }
                    }
                }
            }
        }
    }
    assert_eq!(cells, 144, "3 distances, 2 sides, read and write, 4 memories, 3 shapes");
    assert!(
        missed.is_empty(),
        "{} cells of {cells} not reported as `{{kernel}}: block, thread: access`:\n{}",
        missed.len(),
        missed.join("\n")
    );
}

#[test]
fn a_cp_async_read_outside_a_view_is_an_err_naming_the_thread_and_the_element() {
    let gpu = backend();
    let mut doubled = inputs();
    doubled[64 + 37] *= 2.0;
    for memory in [Memory::Global, Memory::Sliced] {
        assert_eq!(
            launch_entry(&gpu, &ASYNC, memory, Shape::Plain, memory.own(), false),
            Ok(doubled.clone())
        );
        for distance in [1i64, 2, 4096] {
            for index in [-distance, N as i64 - 1 + distance] {
                let at = i32::try_from(index).expect("an i32 index");
                let want = format!(
                    "planted_async: block (1, 0, 0), thread (37, 0, 0): {}",
                    memory.named(index, false)
                );
                let message = launch_entry(&gpu, &ASYNC, memory, Shape::Plain, at, false).unwrap_err();
                assert!(message.contains(&want), "{memory:?}, element {index}: {message}");
            }
        }
    }
}
