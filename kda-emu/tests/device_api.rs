//! The CUDA device API that kernel libraries call, on the emulator: atomics of every type under
//! contention across blocks and on the edge of each rule, warp votes over full and partial masks,
//! shuffles at segment widths and of every width of value, device math against references
//! computed here (exact where CUDA is exact, within CUDA's documented bounds elsewhere), and
//! `cuda::std::numeric_limits` of the 16-bit floats. A vote with a lane missing is a launch `Err`,
//! and the atomics are no race under ThreadSanitizer. The fixtures (`tests/device_api/`) are
//! built by this test for the emulator only, their table derived from their manifest.

use std::cmp::Ordering;
use std::path::Path;
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::Duration;

use kda_build::cuda::BuildOutput;
use kda_build::cuda::emulation::{Emulation, Sanitizer};
use kda_runtime::emu::{DriverBackend, EmuBackend};
use kda_runtime::{
    EmulatedSet, GpuBackend, GpuBackendExt, KernelArg, KernelHandle, KernelTable, LaunchGeometry, bf16, f16,
};
use kda_test_support::emulator::{Bits, assert_built, build, emulated_set};

/// The fixtures' table.
#[derive(KernelTable)]
#[kernel_table(manifest = "tests/device_api/kernels.toml", table = "device_api")]
#[expect(dead_code, reason = "the marker type: only what the derive generates for it is used")]
struct DeviceApi;

/// How long a launch may take before the test calls it a hang.
const HANG: Duration = Duration::from_secs(120);

/// The fixtures built with `emulation` into the test's temporary directory `out`.
fn build_fixtures(out: &str, emulation: Emulation) -> BuildOutput {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/device_api");
    let output = build(&dir, &Path::new(env!("CARGO_TARGET_TMPDIR")).join(out), emulation);
    assert_built(&output, "the device API fixtures");
    output
}

/// The plain build, once for every test.
fn fixtures() -> &'static EmulatedSet {
    static SET: OnceLock<&'static EmulatedSet> = OnceLock::new();
    SET.get_or_init(|| {
        let output = build_fixtures("device-api", Emulation::default());
        emulated_set(DeviceApiKernels::NAMESPACE, &output.emulated, &DeviceApiKernels::ENTRIES, None)
    })
}

/// A backend carrying the fixtures, and its resolved table.
fn backend(seed: u64) -> (EmuBackend, DeviceApiKernels) {
    let gpu = EmuBackend::new(&[fixtures()]).unwrap_or_else(|error| panic!("{error}")).with_seed(seed);
    let kernels = DeviceApiKernels::resolve(&gpu).unwrap_or_else(|error| panic!("{error}"));
    (gpu, kernels)
}

fn launch(
    gpu: &dyn GpuBackend,
    kernel: KernelHandle,
    grid: u32,
    block: u32,
    args: &mut [KernelArg<'_>],
) -> Result<(), String> {
    let geometry = LaunchGeometry { grid: (grid, 1, 1), block: (block, 1, 1), shared_mem_bytes: 0 };
    gpu.launch(kernel, geometry, args).map_err(|error| error.to_string())
}

// ---- Atomics. ----

/// What `histogram` is given and what it must count, for `n` keys in `bins` bins.
struct Histogram {
    keys: Vec<u32>,
    counts: Vec<u32>,
}

impl Histogram {
    fn new(n: usize, bins: u32, seed: u64) -> Self {
        let mut bits = Bits(seed);
        let keys: Vec<u32> = (0..n).map(|_| (bits.next_u64() % u64::from(bins)) as u32).collect();
        let mut counts = vec![0u32; bins as usize];
        for &key in &keys {
            counts[key as usize] += 1;
        }
        Self { keys, counts }
    }
}

/// The downloads of one `histogram` launch.
struct HistogramRun {
    counts: Vec<u32>,
    wide: Vec<u64>,
    sums: Vec<f32>,
    doubles: Vec<f64>,
    halves: Vec<f16>,
    bfloats: Vec<bf16>,
    half_pairs: Vec<f16>,
    bfloat_pairs: Vec<bf16>,
    float_pairs: Vec<f32>,
    tickets: Vec<u32>,
    counter: u32,
}

/// Launches `histogram` over `8` blocks of 128 threads on `gpu`.
fn run_histogram(
    gpu: &dyn GpuBackend,
    kernel: KernelHandle,
    histogram: &Histogram,
) -> Result<HistogramRun, String> {
    let (n, bins) = (histogram.keys.len(), histogram.counts.len());
    let keys = gpu.upload(&histogram.keys).unwrap();
    let mut counts = gpu.zeros::<u32>(bins).unwrap();
    let mut wide = gpu.zeros::<u64>(bins).unwrap();
    let mut sums = gpu.zeros::<f32>(bins).unwrap();
    let mut doubles = gpu.zeros::<f64>(bins).unwrap();
    let mut halves = gpu.zeros::<f16>(bins).unwrap();
    let mut bfloats = gpu.zeros::<bf16>(bins).unwrap();
    let mut half_pairs = gpu.zeros::<f16>(2 * bins).unwrap();
    let mut bfloat_pairs = gpu.zeros::<bf16>(2 * bins).unwrap();
    let mut float_pairs = gpu.zeros::<f32>(2 * bins).unwrap();
    let mut tickets = gpu.zeros::<u32>(n).unwrap();
    let mut counter = gpu.zeros::<u32>(1).unwrap();
    launch(
        gpu,
        kernel,
        (n as u32).div_ceil(128),
        128,
        &mut [
            (&keys).into(),
            (&mut counts).into(),
            (&mut wide).into(),
            (&mut sums).into(),
            (&mut doubles).into(),
            (&mut halves).into(),
            (&mut bfloats).into(),
            (&mut half_pairs).into(),
            (&mut bfloat_pairs).into(),
            (&mut float_pairs).into(),
            (&mut tickets).into(),
            (&mut counter).into(),
            (n as u32).into(),
            (bins as u32).into(),
        ],
    )?;
    Ok(HistogramRun {
        counts: gpu.download(&counts).unwrap(),
        wide: gpu.download(&wide).unwrap(),
        sums: gpu.download(&sums).unwrap(),
        doubles: gpu.download(&doubles).unwrap(),
        halves: gpu.download(&halves).unwrap(),
        bfloats: gpu.download(&bfloats).unwrap(),
        half_pairs: gpu.download(&half_pairs).unwrap(),
        bfloat_pairs: gpu.download(&bfloat_pairs).unwrap(),
        float_pairs: gpu.download(&float_pairs).unwrap(),
        tickets: gpu.download(&tickets).unwrap(),
        counter: gpu.download::<u32>(&counter).unwrap()[0],
    })
}

/// Every count of `run` is the histogram's: each add of every type happened exactly once (the
/// float steps make every partial sum exact, so any order gives these sums), and the tickets are
/// 0..n, each returned to one thread.
fn check_histogram(histogram: &Histogram, run: &HistogramRun) {
    let counts = &histogram.counts;
    let pairs = |scale: f32, second: f32| -> Vec<f32> {
        counts.iter().flat_map(|&c| [c as f32 * scale, c as f32 * second]).collect()
    };
    assert_eq!(run.counts, *counts);
    assert_eq!(run.wide, counts.iter().map(|&c| u64::from(c)).collect::<Vec<_>>());
    assert_eq!(run.sums, counts.iter().map(|&c| c as f32 * 0.5).collect::<Vec<_>>());
    assert_eq!(run.doubles, counts.iter().map(|&c| f64::from(c) * 0.5).collect::<Vec<_>>());
    let quarters: Vec<f32> = counts.iter().map(|&c| c as f32 * 0.25).collect();
    assert_eq!(run.halves.iter().map(|h| h.to_f32()).collect::<Vec<_>>(), quarters);
    assert_eq!(run.bfloats.iter().map(|h| h.to_f32()).collect::<Vec<_>>(), quarters);
    assert_eq!(run.half_pairs.iter().map(|h| h.to_f32()).collect::<Vec<_>>(), pairs(0.25, 0.25));
    assert_eq!(run.bfloat_pairs.iter().map(|h| h.to_f32()).collect::<Vec<_>>(), pairs(0.25, 0.25));
    assert_eq!(run.float_pairs, pairs(1.0, 0.5));
    let n = histogram.keys.len();
    assert_eq!(run.counter as usize, n);
    let mut tickets = run.tickets.clone();
    tickets.sort_unstable();
    assert_eq!(tickets, (0..n as u32).collect::<Vec<_>>(), "each ticket returned once");
}

#[test]
fn atomic_adds_of_every_type_count_a_histogram_exactly_across_blocks() {
    let (gpu, kernels) = backend(17);
    // 1,000 keys in 37 bins: at most a few dozen a bin, so every f16 and bf16 sum of quarters is
    // exact; the last of the 8 blocks is partial.
    let histogram = Histogram::new(1000, 37, 0xa70);
    let run = run_histogram(&gpu, kernels.histogram, &histogram).unwrap_or_else(|error| panic!("{error}"));
    check_histogram(&histogram, &run);
}

/// The words `contended` starts from: the 32-bit operations' words carry a sentinel in their high
/// half, which none may touch.
const SENTINEL: u64 = 0xdead_beef_0000_0000;

fn contended_start() -> [u64; 25] {
    let low = |value: u32| SENTINEL | u64::from(value);
    [
        low(i32::MIN as u32),
        low(i32::MAX as u32),
        low(0),
        low(u32::MAX),
        0,
        u64::MAX,
        i64::MIN as u64,
        i64::MAX as u64,
        low(u32::MAX),
        low(0),
        low(0x1234_5678),
        u64::MAX,
        0,
        0,
        low(7),
        low(0),
        low(3),
        low(5),
        low(u32::MAX),
        low(100),
        SENTINEL | 0xfff0,
        1,
        u64::MAX,
        0,
        0,
    ]
}

/// Sorted.
fn sorted(mut values: Vec<u32>) -> Vec<u32> {
    values.sort_unstable();
    values
}

#[test]
fn integer_atomics_under_contention_end_where_any_order_ends_and_return_each_old_value_once() {
    let (gpu, kernels) = backend(23);
    const N: u32 = 256;
    let mut state = gpu.upload(&contended_start()).unwrap();
    let mut olds = gpu.zeros::<u32>(4 * N as usize).unwrap();
    launch(&gpu, kernels.contended, 1, N, &mut [(&mut state).into(), (&mut olds).into(), N.into()])
        .unwrap_or_else(|error| panic!("{error}"));
    let state = gpu.download::<u64>(&state).unwrap();
    let olds = gpu.download::<u32>(&olds).unwrap();

    let threads = 0..N;
    let signed: Vec<i32> = threads.clone().map(|t| t.wrapping_mul(2_654_435_761) as i32).collect();
    let wide: Vec<u64> =
        threads.clone().map(|t| 0x9e37_79b9_7f4a_7c15u64.wrapping_mul(u64::from(t) + 1)).collect();
    let low = |value: u32| SENTINEL | u64::from(value);
    let expected_words = [
        (0, low(*signed.iter().max().unwrap() as u32)),
        (1, low(*signed.iter().min().unwrap() as u32)),
        (2, low(signed.iter().map(|&s| s as u32).max().unwrap())),
        (3, low(signed.iter().map(|&s| s as u32).min().unwrap())),
        (4, *wide.iter().max().unwrap()),
        (5, *wide.iter().min().unwrap()),
        (6, wide.iter().map(|&w| w as i64).max().unwrap() as u64),
        (7, wide.iter().map(|&w| w as i64).min().unwrap() as u64),
        (8, low(0)),
        (9, low(u32::MAX)),
        (10, low(signed.iter().fold(0x1234_5678, |acc, &s| acc ^ s as u32))),
        (11, wide.iter().fold(u64::MAX, |acc, &w| acc & !w)),
        (12, wide.iter().fold(0, |acc, &w| acc | w)),
        (13, wide.iter().fold(0, |acc, &w| acc ^ w)),
        (15, low(N % 11)),
        (16, low((3 + 11 * N - N) % 11)),
        (17, low(5 + threads.clone().sum::<u32>())),
        (19, low((100 - threads.clone().sum::<u32>() as i32) as u32)),
        (20, SENTINEL | u64::from(0xfff0u16.wrapping_add((3 * N) as u16))),
        (21, wide.iter().fold(1, |acc: u64, &w| acc.wrapping_add(w))),
        (22, wide.iter().fold(u64::MAX, |acc, &w| acc & !w)),
        (23, wide.iter().fold(0, |acc, &w| acc | w)),
        (24, wide.iter().fold(0, |acc, &w| acc ^ w)),
    ];
    for (word, expected) in expected_words {
        assert_eq!(state[word], expected, "word {word}: {:#x} for {expected:#x}", state[word]);
    }

    let per_op = |op: usize| olds[op * N as usize..(op + 1) * N as usize].to_vec();
    // atomicExch: the olds and the final value are the start and every thread's value, each once.
    assert_eq!(state[14] & !0xffff_ffff, SENTINEL);
    let mut chain = per_op(0);
    chain.push(state[14] as u32);
    assert_eq!(sorted(chain), sorted(std::iter::once(7).chain(threads.clone().map(|t| t + 1000)).collect()));
    // atomicInc and atomicDec: the olds are the states of one sequence of N steps, each once.
    assert_eq!(sorted(per_op(1)), sorted((0..N).map(|k| k % 11).collect()));
    assert_eq!(sorted(per_op(2)), sorted((0..N).map(|k| (3 + 11 * N - k) % 11).collect()));
    // The first-wins atomicCAS: one thread saw the start, every other saw the winner.
    let cas = per_op(3);
    let winners: Vec<u32> = threads.filter(|&t| cas[t as usize] == u32::MAX).collect();
    assert_eq!(winners.len(), 1, "{winners:?}");
    assert_eq!(state[18], low(winners[0]));
    assert!(cas.iter().filter(|&&old| old != u32::MAX).all(|&old| old == winners[0]));
}

#[test]
fn each_atomic_follows_cudas_rule_on_the_edge_of_it() {
    let (gpu, kernels) = backend(29);
    let start: [u32; 14] =
        [5, 7, 3, 0, 7, 3, 9, 9, -5i32 as u32, 0xffff_fffb, 1.25f32.to_bits(), 1, 1, 0x100];
    let mut words = gpu.upload(&start).unwrap();
    let mut olds = gpu.zeros::<u32>(13).unwrap();
    launch(&gpu, kernels.atomic_rules, 1, 1, &mut [(&mut words).into(), (&mut olds).into()])
        .unwrap_or_else(|error| panic!("{error}"));
    // atomicInc: old >= limit wraps to 0, else + 1. atomicDec: old == 0 or > limit becomes the
    // limit, else - 1. atomicCAS stores only on a match; signed and unsigned max compare as their
    // type; f32 atomicExch stores the bits. The f32 add flushes subnormals on global memory (the
    // subnormals 2^-149 + 2^-141 give +0) and keeps them on shared memory.
    let expected: [u32; 14] =
        [0, 0, 4, 5, 5, 2, 9, 1, -5i32 as u32, 0xffff_fffb, 2.5f32.to_bits(), 0, 0x101, 0x100];
    assert_eq!(gpu.download::<u32>(&words).unwrap(), expected);
    assert_eq!(gpu.download::<u32>(&olds).unwrap(), start[..13]);
}

#[test]
fn atomics_are_no_race_under_thread_sanitizer_and_count_as_in_process() {
    let output = build_fixtures(
        "device-api-thread",
        Emulation { sanitizer: Some(Sanitizer::Thread), ..Emulation::default() },
    );
    let driver = output.emulation_driver.as_deref().expect("a sanitized build makes its driver");
    let set =
        emulated_set(DeviceApiKernels::NAMESPACE, &output.emulated, &DeviceApiKernels::ENTRIES, Some(driver));
    let gpu = DriverBackend::new(driver, &[set], 31).unwrap_or_else(|error| panic!("{error}"));
    let kernels = DeviceApiKernels::resolve(&gpu).unwrap_or_else(|error| panic!("{error}"));
    let histogram = Histogram::new(600, 29, 0x75a);
    let run = run_histogram(&gpu, kernels.histogram, &histogram).unwrap_or_else(|report| panic!("{report}"));
    check_histogram(&histogram, &run);
}

// ---- Warp votes and shuffles. ----

#[test]
fn ballot_any_and_all_see_each_lane_of_their_mask_and_no_other() {
    let (gpu, kernels) = backend(37);
    let mut bits = Bits(0xb0);
    // Mostly random predicates (any non-zero value is true), with one half warp all true.
    let preds: Vec<u32> =
        (0..64).map(|t| if (48..64).contains(&t) { 1 + t } else { (bits.next_u64() % 3) as u32 }).collect();
    const FILL: u32 = 0xdead_0000;
    let uploaded = gpu.upload(&preds).unwrap();
    let mut out = gpu.upload(&vec![FILL; 1088]).unwrap();
    launch(&gpu, kernels.votes, 1, 64, &mut [(&uploaded).into(), (&mut out).into()])
        .unwrap_or_else(|error| panic!("{error}"));
    let out = gpu.download::<u32>(&out).unwrap();
    for t in 0..64usize {
        let (warp, lane) = (t / 32, t % 32);
        let masks = [
            u32::MAX,
            if lane < 16 { 0x0000_ffff } else { 0xffff_0000 },
            if lane % 2 == 0 { 0x5555_5555 } else { 0xaaaa_aaaa },
            0x7,
        ];
        for (v, mask) in masks.into_iter().enumerate() {
            let slot = |k: usize| out[(4 * v + k) * 64 + t];
            if mask & (1 << lane) == 0 {
                assert_eq!([slot(0), slot(1), slot(2)], [FILL; 3], "lane {lane} is not in vote {v}");
                continue;
            }
            let ballot = (0..32)
                .filter(|&l| mask & (1 << l) != 0 && preds[32 * warp + l] != 0)
                .fold(0, |b, l| b | 1 << l);
            let expected = [ballot, u32::from(ballot != 0), u32::from(ballot == mask)];
            assert_eq!([slot(0), slot(1), slot(2)], expected, "thread {t}, vote {v} (mask {mask:#010x})");
        }
        assert_eq!(out[16 * 64 + t], u32::MAX, "every lane of thread {t}'s warp is in the kernel");
    }
}

/// The lane whose value a shuffle of `lane` reads, by the CUDA Programming Guide's words: up and
/// down stay in the lane's segment of `width` (the lanes they would leave it for keep their
/// own); xor reads an earlier segment but not a later one; the indexed one reads its source lane
/// modulo `width` in the lane's own segment.
fn shuffle_source(mode: i32, width: i32, b: i32, lane: i32) -> i32 {
    let segment = lane / width;
    match mode {
        0 if lane % width >= b => lane - b,
        1 if lane % width + b < width => lane + b,
        2 if (lane ^ b) / width <= segment => lane ^ b,
        3 => segment * width + b.rem_euclid(width),
        _ => lane,
    }
}

#[test]
fn shuffles_at_widths_8_and_16_read_cudas_source_lanes_at_the_segment_edges() {
    let (gpu, kernels) = backend(41);
    let mut configurations = Vec::new();
    for width in [8, 16, 32] {
        for (mode, b) in
            [(0, 1), (0, 3), (1, 2), (1, 5), (2, 1), (2, 4), (2, 8), (2, 16), (3, 3), (3, -1), (3, 37)]
        {
            configurations.extend([mode, width, b]);
        }
    }
    let count = (configurations.len() / 3) as u32;
    let offsets = gpu.upload(&configurations).unwrap();
    let mut out = gpu.zeros::<u32>(32 * count as usize).unwrap();
    launch(&gpu, kernels.shuffles, 1, 32, &mut [(&offsets).into(), (&mut out).into(), count.into()])
        .unwrap_or_else(|error| panic!("{error}"));
    let out = gpu.download::<u32>(&out).unwrap();
    for (c, config) in configurations.chunks(3).enumerate() {
        let (mode, width, b) = (config[0], config[1], config[2]);
        let expected: Vec<u32> =
            (0..32).map(|lane| 1000 + shuffle_source(mode, width, b, lane) as u32).collect();
        assert_eq!(out[32 * c..32 * (c + 1)], expected, "mode {mode}, width {width}, operand {b}");
    }
}

#[test]
fn shuffles_move_doubles_half_pairs_bf16_and_64_bit_words_whole() {
    let (gpu, kernels) = backend(43);
    let mut doubles = gpu.zeros::<f64>(32).unwrap();
    let mut pairs = gpu.zeros::<f16>(64).unwrap();
    let mut bfloats = gpu.zeros::<bf16>(32).unwrap();
    let mut wide = gpu.zeros::<u64>(32).unwrap();
    launch(
        &gpu,
        kernels.typed_shuffles,
        1,
        32,
        &mut [(&mut doubles).into(), (&mut pairs).into(), (&mut bfloats).into(), (&mut wide).into()],
    )
    .unwrap_or_else(|error| panic!("{error}"));
    let double_of = |lane: u32| 0.1 * f64::from(lane) + if lane == 5 { 1e300 } else { 0.0 };
    let expected: Vec<u64> = (0..32).map(|lane| double_of(31 - lane).to_bits()).collect();
    let got: Vec<u64> = gpu.download::<f64>(&doubles).unwrap().iter().map(|d| d.to_bits()).collect();
    assert_eq!(got, expected);
    let expected: Vec<f16> = (0..32)
        .flat_map(|lane| [f16::from_f32((lane ^ 3) as f32), f16::from_f32(-((lane ^ 3) as f32))])
        .collect();
    assert_eq!(gpu.download::<f16>(&pairs).unwrap(), expected);
    let expected: Vec<bf16> = (0..32u32)
        .map(|lane| {
            let source = if lane % 8 + 2 < 8 { lane + 2 } else { lane };
            bf16::from_f32(source as f32 + 0.5)
        })
        .collect();
    assert_eq!(gpu.download::<bf16>(&bfloats).unwrap(), expected);
    let expected: Vec<u64> =
        (0..32u64).map(|lane| 0x0123_4567_89ab_cdefu64.wrapping_mul(lane.saturating_sub(1) + 1)).collect();
    assert_eq!(gpu.download::<u64>(&wide).unwrap(), expected);
}

#[test]
fn a_vote_whose_mask_names_a_lane_that_returned_is_an_err_not_a_hang() {
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let (gpu, kernels) = backend(47);
        let mut out = gpu.zeros::<u32>(32).unwrap();
        let _ = send.send(launch(&gpu, kernels.vote_lane_missing, 1, 32, &mut [(&mut out).into()]));
    });
    let message = receive
        .recv_timeout(HANG)
        .expect("the launch neither finished nor failed: it hangs")
        .expect_err("a vote with lane 7 gone launched");
    assert!(message.contains("`warp::vote_lane_missing`"), "{message}");
    assert!(message.contains("__ballot_sync"), "{message}");
    assert!(message.contains("have returned") || message.contains("returned while lanes"), "{message}");
}

// ---- Device math. ----

/// erf by its Maclaurin series, for |x| < 2 (the largest term, near e^4, leaves 1e-14 of erfc(2)).
fn erf_series(x: f64) -> f64 {
    let (mut term, mut sum) = (x, x);
    for n in 1..200 {
        term *= -x * x / f64::from(n);
        sum += term / f64::from(2 * n + 1);
    }
    sum * std::f64::consts::FRAC_2_SQRT_PI
}

/// erfc by its continued fraction, for x >= 2: e^(-x²)/√π / (x + 1/2 / (x + 1 / (x + 3/2 / ...))).
fn erfc_fraction(x: f64) -> f64 {
    let mut tail = x;
    for k in (1..120).rev() {
        tail = x + f64::from(k) / 2.0 / tail;
    }
    (-x * x).exp() / std::f64::consts::PI.sqrt() / tail
}

fn erfc(x: f64) -> f64 {
    match x {
        x if x >= 2.0 => erfc_fraction(x),
        x if x <= -2.0 => 2.0 - erfc_fraction(-x),
        x => 1.0 - erf_series(x),
    }
}

fn erf(x: f64) -> f64 {
    if x.abs() < 2.0 { erf_series(x) } else { 1.0 - erfc(x) }
}

fn normcdf(x: f64) -> f64 {
    0.5 * erfc(-x / std::f64::consts::SQRT_2)
}

/// How many f32 values lie from `a` to `b` (both finite or equal).
fn ulps(a: f32, b: f32) -> u32 {
    let ordered = |x: f32| {
        let bits = x.to_bits() as i32;
        if bits < 0 { i32::MIN - bits } else { bits }
    };
    ordered(a).abs_diff(ordered(b))
}

/// Whether the increasing (or, `decreasing`, decreasing) function `f` crosses `target` within
/// `within` ulps of `r`: `r` is then within that many ulps of the exact inverse.
fn brackets(f: impl Fn(f64) -> f64, r: f32, target: f64, within: u32, decreasing: bool) -> bool {
    let (mut below, mut above) = (r, r);
    for _ in 0..within {
        (below, above) = (below.next_down(), above.next_up());
    }
    let (low, high) = (f(f64::from(below)), f(f64::from(above)));
    if decreasing { high <= target && target <= low } else { low <= target && target <= high }
}

#[test]
fn float_functions_are_exact_where_cuda_is_and_within_its_bounds_elsewhere() {
    let (gpu, kernels) = backend(53);
    let mut bits = Bits(0xf10a7);
    let mut x: Vec<f32> =
        (0..400).map(|_| (bits.next_u64() % 16_000_000) as f32 / 2_000_000.0 - 4.0).collect();
    x.extend((0..100).map(|_| bits.f32_any()));
    x.extend([
        0.0,
        0.5,
        1.0,
        -1.0,
        1.5,
        2.0,
        1.999_999_9,
        1e-30,
        1e-10,
        0.999_999_94,
        -0.999_999_94,
        7.0,
        1e30,
    ]);
    x.extend([2f32.powi(127), 3e38, -2f32.powi(127), f32::NAN, f32::INFINITY, -12.0, 85.0]);
    let n = x.len();
    let input = gpu.upload(&x).unwrap();
    let mut out = gpu.zeros::<f32>(12 * n).unwrap();
    launch(
        &gpu,
        kernels.float_functions,
        n.div_ceil(128) as u32,
        128,
        &mut [(&input).into(), (&mut out).into(), (n as u32).into()],
    )
    .unwrap_or_else(|error| panic!("{error}"));
    let out = gpu.download::<f32>(&out).unwrap();
    for (i, &v) in x.iter().enumerate() {
        let got = |f: usize| out[f * n + i];
        let wide = f64::from(v);
        if v.is_finite() {
            let reference = normcdf(wide) as f32;
            assert!(ulps(got(0), reference) <= 1, "normcdff({v}) = {} for {reference}", got(0));
        }
        // erfinvf and erfcinvf: within 1 ulp of the exact inverse (CUDA: 2 and 4).
        match v {
            v if v.abs() < 1.0 && v != 0.0 => {
                assert!(brackets(erf, got(1), wide, 1, false), "erfinvf({v}) = {}", got(1))
            }
            v if v.abs() == 1.0 => assert_eq!(got(1), f32::INFINITY.copysign(v)),
            0.0 => assert_eq!(got(1), 0.0),
            _ => assert!(got(1).is_nan(), "erfinvf({v}) = {}", got(1)),
        }
        if v > 0.0 && v < 2.0 && v != 1.0 {
            assert!(brackets(erfc, got(2), wide, 1, true), "erfcinvf({v}) = {}", got(2));
        }
        if v > 0.0 && v.is_finite() {
            let reference = (1.0 / wide.sqrt()) as f32;
            assert!(ulps(got(3), reference) <= 2, "rsqrtf({v}) = {} for {reference}", got(3));
            // __logf: CUDA's bound is 3 ulp outside [0.5, 2], an absolute 2^-21.41 inside.
            let reference = wide.ln();
            let bound = if (0.5..=2.0).contains(&v) {
                2f64.powf(-21.41)
            } else {
                3.0 * f64::from(ulp_of(reference as f32))
            };
            assert!(
                (f64::from(got(8)) - reference).abs() <= bound,
                "__logf({v}) = {} for {reference}",
                got(8)
            );
        }
        let saturated = if v.is_nan() || v <= 0.0 { 0.0 } else { v.min(1.0) };
        assert_eq!(got(4).to_bits(), saturated.to_bits(), "__saturatef({v})");
        assert_eq!(got(5).to_bits(), (1.0 / v).to_bits(), "__frcp_rn({v})");
        assert!(
            got(6).to_bits() == v.sqrt().to_bits() || (v.sqrt().is_nan() && got(6).is_nan()),
            "__fsqrt_rn({v})"
        );
        // __expf: CUDA's bound, 2 + floor(|1.173 x|) ulp, where the result is normal.
        let reference = wide.exp() as f32;
        if reference.is_normal() {
            let bound = 2 + (1.173 * v.abs()).floor() as u32;
            assert!(ulps(got(7), reference) <= bound, "__expf({v}) = {} for {reference}", got(7));
        }
        // __fdividef(1, y): 0 for 2^126 < |y| < 2^128, else within 2 ulp of 1 / y.
        if v.is_finite() && v.abs() > 2f32.powi(126) {
            assert_eq!(got(9), 0.0, "__fdividef(1, {v})");
        } else if v.is_finite() && v != 0.0 {
            assert!(ulps(got(9), 1.0 / v) <= 2, "__fdividef(1, {v}) = {}", got(9));
        }
        if v > 0.0 && v < 1.0 {
            assert!(brackets(normcdf, got(10), wide, 1, false), "normcdfinvf({v}) = {}", got(10));
        }
        // __sinf: CUDA's bound is an absolute 2^-21.41 on [-π, π].
        if v.abs() <= std::f32::consts::PI {
            assert!(
                (f64::from(got(11)) - wide.sin()).abs() <= 2f64.powf(-21.41),
                "__sinf({v}) = {}",
                got(11)
            );
        }
    }
}

/// The distance from `x` to the next f32 away from zero.
fn ulp_of(x: f32) -> f32 {
    x.abs().next_up() - x.abs()
}

/// The f32 results toward zero, up and down of an exact value known through `compare(r)`, how the
/// f32 `r` compares with it; `near` is within an ulp of it.
fn directed_roundings(near: f32, compare: impl Fn(f32) -> Ordering) -> [f32; 3] {
    let (down, up) = match compare(near) {
        Ordering::Equal => (near, near),
        Ordering::Greater => (near.next_down(), near),
        Ordering::Less => (near, near.next_up()),
    };
    assert!(
        compare(down) != Ordering::Greater && compare(up) != Ordering::Less,
        "{near} is not within an ulp"
    );
    [if down >= 0.0 { down } else { up }, up, down]
}

#[test]
fn directed_roundings_are_the_neighbours_of_the_exact_result() {
    let (gpu, kernels) = backend(59);
    let mut bits = Bits(0xd1ec7);
    let n = 2000;
    // Magnitudes in [2^-4, 2^4): every sum and product is exact in f64, so it compares exactly.
    let a: Vec<f32> = (0..n).map(|_| bits.f32_any()).collect();
    let b: Vec<f32> = (0..n).map(|_| bits.f32_any()).collect();
    let (a_buffer, b_buffer) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
    let mut out = gpu.zeros::<f32>(15 * n).unwrap();
    launch(
        &gpu,
        kernels.directed,
        (n as u32).div_ceil(128),
        128,
        &mut [(&a_buffer).into(), (&b_buffer).into(), (&mut out).into(), (n as u32).into()],
    )
    .unwrap_or_else(|error| panic!("{error}"));
    let out = gpu.download::<f32>(&out).unwrap();
    for i in 0..n {
        let (x, y) = (a[i], b[i]);
        let (wx, wy) = (f64::from(x), f64::from(y));
        let got = |op: usize| [out[3 * op * n + i], out[(3 * op + 1) * n + i], out[(3 * op + 2) * n + i]];
        let by_value = |exact: f64| move |r: f32| f64::from(r).total_cmp(&exact);
        assert_eq!(got(0), directed_roundings((wx + wy) as f32, by_value(wx + wy)), "{x} + {y}");
        assert_eq!(got(1), directed_roundings((wx * wy) as f32, by_value(wx * wy)), "{x} * {y}");
        // r against x / y: r * y against x, the order flipped for a negative y (r * y is exact).
        let quotient = |r: f32| {
            let order = (f64::from(r) * wy).total_cmp(&wx);
            if y < 0.0 { order.reverse() } else { order }
        };
        assert_eq!(got(2), directed_roundings((wx / wy) as f32, quotient), "{x} / {y}");
        if x > 0.0 {
            let root = |r: f32| (f64::from(r) * f64::from(r)).total_cmp(&wx);
            assert_eq!(got(3), directed_roundings(wx.sqrt() as f32, root), "sqrt {x}");
        } else {
            assert!(got(3).iter().all(|r| r.is_nan()), "sqrt {x}: {:?}", got(3));
        }
        let reciprocal = |r: f32| {
            let order = (f64::from(r) * wx).total_cmp(&1.0);
            if x < 0.0 { order.reverse() } else { order }
        };
        assert_eq!(got(4), directed_roundings((1.0 / wx) as f32, reciprocal), "1 / {x}");
    }
}

/// prmt.b32 in its default mode (PTX ISA), which __byte_perm compiles to: byte n of the result is
/// byte s[4n+2:4n] of y:x, or that byte's sign replicated where s[4n+3] is set.
fn byte_perm(x: u32, y: u32, s: u32) -> u32 {
    let bytes = [x.to_le_bytes(), y.to_le_bytes()].concat();
    let pick = |n: u32| {
        let selector = (s >> (4 * n)) & 0xf;
        let byte = bytes[(selector & 7) as usize];
        let byte = if selector & 8 != 0 { if byte & 0x80 != 0 { 0xff } else { 0 } } else { byte };
        u32::from(byte) << (8 * n)
    };
    (0..4).map(pick).fold(0, |r, b| r | b)
}

/// cvt from float to a 64-bit integer: a NaN is the type's 1 << 63, the rest saturate.
fn to_i64(x: f64, rounded: f64) -> u64 {
    if x.is_nan() { 1 << 63 } else { rounded as i64 as u64 }
}

#[test]
fn integer_intrinsics_and_conversions_are_bit_exact() {
    let (gpu, kernels) = backend(61);
    let mut bits = Bits(0xb17);
    let n = 1024;
    let mut a: Vec<u32> = (0..n).map(|_| bits.next_u64() as u32).collect();
    // Floats the conversions round at their edges: ties, near the bounds, the specials.
    let edges = [2.5f32, -2.5, 0.5, -0.5, 1.5, 2_147_483_520.0, 3e9, -3e9, 4e9, 1e19, -1e19, 0.0, -0.0];
    for (slot, edge) in
        a.iter_mut().zip(edges.into_iter().chain([f32::NAN, f32::INFINITY, f32::NEG_INFINITY]))
    {
        *slot = edge.to_bits();
    }
    for slot in &mut a[20..400] {
        *slot = ((bits.next_u64() % 100_000) as f32 / 16.0 - 3000.0).to_bits();
    }
    a[400] = 0;
    let b: Vec<u32> = (0..n).map(|_| bits.next_u64() as u32).collect();
    let c: Vec<u32> = (0..n)
        .map(|i| if i % 3 == 0 { (bits.next_u64() % 40) as u32 } else { bits.next_u64() as u32 })
        .collect();
    let mut w: Vec<u64> = (0..n).map(|_| bits.next_u64() >> (bits.next_u64() % 64)).collect();
    w[0] = 0;
    w[1] = f64::NAN.to_bits();
    w[2] = (-1e30f64).to_bits();
    w[3] = 12345.75f64.to_bits();
    let v: Vec<u64> = (0..n).map(|_| bits.next_u64()).collect();
    let uploads = [&a, &b, &c].map(|words| gpu.upload(words).unwrap());
    let (w_buffer, v_buffer) = (gpu.upload(&w).unwrap(), gpu.upload(&v).unwrap());
    let mut out = gpu.zeros::<u32>(18 * n).unwrap();
    let mut wide_out = gpu.zeros::<u64>(8 * n).unwrap();
    launch(
        &gpu,
        kernels.bit_functions,
        (n as u32).div_ceil(128),
        128,
        &mut [
            (&uploads[0]).into(),
            (&uploads[1]).into(),
            (&uploads[2]).into(),
            (&w_buffer).into(),
            (&v_buffer).into(),
            (&mut out).into(),
            (&mut wide_out).into(),
            (n as u32).into(),
        ],
    )
    .unwrap_or_else(|error| panic!("{error}"));
    let out = gpu.download::<u32>(&out).unwrap();
    let wide_out = gpu.download::<u64>(&wide_out).unwrap();
    for i in 0..n {
        let (x, y, z) = (a[i], b[i], c[i]);
        let f = f32::from_bits(x);
        let (left, right) = (z & 31, z & 31);
        let clamp = z.min(32);
        let shift_left = |s: u32| {
            if s == 0 {
                y
            } else if s == 32 {
                x
            } else {
                (y << s) | (x >> (32 - s))
            }
        };
        let shift_right = |s: u32| {
            if s == 0 {
                x
            } else if s == 32 {
                y
            } else {
                (x >> s) | (y << (32 - s))
            }
        };
        let dot = (0..4).fold(z, |sum: u32, k| {
            let (p, q) = ((x >> (8 * k)) as u8 as i8, (y >> (8 * k)) as u8 as i8);
            sum.wrapping_add((i32::from(p) * i32::from(q)) as u32)
        });
        let expected: [u32; 18] = [
            x.count_ones(),
            x.leading_zeros(),
            if x == 0 { 0 } else { x.trailing_zeros() + 1 },
            x.reverse_bits(),
            byte_perm(x, y, z),
            ((u64::from(x) * u64::from(y)) >> 32) as u32,
            ((i64::from(x as i32) * i64::from(y as i32)) >> 32) as u32,
            shift_left(left),
            shift_right(right),
            shift_left(clamp),
            shift_right(clamp),
            f.round_ties_even() as i32 as u32,
            f.trunc() as i32 as u32,
            f.ceil() as i32 as u32,
            f.floor() as i32 as u32,
            f.round_ties_even() as u32,
            dot,
            (x as i32).abs_diff(y as i32).wrapping_add(z),
        ];
        let got: Vec<u32> = (0..18).map(|k| out[k * n + i]).collect();
        assert_eq!(got, expected, "of {x:#010x}, {y:#010x}, {z:#010x} (as float {f})");
        let (p, q) = (w[i], v[i]);
        let double = f64::from_bits(p);
        let expected: [u64; 8] = [
            u64::from(p.count_ones()),
            u64::from(p.leading_zeros()),
            if p == 0 { 0 } else { u64::from(p.trailing_zeros() + 1) },
            p.reverse_bits(),
            ((u128::from(p) * u128::from(q)) >> 64) as u64,
            ((i128::from(p as i64) * i128::from(q as i64)) >> 64) as u64,
            to_i64(f64::from(f), f64::from(f.round_ties_even())),
            to_i64(double, double.trunc()),
        ];
        let got: Vec<u64> = (0..8).map(|k| wide_out[k * n + i]).collect();
        assert_eq!(got, expected, "of {p:#018x}, {q:#018x} (as float {f}, as double {double})");
    }
}

#[test]
fn cuda_std_numeric_limits_of_the_16_bit_floats_are_libcuxxs() {
    let (gpu, kernels) = backend(67);
    let mut out = gpu.zeros::<u32>(17).unwrap();
    launch(&gpu, kernels.limits, 1, 1, &mut [(&mut out).into()]).unwrap_or_else(|error| panic!("{error}"));
    let half = [
        f16::MAX,
        f16::MIN_POSITIVE,
        f16::MIN,
        f16::EPSILON,
        f16::INFINITY,
        f16::NAN,
        f16::MIN_POSITIVE_SUBNORMAL,
    ];
    let brain = [
        bf16::MAX,
        bf16::MIN_POSITIVE,
        bf16::MIN,
        bf16::EPSILON,
        bf16::INFINITY,
        bf16::NAN,
        bf16::MIN_POSITIVE_SUBNORMAL,
    ];
    let mut expected: Vec<u32> = half.iter().map(|h| u32::from(h.to_bits())).collect();
    expected.extend(brain.iter().map(|h| u32::from(h.to_bits())));
    expected.extend([f16::MANTISSA_DIGITS, bf16::MANTISSA_DIGITS, f32::MANTISSA_DIGITS]);
    assert_eq!(gpu.download::<u32>(&out).unwrap(), expected);
}
