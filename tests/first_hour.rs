//! A newcomer's first hour (issue 18): what a new user types, run as they would type it.
//! `init → lock → gen all → check --strict` is green; names are forgiving; PEP 440 habits
//! are understood; `check` stays within the lock it was given; the everyday flags work.

mod common;

use std::path::Path;

use common::{root, run_in, tempdir, Output};

/// `check --strict` as a newcomer runs it. These tests run offline (`GPUSTACK_OFFLINE`), so
/// their locks have no Python closure, which `--strict` reports (`open-closure`); a first
/// lock with PyPI reachable is closed (tests/closure.rs, tests/network.rs), so that one
/// finding is left out here and only here.
const STRICT: &[&str] = &["check", "--strict", "--allow", "open-closure"];

fn ok(o: &Output, what: &str) {
    assert_eq!(
        o.code, 0,
        "{what}: exit {}\n{}\n{}",
        o.code, o.stdout, o.stderr
    );
}

fn pipeline(dir: &Path, allow: &[&str]) -> Output {
    ok(&run_in(dir, &["lock"]), "lock");
    ok(&run_in(dir, &["gen", "all"]), "gen all");
    let mut args = STRICT.to_vec();
    for a in allow {
        args.extend(["--allow", a]);
    }
    run_in(dir, &args)
}

/// Plain `check --strict`, no flag: an example whose warnings are its point acknowledges
/// them in its own `[check].allow`, with a reason, and the check says what it accepted.
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
    let mut acknowledging = 0;
    for spec in &specs {
        let name = spec.file_stem().unwrap().to_str().unwrap();
        let dir = tempdir(&format!("first-{name}"));
        std::fs::copy(spec, dir.join("gpustack.toml")).unwrap();
        let o = pipeline(&dir, &[]);
        if o.code != 0 {
            failures.push(format!("{name}: exit {}\n{}{}", o.code, o.stdout, o.stderr));
        }
        // Catalog gaps are counted, not hidden silently, and `--pedantic` shows them.
        if o.stdout.contains("not shown:") {
            assert!(
                o.stdout.contains("--pedantic") || o.stdout.contains("--allow"),
                "{}",
                o.stdout
            );
        }
        // What the spec accepts is said, with where and why.
        let text = std::fs::read_to_string(spec).unwrap();
        if text.contains("[check]") {
            acknowledging += 1;
            assert!(
                o.stdout.contains("acknowledged: 1 ") && o.stdout.contains(" at gpustack.toml:"),
                "{name}:\n{}",
                o.stdout
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(acknowledging >= 1);
}

/// `[check].allow`: an acknowledgement is a reviewed line of the spec. A typo, an error code
/// or a missing reason is refused at its line with a hint (exit 2, for `lock` as for
/// `check`); an entry that no longer matches anything is a warning that fails `--strict`.
#[test]
fn acknowledged_warnings_are_checked_like_any_input() {
    let dir = tempdir("first-allow");
    let base = std::fs::read_to_string(root().join("fixtures/specs/t4-inference-old-driver.toml"))
        .unwrap();
    let cut = base
        .find("\n[check]")
        .expect("the example acknowledges its driver");
    let head = &base[..cut];
    let write = |allow: &str| {
        std::fs::write(
            dir.join("gpustack.toml"),
            format!("{head}\n[check]\nallow = [\n{allow}\n]\n"),
        )
        .unwrap();
    };
    let line = head.lines().count() + 4;
    // Without the entry the warning shows; with it, `--strict` is green and says why.
    std::fs::write(dir.join("gpustack.toml"), head).unwrap();
    ok(&run_in(&dir, &["lock"]), "lock");
    ok(&run_in(&dir, &["gen", "all"]), "gen all");
    let o = run_in(&dir, STRICT);
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(o.stdout.contains("warning[eol-driver]"), "{}", o.stdout);
    write(r#"    { code = "eol-driver", name = "driver", reason = "the fleet stays on R535" },"#);
    let o = run_in(&dir, STRICT);
    ok(&o, "check --strict with the acknowledgement");
    assert!(
        o.stdout.contains(&format!(
            "acknowledged: 1 eol-driver at gpustack.toml:{line}: the fleet stays on R535\n"
        )),
        "{}",
        o.stdout
    );
    // Editing the acknowledgements does not make the lock stale: they are not the request.
    assert!(!o.stdout.contains("stale-spec"), "{}", o.stdout);
    let j = run_in(&dir, &["check", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&j.stdout).unwrap();
    let acked: Vec<&serde_json::Value> = v["suppressed"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["why"] == "acknowledged")
        .collect();
    assert_eq!(acked.len(), 1, "{}", j.stdout);
    assert_eq!(acked[0]["at"], format!("gpustack.toml:{line}"));
    assert_eq!(acked[0]["reason"], "the fleet stays on R535");

    // A name that matches nothing: the entry is unused, with the names check did find.
    write(r#"    { code = "eol-driver", name = "drivr", reason = "the fleet stays on R535" },"#);
    let o = run_in(&dir, STRICT);
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(o.stdout.contains("warning[unused-allow]"), "{}", o.stdout);
    assert!(
        o.stdout.contains(&format!("--> gpustack.toml:{line}\n")),
        "{}",
        o.stdout
    );
    assert!(o.stdout.contains("did you mean `driver`?"), "{}", o.stdout);
    // An entry for a warning the stack no longer has: stale, and `--pedantic` is not needed.
    write(r#"    { code = "unsafe-version", reason = "kept from an older lock" },"#);
    let o = run_in(&dir, STRICT);
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(
        o.stdout
            .contains("hint: the problem is gone: remove the entry"),
        "{}",
        o.stdout
    );
    // A hardware warning acknowledged while no hardware was checked is not stale.
    write(
        r#"    { code = "eol-driver", reason = "r" },
    { code = "gpu-not-locked", name = "l4", reason = "the L4 nodes run it by PTX" },"#,
    );
    ok(&run_in(&dir, STRICT), "hardware allowance, no --hardware");

    // Refused at their line, exit 2, by `check` and by `lock` alike.
    for (entry, message, hint) in [
        (
            r#"    { code = "eol-drivr", reason = "r" },"#,
            "error: unknown check code `eol-drivr`",
            "hint: did you mean `eol-driver`?",
        ),
        (
            r#"    { code = "drift", reason = "r" },"#,
            "error: `drift` cannot be allowed in the spec: it is an error",
            "hint: only warnings can be acknowledged here",
        ),
        (
            r#"    { code = "eol-driver" },"#,
            "error: `[check].allow` entry for `eol-driver` has no `reason`",
            "hint: say why the warning is accepted",
        ),
        (
            r#"    { code = "eol-driver", reason = "" },"#,
            "error: empty `reason`",
            "hint: say why the warning is accepted",
        ),
        (
            r#"    { code = "eol-driver", reason = "r", until = "2027" },"#,
            "error: unknown key `until` in an entry of `[check].allow`",
            "hint: an entry of `[check].allow` takes: `code`, `name`, `reason`",
        ),
    ] {
        write(entry);
        for cmd in [&["check"][..], &["lock"][..]] {
            let o = run_in(&dir, cmd);
            assert_eq!(o.code, 2, "{entry}: {}{}", o.stdout, o.stderr);
            assert!(o.stderr.contains(message), "{entry}: {}", o.stderr);
            assert!(
                o.stderr.contains(&format!("--> gpustack.toml:{line}:")),
                "{entry}: {}",
                o.stderr
            );
            assert!(o.stderr.contains(hint), "{entry}: {}", o.stderr);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_fresh_init_is_green_and_pedantic_shows_catalog_gaps() {
    for (gpu, driver) in [
        ("h100", None),
        ("RTX4090", Some("580.95.05")),
        ("H100 PCIe", None),
    ] {
        let dir = tempdir("first-init");
        let mut args = vec!["init", "--gpu", gpu];
        if let Some(d) = driver {
            args.extend(["--driver", d]);
        }
        ok(&run_in(&dir, &args), "init");
        ok(&pipeline(&dir, &[]), &format!("fresh stack on {gpu}"));
        let p = run_in(
            &dir,
            &[
                "check",
                "--strict",
                "--allow",
                "open-closure",
                "--pedantic",
                "--format",
                "json",
            ],
        );
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
    // The default out/ is compared whatever lock it came from: another lock's tree is one
    // `stale-outputs` finding, and skipping it is explicit.
    let o = run_in(&dir, &["check", "--lock", "stacks/l40s.lock"]);
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(!o.stdout.contains("other-lock"), "{}", o.stdout);
    assert!(o.stdout.contains("error[stale-outputs]"), "{}", o.stdout);
    let o = run_in(&dir, &["check", "--lock", "stacks/l40s.lock", "--no-drift"]);
    ok(&o, "check --lock other --no-drift");
    assert!(o.stdout.contains("drift (--no-drift)"), "{}", o.stdout);
    // Asked explicitly, the same out/ is compared, and every hint names the user's paths.
    let o = run_in(
        &dir,
        &["check", "--lock", "stacks/l40s.lock", "--out", "out"],
    );
    assert_eq!(o.code, 1);
    assert!(o.stdout.contains("error[stale-outputs]"), "{}", o.stdout);
    assert!(
        o.stdout.contains(
            "hint: regenerate them from this lock: `gpustack gen all --lock stacks/l40s.lock`"
        ),
        "{}",
        o.stdout
    );
    for hint in o.stdout.lines().filter(|l| l.starts_with("  hint:")) {
        assert!(!hint.contains("gpustack gen docker`"), "{hint}");
        assert!(!hint.contains("`gpustack lock`"), "{hint}");
    }
    let o = run_in(
        &dir,
        &[
            "check",
            "--lock",
            "stacks/l40s.lock",
            "--spec",
            "gpustack.toml",
        ],
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
    assert!(
        o.stdout.contains("warning[driver-older-than-locked]"),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout
            .contains("runs on this driver, so this is a warning"),
        "{}",
        o.stdout
    );
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
    assert!(
        o.stderr.contains("hint: did you mean `--gpu h100`?"),
        "{}",
        o.stderr
    );
    ok(
        &run_in(&dir, &["init", "--gpu", "RTX 4090", "--path", "y.toml"]),
        "init RTX 4090",
    );
    assert!(std::fs::read_to_string(dir.join("y.toml"))
        .unwrap()
        .contains("gpus = [\"rtx-4090\"]"));
    // why
    std::fs::copy(
        root().join("lockfiles/a100-extras.lock"),
        dir.join("gpustack.lock"),
    )
    .unwrap();
    ok(&run_in(&dir, &["why", "TORCH"]), "why TORCH");
    ok(&run_in(&dir, &["why", "flash_attn"]), "why flash_attn");
    let o = run_in(&dir, &["why", "pytorch"]);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains("did you mean `gpustack why torch`?"),
        "{}",
        o.stderr
    );
    // catalog show
    ok(
        &run_in(&dir, &["catalog", "show", "GPU"]),
        "catalog show GPU",
    );
    let o = run_in(&dir, &["catalog", "show", "flash-attn"]);
    assert!(
        o.stderr
            .contains("did you mean `gpustack catalog show extra`?"),
        "{}",
        o.stderr
    );
    let o = run_in(&dir, &["catalog", "show", "drivr"]);
    assert!(
        o.stderr
            .contains("did you mean `gpustack catalog show driver`?"),
        "{}",
        o.stderr
    );
    // gen targets
    let out = dir.join("o");
    ok(
        &run_in(&dir, &["gen", "Docker", "--out", out.to_str().unwrap()]),
        "gen Docker",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn pep440_habits_are_understood_or_refused_on_the_operator() {
    let dir = tempdir("first-pep440");
    let spec = |cuda: &str| {
        format!("[stack]\nname = \"p\"\n[hardware]\ngpus = [\"a100\"]\n[components]\ncuda = \"{cuda}\"\ntorch = \"*\"\n")
    };
    for (req, want) in [
        ("==12.*", "cuda 12."),
        ("~=12.4", "cuda 12."),
        ("12.*", "cuda 12."),
    ] {
        std::fs::write(dir.join("gpustack.toml"), spec(req)).unwrap();
        let o = run_in(&dir, &["lock"]);
        ok(&o, req);
        assert!(o.stderr.contains(want), "{req}: {}", o.stderr);
    }
    std::fs::write(dir.join("gpustack.toml"), spec(">=12, ^12.4")).unwrap();
    let o = run_in(&dir, &["lock"]);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr
            .contains("`^` is not a PEP 440 operator; write `>=12.4, <13`"),
        "{}",
        o.stderr
    );
    // The caret is under `^`, not under the opening quote.
    let line = "cuda = \">=12, ^12.4\"";
    let col = line.find('^').unwrap() + 1;
    assert!(
        o.stderr.contains(&format!("gpustack.toml:6:{col}")),
        "{}",
        o.stderr
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unknown_driver_branch_is_a_warning_naming_the_known_ones() {
    let dir = tempdir("first-branch");
    ok(
        &run_in(&dir, &["init", "--gpu", "h100", "--driver", "999.1.1"]),
        "init",
    );
    let o = run_in(&dir, &["lock"]);
    ok(&o, "lock");
    assert!(
        o.stderr.contains("warning: driver 999.1.1 is on branch R999, which the catalog does not know (known branches: R"),
        "{}",
        o.stderr
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn completions_are_generated_for_every_shell() {
    let dir = tempdir("first-completions");
    for (shell, marker) in [
        ("bash", "_gpustack()"),
        ("zsh", "#compdef gpustack"),
        ("fish", "complete -c gpustack"),
        ("powershell", "Register-ArgumentCompleter"),
        ("elvish", "edit:completion:arg-completer[gpustack]"),
    ] {
        let o = run_in(&dir, &["completions", shell]);
        ok(&o, shell);
        assert!(
            o.stdout.contains(marker),
            "{shell}: {}",
            &o.stdout[..o.stdout.len().min(300)]
        );
        // Every subcommand is completed.
        for sub in ["lock", "gen", "check", "why", "completions"] {
            assert!(o.stdout.contains(sub), "{shell} lacks {sub}");
        }
    }
    // The bash script is valid bash.
    let o = run_in(&dir, &["completions", "bash"]);
    std::fs::write(dir.join("c.bash"), &o.stdout).unwrap();
    let st = std::process::Command::new("bash")
        .arg("-n")
        .arg(dir.join("c.bash"))
        .status()
        .unwrap();
    assert!(st.success());
    let o = run_in(&dir, &["completions", "tcsh"]);
    assert_eq!(o.code, 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn version_names_the_built_in_catalog() {
    let o = run_in(&std::env::temp_dir(), &["--version"]);
    ok(&o, "--version");
    let id = gpustack::Catalog::stock_identity();
    assert_eq!(
        o.stdout,
        format!(
            "gpustack {}\nbuilt-in catalog: {} files, sources read up to {}, {}\n",
            env!("CARGO_PKG_VERSION"),
            id.files,
            id.date.unwrap(),
            id.digest
        )
    );
}

#[test]
fn quiet_verbose_json_exit_code_and_plurals() {
    let dir = tempdir("first-flags");
    std::fs::copy(
        root().join("fixtures/specs/a100-pytorch.toml"),
        dir.join("gpustack.toml"),
    )
    .unwrap();
    // lock's summary as JSON on stdout.
    let o = run_in(&dir, &["lock", "--format", "json"]);
    ok(&o, "lock --format json");
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["lock"], "gpustack.lock");
    assert!(v["components"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["name"] == "torch"));
    // -q leaves out progress lines; plurals are right.
    let o = run_in(&dir, &["-q", "gen", "all"]);
    ok(&o, "-q gen all");
    assert_eq!(o.stderr, "");
    let o = run_in(&dir, &["gen", "all"]);
    assert!(
        o.stderr.contains("out/apptainer is up to date (1 file)\n"),
        "{}",
        o.stderr
    );
    assert!(
        o.stderr.contains("(12 files)") || o.stderr.contains(" files)"),
        "{}",
        o.stderr
    );
    assert!(!o.stderr.contains("1 files"), "{}", o.stderr);
    // why / catalog list / catalog show as JSON.
    for args in [
        &["why", "cuda", "--format", "json"][..],
        &["catalog", "list", "--format", "json"],
        &["catalog", "show", "driver", "--format", "json"],
    ] {
        let o = run_in(&dir, args);
        ok(&o, &args.join(" "));
        let v: serde_json::Value = serde_json::from_str(&o.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}\n{}", o.stdout));
        match args[0] {
            "why" => assert_eq!(v["component"], "cuda"),
            _ if args[1] == "list" => {
                assert!(v.as_array().unwrap().iter().any(|f| f["family"] == "gpu"))
            }
            _ => {
                let e = &v["entries"][0];
                assert!(
                    e["location"]
                        .as_str()
                        .unwrap()
                        .starts_with("catalog/driver.toml:"),
                    "{v}"
                );
                assert!(!e["source"].as_str().unwrap().is_empty());
            }
        }
    }
    // diff --exit-code: 0 for the same lock, 1 for different ones.
    let other = root().join("lockfiles/l40s-torch.lock");
    let other = other.to_str().unwrap();
    ok(
        &run_in(
            &dir,
            &["diff", "gpustack.lock", "gpustack.lock", "--exit-code"],
        ),
        "same",
    );
    assert_eq!(run_in(&dir, &["diff", "gpustack.lock", other]).code, 0);
    assert_eq!(
        run_in(&dir, &["diff", "gpustack.lock", other, "--exit-code"]).code,
        1
    );
    // Conflicts cite `catalog/FILE:LINE — URL`; -v gives the whole source.
    std::fs::write(
        dir.join("c.toml"),
        "[stack]\nname = \"c\"\n[hardware]\ngpus = [\"h100\"]\ndriver = \"470.256.02\"\n[components]\ntorch = \"*\"\n",
    )
    .unwrap();
    let short = run_in(&dir, &["lock", "--spec", "c.toml", "--out", "-"]);
    let long = run_in(&dir, &["-v", "lock", "--spec", "c.toml", "--out", "-"]);
    assert_eq!((short.code, long.code), (1, 1));
    let fact = |o: &Output| -> String {
        o.stderr
            .lines()
            .find(|l| l.contains("catalog/gpus.toml:"))
            .unwrap()
            .to_string()
    };
    assert!(
        fact(&short).len() < fact(&long).len(),
        "{}\n{}",
        fact(&short),
        fact(&long)
    );
    assert!(fact(&short).contains("— https://"), "{}", fact(&short));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn gpu_and_output_targets_have_distinct_names_and_the_old_one_still_works() {
    let sm90: gpustack::GpuTarget = "sm_90".parse().unwrap();
    assert_eq!(sm90.to_string(), "sm_90");
    assert_eq!(gpustack::OutputTarget::K8s.name(), "k8s");
    #[allow(deprecated)]
    let old: gpustack::Target = "9.0".parse().unwrap();
    assert_eq!(old, sm90);
}

#[test]
fn the_cli_feature_is_the_only_user_of_clap() {
    // The library compiles without clap (`cargo check --lib --no-default-features` in
    // tests/run.sh); here: no library source names it, and Cargo.toml keeps it optional.
    for e in walkdir::WalkDir::new(root().join("src")).sort_by_file_name() {
        let e = e.unwrap();
        let p = e.path();
        if p.extension().is_some_and(|x| x == "rs")
            && !p.ends_with("main.rs")
            && !p.starts_with(root().join("src/cli"))
            && !p.ends_with("show.rs")
            && !p.ends_with("build.rs")
        {
            let text = std::fs::read_to_string(p).unwrap();
            assert!(
                !text.contains("clap::") && !text.contains("use clap"),
                "{} uses clap",
                p.display()
            );
        }
    }
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains("clap = { version = \"4\", features = [\"derive\"], optional = true }")
    );
    assert!(manifest.contains("default = [\"cli\"]"));
}

/// `why` explains every component, not only torch: whenever the catalog has a newer
/// version than the one locked, the explanation names the nearest newer ones it passed
/// over and why (a rule with its id, or the preference that ranked the pick first).
#[test]
fn why_names_the_newer_versions_passed_over_for_every_component() {
    use gpustack::Component;
    let catalog = gpustack::Catalog::stock().unwrap();
    let newest = |c: Component| -> Option<gpustack::Version> {
        let v: Vec<gpustack::Version> = match c {
            Component::Driver => catalog.drivers.iter().map(|d| d.version.clone()).collect(),
            Component::Cuda => catalog.cuda.iter().map(|d| d.version.clone()).collect(),
            Component::Cudnn => catalog.cudnn.iter().map(|d| d.version.clone()).collect(),
            Component::Nccl => catalog.nccl.iter().map(|d| d.version.clone()).collect(),
            Component::Python => catalog.python.iter().map(|d| d.version.clone()).collect(),
            Component::Torch => catalog.torch.iter().map(|d| d.full.clone()).collect(),
            Component::Vllm => catalog.vllm.iter().map(|d| d.version.clone()).collect(),
            Component::Deepspeed => catalog
                .deepspeed
                .iter()
                .map(|d| d.version.clone())
                .collect(),
            _ => catalog
                .extras_of(c)
                .map(|(_, e)| e.version.clone())
                .collect(),
        };
        v.into_iter().max()
    };
    let mut checked = 0;
    let mut missing = Vec::new();
    for e in std::fs::read_dir(root().join("lockfiles")).unwrap() {
        let path = e.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let lock = gpustack::Lock::parse("x.lock", &text).unwrap();
        for c in &lock.components {
            if c.name == Component::Driver && lock.hardware.driver_installed {
                continue; // a host fact: nothing was passed over
            }
            let Some(n) = newest(c.name) else { continue };
            if n <= c.version {
                continue;
            }
            checked += 1;
            if !c.because.iter().any(|b| b.starts_with("not ")) {
                missing.push(format!(
                    "{}: {} {} (catalog has {n})",
                    path.display(),
                    c.name,
                    c.version
                ));
            }
        }
    }
    assert!(checked > 30, "{checked}");
    assert!(
        missing.is_empty(),
        "no `not …` line:\n{}",
        missing.join("\n")
    );
    // The issue's example: CUDA 13.2.1 is locked while 13.2.2 exists.
    let dir = tempdir("first-why");
    ok(&run_in(&dir, &["init", "--gpu", "h100"]), "init");
    ok(&run_in(&dir, &["lock"]), "lock");
    let o = run_in(&dir, &["why", "cuda"]);
    assert!(o.stdout.contains("cuda 13.2.1"), "{}", o.stdout);
    assert!(o.stdout.contains("- not 13.2.2"), "{}", o.stdout);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn lock_check_and_gen_check_hints_repeat_the_paths_given() {
    let dir = tempdir("first-hints");
    std::fs::create_dir_all(dir.join("stacks")).unwrap();
    std::fs::copy(
        root().join("fixtures/specs/a100-pytorch.toml"),
        dir.join("stacks/a.toml"),
    )
    .unwrap();
    ok(
        &run_in(
            &dir,
            &["lock", "--spec", "stacks/a.toml", "--out", "stacks/a.lock"],
        ),
        "lock",
    );
    ok(
        &run_in(
            &dir,
            &["gen", "all", "--lock", "stacks/a.lock", "--out", "build"],
        ),
        "gen",
    );
    let text = std::fs::read_to_string(dir.join("stacks/a.toml")).unwrap();
    std::fs::write(
        dir.join("stacks/a.toml"),
        text.replacen("name = \"a100-pytorch\"", "name = \"renamed\"", 1),
    )
    .unwrap();
    let o = run_in(
        &dir,
        &[
            "lock",
            "--check",
            "--spec",
            "stacks/a.toml",
            "--out",
            "stacks/a.lock",
        ],
    );
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("hint: run `gpustack lock --spec stacks/a.toml --out stacks/a.lock` and commit the result"), "{}", o.stderr);
    std::fs::write(dir.join("build/docker/Dockerfile"), "edited\n").unwrap();
    let o = run_in(
        &dir,
        &[
            "gen",
            "docker",
            "--check",
            "--lock",
            "stacks/a.lock",
            "--out",
            "build",
        ],
    );
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("hint: run `gpustack gen docker --lock stacks/a.lock --out build` and commit the result"), "{}", o.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `init --gpu A --gpu B` writes both into `gpus` (nvidia-smi's names accepted), every
/// trailing comment starts in one column, the deployment tables are there to uncomment,
/// and the spec locks.
#[test]
fn init_takes_several_gpus_and_lines_its_comments_up() {
    let dir = tempdir("first-init-gpus");
    let o = run_in(&dir, &["init", "--gpu", "h100", "--gpu", "NVIDIA L40S"]);
    ok(&o, "init");
    let text = std::fs::read_to_string(dir.join("gpustack.toml")).unwrap();
    assert!(text.contains("gpus = [\"h100\", \"l40s\"]"), "{text}");
    for l in text
        .lines()
        .filter(|l| !l.starts_with("# ") || l.contains(" # "))
    {
        if let Some(at) = l.find(" # ") {
            if !l[..at].trim().is_empty() || l.trim_start().starts_with('#') {
                assert_eq!(at, 31, "comment column of {l:?}");
            }
        }
    }
    for table in [
        "# [image]",
        "# [cluster]",
        "# [k8s]",
        "# [slurm]",
        "# [packer]",
    ] {
        assert!(text.contains(table), "{table}");
    }
    ok(&run_in(&dir, &["lock"]), "lock");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `why` names the concrete reason a newer release lost (issue 34): on driver 570, the
/// vLLM releases built with CUDA 13 would need forward compatibility.
#[test]
fn why_says_which_rule_kept_a_newer_release_out() {
    let dir = tempdir("first-why-vllm");
    ok(
        &run_in(&dir, &["init", "--gpu", "l40s", "--driver", "570.86.10"]),
        "init",
    );
    let spec = std::fs::read_to_string(dir.join("gpustack.toml")).unwrap();
    std::fs::write(
        dir.join("gpustack.toml"),
        spec.replace("# vllm = \"*\"", "vllm = \"*\""),
    )
    .unwrap();
    ok(&run_in(&dir, &["lock"]), "lock");
    let why = run_in(&dir, &["why", "vllm"]);
    ok(&why, "why vllm");
    assert!(
        why.stdout
            .contains("runs only through forward compatibility"),
        "{}",
        why.stdout
    );
    assert!(!why.stdout.contains("preference order"), "{}", why.stdout);
    let _ = std::fs::remove_dir_all(&dir);
}
