//! `cargo bench --bench closure`: what the Python closure costs.
#![allow(clippy::print_stdout, clippy::print_stderr)]
//!
//! * offline re-lock of the committed closed lock (`fixtures/closed/h100-ib-train-serve`),
//!   unchanged inputs: a cold `gpustack lock --offline` process, which reuses every pylock
//!   (target ≤ 5 ms);
//! * the closure resolved from scratch (warm uv cache): `gpustack lock` online without a
//!   previous lock, against `uv pip compile` run by hand on the same per-layer inputs
//!   (same flags, one layer after the other), the baseline of issue 15 (target ≤ +10 %).
//!
//! Needs uv 0.11.7 (GPUSTACK_UV, `.venv-validate/bin/uv` or PATH) and PyPI for the second
//! part; without them it says so and times only the first. Figures go to
//! `book/src/performance.md` with the machine and date.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod common;
use common::{cold, ms, stats};

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

fn main() {
    let runs = common::runs();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin = env!("CARGO_BIN_EXE_gpustack");
    let fixture = root.join("fixtures/closed/h100-ib-train-serve");
    let dir = std::env::temp_dir().join(format!("gpustack-bench-closure-{}", std::process::id()));

    copy(&fixture, &dir);
    let relock: Vec<Duration> = (0..runs)
        .map(|_| {
            cold(
                Command::new(bin)
                    .args(["lock", "--offline"])
                    .current_dir(&dir)
                    .env_remove("GPUSTACK_UV"),
            )
        })
        .collect();
    let (min, med) = stats(relock);
    println!(
        "offline re-lock, unchanged inputs (cold)     min {:8.3} ms  median {:8.3} ms",
        ms(min),
        ms(med)
    );

    let Some(uv) = uv(root) else {
        println!(
            "closure from scratch: skipped (no uv 0.11.7: set GPUSTACK_UV or run tests/run.sh)"
        );
        return;
    };
    let rounds = 5;
    // gpustack: the closure of every layer, from nothing (the first round warms uv's cache).
    let mut ours = Vec::new();
    for i in 0..=rounds {
        copy(&fixture, &dir);
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("pylock.")
                || p.ends_with("gpustack.lock")
            {
                std::fs::remove_file(p).unwrap();
            }
        }
        let t = Instant::now();
        let st = Command::new(bin)
            .arg("lock")
            .current_dir(&dir)
            .env("GPUSTACK_UV", &uv)
            .status()
            .unwrap();
        let d = t.elapsed();
        if !st.success() {
            println!("closure from scratch: skipped (`gpustack lock` failed; is PyPI reachable?)");
            return;
        }
        if i > 0 {
            ours.push(d);
        }
    }
    // uv by hand: each layer's own inputs, one `uv pip compile` after the other.
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
    let mut theirs = Vec::new();
    for i in 0..=rounds {
        let t = Instant::now();
        for input in &inputs {
            let d = dir.join(format!("uv-{}", input.layer));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(
                d.join("pyproject.toml"),
                gpustack::resolve::python::pyproject(input, &python, &Default::default()),
            )
            .unwrap();
            let st = Command::new(&uv)
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
        if i > 0 {
            theirs.push(t.elapsed());
        }
    }
    let (omin, omed) = stats(ours);
    let (tmin, tmed) = stats(theirs);
    println!(
        "closure from scratch, gpustack lock (warm)   min {:8.1} ms  median {:8.1} ms",
        ms(omin),
        ms(omed)
    );
    println!(
        "uv pip compile per layer, by hand (warm)     min {:8.1} ms  median {:8.1} ms",
        ms(tmin),
        ms(tmed)
    );
    println!(
        "ratio (median)                               {:.2}",
        omed.as_secs_f64() / tmed.as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
