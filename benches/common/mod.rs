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

/// Wall time of one fresh process: `cmd` run to completion with stdout discarded, which must
/// succeed.
#[allow(dead_code)] // not every bench starts processes
pub(crate) fn cold(cmd: &mut std::process::Command) -> Duration {
    let t = std::time::Instant::now();
    let st = cmd
        .stdout(std::process::Stdio::null())
        .status()
        .expect("the command starts");
    let d = t.elapsed();
    assert!(st.success(), "{cmd:?} failed");
    d
}

/// Runs per measurement: `GPUSTACK_BENCH_RUNS`, default 30.
#[allow(dead_code)] // not every bench reads it
pub(crate) fn runs() -> usize {
    std::env::var("GPUSTACK_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30)
}
