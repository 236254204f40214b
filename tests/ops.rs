//! `ops::dense_mm_bf16`: which kernel each row count launches, and that every path computes the
//! same product.

use half::bf16;
use kda::kernels::{Glm5NextKda, Glm5NextKdaKernels};
use kda::ops::dense_mm_bf16;
use kda::rng::SplitMix64;
use kda_runtime::record::{RecordedArg, RecordingBackend};
use kda_runtime::{BackendError, DType, GpuBackend, GpuBackendExt};

const N: u32 = 24;
const K: u32 = 40;

fn launched_for(gpu: &RecordingBackend, m: u32) -> (String, Vec<RecordedArg>) {
    let kernels = Glm5NextKdaKernels::resolve(gpu).unwrap();
    let x = gpu.alloc(DType::Bf16, (m * K) as usize).unwrap();
    let w = gpu.alloc(DType::Bf16, (N * K) as usize).unwrap();
    dense_mm_bf16(gpu, &kernels, &x, &w, (m, N, K)).unwrap();
    let launch = gpu.launches().pop().unwrap();
    (format!("{}::{}", launch.module, launch.entry), launch.args)
}

#[test]
fn one_row_runs_gemv() {
    let gpu = RecordingBackend::new().with_table::<Glm5NextKda>();
    let (kernel, args) = launched_for(&gpu, 1);
    assert_eq!(kernel, "gemv::dense_gemv_bf16");
    assert_eq!(&args[3..], [RecordedArg::from(N), RecordedArg::from(K)]);
    assert_eq!(args[2], RecordedArg::Buffer { dtype: DType::Bf16, len: N as usize, writable: true });
}

#[test]
fn two_to_sixteen_rows_run_batchm_where_the_target_has_it() {
    let gpu = RecordingBackend::new().with_table::<Glm5NextKda>();
    for m in [2, 9, 16] {
        let (kernel, args) = launched_for(&gpu, m);
        assert_eq!(kernel, "dense_gemv_bf16_batchm::dense_gemv_bf16_batchm", "m = {m}");
        assert_eq!(
            &args[3..],
            [RecordedArg::from(m), RecordedArg::from(N), RecordedArg::from(K), RecordedArg::from(K)]
        );
    }
}

#[test]
fn without_batchm_those_rows_run_gemm() {
    let gpu = RecordingBackend::new()
        .with_table::<Glm5NextKda>()
        .without("dense_gemv_bf16_batchm", "dense_gemv_bf16_batchm");
    for m in [2, 16] {
        assert_eq!(launched_for(&gpu, m).0, "gemm::dense_gemm_bf16", "m = {m}");
    }
    assert_eq!(launched_for(&gpu, 1).0, "gemv::dense_gemv_bf16");
}

#[test]
fn more_than_sixteen_rows_run_gemm() {
    let gpu = RecordingBackend::new().with_table::<Glm5NextKda>();
    let (kernel, args) = launched_for(&gpu, 17);
    assert_eq!(kernel, "gemm::dense_gemm_bf16");
    assert_eq!(
        &args[3..],
        [RecordedArg::from(17u32), RecordedArg::from(N), RecordedArg::from(K), RecordedArg::from(K)]
    );
}

/// `x · wᵀ` in f64 from the same bf16 values.
fn product_f64(x: &[bf16], w: &[bf16], m: usize) -> Vec<f64> {
    let (n, k) = (N as usize, K as usize);
    let mut y = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            y[i * n + j] = (0..k).map(|p| f64::from(x[i * k + p]) * f64::from(w[j * k + p])).sum();
        }
    }
    y
}

fn random_bf16(rng: &mut SplitMix64, len: usize) -> Vec<bf16> {
    rng.uniform_vec(len, 1.0).into_iter().map(bf16::from_f32).collect()
}

#[test]
fn every_path_computes_the_product_within_one_bf16_ulp_and_the_fallback_bit_for_bit() {
    let with_batchm = kda::reference::backend();
    let without_batchm =
        kda::reference::backend().without("dense_gemv_bf16_batchm", "dense_gemv_bf16_batchm");
    let mut rng = SplitMix64::new(11);
    let w = random_bf16(&mut rng, (N * K) as usize);
    for m in [1u32, 5, 16, 17] {
        let x = random_bf16(&mut rng, (m * K) as usize);
        let mut results = Vec::new();
        for gpu in [&with_batchm, &without_batchm] {
            let kernels = Glm5NextKdaKernels::resolve(gpu).unwrap();
            let y =
                dense_mm_bf16(gpu, &kernels, &gpu.upload(&x).unwrap(), &gpu.upload(&w).unwrap(), (m, N, K))
                    .unwrap();
            results.push(gpu.download::<bf16>(&y).unwrap());
        }
        assert_eq!(results[0], results[1], "m = {m}: batchm and its gemm fallback differ");
        for (got, exact) in results[0].iter().zip(product_f64(&x, &w, m as usize)) {
            // One bf16 ulp at the exact value, plus a floor for results near zero.
            let ulp = 2f64.powi(exact.abs().max(1e-3).log2().floor() as i32 - 7);
            assert!((f64::from(*got) - exact).abs() <= ulp + 1e-3, "m = {m}: {got} vs {exact}");
        }
    }
}

#[test]
fn dense_products_check_their_operands_before_allocating() {
    let gpu = RecordingBackend::new().with_table::<Glm5NextKda>();
    let kernels = Glm5NextKdaKernels::resolve(&gpu).unwrap();
    let x = gpu.alloc(DType::Bf16, 2 * 8).unwrap();
    let w = gpu.alloc(DType::Bf16, 4 * 8).unwrap();
    let floats = gpu.alloc(DType::F32, 2 * 8).unwrap();
    let allocated = gpu.allocations();
    let short = dense_mm_bf16(&gpu, &kernels, &x, &w, (3, 4, 8)).unwrap_err();
    assert!(matches!(&short, BackendError::Argument { param: "x", .. }), "{short}");
    assert!(short.to_string().contains("at least 3·8 = 24 bf16 elements"), "{short}");
    let wrong = dense_mm_bf16(&gpu, &kernels, &floats, &w, (2, 4, 8)).unwrap_err();
    assert!(matches!(wrong, BackendError::Argument { param: "x", .. }), "{wrong}");
    let narrow = dense_mm_bf16(&gpu, &kernels, &x, &w, (2, 5, 8)).unwrap_err();
    assert!(matches!(narrow, BackendError::Argument { param: "w", .. }), "{narrow}");
    assert_eq!(gpu.allocations(), allocated);
    assert!(gpu.launches().is_empty());
}

#[test]
fn one_row_of_few_tiles_over_a_long_k_splits_k_and_nothing_else_does() {
    // 20 rows of 128 columns (one output tile) over K = 2048: two ranges of 1024, the partial sums
    // added by the reduce; the same product without the pair, or over two rows of tiles, or a
    // shorter K, is one gemm.
    let (n, k) = (128, 2048);
    let launched = |gpu: &RecordingBackend, m: u32, k: u32| -> Vec<(String, Vec<RecordedArg>)> {
        let kernels = Glm5NextKdaKernels::resolve(gpu).unwrap();
        let x = gpu.alloc(DType::Bf16, (m * k) as usize).unwrap();
        let w = gpu.alloc(DType::Bf16, (n * k) as usize).unwrap();
        dense_mm_bf16(gpu, &kernels, &x, &w, (m, n, k)).unwrap();
        gpu.launches().into_iter().map(|l| (format!("{}::{}", l.module, l.entry), l.args)).collect()
    };
    let gpu = RecordingBackend::new().with_table::<Glm5NextKda>();
    let split = launched(&gpu, 20, k);
    let names: Vec<&str> = split.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["gemm::dense_gemm_bf16_splitk", "gemm::dense_gemm_splitk_reduce_bf16"]);
    let partial = RecordedArg::Buffer { dtype: DType::F32, len: 2 * 20 * 128, writable: true };
    assert_eq!(split[0].1[2], partial);
    assert_eq!(split[0].1[3..], [20, n, k, k, 2].map(RecordedArg::from));
    assert_eq!(split[1].1[2..], [20, n, 2].map(RecordedArg::from));
    for (gpu, m, k) in [
        (
            RecordingBackend::new()
                .with_table::<Glm5NextKda>()
                .without("gemm", "dense_gemm_splitk_reduce_bf16"),
            20,
            k,
        ),
        (RecordingBackend::new().with_table::<Glm5NextKda>(), 129, k),
        (RecordingBackend::new().with_table::<Glm5NextKda>(), 20, 1024),
    ] {
        let names: Vec<String> = launched(&gpu, m, k).into_iter().map(|(name, _)| name).collect();
        assert_eq!(names, ["gemm::dense_gemm_bf16"], "m = {m}, k = {k}");
    }
}

#[test]
fn the_split_product_agrees_with_the_unsplit_one_on_the_reference() {
    let (m, n, k) = (20u32, 128u32, 2048u32);
    let mut rng = SplitMix64::new(12);
    let (x, w) = (random_bf16(&mut rng, (m * k) as usize), random_bf16(&mut rng, (n * k) as usize));
    let product = |gpu: &kda_runtime::cpu::CpuBackend| {
        let kernels = Glm5NextKdaKernels::resolve(gpu).unwrap();
        let (x, w) = (gpu.upload(&x).unwrap(), gpu.upload(&w).unwrap());
        gpu.download::<bf16>(&dense_mm_bf16(gpu, &kernels, &x, &w, (m, n, k)).unwrap()).unwrap()
    };
    let split = product(&kda::reference::backend());
    let unsplit = product(&kda::reference::backend().without("gemm", "dense_gemm_bf16_splitk"));
    // Two f32 partial sums added, then one rounding: within a bf16 ulp of the single sum's.
    let mut differ = 0;
    for (s, u) in split.iter().zip(&unsplit) {
        let ulp = 2f64.powi(f64::from(*u).abs().max(1e-3).log2().floor() as i32 - 7);
        assert!((f64::from(*s) - f64::from(*u)).abs() <= ulp, "{s} vs {u}");
        differ += usize::from(s != u);
    }
    assert!(differ * 10 < split.len(), "{differ} of {} outputs differ", split.len());
}
