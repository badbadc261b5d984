//! Lockfile round trips and the compatibility corpus.
//!
//! * every committed lock parses and writes back byte-identically (`write(parse(t)) == t`);
//! * every lock in `fixtures/lockfiles/v1/` (the format as released) still parses;
//! * a lock is rejected with "unsupported lockfile version" when its version is unknown.

mod common;

use common::*;
use gpustack::Lock;

#[test]
fn committed_locks_round_trip() {
    let root = root();
    let locks = sorted_files(&root.join("lockfiles"), "lock");
    assert!(!locks.is_empty());
    for path in locks {
        let text = std::fs::read_to_string(&path).unwrap();
        let lock = Lock::parse(&path.display().to_string(), &text)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            lock.to_toml(),
            text,
            "{} does not round-trip",
            path.display()
        );
        assert_eq!(Lock::parse("again", &lock.to_toml()).unwrap(), lock);
        assert_eq!(lock.verify(), vec![], "{}", path.display());
    }
}

#[test]
fn v1_and_v2_corpus_still_parses() {
    let root = root();
    let mut paths = sorted_files(&root.join("fixtures/lockfiles/v1"), "lock");
    paths.extend(sorted_files(&root.join("fixtures/lockfiles/v2"), "lock"));
    for path in paths {
        let text = std::fs::read_to_string(&path).unwrap();
        let lock = Lock::parse(&path.display().to_string(), &text)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(!lock.components.is_empty());
        // The digests a released gpustack wrote still verify: `check` does not call an
        // old lock tampered.
        assert_eq!(lock.verify(), vec![], "{}", path.display());
        assert!(lock
            .layers
            .iter()
            .all(|l| l.hash.starts_with("sha256:") && l.hash.len() == 71));
        // A version 2 lock still generates every target.
        if path.parent().unwrap().ends_with("v2") {
            for (t, files) in gpustack::plan::generate_many(&lock, &gpustack::plan::Target::ALL)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            {
                assert!(!files.is_empty(), "{}: {}", path.display(), t.name());
            }
        }
    }
}

#[test]
fn unknown_versions_are_refused_clearly() {
    for (text, want) in [
        (
            "version = 4\n",
            "unsupported lockfile version 4 (this gpustack reads versions 1 to 3)",
        ),
        ("version = 0\n", "unsupported lockfile version 0"),
        ("version = \"1\"\n", "lockfile `version` must be an integer"),
        (
            "[inputs]\n",
            "this is not a gpustack lockfile: it has no `version`",
        ),
    ] {
        let err = Lock::parse("gpustack.lock", text).unwrap_err().to_string();
        assert!(err.contains(want), "{text:?}: {err}");
    }
}

#[test]
fn layer_hashes_chain_and_react_only_to_pins() {
    let text = std::fs::read_to_string(root().join("lockfiles/h100-ib-train-serve.lock")).unwrap();
    let lock = Lock::parse("l", &text).unwrap();
    let names: Vec<&str> = lock.layers.iter().map(|l| l.layer.name()).collect();
    assert_eq!(
        names,
        [
            "base",
            "framework",
            "inference",
            "training",
            "validate",
            "host"
        ]
    );
    // A descriptive edit (end-of-life date) leaves the hashes alone …
    let cat = gpustack::Catalog::stock().unwrap();
    let spec_text =
        std::fs::read_to_string(root().join("fixtures/specs/h100-ib-train-serve.toml")).unwrap();
    let fresh = gpustack::lock_spec(&cat, "s", &spec_text).unwrap();
    assert_eq!(fresh.layers, lock.layers);
    // … while changing the requested Python rebuilds framework and everything above it,
    // but not base.
    let other = gpustack::lock_spec(
        &cat,
        "s",
        &spec_text.replace("python = \"3.12\"", "python = \"3.11\""),
    )
    .unwrap();
    assert_eq!(
        other.layers[0].hash, lock.layers[0].hash,
        "base must not change"
    );
    for (i, name) in names.iter().enumerate().take(4).skip(1) {
        assert_ne!(
            other.layers[i].hash, lock.layers[i].hash,
            "{name} must change"
        );
    }
    for (i, name) in names.iter().enumerate().take(6).skip(4) {
        assert_eq!(
            other.layers[i].hash, lock.layers[i].hash,
            "{name} sits on base only and must not change"
        );
    }
}
