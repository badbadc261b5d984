//! `cargo bench --bench gen`: timings of `gpustack gen` on every committed example lock.
#![allow(clippy::print_stdout, clippy::print_stderr)]
//!
//! * cold: a fresh `gpustack gen all --lock L --out DIR` process per run (parse the lock,
//!   plan, render every target, write every file);
//! * in-process: lock parse + plan + render of every target, without writing;
//! * per generator, in-process: the plan + render of each target alone, the shared values
//!   ([`gpustack::plan::Common`]) derived once beforehand.
//!
//! The budget (issue 3): `gen all` cold ≤ 5 ms per lock. Prints minimum and median;
//! `book/src/performance.md` records the figures with the machine and date.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpustack::plan::Target;

mod common;
use common::{ms, stats};

fn main() {
    let runs = common::runs();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin = env!("CARGO_BIN_EXE_gpustack");
    let mut locks: Vec<_> = std::fs::read_dir(root.join("lockfiles"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    locks.sort();
    let out = std::env::temp_dir().join(format!("gpustack-bench-gen-{}", std::process::id()));
    println!(
        "{:<30} {:>24} {:>26} {:>6}",
        "lock", "gen all cold (min/med)", "plan+render (min/med)", "files"
    );
    let mut per = Vec::new();
    for lock_path in &locks {
        let name = lock_path
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(lock_path).unwrap();
        let lock = gpustack::Lock::parse("l", &text).unwrap();
        let targets: Vec<Target> = Target::ALL
            .into_iter()
            .filter(|t| gpustack::plan::generate(&lock, *t).is_ok())
            .collect();
        let names: Vec<&str> = targets.iter().map(|t| t.name()).collect();
        let cold: Vec<Duration> = (0..runs)
            .map(|_| {
                let t = Instant::now();
                let st = Command::new(bin)
                    .arg("gen")
                    .args(&names)
                    .arg("--lock")
                    .arg(lock_path)
                    .arg("--out")
                    .arg(&out)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .unwrap();
                let d = t.elapsed();
                assert!(st.success(), "gen failed for {name}");
                d
            })
            .collect();
        let mut files = 0;
        let warm: Vec<Duration> = (0..runs)
            .map(|_| {
                let t = Instant::now();
                let lock = gpustack::Lock::parse("l", &text).unwrap();
                files = gpustack::plan::generate_many(&lock, &targets)
                    .unwrap()
                    .iter()
                    .map(|(_, f)| f.len())
                    .sum();
                t.elapsed()
            })
            .collect();
        let common = gpustack::plan::Common::new(&lock).unwrap();
        let per_target: Vec<String> = targets
            .iter()
            .map(|t| {
                let times: Vec<Duration> = (0..runs)
                    .map(|_| {
                        let s = Instant::now();
                        gpustack::plan::generate_with(&lock, &common, *t).unwrap();
                        s.elapsed()
                    })
                    .collect();
                format!("{} {:.3}", t.name(), ms(stats(times).1))
            })
            .collect();
        per.push(format!("{name:<30} {}", per_target.join("  ")));
        let (cmin, cmed) = stats(cold);
        let (wmin, wmed) = stats(warm);
        println!(
            "{name:<30} {:>10.3} / {:>8.3} ms {:>12.3} / {:>8.3} ms {files:>6}   ({})",
            ms(cmin),
            ms(cmed),
            ms(wmin),
            ms(wmed),
            names.join(" ")
        );
    }
    println!("\nper generator, in-process median (ms):");
    for p in per {
        println!("{p}");
    }
    let _ = std::fs::remove_dir_all(&out);
}
