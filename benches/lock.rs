//! `cargo bench --bench lock`: timings of `gpustack lock` on every example spec.
#![allow(clippy::print_stdout, clippy::print_stderr)]
//!
//! * cold: a fresh `gpustack lock --out -` process per run (what a user or CI waits for);
//! * in-process: catalog load, solve + lock, and lock writing, separately;
//! * re-lock: a fresh `gpustack lock --offline --out gpustack.lock` process over the lock
//!   it wrote itself, inputs unchanged (issue 15), twice: the full path (no cache:
//!   `GPUSTACK_CACHE_DIR=""`; it reads and verifies the existing lock, solves keeping every
//!   pick, and finds every file already as it would write it), and the fast path (a cache
//!   entry recorded by an earlier unchanged run: the inputs are hashed and nothing else
//!   runs; `gpustack::generate::fresh`).
//!
//! Prints the minimum and median of each, wall time and, for processes, CPU time (user +
//! system: the figure machine load disturbs least); `book/src/performance.md` records the
//! figures with the machine and date. No timing is asserted: targets live here, not in
//! tests.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

mod common;
use common::{ms, stats, timed};

/// `min / median` of wall and CPU times, in ms.
fn both(v: Vec<(Duration, Duration)>) -> String {
    let (w, c): (Vec<_>, Vec<_>) = v.into_iter().unzip();
    let ((wmin, wmed), (cmin, cmed)) = (stats(w), stats(c));
    format!(
        "{:>6.2} / {:>6.2} ({:>5.2} / {:>5.2})",
        ms(wmin),
        ms(wmed),
        ms(cmin),
        ms(cmed)
    )
}

fn main() {
    let runs = common::runs();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin = &common::bin();
    let mut specs: Vec<_> = std::fs::read_dir(root.join("fixtures/specs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    specs.sort();

    let load: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            let c = gpustack::Catalog::stock().unwrap();
            let d = t.elapsed();
            std::hint::black_box(c);
            d
        })
        .collect();
    let (lmin, lmed) = stats(load);
    println!(
        "catalog load (in-process)            min {:7.3} ms  median {:7.3} ms",
        ms(lmin),
        ms(lmed)
    );
    let catalog = gpustack::Catalog::stock().unwrap();

    println!("cold processes: wall min / median (CPU min / median), ms");
    println!(
        "{:<26} {:>31} {:>20} {:>8} {:>31} {:>31}",
        "spec",
        "cold lock --out -",
        "solve+lock min/med",
        "write",
        "re-lock, full path",
        "re-lock, fast path"
    );
    let scratch =
        std::env::temp_dir().join(format!("gpustack-bench-relock-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    for spec in &specs {
        let name = spec.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(spec).unwrap();
        let cold: Vec<(Duration, Duration)> = (0..runs)
            .map(|_| {
                timed(
                    Command::new(bin)
                        .args(["lock", "--offline", "--spec"])
                        .arg(spec)
                        .args(["--out", "-"]),
                )
            })
            .collect();
        let solve: Vec<Duration> = (0..runs)
            .map(|_| {
                let t = Instant::now();
                let l = gpustack::lock_spec(&catalog, "gpustack.toml", &text).unwrap();
                let d = t.elapsed();
                std::hint::black_box(l);
                d
            })
            .collect();
        let lock = gpustack::lock_spec(&catalog, "gpustack.toml", &text).unwrap();
        let write: Vec<Duration> = (0..runs)
            .map(|_| {
                let t = Instant::now();
                let s = lock.to_toml();
                let d = t.elapsed();
                std::hint::black_box(s);
                d
            })
            .collect();
        let existing = scratch.join(format!("{name}.lock"));
        let relock = |cache: &Path| {
            let mut c = Command::new(bin);
            c.args(["lock", "--offline", "--spec"])
                .arg(spec)
                .arg("--out")
                .arg(&existing)
                .env("GPUSTACK_CACHE_DIR", cache);
            c
        };
        let (no_cache, cache) = (Path::new(""), scratch.join("cache"));
        timed(&mut relock(no_cache));
        let first = std::fs::read(&existing).unwrap();
        let full: Vec<_> = (0..runs).map(|_| timed(&mut relock(no_cache))).collect();
        // The first unchanged run with a cache records the entry the others answer from.
        timed(&mut relock(&cache));
        let fast: Vec<_> = (0..runs).map(|_| timed(&mut relock(&cache))).collect();
        assert_eq!(
            std::fs::read(&existing).unwrap(),
            first,
            "{name}: a re-lock moved"
        );
        let (smin, smed) = stats(solve);
        let (_, wmed) = stats(write);
        println!(
            "{name:<26} {:>31} {:>8.3} / {:>7.3} {:>8.3} {:>31} {:>31}",
            both(cold),
            ms(smin),
            ms(smed),
            ms(wmed),
            both(full),
            both(fast)
        );
    }
    let _ = std::fs::remove_dir_all(&scratch);
    // A worst case: an unsatisfiable request, explained with hints.
    let conflict =
        std::fs::read_to_string(root.join("fixtures/conflicts/vllm-cu13-needs-r580.toml")).unwrap();
    let t: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            let e = gpustack::lock_spec(&catalog, "gpustack.toml", &conflict).unwrap_err();
            let d = t.elapsed();
            std::hint::black_box(e.to_string());
            d
        })
        .collect();
    let (emin, emed) = stats(t);
    println!(
        "conflict explained with hints (vllm-cu13-needs-r580)  min {:7.3} ms  median {:7.3} ms",
        ms(emin),
        ms(emed)
    );
}
