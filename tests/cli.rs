//! End-to-end tests of the `gpustack` binary against the fixtures:
//!
//! * `fixtures/specs/*.toml` lock to exactly `lockfiles/*.lock` (drift test);
//! * `fixtures/conflicts/*.toml` fail with exit 1 and the explanation in `*.snap`;
//! * `fixtures/bad-input/<case>/` run `args` in a copy of the directory and must exit 2
//!   with the message in `expected.snap`, writing nothing.
//!
//! The `.snap` files are insta snapshots: a changed message leaves `*.snap.new` beside the
//! snapshot for `cargo insta review`. The lockfiles are compared byte for byte;
//! `INSTA_UPDATE=always cargo test --test cli` rewrites them (review with `git diff`).

mod common;

use common::*;

#[test]
fn example_specs_lock_to_the_committed_lockfiles() {
    let root = root();
    let specs = sorted_files(&root.join("fixtures/specs"), "toml");
    assert!(
        specs.len() >= 12,
        "expected the example specs, found {}",
        specs.len()
    );
    let mut failures = Vec::new();
    for spec in &specs {
        let name = spec.file_stem().unwrap().to_str().unwrap();
        let rel = format!("fixtures/specs/{name}.toml");
        let out = run_in(&root, &["lock", "--spec", &rel, "--out", "-"]);
        if out.code != 0 {
            failures.push(format!("{rel}: exit {}\n{}", out.code, out.stderr));
            continue;
        }
        if let Some(f) = check_file(&root.join(format!("lockfiles/{name}.lock")), &out.stdout) {
            failures.push(f);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn conflicts_are_explained() {
    let root = root();
    let cases = sorted_files(&root.join("fixtures/conflicts"), "toml");
    assert!(
        cases.len() >= 15,
        "expected at least 15 conflict scenarios, found {}",
        cases.len()
    );
    let mut failures = Vec::new();
    for case in &cases {
        let name = case.file_stem().unwrap().to_str().unwrap();
        let rel = format!("fixtures/conflicts/{name}.toml");
        let out = run_in(&root, &["lock", "--spec", &rel, "--out", "-"]);
        if out.code != 1 {
            failures.push(format!(
                "{rel}: expected exit 1, got {}\n{}{}",
                out.code, out.stdout, out.stderr
            ));
            continue;
        }
        if !out.stdout.is_empty() {
            failures.push(format!("{rel}: wrote to stdout on failure"));
        }
        for needle in ["error: no compatible stack", "rule `", "hint: "] {
            if !out.stderr.contains(needle) {
                failures.push(format!(
                    "{rel}: explanation lacks `{needle}`:\n{}",
                    out.stderr
                ));
            }
        }
        failures.extend(check_insta("fixtures/conflicts", name, &out.stderr));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Every `fixtures/neighbours/NAME.toml` is the valid neighbour of the conflict
/// `fixtures/conflicts/NAME.toml`: one fact changed so that the rule the conflict breaks
/// holds, and it locks. A rule that rejects its neighbour too is stricter than its source.
#[test]
fn conflict_neighbours_lock() {
    let root = root();
    let cases = sorted_files(&root.join("fixtures/neighbours"), "toml");
    assert!(
        cases.len() >= 4,
        "expected neighbours, found {}",
        cases.len()
    );
    let mut failures = Vec::new();
    for case in &cases {
        let name = case.file_stem().unwrap().to_str().unwrap();
        if !root
            .join(format!("fixtures/conflicts/{name}.toml"))
            .exists()
        {
            failures.push(format!(
                "neighbours/{name}.toml has no conflicts/{name}.toml"
            ));
        }
        let rel = format!("fixtures/neighbours/{name}.toml");
        let out = run_in(&root, &["lock", "--spec", &rel, "--out", "-"]);
        if out.code != 0 {
            failures.push(format!("{rel}: exit {}\n{}", out.code, out.stderr));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn bad_input_is_rejected_with_exit_2_and_nothing_written() {
    let root = root();
    let base = root.join("fixtures/bad-input");
    let mut cases: Vec<_> = std::fs::read_dir(&base)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    assert!(
        cases.len() >= 15,
        "expected at least 15 bad-input cases, found {}",
        cases.len()
    );
    let mut failures = Vec::new();
    for case in &cases {
        let name = case.file_name().unwrap().to_str().unwrap().to_string();
        let work = tempdir(&format!("bad-{name}"));
        copy_dir(case, &work);
        for snap in ["expected.snap", "expected.snap.new"] {
            let _ = std::fs::remove_file(work.join(snap));
        }
        let args_text = std::fs::read_to_string(case.join("args")).unwrap();
        let args: Vec<&str> = args_text.split_whitespace().collect();
        let before = tree(&work);
        let out = run_in(&work, &args);
        let after = tree(&work);
        if out.code != 2 {
            failures.push(format!(
                "{name}: expected exit 2, got {}\n{}",
                out.code, out.stderr
            ));
        }
        if before != after {
            failures.push(format!(
                "{name}: files changed although the input was rejected"
            ));
        }
        if !out.stderr.starts_with("error: ") {
            failures.push(format!(
                "{name}: message does not start with `error: `:\n{}",
                out.stderr
            ));
        }
        // Every error says what to do next: a `hint:` line (clap's usage errors end in its
        // own "For more information, try '--help'").
        if !out.stderr.contains("\nhint: ") && !out.stderr.contains("try '--help'") {
            failures.push(format!("{name}: no `hint:` in\n{}", out.stderr));
        }
        let text = format!("exit: {}\n{}", out.code, out.stderr);
        failures.extend(check_insta(
            &format!("fixtures/bad-input/{name}"),
            "expected",
            &text,
        ));
        let _ = std::fs::remove_dir_all(&work);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn lock_writes_the_file_atomically_and_check_detects_staleness() {
    let root = root();
    let dir = tempdir("write");
    std::fs::copy(
        root.join("fixtures/specs/l40s-torch.toml"),
        dir.join("gpustack.toml"),
    )
    .unwrap();
    let out = run_in(&dir, &["lock"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let written = std::fs::read_to_string(dir.join("gpustack.lock")).unwrap();
    assert!(written.starts_with("# This file is @generated by gpustack."));
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.contains("gpustack-tmp")),
        "temporary file left behind: {names:?}"
    );
    assert_eq!(run_in(&dir, &["lock", "--check"]).code, 0);
    std::fs::write(
        dir.join("gpustack.lock"),
        written.replace("version = 4", "version = 4\n# edited"),
    )
    .unwrap();
    assert_eq!(run_in(&dir, &["lock", "--check"]).code, 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn lock_is_identical_across_directories_and_environments() {
    let root = root();
    let spec = std::fs::read(root.join("fixtures/specs/h100-ib-train-serve.toml")).unwrap();
    let mut outputs = Vec::new();
    for (i, (tz, lc, home)) in [
        ("UTC", "C", "/tmp"),
        ("Asia/Kolkata", "de_DE.UTF-8", "/nonexistent"),
    ]
    .iter()
    .enumerate()
    {
        let dir = tempdir(&format!("env{i}"));
        std::fs::write(dir.join("gpustack.toml"), &spec).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpustack"))
            .args(["lock", "--out", "-"])
            .current_dir(&dir)
            .env("GPUSTACK_OFFLINE", "1")
            .env("TZ", tz)
            .env("LC_ALL", lc)
            .env("HOME", home)
            .output()
            .unwrap();
        assert!(out.status.success());
        outputs.push(out.stdout);
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert_eq!(outputs[0], outputs[1]);
    assert!(!String::from_utf8_lossy(&outputs[0]).contains("/tmp"));
}

#[test]
fn why_explains_a_locked_component() {
    let root = root();
    let out = run_in(
        &root,
        &[
            "why",
            "torch",
            "--lock",
            "lockfiles/vllm-rtx4090-driver550.lock",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with("torch "), "{}", out.stdout);
    assert!(
        out.stdout.contains("requested: implied by vllm"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("vllm.torch-pin"), "{}", out.stdout);
    let out = run_in(
        &root,
        &[
            "why",
            "deepspeed",
            "--lock",
            "lockfiles/vllm-rtx4090-driver550.lock",
        ],
    );
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("not part of the locked stack"),
        "{}",
        out.stderr
    );
}

#[test]
fn catalog_list_and_show() {
    let root = root();
    let out = run_in(&root, &["catalog", "list"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    for fam in [
        "driver",
        "cuda",
        "gpu",
        "os",
        "python",
        "cudnn",
        "nccl",
        "torch",
        "vllm",
        "deepspeed",
    ] {
        assert!(
            out.stdout.lines().any(|l| l.starts_with(fam)),
            "no `{fam}` line in:\n{}",
            out.stdout
        );
    }
    let out = run_in(&root, &["catalog", "show", "torch"]);
    assert_eq!(out.code, 0);
    assert!(
        out.stdout.contains("torch 2.5.1+cu124"),
        "{}",
        &out.stdout[..out.stdout.len().min(2000)]
    );
    assert!(out.stdout.contains("catalog/torch.toml:"));
    // Works from any directory: the stock catalog is embedded.
    let dir = tempdir("anywhere");
    assert_eq!(run_in(&dir, &["catalog", "show", "cuda"]).code, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn catalog_overlay_adds_and_overrides() {
    let dir = tempdir("overlay");
    std::fs::create_dir_all(dir.join("site")).unwrap();
    std::fs::write(
        dir.join("site/nccl.toml"),
        "family = \"nccl\"\n\n[[release]]\nversion = \"2.99.1\"\ncuda_majors = [12]\nsource = \"site build of NCCL, https://example.org/nccl\"\n",
    )
    .unwrap();
    let out = run_in(&dir, &["catalog", "show", "nccl", "--catalog", "site"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.starts_with("nccl 2.99.1: CUDA 12"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("site/nccl.toml:3"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn init_writes_a_spec_that_locks_and_never_overwrites() {
    let dir = tempdir("init");
    let out = run_in(&dir, &["init", "--gpu", "a100", "--driver", "550.54.15"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let first = std::fs::read(dir.join("gpustack.toml")).unwrap();
    assert_eq!(run_in(&dir, &["lock"]).code, 0);
    let again = run_in(&dir, &["init"]);
    assert_eq!(again.code, 2);
    assert!(again.stderr.contains("never overwrites"));
    assert_eq!(std::fs::read(dir.join("gpustack.toml")).unwrap(), first);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn help_has_examples_for_every_command() {
    let root = root();
    for cmd in [
        &["--help"][..],
        &["lock", "--help"],
        &["why", "--help"],
        &["catalog", "--help"],
        &["init", "--help"],
        &["gen", "--help"],
        &["check", "--help"],
        &["diff", "--help"],
        &["matrix", "--help"],
        &["probe", "--help"],
    ] {
        let out = run_in(&root, cmd);
        assert_eq!(out.code, 0);
        assert!(
            out.stdout.contains("Examples:"),
            "{cmd:?} has no examples:\n{}",
            out.stdout
        );
    }
}

#[test]
fn overlay_paths_do_not_leak_into_the_lock() {
    let dir = tempdir("overlay-paths");
    std::fs::create_dir_all(dir.join("site")).unwrap();
    std::fs::copy(
        root().join("fixtures/specs/a100-pytorch.toml"),
        dir.join("gpustack.toml"),
    )
    .unwrap();
    std::fs::write(
        dir.join("site/nccl.toml"),
        "family = \"nccl\"\n\n[[release]]\nversion = \"2.99.1\"\ncuda_majors = [12]\nsource = \"site build of NCCL, https://example.org/nccl\"\n",
    )
    .unwrap();
    let abs = dir.join("site").display().to_string();
    let a = run_in(&dir, &["lock", "--out", "-", "--catalog", "site"]);
    let b = run_in(&dir, &["lock", "--out", "-", "--catalog", "./site/"]);
    let c = run_in(&dir, &["lock", "--out", "-", "--catalog", &abs]);
    assert_eq!(a.code, 0, "{}", a.stderr);
    assert!(
        a.stdout.contains("nccl\"\nversion = \"2.99.1\"")
            || a.stdout.contains("version = \"2.99.1\""),
        "{}",
        a.stdout
    );
    assert!(a.stdout.contains("catalog = \"overlay/nccl.toml\""));
    assert_eq!(a.stdout, b.stdout);
    assert_eq!(a.stdout, c.stdout);
    assert!(!c.stdout.contains(&abs));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn pathological_specs_are_rejected_cleanly() {
    let dir = tempdir("patho");
    let head = "[stack]\nname = \"x\"\n[hardware]\ngpus = [\"h100\"]\n[components]\ncuda = \"*\"\n[train]\ncommand = ";
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "deep",
            format!("{head}{}{}\n", "[".repeat(100_000), "]".repeat(100_000)).into_bytes(),
            "recursion",
        ),
        (
            "huge",
            "a".repeat(2 << 20).into_bytes(),
            "larger than 1 MiB",
        ),
        (
            "dupkey",
            b"[stack]\nname = \"a\"\nname = \"b\"\n".to_vec(),
            "duplicate key",
        ),
        ("nul", b"[stack]\nname = \"a\0\"\n".to_vec(), "error: "),
    ];
    for (name, bytes, want) in cases {
        std::fs::write(dir.join(format!("{name}.toml")), &bytes).unwrap();
        let out = run_in(
            &dir,
            &[
                "lock",
                "--spec",
                &format!("{name}.toml"),
                "--out",
                &format!("{name}.lock"),
            ],
        );
        assert_eq!(out.code, 2, "{name}: {}", out.stderr);
        assert!(out.stderr.contains(want), "{name}: {}", out.stderr);
        assert!(
            out.stderr.len() < 4000,
            "{name}: message too long ({} bytes)",
            out.stderr.len()
        );
        assert!(
            !dir.join(format!("{name}.lock")).exists(),
            "{name}: wrote a lock"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn gen_usage_errors_and_check() {
    let dir = tempdir("gen-usage");
    let out = run_in(&dir, &["gen", "dockr"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("invalid value 'dockr' for '<TARGET>...'"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("a similar value exists: 'docker'"),
        "{}",
        out.stderr
    );
    let out = run_in(&dir, &["gen", "docker"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("gpustack.lock` not found"),
        "{}",
        out.stderr
    );
    assert!(!dir.join("out").exists());
    // A version-1 lock has no deployment picks: re-lock, nothing written.
    let v1 = sorted_files(&root().join("fixtures/lockfiles/v1"), "lock")[0].clone();
    std::fs::copy(&v1, dir.join("gpustack.lock")).unwrap();
    let out = run_in(&dir, &["gen", "docker"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("re-lock"), "{}", out.stderr);
    assert!(!dir.join("out").exists());
    // --check: stale after an edit, fresh after gen; stray files are reported.
    std::fs::copy(
        root().join("lockfiles/a100-pytorch.lock"),
        dir.join("gpustack.lock"),
    )
    .unwrap();
    assert_eq!(run_in(&dir, &["gen", "docker", "--check"]).code, 1);
    assert_eq!(run_in(&dir, &["gen", "docker"]).code, 0);
    assert_eq!(run_in(&dir, &["gen", "docker", "--check"]).code, 0);
    std::fs::write(dir.join("out/docker/stray.txt"), "x").unwrap();
    let out = run_in(&dir, &["gen", "docker", "--check"]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("stray.txt is not generated by gpustack"),
        "{}",
        out.stderr
    );
    // gpustack never deletes a file it did not write: `gen` refuses and keeps it.
    let out = run_in(&dir, &["gen", "docker"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("docker/stray.txt was not written by gpustack"),
        "{}",
        out.stderr
    );
    assert_eq!(
        std::fs::read(dir.join("out/docker/stray.txt")).unwrap(),
        b"x"
    );
}

/// The book's command list is the binary's: a new subcommand cannot go undocumented.
#[test]
fn the_books_command_list_is_the_help() {
    let help = run_in(&root(), &["--help"]).stdout;
    let commands = |t: &str| -> String {
        let start = t.find("Commands:\n").expect("a Commands: section");
        let section = t[start..].split("\n\n").next().unwrap();
        section
            .split("\n```")
            .next()
            .unwrap()
            .trim_end()
            .to_string()
    };
    let book = std::fs::read_to_string(root().join("book/src/cli.md")).unwrap();
    assert_eq!(commands(&book), commands(&help));
    // And every subcommand has a section.
    for line in commands(&help).lines().skip(1) {
        let name = line.split_whitespace().next().unwrap();
        if name != "help" {
            assert!(
                book.contains(&format!("## `gpustack {name}")),
                "cli.md has no section for `{name}`"
            );
        }
    }
}

/// Inputs no parser should choke on: far too large, or nested far too deep. Each is
/// rejected with exit 2 and a message, without a crash or a hang.
#[test]
fn huge_and_deeply_nested_inputs_are_rejected() {
    let dir = tempdir("huge");
    let deep_array = format!(
        "[stack]\nname = \"x\"\nx = {}1{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let deep_table = format!(
        "[stack]\nname = \"x\"\nx = {}1{}\n",
        "{a = ".repeat(50_000),
        "}".repeat(50_000)
    );
    let huge = format!(
        "[stack]\nname = \"x\"\n{}",
        "# padding padding padding padding padding\n".repeat(40_000)
    );
    for (name, text, want) in [
        ("deep-array", &deep_array, "error: "),
        ("deep-table", &deep_table, "error: "),
        ("huge", &huge, "larger than 1 MiB"),
    ] {
        std::fs::write(dir.join("gpustack.toml"), text).unwrap();
        let out = run_in(&dir, &["lock"]);
        assert_eq!(out.code, 2, "{name}: {}", out.stderr);
        assert!(out.stderr.contains(want), "{name}: {}", out.stderr);
        assert!(!dir.join("gpustack.lock").exists(), "{name} wrote a lock");
        // The same text as a lock, and as a catalog overlay file.
        std::fs::write(dir.join("gpustack.lock"), text).unwrap();
        let out = run_in(&dir, &["gen", "docker"]);
        assert_eq!(out.code, 2, "{name} as a lock: {}", out.stderr);
        assert!(!dir.join("out").exists());
        std::fs::remove_file(dir.join("gpustack.lock")).unwrap();
        std::fs::create_dir_all(dir.join("site")).unwrap();
        std::fs::write(dir.join("site/nccl.toml"), text).unwrap();
        let out = run_in(&dir, &["catalog", "list", "--catalog", "site"]);
        assert_eq!(out.code, 2, "{name} as an overlay: {}", out.stderr);
        std::fs::remove_dir_all(dir.join("site")).unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `gen` replaces each target directory as a whole; a target directory that is a
/// symbolic link (which could point anywhere) is refused before anything is written.
#[test]
fn gen_never_writes_through_a_symlink() {
    let dir = tempdir("symlink");
    std::fs::copy(
        root().join("lockfiles/a100-pytorch.lock"),
        dir.join("gpustack.lock"),
    )
    .unwrap();
    let elsewhere = tempdir("symlink-target");
    std::fs::write(elsewhere.join("precious.txt"), "keep me\n").unwrap();
    std::fs::create_dir_all(dir.join("out")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, dir.join("out/slurm")).unwrap();
    let out = run_in(&dir, &["gen", "all"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("cannot write into `out/slurm`: it is a symbolic link"),
        "{}",
        out.stderr
    );
    // Nothing written: not the other targets, not through the link.
    let names: Vec<String> = std::fs::read_dir(dir.join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["slurm".to_string()]);
    let inside: Vec<_> = std::fs::read_dir(&elsewhere).unwrap().collect();
    assert_eq!(inside.len(), 1);
    assert_eq!(
        std::fs::read_to_string(elsewhere.join("precious.txt")).unwrap(),
        "keep me\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&elsewhere);
}

/// `gpustack matrix`: row 0 is the lock's stack; `--limit` keeps the best rows; `github`
/// is a `strategy.matrix.include` list; an impossible spec exits 1 with the explanation.
#[test]
fn matrix_lists_stacks_best_first() {
    let root = root();
    let spec = "fixtures/specs/a100-pytorch.toml";
    let out = run_in(
        &root,
        &[
            "matrix", "--spec", spec, "--format", "github", "--limit", "2",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let rows: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 2);
    assert!(out.stderr.contains("the best 2 stacks"), "{}", out.stderr);
    let lock = gpustack::Lock::parse(
        "l",
        &std::fs::read_to_string(root.join("lockfiles/a100-pytorch.lock")).unwrap(),
    )
    .unwrap();
    for c in &lock.components {
        assert_eq!(
            rows[0][c.name.name()],
            c.version.to_string(),
            "{}",
            c.name.name()
        );
    }
    let json = run_in(&root, &["matrix", "--spec", spec]);
    assert_eq!(json.code, 0);
    assert!(serde_json::from_str::<serde_json::Value>(&json.stdout).is_ok());
    let conflict = run_in(
        &root,
        &[
            "matrix",
            "--spec",
            "fixtures/conflicts/arch-missing-from-wheel.toml",
        ],
    );
    assert_eq!(conflict.code, 1);
    assert!(
        conflict.stderr.contains("no compatible stack"),
        "{}",
        conflict.stderr
    );
}

/// `gpustack matrix` marks the lock's stack `"locked": true` in JSON: `--lock PATH`, or
/// `gpustack.lock` beside the spec. A kept pick makes it a later row; a lock of another
/// stack marks none and says so. The GitHub list never carries the mark.
#[test]
fn matrix_marks_the_lock_s_row() {
    let root = root();
    let spec = "fixtures/specs/a100-pytorch.toml";
    let locked_rows = |stdout: &str| -> Vec<usize> {
        let v: serde_json::Value = serde_json::from_str(stdout).unwrap();
        let rows = v["rows"].as_array().unwrap();
        for r in rows {
            assert!(r.get("locked").is_none_or(|l| l == true), "{r}");
        }
        (0..rows.len())
            .filter(|&i| rows[i].get("locked").is_some())
            .collect()
    };
    // No lock beside the spec: nothing marked.
    let out = run_in(&root, &["matrix", "--spec", spec, "--limit", "3"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(locked_rows(&out.stdout).is_empty());
    // `--lock`: a fresh lock is row 0.
    let lock = "lockfiles/a100-pytorch.lock";
    let out = run_in(
        &root,
        &["matrix", "--spec", spec, "--lock", lock, "--limit", "3"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(locked_rows(&out.stdout), [0]);
    assert!(
        out.stdout
            .contains(r#""torch": "2.5.1+cu121", "locked": true}"#),
        "{}",
        out.stdout
    );
    // The same lock beside the spec, found without `--lock`; a lock that kept an older
    // NCCL (the second-best stack) marks row 1.
    let dir = tempdir("matrix-locked");
    std::fs::copy(root.join(spec), dir.join("gpustack.toml")).unwrap();
    let text = std::fs::read_to_string(root.join(lock)).unwrap();
    std::fs::write(dir.join("gpustack.lock"), &text).unwrap();
    let out = run_in(&dir, &["matrix", "--limit", "3"]);
    assert_eq!(locked_rows(&out.stdout), [0], "{}", out.stderr);
    let kept = text.replace("version = \"2.32.3\"", "version = \"2.31.2\"");
    assert_ne!(kept, text);
    std::fs::write(dir.join("gpustack.lock"), &kept).unwrap();
    let out = run_in(&dir, &["matrix", "--limit", "3"]);
    assert_eq!(locked_rows(&out.stdout), [1], "{}", out.stderr);
    // Without a limit too, and never in the GitHub list.
    let all = run_in(&dir, &["matrix"]);
    assert_eq!(locked_rows(&all.stdout), [1], "{}", all.stderr);
    let gh = run_in(&dir, &["matrix", "--format", "github"]);
    assert_eq!(gh.code, 0, "{}", gh.stderr);
    assert!(!gh.stdout.contains("locked"), "{}", gh.stdout);
    // Another stack's lock marks nothing, and says so.
    let other = root.join("lockfiles/h100-ib-train-serve.lock");
    let out = run_in(&dir, &["matrix", "--lock", other.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(locked_rows(&out.stdout).is_empty());
    assert!(
        out.stderr.contains("no row is the stack of"),
        "{}",
        out.stderr
    );
    // A lock that cannot be read is an error, as in `why`.
    let out = run_in(&dir, &["matrix", "--lock", "missing.lock"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A lock whose stack name would make a file escape `--out` (`apptainer/../../evil.def`),
/// even with its digest recomputed so that it passes the tamper check, is refused at parse;
/// nothing is written anywhere.
#[test]
fn gen_refuses_a_lock_name_that_escapes_out() {
    let dir = tempdir("escape");
    let text = std::fs::read_to_string(root().join("lockfiles/a100-pytorch.lock")).unwrap();
    let mut lock = gpustack::Lock::parse("gpustack.lock", &text).unwrap();
    let evil = "../../evil"; // not-a-repo-path: a hostile stack name, refused below
    lock.request.name = evil.into();
    lock.spec_digest = gpustack::lock::spec_digest(&lock.request);
    // The library refuses it too, for a lock built in memory (no parse to catch it).
    let e = gpustack::plan::generate(&lock, gpustack::plan::Target::Apptainer).unwrap_err();
    assert!(
        e.to_string().contains(&format!(
            "refusing to generate `{evil}.def`: it would land outside the `apptainer` directory"
        )),
        "{e}"
    );
    std::fs::create_dir_all(dir.join("work")).unwrap();
    std::fs::write(dir.join("work/gpustack.lock"), lock.to_toml()).unwrap();
    let out = run_in(&dir.join("work"), &["gen", "all"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains(&format!("error: invalid stack name `{evil}` in [request]"))
            && out.stderr.contains("hint: "),
        "{}",
        out.stderr
    );
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, vec!["work".to_string()]);
    let work: Vec<_> = std::fs::read_dir(dir.join("work")).unwrap().collect();
    assert_eq!(work.len(), 1, "only the lock");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An output directory that cannot be created or written: exit 2 with the path and a hint,
/// and no target half-written. `/proc` refuses new directories even to root; a read-only
/// directory is tried too when the tests do not run as root (root ignores permissions).
#[test]
fn gen_reports_an_unwritable_output_directory() {
    let dir = tempdir("unwritable");
    std::fs::copy(
        root().join("lockfiles/a100-pytorch.lock"),
        dir.join("gpustack.lock"),
    )
    .unwrap();
    if std::path::Path::new("/proc/self").exists() {
        let out = run_in(&dir, &["gen", "all", "--out", "/proc/gpustack-out"]);
        assert_eq!(out.code, 2, "{}", out.stderr);
        assert!(
            out.stderr
                .contains("error: cannot create `/proc/gpustack-out`")
                && out
                    .stderr
                    .contains("hint: check that the output directory is writable"),
            "{}",
            out.stderr
        );
    }
    let root_user = std::process::Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(true);
    if !root_user {
        use std::os::unix::fs::PermissionsExt;
        let ro = dir.join("ro");
        std::fs::create_dir(&ro).unwrap();
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
        let out = run_in(&dir, &["gen", "all", "--out", "ro/out"]);
        assert_eq!(out.code, 2, "{}", out.stderr);
        assert!(out.stderr.contains("ro/out"), "{}", out.stderr);
        assert!(out.stderr.contains("hint: "), "{}", out.stderr);
        assert_eq!(std::fs::read_dir(&ro).unwrap().count(), 0);
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}
