//! The re-lock fast path (`gpustack::generate::fresh`): an offline `gpustack lock` whose
//! spec, lock, pylock files, binary and flags are byte for byte those of an earlier run
//! that changed nothing answers from a cache entry, with that run's messages; anything
//! else, a hand edit above all, takes the full path and is reported exactly as without a
//! cache.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// `gpustack ARGS` in `dir`, offline, with the relock cache at `cache` (`""`: none).
fn lock(dir: &Path, cache: &Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gpustack"))
        .args(args)
        .current_dir(dir)
        .env("GPUSTACK_OFFLINE", "1")
        .env("GPUSTACK_CACHE_DIR", cache)
        .env("GPUSTACK_UV", "/nonexistent/uv")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The cache's entries.
fn entries(cache: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(cache.join("relock"))
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Marks every entry's messages, so that a run answered from the cache shows it.
fn mark(cache: &Path) {
    for e in entries(cache) {
        let t = std::fs::read_to_string(&e).unwrap();
        std::fs::write(&e, t.replace("text = \"", "text = \"(cached) ")).unwrap();
    }
}

/// The committed closed project, locked once without a cache (which rewrites it where the
/// committed lock trails the catalog), so that the next run changes nothing.
fn project(tag: &str) -> (PathBuf, PathBuf) {
    let dir = tempdir(tag);
    copy_dir(&root().join("fixtures/closed/h100-ib-train-serve"), &dir);
    let (code, err) = lock(&dir, Path::new(""), &["lock"]);
    assert_eq!(code, 0, "{err}");
    let cache = dir.join("cache");
    (dir, cache)
}

#[test]
fn an_unchanged_relock_answers_with_what_the_full_path_said() {
    let (dir, cache) = project("fast-same");
    let before = tree(&dir);
    let (code, full) = lock(&dir, &cache, &["lock"]);
    assert_eq!(code, 0, "{full}");
    assert!(
        full.contains("locked `llm-cluster` into gpustack.lock"),
        "{full}"
    );
    assert_eq!(entries(&cache).len(), 1, "an unchanged run records");
    let (code, fast) = lock(&dir, &cache, &["lock"]);
    assert_eq!((code, &fast), (0, &full));
    // `-q` leaves the progress line out, as the full path does.
    let (code, quiet) = lock(&dir, &cache, &["lock", "-q"]);
    assert_eq!((code, quiet.as_str()), (0, ""));
    // `--check` and `-v` are runs of their own.
    let (code, check) = lock(&dir, &cache, &["lock", "--check"]);
    assert_eq!((code, check.as_str()), (0, "gpustack.lock is up to date\n"));
    assert_eq!(entries(&cache).len(), 2);
    mark(&cache);
    let (code, fast) = lock(&dir, &cache, &["lock"]);
    assert_eq!(code, 0);
    assert!(fast.starts_with("(cached) locked"), "{fast}");
    let (_, check) = lock(&dir, &cache, &["lock", "--check"]);
    assert_eq!(check, "(cached) gpustack.lock is up to date\n");
    let mut after = tree(&dir);
    after.retain(|p, _| !p.starts_with("cache"));
    assert!(after == before, "nothing written");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn anything_but_the_same_bytes_and_flags_takes_the_full_path() {
    let (dir, cache) = project("fast-other");
    let no_cache = Path::new("");
    assert_eq!(lock(&dir, &cache, &["lock"]).0, 0);
    mark(&cache);
    // Flags that may change the answer never read the cache (`-v` says more: a run, and an
    // entry, of its own).
    for args in [
        &["lock", "--upgrade"][..],
        &["lock", "--upgrade-package", "torch"],
        &["lock", "--format", "json"],
        &["lock", "-v"],
    ] {
        let (code, err) = lock(&dir, &cache, args);
        assert!(!err.contains("(cached)"), "{args:?}: {code} {err}");
    }
    // A hand-edited pylock or lock: reported exactly as without a cache.
    let f = dir.join("pylock.training.toml");
    let text = std::fs::read_to_string(&f).unwrap();
    std::fs::write(&f, text.replacen("version = \"", "version = \"9", 1)).unwrap();
    let edited = lock(&dir, no_cache, &["lock"]);
    assert_eq!(edited.0, 2, "{}", edited.1);
    assert_eq!(lock(&dir, &cache, &["lock"]), edited);
    assert_eq!(lock(&dir, &cache, &["lock", "--check"]).0, 1);
    std::fs::write(&f, &text).unwrap();
    let l = dir.join("gpustack.lock");
    let text = std::fs::read_to_string(&l).unwrap();
    std::fs::write(&l, text.replacen("nodes = 8", "nodes = 9", 1)).unwrap();
    let edited = lock(&dir, no_cache, &["lock", "--check"]);
    assert_eq!(edited.0, 1, "{}", edited.1);
    assert_eq!(lock(&dir, &cache, &["lock", "--check"]), edited);
    std::fs::write(&l, &text).unwrap();
    // Back as it was: the recorded answer again.
    let (code, err) = lock(&dir, &cache, &["lock"]);
    assert_eq!(code, 0);
    assert!(err.contains("(cached)"), "{err}");
    // Another spec text (a comment): the full path, which records it in turn.
    let s = dir.join("gpustack.toml");
    let spec = std::fs::read_to_string(&s).unwrap();
    std::fs::write(&s, format!("{spec}# edited\n")).unwrap();
    let (code, err) = lock(&dir, &cache, &["lock"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("(cached)"), "{err}");
    assert_eq!(entries(&cache).len(), 3, "plain, `-v`, the edited spec");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_run_that_writes_records_nothing() {
    let dir = tempdir("fast-write");
    let cache = dir.join("cache");
    std::fs::copy(
        root().join("fixtures/specs/a100-pytorch.toml"),
        dir.join("gpustack.toml"),
    )
    .unwrap();
    assert_eq!(lock(&dir, &cache, &["lock"]).0, 0);
    assert!(
        entries(&cache).is_empty(),
        "a written lock proves nothing yet"
    );
    let (code, first) = lock(&dir, &cache, &["lock"]);
    assert_eq!(code, 0, "{first}");
    assert_eq!(entries(&cache).len(), 1);
    assert_eq!(lock(&dir, &cache, &["lock"]), (0, first));
    // No cache directory at all: the full path, every time.
    let none = lock(&dir, Path::new(""), &["lock"]);
    assert_eq!(none.0, 0);
    assert_eq!(entries(&cache).len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}
