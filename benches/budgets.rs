//! `cargo bench --bench budgets`: the speed and memory budgets of issue 35, each printed
//! with its measured figure and whether it is met. Budgets live here, never in timed tests.
#![allow(clippy::print_stdout, clippy::print_stderr)]
//!
//! * cold `gpustack lock --offline --spec S --out -` on every example spec: median ≤ 5 ms;
//! * cold `gpustack gen all --lock L --out DIR` on every example lock: median ≤ 5 ms;
//! * the re-lock fast path (`gpustack lock --offline` over its own lock, inputs unchanged,
//!   a cache entry recorded): median ≤ 5 ms;
//! * `lock` + `gen all` of `h100-ib-train-serve` ≤ 1/20 of hpccm generating one
//!   comparable Dockerfile (`benches/hpccm/recipe.py`), measured side by side: each round
//!   runs hpccm and gpustack's pair one after the other, alternating which goes first, so
//!   that load falls on both alike. hpccm is `GPUSTACK_BENCH_HPCCM`, else
//!   `target/bench-venv/hpccm/bin/hpccm`, else `hpccm` on `PATH`; without it the
//!   comparison is skipped, loudly;
//! * peak resident memory (`wait4`'s `ru_maxrss`, what `/usr/bin/time -v` prints) of
//!   `lock`, `gen all` and `check` on every example project, reported (no budget).
//!
//! Medians of `GPUSTACK_BENCH_RUNS` runs (default 30), wall and CPU (user + system: the
//! figure machine load disturbs least), taken round-robin over the projects, so that a
//! slow minute of the machine falls on every project alike. The machine's load average is printed first and
//! last: a budget missed under load says little; `book/src/performance.md` records the
//! figures with the machine, date and load. `GPUSTACK_BENCH_ENFORCE=1` makes a missed
//! budget exit 1 (for a quiet machine; never in CI).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

mod common;
use common::{measured, ms, Run};

/// Median of a list of durations.
fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Median wall, median CPU and the largest peak memory of a set of runs.
fn summary(runs: &[Run]) -> (Duration, Duration, u64) {
    (
        median(runs.iter().map(|r| r.wall).collect()),
        median(runs.iter().map(|r| r.cpu).collect()),
        runs.iter().map(|r| r.max_rss_kib).max().unwrap_or(0),
    )
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(
        |_| "unknown".into(),
        |s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    )
}

/// The hpccm executable, if one is installed.
fn hpccm(root: &Path) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("GPUSTACK_BENCH_HPCCM") {
        return Some(PathBuf::from(p));
    }
    let venv = root.join("target/bench-venv/hpccm/bin/hpccm");
    if venv.is_file() {
        return Some(venv);
    }
    let ok = Command::new("hpccm")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then(|| PathBuf::from("hpccm"))
}

struct Verdicts(Vec<(String, String, bool)>);

impl Verdicts {
    fn add(&mut self, what: impl Into<String>, measured: String, met: bool) {
        self.0.push((what.into(), measured, met));
    }
}

#[allow(clippy::too_many_lines)]
fn main() {
    let runs = common::runs();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin = &common::bin();
    let budget = Duration::from_millis(5);
    let mut specs: Vec<_> = std::fs::read_dir(root.join("fixtures/specs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    specs.sort();
    println!("load average at start: {}", load());
    println!("{runs} runs each; medians, wall (CPU) in ms; peak resident memory in MiB");
    println!(
        "{:<26} {:>16} {:>16} {:>16} {:>9} {:>9} {:>9}",
        "project", "lock", "gen all", "re-lock fast", "lock MiB", "gen MiB", "check MiB"
    );
    let scratch =
        std::env::temp_dir().join(format!("gpustack-bench-budgets-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let mut worst: [(Duration, String); 3] =
        std::array::from_fn(|_| (Duration::ZERO, String::new()));
    let mut rss: [(u64, String); 3] = std::array::from_fn(|_| (0, String::new()));
    // Every project's commands, primed; then the measured runs round-robin over the
    // projects (one `lock`, `gen all` and re-lock of each per round), so that a slow
    // minute of this VM (its speed drifts by 15-20 %) falls on every project alike
    // instead of on the few measured then.
    struct Project {
        name: String,
        lock: Command,
        gen: Command,
        relock: Command,
        check: Run,
        runs: [Vec<Run>; 3],
    }
    let cache = scratch.join("cache");
    let mut projects: Vec<Project> = specs
        .iter()
        .map(|spec| {
            let name = spec.file_stem().unwrap().to_string_lossy().into_owned();
            let lock_path = root.join(format!("lockfiles/{name}.lock"));
            let mut lock = Command::new(bin);
            lock.args(["lock", "--offline", "--spec"])
                .arg(spec)
                .args(["--out", "-"]);
            let mut gen = Command::new(bin);
            gen.args(["gen", "all", "--lock"])
                .arg(&lock_path)
                .arg("--out")
                .arg(scratch.join(format!("gen-{name}")));
            // The first run writes; the measured ones find every file up to date, as a
            // re-run in CI does (book/src/performance.md, "What durability costs").
            measured(&mut gen, 0);
            let mut relock = Command::new(bin);
            relock
                .args(["lock", "--offline", "--spec"])
                .arg(spec)
                .arg("--out")
                .arg(scratch.join(format!("{name}.lock")))
                .env("GPUSTACK_CACHE_DIR", &cache);
            // Writes the lock, then records the cache entry the measured runs answer from.
            measured(&mut relock, 0);
            measured(&mut relock, 0);
            let check = measured(
                Command::new(bin)
                    .arg("check")
                    .arg("--spec")
                    .arg(spec)
                    .arg("--lock")
                    .arg(&lock_path)
                    .arg("--out")
                    .arg(root.join(format!("fixtures/gen/{name}"))),
                0,
            );
            Project {
                name,
                lock,
                gen,
                relock,
                check,
                runs: [Vec::new(), Vec::new(), Vec::new()],
            }
        })
        .collect();
    for _ in 0..runs {
        for p in &mut projects {
            p.runs[0].push(measured(&mut p.lock, 0));
            p.runs[1].push(measured(&mut p.gen, 0));
            p.runs[2].push(measured(&mut p.relock, 0));
        }
    }
    for p in &projects {
        let name = &p.name;
        let (lw, lc, lr) = summary(&p.runs[0]);
        let (gw, gc, gr) = summary(&p.runs[1]);
        let (fw, fc, _) = summary(&p.runs[2]);
        for (i, w) in [lw, gw, fw].into_iter().enumerate() {
            if w > worst[i].0 {
                worst[i] = (w, name.clone());
            }
        }
        for (i, r) in [lr, gr, p.check.max_rss_kib].into_iter().enumerate() {
            if r > rss[i].0 {
                rss[i] = (r, name.clone());
            }
        }
        let mib = |k: u64| k as f64 / 1024.0;
        println!(
            "{name:<26} {:>7.2} ({:>5.2}) {:>7.2} ({:>5.2}) {:>7.2} ({:>5.2}) {:>9.1} {:>9.1} {:>9.1}",
            ms(lw),
            ms(lc),
            ms(gw),
            ms(gc),
            ms(fw),
            ms(fc),
            mib(lr),
            mib(gr),
            mib(p.check.max_rss_kib)
        );
    }
    let _ = std::fs::remove_dir_all(&scratch);
    let mut verdicts = Verdicts(Vec::new());
    for (i, what) in [
        "cold `lock`, every example spec, median ≤ 5 ms",
        "`gen all`, every example lock, median ≤ 5 ms",
        "re-lock fast path, every example spec, median ≤ 5 ms",
    ]
    .into_iter()
    .enumerate()
    {
        let (w, n) = &worst[i];
        verdicts.add(
            what,
            format!("slowest {:.2} ms ({n})", ms(*w)),
            *w <= budget,
        );
    }

    // lock + gen all against hpccm, side by side.
    let spec = root.join("fixtures/specs/h100-ib-train-serve.toml");
    let lock_path = root.join("lockfiles/h100-ib-train-serve.lock");
    let recipe = root.join("benches/hpccm/recipe.py");
    let out = std::env::temp_dir().join(format!("gpustack-bench-hpccm-{}", std::process::id()));
    match hpccm(root) {
        None => {
            println!();
            println!("!!! hpccm SKIPPED: not installed. `python3 -m venv target/bench-venv/hpccm && target/bench-venv/hpccm/bin/pip install hpccm`, or set GPUSTACK_BENCH_HPCCM");
            verdicts.add(
                "`lock` + `gen all` ≤ 1/20 of hpccm (h100-ib-train-serve)",
                "SKIPPED: hpccm not installed".into(),
                false,
            );
        }
        Some(hpccm) => {
            let version = Command::new(&hpccm)
                .arg("--version")
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .unwrap_or_default();
            let mut ours = Vec::new();
            let mut theirs = Vec::new();
            let gen = || {
                let mut c = Command::new(bin);
                c.args(["gen", "all", "--lock"])
                    .arg(&lock_path)
                    .arg("--out")
                    .arg(&out);
                c
            };
            measured(&mut gen(), 0);
            for round in 0..runs {
                let pair = || {
                    let l = measured(
                        Command::new(bin)
                            .args(["lock", "--offline", "--spec"])
                            .arg(&spec)
                            .args(["--out", "-"]),
                        0,
                    );
                    let g = measured(&mut gen(), 0);
                    (l.wall + g.wall, l.cpu + g.cpu)
                };
                let theirs_once = || {
                    let r = measured(
                        Command::new(&hpccm)
                            .arg("--recipe")
                            .arg(&recipe)
                            .args(["--format", "docker"]),
                        0,
                    );
                    (r.wall, r.cpu)
                };
                if round % 2 == 0 {
                    ours.push(pair());
                    theirs.push(theirs_once());
                } else {
                    theirs.push(theirs_once());
                    ours.push(pair());
                }
            }
            let _ = std::fs::remove_dir_all(&out);
            let (ow, oc): (Vec<_>, Vec<_>) = ours.into_iter().unzip();
            let (tw, tc): (Vec<_>, Vec<_>) = theirs.into_iter().unzip();
            let (ow, oc, tw, tc) = (median(ow), median(oc), median(tw), median(tc));
            println!();
            println!("side by side, h100-ib-train-serve, {runs} interleaved rounds, medians:");
            println!(
                "  gpustack lock + gen all   {:>8.2} ms wall {:>8.2} ms CPU",
                ms(ow),
                ms(oc)
            );
            println!(
                "  hpccm {version:<10} recipe   {:>8.2} ms wall {:>8.2} ms CPU",
                ms(tw),
                ms(tc)
            );
            println!(
                "  ratio                     1/{:.1} wall   1/{:.1} CPU",
                tw.as_secs_f64() / ow.as_secs_f64(),
                tc.as_secs_f64() / oc.as_secs_f64().max(1e-9)
            );
            verdicts.add(
                "`lock` + `gen all` ≤ 1/20 of hpccm (h100-ib-train-serve)",
                format!(
                    "{:.2} vs {:.2} ms wall: 1/{:.1}",
                    ms(ow),
                    ms(tw),
                    tw.as_secs_f64() / ow.as_secs_f64()
                ),
                ow * 20 <= tw,
            );
        }
    }

    println!();
    println!(
        "peak resident memory, largest over the example projects: lock {:.1} MiB ({}), gen all {:.1} MiB ({}), check {:.1} MiB ({})",
        rss[0].0 as f64 / 1024.0,
        rss[0].1,
        rss[1].0 as f64 / 1024.0,
        rss[1].1,
        rss[2].0 as f64 / 1024.0,
        rss[2].1
    );
    println!();
    println!("budgets:");
    for (what, got, met) in &verdicts.0 {
        println!(
            "  {:<7} {what}: {got}",
            if *met { "MET" } else { "NOT MET" }
        );
    }
    println!("load average at end: {}", load());
    if std::env::var_os("GPUSTACK_BENCH_ENFORCE").is_some_and(|v| v == "1")
        && verdicts.0.iter().any(|(_, _, met)| !met)
    {
        std::process::exit(1);
    }
}
