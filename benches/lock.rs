//! `cargo bench --bench lock`: timings of `gpustack lock` on every example spec.
#![allow(clippy::print_stdout, clippy::print_stderr)]
//!
//! * cold: a fresh `gpustack lock --out -` process per run (what a user or CI waits for);
//! * in-process: catalog load, solve + lock, and lock writing, separately.
//!
//! Prints the minimum and median of each; `book/src/performance.md` records the figures
//! with the machine and date. No timing is asserted: targets live here, not in tests.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

mod common;
use common::{cold, ms, stats};

fn main() {
    let runs = common::runs();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin = env!("CARGO_BIN_EXE_gpustack");
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

    println!(
        "{:<36} {:>22} {:>22} {:>12}",
        "spec", "cold process (min/med)", "solve+lock (min/med)", "write (med)"
    );
    for spec in &specs {
        let name = spec.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(spec).unwrap();
        let cold: Vec<Duration> = (0..runs)
            .map(|_| {
                cold(
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
        let (cmin, cmed) = stats(cold);
        let (smin, smed) = stats(solve);
        let (_, wmed) = stats(write);
        println!(
            "{name:<36} {:>9.2} / {:>7.2} ms {:>9.3} / {:>7.3} ms {:>9.3} ms",
            ms(cmin),
            ms(cmed),
            ms(smin),
            ms(smed),
            ms(wmed)
        );
    }
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
