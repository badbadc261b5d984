//! `cargo bench --bench check`: timings of `gpustack check` on every example project (its
//! spec, committed lock and committed generated files).
#![allow(clippy::print_stdout, clippy::print_stderr)]
//!
//! * cold: a fresh `gpustack check --spec S --lock L --out DIR` process per run (catalog,
//!   lock parse and verify, re-lock for staleness, render every target and compare, read
//!   back the cross-target values);
//! * in-process: `gpustack::check::check` with the files already in memory.
//!
//! The budget (issue 8): `check` cold ≤ 10 ms. Prints minimum and median;
//! `book/src/performance.md` records the figures with the machine and date.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{ms, stats};

fn main() {
    let runs = common::runs();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin = env!("CARGO_BIN_EXE_gpustack");
    let catalog = gpustack::Catalog::stock().unwrap();
    let mut specs: Vec<_> = std::fs::read_dir(root.join("fixtures/specs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    specs.sort();
    println!(
        "{:<30} {:>22} {:>22} {:>6}",
        "project", "check cold (min/med)", "in-process (min/med)", "files"
    );
    for spec_path in &specs {
        let name = spec_path
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let lock_path = root.join(format!("lockfiles/{name}.lock"));
        let out = root.join(format!("fixtures/gen/{name}"));
        let cold: Vec<Duration> = (0..runs)
            .map(|_| {
                let t = Instant::now();
                let st = Command::new(bin)
                    .arg("check")
                    .arg("--spec")
                    .arg(spec_path)
                    .arg("--lock")
                    .arg(&lock_path)
                    .arg("--out")
                    .arg(&out)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .unwrap();
                let d = t.elapsed();
                assert_eq!(st.code(), Some(0), "check failed for {name}");
                d
            })
            .collect();
        let spec = std::fs::read_to_string(spec_path).unwrap();
        let lock = std::fs::read_to_string(&lock_path).unwrap();
        let tree = gpustack::emit::read_tree(&out).unwrap();
        let warm: Vec<Duration> = (0..runs)
            .map(|_| {
                let t = Instant::now();
                let r = gpustack::check::check(&gpustack::check::Inputs {
                    today: None,
                    lock: ("gpustack.lock", &lock),
                    spec: Some(("gpustack.toml", &spec)),
                    catalog: &catalog,
                    out: Some(("out", &tree)),
                    hardware: None,
                    unusual: &[],
                    pylocks: &Default::default(),
                })
                .unwrap();
                assert_eq!(r.errors(), 0);
                t.elapsed()
            })
            .collect();
        let (cmin, cmed) = stats(cold);
        let (wmin, wmed) = stats(warm);
        println!(
            "{name:<30} {:>9.3} / {:>7.3} ms {:>9.3} / {:>7.3} ms {:>6}",
            ms(cmin),
            ms(cmed),
            ms(wmin),
            ms(wmed),
            tree.len()
        );
    }
}
