//! Shared by the bench binaries: summary statistics of a run's timings, and the wall and
//! CPU time of child processes.

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
    timed(cmd).0
}

/// Wall time and CPU time (user + system, of the process and every descendant it waited
/// for) of one fresh process: `cmd` run to completion with its output discarded, which
/// must succeed. CPU time is the figure that machine load disturbs least: a busy machine makes a
/// process wait, not work more.
#[allow(dead_code)] // not every bench starts processes
pub(crate) fn timed(cmd: &mut std::process::Command) -> (Duration, Duration) {
    let cpu = children_cpu();
    let t = std::time::Instant::now();
    let st = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("the command starts");
    let d = t.elapsed();
    assert!(st.success(), "{cmd:?} failed");
    (d, children_cpu().saturating_sub(cpu))
}

/// User + system time of every waited-for child process so far (`getrusage(RUSAGE_CHILDREN)`).
#[allow(dead_code)]
#[cfg(target_os = "linux")]
pub(crate) fn children_cpu() -> Duration {
    /// `struct rusage` on Linux: two `timeval`s, then 14 `long`s.
    #[repr(C)]
    struct Rusage {
        utime: [i64; 2],
        stime: [i64; 2],
        rest: [i64; 14],
    }
    extern "C" {
        fn getrusage(who: i32, usage: *mut Rusage) -> i32;
    }
    const RUSAGE_CHILDREN: i32 = -1;
    let mut r = Rusage {
        utime: [0; 2],
        stime: [0; 2],
        rest: [0; 14],
    };
    // SAFETY: `r` is a valid, writable `struct rusage` for the C library to fill.
    let ok = unsafe { getrusage(RUSAGE_CHILDREN, &raw mut r) } == 0;
    let tv = |t: [i64; 2]| {
        Duration::from_secs(u64::try_from(t[0]).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t[1]).unwrap_or(0))
    };
    if ok {
        tv(r.utime) + tv(r.stime)
    } else {
        Duration::ZERO
    }
}

/// Elsewhere: not measured (zero).
#[allow(dead_code)]
#[cfg(not(target_os = "linux"))]
pub(crate) fn children_cpu() -> Duration {
    Duration::ZERO
}

/// The `gpustack` executable the bench starts: `GPUSTACK_BENCH_BIN` (another build, such as
/// `target/dist/gpustack`), else the one cargo built with the bench.
#[allow(dead_code)] // not every bench starts processes
pub(crate) fn bin() -> String {
    std::env::var("GPUSTACK_BENCH_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_gpustack").to_string())
}

/// Runs per measurement: `GPUSTACK_BENCH_RUNS`, default 30.
#[allow(dead_code)] // not every bench reads it
pub(crate) fn runs() -> usize {
    std::env::var("GPUSTACK_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30)
}
