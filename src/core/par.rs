//! Work spread over scoped threads, results in the order of the jobs: the one way the crate
//! runs things side by side (registry queries in flight at once, the targets of one `gen`
//! rendered at once, the stock catalog's files decoded at once). Each caller keeps its output
//! deterministic by construction: results come back in job order, never in finishing order.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// `f` over `jobs` on at most `threads` threads, the calling thread being one of them; the
/// results in the order of `jobs`. Jobs are taken in order as threads free up, so put the
/// longest first. With one job or one thread nothing is spawned.
pub(crate) fn map<T: Sync, R: Send>(
    jobs: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let threads = threads.min(jobs.len());
    if threads <= 1 {
        return jobs.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<Option<R>>> = Mutex::new(jobs.iter().map(|_| None).collect());
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(job) = jobs.get(i) else { break };
        let r = f(job);
        done.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)[i] = Some(r);
    };
    std::thread::scope(|s| {
        for _ in 1..threads {
            s.spawn(work);
        }
        work();
    });
    done.into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}

/// How many threads CPU-bound work may use: the cores this process may run on, at most 4
/// (`gen` has at most five targets; more threads only cost their start).
pub(crate) fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_job_order() {
        let jobs: Vec<u64> = (0..50).collect();
        for threads in [1, 2, 3, 8, 100] {
            let out = map(&jobs, threads, |j| {
                // Later jobs finish first.
                std::thread::sleep(std::time::Duration::from_micros(50 - j));
                j * 2
            });
            assert_eq!(out, jobs.iter().map(|j| j * 2).collect::<Vec<_>>());
        }
        assert!(map(&[] as &[u8], 4, |_| 0).is_empty());
    }
}
