//! Reproducibility: the lock and every generated file are byte-identical across runs,
//! working directories, `HOME`, `TZ`, `LC_ALL`, and the order of the catalog's files and of
//! the entries inside them.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{example_names, root, sorted_files, tempdir};
use gpustack::{Catalog, Lock};

/// `gpustack lock` then `gpustack gen all` in `dir` with the given environment; returns
/// every file written (lock included) with its mode.
fn lock_and_gen(dir: &Path, spec: &Path, env: &[(&str, &str)]) -> BTreeMap<String, (Vec<u8>, u32)> {
    std::fs::copy(spec, dir.join("gpustack.toml")).unwrap();
    for args in [&["lock"][..], &["gen", "all"]] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpustack"))
            .args(args)
            .current_dir(dir)
            .env_clear()
            .env("GPUSTACK_OFFLINE", "1")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut files = BTreeMap::new();
    for e in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let e = e.unwrap();
        if e.file_type().is_file() {
            use std::os::unix::fs::PermissionsExt;
            let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
            let mode = e.metadata().unwrap().permissions().mode() & 0o777;
            files.insert(rel, (std::fs::read(e.path()).unwrap(), mode));
        }
    }
    files
}

#[test]
fn outputs_are_identical_across_directories_and_environments() {
    let spec = root().join("fixtures/specs/h100-ib-train-serve.toml");
    let a_dir = tempdir("repro-a");
    let b_dir = tempdir("repro-b").join("nested/deeper");
    std::fs::create_dir_all(&b_dir).unwrap();
    let path = std::env::var("PATH").unwrap_or_default();
    let a = lock_and_gen(
        &a_dir,
        &spec,
        &[
            ("PATH", &path),
            ("HOME", "/tmp"),
            ("TZ", "UTC"),
            ("LC_ALL", "C"),
        ],
    );
    let b = lock_and_gen(
        &b_dir,
        &spec,
        &[
            ("PATH", &path),
            ("HOME", "/nonexistent"),
            ("TZ", "Pacific/Chatham"),
            ("LC_ALL", "tr_TR.UTF-8"),
            ("LANG", "ja_JP.UTF-8"),
            ("SOURCE_DATE_EPOCH", "1"),
        ],
    );
    assert!(a.len() > 30, "{} files", a.len());
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (k, v) in &a {
        assert!(b[k] == *v, "{k} differs between the two runs");
        let text = String::from_utf8_lossy(&v.0);
        for leak in [a_dir.display().to_string(), b_dir.display().to_string()] {
            assert!(!text.contains(&leak), "{k} contains the path {leak}");
        }
    }
    // A second run in the same place changes nothing (and leaves the files alone).
    let again = lock_and_gen(&a_dir, &spec, &[("PATH", &path)]);
    assert_eq!(again, a);
    let _ = std::fs::remove_dir_all(&a_dir);
}

/// Splits a catalog file into its header and its `[[…]]` entries (each with the comment
/// lines just above it).
fn entries(text: &str) -> (String, Vec<String>) {
    let mut header = String::new();
    let mut out: Vec<String> = Vec::new();
    let mut pending = String::new();
    for line in text.split_inclusive('\n') {
        // `[[image.digest]]`, `[[source.os_gcc]]`: a sub-table stays with its entry.
        let sub_table = line
            .strip_prefix("[[")
            .and_then(|l| l.split_once("]]"))
            .is_some_and(|(name, _)| name.contains('.'));
        if line.starts_with("[[") && !sub_table {
            let mut e = std::mem::take(&mut pending);
            e.push_str(line);
            out.push(e);
        } else if line.starts_with('#') || line.trim().is_empty() {
            pending.push_str(line);
        } else if let Some(last) = out.last_mut() {
            last.push_str(&std::mem::take(&mut pending));
            last.push_str(line);
        } else {
            header.push_str(&std::mem::take(&mut pending));
            header.push_str(line);
        }
    }
    if let Some(last) = out.last_mut() {
        last.push_str(&pending);
    } else {
        header.push_str(&pending);
    }
    (header, out)
}

/// Deterministic permutation (xorshift), so a failure reproduces.
fn shuffle<T>(v: &mut [T], seed: &mut u64) {
    for i in (1..v.len()).rev() {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        v.swap(i, (*seed % (i as u64 + 1)) as usize);
    }
}

#[test]
fn shuffled_catalog_files_and_entries_give_the_same_locks() {
    let files: Vec<(String, String)> = sorted_files(&root().join("catalog"), "toml")
        .into_iter()
        .map(|p| {
            (
                format!("catalog/{}", p.file_name().unwrap().to_string_lossy()),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect();
    assert!(files.len() >= 15);
    let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
    for round in 0..3 {
        let mut shuffled = Vec::new();
        let mut moved = 0;
        for (name, text) in &files {
            let (header, mut es) = entries(text);
            let before = es.clone();
            shuffle(&mut es, &mut seed);
            moved += usize::from(before != es);
            shuffled.push((name.clone(), format!("{header}{}", es.concat())));
        }
        assert!(
            moved >= 10,
            "the shuffle moved entries in only {moved} files"
        );
        shuffle(&mut shuffled, &mut seed);
        let catalog = Catalog::from_layers(&[shuffled]).unwrap();
        for name in example_names() {
            let spec = std::fs::read_to_string(root().join(format!("fixtures/specs/{name}.toml")))
                .unwrap();
            let lock = gpustack::lock_spec(&catalog, "gpustack.toml", &spec).unwrap();
            let want =
                std::fs::read_to_string(root().join(format!("lockfiles/{name}.lock"))).unwrap();
            assert!(
                lock.to_toml() == want,
                "round {round}: {name} locks differently with shuffled catalog entries"
            );
            assert_eq!(Lock::parse("l", &want).unwrap().to_toml(), want);
        }
    }
}
