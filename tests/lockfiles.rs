//! Lockfile round trips and the compatibility corpus.
//!
//! * every committed lock parses and writes back byte-identically (`write(parse(t)) == t`);
//! * every lock in `fixtures/lockfiles/v1/` (the format as released) still parses;
//! * a lock is rejected with "unsupported lockfile version" when its version is unknown;
//! * an unsealed lock (versions 1 to 3) is refused by `gen` and `check`, and a single-field
//!   edit of a sealed lock is refused whatever `version` it is given.

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
fn v1_v2_and_v3_corpus_still_parses() {
    let root = root();
    let mut paths = sorted_files(&root.join("fixtures/lockfiles/v1"), "lock");
    paths.extend(sorted_files(&root.join("fixtures/lockfiles/v2"), "lock"));
    paths.extend(sorted_files(&root.join("fixtures/lockfiles/v3"), "lock"));
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
        // An unsealed lock (versions 1 to 3) is not rendered or checked: nothing tells it
        // from a sealed lock whose `version` was lowered (issue 32). `gen` and `check`
        // refuse it, naming its version and the re-lock.
        let file =
            gpustack::generate::LockFile::new("gpustack.lock".into(), text.clone(), lock.clone());
        let e = file.untouched().unwrap_err().to_string();
        assert!(
            e.contains("has no `[integrity]` seals") && e.contains("gpustack lock"),
            "{}: {e}",
            path.display()
        );
        // The library's renderer still takes it (a version 2 or 3 lock renders every
        // target, except Kubernetes for a
        // multi-node Slingshot stack written before `[network].cxi_resource`: its pods
        // would reach no CXI NIC, and `gen k8s` says which key to set.
        if path.parent().unwrap().ends_with("v2") || path.parent().unwrap().ends_with("v3") {
            let slingshot = text.contains("fabric = \"slingshot\"");
            for t in gpustack::plan::Target::ALL {
                match gpustack::plan::generate_many(&lock, &[t]) {
                    Ok(out) => {
                        assert!(!(slingshot && t == gpustack::plan::Target::K8s));
                        assert!(out.iter().all(|(_, f)| !f.is_empty()), "{}", path.display());
                    }
                    Err(e) => {
                        let e = e.to_string();
                        assert!(
                            slingshot
                                && t == gpustack::plan::Target::K8s
                                && e.contains("`[network].cxi_resource`"),
                            "{}: {}: {e}",
                            path.display(),
                            t.name()
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn unknown_versions_are_refused_clearly() {
    for (text, want) in [
        (
            "version = 5\n",
            "unsupported lockfile version 5 (this gpustack reads versions 1 to 4)",
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

/// The line a hand edit changes, mutated so the value keeps its shape: the last letter or
/// digit of a string (or of a list's first string) moves on by one, a boolean flips, a
/// number grows. `None` for lines that hold no value.
fn mutate(line: &str) -> Option<String> {
    fn bump(s: &str) -> String {
        let mut chars: Vec<char> = s.chars().collect();
        match chars.iter().rposition(char::is_ascii_alphanumeric) {
            Some(i) => {
                chars[i] = match chars[i] {
                    '9' => '0',
                    'z' => 'a',
                    'Z' => 'A',
                    // a→b keeps hex digits hex; f→e too.
                    'f' => 'e',
                    c => char::from(c as u8 + 1),
                };
                chars.into_iter().collect()
            }
            None => format!("{s}x"),
        }
    }
    let t = line.trim();
    if t.is_empty() || t.starts_with('#') || t.starts_with('[') && !t.contains('=') || t == "]" {
        return None;
    }
    if t.starts_with('"') && !t.contains(" = ") {
        // An element of a multi-line list (`because`).
        return Some(line.replacen(t, &bump(t), 1));
    }
    let (key, value) = line.split_once(" = ")?;
    let v = match value {
        "true" => "false".to_string(),
        "false" => "true".to_string(),
        "[]" => "[\"x\"]".to_string(),
        "[" => return None,
        n if n.parse::<u64>().is_ok() => (n.parse::<u64>().unwrap() + 1).to_string(),
        v if v.starts_with('[') => {
            // The first element's closing quote.
            let end = v[2..].find('"')? + 2;
            format!("{}{}", bump(&v[..end]), &v[end..])
        }
        v => {
            let inner = v.strip_suffix('"')?;
            format!("{}\"", bump(inner))
        }
    };
    Some(format!("{key} = {v}"))
}

/// Issue 15, "integrity covers everything rendered": every value of a lock (each field of
/// every table, the layers and the `[integrity]` seals themselves) edited in place, one at
/// a time, is refused — by the parser or by `verify` — naming the edited line.
#[test]
fn every_hand_edit_is_refused_at_its_line() {
    for name in ["h100-ib-train-serve", "gh200-hpc", "vm-image-train-infer"] {
        let path = root().join("lockfiles").join(format!("{name}.lock"));
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let mut edits = 0;
        let mut failures = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            // `version` and `revision` say how to read the tables, and no seal covers
            // them (book/src/lockfile.md, "[integrity]"): a changed one is read or
            // refused by the reader's version check, not located by the seals.
            if line.starts_with("version = ") || line.starts_with("revision = ") {
                continue;
            }
            let Some(edited) = mutate(line) else { continue };
            assert_ne!(&edited, line);
            edits += 1;
            let mut all = lines.clone();
            all[i] = &edited;
            let tampered = format!("{}\n", all.join("\n"));
            let want = i + 1;
            let got = match Lock::parse("gpustack.lock", &tampered) {
                Err(e) => {
                    let msg = e.to_string();
                    if msg.contains(&format!("gpustack.lock:{want}:")) {
                        continue;
                    }
                    format!("parse error without line {want}: {msg}")
                }
                Ok(lock) => match lock.verify().first() {
                    None => "accepted".to_string(),
                    Some(m) => {
                        let at = m
                            .offset(&tampered)
                            .map(|o| tampered[..o].bytes().filter(|&b| b == b'\n').count() + 1);
                        if at == Some(want) {
                            continue;
                        }
                        format!("refused ({}) at line {at:?}", m.what)
                    }
                },
            };
            failures.push(format!("{name}.lock:{want}: `{line}` → `{edited}`: {got}"));
        }
        assert!(edits > 100, "{name}: only {edits} edits");
        assert!(
            failures.is_empty(),
            "{} of {edits} edits:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
}

/// The example, through the CLI: a hand-edited base-image `repository` (which
/// would become `FROM evil.example.com/cuda:…`) is refused by `gen` (exit 2, nothing
/// written) and reported by `check`, both at the edited line.
#[test]
fn gen_and_check_refuse_an_edited_repository_at_its_line() {
    let dir = tempdir("tamper-cli");
    let text = std::fs::read_to_string(root().join("lockfiles/h100-ib-train-serve.lock")).unwrap();
    let edited = text.replacen(
        "repository = \"nvidia/cuda\"",
        "repository = \"evil.example.com/cuda\"",
        1,
    );
    assert_ne!(edited, text);
    let line = edited[..edited.find("evil.example.com").unwrap()]
        .matches('\n')
        .count()
        + 1;
    std::fs::write(dir.join("gpustack.lock"), &edited).unwrap();
    let out = run_in(&dir, &["gen", "all", "--out", "o"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!("gpustack.lock:{line}:"))
            && out.stderr.contains("`package cuda-image` table"),
        "{}",
        out.stderr
    );
    assert!(
        !dir.join("o").exists(),
        "gen wrote files from a tampered lock"
    );
    let out = run_in(&dir, &["check"]);
    assert_ne!(out.code, 0);
    assert!(
        out.stdout.contains(&format!("gpustack.lock:{line}\n"))
            || out.stderr.contains(&format!("gpustack.lock:{line}\n")),
        "{}{}",
        out.stdout,
        out.stderr
    );
}

/// The sealed lock `text` as if written at `version`: a version before the seals has its
/// `[integrity]` table (and `revision`, which came with version 4) deleted, as an attacker
/// lowering the version would; `keep_seals` keeps them instead.
fn at_version(text: &str, version: u32, keep_seals: bool) -> String {
    let mut out = text.replacen(
        &format!("\nversion = {}\n", gpustack::lock::LOCK_VERSION),
        &format!("\nversion = {version}\n"),
        1,
    );
    if version < gpustack::lock::SEALED_SINCE && !keep_seals {
        out = out.replacen("\nrevision = 1\n", "\n", 1);
        let at = out.find("\n[integrity]\n").expect("a sealed lock");
        out.truncate(at + 1);
        // The writer ends each table with a blank line before the next one.
        while out.ends_with("\n\n") {
            out.pop();
        }
    }
    out
}

/// What `gen` and `check` do with a lock text before rendering or checking it: parse,
/// refuse an unsealed lock, refuse a broken seal or digest. `None` when it passes.
fn gate(text: &str) -> Option<String> {
    let lock = match Lock::parse("gpustack.lock", text) {
        Ok(l) => l,
        Err(e) => return Some(e.to_string()),
    };
    let file = gpustack::generate::LockFile::new("gpustack.lock".into(), text.to_string(), lock);
    file.untouched().err().map(|d| d.to_string())
}

/// Each value line of a lock's tables (up to `[integrity]`) edited alone
/// ([`mutate`]): (0-based line, the line, its edit, the whole edited text).
fn content_edits(text: &str) -> Vec<(usize, String, String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        // The `[integrity]` table's own edits are `every_hand_edit_is_refused_at_its_line`'s.
        if *line == "[integrity]" {
            break;
        }
        let Some(edited) = mutate(line) else { continue };
        let mut all = lines.clone();
        all[i] = &edited;
        out.push((
            i,
            line.to_string(),
            edited.clone(),
            format!("{}\n", all.join("\n")),
        ));
    }
    out
}

/// `gen` reads a lock in its canonical form without the `toml` parser and without
/// computing its seals again (`src/lock/canonical.rs`): that must refuse exactly what the
/// full check refuses. Every value line edited alone, as left and re-sealed as a forger
/// would (`to_toml` over the edited content), is read from disk as `gen` reads it and
/// judged as by the full check.
#[test]
fn the_canonical_read_refuses_what_the_full_check_refuses() {
    let name = "h100-ib-train-serve";
    let text =
        std::fs::read_to_string(root().join("lockfiles").join(format!("{name}.lock"))).unwrap();
    let dir = tempdir("canonical-read");
    let path = dir.join("gpustack.lock");
    let via_read = |t: &str| {
        std::fs::write(&path, t).unwrap();
        gpustack::generate::LockFile::read(&path, "")
            .map_err(|e| e.to_string())
            .and_then(|f| f.untouched().map_err(|d| d.to_string()))
    };
    let full = |t: &str| {
        Lock::parse("gpustack.lock", t)
            .map_err(|e| e.to_string())
            .and_then(|l| {
                gpustack::generate::LockFile::new("gpustack.lock".into(), t.to_string(), l)
                    .untouched()
                    .map_err(|d| d.to_string())
            })
    };
    assert!(via_read(&text).is_ok());
    let (mut edits, mut resealed_kept) = (0, 0);
    for (i, line, edited, tampered) in content_edits(&text) {
        let mut cases = vec![tampered.clone()];
        if let Ok(l) = Lock::parse("gpustack.lock", &tampered) {
            cases.push(l.to_toml());
        }
        for t in cases {
            edits += 1;
            let (a, b) = (via_read(&t), full(&t));
            assert_eq!(
                a.is_ok(),
                b.is_ok(),
                "line {}: `{line}` → `{edited}`: read {a:?}, full {b:?}",
                i + 1
            );
            resealed_kept += usize::from(a.is_ok());
        }
    }
    assert!(edits > 200, "only {edits} edits");
    // Re-sealing hides an edit only from the seals: the spec digest and the layer hashes
    // still catch every edit of what they cover.
    assert!(resealed_kept < edits / 2, "{resealed_kept} of {edits} kept");
}

/// Issue 32, "a lock that cannot be made to lie": every value line of a sealed lock,
/// edited alone, is refused at every lock version this gpustack reads (1 to 4), its
/// `[integrity]` table deleted (the downgrade) or kept. The unedited lock passes only as
/// written (version 4, sealed). Before this, 135 of 366 edits of one lock passed `gen` as
/// `version = 3` without `[integrity]`.
#[test]
fn a_single_field_edit_is_refused_at_every_version() {
    use gpustack::lock::{LOCK_VERSION, LOCK_VERSION_MIN};
    for name in ["h100-ib-train-serve", "gh200-hpc", "vm-image-train-infer"] {
        let path = root().join("lockfiles").join(format!("{name}.lock"));
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(gate(&text), None, "{name}: the committed lock must pass");
        for v in LOCK_VERSION_MIN..LOCK_VERSION {
            for keep in [false, true] {
                let down = at_version(&text, v, keep);
                assert_ne!(down, text);
                assert!(
                    gate(&down).is_some(),
                    "{name}: version {v} (seals kept: {keep}) passes unedited"
                );
            }
        }
        let mut edits = 0;
        let mut passed = Vec::new();
        // Only the rendered content: the `[integrity]` table itself is deleted by the
        // downgrade.
        for (i, line, edited, tampered) in content_edits(&text) {
            if line.starts_with("version = ") || line.starts_with("revision = ") {
                continue;
            }
            // Version 4 with its seals is `every_hand_edit_is_refused_at_its_line`'s (each
            // edit refused at its line), and an older version that keeps its seals is
            // refused by the reader whatever its content (above): the downgrades remain.
            for v in LOCK_VERSION_MIN..LOCK_VERSION {
                edits += 1;
                if gate(&at_version(&tampered, v, false)).is_none() {
                    passed.push(format!(
                        "{name}.lock:{}: version {v}: `{line}` → `{edited}`",
                        i + 1
                    ));
                }
            }
        }
        assert!(edits > 300, "{name}: only {edits} edits");
        assert!(
            passed.is_empty(),
            "{} of {edits} edits pass `gen`:\n{}",
            passed.len(),
            passed.join("\n")
        );
    }
}

/// The example through the CLI: `version = 3`, `[integrity]` deleted and a GPU's
/// `gfd-product` (the Kubernetes node selector) edited. `gen` refuses it (exit 2, nothing
/// written, the version line and a re-lock hint) and so does `check`.
#[test]
fn gen_and_check_refuse_a_lowered_version() {
    let dir = tempdir("downgrade-cli");
    let text = std::fs::read_to_string(root().join("lockfiles/h100-ib-train-serve.lock")).unwrap();
    let edited = at_version(&text, 3, false);
    let edited = edited.replacen(
        "gfd-product = \"NVIDIA-H100-80GB-HBM3\"",
        "gfd-product = \"evil\"",
        1,
    );
    assert!(
        edited.contains("\"evil\""),
        "the fixture's gfd-product moved"
    );
    std::fs::write(dir.join("gpustack.lock"), &edited).unwrap();
    let line = edited[..edited.find("\nversion = 3").unwrap()]
        .matches('\n')
        .count()
        + 2;
    for args in [
        &["gen", "all", "--out", "o"][..],
        &["check", "--no-drift"][..],
    ] {
        let out = run_in(&dir, args);
        assert_eq!(out.code, 2, "{args:?}: {}{}", out.stdout, out.stderr);
        assert!(
            out.stderr
                .contains("is a version 3 lock: it has no `[integrity]` seals")
                && out.stderr.contains(&format!("gpustack.lock:{line}:"))
                && out.stderr.contains("hint: re-lock with `gpustack lock`"),
            "{args:?}: {}",
            out.stderr
        );
    }
    assert!(
        !dir.join("o").exists(),
        "gen wrote files from an unsealed lock"
    );
}
