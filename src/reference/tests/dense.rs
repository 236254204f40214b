//! gemm, gemv, batchm.

use half::bf16;
use kda_runtime::LaunchGeometry;

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

/// `c [m, n] = a [m, k]·b [n, k]ᵀ`, a's rows `lda` apart, into a `c` holding `c` before the launch.
fn try_gemm(a: &[bf16], b: &[bf16], c: &[bf16], [m, n, k, lda]: [usize; 4]) -> Launched<Vec<bf16>> {
    let [m, n, k, lda] = u32s([m, n, k, lda]);
    let dev = Device::new();
    let (a, b, mut c) = (dev.up(a), dev.up(b), dev.up(c));
    let args =
        glm5next_kda::gemm { a: a.view().into(), b: b.view().into(), c: c.view_mut().into(), m, n, k, lda };
    let result = dev.kernels.launch_gemm(&dev.gpu, launch::gemm(m, n), args);
    Launched { result, written: dev.down(&c) }
}

/// `y [n] = w [n, k]·x [k]` into a `y` holding `y`; `x` of any element type, to be refused unless
/// bf16.
fn try_gemv<X: Element>(x: &[X], w: &[bf16], y: &[bf16], sizes: [usize; 2]) -> Launched<Vec<bf16>> {
    let [n, k] = u32s(sizes);
    let dev = Device::new();
    let (x, w, mut y) = (dev.up(x), dev.up(w), dev.up(y));
    let args = glm5next_kda::gemv { x: x.view().into(), w: w.view().into(), y: y.view_mut().into(), n, k };
    let result = dev.kernels.launch_gemv(&dev.gpu, launch::gemv(1, n), args);
    Launched { result, written: dev.down(&y) }
}

/// The batched GEMV of `m` rows (`ldx` apart) into a `y` holding `y`, with the batched block shape
/// for any `m` (so that only `m` itself can be refused).
fn try_batchm(x: &[bf16], w: &[bf16], y: &[bf16], [m, n, k, ldx]: [usize; 4]) -> Launched<Vec<bf16>> {
    let [m, n, k, ldx] = u32s([m, n, k, ldx]);
    let dev = Device::new();
    let (x, w, mut y) = (dev.up(x), dev.up(w), dev.up(y));
    let args = glm5next_kda::gemv_batchm {
        x: x.view().into(),
        w: w.view().into(),
        y: y.view_mut().into(),
        m,
        n,
        k,
        ldx,
    };
    let result = dev.kernels.launch_gemv_batchm(&dev.gpu, launch::gemv(m.max(2), n), args);
    Launched { result, written: dev.down(&y) }
}

fn gemm(a: &[bf16], b: &[bf16], m: usize, n: usize, k: usize) -> Vec<bf16> {
    try_gemm(a, b, &vec![bf16::ZERO; m * n], [m, n, k, k]).ok()
}

fn gemv(x: &[bf16], w: &[bf16], n: usize, k: usize) -> Vec<bf16> {
    try_gemv(x, w, &vec![bf16::ZERO; n], [n, k]).ok()
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
        let batched = try_batchm(&x, &w, &vec![bf16::ZERO; m * n], [m, n, k, k]).ok();
        for i in 0..m {
            let row = gemv(&x[i * k..(i + 1) * k], &w, n, k);
            assert_eq!(batched[i * n..(i + 1) * n], row, "m = {m}, row {i}");
        }
        assert_eq!(batched, gemm(&x, &w, m, n, k), "m = {m}");
        assert_gemm_close("batchm", &batched, &matmul64(&x, &w, m, n, k));
    }
}

#[test]
fn gemm_and_batchm_read_rows_their_stride_apart() {
    // Rows of k = 67 among 70, the 3 between them junk: the products of the packed rows.
    let mut rng = Rng::new(3);
    let (m, n, k, ld) = (5, 19, 67, 70);
    let w = rng.bf16s(n * k, -1.0, 1.0);
    let mut spread = rng.bf16s((m - 1) * ld + k, 1e4, 2e4);
    let packed = rng.bf16s(m * k, -1.0, 1.0);
    for (row, values) in packed.chunks(k).enumerate() {
        spread[row * ld..][..k].copy_from_slice(values);
    }
    let want = gemm(&packed, &w, m, n, k);
    assert_gemm_close("packed", &want, &matmul64(&packed, &w, m, n, k));
    let zeros = vec![bf16::ZERO; m * n];
    assert_eq!(try_gemm(&spread, &w, &zeros, [m, n, k, ld]).ok(), want);
    assert_eq!(try_batchm(&spread, &w, &zeros, [m, n, k, ld]).ok(), want);
    // One element short of the last row, and rows closer than k: refused.
    let reason = try_gemm(&spread[..spread.len() - 1], &w, &zeros, [m, n, k, ld]).refused(&zeros);
    assert!(reason.starts_with("`glm5next_kda.gemm.a`: expected at least 347 elements"), "{reason}");
    let reason = try_batchm(&spread, &w, &zeros, [m, n, k, k - 1]).refused(&zeros);
    assert!(reason.contains("does not meet `ldx >= k`"), "{reason}");
}

#[test]
fn a_gemm_launch_short_of_its_dynamic_shared_memory_is_refused() {
    let (m, n, k) = (2u32, 3u32, 8u32);
    let dev = Device::new();
    let (a, b) = (dev.up(&[bf16::ONE; 16]), dev.up(&[bf16::ONE; 24]));
    let zeros = vec![bf16::ZERO; 6];
    let mut c = dev.up(&zeros);
    let short = LaunchGeometry { shared_mem_bytes: launch::GEMM_SHARED_BYTES - 16, ..launch::gemm(m, n) };
    let args = glm5next_kda::gemm {
        a: a.view().into(),
        b: b.view().into(),
        c: c.view_mut().into(),
        m,
        n,
        k,
        lda: k,
    };
    let reason = dev.kernels.launch_gemm(&dev.gpu, short, args).unwrap_err().to_string();
    assert!(
        reason.starts_with("`glm5next_kda.gemm`: the launch does not meet `shared.bytes >= "),
        "{reason}"
    );
    assert!(reason.ends_with("shared = 65520 bytes)"), "{reason}");
    assert_eq!(dev.down::<bf16>(&c), zeros, "the refused launch wrote c");
}

#[test]
fn batchm_refuses_m_outside_its_range() {
    let (n, k) = (3, 4);
    let w = vec![bf16::ONE; n * k];
    for (m, requirement) in
        [(0, "m >= 2"), (1, "m >= 2"), (DENSE_GEMV_BATCHM_MAX_M as usize + 1, "m <= DENSE_GEMV_BATCHM_MAX_M")]
    {
        let (x, y) = (vec![bf16::ONE; m * k], vec![bf16::ZERO; m * n]);
        let reason = try_batchm(&x, &w, &y, [m, n, k, k]).refused(&y);
        let refusal =
            format!("`glm5next_kda.gemv_batchm`: the launch does not meet `{requirement}` (m = {m}, ");
        assert!(reason.starts_with(&refusal), "{reason}");
    }
}

#[test]
fn dense_launches_refuse_short_buffers_and_wrong_element_types() {
    let (ones, zeros) = (|n| vec![bf16::ONE; n], |n| vec![bf16::ZERO; n]);
    let reason = try_gemm(&ones(5), &ones(6), &zeros(4), [2, 2, 3, 3]).refused(&zeros(4));
    assert_eq!(
        reason,
        "`glm5next_kda.gemm.a`: expected at least 6 elements (`(m-1)*lda+k`), found a view of 5 elements"
    );
    // `c` one element short of m·n: refused before the kernel writes any of it.
    let reason = try_gemm(&ones(6), &ones(6), &zeros(3), [2, 2, 3, 3]).refused(&zeros(3));
    assert_eq!(
        reason,
        "`glm5next_kda.gemm.c`: expected at least 4 elements (`m*n`), found a view of 3 elements"
    );
    let reason = try_gemv(&ones(3), &ones(6), &zeros(1), [2, 3]).refused(&zeros(1));
    assert_eq!(
        reason,
        "`glm5next_kda.gemv.y`: expected at least 2 elements (`n`), found a view of 1 elements"
    );
    let reason = try_gemv(&[1.0f32; 3], &ones(6), &zeros(2), [2, 3]).refused(&zeros(2));
    assert_eq!(reason, "`glm5next_kda.gemv.x`: expected bf16 elements, found f32 elements");
}
