//! Side-by-side timing of two closures for ratio benchmarks: rounds alternate between them (and
//! which goes first), so drift of the machine's speed lands on both sides alike, and the ratio is
//! taken per round before the median is.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// The median time per call of each side and the spread of their per-round ratio.
pub struct Comparison {
    /// Median time per call of the first closure.
    pub first: Duration,
    /// Median time per call of the second closure.
    pub second: Duration,
    /// Median of the per-round ratios first / second.
    pub ratio: f64,
    /// The 10th and 90th percentiles of the per-round ratios.
    pub ratio_spread: (f64, f64),
}

/// Times `first` and `second`, `calls` calls each per round, over `rounds` interleaved rounds.
pub fn compare<A, B, R1, R2>(rounds: usize, calls: usize, mut first: A, mut second: B) -> Comparison
where
    A: FnMut() -> R1,
    B: FnMut() -> R2,
{
    let time = |run: &mut dyn FnMut()| {
        let start = Instant::now();
        for _ in 0..calls {
            run();
        }
        start.elapsed() / calls as u32
    };
    let (mut a, mut b, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    // One warm-up round each, untimed.
    time(&mut || drop(black_box(first())));
    time(&mut || drop(black_box(second())));
    for round in 0..rounds {
        let (ta, tb) = if round % 2 == 0 {
            let ta = time(&mut || drop(black_box(first())));
            (ta, time(&mut || drop(black_box(second()))))
        } else {
            let tb = time(&mut || drop(black_box(second())));
            (time(&mut || drop(black_box(first()))), tb)
        };
        a.push(ta);
        b.push(tb);
        ratios.push(ta.as_secs_f64() / tb.as_secs_f64());
    }
    a.sort();
    b.sort();
    ratios.sort_by(f64::total_cmp);
    let at = |q: f64| ratios[((ratios.len() - 1) as f64 * q).round() as usize];
    Comparison {
        first: a[a.len() / 2],
        second: b[b.len() / 2],
        ratio: at(0.5),
        ratio_spread: (at(0.1), at(0.9)),
    }
}

impl Comparison {
    /// One report line: `what: first vs second (median per call), ratio R [p10, p90]`.
    pub fn report(&self, what: &str, first: &str, second: &str) {
        println!(
            "{what}: {first} {:.1} ns vs {second} {:.1} ns per call; ratio {:.3} (p10 {:.3}, p90 {:.3})",
            self.first.as_secs_f64() * 1e9,
            self.second.as_secs_f64() * 1e9,
            self.ratio,
            self.ratio_spread.0,
            self.ratio_spread.1
        );
    }
}
