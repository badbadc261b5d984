//! `cargo bench --bench matrix`: timings of `gpustack matrix` (every stack a spec allows).
#![allow(clippy::print_stdout, clippy::print_stderr)]
//!
//! * the target (issue 7): the whole stock catalog for one GPU (H100), with torch, vLLM,
//!   DeepSpeed and every extra at `*`, without and with an installed driver: ≤ 50 ms;
//! * every example spec in `fixtures/specs/`, over its default axes;
//! * in-process: the matrix (enumeration, ordering, rows) and its GitHub JSON, all rows
//!   and `--limit 256` (GitHub's most jobs per matrix), and the stock catalog load that a
//!   process adds; a cold `gpustack matrix --format github` process too, once the CLI
//!   has the subcommand.
//!
//! Prints the minimum and median of each; `book/src/performance.md` records the figures
//! with the machine and date. No timing is asserted: targets live here, not in tests.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpustack::solve::matrix::matrix;
use gpustack::{Catalog, Spec};

mod common;
use common::{ms, stats};

/// The target's spec: one H100, torch, vLLM, DeepSpeed and every extra at `*`.
fn everything(driver: Option<&str>) -> String {
    let mut s = String::from("[stack]\nname = \"matrix-bench\"\n\n[hardware]\ngpus = [\"h100\"]\n");
    if let Some(d) = driver {
        s.push_str(&format!("driver = \"{d}\"\n"));
    }
    s.push_str("\n[components]\ntorch = \"*\"\nvllm = \"*\"\ndeepspeed = \"*\"\n");
    for c in gpustack::Component::EXTRAS {
        s.push_str(&format!("{} = \"*\"\n", c.name()));
    }
    s
}

fn main() {
    let runs = common::runs();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin = env!("CARGO_BIN_EXE_gpustack");
    let catalog = Catalog::stock().unwrap();
    let load: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            let c = Catalog::stock().unwrap();
            let d = t.elapsed();
            std::hint::black_box(c);
            d
        })
        .collect();
    let (lmin, lmed) = stats(load);
    println!(
        "catalog load (in-process)  min {:7.3} ms  median {:7.3} ms",
        ms(lmin),
        ms(lmed)
    );
    // A cold process only once the CLI has the subcommand.
    let has_cli = Command::new(bin)
        .args(["matrix", "--help"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let work = std::env::temp_dir().join(format!("gpustack-bench-matrix-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();

    // The installed driver of the "with driver" case is the one of the example spec
    // `fixtures/specs/slurm-apptainer-h100.toml` (an H100 cluster on R550).
    let mut cases: Vec<(String, String)> = vec![
        ("h100 everything `*`".into(), everything(None)),
        (
            "h100 everything `*`, driver 550.54.15".into(),
            everything(Some("550.54.15")),
        ),
    ];
    let mut specs: Vec<_> = std::fs::read_dir(root.join("fixtures/specs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    specs.sort();
    for p in &specs {
        let name = p.file_stem().unwrap().to_string_lossy().into_owned();
        cases.push((name, std::fs::read_to_string(p).unwrap()));
    }

    println!(
        "{:<40} {:>7} {:>5} {:>24} {:>16} {:>24}",
        "spec",
        "rows",
        "axes",
        "matrix+github (min/med)",
        "limit 256 (med)",
        "cold process (min/med)"
    );
    for (name, text) in &cases {
        let spec = Spec::parse("gpustack.toml", text, &catalog).unwrap();
        let m = matrix(&catalog, &spec, None).unwrap();
        let t: Vec<Duration> = (0..runs)
            .map(|_| {
                let t = Instant::now();
                let m = matrix(&catalog, &spec, None).unwrap();
                let s = m.to_github();
                let d = t.elapsed();
                std::hint::black_box(s);
                d
            })
            .collect();
        let (min, med) = stats(t);
        let t: Vec<Duration> = (0..runs)
            .map(|_| {
                let t = Instant::now();
                let m = matrix(&catalog, &spec, Some(256)).unwrap();
                let s = m.to_github();
                let d = t.elapsed();
                std::hint::black_box(s);
                d
            })
            .collect();
        let (_, lmed) = stats(t);
        let cold = if has_cli {
            std::fs::write(work.join("gpustack.toml"), text).unwrap();
            let t: Vec<Duration> = (0..runs)
                .map(|_| {
                    let t = Instant::now();
                    let st = Command::new(bin)
                        .args(["matrix", "--format", "github"])
                        .current_dir(&work)
                        .stdout(Stdio::null())
                        .status()
                        .unwrap();
                    assert!(st.success());
                    t.elapsed()
                })
                .collect();
            let (cmin, cmed) = stats(t);
            format!("{:>9.2} / {:>7.2} ms", ms(cmin), ms(cmed))
        } else {
            "(no `matrix` subcommand)".to_string()
        };
        println!(
            "{name:<40} {:>7} {:>5} {:>9.2} / {:>7.2} ms {:>13.2} ms {cold:>24}",
            m.total.unwrap_or(m.rows.len()),
            m.axes.len(),
            ms(min),
            ms(med),
            ms(lmed)
        );
    }
    let _ = std::fs::remove_dir_all(&work);
}
