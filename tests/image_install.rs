//! The container images' install steps, executed. For every example lock and every closed
//! lock, the generated Dockerfile is replayed, stage by stage, on the stand-in machine of
//! `tests/provision.rs` (`tests/provision/machine.sh`, the stand-in tools of
//! `tests/provision/fake`): every `RUN` line runs, as BuildKit would run it, against the
//! package managers of the stage's base OS. A stage that installs a package from a
//! repository it has not enabled (EPEL's `ccache` or CRB's `ninja-build` on Rocky Linux)
//! fails here as `docker build` fails, exactly as Packer's scripts fail in
//! `tests/provision.rs`. The Apptainer definition adds no install steps of its own (it
//! bootstraps from the image the Dockerfile builds), and the test holds it to that.
//!
//! The replay: `FROM <image>` starts a fresh machine state of the image's OS (an
//! `nvidia/cuda` image has NVIDIA's CUDA repository configured, as its Dockerfiles set it
//! up: the Ubuntu images install `cuda-keyring`, the Rocky images copy `cuda.repo`; see
//! gitlab.com/nvidia/container-images/cuda `dist/*/base/Dockerfile`); `FROM <stage>`
//! continues from that stage's state; `ARG`/`ENV`/`WORKDIR` set the environment of the
//! lines below and of child stages; `COPY`/`ADD` place their files (one file system is
//! shared by all stages, so `COPY --from=<stage>` finds what that stage built; an image's
//! `/uv` is the stand-in); `RUN` drops its `--mount` flags and runs under
//! `bash -o pipefail -c`, the stages' `SHELL`. Paths outside the machine's copy-on-write
//! directories (`/wheels`, `/workspace`) are moved under `/opt/harness`.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::*;

/// The tools the stand-in implements for an image build.
const TOOLS: &[&str] = &[
    "apt-get",
    "dpkg",
    "dnf",
    "rpm",
    "uname",
    "curl",
    "gpg",
    "sha256sum",
    "tar",
    "make",
    "cmake",
    "ldconfig",
    "python",
    "git",
    "nvcc",
    "gcc",
    "uv",
    "useradd",
    "chown",
];

fn isolation() -> bool {
    namespaces("image install harness")
}

/// The OS of an `nvidia/cuda` image reference (`…-devel-rockylinux9@sha256:…`).
fn os_of_image(image: &str) -> Option<String> {
    let tag = image.split('@').next()?.rsplit(':').next()?;
    ["ubuntu", "rockylinux"]
        .iter()
        .find_map(|p| tag.find(p).map(|i| tag[i..].to_string()))
}

/// Paths the stand-in machine does not overlay, moved under `/opt/harness`.
fn relocate(s: &str) -> String {
    s.replace("/wheels", "/opt/harness/wheels")
        .replace("/workspace", "/opt/harness/workspace")
}

fn q(s: &str) -> String {
    gpustack::render::sh_quote(s)
}

/// The replay script of a Dockerfile (see the module doc) and its stages in order.
fn replay(dockerfile: &str) -> (String, Vec<String>) {
    let (order, stages) = parse_dockerfile(dockerfile);
    let mut out = String::from(
        r#"set -euo pipefail
S=$FAKE_STATE
snap() { rm -rf "/mnt/snap/$1"; mkdir -p /mnt/snap; cp -r "$S" "/mnt/snap/$1"; }
restore() { rm -rf "$S"; cp -r "/mnt/snap/$1" "$S"; export FAKE_OS=$(cat "$S/os"); }
fresh() {
  rm -rf "$S"; mkdir -p "$S"; export FAKE_OS=$1; echo "$1" > "$S/os"
  # The image's own package lists: empty.
  mkdir -p /var/lib/apt/lists && mount -t tmpfs tmpfs /var/lib/apt/lists
  case "$1" in
    rocky*) echo cuda >> "$S/repos" ;;
    *) echo cuda-keyring >> "$S/installed-names"; echo 'cuda-keyring 1.1-1' >> "$S/installed" ;;
  esac
}
mkdir -p /opt/harness
# Home directories (`useradd -m`) live on the machine, not the host.
mount -t tmpfs tmpfs /home
"#,
    );
    // Environment instructions of each stage, replayed for its children.
    let mut env_of: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut ran = Vec::new();
    for name in &order {
        let st = &stages[name];
        let from = st.from.as_str();
        if from == "scratch" {
            continue;
        }
        let mut body = String::new();
        let mut env: Vec<String> = Vec::new();
        if stages.contains_key(from) {
            out.push_str(&format!("restore {}\n", q(from)));
            env.extend(env_of.get(from).cloned().unwrap_or_default());
        } else {
            let os = os_of_image(from).unwrap_or_else(|| panic!("no OS in image {from}"));
            out.push_str(&format!("fresh {os}\n"));
        }
        for (kw, rest) in &st.instructions {
            let rest = relocate(rest);
            let line = match kw.as_str() {
                "ARG" => match rest.split_once('=') {
                    Some((k, v)) => format!("export {k}=\"${{{k}:-{v}}}\""),
                    None => format!(": \"${{{rest}:=}}\"; export {rest}"),
                },
                "ENV" => format!("export {rest}"),
                "WORKDIR" => format!("mkdir -p {0} && cd {0}", q(&rest)),
                "RUN" => {
                    let mut cmd = rest.trim();
                    while let Some(r) = cmd.strip_prefix("--mount=") {
                        cmd = r.split_once(' ').map_or("", |x| x.1).trim_start();
                    }
                    body.push_str(&format!(
                        "echo {} >&2\nbash -o pipefail -c {} || exit 1\n",
                        q(&format!(
                            "--- {name}: RUN {}",
                            cmd.lines().next().unwrap_or("")
                        )),
                        q(cmd)
                    ));
                    continue;
                }
                "COPY" | "ADD" => {
                    let mut words: Vec<&str> = rest.split_whitespace().collect();
                    let mut from_stage = None;
                    words.retain(|w| {
                        if let Some(f) = w.strip_prefix("--from=") {
                            from_stage = Some(f.to_string());
                        }
                        !w.starts_with("--")
                    });
                    let dst = words.pop().expect("COPY destination");
                    let mut lines = Vec::new();
                    for src in words {
                        let target = if dst.ends_with('/') {
                            format!("{dst}{}", src.rsplit('/').next().unwrap())
                        } else {
                            dst.to_string()
                        };
                        let target = q(&target);
                        let mk = format!("mkdir -p \"$(dirname {target})\"");
                        lines.push(match from_stage.as_deref() {
                            Some(f) if stages.contains_key(f) => {
                                if src == dst {
                                    format!("test -e {}", q(src))
                                } else {
                                    format!("{mk} && cp -a {} {target}", q(src))
                                }
                            }
                            // A named build context (the project): its files are the user's.
                            Some("project") => format!("mkdir -p {target}"),
                            // An image: uv's is the only one copied from.
                            Some(_) => format!("{mk} && cp /mnt/bin/uv {target}"),
                            None if src.starts_with("\"http") || src.starts_with("http") => {
                                format!("{mk} && echo fake > {target}")
                            }
                            None => format!("{mk} && cp -a /mnt/docker/{} {target}", q(src)),
                        });
                    }
                    lines.join("\n")
                }
                _ => continue,
            };
            if matches!(kw.as_str(), "ARG" | "ENV" | "WORKDIR") {
                env.push(line.clone());
            }
            // `set -e` does not hold inside `( … ) || …`: every line checks itself.
            body.push_str(&format!("{{ {line}\n}} || exit 1\n"));
        }
        let inherited = env_of.get(from).map(|e| e.join("\n")).unwrap_or_default();
        out.push_str(&format!(
            "(\nset +u\ncd /\nexport MAX_JOBS=2 MEM_PER_JOB_GIB=4\n{inherited}\n{body}) || {{ echo {} >&2; exit 1; }}\nsnap {}\n",
            q(&format!("stage {name} failed")),
            q(name)
        ));
        env_of.insert(name.clone(), env);
        ran.push(name.clone());
    }
    (out, ran)
}

/// Runs the replay of `docker/` (a generated directory) for `TARGETARCH`; returns whether it
/// succeeded, its output, and the machine directory (`snap/<stage>/` holds each stage's
/// package-manager state).
fn run_image(docker: &Path, tag: &str, targetarch: &str) -> (bool, String, std::path::PathBuf) {
    let m = tempdir(&format!("image-{tag}"));
    copy_dir(docker, &m.join("docker"));
    std::fs::create_dir_all(m.join("bin")).unwrap();
    std::fs::create_dir_all(m.join("state")).unwrap();
    std::fs::create_dir_all(m.join("packer/scripts")).unwrap();
    // Copies, not links: the machine hides /tmp, where the checkout may live.
    let fake = root().join("tests/provision/fake");
    for t in TOOLS {
        std::fs::copy(&fake, m.join("bin").join(t)).unwrap();
    }
    let text = std::fs::read_to_string(docker.join("Dockerfile")).unwrap();
    let (script, _) = replay(&text);
    std::fs::write(
        m.join("packer/scripts/dockerfile.sh"),
        format!("export TARGETARCH={targetarch}\n{script}"),
    )
    .unwrap();
    let machine = m.join("machine.sh");
    std::fs::copy(root().join("tests/provision/machine.sh"), &machine).unwrap();
    let out = Command::new("unshare")
        .arg("-rm")
        .arg("bash")
        .arg(&machine)
        .arg(&m)
        .arg("ubuntu22.04")
        .arg("dockerfile.sh")
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        m,
    )
}

/// Every lock whose images the test builds: the examples' and the closed fixtures' (which
/// install pylocks), as (tag, lock path).
fn locks() -> Vec<(String, std::path::PathBuf)> {
    let mut v: Vec<_> = example_names()
        .into_iter()
        .map(|n| {
            let p = root().join("lockfiles").join(format!("{n}.lock"));
            (n, p)
        })
        .collect();
    let mut closed: Vec<_> = std::fs::read_dir(root().join("fixtures/closed"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("gpustack.lock").exists())
        .collect();
    closed.sort();
    for d in closed {
        let name = d.file_name().unwrap().to_string_lossy().into_owned();
        v.push((format!("closed-{name}"), d.join("gpustack.lock")));
    }
    v
}

fn gen_docker(tag: &str, lock: &Path) -> std::path::PathBuf {
    let dir = tempdir(&format!("gen-image-{tag}"));
    let out = run_in(
        &dir,
        &[
            "gen",
            "docker",
            "--lock",
            lock.to_str().unwrap(),
            "--out",
            "out",
        ],
    );
    assert_eq!(out.code, 0, "{tag}: gen docker failed: {}", out.stderr);
    dir.join("out/docker")
}

/// The OCI architectures a generated bake file builds.
fn targetarchs(docker: &Path) -> Vec<String> {
    let bake = std::fs::read_to_string(docker.join("docker-bake.hcl")).unwrap_or_default();
    let mut v: Vec<String> = ["amd64", "arm64"]
        .iter()
        .filter(|a| bake.contains(&format!("linux/{a}")))
        .map(|a| (*a).to_string())
        .collect();
    if v.is_empty() {
        v.push("amd64".into());
    }
    v
}

#[test]
fn every_image_stage_installs_on_its_base_os() {
    if !isolation() {
        return;
    }
    let mut failures = Vec::new();
    let mut rocky = 0;
    for (tag, lock) in locks() {
        let docker = gen_docker(&tag, &lock);
        for arch in targetarchs(&docker) {
            let (ok, output, m) = run_image(&docker, &format!("{tag}-{arch}"), &arch);
            if !ok {
                let tail: Vec<&str> = output.lines().rev().take(25).collect();
                failures.push(format!(
                    "{tag} (TARGETARCH={arch}):\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                ));
                continue;
            }
            let text = std::fs::read_to_string(docker.join("Dockerfile")).unwrap();
            if text.contains("rockylinux") {
                rocky += 1;
                // On Rocky, the build tools came from the repositories the steps enabled.
                let snaps = std::fs::read_dir(m.join("snap")).unwrap();
                for s in snaps {
                    let s = s.unwrap().path();
                    let req = std::fs::read_to_string(s.join("requests")).unwrap_or_default();
                    let repos = std::fs::read_to_string(s.join("repos")).unwrap_or_default();
                    if req.lines().any(|l| l.starts_with("dnf ninja-build ")) {
                        assert!(repos.lines().any(|r| r == "crb" || r == "powertools"));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(
        rocky > 0,
        "no Rocky Linux image was built: the EL path is untested"
    );
}

/// A Rocky image stage that installs EPEL's ccache without enabling EPEL fails the
/// harness, as `docker build` fails ("No match for argument").
#[test]
fn a_step_without_its_repository_fails_the_harness() {
    if !isolation() {
        return;
    }
    let lock = root().join("lockfiles/slurm-apptainer-h100.lock");
    let docker = gen_docker("broken-rocky", &lock);
    let text = std::fs::read_to_string(docker.join("Dockerfile")).unwrap();
    assert!(
        text.contains("rockylinux9"),
        "the example is no longer a Rocky stack"
    );
    // The old Dockerfile: build tools straight from `dnf install`.
    let broken = text
        .replace(" && dnf config-manager --set-enabled crb \\\n", "")
        .replace(" && dnf install -y epel-release \\\n", "");
    assert_ne!(broken, text);
    std::fs::write(docker.join("Dockerfile"), broken).unwrap();
    let (ok, output, _) = run_image(&docker, "broken-rocky", "amd64");
    assert!(
        !ok,
        "a Rocky stage without CRB/EPEL passed the harness:\n{output}"
    );
    assert!(
        output.contains("is not enabled"),
        "unexpected failure:\n{output}"
    );
}

/// The Apptainer definition installs nothing itself: it bootstraps from the Docker image
/// (whose steps the test above runs), so a `%post` section would be steps no harness runs.
#[test]
fn apptainer_adds_no_install_steps() {
    for name in example_names() {
        let dir = generate(&name, "apptainer");
        for f in sorted_files(&dir, "def") {
            let text = std::fs::read_to_string(&f).unwrap();
            assert!(text.contains("Bootstrap: docker"), "{}", f.display());
            assert!(!text.contains("%post"), "{}: %post", f.display());
        }
    }
}

#[test]
fn the_replay_models_dockerfile_instructions() {
    let df = "FROM nvidia/cuda:12.8.1-devel-rockylinux9@sha256:abc AS a\nARG X=1\nENV Y=\"2\"\nWORKDIR /wheels\nRUN --mount=type=cache,target=/root/.cache/uv \\\n    echo hi\nFROM a AS b\nCOPY --from=a /wheels/w /x/w\nFROM scratch AS c\n";
    let (script, stages) = replay(df);
    assert_eq!(stages, ["a", "b"]);
    assert!(script.contains("fresh rockylinux9"), "{script}");
    assert!(script.contains("restore a"), "{script}");
    assert!(script.contains("bash -o pipefail -c 'echo hi'"), "{script}");
    assert!(script.contains("/opt/harness/wheels"), "{script}");
    assert!(!script.contains("--mount"), "{script}");
}
