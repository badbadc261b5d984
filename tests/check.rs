//! `gpustack check`: each problem is planted in a copy of a clean project (spec, lock, and
//! the committed golden outputs) and must be found, with its code, file and line.

mod common;

use std::path::{Path, PathBuf};

use common::{code_block, copy_dir, root, run_in, tempdir, Output};

const STACK: &str = "h100-ib-train-serve";

/// A clean project: gpustack.toml, gpustack.lock, out/ as `gen all` writes them.
fn project(tag: &str) -> PathBuf {
    let dir = tempdir(tag);
    std::fs::copy(
        root().join(format!("fixtures/specs/{STACK}.toml")),
        dir.join("gpustack.toml"),
    )
    .unwrap();
    std::fs::copy(
        root().join(format!("lockfiles/{STACK}.lock")),
        dir.join("gpustack.lock"),
    )
    .unwrap();
    copy_dir(
        &root().join(format!("fixtures/gen/{STACK}")),
        &dir.join("out"),
    );
    dir
}

fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{} has no `{from}`", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

fn line_of(path: &Path, needle: &str) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

fn check(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["check", "--format", "json"];
    args.extend_from_slice(extra);
    run_in(dir, &args)
}

fn findings(out: &Output) -> Vec<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\n{}", out.stdout, out.stderr));
    v["findings"].as_array().unwrap().clone()
}

/// The findings with `code`, as `file:line` strings.
fn located(out: &Output, code: &str) -> Vec<String> {
    findings(out)
        .iter()
        .filter(|f| f["code"] == code)
        .map(|f| {
            format!(
                "{}:{}",
                f["file"].as_str().unwrap_or("-"),
                f["line"].as_u64().unwrap_or(0)
            )
        })
        .collect()
}

fn errors(out: &Output) -> Vec<String> {
    findings(out)
        .iter()
        .filter(|f| f["severity"] == "error")
        .map(|f| format!("{} {}", f["code"], f["message"]))
        .collect()
}

#[test]
fn a_clean_project_passes_every_check() {
    let dir = project("clean");
    let out = check(&dir, &[]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(errors(&out).is_empty(), "{:?}", errors(&out));
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["format"], 1);
    assert_eq!(
        v["checked"],
        serde_json::json!([
            "integrity",
            "hygiene",
            "staleness",
            "drift",
            "consistency",
            "admission"
        ])
    );
    assert_eq!(v["skipped"][0]["check"], "hardware");
    // The solver's picks pass every hygiene rule on the stock catalog (its CUDA's images
    // are supported): no warning, nothing to acknowledge (tests/first_hour.rs has the
    // stacks whose warnings are their point).
    assert_eq!(v["warnings"], 0, "{}", out.stdout);
    // The committed locks are made offline, without their Python closure: `--strict`
    // reports that (`open-closure`), and nothing else.
    let strict = check(&dir, &["--strict"]);
    assert_eq!(strict.code, 1);
    let codes: Vec<String> = findings(&strict)
        .iter()
        .map(|f| f["code"].to_string())
        .collect();
    assert_eq!(codes, ["\"open-closure\""], "{}", strict.stdout);
    assert_eq!(
        check(&dir, &["--strict", "--allow", "open-closure"]).code,
        0
    );
    // Warnings are reported but do not fail the check, except with --strict.
    let pedantic = check(&dir, &["--pedantic"]);
    assert_eq!(pedantic.code, 0);
    let v: serde_json::Value = serde_json::from_str(&pedantic.stdout).unwrap();
    assert!(v["warnings"].as_u64().unwrap() > 0);
    assert_eq!(check(&dir, &["--strict", "--pedantic"]).code, 1);
    // Text is the default format; its last line summarizes.
    let text = run_in(&dir, &["check"]);
    assert_eq!(text.code, 0);
    assert!(
        text.stdout.lines().last().unwrap().starts_with(
            "checked gpustack.lock: integrity, hygiene, staleness, drift, consistency, admission, 0 errors"
        ),
        "{}",
        text.stdout
    );
}

#[test]
fn a_changed_spec_makes_the_lock_stale() {
    let dir = project("stale-spec");
    edit(&dir.join("gpustack.toml"), "replicas = ", "replicas = 1");
    let out = check(&dir, &[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(located(&out, "stale-spec").len(), 1, "{}", out.stdout);
    assert!(located(&out, "stale-spec")[0].starts_with("gpustack.lock:"));
}

#[test]
fn a_catalog_that_resolves_differently_makes_the_lock_stale() {
    let dir = project("stale-catalog");
    std::fs::create_dir_all(dir.join("site")).unwrap();
    std::fs::write(
        dir.join("site/nccl.toml"),
        "family = \"nccl\"\n\n[[release]]\nversion = \"2.99.1\"\ncuda_majors = [12, 13]\nsource = \"site build of NCCL, https://example.org/nccl\"\n",
    )
    .unwrap();
    let out = check(&dir, &["--catalog", "site"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let stale: Vec<serde_json::Value> = findings(&out)
        .into_iter()
        .filter(|f| f["code"] == "stale-catalog")
        .collect();
    assert_eq!(stale.len(), 1, "{}", out.stdout);
    assert!(
        stale[0]["detail"]
            .as_array()
            .unwrap()
            .iter()
            // The site's NCCL 2.99.1 joins the newer versions `why` says torch's pin passed
            // over (nearest first, so it is counted in "and 11 more").
            .any(|d| d.as_str().unwrap().starts_with('+')
                && d.as_str()
                    .unwrap()
                    .contains("and 11 more: torch 2.10.0+cu128 pins NCCL")),
        "{}",
        stale[0]
    );
    // Without the overlay, the same project is fresh.
    assert!(located(&check(&dir, &[]), "stale-catalog").is_empty());
}

#[test]
fn a_hand_edited_lock_is_tampered() {
    let dir = project("tampered");
    let lock = dir.join("gpustack.lock");
    let text = std::fs::read_to_string(&lock).unwrap();
    // Bump NCCL in place without re-locking: the base layer's hash no longer matches.
    let nccl = text.find("name = \"nccl\"\nversion = \"").unwrap();
    let start = nccl + "name = \"nccl\"\nversion = \"".len();
    let end = start + text[start..].find('"').unwrap();
    let edited = format!("{}2.99.9{}", &text[..start], &text[end..]);
    std::fs::write(&lock, edited).unwrap();
    let out = check(&dir, &[]);
    assert_eq!(out.code, 1);
    let tampered = located(&out, "tampered-lock");
    let base_line = line_of(&lock, "hash = \"sha256:");
    assert!(
        tampered.contains(&format!("gpustack.lock:{base_line}")),
        "{tampered:?} (base layer hash at line {base_line})\n{}",
        out.stdout
    );
    // An edited spec digest is found too.
    let dir = project("tampered-digest");
    let lock = dir.join("gpustack.lock");
    let text = std::fs::read_to_string(&lock).unwrap();
    let old = text
        .lines()
        .find(|l| l.starts_with("spec-digest = "))
        .unwrap();
    // Still a well-formed digest (a malformed one is a parse error), just not this spec's.
    edit(
        &lock,
        old,
        &format!("spec-digest = \"sha256:{}\"", "0".repeat(64)),
    );
    let out = check(&dir, &[]);
    assert_eq!(
        located(&out, "tampered-lock"),
        vec![format!("gpustack.lock:{}", line_of(&lock, "spec-digest"))]
    );
}

#[test]
fn hand_edited_image_names_digests_and_pins_are_tampered() {
    // Every field that names what a build pulls or installs is under a layer hash: the
    // base image's repository (`FROM evil.example.com/cuda:…` otherwise), an image digest,
    // an apt pin. `check` reports the layer's hash line; `gen` refuses to render.
    for (field, from, to, layer) in [
        (
            "repository",
            "repository = \"nvidia/cuda\"",
            "repository = \"evil.example.com/cuda\"",
            "base",
        ),
        (
            "image-digest",
            "image-digest = \"sha256:2",
            "image-digest = \"sha256:3",
            "framework",
        ),
        (
            "apt",
            "\"datacenter-gpu-manager-4-core=1:4.6.0-1\"",
            "\"datacenter-gpu-manager-4-core=1:4.6.9-1\"",
            "host",
        ),
    ] {
        let dir = project(&format!("tampered-{field}"));
        let lock = dir.join("gpustack.lock");
        edit(&lock, from, to);
        let out = check(&dir, &[]);
        assert_eq!(out.code, 1, "{field}");
        let text = std::fs::read_to_string(&lock).unwrap();
        let at = text
            .find(&format!("[[layer]]\nname = \"{layer}\""))
            .unwrap();
        let hash_line = text[..at].lines().count()
            + text[at..]
                .lines()
                .position(|l| l.starts_with("hash = "))
                .unwrap()
            + 1;
        assert!(
            located(&out, "tampered-lock").contains(&format!("gpustack.lock:{hash_line}")),
            "{field}: {:?}",
            located(&out, "tampered-lock")
        );
        let gen = run_in(&dir, &["gen", "all"]);
        assert_eq!(gen.code, 2, "{field}: {}", gen.stderr);
        assert!(
            gen.stderr.contains("was edited by hand"),
            "{field}: {}",
            gen.stderr
        );
    }
}

#[test]
fn edited_missing_and_extra_files_are_drift() {
    let dir = project("drift");
    let job = dir.join("out/k8s/vllm-service.yaml");
    let text = std::fs::read_to_string(&job).unwrap();
    let (n, line) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains("namespace:"))
        .unwrap();
    edit(&job, line, &line.replace("namespace:", "namespace: x"));
    std::fs::remove_file(dir.join("out/slurm/serve.sbatch")).unwrap();
    std::fs::write(dir.join("out/docker/notes.txt"), "mine\n").unwrap();
    let out = check(&dir, &[]);
    assert_eq!(out.code, 1);
    let drift = located(&out, "drift");
    assert_eq!(
        drift,
        vec![
            "out/docker/notes.txt:0".to_string(),
            format!("out/k8s/vllm-service.yaml:{}", n + 1),
            "out/slurm/serve.sbatch:0".to_string(),
        ],
        "{}",
        out.stdout
    );
    let text = run_in(&dir, &["check"]).stdout;
    assert!(text.contains("out/slurm/serve.sbatch is missing"), "{text}");
    assert!(text.contains("out/docker/notes.txt is not generated by gpustack"));
    assert!(text.contains(&format!("+ {line}")), "{text}");
}

#[test]
fn a_target_from_another_lock_is_reported() {
    let dir = project("other-lock");
    std::fs::remove_dir_all(dir.join("out/slurm")).unwrap();
    copy_dir(
        &root().join("fixtures/gen/slurm-apptainer-h100/slurm"),
        &dir.join("out/slurm"),
    );
    let out = check(&dir, &[]);
    assert_eq!(out.code, 1);
    let other = located(&out, "other-lock");
    assert_eq!(other.len(), 1, "{}", out.stdout);
    assert!(other[0].starts_with("out/slurm/"), "{other:?}");
}

/// The pull-request check as the README and the example workflow write it, word for word.
fn ci_commands() -> Vec<Vec<String>> {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let workflow = std::fs::read_to_string(root().join("examples/ci/github-actions.yml")).unwrap();
    let readme_cmd = readme
        .lines()
        .find_map(|l| l.strip_prefix("$ gpustack check"))
        .expect("the README shows `$ gpustack check …`");
    let workflow_cmd = workflow
        .lines()
        .find_map(|l| l.trim().strip_prefix("run: gpustack check"))
        .expect("the example workflow runs `gpustack check …`");
    [readme_cmd, workflow_cmd]
        .iter()
        .map(|rest| {
            std::iter::once("check".to_string())
                .chain(rest.split_whitespace().map(String::from))
                .collect()
        })
        .collect()
}

/// The most common mistake: a version changed, the lock written again, `gen` forgotten. The
/// CI command fails with `stale-outputs`, naming the lock `out/` came from and the command
/// that regenerates it; after `gen all` it passes; `--no-drift` skips the comparison, saying
/// so.
#[test]
fn outputs_of_an_older_lock_fail_the_ci_command_until_regenerated() {
    let dir = project("stale-outputs");
    let old_hash = {
        let lock = gpustack::Lock::parse(
            "gpustack.lock",
            &std::fs::read_to_string(dir.join("gpustack.lock")).unwrap(),
        )
        .unwrap();
        gpustack::plan::Common::new(&lock).unwrap().lock_hash
    };
    let old_short = &old_hash[..old_hash.len().min("sha256:".len() + 12)];
    edit(
        &dir.join("gpustack.toml"),
        "python = \"3.12\"",
        "python = \"3.11\"",
    );
    let relock = run_in(&dir, &["lock", "-q"]);
    assert_eq!(relock.code, 0, "{}", relock.stderr);
    for cmd in ci_commands() {
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        let out = run_in(&dir, &args);
        assert_eq!(out.code, 1, "{args:?}: {}{}", out.stdout, out.stderr);
        let annotation = out
            .stdout
            .lines()
            .find(|l| l.contains("title=gpustack stale-outputs::"))
            .unwrap_or_else(|| panic!("{args:?}: no stale-outputs annotation:\n{}", out.stdout));
        assert!(annotation.starts_with("::error "), "{annotation}");
        for target in ["docker", "apptainer", "packer", "k8s", "slurm"] {
            assert!(
                annotation.contains(&format!(
                    "out/{target}/: generated from gpustack.lock ({old_short})"
                )),
                "{annotation}"
            );
        }
        // `gen all` renders the configured targets; `out/packer/` (the spec has no
        // `[packer]` table) was generated by name, and is named.
        assert!(
            annotation.contains("`gpustack gen all packer`"),
            "{annotation}"
        );
        // One finding, not one per file.
        assert_eq!(out.stdout.matches("::error").count(), 1, "{}", out.stdout);
    }
    // The text report says the same, and what was not compared.
    let text = run_in(&dir, &["check"]);
    assert_eq!(text.code, 1);
    assert!(
        text.stdout
            .contains("error[stale-outputs]: out/ was generated from another lock"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains("skipped consistency (out/ holds the outputs of another lock)"),
        "{}",
        text.stdout
    );
    // Skipping is explicit.
    let skipped = run_in(&dir, &["check", "--no-drift"]);
    assert_eq!(skipped.code, 0, "{}", skipped.stdout);
    assert!(
        skipped
            .stdout
            .contains("skipped drift (--no-drift), consistency (--no-drift)"),
        "{}",
        skipped.stdout
    );
    assert_eq!(
        run_in(&dir, &["check", "--no-drift", "--out", "out"]).code,
        2
    );
    // Regenerated as the hint says: the CI command passes.
    let gen = run_in(&dir, &["gen", "all", "packer", "-q"]);
    assert_eq!(gen.code, 0, "{}", gen.stderr);
    for cmd in ci_commands() {
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        let out = run_in(&dir, &args);
        assert_eq!(out.code, 0, "{args:?}: {}{}", out.stdout, out.stderr);
    }
}

/// A tree that is another lock's is one finding, and the hint repeats the paths given.
#[test]
fn another_locks_tree_names_the_paths_given() {
    let dir = project("stale-outputs-paths");
    std::fs::create_dir_all(dir.join("stacks")).unwrap();
    std::fs::copy(
        root().join("lockfiles/l40s-torch.lock"),
        dir.join("stacks/l40s.lock"),
    )
    .unwrap();
    std::fs::rename(dir.join("out"), dir.join("gen")).unwrap();
    let out = check(&dir, &["--lock", "stacks/l40s.lock", "--out", "gen"]);
    assert_eq!(out.code, 1);
    let f = findings(&out);
    assert_eq!(f.len(), 1, "{}", out.stdout);
    assert_eq!(f[0]["code"], "stale-outputs");
    assert_eq!(
        f[0]["hint"].as_str().unwrap().split(';').next().unwrap(),
        "regenerate them from this lock: `gpustack gen all --lock stacks/l40s.lock --out gen`"
    );
    // Only k8s kept: only k8s is regenerated.
    for t in ["docker", "apptainer", "packer", "slurm"] {
        std::fs::remove_dir_all(dir.join("gen").join(t)).unwrap();
    }
    let out = check(&dir, &["--lock", "stacks/l40s.lock", "--out", "gen"]);
    assert!(
        findings(&out)[0]["hint"]
            .as_str()
            .unwrap()
            .contains("`gpustack gen k8s --lock stacks/l40s.lock --out gen`"),
        "{}",
        out.stdout
    );
}

#[test]
fn a_driver_that_differs_across_targets_is_inconsistent() {
    let dir = project("driver");
    let lock = std::fs::read_to_string(dir.join("gpustack.lock")).unwrap();
    let driver = lock
        .split("name = \"driver\"\nversion = \"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_string();
    let base = dir.join("out/packer/scripts/base.sh");
    edit(
        &base,
        &format!("readonly DRIVER_VERSION={driver}"),
        "readonly DRIVER_VERSION=550.54.15",
    );
    let values = dir.join("out/k8s/gpu-operator-values.yaml");
    edit(
        &values,
        &format!("version: \"{driver}\""),
        "version: \"570.86.15\"",
    );
    let out = check(&dir, &[]);
    assert_eq!(out.code, 1);
    let found = located(&out, "inconsistent-driver");
    assert_eq!(
        found,
        vec![format!(
            "out/packer/scripts/base.sh:{}",
            line_of(&base, "readonly DRIVER_VERSION=")
        )],
        "{}",
        out.stdout
    );
    let f = findings(&out)
        .into_iter()
        .find(|f| f["code"] == "inconsistent-driver")
        .unwrap();
    let detail: Vec<&str> = f["detail"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    assert!(
        detail.contains(&format!("gpustack.lock: {driver}").as_str()),
        "{detail:?}"
    );
    assert!(
        detail.contains(
            &format!(
                "out/k8s/gpu-operator-values.yaml:{}: 570.86.15",
                line_of(&values, "version: \"570.86.15\"")
            )
            .as_str()
        ),
        "{detail:?}"
    );
}

#[test]
fn an_image_tag_that_is_not_the_bake_files_is_inconsistent() {
    let dir = project("image");
    let job = dir.join("out/k8s/trainjob.yaml");
    let text = std::fs::read_to_string(&job).unwrap();
    let image_line = text.find("image: \"").unwrap();
    let tag_at = image_line + text[image_line..].find(":training-").unwrap() + ":training-".len();
    let old = &text[tag_at..tag_at + 12];
    // The training pods run the code image (`…-code:training-<hash>`).
    edit(
        &job,
        &format!("-code:training-{old}"),
        "-code:training-000000000000",
    );
    let sbatch = dir.join("out/slurm/serve.sbatch");
    edit(
        &sbatch,
        "image='registry.example.com#ml/llm-cluster:inference-",
        "image='registry.example.com#ml/llm-cluster:inference-f",
    );
    let out = check(&dir, &[]);
    assert_eq!(out.code, 1);
    assert_eq!(
        located(&out, "inconsistent-image"),
        vec![
            format!(
                "out/k8s/trainjob.yaml:{}",
                line_of(&job, ":training-000000000000")
            ),
            format!("out/slurm/serve.sbatch:{}", line_of(&sbatch, "image='")),
        ],
        "{}",
        out.stdout
    );
}

#[test]
fn an_nccl_variable_that_differs_across_targets_is_inconsistent() {
    let dir = project("env");
    let env = dir.join("out/slurm/env/nccl.env");
    edit(&env, "export NCCL_IB_DISABLE=0", "export NCCL_IB_DISABLE=1");
    let cm = dir.join("out/k8s/nccl-env.yaml");
    edit(&cm, "\ndata:\n", "\ndata:\n  \"NCCL_DEBUG\": \"INFO\"\n");
    let out = check(&dir, &[]);
    assert_eq!(out.code, 1);
    let found = located(&out, "inconsistent-env");
    assert_eq!(
        found,
        vec![
            format!("out/k8s/nccl-env.yaml:{}", line_of(&cm, "NCCL_DEBUG")),
            format!(
                "out/slurm/env/nccl.env:{}",
                line_of(&env, "NCCL_IB_DISABLE")
            ),
        ],
        "{}",
        out.stdout
    );
    let text = run_in(&dir, &["check"]).stdout;
    assert!(text.contains("`NCCL_IB_DISABLE` differs"), "{text}");
    assert!(text.contains("out/docker/Dockerfile:"), "{text}");
    assert!(
        text.contains("out/k8s/nccl-env.yaml: NCCL_DEBUG not set")
            || text.contains("NCCL_DEBUG=INFO")
    );
}

#[test]
fn every_namespace_configmap_is_held_to_the_one_environment() {
    // Training that needs the host network beside serving that does not: the training
    // side gets a namespace of its own and `nccl-env-training.yaml` beside
    // `nccl-env.yaml`; `check` compares every one of them, not just the first.
    let dir = tempdir("env-training");
    let spec = std::fs::read_to_string(root().join(format!("fixtures/specs/{STACK}.toml")))
        .unwrap()
        .replace(
            "checkpoints = \"lustre:/lustre/scratch/ckpt\"",
            "checkpoints = \"nfs://nfs.example.com/ckpt\"",
        )
        .replace(
            "model = \"/models/llama-3-70b\"",
            "model = \"meta-llama/Llama-3.1-70B-Instruct\"",
        );
    std::fs::write(dir.join("gpustack.toml"), spec).unwrap();
    assert_eq!(run_in(&dir, &["lock"]).code, 0);
    let gen = run_in(
        &dir,
        &["gen", "all", "--lock", "gpustack.lock", "--out", "out"],
    );
    assert_eq!(gen.code, 0, "{}", gen.stderr);
    let training = dir.join("out/k8s/nccl-env-training.yaml");
    assert!(training.exists());
    let clean = check(&dir, &[]);
    assert!(
        located(&clean, "inconsistent-env").is_empty(),
        "{}",
        clean.stdout
    );
    edit(
        &training,
        "\ndata:\n",
        "\ndata:\n  \"NCCL_DEBUG\": \"INFO\"\n",
    );
    let out = check(&dir, &[]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert_eq!(
        located(&out, "inconsistent-env"),
        vec![format!(
            "out/k8s/nccl-env-training.yaml:{}",
            line_of(&training, "NCCL_DEBUG")
        )],
        "{}",
        out.stdout
    );
}

#[test]
fn hardware_that_cannot_run_the_lock_is_reported() {
    let dir = project("hardware");
    // The lock's own hardware passes.
    std::fs::write(
        dir.join("same.toml"),
        "[hardware]\ngpus = [\"h100\"]\ndriver = \"595.91.07\"\n",
    )
    .unwrap();
    let ok = check(&dir, &["--hardware", "same.toml"]);
    assert!(errors(&ok).is_empty(), "{:?}", errors(&ok));
    // An older driver that still runs the stack (CUDA minor version compatibility) is not
    // the one the VM image installs.
    std::fs::write(
        dir.join("older.toml"),
        "[hardware]\ngpus = [\"h100\"]\ndriver = \"535.104.05\"\n",
    )
    .unwrap();
    let older = check(&dir, &["--hardware", "older.toml"]);
    assert_eq!(older.code, 0);
    assert!(errors(&older).is_empty());
    assert!(
        findings(&older)
            .iter()
            .any(|f| f["code"] == "driver-older-than-locked"
                && f["severity"] == "warning"
                && f["message"]
                    .as_str()
                    .unwrap()
                    .contains("535.104.05 is older than the locked driver")),
        "{:?}",
        errors(&older)
    );
    // An A100 (sm_80) on a stack built for sm_90, with a driver too old for CUDA 12.
    std::fs::write(
        dir.join("node.toml"),
        "[hardware]\ngpus = [\"a100\"]\ndriver = \"470.256.02\"\n",
    )
    .unwrap();
    let out = check(&dir, &["--hardware", "node.toml"]);
    assert_eq!(out.code, 1);
    assert_eq!(located(&out, "arch-not-covered").len(), 1, "{}", out.stdout);
    let old = findings(&out)
        .into_iter()
        .find(|f| f["code"] == "driver-too-old")
        .unwrap_or_else(|| panic!("{}", out.stdout));
    assert!(
        old["message"]
            .as_str()
            .unwrap()
            .contains("470.256.02 cannot run the locked stack"),
        "{old}"
    );
    // The explanation names the rule and its source.
    let detail = old["detail"].to_string();
    assert!(detail.contains("driver"), "{detail}");
    assert!(
        detail.contains("source") || detail.contains("http"),
        "{detail}"
    );
    // An unknown GPU is invalid input, not a finding.
    std::fs::write(dir.join("bad.toml"), "[hardware]\ngpus = [\"h1000\"]\n").unwrap();
    let bad = run_in(&dir, &["check", "--hardware", "bad.toml"]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("unknown GPU `h1000`"), "{}", bad.stderr);
    assert!(bad.stderr.contains("bad.toml:2:"), "{}", bad.stderr);
    assert!(
        bad.stderr.contains("did you mean `h100`?"),
        "{}",
        bad.stderr
    );
}

/// `[hardware].driver` says the nodes run exactly this driver: a node on another one
/// contradicts the lock even where the stack would also resolve on it (silent before).
#[test]
fn a_node_off_the_installed_driver_is_reported() {
    let dir = tempdir("installed-driver");
    let text = std::fs::read_to_string(root().join("lockfiles/a100-torch-source.lock")).unwrap();
    assert!(text.contains("driver-source = \"installed\""));
    let driver = text
        .split("[hardware]\ndriver = \"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_string();
    std::fs::write(dir.join("gpustack.lock"), &text).unwrap();
    std::fs::write(
        dir.join("same.toml"),
        format!("[hardware]\ngpus = [\"a100\"]\ndriver = \"{driver}\"\n"),
    )
    .unwrap();
    let same = check(&dir, &["--hardware", "same.toml"]);
    assert!(errors(&same).is_empty(), "{:?}", errors(&same));
    // Raw nvidia-smi XML of an A100 node on R535.
    let xml = root()
        .join("fixtures/probe/a100-mig.xml")
        .display()
        .to_string();
    let out = check(&dir, &["--hardware", &xml]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    let f = findings(&out)
        .into_iter()
        .find(|f| f["code"] == "installed-driver-mismatch")
        .unwrap_or_else(|| panic!("{}", out.stdout));
    assert_eq!(f["severity"], "error");
    assert_eq!(
        f["message"],
        format!("the node runs driver 535.54.03, but the lock says the nodes run the installed driver {driver} (`[hardware].driver`)")
    );
    let line = text
        .lines()
        .position(|l| l == "driver-source = \"installed\"")
        .unwrap()
        + 1;
    assert_eq!(f["line"].as_u64(), Some(line as u64));
    // A newer driver is a mismatch too: the lock states the fleet's driver.
    std::fs::write(
        dir.join("newer.toml"),
        "[hardware]\ngpus = [\"a100\"]\ndriver = \"610.43.02\"\n",
    )
    .unwrap();
    let newer = check(&dir, &["--hardware", "newer.toml"]);
    assert_eq!(
        located(&newer, "installed-driver-mismatch").len(),
        1,
        "{}",
        newer.stdout
    );
}

#[test]
fn hygiene_warnings_name_the_artifact() {
    let dir = project("hygiene");
    let lock = dir.join("gpustack.lock");
    let text = std::fs::read_to_string(&lock).unwrap();
    let at = text
        .find("name = \"nvidia-container-toolkit\"\nversion = \"")
        .unwrap();
    let start = at + "name = \"nvidia-container-toolkit\"\nversion = \"".len();
    let end = start + text[start..].find('"').unwrap();
    std::fs::write(&lock, format!("{}1.17.3{}", &text[..start], &text[end..])).unwrap();
    let out = check(&dir, &["--pedantic"]);
    // Without --pedantic the catalog gaps are counted, not listed.
    let quiet = check(&dir, &[]);
    assert!(located(&quiet, "unpinned").is_empty(), "{}", quiet.stdout);
    let v: serde_json::Value = serde_json::from_str(&quiet.stdout).unwrap();
    assert_eq!(v["suppressed"][0]["code"], "unpinned", "{v}");
    assert_eq!(v["suppressed"][0]["why"], "pedantic", "{v}");
    let unsafe_ = findings(&out)
        .into_iter()
        .filter(|f| f["code"] == "unsafe-version")
        .map(|f| f["message"].as_str().unwrap().to_string())
        .collect::<Vec<_>>();
    assert!(
        unsafe_
            .iter()
            .any(|m| m.contains("nvidia-container-toolkit 1.17.3") && m.contains("CVE-2025-23266")),
        "{unsafe_:?}"
    );
    // Unpinned artifacts: the nvidia/cuda image has no sourced digest.
    assert!(
        located(&out, "unpinned")
            .iter()
            .any(|l| *l == format!("gpustack.lock:{}", line_of(&lock, "name = \"cuda-image\""))),
        "{}",
        out.stdout
    );
    // An end-of-life driver branch.
    let dir = tempdir("eol");
    std::fs::copy(
        root().join("lockfiles/t4-inference-old-driver.lock"),
        dir.join("gpustack.lock"),
    )
    .unwrap();
    let out = check(&dir, &[]);
    assert_eq!(located(&out, "eol-driver").len(), 1, "{}", out.stdout);
}

#[test]
fn github_format_prints_annotations() {
    let dir = project("github");
    edit(
        &dir.join("out/slurm/env/nccl.env"),
        "export NCCL_IB_DISABLE=0",
        "export NCCL_IB_DISABLE=1",
    );
    let out = run_in(&dir, &["check", "--format", "github"]);
    assert_eq!(out.code, 1);
    let line = line_of(&dir.join("out/slurm/env/nccl.env"), "NCCL_IB_DISABLE");
    assert!(
        out.stdout.contains(&format!(
            "::error file=out/slurm/env/nccl.env,line={line},title=gpustack drift::"
        )),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("title=gpustack inconsistent-env::"));
    // Multi-line messages stay one command each.
    for l in out.stdout.lines() {
        assert!(l.starts_with("::") || l.starts_with("checked "), "{l}");
    }
}

#[test]
fn invalid_inputs_exit_2() {
    let dir = project("invalid");
    std::fs::write(dir.join("gpustack.lock"), "version = 2\n[[component]\n").unwrap();
    let out = run_in(&dir, &["check"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("gpustack.lock:2:"), "{}", out.stderr);
    let dir = project("invalid-out");
    let out = run_in(&dir, &["check", "--out", "nowhere"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("output directory `nowhere` not found"),
        "{}",
        out.stderr
    );
    let out = run_in(&dir, &["check", "--spec", "missing.toml"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("spec `missing.toml` not found"),
        "{}",
        out.stderr
    );
    let out = run_in(&dir, &["check", "--format", "yaml"]);
    assert_eq!(out.code, 2);
}

#[test]
fn every_committed_lock_and_output_tree_checks_clean() {
    for name in common::example_names() {
        let dir = tempdir(&format!("all-{name}"));
        std::fs::copy(
            root().join(format!("fixtures/specs/{name}.toml")),
            dir.join("gpustack.toml"),
        )
        .unwrap();
        std::fs::copy(
            root().join(format!("lockfiles/{name}.lock")),
            dir.join("gpustack.lock"),
        )
        .unwrap();
        copy_dir(
            &root().join(format!("fixtures/gen/{name}")),
            &dir.join("out"),
        );
        let out = check(&dir, &[]);
        assert_eq!(out.code, 0, "{name}: {:?}", errors(&out));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The book documents the JSON format with an example; its keys must be the real ones.
#[test]
fn the_books_json_example_has_the_real_shape() {
    fn shape(v: &serde_json::Value, path: &str, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    out.push(format!("{path}.{k}"));
                    shape(x, &format!("{path}.{k}"), out);
                }
            }
            serde_json::Value::Array(a) => {
                for x in a {
                    shape(x, &format!("{path}[]"), out);
                }
            }
            _ => {}
        }
    }
    let book = std::fs::read_to_string(root().join("book/src/checks.md")).unwrap();
    let block = code_block(&book, "json").expect("a json block");
    let documented: serde_json::Value = serde_json::from_str(block).unwrap();
    let dir = project("book-json");
    edit(
        &dir.join("out/slurm/env/nccl.env"),
        "export NCCL_IB_DISABLE=0",
        "export NCCL_IB_DISABLE=1",
    );
    let real: serde_json::Value = serde_json::from_str(&check(&dir, &[]).stdout).unwrap();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    shape(&documented, "", &mut a);
    shape(&real, "", &mut b);
    a.sort();
    a.dedup();
    b.sort();
    b.dedup();
    assert_eq!(a, b);
    assert_eq!(documented["findings"][0], real["findings"][0]);
}

/// The CI example is valid YAML and runs the commands the book says it runs.
#[test]
fn the_github_workflow_example_is_valid() {
    let path = root().join("examples/ci/github-actions.yml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(
        "gpustack check --spec gpustack.toml --lock gpustack.lock --out out --format github"
    ));
    assert!(text.contains("gpustack diff base.lock gpustack.lock --format markdown"));
    if let Some(yamllint) = common::validator("yamllint") {
        let out = std::process::Command::new(yamllint)
            .args(["-s", "-c"])
            .arg(root().join("fixtures/schemas/yamllint.yaml"))
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    // The flags it uses exist.
    let dir = project("workflow");
    let out = run_in(
        &dir,
        &[
            "check",
            "--spec",
            "gpustack.toml",
            "--lock",
            "gpustack.lock",
            "--out",
            "out",
            "--format",
            "github",
        ],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
}

/// `probe` output feeds `check --hardware`, and so does raw nvidia-smi output.
#[test]
fn probe_output_and_raw_nvidia_smi_feed_check() {
    let dir = project("probe");
    let probed = run_in(
        &dir,
        &[
            "probe",
            "--from",
            &root()
                .join("fixtures/probe/h200-kmd-version.csv")
                .display()
                .to_string(),
        ],
    );
    assert_eq!(probed.code, 0, "{}", probed.stderr);
    assert!(
        probed
            .stdout
            .contains("[hardware]\ngpus = [\"h200\"]\ndriver = \"610.43.02\"\n"),
        "{}",
        probed.stdout
    );
    std::fs::write(dir.join("node.toml"), &probed.stdout).unwrap();
    let out = check(&dir, &["--hardware", "node.toml"]);
    // H200 is Hopper (9.0): covered by the H100 stack's sm_90, but not named in the spec.
    assert_eq!(located(&out, "gpu-not-locked").len(), 1, "{}", out.stdout);
    assert!(errors(&out).is_empty(), "{:?}", errors(&out));
    // Raw XML from an A100 node with an older driver.
    let xml = root()
        .join("fixtures/probe/a100-mig.xml")
        .display()
        .to_string();
    let out = check(&dir, &["--hardware", &xml]);
    assert_eq!(out.code, 1);
    assert_eq!(located(&out, "arch-not-covered").len(), 1, "{}", out.stdout);
    assert_eq!(
        located(&out, "driver-older-than-locked").len(),
        1,
        "{}",
        out.stdout
    );
    // JSON output, and no nvidia-smi on PATH is a usage error.
    let json = run_in(&dir, &["probe", "--format", "json", "--from", &xml]);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(v["gpus"][0]["id"], "a100", "{v}");
    let none = std::process::Command::new(env!("CARGO_BIN_EXE_gpustack"))
        .arg("probe")
        .env("PATH", "/nonexistent")
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(none.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&none.stderr).contains("`nvidia-smi` is not on PATH"));
}

#[test]
fn a_training_command_that_differs_across_targets_is_inconsistent() {
    let dir = project("command");
    let sbatch = dir.join("out/slurm/train.sbatch");
    edit(&sbatch, "  ds_config.json\n", "  other.json\n");
    let out = check(&dir, &[]);
    assert_eq!(out.code, 1);
    assert_eq!(
        located(&out, "inconsistent-command"),
        vec![format!(
            "out/slurm/train.sbatch:{}",
            line_of(&sbatch, "entry=(")
        )],
        "{}",
        out.stdout
    );
}

/// The OS release of the lock's VM images, end of life by the check's date: a warning with
/// the dates, the day after (not the day before) the catalog's end of standard support.
#[test]
fn an_end_of_life_os_release_warns_with_its_dates() {
    let catalog = gpustack::Catalog::stock().unwrap();
    let spec = "[stack]\nname = \"old-os\"\nos = \"ubuntu20.04\"\n[hardware]\ngpus = [\"a100\"]\n[components]\ncuda = \"12.4.1\"\n";
    let lock = gpustack::lock_spec(&catalog, "gpustack.toml", spec)
        .unwrap()
        .to_toml();
    let run = |today: &str| {
        gpustack::check::check(&gpustack::check::Inputs {
            lock: ("gpustack.lock", &lock),
            spec: None,
            catalog: &catalog,
            out: None,
            unusual: &[],
            hardware: None,
            pylocks: &Default::default(),
            today: Some(today),
        })
        .unwrap()
    };
    let eol = |r: &gpustack::check::Report| {
        r.findings
            .iter()
            .filter(|f| f.code == gpustack::check::Code::EolOs)
            .map(|f| f.message.clone())
            .collect::<Vec<_>>()
    };
    assert!(
        eol(&run("2025-05-31")).is_empty(),
        "May 2025 is still supported"
    );
    let found = eol(&run("2025-06-01"));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("ubuntu20.04 20.04")
            && found[0].contains("end of life 2025-05")
            && found[0].contains("(2025-06-01)"),
        "{}",
        found[0]
    );
}
