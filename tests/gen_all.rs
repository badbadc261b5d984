//! `gpustack gen all` renders the targets the spec configures (issue 34, item 5): Docker,
//! Apptainer and each deployment table present (all three when none is); a target
//! configured only by default that cannot express the storage is skipped with one line,
//! and the rest is written.

mod common;

use std::path::Path;

use common::{root, run_in, tempdir};

/// The train-and-serve example with its `[slurm]` table (and, with `k8s = false`, its
/// `[k8s]` table) removed and the models on a Kubernetes claim.
fn spec(k8s: bool) -> String {
    let text =
        std::fs::read_to_string(root().join("fixtures/specs/h100-ib-train-serve.toml")).unwrap();
    let mut out = String::new();
    let mut skipping = false;
    for line in text.lines() {
        if line.starts_with('[') {
            skipping = line == "[slurm]" || (!k8s && line == "[k8s]");
        }
        if skipping {
            continue;
        }
        if line.starts_with("models = ") {
            out.push_str("models = \"pvc:models\"\n");
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

fn dirs(out: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    v.sort();
    v
}

#[test]
fn a_kubernetes_stack_with_a_claim_generates_its_targets_only() {
    let dir = tempdir("gen-all-k8s");
    std::fs::write(dir.join("gpustack.toml"), spec(true)).unwrap();
    let lock = run_in(&dir, &["lock", "-q"]);
    assert_eq!(lock.code, 0, "{}", lock.stderr);
    let gen = run_in(&dir, &["gen", "all"]);
    assert_eq!(gen.code, 0, "{}", gen.stderr);
    assert!(!gen.stderr.contains("skipped"), "{}", gen.stderr);
    assert_eq!(dirs(&dir.join("out")), ["apptainer", "docker", "k8s"]);
    // `--check` compares the same set.
    let check = run_in(&dir, &["gen", "all", "--check"]);
    assert_eq!(check.code, 0, "{}", check.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_default_target_that_cannot_mount_the_storage_is_skipped_with_why() {
    let dir = tempdir("gen-all-default");
    std::fs::write(dir.join("gpustack.toml"), spec(false)).unwrap();
    let lock = run_in(&dir, &["lock", "-q"]);
    assert_eq!(lock.code, 0, "{}", lock.stderr);
    let gen = run_in(&dir, &["gen", "all"]);
    assert_eq!(gen.code, 0, "{}", gen.stderr);
    let skipped: Vec<&str> = gen
        .stderr
        .lines()
        .filter(|l| l.starts_with("skipped"))
        .collect();
    assert_eq!(
        skipped,
        ["skipped slurm: `[storage].models = \"pvc:models\"` is a Kubernetes claim, which Slurm jobs cannot mount (add a `[slurm]` table and storage the nodes mount to generate it)"],
        "{}",
        gen.stderr
    );
    assert_eq!(
        dirs(&dir.join("out")),
        ["apptainer", "docker", "k8s", "packer"]
    );
    // `-q`: nothing on success.
    let quiet = run_in(&dir, &["-q", "gen", "all"]);
    assert_eq!((quiet.code, quiet.stderr.as_str()), (0, ""));
    // Named, it is the error it always was.
    let slurm = run_in(&dir, &["gen", "slurm"]);
    assert_eq!(slurm.code, 2, "{}", slurm.stderr);
    assert!(
        slurm.stderr.contains("Slurm jobs cannot mount it"),
        "{}",
        slurm.stderr
    );
    let _ = std::fs::remove_dir_all(&dir);
}
