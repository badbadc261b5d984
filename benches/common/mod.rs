//! Shared by the bench binaries: summary statistics of a run's timings.

use std::time::Duration;

/// Minimum and median.
pub(crate) fn stats(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    (v[0], v[v.len() / 2])
}

/// Milliseconds.
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
