//! The library examples and the integration files other repositories use:
//!
//! * `examples/embed_solver.rs` and `examples/render_k8s.rs` are compiled into this test
//!   (their `run` functions are the examples' whole logic; `cargo test` also builds them as
//!   examples), and their output agrees with the CLI: the lock is byte-for-byte what
//!   `gpustack lock` writes, the file list is what `gpustack gen k8s` writes;
//! * `.pre-commit-hooks.yaml` passes yamllint, has the shape pre-commit reads, its `files`
//!   pattern matches what it should, and each hook's entry is a real gpustack command.

mod common;

#[allow(dead_code)] // `main`: the example's argument handling
#[path = "../examples/embed_solver.rs"]
mod embed_solver;

#[allow(dead_code)]
#[path = "../examples/render_k8s.rs"]
mod render_k8s;

#[allow(dead_code)]
#[path = "../examples/check_lock.rs"]
mod check_lock;

use std::collections::BTreeMap;

use common::*;
use gpustack::{Catalog, Component, Lock};
use serde_json::Value;

#[test]
fn embed_solver_reports_every_pick_and_writes_the_cli_lock() {
    let cat = Catalog::stock().unwrap();
    let report = embed_solver::run(&cat).unwrap();
    let (picks, lock_text) = report
        .split_once("\n# ----- gpustack.lock -----\n")
        .expect("the report ends with the lock");
    assert!(
        picks.starts_with("GPUs h100, a100 -> arch list sm_80, sm_90\n"),
        "{picks}"
    );
    let lock = Lock::parse("gpustack.lock", lock_text).unwrap();
    // Every locked component has its line with its version, and reasons under it.
    for c in &lock.components {
        let line = format!("\n{} {} (requested: ", c.name, c.version);
        assert!(picks.contains(&line), "no line for {}:\n{picks}", c.name);
    }
    assert!(picks.contains("\n    because "), "{picks}");
    // The component added in code is in the request; the installed driver is kept.
    let nccl = lock
        .component(Component::Nccl)
        .expect("nccl was added in code");
    assert_eq!(nccl.requested, "*");
    assert_eq!(
        lock.component(Component::Driver)
            .unwrap()
            .version
            .to_string(),
        "550.54.15"
    );

    // The same request as a gpustack.toml, locked by the CLI: the same bytes.
    let dir = tempdir("embed-solver");
    std::fs::write(
        dir.join("gpustack.toml"),
        "[stack]\nname = \"embedded\"\n\n[hardware]\ngpus = [\"H100\", \"a100\"]\ndriver = \"550.54.15\"\n\n[components]\ncuda = \"12.4\"\ntorch = \">=2.4, <2.6\"\nnccl = \"*\"\n",
    )
    .unwrap();
    let out = run_in(&dir, &["lock", "--out", "-"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        lock_text, out.stdout,
        "the example's lock differs from `gpustack lock`"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn render_k8s_lists_what_gen_writes() {
    let cat = Catalog::stock().unwrap();
    let name = "h100-ib-train-serve";
    let path = format!("fixtures/specs/{name}.toml");
    let text = std::fs::read_to_string(root().join(&path)).unwrap();
    let report = render_k8s::run(&cat, &path, &text).unwrap();
    let mut lines = report.lines();
    let header = lines.next().unwrap();
    let listed: BTreeMap<String, usize> = lines
        .map(|l| {
            let (size, rest) = l.trim_start().split_once(" bytes  ").unwrap();
            let path = rest.trim_end_matches("  (executable)");
            (path.to_string(), size.parse().unwrap())
        })
        .collect();
    // `gpustack gen k8s` of the committed lock of the same spec writes exactly these files.
    let dir = generate(name, "k8s");
    let written: BTreeMap<String, usize> = tree(&dir)
        .into_iter()
        .map(|(p, bytes)| (p.to_string_lossy().replace('\\', "/"), bytes.len()))
        .collect();
    assert_eq!(listed, written);
    assert_eq!(header, format!("{} files for target `k8s`:", written.len()));
    assert!(written.contains_key("trainjob.yaml") && written.contains_key("vllm-deployment.yaml"));

    // A bad spec is the library's error, with the CLI's exit code.
    let err = render_k8s::run(&cat, "bad.toml", "[stack]\nname = \"x\"\n").unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("[hardware]"), "{err}");
}

// ----- .pre-commit-hooks.yaml ------------------------------------------------------------

/// The keys a hook definition may have (https://pre-commit.com/#new-hooks).
const HOOK_KEYS: &[&str] = &[
    "id",
    "name",
    "entry",
    "language",
    "files",
    "exclude",
    "types",
    "types_or",
    "exclude_types",
    "always_run",
    "fail_fast",
    "verbose",
    "pass_filenames",
    "require_serial",
    "description",
    "language_version",
    "minimum_pre_commit_version",
    "args",
    "stages",
];

/// Hooks whose command is not in this gpustack yet: `gpustack check` is being written.
/// The test below fails once the command exists, so this list cannot go stale.
const PENDING: &[&str] = &[];

/// `.pre-commit-hooks.yaml` as JSON (PyYAML), or `None` when Python/PyYAML is missing.
fn hooks() -> Option<Vec<Value>> {
    let py = validator("python")?;
    let script = "import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))";
    let file = root().join(".pre-commit-hooks.yaml");
    let (code, out) = run_tool(&py, &["-c", script, file.to_str().unwrap()], &root());
    assert_eq!(
        code, 0,
        "PyYAML could not read .pre-commit-hooks.yaml:\n{out}"
    );
    Some(
        serde_json::from_str::<Value>(&out)
            .unwrap()
            .as_array()
            .unwrap()
            .clone(),
    )
}

#[test]
fn pre_commit_hooks_pass_yamllint() {
    let Some(yl) = validator("yamllint") else {
        return;
    };
    let config = root().join("fixtures/schemas/yamllint.yaml");
    let config = config.to_str().unwrap();
    let (code, out) = run_tool(
        &yl,
        &["-s", "-c", config, ".pre-commit-hooks.yaml"],
        &root(),
    );
    assert_eq!(code, 0, "yamllint:\n{out}");
    // yamllint does fail on a broken copy (a duplicated key), so the pass above means something.
    let dir = tempdir("hooks-yamllint");
    let text = std::fs::read_to_string(root().join(".pre-commit-hooks.yaml")).unwrap();
    let broken = text.replacen(
        "  language: rust\n",
        "  language: rust\n  language: system\n",
        1,
    );
    std::fs::write(dir.join("hooks.yaml"), broken).unwrap();
    let (code, out) = run_tool(&yl, &["-s", "-c", config, "hooks.yaml"], &dir);
    assert_ne!(code, 0, "yamllint accepted a duplicated key:\n{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn pre_commit_hooks_have_the_shape_pre_commit_reads() {
    let Some(hooks) = hooks() else { return };
    let ids: Vec<&str> = hooks.iter().map(|h| h["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["gpustack-lock-check", "gpustack-check"]);
    for h in &hooks {
        let h = h.as_object().unwrap();
        for k in h.keys() {
            assert!(HOOK_KEYS.contains(&k.as_str()), "unknown hook key `{k}`");
        }
        for k in ["id", "name", "entry", "language", "description"] {
            assert!(
                h[k].as_str().is_some_and(|s| !s.is_empty()),
                "`{k}` missing in {h:?}"
            );
        }
        // `language: rust` installs the package's binaries; the entry must name one.
        assert_eq!(h["language"], "rust");
        assert!(h["entry"].as_str().unwrap().starts_with("gpustack "));
        // The commands read gpustack.toml/gpustack.lock themselves.
        assert_eq!(h["pass_filenames"], false);
        assert!(h["minimum_pre_commit_version"].is_string());
    }
    // `files` is a Python regular expression searched in repository-relative paths.
    let py = validator("python").unwrap();
    let pattern = hooks[0]["files"].as_str().unwrap();
    let script = "import re, sys, json; p = re.compile(sys.argv[1]); print(json.dumps([bool(p.search(s)) for s in sys.argv[2:]]))";
    let samples = [
        "gpustack.toml",
        "gpustack.lock",
        "sub/gpustack.toml",
        "gpustack.toml.orig",
        "README.md",
        "xgpustack.lock",
    ];
    let mut args = vec!["-c", script, pattern];
    args.extend(samples);
    let (code, out) = run_tool(&py, &args, &root());
    assert_eq!(code, 0, "{out}");
    let matched: Vec<bool> = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        matched,
        [true, true, false, false, false, false],
        "`files: {pattern}` on {samples:?}"
    );
}

#[test]
fn pre_commit_hook_entries_are_gpustack_commands() {
    let Some(hooks) = hooks() else { return };
    let dir = tempdir("hook-entries");
    for h in &hooks {
        let id = h["id"].as_str().unwrap();
        let entry = h["entry"].as_str().unwrap();
        let args: Vec<&str> = entry.split_whitespace().skip(1).collect();
        // `gpustack SUBCOMMAND [FLAGS] --help` must exist and list each flag.
        let mut help = args.clone();
        help.push("--help");
        let out = run_in(&dir, &help);
        if PENDING.contains(&id) {
            assert_ne!(
                out.code, 0,
                "`{entry}` exists now: remove `{id}` from PENDING in tests/examples.rs"
            );
            continue;
        }
        assert_eq!(out.code, 0, "`{entry} --help`: {}", out.stderr);
        for flag in args.iter().filter(|a| a.starts_with("--")) {
            assert!(
                out.stdout.contains(flag),
                "`{flag}` is not in `{entry} --help`"
            );
        }
        // Run for real in an empty directory: no gpustack.toml is an input error (exit 2),
        // not a crash or a pass.
        let out = run_in(&dir, &args);
        assert_eq!(
            out.code, 2,
            "`{entry}` without a spec: {}{}",
            out.stdout, out.stderr
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

// ----- the book's "Library API" chapter ----------------------------------------------------

/// The lines of a Rust file as the book quotes them: trimmed, doc-comment markers removed,
/// blank lines dropped.
fn quotable_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| {
            let l = l.trim();
            let l = l
                .strip_prefix("///")
                .or_else(|| l.strip_prefix("//!"))
                .unwrap_or(l);
            l.trim().to_string()
        })
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn book_library_code_is_quoted_from_tested_code() {
    // Every source file under examples/ and src/ (the refactor moves modules around).
    let mut corpus = Vec::new();
    for dir in ["examples", "src"] {
        for e in walkdir::WalkDir::new(root().join(dir)).sort_by_file_name() {
            let path = e.unwrap().into_path();
            if path.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                corpus.push((path, quotable_lines(&text)));
            }
        }
    }
    let page = std::fs::read_to_string(root().join("book/src/library.md")).unwrap();
    let mut blocks = 0;
    let mut failures = Vec::new();
    for block in code_blocks(&page) {
        // Fragments: `mdbook test` must skip them (`ignore`); this test checks they are
        // quoted from code that `cargo test` compiles and runs.
        let n = block.line - 1;
        assert_ne!(
            block.info,
            "rust",
            "book/src/library.md:{}: mark the block `rust,ignore` (it is a fragment)",
            n + 1
        );
        if block.info != "rust,ignore" {
            continue;
        }
        blocks += 1;
        let body = block.text(&page);
        // `// …` marks a cut: each piece must appear, contiguous, in one tested file.
        for piece in body.split("// …\n") {
            let want = quotable_lines(piece);
            if want.is_empty() {
                continue;
            }
            let found = corpus
                .iter()
                .any(|(_, have)| have.windows(want.len()).any(|w| w == want.as_slice()));
            if !found {
                failures.push(format!(
                    "book/src/library.md:{}: not found in examples/ or src/:\n{}",
                    n + 1,
                    want.join("\n")
                ));
            }
        }
    }
    assert!(blocks >= 10, "{blocks} rust blocks");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn check_lock_reports_in_its_own_format_and_fails_on_errors() {
    let dir = tempdir("check-lock");
    std::fs::copy(
        root().join("lockfiles/h100-ib-train-serve.lock"),
        dir.join("gpustack.lock"),
    )
    .unwrap();
    copy_dir(
        &root().join("fixtures/gen/h100-ib-train-serve"),
        &dir.join("out"),
    );
    let lock = dir.join("gpustack.lock").display().to_string();
    let out = dir.join("out").display().to_string();
    let (report, failed) = check_lock::run(&lock, Some(&out)).unwrap();
    assert!(!failed, "{report}");
    assert!(
        !report.contains("\tunpinned\t"),
        "the site ignores unpinned: {report}"
    );
    // Warnings are reported, not failed on: this committed lock was made offline.
    assert!(report.contains("\topen-closure\t"), "{report}");
    // Plant drift: the tool fails and names the file and line.
    let env = dir.join("out/slurm/env/nccl.env");
    let text = std::fs::read_to_string(&env).unwrap();
    std::fs::write(&env, text.replace("NCCL_IB_DISABLE=0", "NCCL_IB_DISABLE=1")).unwrap();
    let (report, failed) = check_lock::run(&lock, Some(&out)).unwrap();
    assert!(failed, "{report}");
    assert!(
        report.contains(&format!("{out}/slurm/env/nccl.env:7\tdrift\t")),
        "{report}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
