//! `cargo bench --bench closure`: what the Python closure costs.
#![allow(clippy::print_stdout, clippy::print_stderr)]
//!
//! * offline re-lock of the committed closed lock (`fixtures/closed/h100-ib-train-serve`),
//!   unchanged inputs (target ≤ 5 ms cold): a `gpustack lock --offline` process, by the
//!   full path (no cache: it reads, verifies and hashes the four pylock files, solves
//!   keeping every pick, and reuses every pylock without running uv) and by the fast path
//!   (an earlier unchanged run's cache entry: `gpustack::generate::fresh`);
//! * the closure resolved from scratch (warm uv cache): `gpustack lock` online without a
//!   previous lock, against `uv pip compile` run by hand on the same per-layer inputs
//!   (same flags, one layer after the other), the baseline of issue 15 (target ≤ +10 %).
//!   The two alternate round by round (which goes first alternates too), so that load on
//!   a shared machine falls on both alike; each gpustack run's pylock files must be byte
//!   for byte the committed ones. Wall time and CPU time (user + system of the whole
//!   process tree, uv included: the figure load disturbs least) are reported.
//!
//! Needs uv 0.11.7 (GPUSTACK_UV, `.venv-validate/bin/uv` or PATH) and PyPI for the second
//! part; without them it says so and times only the first. `GPUSTACK_BENCH_RUNS` sets the
//! runs of the first part (default 30), `GPUSTACK_BENCH_ROUNDS` the rounds of the second
//! (default 5, after one warm-up round). Figures go to `book/src/performance.md` with the
//! machine and date.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

mod common;
use common::{children_cpu, ms, stats, timed};

fn copy(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
    }
}

fn uv(root: &Path) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("GPUSTACK_UV") {
        return Some(PathBuf::from(p));
    }
    let v = root.join(".venv-validate/bin/uv");
    v.is_file().then_some(v)
}

/// `min / median` of wall and CPU times.
fn report(what: &str, v: &[(Duration, Duration)], unit: f64) {
    let (w, c): (Vec<_>, Vec<_>) = v.iter().copied().unzip();
    let ((wmin, wmed), (cmin, cmed)) = (stats(w), stats(c));
    println!(
        "{what:<46} wall min {:9.2} median {:9.2} | CPU min {:9.2} median {:9.2} {}",
        ms(wmin) / unit,
        ms(wmed) / unit,
        ms(cmin) / unit,
        ms(cmed) / unit,
        if unit > 1.0 { "s" } else { "ms" }
    );
}

fn main() {
    let runs = common::runs();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin = &common::bin();
    let fixture = root.join("fixtures/closed/h100-ib-train-serve");
    let dir = std::env::temp_dir().join(format!("gpustack-bench-closure-{}", std::process::id()));
    let cache = std::env::temp_dir().join(format!("gpustack-bench-cache-{}", std::process::id()));

    copy(&fixture, &dir);
    let relock = |cache: &Path| {
        let mut c = Command::new(bin);
        c.args(["lock", "--offline"])
            .current_dir(&dir)
            .env_remove("GPUSTACK_UV")
            .env("GPUSTACK_CACHE_DIR", cache);
        c
    };
    let full: Vec<_> = (0..runs)
        .map(|_| timed(&mut relock(Path::new(""))))
        .collect();
    timed(&mut relock(&cache)); // records the entry
    let fast: Vec<_> = (0..runs).map(|_| timed(&mut relock(&cache))).collect();
    for f in std::fs::read_dir(&fixture).unwrap() {
        let f = f.unwrap().path();
        let name = f.file_name().unwrap();
        assert_eq!(
            std::fs::read(&f).unwrap(),
            std::fs::read(dir.join(name)).unwrap(),
            "a re-lock changed {name:?}"
        );
    }
    report("offline re-lock, closed lock, full path", &full, 1.0);
    report("offline re-lock, closed lock, fast path", &fast, 1.0);
    let _ = std::fs::remove_dir_all(&cache);

    let Some(uv) = uv(root) else {
        println!(
            "closure from scratch: skipped (no uv 0.11.7: set GPUSTACK_UV or run tests/run.sh)"
        );
        return;
    };
    let rounds: usize = std::env::var("GPUSTACK_BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for i in 0..=rounds {
        let (o, t) = if i % 2 == 0 {
            let o = gpustack_from_scratch(bin, &uv, &fixture, &dir);
            (o, uv_by_hand(&uv, &fixture, &dir))
        } else {
            let t = uv_by_hand(&uv, &fixture, &dir);
            (gpustack_from_scratch(bin, &uv, &fixture, &dir), t)
        };
        let Some(o) = o else {
            println!("closure from scratch: skipped (`gpustack lock` failed; is PyPI reachable?)");
            return;
        };
        // The first round warms uv's cache.
        if i > 0 {
            ours.push(o);
            theirs.push(t);
        }
    }
    report("closure from scratch, gpustack lock (warm)", &ours, 1e3);
    report("uv pip compile per layer, by hand (warm)", &theirs, 1e3);
    let med = |v: &[(Duration, Duration)], cpu: bool| {
        let mut x: Vec<Duration> = v.iter().map(|p| if cpu { p.1 } else { p.0 }).collect();
        x.sort();
        x[x.len() / 2].as_secs_f64()
    };
    println!(
        "ratio of medians                               wall {:.2} | CPU {:.2}",
        med(&ours, false) / med(&theirs, false),
        med(&ours, true) / med(&theirs, true)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `gpustack lock` online from the spec alone; its pylock files must be the committed ones.
fn gpustack_from_scratch(
    bin: &str,
    uv: &Path,
    fixture: &Path,
    dir: &Path,
) -> Option<(Duration, Duration)> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    std::fs::copy(fixture.join("gpustack.toml"), dir.join("gpustack.toml")).unwrap();
    let cpu = children_cpu();
    let t = std::time::Instant::now();
    let st = Command::new(bin)
        .args(["lock", "-q"])
        .current_dir(dir)
        .env("GPUSTACK_UV", uv)
        .env_remove("GPUSTACK_OFFLINE")
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    let d = (t.elapsed(), children_cpu().saturating_sub(cpu));
    if !st.success() {
        return None;
    }
    for e in std::fs::read_dir(fixture).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("pylock.") {
            assert!(
                std::fs::read(&p).unwrap() == std::fs::read(dir.join(&name)).unwrap(),
                "{name} differs from the committed one"
            );
        }
    }
    Some(d)
}

/// `uv pip compile` of each layer's own inputs, one after the other.
fn uv_by_hand(uv: &Path, fixture: &Path, dir: &Path) -> (Duration, Duration) {
    let text = std::fs::read_to_string(fixture.join("gpustack.lock")).unwrap();
    let lock = gpustack::Lock::parse("gpustack.lock", &text).unwrap();
    let py = lock.python.as_ref().unwrap();
    let python = lock
        .component(gpustack::Component::Python)
        .unwrap()
        .version
        .to_string();
    let platform = py.files[0].platform.clone();
    let inputs = gpustack::resolve::python::inputs(&lock);
    let cpu = children_cpu();
    let t = std::time::Instant::now();
    for input in &inputs {
        let d = dir.join(format!("uv-{}", input.layer));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("pyproject.toml"),
            gpustack::resolve::python::pyproject(input, &python, &Default::default()),
        )
        .unwrap();
        let st = Command::new(uv)
            .args(["pip", "compile", "pyproject.toml"])
            .args(gpustack::resolve::python::compile_args(
                input,
                &platform,
                &python,
                &py.exclude_newer,
                gpustack::resolve::python::PYPI,
            ))
            .current_dir(&d)
            .env("UV_PYTHON_DOWNLOADS", "never")
            .status()
            .unwrap();
        assert!(st.success());
    }
    (t.elapsed(), children_cpu().saturating_sub(cpu))
}
