//! Stable re-locks (issue 15), like Cargo's and uv's: `gpustack lock` keeps every pick of
//! the existing lock that still fits the spec and the catalog; `--upgrade` re-resolves
//! all, `--upgrade-package NAME` one; an unchanged re-lock offline writes the same bytes.

mod common;

use common::*;
use gpustack::Lock;

const SPEC: &str = "[stack]\nname = \"relock\"\nos = \"ubuntu22.04\"\n\n[hardware]\narchs = [\"sm_80\"]\ndriver = \"535.183.06\"\n\n[components]\ncuda = \"12.4\"\ncudnn = \"*\"\nnccl = \"*\"\npython = \"3.11\"\ntorch = \"TORCH\"\n";

fn lock_in(dir: &std::path::Path, torch: &str, extra: &[&str]) -> (Output, Option<Lock>) {
    std::fs::write(dir.join("gpustack.toml"), SPEC.replace("TORCH", torch)).unwrap();
    let mut args = vec!["lock", "--offline"];
    args.extend_from_slice(extra);
    let out = run_in(dir, &args);
    let lock = std::fs::read_to_string(dir.join("gpustack.lock"))
        .ok()
        .map(|t| Lock::parse("gpustack.lock", &t).unwrap());
    (out, lock)
}

fn torch(lock: &Lock) -> String {
    lock.component(gpustack::Component::Torch)
        .unwrap()
        .version
        .to_string()
}

#[test]
fn relocks_keep_picks_until_told_to_upgrade() {
    let dir = tempdir("relock");
    // A lock taken while the spec allowed torch 2.4 only.
    let (out, old) = lock_in(&dir, ">=2.4, <2.5", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let old = old.unwrap();
    assert!(torch(&old).starts_with("2.4."), "{}", torch(&old));
    // The spec now allows 2.5 too: the locked 2.4 still fits, and is kept, saying so.
    let (out, kept) = lock_in(&dir, ">=2.4, <2.6", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let kept = kept.unwrap();
    assert_eq!(torch(&kept), torch(&old));
    let t = kept.component(gpustack::Component::Torch).unwrap();
    assert!(
        t.because
            .iter()
            .any(|b| b.contains("kept from the existing lock")
                && b.contains("--upgrade-package torch")),
        "{:?}",
        t.because
    );
    for c in &old.components {
        assert_eq!(
            kept.component(c.name).map(|k| &k.version),
            Some(&c.version),
            "{} moved",
            c.name.name()
        );
    }
    // The kept lock is what `lock --check` and `check` expect: not stale.
    let out = run_in(&dir, &["lock", "--check"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let out = run_in(&dir, &["check"]);
    assert!(!out.stdout.contains("[stale"), "{}", out.stdout);
    // Unchanged inputs, offline: the same bytes.
    let before = std::fs::read_to_string(dir.join("gpustack.lock")).unwrap();
    let (out, _) = lock_in(&dir, ">=2.4, <2.6", &[]);
    assert_eq!(out.code, 0);
    assert_eq!(
        std::fs::read_to_string(dir.join("gpustack.lock")).unwrap(),
        before
    );
    // `--upgrade-package torch` takes the newest torch that fits, and is what a fresh
    // lock takes.
    let (out, up) = lock_in(&dir, ">=2.4, <2.6", &["--upgrade-package", "torch"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let up = up.unwrap();
    assert!(torch(&up).starts_with("2.5."), "{}", torch(&up));
    let fresh = gpustack::lock_spec(
        &gpustack::Catalog::stock().unwrap(),
        "gpustack.toml",
        &SPEC.replace("TORCH", ">=2.4, <2.6"),
    )
    .unwrap();
    assert_eq!(torch(&up), torch(&fresh));
    // `--upgrade` re-resolves everything: the fresh lock's picks.
    lock_in(&dir, ">=2.4, <2.5", &["--upgrade"]);
    let (out, all) = lock_in(&dir, ">=2.4, <2.6", &["--upgrade"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(all.unwrap().components, fresh.components);
    // A pick the spec no longer allows gives way.
    let (out, narrowed) = lock_in(&dir, ">=2.4, <2.5", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(torch(&narrowed.unwrap()).starts_with("2.4."));
}

#[test]
fn upgrade_package_names_a_component_of_the_lock() {
    let dir = tempdir("relock-bad");
    let (out, _) = lock_in(&dir, ">=2.4, <2.6", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let before = std::fs::read_to_string(dir.join("gpustack.lock")).unwrap();
    let (out, _) = lock_in(&dir, ">=2.4, <2.6", &["--upgrade-package", "troch"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("`--upgrade-package troch`: the existing lock has no component or Python package `troch`")
            && out.stderr.contains("hint: did you mean `torch`?"),
        "{}",
        out.stderr
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("gpustack.lock")).unwrap(),
        before
    );
}
