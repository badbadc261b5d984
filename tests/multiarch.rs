//! A mixed-architecture stack (issue 15): x86_64 H100 nodes and aarch64 GH200 nodes in one
//! lock, whose Python closure is locked per platform (`pylock.<layer>.<cpu>.toml`). Every
//! target installs, for each platform it builds, that platform's pylock:
//!
//! * Docker: one multi-platform Dockerfile; each Python stage picks its file by BuildKit's
//!   `TARGETARCH`. The stages' RUN lines are executed under bash with the build argument
//!   set and a stand-in `uv` that implements `uv pip install -r FILE` (the file must exist)
//!   and records the file it was given; the recorded file must be byte for byte the
//!   platform's pylock, whose sha256 the lock records for that platform.
//! * Packer: the scripts pick by the VM's `uname -m` (a stand-in `uname` here).
//! * Apptainer: bootstraps from the image the bake file builds for every platform.
//!
//! `fixtures/closed/h100-gh200-mixed/` is the lock, resolved by uv 0.11.7 against PyPI
//! (its README says how).

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

const STACK: &str = "h100-gh200-mixed";

/// The committed mixed lock, rendered offline (every target, by name) in a temporary project.
fn rendered(tag: &str) -> (PathBuf, gpustack::Lock) {
    let dir = tempdir(tag);
    copy_dir(&root().join("fixtures/closed").join(STACK), &dir);
    let out = run_in(
        &dir,
        &["gen", "docker", "apptainer", "packer", "k8s", "slurm"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lock = gpustack::Lock::parse(
        "gpustack.lock",
        &std::fs::read_to_string(dir.join("gpustack.lock")).unwrap(),
    )
    .unwrap();
    (dir, lock)
}

/// One of the lock's platforms: `uname -m`, BuildKit's `TARGETARCH`, and the lock's name.
struct Platform {
    machine: &'static str,
    oci_arch: &'static str,
    manylinux: String,
}

fn platforms(lock: &gpustack::Lock) -> Vec<Platform> {
    let mut out: Vec<Platform> = Vec::new();
    for f in &lock.python.as_ref().expect("a closed lock").files {
        if out.iter().any(|p| p.manylinux == f.platform) {
            continue;
        }
        let (machine, oci_arch) = if f.platform.starts_with("x86_64-") {
            ("x86_64", "amd64")
        } else if f.platform.starts_with("aarch64-") {
            ("aarch64", "arm64")
        } else {
            panic!("unexpected platform {}", f.platform)
        };
        out.push(Platform {
            machine,
            oci_arch,
            manylinux: f.platform.clone(),
        });
    }
    out
}

/// The lock's record of a layer's pylock on a platform: (file, digest).
fn locked_file(lock: &gpustack::Lock, layer: &str, platform: &str) -> (String, String) {
    let f = lock
        .python
        .as_ref()
        .unwrap()
        .files
        .iter()
        .find(|f| f.layer == layer && f.platform == platform)
        .unwrap_or_else(|| panic!("no {layer} pylock for {platform}"));
    (f.file.clone(), f.digest.clone())
}

/// A directory with stand-ins on PATH: `uv` (records `pip install -r FILE` after checking
/// FILE exists, and `--no-deps` wheel installs) and `uname` (prints `$FAKE_MACHINE` for
/// `-m`).
fn stand_ins(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let uv = r#"#!/bin/bash
# Stand-in for uv's `uv pip install`: `-r FILE` must name a file that exists (uv reads it
# as a requirements or PEP 751 file); every file and wheel argument is recorded.
set -euo pipefail
[ "${1:-} ${2:-}" = "pip install" ] || { echo "uv stand-in: unexpected: $*" >&2; exit 2; }
shift 2
while [ $# -gt 0 ]; do
  case "$1" in
    -r) [ -f "$2" ] || { echo "error: File not found: \`$2\`" >&2; exit 2; }
        echo "r $2" >> "$UV_LOG"; shift 2 ;;
    --no-deps) shift ;;
    -*) echo "uv stand-in: unexpected option $1" >&2; exit 2 ;;
    *) echo "wheel $1" >> "$UV_LOG"; shift ;;
  esac
done
"#;
    let uname = "#!/bin/sh\n[ \"$1\" = -m ] && { echo \"$FAKE_MACHINE\"; exit 0; }\nexec /bin/uname \"$@\"\n";
    for (name, text) in [("uv", uv), ("uname", uname)] {
        let p = bin.join(name);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin
}

/// Runs `script` under bash with the stand-ins first on PATH; returns (ok, stderr, the
/// `-r` files uv was given).
fn run_script(
    script: &str,
    bin: &Path,
    log: &Path,
    env: &[(&str, &str)],
) -> (bool, String, Vec<PathBuf>) {
    let _ = std::fs::remove_file(log);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", script])
        .env("PATH", path)
        .env("UV_LOG", log)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let files = std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("r "))
        .map(PathBuf::from)
        .collect();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        files,
    )
}

/// A Dockerfile stage's pylock steps as one bash script: its build-context COPYs into
/// `sandbox` (paths under /tmp/ moved there) and the RUN lines that handle a pylock, without
/// their `--mount` options.
fn docker_stage_script(
    stages: &BTreeMap<String, Stage>,
    stage: &str,
    context: &Path,
    sandbox: &Path,
) -> String {
    let s = &stages[stage];
    let tmp = format!("{}/tmp/", sandbox.display());
    let mut script = format!("mkdir -p {tmp}\n");
    for (kw, rest) in &s.instructions {
        let words: Vec<&str> = rest.split_whitespace().collect();
        match kw.as_str() {
            "COPY" if !words.iter().any(|w| w.starts_with("--")) && rest.contains("pylock") => {
                let (dest, srcs) = words.split_last().unwrap();
                let dest = dest.replacen("/tmp/", &tmp, 1);
                if dest.ends_with('/') {
                    script.push_str(&format!("mkdir -p {dest}\n"));
                }
                for src in srcs {
                    script.push_str(&format!("cp {} {dest}\n", context.join(src).display()));
                }
            }
            "RUN" if rest.contains("pylock") => {
                let body: Vec<&str> = words
                    .iter()
                    .copied()
                    .skip_while(|w| w.starts_with("--mount="))
                    .collect();
                script.push_str(&body.join(" ").replace("/tmp/", &tmp));
                script.push('\n');
            }
            _ => {}
        }
    }
    script
}

/// The pylock steps of a Packer script: from each "a pylock per platform" comment through
/// the `case … esac` to the `uv pip install -r` after it, /opt/gpustack/ moved to `vm`.
fn packer_pylock_steps(script: &str, vm: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = script;
    while let Some(at) = rest.find("# The lock has a pylock per platform") {
        let from = &rest[at..];
        let esac = from.find("\nesac\n").expect("case without esac") + "\nesac\n".len();
        let install_end = from[esac..].find('\n').unwrap() + esac + 1;
        let step = &from[..install_end];
        assert!(
            step[esac..].starts_with("/usr/local/bin/uv pip install -r /opt/gpustack/pylock."),
            "{step}"
        );
        out.push(
            step.replace("/opt/gpustack/", &format!("{}/", vm.display()))
                .replace("/usr/local/bin/uv", "uv"),
        );
        rest = &from[install_end..];
    }
    out
}

/// The file uv was given is the platform's pylock: the lock's bytes for that layer and
/// platform (its recorded sha256), and no wheel in it is for another CPU.
fn assert_platform_pylock(
    got: &Path,
    dir: &Path,
    lock: &gpustack::Lock,
    layer: &str,
    p: &Platform,
    what: &str,
) {
    let (file, digest) = locked_file(lock, layer, &p.manylinux);
    let text = std::fs::read_to_string(got).unwrap();
    // (compared without printing: the files are long)
    assert!(
        text == std::fs::read_to_string(dir.join(&file)).unwrap(),
        "{what}: {layer} on {}: uv was given {}, which is not {file}",
        p.machine,
        got.display()
    );
    assert_eq!(gpustack::resolve::python::digest(&text), digest, "{what}");
    let other = if p.machine == "x86_64" {
        "aarch64"
    } else {
        "x86_64"
    };
    for line in text.lines().filter(|l| l.contains(".whl")) {
        assert!(
            !line.contains(&format!("_{other}.whl")),
            "{what}: {layer} for {} holds a wheel for {other}: {line}",
            p.machine
        );
    }
}

/// Python stages of the Dockerfile that install a pylock, with their layer.
const DOCKER_STAGES: [(&str, &str); 3] = [
    ("build", "build"),
    ("framework", "framework"),
    ("training", "training"),
];

#[test]
fn every_target_installs_each_platforms_own_pylock() {
    let (dir, lock) = rendered("multiarch-targets");
    let out = dir.join("out");
    let ps = platforms(&lock);
    assert_eq!(
        ps.iter().map(|p| p.machine).collect::<Vec<_>>(),
        ["aarch64", "x86_64"]
    );
    let bin = stand_ins(&dir);
    let log = dir.join("uv.log");

    // Docker: the bake file builds every image for every platform of the lock ...
    let bake = std::fs::read_to_string(out.join("docker/docker-bake.hcl")).unwrap();
    let want = format!(
        "platforms  = [{}]",
        ps.iter()
            .map(|p| format!("\"linux/{}\"", p.oci_arch))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let targets = bake.matches("\ntarget \"").count();
    assert!(targets >= 3, "{bake}");
    assert_eq!(bake.matches(&want).count(), targets, "{bake}");
    // ... and each Python stage, built for a platform, installs that platform's pylock.
    let dockerfile = std::fs::read_to_string(out.join("docker/Dockerfile")).unwrap();
    // The lock records one CPU's CPython build (GH200's); the stages that run on both say
    // which CPU that URL is for, and what the other CPU installs.
    let cpython = lock.package("cpython").unwrap();
    assert_eq!(cpython.get("variant"), Some("aarch64-gnu"));
    for text in [
        &dockerfile,
        &std::fs::read_to_string(out.join("packer/scripts/framework.sh")).unwrap(),
    ] {
        assert!(
            text.contains(&format!(
                "# CPython {} on aarch64: the locked uv downloads",
                cpython.version
            )),
            "{text}"
        );
        assert!(
            text.contains(
                "# On x86_64: the same version's build from the locked uv's own download table"
            ),
            "{text}"
        );
    }
    let (_, stages) = parse_dockerfile(&dockerfile);
    for (stage, layer) in DOCKER_STAGES {
        for p in &ps {
            let sandbox = dir.join(format!("docker-{stage}-{}", p.oci_arch));
            let script = docker_stage_script(&stages, stage, &out.join("docker"), &sandbox);
            let (ok, err, files) = run_script(&script, &bin, &log, &[("TARGETARCH", p.oci_arch)]);
            assert!(ok, "{stage} for {}: {err}\n{script}", p.oci_arch);
            assert_eq!(files.len(), 1, "{stage}: {files:?}\n{script}");
            assert_platform_pylock(&files[0], &dir, &lock, layer, p, "Dockerfile");
        }
    }

    // Packer: each script writes and installs the pylock of the VM's own CPU.
    for (script, layers) in [
        ("framework.sh", vec!["framework"]),
        ("training.sh", vec!["build", "training"]),
    ] {
        let text = std::fs::read_to_string(out.join("packer/scripts").join(script)).unwrap();
        for p in &ps {
            let vm = dir.join(format!("vm-{}", p.machine));
            std::fs::create_dir_all(&vm).unwrap();
            let steps = packer_pylock_steps(&text, &vm);
            assert_eq!(steps.len(), layers.len(), "{script}");
            for (step, layer) in steps.iter().zip(&layers) {
                let (ok, err, files) = run_script(step, &bin, &log, &[("FAKE_MACHINE", p.machine)]);
                assert!(ok, "{script} on {}: {err}", p.machine);
                assert_eq!(files.len(), 1, "{script}: {files:?}");
                assert_platform_pylock(&files[0], &dir, &lock, layer, p, script);
            }
        }
    }

    // Apptainer: bootstraps from the top image, which the bake file builds for every
    // platform (checked above), and says it pulls the host's.
    let def = std::fs::read_to_string(out.join(format!("apptainer/{STACK}.def"))).unwrap();
    let from = def.lines().find_map(|l| l.strip_prefix("From: ")).unwrap();
    assert!(
        bake.contains(&format!("tags       = [\"{from}\"]")),
        "{from}"
    );
    assert!(def.contains("linux/arm64 and linux/amd64"), "{def}");
}

#[test]
fn an_architecture_without_a_pylock_fails_loudly() {
    let (dir, _) = rendered("multiarch-unknown");
    let out = dir.join("out");
    let bin = stand_ins(&dir);
    let log = dir.join("uv.log");
    let dockerfile = std::fs::read_to_string(out.join("docker/Dockerfile")).unwrap();
    let (_, stages) = parse_dockerfile(&dockerfile);
    let sandbox = dir.join("docker-riscv");
    let script = docker_stage_script(&stages, "framework", &out.join("docker"), &sandbox);
    let (ok, err, files) = run_script(&script, &bin, &log, &[("TARGETARCH", "riscv64")]);
    assert!(!ok);
    assert!(files.is_empty(), "{files:?}");
    assert_eq!(
        err,
        "error: gpustack.lock has no pylock of the framework layer for TARGETARCH=riscv64 (it has arm64, amd64)\nhint: build with --platform linux/arm64,linux/amd64\n"
    );
    let text = std::fs::read_to_string(out.join("packer/scripts/framework.sh")).unwrap();
    let vm = dir.join("vm-riscv");
    std::fs::create_dir_all(&vm).unwrap();
    let step = &packer_pylock_steps(&text, &vm)[0];
    let (ok, err, files) = run_script(step, &bin, &log, &[("FAKE_MACHINE", "riscv64")]);
    assert!(!ok && files.is_empty());
    assert_eq!(
        err,
        "error: gpustack.lock has no pylock of the framework layer for the CPU of this VM, riscv64 (it has aarch64, x86_64)\n"
    );
    assert!(!vm.join("pylock.framework.toml").exists());
}

#[test]
fn the_multi_platform_outputs_pass_their_linters() {
    let (dir, _) = rendered("multiarch-lint");
    let out = dir.join("out");
    assert_copies_are_in_the_context(&out.join("docker"));
    for f in std::fs::read_dir(dir.clone()).unwrap() {
        let name = f.unwrap().file_name().to_string_lossy().into_owned();
        if name.starts_with("pylock.") {
            assert_eq!(
                std::fs::read(out.join("docker").join(&name)).unwrap(),
                std::fs::read(dir.join(&name)).unwrap(),
                "{name}"
            );
        }
    }
    // No build step resolves: nothing names an index or a requirement file, on any platform.
    let mut files = vec![out.join("docker/Dockerfile")];
    files.extend(sorted_files(&out.join("packer/scripts"), "sh"));
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for word in [
            "--index",
            "--extra-index-url",
            "--find-links",
            "requirements-",
        ] {
            assert!(!text.contains(word), "{}: `{word}`", f.display());
        }
    }
    if let Some(h) = validator("hadolint") {
        let (code, log) = run_tool(&h, &["-t", "info", "Dockerfile"], &out.join("docker"));
        assert_eq!(code, 0, "{log}");
    }
    if let Some(sc) = validator("shellcheck") {
        for s in sorted_files(&out.join("packer/scripts"), "sh") {
            let (code, log) = run_tool(&sc, &[s.to_str().unwrap()], &out);
            assert_eq!(code, 0, "{}: {log}", s.display());
        }
    }
}

/// The CPUs one generated project builds for, as each target states them.
#[derive(Debug, Default)]
struct Cpus {
    /// The lock's `vm-image-<cpu>` packages (else its GPUs: Grace is aarch64).
    lock: Vec<String>,
    /// The Python closure's platforms (a closed lock).
    pylock: Vec<String>,
    /// The bake file's `platforms` (a closed lock), as `uname -m`.
    bake: Vec<String>,
    /// Packer's qemu sources, by the image each boots and the emulator it runs.
    packer: Vec<String>,
    /// The `kubernetes.io/arch` values the Kubernetes pods select, as `uname -m`.
    k8s: Vec<String>,
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

/// The CPUs of a project rendered under `out` (`docker/`, `packer/`) from `lock`.
fn cpus_of(lock: &gpustack::Lock, out: &Path) -> Cpus {
    let mut c = Cpus {
        lock: lock
            .packages
            .iter()
            .filter_map(|p| p.name.strip_prefix("vm-image-").map(str::to_string))
            .collect(),
        ..Cpus::default()
    };
    if c.lock.is_empty() {
        c.lock = lock
            .hardware
            .gpus
            .iter()
            .map(|g| {
                if g.id.starts_with("gh") {
                    "aarch64"
                } else {
                    "x86_64"
                }
                .to_string()
            })
            .collect();
    }
    c.lock = sorted(c.lock);
    if let Some(p) = &lock.python {
        c.pylock = sorted(
            p.files
                .iter()
                .map(|f| f.platform.split('-').next().unwrap().to_string())
                .collect(),
        );
    }
    let bake = std::fs::read_to_string(out.join("docker/docker-bake.hcl")).unwrap_or_default();
    if let Some(line) = bake
        .lines()
        .find(|l| l.trim_start().starts_with("platforms"))
    {
        c.bake = sorted(
            line.split('"')
                .skip(1)
                .step_by(2)
                .map(|p| match p {
                    "linux/amd64" => "x86_64".to_string(),
                    "linux/arm64" => "aarch64".to_string(),
                    other => panic!("bake platform {other}"),
                })
                .collect(),
        );
    }
    let build = std::fs::read_to_string(out.join("packer/build.pkr.hcl")).unwrap();
    let vars = std::fs::read_to_string(out.join("packer/variables.pkr.hcl")).unwrap();
    for block in build.split("source \"qemu\" ").skip(1) {
        let block = block.split("\n}\n").next().unwrap();
        // The image variable's default: Canonical names arm64/amd64, Rocky aarch64/x86_64.
        let var = block
            .split("iso_url          = var.")
            .nth(1)
            .unwrap()
            .lines()
            .next()
            .unwrap();
        // The emulator: an aarch64 VM is QEMU's `virt` machine booting UEFI.
        let arm = block.contains("machine_type      = \"virt\"") && block.contains("efi_boot");
        let by_emulator = if arm { "aarch64" } else { "x86_64" };
        // The image, when the lock pins one (a lock written before gpustack recorded VM
        // images leaves it a required variable).
        let default = vars
            .split(&format!("variable \"{var}\" {{"))
            .nth(1)
            .and_then(|b| b.split("\n}").next())
            .and_then(|b| b.split("default").nth(1))
            .and_then(|d| d.split('"').nth(1));
        if let Some(d) = default {
            let by_image = if d.contains("arm64") || d.contains("aarch64") {
                "aarch64"
            } else {
                assert!(d.contains("amd64") || d.contains("x86_64"), "{d}");
                "x86_64"
            };
            assert_eq!(
                by_image, by_emulator,
                "{var}: {d}: the emulator and the image disagree"
            );
        }
        let by_image = by_emulator;
        c.packer.push(by_image.to_string());
    }
    c.packer = sorted(c.packer);
    // Kubernetes: every `kubernetes.io/arch` a pod of any generated manifest selects.
    if let Ok(entries) = std::fs::read_dir(out.join("k8s")) {
        for e in entries {
            let text = std::fs::read_to_string(e.unwrap().path()).unwrap_or_default();
            for l in text.lines() {
                if let Some(v) = l.trim().strip_prefix("kubernetes.io/arch: ") {
                    c.k8s.push(match v.trim_matches('"') {
                        "amd64" => "x86_64".to_string(),
                        "arm64" => "aarch64".to_string(),
                        other => panic!("kubernetes.io/arch {other}"),
                    });
                }
            }
        }
    }
    c.k8s.dedup();
    c.k8s = sorted(c.k8s);
    c.k8s.dedup();
    c
}

/// Decided once, the same everywhere: the VM images Packer boots and the nodes the
/// Kubernetes pods select are for exactly the CPUs the lock records, and where the lock has a Python closure, its pylock platforms and the
/// bake file's platforms are those CPUs too, for every example lock and the closed mixed
/// lock.
#[test]
fn every_target_builds_for_the_locks_cpus() {
    let mut seen_arm = false;
    let mut seen_mixed = false;
    let mut check = |name: &str, lock: &gpustack::Lock, out: &Path| {
        let c = cpus_of(lock, out);
        assert_eq!(c.packer, c.lock, "{name}: Packer's VM images");
        // The pods of a one-CPU stack run on nodes of that CPU; a mixed stack's images are
        // multi-platform and select none.
        if c.lock.len() == 1 {
            assert_eq!(
                c.k8s, c.lock,
                "{name}: the Kubernetes pods' kubernetes.io/arch"
            );
        } else {
            assert!(
                c.k8s.is_empty(),
                "{name}: a mixed stack pins no arch: {:?}",
                c.k8s
            );
        }
        if !c.pylock.is_empty() {
            assert_eq!(c.pylock, c.lock, "{name}: the pylock platforms");
            assert_eq!(c.bake, c.lock, "{name}: the bake platforms");
        }
        seen_arm |= c.lock.iter().any(|x| x == "aarch64");
        seen_mixed |= c.lock.len() > 1;
    };
    for name in example_names() {
        let out = generate_every(&name);
        check(&name, &lock_of(&name), &out);
    }
    let (dir, lock) = rendered("cpus-closed");
    check(STACK, &lock, &dir.join("out"));
    assert!(
        seen_arm && seen_mixed,
        "the examples cover an aarch64 and a mixed stack"
    );
}
