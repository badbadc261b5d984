//! Lock evolution within a version (book/src/lockfile.md, "Compatibility"): a lock without
//! `revision` is revision 0 and reads as before; a lock of a newer revision of the same
//! version reads, its unknown `[request]` keys skipped; a newer version is refused by name.

mod common;

use common::*;
use gpustack::Lock;

fn read(rel: &str) -> (String, Lock) {
    let path = root().join(rel);
    let text = std::fs::read_to_string(&path).unwrap();
    let lock = Lock::parse(rel, &text).unwrap_or_else(|e| panic!("{rel}: {e}"));
    (text, lock)
}

#[test]
fn a_lock_without_revision_reads_as_revision_0_and_generates_the_same_files() {
    // The committed lock with its `revision` line removed: what a writer before revisions
    // wrote (the seal does not cover `revision`); regenerated when the committed lock changes.
    let (text, old) = read("fixtures/lockfiles/v4/h100-ib-train-serve-revision0.lock");
    assert!(!text.contains("\nrevision ="));
    let (_, now) = read("lockfiles/h100-ib-train-serve.lock");
    assert_eq!(old.revision, 0);
    assert_eq!(now.revision, gpustack::lock::LOCK_REVISION);
    assert_eq!(old.verify(), vec![]);
    // The same content: only the revision line differs, and every output is the same.
    assert_eq!(old.to_toml(), now.to_toml());
    let all = gpustack::plan::Target::ALL;
    let a = gpustack::plan::generate_many(&old, &all).unwrap();
    let b = gpustack::plan::generate_many(&now, &all).unwrap();
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
}

#[test]
fn a_newer_revision_reads_with_its_unknown_request_keys_skipped() {
    let (text, newer) = read("fixtures/lockfiles/newer/h100-ib-train-serve-revision99.lock");
    assert!(text.contains("revision = 99\n"));
    assert!(text.contains("rail_groups = 4\n") && text.contains("[request.future-table]"));
    let (_, now) = read("lockfiles/h100-ib-train-serve.lock");
    assert_eq!(newer.revision, 99);
    assert_eq!(newer.request, now.request);
    assert_eq!(newer.components, now.components);
    assert_eq!(newer.packages, now.packages);
    assert_eq!(newer.layers, now.layers);
}

#[test]
fn an_unknown_request_key_in_a_known_revision_is_still_an_error() {
    let (text, _) = read("fixtures/lockfiles/newer/h100-ib-train-serve-revision99.lock");
    let current = format!("revision = {}\n", gpustack::lock::LOCK_REVISION);
    let text = text.replace("revision = 99\n", &current);
    let err = Lock::parse("gpustack.lock", &text).unwrap_err().to_string();
    assert!(
        err.contains("unknown field `rail_groups`") && err.contains("gpustack.lock:32:1"),
        "{err}"
    );
    // At the top of `[request]` too.
    let text = text
        .replace("rail_groups = 4\n", "")
        .replace("[request.future-table]\nkey = \"a table a newer spec added\"\nnested = { deeper = true }\n\n", "");
    let err = Lock::parse("gpustack.lock", &text).unwrap_err().to_string();
    assert!(err.contains("unknown field `future-option`"), "{err}");
    // And the spec keeps rejecting unknown keys whatever a lock may hold.
    let cat = gpustack::Catalog::stock().unwrap();
    let spec = "[stack]\nname = \"t\"\n[hardware]\ngpus = [\"h100\"]\n[components]\ntorch = \"*\"\n[cluster]\nfabric = \"infiniband\"\nnodes = 2\ngpus_per_node = 8\nrail_groups = 4\n";
    let err = gpustack::Spec::parse("gpustack.toml", spec, &cat)
        .unwrap_err()
        .to_string();
    assert!(err.contains("rail_groups"), "{err}");
}

#[test]
fn a_newer_version_is_refused_with_both_versions_and_a_hint() {
    let (text, _) = read("lockfiles/h100-ib-train-serve.lock");
    let text = text.replacen(
        &format!("version = {}\n", gpustack::lock::LOCK_VERSION),
        "version = 99\n",
        1,
    );
    let err = Lock::parse("gpustack.lock", &text).unwrap_err().to_string();
    assert!(
        err.contains(&format!(
            "unsupported lockfile version 99 (this gpustack reads versions 1 to {})",
            gpustack::lock::LOCK_VERSION
        )),
        "{err}"
    );
    assert!(err.contains("upgrade gpustack"), "{err}");
}

#[test]
fn a_revision_must_be_a_non_negative_integer() {
    let (text, _) = read("lockfiles/h100-ib-train-serve.lock");
    let text = text.replacen("revision = 1\n", "revision = \"1\"\n", 1);
    let err = Lock::parse("gpustack.lock", &text).unwrap_err().to_string();
    assert!(
        err.contains("lockfile `revision` must be a non-negative integer"),
        "{err}"
    );
}
