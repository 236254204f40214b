//! Running the modules' compiles in parallel, at most as many at once as cargo allows a build
//! script (`NUM_JOBS`): a build of many modules must not start one nvcc per module on a small
//! machine, where each takes hundreds of MiB.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

/// `work` applied to every item, by at most `jobs` threads at once; results in item order. A
/// panic in `work` is resumed on the caller.
pub(super) fn run_bounded<I: Sync, T: Send>(
    jobs: usize,
    items: &[I],
    work: impl Fn(&I) -> T + Sync,
) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<T>>> = Mutex::new(items.iter().map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, items.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(index) else { break };
                    let result = work(item);
                    results.lock().unwrap_or_else(PoisonError::into_inner)[index] = Some(result);
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(PoisonError::into_inner);
    // Every index below `items.len()` was taken by exactly one thread, which stored its result
    // (a panic would have been resumed when the scope ended).
    results.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn no_more_than_the_allowed_jobs_run_at_once_and_results_keep_their_order() {
        let (running, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let items: Vec<u32> = (0..12).collect();
        let results = run_bounded(3, &items, |item| {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(20));
            running.fetch_sub(1, Ordering::SeqCst);
            item * 10
        });
        assert_eq!(results, items.iter().map(|item| item * 10).collect::<Vec<_>>());
        assert_eq!(most.load(Ordering::SeqCst), 3, "three jobs, twelve items: exactly three at once");
    }

    #[test]
    fn zero_jobs_still_runs_everything_one_at_a_time_and_no_items_runs_nothing() {
        assert_eq!(run_bounded(0, &[1, 2, 3], |item| item + 1), [2, 3, 4]);
        assert!(run_bounded(4, &[] as &[u32], |item| *item).is_empty());
    }
}
