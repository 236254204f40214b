//! gemm, gemv, batchm.

use half::bf16;

use super::*;
use crate::kernels::defines::DENSE_GEMV_BATCHM_MAX_M;

/// `c = a·bᵀ` in f64.
fn matmul64(a: &[bf16], b: &[bf16], m: usize, n: usize, k: usize) -> Vec<f64> {
    let (a, b) = (widen(a), widen(b));
    (0..m * n)
        .map(|idx| {
            let (i, j) = (idx / n, idx % n);
            (0..k).map(|p| a[i * k + p] * b[j * k + p]).sum()
        })
        .collect()
}

/// The ABI's GEMM tolerance: one bf16 ulp of the reference plus an absolute floor of
/// 2⁻⁸·rms(reference), which covers outputs that cancel to near zero.
fn assert_gemm_close(what: &str, got: &[bf16], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    checked_peak(what, want);
    let rms = (want.iter().map(|x| x * x).sum::<f64>() / want.len() as f64).sqrt();
    for (i, (g, &w)) in got.iter().zip(want).enumerate() {
        let allowed = bf16_ulp(w) + rms / 256.0;
        assert!((g.to_f64() - w).abs() <= allowed, "{what}[{i}]: {g} vs {w}");
    }
}

fn gemm(a: &[bf16], b: &[bf16], m: usize, n: usize, k: usize) -> Vec<bf16> {
    let args = vec![
        Arg::Bf16(a.to_vec()),
        Arg::Bf16(b.to_vec()),
        Arg::Bf16Mut(vec![bf16::ZERO; m * n]),
        Arg::U32(m as u32),
        Arg::U32(n as u32),
        Arg::U32(k as u32),
    ];
    launch("gemm", "dense_gemm_bf16", args).remove(0).bf16()
}

fn gemv(x: &[bf16], w: &[bf16], n: usize, k: usize) -> Vec<bf16> {
    let args = vec![
        Arg::Bf16(x.to_vec()),
        Arg::Bf16(w.to_vec()),
        Arg::Bf16Mut(vec![bf16::ZERO; n]),
        Arg::U32(n as u32),
        Arg::U32(k as u32),
    ];
    launch("gemv", "dense_gemv_bf16", args).remove(0).bf16()
}

fn batchm_args(x: &[bf16], w: &[bf16], m: usize, n: usize, k: usize) -> Vec<Arg> {
    vec![
        Arg::Bf16(x.to_vec()),
        Arg::Bf16(w.to_vec()),
        Arg::Bf16Mut(vec![bf16::ZERO; m * n]),
        Arg::U32(m as u32),
        Arg::U32(n as u32),
        Arg::U32(k as u32),
    ]
}

fn bf16s(values: &[f32]) -> Vec<bf16> {
    values.iter().map(|&x| bf16::from_f32(x)).collect()
}

#[test]
fn gemm_computes_a_small_product_by_hand() {
    // a = [[1, 2, 3], [-1, 0.5, 4]], b = [[1, 0, -1], [2, 2, 0.25]].
    let a = bf16s(&[1.0, 2.0, 3.0, -1.0, 0.5, 4.0]);
    let b = bf16s(&[1.0, 0.0, -1.0, 2.0, 2.0, 0.25]);
    assert_eq!(gemm(&a, &b, 2, 2, 3), bf16s(&[-2.0, 6.75, -5.0, 0.0]));
}

#[test]
fn gemm_rounds_the_f32_sum_once() {
    // 256 + 1 + 1 is 258 exactly in f32; per-term bf16 rounding would give 256 (ulp 2 at 256).
    let a = bf16s(&[256.0, 1.0, 1.0]);
    let b = bf16s(&[1.0, 1.0, 1.0]);
    assert_eq!(gemm(&a, &b, 1, 1, 3), bf16s(&[258.0]));
}

#[test]
fn gemm_and_gemv_match_f64() {
    let mut rng = Rng::new(1);
    let (m, n, k) = (5, 19, 67);
    let a = rng.bf16s(m * k, -1.0, 1.0);
    let b = rng.bf16s(n * k, -1.0, 1.0);
    let want = matmul64(&a, &b, m, n, k);
    assert_gemm_close("gemm", &gemm(&a, &b, m, n, k), &want);
    assert_gemm_close("gemv", &gemv(&a[..k], &b, n, k), &want[..n]);
}

#[test]
fn batchm_rows_are_bit_identical_to_gemv_and_to_gemm() {
    let mut rng = Rng::new(2);
    let (n, k) = (37, 67);
    let w = rng.bf16s(n * k, -1.0, 1.0);
    for m in [2, 7, DENSE_GEMV_BATCHM_MAX_M as usize] {
        let x = rng.bf16s(m * k, -2.0, 2.0);
        let batched =
            launch("dense_gemv_bf16_batchm", "dense_gemv_bf16_batchm", batchm_args(&x, &w, m, n, k))
                .remove(0)
                .bf16();
        for i in 0..m {
            let row = gemv(&x[i * k..(i + 1) * k], &w, n, k);
            assert_eq!(batched[i * n..(i + 1) * n], row, "m = {m}, row {i}");
        }
        assert_eq!(batched, gemm(&x, &w, m, n, k), "m = {m}");
        assert_gemm_close("batchm", &batched, &matmul64(&x, &w, m, n, k));
    }
}

#[test]
fn batchm_refuses_m_outside_its_range() {
    let (n, k) = (3, 4);
    let w = vec![bf16::ONE; n * k];
    for m in [0, 1, DENSE_GEMV_BATCHM_MAX_M as usize + 1] {
        let x = vec![bf16::ONE; m * k];
        let reason =
            refusal("dense_gemv_bf16_batchm", "dense_gemv_bf16_batchm", batchm_args(&x, &w, m, n, k));
        assert!(reason.contains("outside 2..=16"), "{reason}");
    }
}

#[test]
fn dense_kernels_refuse_short_buffers() {
    let reason = refusal(
        "gemm",
        "dense_gemm_bf16",
        vec![
            Arg::Bf16(vec![bf16::ONE; 5]),
            Arg::Bf16(vec![bf16::ONE; 6]),
            Arg::Bf16Mut(vec![bf16::ZERO; 4]),
            Arg::U32(2),
            Arg::U32(2),
            Arg::U32(3),
        ],
    );
    assert_eq!(reason, "`a [m, k]` holds 5 elements, needs 2×3 = 6");
    let reason = refusal(
        "gemv",
        "dense_gemv_bf16",
        vec![
            Arg::Bf16(vec![bf16::ONE; 3]),
            Arg::Bf16(vec![bf16::ONE; 6]),
            Arg::Bf16Mut(vec![bf16::ZERO; 1]),
            Arg::U32(2),
            Arg::U32(3),
        ],
    );
    assert_eq!(reason, "`y [n]` holds 1 elements, needs 2");
}
