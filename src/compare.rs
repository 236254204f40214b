//! How close two results are: relative RMS error, and a max error that ignores elements too small
//! to judge (`docs/kernels.md`, "Tolerances").

/// The agreement of a result with a reference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Agreement {
    /// `‖result − reference‖₂ / ‖reference‖₂`.
    pub relative_rms: f64,
    /// The largest `|result − reference| / |reference|` over elements with
    /// `|reference| ≥ 1e-3 · max|reference|`.
    pub max_relative: f64,
    /// Elements compared.
    pub elements: usize,
}

impl Agreement {
    /// Compares `result` with `reference`. `None` when the comparison means nothing: no element,
    /// different lengths, an all-zero reference, or a non-finite value on either side.
    pub fn of(result: &[f64], reference: &[f64]) -> Option<Agreement> {
        if result.is_empty() || result.len() != reference.len() {
            return None;
        }
        if !result.iter().chain(reference).all(|x| x.is_finite()) {
            return None;
        }
        let peak = reference.iter().fold(0.0f64, |peak, x| peak.max(x.abs()));
        if peak == 0.0 {
            return None;
        }
        let error: f64 = result.iter().zip(reference).map(|(r, e)| (r - e) * (r - e)).sum();
        let norm: f64 = reference.iter().map(|e| e * e).sum();
        let max_relative = result
            .iter()
            .zip(reference)
            .filter(|(_, e)| e.abs() >= 1e-3 * peak)
            .map(|(r, e)| ((r - e) / e).abs())
            .fold(0.0, f64::max);
        Some(Agreement { relative_rms: (error / norm).sqrt(), max_relative, elements: result.len() })
    }
}

#[cfg(test)]
mod tests {
    use super::Agreement;

    #[test]
    fn relative_rms_and_guarded_max_error() {
        let agreement = Agreement::of(&[1.1, 2.0, 0.0], &[1.0, 2.0, 1e-9]).unwrap();
        // ‖(0.1, 0, -1e-9)‖ / ‖(1, 2, 1e-9)‖ = 0.1 / √5.
        assert!((agreement.relative_rms - 0.1 / 5f64.sqrt()).abs() < 1e-12);
        // The 1e-9 element is below 1e-3 of the peak and is not judged.
        assert!((agreement.max_relative - 0.1).abs() < 1e-12);
        assert_eq!(agreement.elements, 3);
    }

    #[test]
    fn meaningless_comparisons_are_refused() {
        assert_eq!(Agreement::of(&[], &[]), None);
        assert_eq!(Agreement::of(&[1.0], &[1.0, 2.0]), None);
        assert_eq!(Agreement::of(&[1.0], &[0.0]), None);
        assert_eq!(Agreement::of(&[f64::NAN], &[1.0]), None);
        assert_eq!(Agreement::of(&[1.0], &[f64::INFINITY]), None);
    }
}
