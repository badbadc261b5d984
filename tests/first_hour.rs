//! A newcomer's first hour (issue 18): what a new user types, run as they would type it.
//! `init → lock → gen all → check --strict` is green; names are forgiving; PEP 440 habits
//! are understood; `check` stays within the lock it was given; the everyday flags work.

mod common;

use std::path::Path;

use common::{root, run_in, tempdir, Output};

fn ok(o: &Output, what: &str) {
    assert_eq!(o.code, 0, "{what}: exit {}\n{}\n{}", o.code, o.stdout, o.stderr);
}

/// Warnings an example spec carries on purpose, allowed by name (`--allow`), with why. Any
/// other warning fails `check --strict`.
const EXPECTED_WARNINGS: &[(&str, &[&str], &str)] = &[
    ("a100-pytorch", &["eol-driver"], "the spec's installed driver is R535 (end of life)"),
    ("b200-serve", &["unsafe-version"], "vLLM's torch pin needs CUDA 13.0, whose images NVIDIA lists as unsupported"),
    ("h100-forward-compat", &["eol-driver", "unsafe-version"], "an R535 host on forward compatibility, on purpose"),
    ("h100-ib-train-serve", &["unsafe-version"], "vLLM's torch pin needs CUDA 13.0, whose images NVIDIA lists as unsupported"),
    ("slurm-apptainer-h100", &["eol-driver"], "the spec's installed driver is end of life"),
    ("t4-inference-old-driver", &["eol-driver"], "an old installed driver, on purpose"),
    ("vllm-rtx4090-driver550", &["eol-driver", "unsafe-version"], "an R550 host, on purpose"),
    ("vm-image-train-infer", &["eol-driver", "unsafe-version"], "the spec's installed driver is end of life"),
];

fn pipeline(dir: &Path, allow: &[&str]) -> Output {
    ok(&run_in(dir, &["lock"]), "lock");
    ok(&run_in(dir, &["gen", "all"]), "gen all");
    let mut args = vec!["check", "--strict"];
    for a in allow {
        args.extend(["--allow", a]);
    }
    run_in(dir, &args)
}

#[test]
fn every_example_spec_is_green_under_check_strict() {
    let mut failures = Vec::new();
    let mut specs: Vec<_> = std::fs::read_dir(root().join("fixtures/specs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    specs.sort();
    assert!(specs.len() >= 10);
    for spec in &specs {
        let name = spec.file_stem().unwrap().to_str().unwrap();
        let dir = tempdir(&format!("first-{name}"));
        std::fs::copy(spec, dir.join("gpustack.toml")).unwrap();
        let allow = EXPECTED_WARNINGS
            .iter()
            .find(|(n, _, _)| *n == name)
            .map_or(&[][..], |(_, a, _)| a);
        let o = pipeline(&dir, allow);
        if o.code != 0 {
            failures.push(format!("{name}: exit {}\n{}{}", o.code, o.stdout, o.stderr));
        }
        // Catalog gaps are counted, not hidden silently, and `--pedantic` shows them.
        if o.stdout.contains("not shown:") {
            assert!(o.stdout.contains("--pedantic") || o.stdout.contains("--allow"), "{}", o.stdout);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_fresh_init_is_green_and_pedantic_shows_catalog_gaps() {
    for (gpu, driver) in [("h100", None), ("RTX4090", Some("580.95.05")), ("H100 PCIe", None)] {
        let dir = tempdir("first-init");
        let mut args = vec!["init", "--gpu", gpu];
        if let Some(d) = driver {
            args.extend(["--driver", d]);
        }
        ok(&run_in(&dir, &args), "init");
        ok(&pipeline(&dir, &[]), &format!("fresh stack on {gpu}"));
        let p = run_in(&dir, &["check", "--strict", "--pedantic", "--format", "json"]);
        let v: serde_json::Value = serde_json::from_str(&p.stdout).unwrap();
        let codes: Vec<&str> = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["code"].as_str().unwrap())
            .collect();
        assert!(codes.iter().all(|c| *c == "unpinned"), "{codes:?}");
        assert_eq!(p.code, i32::from(!codes.is_empty()), "{}", p.stdout);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn check_compares_only_what_belongs_to_the_given_lock_and_hints_repeat_its_paths() {
    let dir = tempdir("first-scope");
    std::fs::copy(
        root().join("fixtures/specs/a100-pytorch.toml"),
        dir.join("gpustack.toml"),
    )
    .unwrap();
    ok(&run_in(&dir, &["lock"]), "lock");
    ok(&run_in(&dir, &["gen", "all"]), "gen");
    // Another stack's lock, checked from this directory: neither ./out nor ./gpustack.toml
    // belongs to it.
    std::fs::create_dir_all(dir.join("stacks")).unwrap();
    std::fs::copy(
        root().join("lockfiles/l40s-torch.lock"),
        dir.join("stacks/l40s.lock"),
    )
    .unwrap();
    let o = run_in(&dir, &["check", "--lock", "stacks/l40s.lock"]);
    ok(&o, "check --lock other");
    assert!(!o.stdout.contains("other-lock"), "{}", o.stdout);
    assert!(
        o.stdout.contains("drift (out/ was generated from another lock (sha256:"),
        "{}",
        o.stdout
    );
    // Asked explicitly, the same out/ is compared, and every hint names the user's paths.
    let o = run_in(&dir, &["check", "--lock", "stacks/l40s.lock", "--out", "out"]);
    assert_eq!(o.code, 1);
    assert!(o.stdout.contains("error[other-lock]"), "{}", o.stdout);
    assert!(
        o.stdout.contains("hint: run `gpustack gen docker --lock stacks/l40s.lock`"),
        "{}",
        o.stdout
    );
    for hint in o.stdout.lines().filter(|l| l.starts_with("  hint:")) {
        assert!(!hint.contains("gpustack gen docker`"), "{hint}");
        assert!(!hint.contains("`gpustack lock`"), "{hint}");
    }
    let o = run_in(
        &dir,
        &["check", "--lock", "stacks/l40s.lock", "--spec", "gpustack.toml"],
    );
    assert!(
        o.stdout.contains("`gpustack lock --out stacks/l40s.lock`"),
        "{}",
        o.stdout
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_old_node_driver_that_runs_the_stack_is_a_warning_with_a_matching_hint() {
    let dir = tempdir("first-hw");
    std::fs::copy(
        root().join("lockfiles/h100-ib-train-serve.lock"),
        dir.join("gpustack.lock"),
    )
    .unwrap();
    // Locked for 595.91.07 (resolved, not installed); an R580 node still runs CUDA 12.8.
    std::fs::write(
        dir.join("node.toml"),
        "[hardware]\ngpus = [\"h100\"]\ndriver = \"580.95.05\"\n",
    )
    .unwrap();
    let o = run_in(&dir, &["check", "--hardware", "node.toml"]);
    assert!(o.stdout.contains("warning[driver-older-than-locked]"), "{}", o.stdout);
    assert!(o.stdout.contains("runs on this driver, so this is a warning"), "{}", o.stdout);
    assert!(!o.stdout.contains("error[driver-too-old]"), "{}", o.stdout);
    assert_eq!(o.code, 0, "{}", o.stdout);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn names_are_forgiving_everywhere_they_are_read() {
    let dir = tempdir("first-names");
    for gpu in ["RTX4090", "rtx4090", "a100 80gb", "H100 PCIe", "h100_sxm"] {
        let spec = format!(
            "[stack]\nname = \"n\"\n[hardware]\ngpus = [\"{gpu}\"]\n[components]\ntorch = \"*\"\n"
        );
        std::fs::write(dir.join("gpustack.toml"), spec).unwrap();
        ok(&run_in(&dir, &["lock", "--out", "-"]), gpu);
    }
    // init: the GPU is normalised; a near miss gets a suggestion.
    let o = run_in(&dir, &["init", "--gpu", "h1000", "--path", "x.toml"]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("hint: did you mean `--gpu h100`?"), "{}", o.stderr);
    ok(&run_in(&dir, &["init", "--gpu", "RTX 4090", "--path", "y.toml"]), "init RTX 4090");
    assert!(std::fs::read_to_string(dir.join("y.toml")).unwrap().contains("gpus = [\"rtx-4090\"]"));
    // why
    std::fs::copy(root().join("lockfiles/a100-extras.lock"), dir.join("gpustack.lock")).unwrap();
    ok(&run_in(&dir, &["why", "TORCH"]), "why TORCH");
    ok(&run_in(&dir, &["why", "flash_attn"]), "why flash_attn");
    let o = run_in(&dir, &["why", "pytorch"]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("did you mean `gpustack why torch`?"), "{}", o.stderr);
    // catalog show
    ok(&run_in(&dir, &["catalog", "show", "GPU"]), "catalog show GPU");
    let o = run_in(&dir, &["catalog", "show", "flash-attn"]);
    assert!(o.stderr.contains("did you mean `gpustack catalog show extra`?"), "{}", o.stderr);
    let o = run_in(&dir, &["catalog", "show", "drivr"]);
    assert!(o.stderr.contains("did you mean `gpustack catalog show driver`?"), "{}", o.stderr);
    // gen targets
    let out = dir.join("o");
    ok(&run_in(&dir, &["gen", "Docker", "--out", out.to_str().unwrap()]), "gen Docker");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn pep440_habits_are_understood_or_refused_on_the_operator() {
    let dir = tempdir("first-pep440");
    let spec = |cuda: &str| {
        format!("[stack]\nname = \"p\"\n[hardware]\ngpus = [\"a100\"]\n[components]\ncuda = \"{cuda}\"\ntorch = \"*\"\n")
    };
    for (req, want) in [("==12.*", "cuda 12."), ("~=12.4", "cuda 12."), ("12.*", "cuda 12.")] {
        std::fs::write(dir.join("gpustack.toml"), spec(req)).unwrap();
        let o = run_in(&dir, &["lock"]);
        ok(&o, req);
        assert!(o.stderr.contains(want), "{req}: {}", o.stderr);
    }
    std::fs::write(dir.join("gpustack.toml"), spec(">=12, ^12.4")).unwrap();
    let o = run_in(&dir, &["lock"]);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains("`^` is not a PEP 440 operator; write `>=12.4, <13`"),
        "{}",
        o.stderr
    );
    // The caret is under `^`, not under the opening quote.
    let line = "cuda = \">=12, ^12.4\"";
    let col = line.find('^').unwrap() + 1;
    assert!(o.stderr.contains(&format!("gpustack.toml:6:{col}")), "{}", o.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unknown_driver_branch_is_a_warning_naming_the_known_ones() {
    let dir = tempdir("first-branch");
    ok(&run_in(&dir, &["init", "--gpu", "h100", "--driver", "999.1.1"]), "init");
    let o = run_in(&dir, &["lock"]);
    ok(&o, "lock");
    assert!(
        o.stderr.contains("warning: driver 999.1.1 is on branch R999, which the catalog does not know (known branches: R"),
        "{}",
        o.stderr
    );
    let _ = std::fs::remove_dir_all(&dir);
}
