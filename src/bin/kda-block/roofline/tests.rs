//! Tests of the roofline model.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use kda::cases::{Access, BufferArg, CaseArg, KernelCase};
use kda_runtime::LaunchGeometry;
use kda_runtime::record::RecordedArg;

use super::record::launched_entry;
use super::*;

/// Whether the launch case that `scalars` describes (its integer scalars by name) has `launch`'s
/// sizes: the same value for every integer scalar but `slots`, the capacity of a decode pool,
/// which sets no work (a step touches the b slots its rows name).
fn same_sizes(launch: &LaunchModel, scalars: &[(&'static str, u64)]) -> bool {
    let mine: Vec<(&str, u64)> = launch
        .args
        .iter()
        .filter_map(|arg| match arg {
            LaunchArg::Int { name, value } if *name != "slots" => Some((*name, *value)),
            _ => None,
        })
        .collect();
    let theirs: Vec<(&str, u64)> = scalars.iter().copied().filter(|(name, _)| *name != "slots").collect();
    mine == theirs
}

/// The model at `glm5-flash`, built once for every test that reads it.
fn glm5() -> &'static RooflineReport {
    static MODEL: OnceLock<RooflineReport> = OnceLock::new();
    MODEL.get_or_init(|| model(&KdaGeometry::glm5_flash(), PREFILL_TOKENS, &[]).unwrap())
}

fn fields(scenario: &ScenarioModel) -> Vec<&'static str> {
    scenario.launches.iter().map(|launch| launch.field()).collect()
}

const DENSE: [&str; 4] = ["gemm", "gemm_splitk", "gemv", "gemv_batchm"];

#[test]
fn the_scenarios_are_decode_at_1_and_64_and_a_prefill_of_4096() {
    let scenarios: Vec<Scenario> = glm5().scenarios.iter().map(|s| s.scenario).collect();
    assert_eq!(
        scenarios,
        [Scenario::Decode { batch: 1 }, Scenario::Decode { batch: 64 }, Scenario::Prefill { tokens: 4096 }]
    );
}

#[test]
fn the_decode_gemv_of_the_stacked_input_projections_moves_their_weights_once() {
    let decode = &glm5().scenarios[0];
    // The block's first launch is every projection of the block input: x [1, 4096] · w [3·8192
    // (q | k | v) + 2·128 (f_a, g_a) + 64 (b_proj), 4096]ᵀ, all bf16.
    let input_proj = &decode.launches[0];
    assert_eq!((input_proj.field(), input_proj.shape().as_str()), ("gemv", "1×24896×4096"));
    let weight = 24896 * 4096 * 2;
    assert_eq!(weight, 203_948_032);
    assert_eq!(input_proj.bytes, weight + 4096 * 2 + 24896 * 2);
    assert_eq!(input_proj.flops, 2 * 24896 * 4096);
    assert_eq!(input_proj.bound(), Bound::Memory);
    let time = 204_006_016.0 / 4.8e12;
    assert!((input_proj.time() - time).abs() <= 1e-9 * time, "{}", input_proj.time());
    // The last is o_proj: x [1, 8192] · w [4096, 8192]ᵀ.
    let o_proj = decode.launches.last().unwrap();
    assert_eq!((o_proj.field(), o_proj.shape().as_str()), ("gemv", "1×4096×8192"));
    assert_eq!(o_proj.bytes, 4096 * 8192 * 2 + 8192 * 2 + 4096 * 2);
    // The prefill's stacked projections are one GEMM at m = 4096 on tensor cores, compute-bound.
    let prefill = &glm5().scenarios[2].launches[0];
    assert_eq!((prefill.field(), prefill.peak), ("gemm", Peak::TensorBf16));
    assert_eq!(prefill.bytes, (4096 * 4096 + 24896 * 4096 + 4096 * 24896) * 2);
    assert_eq!(prefill.flops, 2 * 4096 * 24896 * 4096);
    assert_eq!(prefill.bound(), Bound::Compute);
    let time = 2.0 * 4096.0 * 24896.0 * 4096.0 / 989e12;
    assert!((prefill.time() - time).abs() <= 1e-9 * time, "{}", prefill.time());
}

#[test]
fn the_recurrent_step_reads_and_writes_each_state_once() {
    for (scenario, b) in [(&glm5().scenarios[0], 1), (&glm5().scenarios[1], 64)] {
        let step = scenario.launches.iter().find(|l| l.field() == "recurrent_regs").unwrap();
        // qkv [b, 3·8192] bf16, the gate's g_raw [b, 8192] and b_raw [b, 64] bf16 with its
        // dt_bias [8192] and a_log [64] f32, the pool's b states [64, 128, 128] f32 read and
        // written, slot [b] u32, out [b, 8192] f32.
        let state = 64 * 128 * 128 * 4;
        let expected = b * (3 * 8192 * 2 + 8192 * 2 + 64 * 2 + 2 * state + 4 + 8192 * 4) + (8192 + 64) * 4;
        assert_eq!(step.bytes, expected, "B = {b}");
        // Per (row, head): 7·128² + (4 + 6)·128 + 4 under the bounded law.
        assert_eq!(step.flops, b * 64 * 115_972, "B = {b}");
        assert_eq!(step.bound(), Bound::Memory);
    }
}

#[test]
fn decode_at_b_64_runs_the_gemm_and_at_b_1_the_gemv() {
    let [one, sixty_four, prefill] = &glm5().scenarios[..] else { panic!("three scenarios") };
    let dense = |scenario: &ScenarioModel| -> Vec<&'static str> {
        fields(scenario).into_iter().filter(|field| DENSE.contains(field)).collect()
    };
    // The stacked projections of the block input (q | k | v, f_a, g_a and b_proj in one product),
    // f_b and g_b (reading f_a's and g_a's columns in place), and o_proj; at B = 64 o_proj's 32
    // output tiles over K = 8192 split K in 8 (256 blocks), the rest have tiles enough or K too
    // short.
    assert_eq!(dense(one), ["gemv"; 4]);
    assert_eq!(dense(sixty_four), ["gemm", "gemm", "gemm", "gemm_splitk"]);
    assert_eq!(dense(prefill), ["gemm"; 4]);
    for launch in sixty_four.launches.iter().filter(|l| DENSE.contains(&l.field())) {
        assert_eq!(launch.scalar("m"), Some(64));
    }
    let o_proj = &sixty_four.launches[sixty_four.launches.len() - 2..];
    assert_eq!((o_proj[0].shape().as_str(), o_proj[1].shape().as_str()), ("64×4096×8192/8", "64×4096/8"));
    // The partial sums: 8 × 64 × 4096 f32, written once and read once; the reduce's 7 adds each.
    let partials = 8 * 64 * 4096 * 4;
    assert_eq!(o_proj[0].bytes, (64 * 8192 + 4096 * 8192) * 2 + partials);
    assert_eq!(o_proj[1].bytes, partials + 64 * 4096 * 2);
    assert_eq!((o_proj[0].flops, o_proj[1].flops), (2 * 64 * 4096 * 8192, 7 * 64 * 4096));
    assert_eq!(o_proj[0].peak, Peak::TensorBf16);
    // Decode uses the shared-memory recurrent step, prefill the chunk pair.
    assert!(fields(one).contains(&"recurrent_regs") && fields(sixty_four).contains(&"recurrent_regs"));
    assert!(fields(prefill).contains(&"chunk_scan") && !fields(prefill).contains(&"recurrent_regs"));
}

#[test]
fn totals_are_the_sums_of_the_rows() {
    for scenario in &glm5().scenarios {
        let bytes: u64 = scenario.launches.iter().map(|l| l.bytes).sum();
        let flops: u64 = scenario.launches.iter().map(|l| l.flops).sum();
        let peak = |l: &LaunchModel| match l.field() {
            "gemm" | "gemm_splitk" => 989e12,
            "chunk_scan" => 494.7e12 / 3.0,
            _ => 67e12,
        };
        let time: f64 =
            scenario.launches.iter().map(|l| (l.bytes as f64 / 4.8e12).max(l.flops as f64 / peak(l))).sum();
        assert_eq!((scenario.bytes(), scenario.flops()), (bytes, flops), "{}", scenario.scenario);
        assert!((scenario.time() - time).abs() <= 1e-9 * time, "{}", scenario.scenario);
        let by_kernel: f64 = scenario.by_kernel().iter().map(|(_, time)| time).sum();
        assert!((by_kernel - time).abs() <= 1e-9 * time);
    }
    let text = glm5().to_string();
    assert!(text.starts_with("roofline of one layer, model (no device)"), "{text}");
    assert_eq!(text.matches("  total: ").count(), 3, "{text}");
}

/// The launches of a direct run of the block as the model describes them, compared one by one.
fn assert_same_launches(model: &[LaunchModel], recorded: &[RecordedLaunch], what: &str) {
    assert_eq!(model.len(), recorded.len(), "{what}: launch count");
    for (index, (launch, seen)) in model.iter().zip(recorded).enumerate() {
        let entry = launched_entry(&seen.module, &seen.entry).unwrap();
        assert_eq!(launch.entry, entry, "{what}: launch {index}");
        assert_eq!(launch.args.len(), seen.args.len(), "{what}: launch {index}");
        for (arg, seen) in launch.args.iter().zip(&seen.args) {
            let same = match (arg, seen) {
                (
                    LaunchArg::Buffer { dtype, len, writable, .. },
                    RecordedArg::Buffer { dtype: d, len: l, writable: w },
                ) => (dtype, *len, writable) == (d, *l as u64, w),
                (LaunchArg::Int { value, .. }, RecordedArg::Scalar(v)) => {
                    v.get::<u32>().map(u64::from) == Some(*value)
                }
                (LaunchArg::F32 { value, .. }, RecordedArg::Scalar(v)) => {
                    v.get::<f32>().map(f32::to_bits) == Some(value.to_bits())
                }
                _ => false,
            };
            assert!(same, "{what}: launch {index} (`{}`): {arg:?} vs {seen:?}", launch.field());
        }
    }
}

#[test]
fn the_model_is_the_block_run_at_the_real_head_count() {
    // At `mid` (8 heads of 64) the block runs at full size on the recording backend in a moment: the model
    // extrapolated from 1, 2 and 3 heads must be that run, launch by launch, value by value.
    let geometry = KdaGeometry::mid();
    let scenarios = Scenario::all(PREFILL_TOKENS);
    let report = model(&geometry, PREFILL_TOKENS, &[]).unwrap();
    let direct = record(&geometry, &scenarios, &[]).unwrap();
    for ((scenario, modelled), recorded) in scenarios.iter().zip(&report.scenarios).zip(&direct) {
        assert_eq!(modelled.scenario, *scenario);
        assert_same_launches(&modelled.launches, recorded, &scenario.to_string());
    }
    // Decode at any B: 3 front-end launches (the stacked projections, f_b, g_b), the conv, the
    // recurrent step (which takes the gate and beta), the norm and o_proj; prefill the front end
    // and 5 more (the conv into q, k and v, the chunk pair, the norm and o_proj). At glm5-flash the same,
    // but that o_proj splits K at B = 64: one launch more (no product of `mid` splits).
    let counts: Vec<usize> = report.scenarios.iter().map(|s| s.launches.len()).collect();
    assert_eq!(counts, [7, 7, 8]);
    let unsplit = |scenario: &ScenarioModel| -> Vec<&'static str> {
        let fields = fields(scenario).into_iter().filter(|field| *field != "gemm_reduce");
        fields.map(|field| if field == "gemm_splitk" { "gemm" } else { field }).collect()
    };
    for (mid, glm5) in report.scenarios.iter().zip(&glm5().scenarios) {
        assert_eq!(fields(mid), unsplit(glm5), "{}", mid.scenario);
    }
    let glm5_counts: Vec<usize> = glm5().scenarios.iter().map(|s| s.launches.len()).collect();
    assert_eq!(glm5_counts, [7, 8, 8]);
}

#[test]
fn bytes_are_the_launch_cases_bytes_moved_where_the_sizes_match() {
    // At `tiny`, B = 2 (two live rows: the cases skip none below 3) and T = 64 (two whole
    // chunks, no padding): every launch with a case of its sizes moves the case's bytes, so
    // the read-write and touched-prefix rules agree with the cases'.
    let geometry = KdaGeometry::tiny();
    let report =
        model_scenarios(&geometry, &[Scenario::Decode { batch: 2 }, Scenario::Prefill { tokens: 64 }], &[])
            .unwrap();
    let mut compared = BTreeSet::new();
    for (scenario, t) in report.scenarios.iter().zip([2, 64]) {
        let cases = KernelCase::all(&geometry, t, 3).unwrap();
        for launch in &scenario.launches {
            let scalars = |case: &KernelCase| -> Vec<(&'static str, u64)> {
                case.args()
                    .iter()
                    .filter_map(|arg| match arg {
                        CaseArg::U32 { name, value } => Some((*name, u64::from(*value))),
                        _ => None,
                    })
                    .collect()
            };
            let Some(case) =
                cases.iter().find(|c| c.field() == launch.field() && same_sizes(launch, &scalars(c)))
            else {
                continue;
            };
            assert_eq!(
                launch.bytes,
                case.bytes_moved(),
                "{}: {} ({})",
                scenario.scenario,
                launch.field(),
                launch.shape()
            );
            compared.insert(launch.field());
        }
    }
    let expected = [
        "chunk_prepare",
        "chunk_scan",
        "conv_decode",
        "conv_prefill",
        "gemm",
        "gemv_batchm",
        "o_norm",
        "recurrent_regs",
    ];
    assert_eq!(compared.into_iter().collect::<Vec<_>>(), expected);
}

#[test]
fn the_read_write_buffers_are_the_cases_in_place_ones() {
    let mut in_place: Vec<(Glm5NextKdaEntry, &str)> = KernelCase::all(&KdaGeometry::tiny(), 3, 1)
        .unwrap()
        .iter()
        .flat_map(|case| {
            case.args().iter().filter_map(|arg| match arg {
                CaseArg::Buffer(BufferArg { name, access: Access::ReadWrite(_), .. }) => {
                    Some((case.table_entry(), *name))
                }
                _ => None,
            })
        })
        .collect();
    let mut listed = READ_WRITE.to_vec();
    in_place.sort();
    listed.sort();
    assert_eq!(listed, in_place);
}

#[test]
fn every_kernel_of_the_table_has_a_flop_count() {
    for case in KernelCase::all(&KdaGeometry::tiny(), 40, 1).unwrap() {
        let args = case
            .args()
            .iter()
            .map(|arg| match arg {
                CaseArg::Buffer(BufferArg { name, data, access, .. }) => LaunchArg::Buffer {
                    name,
                    dtype: data.dtype(),
                    len: data.len() as u64,
                    writable: *access != Access::Read,
                },
                CaseArg::Slice { name, data, range } => {
                    LaunchArg::Buffer { name, dtype: data.dtype(), len: range.len() as u64, writable: false }
                }
                CaseArg::U32 { name, value } => LaunchArg::Int { name, value: u64::from(*value) },
                CaseArg::F32 { name, value } => LaunchArg::F32 { name, value: *value },
            })
            .collect();
        let launch = LaunchModel::new(case.table_entry(), args).unwrap();
        let moves_only = case.table_entry() == Glm5NextKdaEntry::fill;
        assert_eq!(launch.flops == 0, moves_only, "{}: {} FLOPs", case.field(), launch.flops);
        assert!(launch.bytes > 0, "{}", case.field());
    }
    assert!(matches!(
        LaunchModel::new(Glm5NextKdaEntry::gemm, vec![LaunchArg::Int { name: "m", value: 1 }]),
        Err(RooflineError::NoModel { field: "gemm", param: "n" })
    ));
}

#[test]
fn the_chunk_pair_counts_follow_their_derivation() {
    // glm5-flash, T = 4096: 64 chunks of 64 positions, 64 heads of 128. By hand, per (chunk,
    // head): prepare 64·(6·128 + 3) + 1 + 11·64·128 + 2016·642 + 2·41664 + 2080·897 + 128
    // = 3,382,945 (its gates and betas under the bounded law first) and scan
    // 6·64·128² + 2·64·128 + 2·2080·128 + 2·128² = 6,873,088.
    let prefill = &glm5().scenarios[2];
    let flops = |field| prefill.launches.iter().find(|l| l.field() == field).unwrap().flops;
    assert_eq!(flops("chunk_prepare"), 64 * 64 * 3_382_945);
    assert_eq!(flops("chunk_scan"), 64 * 64 * 6_873_088);
    // The scan's products run on the tf32 tensor cores, three to an f32 product: compute-bound
    // at 494.7 / 3 TFLOPS, where prepare stays on the f32 CUDA cores.
    let scan = prefill.launches.iter().find(|l| l.field() == "chunk_scan").unwrap();
    assert_eq!((scan.peak, scan.bound()), (Peak::TensorTf32Split, Bound::Compute));
    let time = 64.0 * 64.0 * 6_873_088.0 * 3.0 / 494.7e12;
    assert!((scan.time() - time).abs() <= 1e-9 * time, "{} s, not {time} s", scan.time());
    let prepare = prefill.launches.iter().find(|l| l.field() == "chunk_prepare").unwrap();
    assert_eq!(prepare.peak, Peak::F32);
}

#[test]
fn absent_optional_kernels_are_absent_from_the_model() {
    let geometry = KdaGeometry::tiny();
    let decode = [Scenario::Decode { batch: 2 }];
    let full = model_scenarios(&geometry, &decode, &[]).unwrap();
    assert!(fields(&full.scenarios[0]).contains(&"gemv_batchm"));
    assert!(fields(&full.scenarios[0]).contains(&"recurrent_regs"));
    let without = model_scenarios(
        &geometry,
        &decode,
        &[Glm5NextKdaEntry::gemv_batchm, Glm5NextKdaEntry::recurrent_regs],
    )
    .unwrap();
    let without = fields(&without.scenarios[0]);
    assert!(!without.contains(&"gemv_batchm") && without.contains(&"gemm"), "{without:?}");
    assert!(!without.contains(&"recurrent_regs") && without.contains(&"recurrent"), "{without:?}");
}

fn fill(n: u32, module: &str) -> RecordedLaunch {
    RecordedLaunch {
        stream: 0,
        module: module.to_owned(),
        entry: "kda_fill_f32".to_owned(),
        geometry: LaunchGeometry::linear(n, 256),
        args: vec![
            RecordedArg::Buffer { dtype: DType::F32, len: n as usize, writable: true },
            RecordedArg::from(n),
            RecordedArg::from(0.0f32),
        ],
    }
}

#[test]
fn sizes_off_the_line_through_1_and_2_heads_are_refused() {
    let scenario = Scenario::Decode { batch: 1 };
    let run = |n| vec![fill(n, "kda_layer_ops")];
    let (one, two, three) = (run(64), run(128), run(192));
    let launches = extrapolate(&scenario, [&one, &two, &three], 64).unwrap();
    assert_eq!(launches[0].scalar("n"), Some(64 * 64));
    assert_eq!(launches[0].bytes, 64 * 64 * 4);
    let quadratic = run(64 * 9);
    let error = extrapolate(&scenario, [&one, &two, &quadratic], 64).unwrap_err();
    assert!(
        matches!(error, RooflineError::NotAffine { field: "fill", param: "dst", expected: 192, .. }),
        "{error}"
    );
    let other = vec![fill(192, "elsewhere")];
    assert!(matches!(
        extrapolate(&scenario, [&one, &two, &other], 64),
        Err(RooflineError::Drift { heads: 3, .. })
    ));
    assert!(matches!(
        extrapolate(&scenario, [&one, &two, &Vec::new()], 64),
        Err(RooflineError::Drift { .. })
    ));
}

#[test]
fn a_profile_of_the_block_sets_a_time_beside_every_launch_of_the_model() {
    // The CPU reference stands in for a device: the block it runs makes the model's launches, one
    // for one, each timed.
    let geometry = KdaGeometry::tiny();
    let gpu = kda::reference::backend();
    let timed = profile(&gpu, &geometry, &Scenario::all(64), 1).unwrap();
    let counts: Vec<usize> = timed.iter().map(Vec::len).collect();
    let report = model(&geometry, 64, &[]).unwrap().with_profile(&timed, &gpu.describe()).unwrap();
    let modelled: Vec<usize> = report.scenarios.iter().map(|s| s.launches.len()).collect();
    assert_eq!(counts, modelled);
    assert!(report.scenarios.iter().flat_map(|s| &s.launches).all(|launch| launch.measured.is_some()));
    let text = report.to_string();
    assert!(text.contains("beside each launch of the block on CPU reference backend"), "{text}");
    let all = format!("({} launches, each on its own)", modelled[2]);
    assert!(text.contains("measured µs  of roofline") && text.contains(&all), "{text}");

    // A target whose block launches other kernels than the model's is refused, naming both lists.
    let other = kda::reference::backend().without("kda_recurrent", "kda_recurrent_decode_bf16_regs");
    let timed = profile(&other, &geometry, &Scenario::all(64), 1).unwrap();
    let error = model(&geometry, 64, &[]).unwrap().with_profile(&timed, "other").unwrap_err();
    assert!(matches!(error, RooflineError::ProfileDrift { .. }), "{error}");
    let message = error.to_string();
    assert!(message.starts_with("decode step, B = 1: the block on the device launched ["), "{message}");
    assert!(message.contains("recurrent, ") && message.contains("recurrent_regs, "), "{message}");
}

#[test]
fn the_prefill_conv_reads_the_packed_rows_once_and_writes_q_k_and_v_once() {
    let prefill = &glm5().scenarios[2];
    let conv = prefill.launches.iter().find(|l| l.field() == "conv_prefill").unwrap();
    // glm5-flash, T = 4096: the state [3·8192, 4] f32 read and written, x [4096, 3·8192] and the
    // taps [3·8192, 4] bf16, q, k and v [4096, 8192] f32.
    let (t, dim) = (4096, 3 * 8192);
    assert_eq!(conv.bytes, 2 * dim * 4 * 4 + (t * dim + dim * 4) * 2 + 3 * t * 8192 * 4);
    // Per token: 12 per channel (4 taps, SiLU), 3 per q/k channel and 2 per q/k head (the norm).
    assert_eq!(conv.flops, t * (dim * 12 + 3 * 2 * 8192 + 2 * 128));
    assert_eq!(conv.bound(), Bound::Memory);
}
