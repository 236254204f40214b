use half::bf16;

use super::check::ulp;
use super::*;
use crate::geometry::GateLaw;

fn reference() -> (kda_runtime::cpu::CpuBackend, Glm5NextKdaKernels) {
    let gpu = crate::reference::backend();
    let kernels = Glm5NextKdaKernels::resolve(&gpu).unwrap();
    (gpu, kernels)
}

/// Geometries covering every head dim and both chunk sizes, and both gate laws.
fn geometries() -> [KdaGeometry; 3] {
    let tiny = KdaGeometry::tiny();
    [
        tiny,
        KdaGeometry { hidden: 96, heads: 2, head_dim: 64, chunk: 64, gate_law: GateLaw::Softplus, ..tiny },
        KdaGeometry { hidden: 128, heads: 1, head_dim: 128, chunk: 64, ..tiny },
    ]
}

#[test]
fn there_is_one_case_per_entry_of_the_table_in_manifest_order() {
    let cases = KernelCase::all(&KdaGeometry::tiny(), 5, 1).unwrap();
    let fields: Vec<_> = cases.iter().map(KernelCase::field).collect();
    let entries: Vec<_> = Glm5NextKdaKernels::ENTRIES.iter().map(|entry| entry.field).collect();
    assert_eq!(fields, entries);
    assert_eq!(cases.len(), Glm5NextKdaKernels::ENTRY_POINTS);
}

#[test]
fn each_case_launches_the_kernel_of_its_own_entry() {
    let (gpu, kernels) = reference();
    for case in KernelCase::all(&KdaGeometry::tiny(), 5, 1).unwrap() {
        let entry = case.entry();
        let expected = gpu.lookup(entry).unwrap();
        assert_eq!(case.kernel(&kernels), Some(expected), "{}", case.field());
    }
    // On a target without the optional entries, their cases have no kernel and say so.
    let lacking = crate::reference::backend()
        .without("dense_gemv_bf16_batchm", "dense_gemv_bf16_batchm")
        .without("kda_recurrent", "kda_recurrent_decode_bf16_regs");
    let kernels = Glm5NextKdaKernels::resolve(&lacking).unwrap();
    let case = KernelCase::new(Glm5NextKdaEntry::recurrent_regs, &KdaGeometry::tiny(), 1, 1).unwrap();
    assert_eq!(case.kernel(&kernels), None);
    match case.run(&lacking, &kernels) {
        Err(BackendError::Absent { entry }) => assert_eq!(*entry, *case.entry()),
        other => panic!("expected `Absent`, got {other:?}"),
    }
}

/// Launches `case` on a fresh preparation and returns the error, after checking that the refused
/// launch left every written buffer as it was uploaded.
fn refusal(case: &KernelCase) -> String {
    let (gpu, kernels) = reference();
    let mut prepared = case.prepare(&gpu).unwrap();
    let error = case.launch(&gpu, &kernels, &mut prepared).unwrap_err().to_string();
    for output in case.outputs(&gpu, &prepared).unwrap() {
        assert_eq!(output.data, case.buffer(output.name).unwrap().data, "`{}` after: {error}", output.name);
    }
    error
}

#[test]
fn every_case_names_its_arguments_as_the_manifest_names_the_params() {
    for case in KernelCase::all(&KdaGeometry::tiny(), 5, 1).unwrap() {
        case.check_params().unwrap_or_else(|error| panic!("{error}"));
        let params = case.entry().signature.unwrap().params.iter().map(|param| param.name);
        assert!(params.eq(case.args().iter().map(CaseArg::name)), "{}", case.field());
    }
}

#[test]
fn a_case_that_drifted_from_the_manifest_is_refused_before_it_launches() {
    let gemv = KernelCase::new(Glm5NextKdaEntry::gemv, &KdaGeometry::tiny(), 1, 1).unwrap();
    // Permuted buffers: each is of the other's kind, so only the names tell them apart.
    let mut swapped = gemv.clone();
    swapped.args.swap(0, 1);
    assert_eq!(
        refusal(&swapped),
        "`glm5next_kda.gemv.x`: expected the case argument `const bf16[k] x`, found `const bf16[4096] w`"
    );
    // Permuted scalars, of one type too.
    let mut swapped = gemv.clone();
    swapped.args.swap(3, 4);
    assert_eq!(refusal(&swapped), "`glm5next_kda.gemv.n`: expected the case argument `u32 n`, found `u32 k`");
    // The right name on the wrong kind: `y` read only.
    let mut read_only = gemv.clone();
    if let CaseArg::Buffer(y) = &mut read_only.args[2] {
        y.access = Access::Read;
    }
    assert_eq!(
        refusal(&read_only),
        "`glm5next_kda.gemv.y`: expected the case argument `bf16[n] y`, found `const bf16[64] y`"
    );
    // A parameter without an argument, and an argument without a parameter.
    let mut short = gemv.clone();
    short.args.pop();
    assert_eq!(refusal(&short), "`glm5next_kda.gemv.k`: expected the case argument `u32 k`, found none");
    let mut long = gemv;
    long.args.push(CaseArg::u32("extra", 1));
    assert!(refusal(&long).starts_with("`glm5next_kda.gemv`: expected 5 (const bf16[k] x, "), "drift");
}

#[test]
fn every_case_runs_on_the_reference_and_writes_finite_nonzero_outputs() {
    let (gpu, kernels) = reference();
    for geometry in geometries() {
        for t in [1, 45, 64] {
            for case in KernelCase::all(&geometry, t, 3).unwrap() {
                let what = format!("{} at {geometry}, t = {t}", case.field());
                let outputs = case.run(&gpu, &kernels).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(!outputs.is_empty(), "{what}: writes nothing");
                for output in outputs {
                    let what = format!("{what}, `{}`", output.name);
                    let before = &case.buffer(output.name).unwrap().data;
                    assert!(output.data.is_finite(), "{what}: not finite");
                    assert!(!output.data.is_all_zero(), "{what}: all zero");
                    assert_ne!(output.data.bits()[..output.used], before.bits()[..output.used], "{what}");
                    // The reference agrees with itself under every output's check.
                    output.compare(&output).unwrap_or_else(|e| panic!("{what}: {e}"));
                }
            }
        }
    }
}

#[test]
fn inputs_are_at_the_scales_the_block_feeds_the_kernels() {
    let geometry = KdaGeometry::tiny();
    let (t, d) = (45, geometry.head_dim as usize);
    let real = t * geometry.qkv() as usize;
    let scan = KernelCase::new(Glm5NextKdaEntry::chunk_scan, &geometry, t as u32, 9).unwrap();
    let prepare = KernelCase::new(Glm5NextKdaEntry::chunk_prepare, &geometry, t as u32, 9).unwrap();
    let f32s = |case: &KernelCase, name| case.buffer(name).unwrap().data.as_f32().unwrap().to_vec();
    for name in ["q", "k"] {
        let values = f32s(&prepare, name);
        assert_eq!(values.len(), 64 * geometry.qkv() as usize, "padded to whole chunks");
        for head in values[..real].chunks(d) {
            let norm = head.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-2, "{name}: |head| = {norm}");
        }
        assert!(values[real..].iter().all(|&x| x == POISON), "{name}: padding poisoned");
    }
    // The scan gets the reference prepare's outputs, their padding poisoned again.
    let (gpu, kernels) = reference();
    let prepared = prepare.run(&gpu, &kernels).unwrap();
    for name in ["qdec", "kdec", "u", "w"] {
        let output = prepared.iter().find(|output| output.name == name).unwrap();
        let values = f32s(&scan, name);
        assert_eq!(output.data.as_f32().unwrap()[..real], values[..real], "{name}");
        assert!(values[real..].iter().all(|&x| x == POISON), "{name}: padding poisoned");
    }
    let sdec = prepared.iter().find(|output| output.name == "sdec").unwrap();
    assert_eq!(sdec.data.as_f32().unwrap(), f32s(&scan, "sdec"));
    // The gate's raw inputs: a bias of its own per channel, β's projection its stacked width apart.
    let dt_bias = f32s(&prepare, "dt_bias");
    for head in dt_bias.chunks(d) {
        assert!(head[..d - 1].iter().all(|&b| (-8.0..0.0).contains(&b)) && head[d - 1] == 100.0);
    }
    let b_raw = prepare.buffer("b_raw").unwrap().data.as_bf16().unwrap();
    assert_eq!(b_raw.len(), (t - 1) * InputProjection::stacked_width(&geometry) as usize + 2);
    assert!(f32s(&scan, "state").iter().any(|&x| x != 0.0));

    // recurrent and recurrent_regs launch on the same inputs; q and k are unit heads.
    let recurrent = KernelCase::new(Glm5NextKdaEntry::recurrent, &geometry, 1, 9).unwrap();
    let regs = KernelCase::new(Glm5NextKdaEntry::recurrent_regs, &geometry, 1, 9).unwrap();
    assert_eq!(recurrent.args(), regs.args());
    let qkv = recurrent.buffer("qkv").unwrap().data.as_bf16().unwrap();
    let qk = 2 * geometry.qkv() as usize;
    for head in qkv[..qk].chunks(d) {
        let norm = head.iter().map(|x| x.to_f32().powi(2)).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-2, "q and k: |head| = {norm}");
    }
    // Different seeds draw different inputs; the same seed the same.
    assert_eq!(
        KernelCase::new(Glm5NextKdaEntry::gemv, &geometry, 1, 9).unwrap().args(),
        KernelCase::new(Glm5NextKdaEntry::gemv, &geometry, 1, 9).unwrap().args()
    );
    assert_ne!(
        KernelCase::new(Glm5NextKdaEntry::gemv, &geometry, 1, 9).unwrap().args(),
        KernelCase::new(Glm5NextKdaEntry::gemv, &geometry, 1, 10).unwrap().args()
    );
}

#[test]
fn bytes_moved_counts_each_input_and_output_once_and_states_twice() {
    let tiny = KdaGeometry::tiny();
    // gemv: x [64], w [64, 64], y [64], bf16.
    assert_eq!(
        KernelCase::new(Glm5NextKdaEntry::gemv, &tiny, 7, 1).unwrap().bytes_moved(),
        (64 + 64 * 64 + 64) * 2
    );
    // recurrent, a batch of 7 of which 5 rows update a slot (one repeats a slot, one is past the
    // pool): qkv [7, 192], g_raw [7, 64] and b_raw [7, 2] (of rows the stacked width apart)
    // bf16; dt_bias [64], a_log [2], 5 slots of [2, 32, 32] twice, slot [7] u32, out [7, 64] f32.
    let recurrent = (7 * 192 + 7 * 64 + 7 * 2) * 2 + (64 + 2 + 2 * 5 * 2 * 32 * 32 + 7 + 7 * 64) * 4;
    assert_eq!(KernelCase::new(Glm5NextKdaEntry::recurrent, &tiny, 7, 1).unwrap().bytes_moved(), recurrent);
    // fill of t = 7 real rows of a padded buffer: 7 · 64 f32 written.
    assert_eq!(KernelCase::new(Glm5NextKdaEntry::fill, &tiny, 7, 1).unwrap().bytes_moved(), 7 * 64 * 4);
    // conv_prefill, 7 tokens of 192 channels: state [192, 4] f32 twice, x [7, 192] and weight
    // [192, 4] bf16, the 7 real rows of q, k and v [·, 64] f32.
    let conv = 2 * 192 * 4 * 4 + (7 * 192 + 192 * 4) * 2 + 3 * 7 * 64 * 4;
    assert_eq!(KernelCase::new(Glm5NextKdaEntry::conv_prefill, &tiny, 7, 1).unwrap().bytes_moved(), conv);
}

#[test]
fn a_prepared_case_launches_repeatedly_carrying_its_state() {
    let (gpu, kernels) = reference();
    let case = KernelCase::new(Glm5NextKdaEntry::conv_decode, &KdaGeometry::tiny(), 1, 2).unwrap();
    let once = case.run(&gpu, &kernels).unwrap();
    let mut prepared = case.prepare(&gpu).unwrap();
    case.launch(&gpu, &kernels, &mut prepared).unwrap();
    assert_eq!(case.outputs(&gpu, &prepared).unwrap(), once);
    case.launch(&gpu, &kernels, &mut prepared).unwrap();
    let twice = case.outputs(&gpu, &prepared).unwrap();
    assert_ne!(twice[0].data, once[0].data, "the conv window moved on");
}

#[test]
fn batchm_rows_become_gemv_cases_with_the_same_weight() {
    let (gpu, kernels) = reference();
    let batchm = KernelCase::new(Glm5NextKdaEntry::gemv_batchm, &KdaGeometry::tiny(), 5, 4).unwrap();
    let batched = batchm.run(&gpu, &kernels).unwrap().remove(0);
    let n = 64;
    for i in 0..5 {
        let row = batchm.gemv_row(i).unwrap();
        assert_eq!(row.field(), "gemv");
        assert_eq!(row.buffer("w"), batchm.buffer("w"));
        let y = row.run(&gpu, &kernels).unwrap().remove(0);
        let i = i as usize;
        assert_eq!(y.data.bits(), batched.data.bits()[i * n..(i + 1) * n]);
    }
    assert!(batchm.gemv_row(5).is_none());
    assert!(
        KernelCase::new(Glm5NextKdaEntry::gemv, &KdaGeometry::tiny(), 5, 4).unwrap().gemv_row(0).is_none()
    );
}

#[test]
fn the_entry_enum_is_the_table_in_manifest_order() {
    assert_eq!(Glm5NextKdaEntry::ALL.len(), Glm5NextKdaKernels::ENTRY_POINTS);
    for (index, entry) in Glm5NextKdaEntry::ALL.into_iter().enumerate() {
        assert_eq!(entry.index(), index);
        assert_eq!(*entry.entry(), Glm5NextKdaKernels::ENTRIES[index]);
        assert_eq!(Glm5NextKdaEntry::from_field(entry.field()), Some(entry));
    }
    let gpu = crate::reference::backend().without("kda_recurrent", "kda_recurrent_decode_bf16_regs");
    let kernels = Glm5NextKdaKernels::resolve(&gpu).unwrap();
    assert_eq!(kernels.handle(Glm5NextKdaEntry::gemm), Some(kernels.gemm));
    assert_eq!(kernels.handle(Glm5NextKdaEntry::recurrent_regs), None);
}

#[test]
fn cases_refuse_what_the_kernels_cannot_run() {
    let tiny = KdaGeometry::tiny();
    assert!(matches!(KernelCase::all(&tiny, 0, 1), Err(CaseError::NoTokens)));
    // An entry the table lacks has no variant to name (the compiler refuses it); a dense case
    // of an entry that is not a dense product is refused here.
    assert_eq!(Glm5NextKdaEntry::from_field("nope"), None);
    let not_dense = KernelCase::dense(Glm5NextKdaEntry::fill, (1, 1, 1), 1, 0, 1);
    assert!(matches!(not_dense, Err(CaseError::Dense(ref why)) if why.contains("not a dense product")));
    let bad = KdaGeometry { head_dim: 48, ..tiny };
    assert!(matches!(KernelCase::all(&bad, 1, 1), Err(CaseError::Geometry(_))));
    assert!(matches!(
        KernelCase::all(&KdaGeometry::glm5_flash(), u32::MAX, 1),
        Err(CaseError::TooManyTokens(_))
    ));
}

fn bf16s(values: &[f32]) -> HostData {
    HostData::Bf16(bf16_vec(values))
}

/// `value` moved by `ulps` bf16 ulps (away from zero for positive `ulps`).
fn nudge(value: f32, ulps: i32) -> bf16 {
    bf16::from_bits((i32::from(bf16::from_f32(value).to_bits()) + ulps) as u16)
}

#[test]
fn checks_pass_what_the_abi_allows_and_fail_what_it_does_not() {
    let want: Vec<f32> = (1..=200).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
    let reference = bf16s(&want);
    let HostData::Bf16(exact) = reference.clone() else { unreachable!() };
    let n = exact.len();
    // At the peak, where two ulps exceed the dense check's floor of 2⁻⁸·rms.
    let at = (0..n).max_by(|&a, &b| want[a].abs().total_cmp(&want[b].abs())).unwrap();
    let mut one_ulp = exact.clone();
    one_ulp[at] = nudge(want[at], 1);
    let mut two_ulps = exact.clone();
    two_ulps[at] = nudge(want[at], 2);
    let one_ulp = HostData::Bf16(one_ulp);
    let two_ulps = HostData::Bf16(two_ulps);
    // Bit-exact only passes exact data.
    assert_eq!(Check::Exact.compare(&reference, &reference, n).unwrap().exact, n);
    assert!(Check::Exact.compare(&one_ulp, &reference, n).is_err());
    // One ulp passes the dense and rounded checks, two do not.
    for check in [Check::Dense, Check::Bf16Rounded] {
        let measured = check.compare(&one_ulp, &reference, n).unwrap();
        assert_eq!((measured.max_ulps, measured.exact), (1.0, n - 1), "{check}");
        assert_eq!((measured.first_difference, measured.largest_error_at), (Some(at), at), "{check}");
        assert!(check.compare(&two_ulps, &reference, n).is_err(), "{check}");
    }
    // Over 1 % of the elements off by one ulp fails the rounded check, not the dense one.
    let HostData::Bf16(mut many) = reference.clone() else { unreachable!() };
    (0..3).for_each(|i| many[i * 50] = nudge(want[i * 50], 1));
    let many = HostData::Bf16(many);
    assert!(Check::Bf16Rounded.compare(&many, &reference, n).is_err());
    assert!(Check::Dense.compare(&many, &reference, n).is_ok());
    // bf16 values widened to f32 (the prefill conv's outputs) are held to bf16 ulps.
    let widened = |data: &HostData| HostData::F32(data.to_f64().iter().map(|&x| x as f32).collect());
    let measured = Check::Bf16Rounded.compare(&widened(&one_ulp), &widened(&reference), n).unwrap();
    assert_eq!((measured.max_ulps, measured.exact), (1.0, n - 1));
    assert!(Check::Bf16Rounded.compare(&widened(&two_ulps), &widened(&reference), n).is_err());
    // Relative RMS on f32 data, and one element far off under a small RMS.
    let f32s = HostData::F32(want.clone());
    let off = HostData::F32(want.iter().map(|x| x * (1.0 + 2e-6)).collect());
    assert!(Check::RelativeRms(1e-5).compare(&off, &f32s, n).is_ok());
    assert!(Check::RelativeRms(1e-6).compare(&off, &f32s, n).is_err());
    // (A long buffer, where one element can hide in the RMS: ‖ref‖ ≈ 300, peak 3.)
    let long: Vec<f32> = (0..20_000).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
    let mut spike = long.clone();
    spike[3] += 0.1;
    let (long, spike) = (HostData::F32(long), HostData::F32(spike));
    let measured = Check::RelativeRms(1e-3).compare(&spike, &long, 20_000).unwrap_err();
    assert!(measured.measurement.unwrap().relative_rms < 1e-3);
    assert!(measured.reason.contains("·peak"), "{measured}");
}

#[test]
fn comparisons_of_nothing_or_against_nothing_fail() {
    let zeros = HostData::F32(vec![0.0; 8]);
    let ones = HostData::F32(vec![1.0; 8]);
    let nan = HostData::F32(vec![f32::NAN; 8]);
    for check in [Check::Exact, Check::Dense, Check::Bf16Rounded, Check::RelativeRms(1e-5)] {
        assert!(check.compare(&zeros, &zeros, 8).unwrap_err().reason.contains("all zero"), "{check}");
        assert!(check.compare(&ones, &ones, 0).unwrap_err().reason.contains("no element"), "{check}");
        assert!(check.compare(&nan, &nan, 8).unwrap_err().reason.contains("not finite"), "{check}");
        assert!(check.compare(&nan, &ones, 8).unwrap_err().reason.contains("8 of 8 results"), "{check}");
        assert!(check.compare(&ones, &HostData::F32(vec![1.0; 9]), 8).is_err(), "{check}");
        assert!(check.compare(&ones, &HostData::Bf16(vec![bf16::ONE; 8]), 8).is_err(), "{check}");
    }
}

#[test]
fn padding_must_come_back_untouched() {
    let reference = HostData::F32(vec![1.0, 2.0, POISON, POISON]);
    let touched = HostData::F32(vec![1.0, 2.0, POISON, 0.0]);
    let measured = Check::RelativeRms(1e-5).compare(&reference, &reference, 2).unwrap();
    assert_eq!((measured.elements, measured.padding), (2, 2));
    let error = Check::RelativeRms(1e-5).compare(&touched, &reference, 2).unwrap_err();
    assert!(error.reason.contains("1 of 2 padding values"), "{error}");
}

#[test]
fn ulps_are_the_gap_to_the_next_value_up() {
    assert_eq!(ulp(DType::Bf16, 1.0), 1.0 / 128.0);
    assert_eq!(ulp(DType::Bf16, -3.0), 1.0 / 64.0);
    assert_eq!(ulp(DType::F32, 1.0), f64::from(f32::EPSILON));
    assert_eq!(ulp(DType::Bf16, bf16::MAX.to_f64()), ulp(DType::Bf16, bf16::MAX.to_f64() / 2.0) * 2.0);
    assert!(ulp(DType::F32, 0.0) > 0.0);
}

#[test]
fn decode_cases_name_distinct_slots_of_a_larger_pool_and_two_rows_the_kernels_skip() {
    let tiny = KdaGeometry::tiny();
    for (t, b) in [(1, 1), (2, 2), (7, 7), (500, MAX_CASE_BATCH)] {
        let case = KernelCase::new(Glm5NextKdaEntry::conv_decode, &tiny, t, 3).unwrap();
        let slot = case.buffer("slot").unwrap().data.clone();
        let HostData::U32(slot) = slot else { panic!("slot is u32") };
        let capacity = case.u32_arg("slots").unwrap();
        assert_eq!((case.u32_arg("b"), slot.len()), (Some(b), b as usize), "t = {t}");
        assert_eq!(capacity, b + 2, "two slots no row names");
        let mut live: Vec<u32> = slot.iter().copied().filter(|&s| s < capacity).collect();
        if b >= 3 {
            assert_eq!(slot[1], slot[0], "row 1 repeats row 0's slot");
            assert_eq!(slot[b as usize - 1], capacity + 3, "the last row names a slot past the pool");
            live.remove(1);
        }
        let count = live.len();
        live.sort_unstable();
        live.dedup();
        assert_eq!(live.len(), count, "the other rows name distinct slots");
    }
}
