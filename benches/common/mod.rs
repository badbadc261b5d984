//! Shared by the bench binaries: summary statistics of a run's timings, and the wall and
//! CPU time of child processes.

use std::time::Duration;

/// Minimum and median.
#[allow(dead_code)] // not every bench reads both
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

/// One finished process: wall time, CPU time (user + system) and peak resident memory.
#[allow(dead_code)] // not every bench reads memory
#[derive(Clone, Copy, Debug)]
pub(crate) struct Run {
    pub(crate) wall: Duration,
    pub(crate) cpu: Duration,
    /// Peak resident set size in KiB (`ru_maxrss`, what `/usr/bin/time -v` prints).
    pub(crate) max_rss_kib: u64,
}

/// [`timed`] with the peak resident memory of that one process, from `wait4`: `cmd` run
/// to completion with its output discarded, which must exit with `expect` (0 unless said).
#[allow(dead_code)]
#[cfg(target_os = "linux")]
pub(crate) fn measured(cmd: &mut std::process::Command, expect: i32) -> Run {
    #[repr(C)]
    struct Rusage {
        utime: [i64; 2],
        stime: [i64; 2],
        maxrss: i64,
        rest: [i64; 13],
    }
    extern "C" {
        fn wait4(pid: i32, status: *mut i32, options: i32, usage: *mut Rusage) -> i32;
    }
    let t = std::time::Instant::now();
    let child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the command starts");
    let pid = i32::try_from(child.id()).expect("a pid fits");
    let mut status = 0;
    let mut r = Rusage {
        utime: [0; 2],
        stime: [0; 2],
        maxrss: 0,
        rest: [0; 13],
    };
    // SAFETY: `status` and `r` are valid, writable; the child is ours and not yet waited
    // for (`std::process::Child` does not wait when dropped).
    let got = unsafe { wait4(pid, &raw mut status, 0, &raw mut r) };
    let wall = t.elapsed();
    drop(child);
    assert_eq!(got, pid, "wait4 failed for {cmd:?}");
    // WIFEXITED and WEXITSTATUS.
    let code = if status & 0x7f == 0 {
        (status >> 8) & 0xff
    } else {
        -1
    };
    assert_eq!(code, expect, "{cmd:?} exited with {code}");
    let tv = |t: [i64; 2]| {
        Duration::from_secs(u64::try_from(t[0]).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t[1]).unwrap_or(0))
    };
    Run {
        wall,
        cpu: tv(r.utime) + tv(r.stime),
        max_rss_kib: u64::try_from(r.maxrss).unwrap_or(0),
    }
}

/// Elsewhere: wall time only.
#[allow(dead_code)]
#[cfg(not(target_os = "linux"))]
pub(crate) fn measured(cmd: &mut std::process::Command, expect: i32) -> Run {
    let t = std::time::Instant::now();
    let st = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("the command starts");
    assert_eq!(st.code(), Some(expect), "{cmd:?} failed");
    Run {
        wall: t.elapsed(),
        cpu: Duration::ZERO,
        max_rss_kib: 0,
    }
}
