//! `cargo bench --bench scale`: how catalog load, solve + lock and a worst-case conflict
//! explanation grow with the catalog, on synthetic catalogs of 1×–100× the stock catalog's
//! versions (`gpustack::synth::scaled_catalog`).
#![allow(clippy::print_stdout, clippy::print_stderr)]
//!
//! For each factor (1, 2, 5, 10, 20, 50, 100; `GPUSTACK_SCALE_FACTORS=1,10` to choose),
//! in-process:
//!
//! * `load`: `Catalog::from_layers` on the synthetic catalog's TOML text (parse, validate,
//!   index; at 1× this is the stock TOML, not the pre-parsed embedded blob `gpustack lock`
//!   starts from);
//! * `lock <spec>`: parse, solve and build the lock of four example specs
//!   (`gpustack::lock_spec`): a small stack, one with an installed driver and vLLM, one with
//!   extras, and the largest (CUDA, cuDNN, NCCL, Python, torch, vLLM, DeepSpeed);
//! * `gen h100-ib-train-serve`: plan and render every configured target of the lock that
//!   spec gets at this factor, in memory (`gen` reads the lock only, so the catalog reaches
//!   it through the lock);
//! * `cold lock a100-pytorch`: a fresh `gpustack lock --catalog DIR --out -` process, with
//!   the synthetic catalog's files written to `DIR` (an overlay over the embedded stock
//!   catalog: its stock entries replace equal ones, its copies add; so the process parses
//!   the whole synthetic catalog as TOML on top of the pre-parsed stock one);
//! * `conflict worst-case`: `gpustack::synth::WORST_CASE_SPEC` failing with its explanation
//!   and checked hints, rendered to text;
//! * `conflict vllm-cu13-needs-r580`: the conflict fixture of that name (an installed
//!   driver too old for the request; its hints name the driver upgrades that resolve, so
//!   the explainer solves once per class of candidate upgrade drivers).
//!
//! `GPUSTACK_SCALE_ONLY=TEXT` keeps the measurements whose name contains `TEXT` (for
//! profiling one of them; the CSV then holds those only).
//!
//! Each measurement runs `GPUSTACK_BENCH_RUNS` times (default 30), or fewer (at least 3)
//! once it has taken 20 s; the runs taken are in the output. Prints a table and writes
//! `book/src/scaling.csv` (or `GPUSTACK_SCALE_CSV`), one row per factor and measurement,
//! for `scripts/plot-scaling.py`. No timing is asserted: targets live here, not in tests.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use gpustack::synth::{scaled_catalog, version_counts, WORST_CASE_SPEC};
use gpustack::Catalog;

mod common;
use common::{cold, ms, stats};

/// The example specs timed at every factor.
const SPECS: &[&str] = &[
    "a100-pytorch",
    "vllm-rtx4090-driver550",
    "a100-extras",
    "h100-ib-train-serve",
];

/// Stop repeating a measurement after this long (once it has 3 runs).
const BUDGET: Duration = Duration::from_secs(20);

/// Runs `f` up to `runs` times (at least 3 unless `runs` is smaller, fewer once
/// [`BUDGET`] is spent) and returns the durations.
fn measure(runs: usize, mut f: impl FnMut() -> Duration) -> Vec<Duration> {
    let start = Instant::now();
    let mut out = Vec::with_capacity(runs);
    while out.len() < runs {
        out.push(f());
        if out.len() >= 3 && start.elapsed() > BUDGET {
            break;
        }
    }
    out
}

fn main() {
    let runs: usize = std::env::var("GPUSTACK_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30)
        .max(1);
    let factors: Vec<usize> = std::env::var("GPUSTACK_SCALE_FACTORS")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 2, 5, 10, 20, 50, 100]);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let csv_path = std::env::var("GPUSTACK_SCALE_CSV")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| root.join("book/src/scaling.csv"));
    let specs: Vec<(String, String)> = SPECS
        .iter()
        .map(|s| {
            let text = std::fs::read_to_string(root.join(format!("fixtures/specs/{s}.toml")))
                .expect("example spec");
            ((*s).to_string(), text)
        })
        .collect();

    let upgrade =
        std::fs::read_to_string(root.join("fixtures/conflicts/vllm-cu13-needs-r580.toml"))
            .expect("conflict fixture");
    let mut csv = String::from("factor,versions,catalog_kib,measurement,runs,min_ms,median_ms\n");
    println!(
        "{:>6} {:>8} {:>10}  {:<32} {:>5} {:>11} {:>11}",
        "factor", "versions", "TOML KiB", "measurement", "runs", "min ms", "median ms"
    );
    for &factor in &factors {
        let files = scaled_catalog(factor);
        let kib = files.iter().map(|(_, t)| t.len()).sum::<usize>() / 1024;
        let layers = [files];
        let catalog = Catalog::from_layers(&layers).expect("the synthetic catalog loads");
        let versions: usize = version_counts(&catalog).iter().map(|(_, n)| n).sum();
        let only = std::env::var("GPUSTACK_SCALE_ONLY").unwrap_or_default();
        let wanted = |name: &str| name.contains(only.as_str());
        let mut row = |name: &str, times: Vec<Duration>| {
            let n = times.len();
            let (min, med) = stats(times);
            println!(
                "{factor:>6} {versions:>8} {kib:>10}  {name:<32} {n:>5} {:>11.3} {:>11.3}",
                ms(min),
                ms(med)
            );
            let _ = writeln!(
                csv,
                "{factor},{versions},{kib},{name},{n},{:.4},{:.4}",
                ms(min),
                ms(med)
            );
        };

        if wanted("load") {
            row(
                "load",
                measure(runs, || {
                    let t = Instant::now();
                    let c = Catalog::from_layers(&layers).unwrap();
                    let d = t.elapsed();
                    std::hint::black_box(c);
                    d
                }),
            );
        }
        for (name, text) in &specs {
            if !wanted(&format!("lock {name}")) {
                continue;
            }
            row(
                &format!("lock {name}"),
                measure(runs, || {
                    let t = Instant::now();
                    let l = gpustack::lock_spec(&catalog, "gpustack.toml", text).unwrap();
                    let d = t.elapsed();
                    std::hint::black_box(l);
                    d
                }),
            );
        }
        // `gen` reads the lock only: the catalog's size reaches it through the lock alone.
        if wanted("gen h100-ib-train-serve") {
            let (_, text) = specs
                .iter()
                .find(|(n, _)| n == "h100-ib-train-serve")
                .expect("the largest example spec");
            let lock = gpustack::lock_spec(&catalog, "gpustack.toml", text).unwrap();
            let targets = gpustack::plan::configured(&lock).render;
            row(
                "gen h100-ib-train-serve",
                measure(runs, || {
                    let t = Instant::now();
                    let r = gpustack::plan::generate_many(&lock, &targets).unwrap();
                    let d = t.elapsed();
                    std::hint::black_box(r);
                    d
                }),
            );
        }
        if wanted("cold lock a100-pytorch") {
            let dir = std::env::temp_dir()
                .join(format!("gpustack-bench-scale-{}", std::process::id()))
                .join(format!("x{factor}"));
            std::fs::create_dir_all(&dir).unwrap();
            for (name, text) in &layers[0] {
                let file = name.rsplit('/').next().unwrap();
                std::fs::write(dir.join(file), text).unwrap();
            }
            let spec = root.join("fixtures/specs/a100-pytorch.toml");
            row(
                "cold lock a100-pytorch",
                measure(runs, || {
                    cold(
                        Command::new(env!("CARGO_BIN_EXE_gpustack"))
                            .args(["lock", "--offline", "--spec"])
                            .arg(&spec)
                            .arg("--catalog")
                            .arg(&dir)
                            .args(["--out", "-"]),
                    )
                }),
            );
            let _ = std::fs::remove_dir_all(&dir);
        }
        if wanted("conflict vllm-cu13-needs-r580") {
            row(
                "conflict vllm-cu13-needs-r580",
                measure(runs, || {
                    let t = Instant::now();
                    let e = gpustack::lock_spec(&catalog, "gpustack.toml", &upgrade).unwrap_err();
                    let s = e.to_string();
                    let d = t.elapsed();
                    std::hint::black_box(s);
                    d
                }),
            );
        }
        if wanted("conflict worst-case") {
            row(
                "conflict worst-case",
                measure(runs, || {
                    let t = Instant::now();
                    let e = gpustack::lock_spec(&catalog, "gpustack.toml", WORST_CASE_SPEC)
                        .unwrap_err();
                    let s = e.to_string();
                    let d = t.elapsed();
                    std::hint::black_box(s);
                    d
                }),
            );
        }
    }
    std::fs::write(&csv_path, csv).expect("write the CSV");
    println!("wrote {}", csv_path.display());
    if std::env::var("GPUSTACK_SCALE_SHAPE").as_deref() != Ok("0") {
        shape(runs, root);
    }
}

/// GPU models of one stack, in the order the `gpus` axis adds them: x86_64 data-centre
/// GPUs that every current CUDA release supports, so each spec resolves.
const GPUS: &[&str] = &["a100", "h100", "l40s", "l4", "a10", "a30", "a40", "h200"];

/// The other two axes of the scale curve, on the stock catalog, in-process: `lock` (parse,
/// solve, build the lock) and `gen` (plan and render every configured target) against the
/// number of GPU models in `[hardware].gpus` (1, 2, 4, 8), and `gen` of
/// `h100-ib-train-serve`'s committed lock against the number of targets rendered (docker,
/// then apptainer, packer, k8s, slurm added one at a time). Written to
/// `book/src/scaling-shape.csv` (or `GPUSTACK_SCALE_SHAPE_CSV`); `GPUSTACK_SCALE_SHAPE=0`
/// skips it.
fn shape(runs: usize, root: &Path) {
    use gpustack::plan::Target;
    let csv_path = std::env::var("GPUSTACK_SCALE_SHAPE_CSV")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| root.join("book/src/scaling-shape.csv"));
    let catalog = Catalog::stock().expect("the stock catalog");
    let mut csv = String::from("axis,n,measurement,files,runs,min_ms,median_ms\n");
    println!();
    println!(
        "{:<8} {:>3}  {:<32} {:>5} {:>5} {:>11} {:>11}",
        "axis", "n", "measurement", "files", "runs", "min ms", "median ms"
    );
    let mut row = |axis: &str, n: usize, name: &str, files: usize, times: Vec<Duration>| {
        let runs = times.len();
        let (min, med) = stats(times);
        println!(
            "{axis:<8} {n:>3}  {name:<32} {files:>5} {runs:>5} {:>11.3} {:>11.3}",
            ms(min),
            ms(med)
        );
        let _ = writeln!(
            csv,
            "{axis},{n},{name},{files},{runs},{:.4},{:.4}",
            ms(min),
            ms(med)
        );
    };
    for n in [1, 2, 4, 8] {
        let gpus: Vec<String> = GPUS[..n].iter().map(|g| format!("\"{g}\"")).collect();
        let spec = format!(
            "[stack]\nname = \"gpus-{n}\"\nos = \"ubuntu22.04\"\n\n[hardware]\ngpus = [{}]\n\n[components]\ncuda = \"*\"\ncudnn = \"*\"\nnccl = \"*\"\npython = \"3.12\"\ntorch = \"*\"\n",
            gpus.join(", ")
        );
        let lock = gpustack::lock_spec(&catalog, "gpustack.toml", &spec)
            .unwrap_or_else(|e| panic!("{n} GPUs: {e}"));
        row(
            "gpus",
            n,
            "lock",
            0,
            measure(runs, || {
                let t = Instant::now();
                let l = gpustack::lock_spec(&catalog, "gpustack.toml", &spec).unwrap();
                let d = t.elapsed();
                std::hint::black_box(l);
                d
            }),
        );
        let targets = gpustack::plan::configured(&lock).render;
        let files = gpustack::plan::generate_many(&lock, &targets)
            .unwrap()
            .iter()
            .map(|(_, f)| f.len())
            .sum();
        row(
            "gpus",
            n,
            "gen",
            files,
            measure(runs, || {
                let t = Instant::now();
                let r = gpustack::plan::generate_many(&lock, &targets).unwrap();
                let d = t.elapsed();
                std::hint::black_box(r);
                d
            }),
        );
    }
    let text = std::fs::read_to_string(root.join("lockfiles/h100-ib-train-serve.lock"))
        .expect("the example lock");
    let lock = gpustack::Lock::parse("gpustack.lock", &text).expect("the example lock parses");
    for n in 1..=Target::ALL.len() {
        let targets = &Target::ALL[..n];
        let files = gpustack::plan::generate_many(&lock, targets)
            .unwrap()
            .iter()
            .map(|(_, f)| f.len())
            .sum();
        let name = targets
            .iter()
            .map(|t| t.name())
            .collect::<Vec<_>>()
            .join("+");
        row(
            "targets",
            n,
            &format!("gen {name}"),
            files,
            measure(runs, || {
                let t = Instant::now();
                let r = gpustack::plan::generate_many(&lock, targets).unwrap();
                let d = t.elapsed();
                std::hint::black_box(r);
                d
            }),
        );
    }
    std::fs::write(&csv_path, csv).expect("write the CSV");
    println!("wrote {}", csv_path.display());
}
