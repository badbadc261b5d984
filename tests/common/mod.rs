//! Shared helpers for the integration tests: run the binary, compare with snapshots.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `GPUSTACK_BLESS=1 cargo test` rewrites snapshots instead of comparing.
pub(crate) fn bless() -> bool {
    std::env::var_os("GPUSTACK_BLESS").is_some_and(|v| v == "1")
}

pub(crate) struct Output {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

pub(crate) fn run_in(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_gpustack"))
        .args(args)
        .current_dir(dir)
        .env_remove("GPUSTACK_DEBUG")
        .output()
        .expect("run gpustack");
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Compares `actual` with the file at `path`, or writes it when blessing. Returns a
/// failure description instead of panicking so a test can report every mismatch.
pub(crate) fn check_snapshot(path: &Path, actual: &str) -> Option<String> {
    if bless() {
        std::fs::write(path, actual).expect("write snapshot");
        return None;
    }
    match std::fs::read_to_string(path) {
        Ok(expected) if expected == actual => None,
        Ok(expected) => Some(format!("{} differs:\n{}", path.display(), diff(&expected, actual))),
        Err(_) => Some(format!("{} is missing; run `GPUSTACK_BLESS=1 cargo test` to create it\n--- actual ---\n{actual}", path.display())),
    }
}

pub(crate) fn diff(expected: &str, actual: &str) -> String {
    let e: Vec<&str> = expected.lines().collect();
    let a: Vec<&str> = actual.lines().collect();
    let mut out = String::new();
    for i in 0..e.len().max(a.len()) {
        let (x, y) = (e.get(i), a.get(i));
        if x != y {
            out.push_str(&format!(
                "line {}:\n  - {}\n  + {}\n",
                i + 1,
                x.unwrap_or(&"<none>"),
                y.unwrap_or(&"<none>")
            ));
            if out.len() > 3000 {
                break;
            }
        }
    }
    out
}

/// Every file under `dir` with its contents, for "nothing was written" checks.
pub(crate) fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let e = e.unwrap();
        if e.file_type().is_file() {
            out.insert(
                e.path().strip_prefix(dir).unwrap().to_path_buf(),
                std::fs::read(e.path()).unwrap(),
            );
        }
    }
    out
}

pub(crate) fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gpustack-test-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub(crate) fn copy_dir(from: &Path, to: &Path) {
    for e in walkdir::WalkDir::new(from).sort_by_file_name() {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(from).unwrap();
        let dst = to.join(rel);
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&dst).unwrap();
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}

pub(crate) fn sorted_files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}
