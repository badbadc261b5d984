//! torch built from source (`torch = { build = "source" }`), held to its consumers'
//! contracts:
//!
//! * every variable `build-torch.sh` exports is a documented PyTorch build variable (the
//!   sourced list in `src/catalog/torch_build_env.rs`); an unknown one fails;
//! * the script, run under stand-ins for `uv`, `git`, `python` and `nproc`
//!   (`tests/standins/torch-build/stub.sh`), downloads the locked source archive and checks
//!   it with the real `sha256sum -c` (a different archive stops it before any build), installs
//!   the locked build requirements and cuDNN, and builds one wheel with the lock's arch list,
//!   the system NCCL, fatbin compression, ccache and the MAX_JOBS it was given (or the one
//!   memory allows);
//! * the Dockerfile and Packer run that same script, byte for byte;
//! * shellcheck accepts it.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use gpustack::catalog::torch_build_env;
use gpustack::lock::Lock;
use gpustack::Component;

const NAME: &str = "a100-torch-source";

fn lock() -> Lock {
    let path = root().join("lockfiles").join(format!("{NAME}.lock"));
    Lock::parse(
        &path.display().to_string(),
        &std::fs::read_to_string(&path).unwrap(),
    )
    .unwrap()
}

fn exported(script: &str) -> Vec<(String, String)> {
    script
        .lines()
        .filter_map(|l| l.strip_prefix("export "))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn every_exported_variable_is_a_documented_build_variable() {
    let out = generate(NAME, "docker");
    let script = std::fs::read_to_string(out.join("build-torch.sh")).unwrap();
    let vars = exported(&script);
    assert!(vars.len() >= 10, "{vars:?}");
    for (k, _) in &vars {
        assert!(
            torch_build_env::documented(k).is_some(),
            "build-torch.sh exports `{k}`, which is not in src/catalog/torch_build_env.rs"
        );
    }
    // The test can fail: an undocumented name is caught.
    assert!(torch_build_env::documented("TORCH_CUDA_ARCH_LISTS").is_none());
}

struct Run {
    ok: bool,
    stderr: String,
    commands: Vec<String>,
    env: BTreeMap<String, String>,
    wheels: Vec<String>,
}

/// A stand-in source archive (`pytorch-v…/setup.py`, as the release tarball is laid out),
/// and its sha256 as `sha256sum` prints it.
fn stub_archive(dir: &Path) -> (PathBuf, String) {
    let tree = dir.join("tree/pytorch-v0");
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::write(tree.join("setup.py"), "# stand-in\n").unwrap();
    let archive = dir.join("archive.tar.gz");
    let st = Command::new("tar")
        .arg("-czf")
        .arg(&archive)
        .arg("-C")
        .arg(dir.join("tree"))
        .arg("pytorch-v0")
        .status()
        .unwrap();
    assert!(st.success());
    let out = Command::new("sha256sum").arg(&archive).output().unwrap();
    let sum = String::from_utf8(out.stdout).unwrap();
    (archive, sum.split(' ').next().unwrap().to_string())
}

/// The generated script with the locked archive digest replaced by the stand-in archive's,
/// so the real `sha256sum -c` accepts it.
fn script_for_stub_archive(dir: &Path, stub_sha: &str) -> PathBuf {
    let lock = lock();
    let torch = lock.component(Component::Torch).unwrap();
    let locked = torch
        .get("source-archive-sha256")
        .expect("the lock pins the archive");
    let text = std::fs::read_to_string(script_path()).unwrap();
    assert!(text.contains(locked), "the script checks the locked digest");
    let p = dir.join("build-torch.sh");
    std::fs::write(&p, text.replace(locked, stub_sha)).unwrap();
    p
}

fn run_script(
    script: &Path,
    archive: &Path,
    max_jobs: Option<&str>,
    mem_per_job: Option<&str>,
) -> Run {
    run_script_with_gcc(script, archive, &locked_gcc(), max_jobs, mem_per_job)
}

/// The GCC the lock decided, as `gcc -dumpversion` prints it on Ubuntu and Rocky: the major.
fn locked_gcc() -> String {
    let lock = lock();
    let torch = lock.component(Component::Torch).unwrap();
    let gcc = torch
        .get("host-gcc")
        .expect("the lock records the host GCC");
    gcc.split('.').next().unwrap().to_string()
}

fn run_script_with_gcc(
    script: &Path,
    archive: &Path,
    gcc: &str,
    max_jobs: Option<&str>,
    mem_per_job: Option<&str>,
) -> Run {
    let dir = tempdir("torch-build-harness");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let stub = root().join("tests/standins/torch-build/stub.sh");
    for tool in ["uv", "git", "python", "nproc", "gcc"] {
        std::os::unix::fs::symlink(&stub, bin.join(tool)).unwrap();
    }
    let log = dir.join("log");
    std::fs::write(&log, "").unwrap();
    let wheels = dir.join("wheels");
    let mut cmd = Command::new("bash");
    cmd.arg(script)
        .arg(&wheels)
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("STUB_LOG", &log)
        .env("STUB_NPROC", "8")
        .env("STUB_GCC", gcc)
        .env("STUB_ARCHIVE", archive)
        .env("STUB_SITE", dir.join("site").display().to_string())
        .env("TORCH_SRC", dir.join("src").display().to_string());
    if let Some(j) = max_jobs {
        cmd.env("MAX_JOBS", j);
    }
    if let Some(m) = mem_per_job {
        cmd.env("MEM_PER_JOB_GIB", m);
    }
    let out = cmd.output().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    let mut run = Run {
        ok: out.status.success(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        commands: Vec::new(),
        env: BTreeMap::new(),
        wheels: std::fs::read_dir(&wheels)
            .map(|d| {
                d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default(),
    };
    for l in text.lines() {
        if let Some(c) = l.strip_prefix("cmd ") {
            run.commands.push(c.to_string());
        } else if let Some((k, v)) = l.strip_prefix("env ").and_then(|e| e.split_once('=')) {
            run.env.insert(k.to_string(), v.to_string());
        }
    }
    if let Ok(src) = std::fs::read_dir(dir.join("src")) {
        run.commands
            .extend(src.map(|e| format!("unpacked {}", e.unwrap().file_name().to_string_lossy())));
    }
    let _ = std::fs::remove_dir_all(&dir);
    run
}

/// Runs the script against the stand-in archive, with its digest accepted.
fn run_ok(max_jobs: Option<&str>, mem_per_job: Option<&str>) -> Run {
    let dir = tempdir("torch-build-script");
    let (archive, sha) = stub_archive(&dir);
    let script = script_for_stub_archive(&dir, &sha);
    let run = run_script(&script, &archive, max_jobs, mem_per_job);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(run.ok, "build-torch.sh failed: {}", run.stderr);
    run
}

fn script_path() -> PathBuf {
    generate(NAME, "docker").join("build-torch.sh")
}

#[test]
fn the_build_script_stops_on_a_gcc_other_than_the_locked_one() {
    let dir = tempdir("torch-build-wrong-gcc");
    let (archive, sha) = stub_archive(&dir);
    let script = script_for_stub_archive(&dir, &sha);
    let run = run_script_with_gcc(&script, &archive, "8", None, None);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!run.ok, "built with GCC 8: {:?}", run.commands);
    assert!(
        run.stderr
            .contains(&format!("the lock builds with GCC {}", locked_gcc())),
        "{}",
        run.stderr
    );
    assert!(
        !run.commands
            .iter()
            .any(|c| c.starts_with("uv ") || c.starts_with("python -m pip")),
        "{:?}",
        run.commands
    );
}

#[test]
fn the_build_script_refuses_an_archive_whose_sha256_is_not_the_locked_one() {
    // The generated script as is: the stand-in archive is not the locked one.
    let dir = tempdir("torch-build-wrong-archive");
    let (archive, _) = stub_archive(&dir);
    let run = run_script(&script_path(), &archive, Some("6"), None);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!run.ok, "a wrong archive was accepted: {:?}", run.commands);
    assert!(run.stderr.contains("did NOT match"), "{}", run.stderr);
    assert!(
        !run.commands
            .iter()
            .any(|c| c.starts_with("python -m pip wheel")),
        "built from an unchecked archive: {:?}",
        run.commands
    );
}

#[test]
fn the_build_script_builds_the_locked_source_with_the_locked_settings() {
    let lock = lock();
    let torch = lock.component(Component::Torch).unwrap();
    let cudnn = lock.component(Component::Cudnn).unwrap();
    let run = run_ok(Some("6"), None);

    // Downloads the locked archive (checked by sha256sum, else the run fails) and unpacks it
    // without its top-level directory; nothing is cloned.
    let archive = torch.get("source-archive").unwrap();
    assert!(
        run.commands
            .iter()
            .any(|c| c.starts_with("python -c") && c.contains(archive)),
        "{:?}",
        run.commands
    );
    assert!(
        run.commands.iter().any(|c| c == "unpacked setup.py"),
        "{:?}",
        run.commands
    );
    assert!(
        !run.commands.iter().any(|c| c.starts_with("git ")),
        "{:?}",
        run.commands
    );
    // Installs the build requirements the lock records, and the locked cuDNN.
    let install = run
        .commands
        .iter()
        .find(|c| c.starts_with("uv pip install"))
        .expect("uv pip install");
    for r in torch.list("build-requires") {
        assert!(install.split(' ').any(|w| w == r), "{install} lacks {r}");
    }
    assert!(
        install.contains(&format!("nvidia-cudnn-cu12=={}", cudnn.version)),
        "{install}"
    );
    // One wheel, built once, without dependencies or build isolation.
    let builds: Vec<&String> = run
        .commands
        .iter()
        .filter(|c| c.starts_with("python -m pip wheel"))
        .collect();
    assert_eq!(builds.len(), 1, "{:?}", run.commands);
    assert!(builds[0].contains("--no-deps") && builds[0].contains("--no-build-isolation"));
    assert_eq!(run.wheels, [format!("torch-{}-stub.whl", torch.version)]);
    // The build's environment, as the lock decided it.
    let env = |k: &str| run.env.get(k).map(String::as_str);
    assert_eq!(
        env("TORCH_CUDA_ARCH_LIST"),
        Some(torch.list("arch-list").join(";").as_str())
    );
    assert_eq!(env("TORCH_NVCC_FLAGS"), Some("-Xfatbin -compress-all"));
    assert_eq!(env("USE_SYSTEM_NCCL"), Some("1"));
    assert_eq!(env("USE_CUDA"), Some("1"));
    assert_eq!(env("USE_CUDNN"), Some("1"));
    assert_eq!(env("PYTORCH_BUILD_VERSION"), Some(torch.version.as_str()));
    assert_eq!(env("MAX_JOBS"), Some("6"));
    for lang in ["C", "CXX", "CUDA"] {
        assert_eq!(
            env(&format!("CMAKE_{lang}_COMPILER_LAUNCHER")),
            Some("ccache")
        );
    }
    assert!(env("CUDNN_INCLUDE_DIR").is_some_and(|d| d.ends_with("nvidia/cudnn/include")));
    assert!(env("CUDNN_LIB_DIR").is_some_and(|d| d.ends_with("nvidia/cudnn/lib")));
}

#[test]
fn max_jobs_defaults_to_the_cpus_and_is_capped_by_memory_per_job() {
    let run = run_ok(None, None);
    assert_eq!(run.env.get("MAX_JOBS").map(String::as_str), Some("8"));
    // More memory per job than any test machine has: one job.
    let run = run_ok(None, Some("1000000"));
    assert_eq!(run.env.get("MAX_JOBS").map(String::as_str), Some("1"));
}

#[test]
fn every_target_runs_the_same_script_and_shellcheck_accepts_it() {
    let docker = generate(NAME, "docker");
    let script = std::fs::read_to_string(docker.join("build-torch.sh")).unwrap();
    let dockerfile = std::fs::read_to_string(docker.join("Dockerfile")).unwrap();
    assert!(dockerfile.contains("COPY build-torch.sh /usr/local/bin/build-torch.sh"));
    let ignore = std::fs::read_to_string(docker.join(".dockerignore")).unwrap();
    assert!(ignore.lines().any(|l| l == "!build-torch.sh"), "{ignore}");
    // Packer writes it on the VM from a quoted here-document in framework.sh.
    let packer = generate(NAME, "packer");
    let framework = std::fs::read_to_string(packer.join("scripts/framework.sh")).unwrap();
    let start = "cat > /opt/gpustack/build-torch.sh <<'GPUSTACK_BUILD_TORCH_EOF'\n";
    let body = framework
        .split(start)
        .nth(1)
        .expect("framework.sh writes build-torch.sh");
    let on_vm = body.split("GPUSTACK_BUILD_TORCH_EOF\n").next().unwrap();
    assert_eq!(on_vm, script, "Packer runs a different build script");
    assert!(framework.contains("bash /opt/gpustack/build-torch.sh /opt/gpustack/wheels"));
    if let Some(sc) = validator("shellcheck") {
        let (code, out) = run_tool(&sc, &["-s", "bash", "build-torch.sh"], &docker);
        assert_eq!(code, 0, "{out}");
    }
}

/// On the Packer VM the build tools never reach the image's venv: build-torch.sh runs in a
/// build environment of its own, with the compile jobs and the memory bound Packer passes,
/// and the VM is sized for those jobs.
#[test]
fn packer_builds_torch_in_its_own_venv_with_the_jobs_it_passes() {
    let packer = generate(NAME, "packer");
    let framework = std::fs::read_to_string(packer.join("scripts/framework.sh")).unwrap();
    let run = framework
        .split("bash /opt/gpustack/build-torch.sh")
        .next()
        .unwrap()
        .rsplit("env CUDA_HOME=")
        .next()
        .unwrap();
    assert!(
        run.contains("VIRTUAL_ENV=/opt/gpustack/build-venv "),
        "{run}"
    );
    assert!(run.contains("PATH=/opt/gpustack/build-venv/bin:"), "{run}");
    assert!(!run.contains("/opt/venv"), "{run}");
    assert!(
        run.contains("MAX_JOBS=\"${GPUSTACK_MAX_JOBS:-4}\""),
        "{run}"
    );
    assert!(
        run.contains("MEM_PER_JOB_GIB=\"${GPUSTACK_MEM_PER_JOB_GIB:-}\""),
        "{run}"
    );
    let hcl = std::fs::read_to_string(packer.join("build.pkr.hcl")).unwrap();
    let fw = hcl
        .split("/scripts/framework.sh\"")
        .nth(1)
        .expect("the framework provisioner");
    let env_line = fw.lines().find(|l| l.contains("environment_vars")).unwrap();
    assert!(
        env_line.contains("GPUSTACK_MAX_JOBS=${var.max_jobs}")
            && env_line.contains("GPUSTACK_MEM_PER_JOB_GIB=${var.mem_per_job_gib}"),
        "{env_line}"
    );
    let vars = std::fs::read_to_string(packer.join("variables.pkr.hcl")).unwrap();
    let default = |name: &str| -> u64 {
        let block = vars
            .split(&format!("variable \"{name}\""))
            .nth(1)
            .unwrap_or_else(|| panic!("variable {name}"));
        let line = block
            .lines()
            .find(|l| l.trim_start().starts_with("default"))
            .unwrap();
        line.split('=').nth(1).unwrap().trim().parse().unwrap()
    };
    let (jobs, per_job) = (default("max_jobs"), default("mem_per_job_gib"));
    assert!(default("qemu_cpus") >= jobs);
    assert!(default("qemu_memory_mb") >= jobs * per_job * 1024);
}

#[test]
fn check_reports_a_node_gpu_the_source_build_has_no_kernels_for() {
    let dir = tempdir("torch-source-check");
    let lock = root().join("lockfiles").join(format!("{NAME}.lock"));
    let node = |gpu: &str| {
        let p = dir.join(format!("{gpu}.toml"));
        std::fs::write(&p, format!("[hardware]\ngpus = [\"{gpu}\"]\n")).unwrap();
        p
    };
    let run = |hw: &Path| {
        run_in(
            &dir,
            &[
                "check",
                "--lock",
                lock.to_str().unwrap(),
                "--hardware",
                hw.to_str().unwrap(),
                "--format",
                "json",
            ],
        )
    };
    let h100 = run(&node("h100"));
    assert_eq!(h100.code, 1, "{}", h100.stderr);
    assert!(
        h100.stdout.contains("\"torch-arch-not-built\""),
        "{}",
        h100.stdout
    );
    assert!(
        h100.stdout.contains("no PTX to fall back to"),
        "{}",
        h100.stdout
    );
    // The A100 the build is for: no such finding.
    let a100 = run(&node("a100"));
    assert!(
        !a100.stdout.contains("torch-arch-not-built"),
        "{}",
        a100.stdout
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_closure_takes_torch_requirements_not_torch_from_an_index() {
    let lock = lock();
    let inputs = gpustack::resolve::python::inputs(&lock);
    let layer = |n: &str| {
        inputs
            .iter()
            .find(|l| l.layer == n)
            .unwrap_or_else(|| panic!("no {n} layer input"))
    };
    let fw = layer("framework");
    assert!(
        !fw.requirements.iter().any(|r| r.starts_with("torch==")),
        "{:?}",
        fw.requirements
    );
    assert!(!fw.sources.contains_key("torch"), "{:?}", fw.sources);
    let torch = lock.component(Component::Torch).unwrap();
    for r in torch.list("runtime-requires") {
        assert!(fw.requirements.contains(r), "framework lacks {r}");
    }
    let cudnn = lock.component(Component::Cudnn).unwrap();
    assert!(fw
        .requirements
        .contains(&format!("nvidia-cudnn-cu12=={}", cudnn.version)));
    let build = layer("build");
    for r in torch.list("build-requires") {
        assert!(build.requirements.contains(r), "build lacks {r}");
    }
}

/// The a100 fixture spec with `prebuilt = { … }` added to its `torch` table.
fn spec_with_prebuilt(url: &str, sha256: &str) -> String {
    let spec = std::fs::read_to_string(root().join(format!("fixtures/specs/{NAME}.toml"))).unwrap();
    let from = "archs = [\"8.0\"] }";
    assert!(spec.contains(from), "{spec}");
    spec.replace(
        from,
        &format!("archs = [\"8.0\"], prebuilt = {{ url = \"{url}\", sha256 = \"{sha256}\" }} }}"),
    )
}

const WHEEL_SHA: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// A project whose spec names a prebuilt wheel (URL returned), locked.
fn locked_with_prebuilt(tag: &str) -> (PathBuf, &'static str) {
    let dir = tempdir(tag);
    let url = "https://cache.example.org/wheels/torch-2.10.0%2Bcu128-cp311-cp311-linux_x86_64.whl";
    std::fs::write(
        dir.join("gpustack.toml"),
        spec_with_prebuilt(url, WHEEL_SHA),
    )
    .unwrap();
    let lock = run_in(&dir, &["lock", "-q"]);
    assert_eq!(lock.code, 0, "{}", lock.stderr);
    (dir, url)
}

#[test]
fn packer_installs_a_named_prebuilt_wheel_checked_by_sha256_instead_of_building() {
    let (dir, url) = locked_with_prebuilt("torch-prebuilt");
    let locked = std::fs::read_to_string(dir.join("gpustack.lock")).unwrap();
    assert!(
        locked.contains(&format!("prebuilt-url = \"{url}\"")),
        "{locked}"
    );
    assert!(locked.contains(&format!("prebuilt-sha256 = \"{WHEEL_SHA}\"")));
    let gen = run_in(&dir, &["gen", "packer", "--out", "out"]);
    assert_eq!(gen.code, 0, "{}", gen.stderr);
    let framework = std::fs::read_to_string(dir.join("out/packer/scripts/framework.sh")).unwrap();
    let file = "/opt/gpustack/wheels/torch-2.10.0+cu128-cp311-cp311-linux_x86_64.whl";
    assert!(
        framework.contains(&format!("curl -fsSL --retry 3 -o {file} '{url}'")),
        "{framework}"
    );
    assert!(
        framework.contains(&format!(
            "printf '%s  %s\\n' {WHEEL_SHA} {file} | sha256sum -c -"
        )),
        "{framework}"
    );
    assert!(
        !framework.contains("build-torch.sh"),
        "still builds on the VM"
    );
    assert!(framework
        .contains("/usr/local/bin/uv pip install --no-deps /opt/gpustack/wheels/torch-*.whl"));
    // A wheel of another version is refused (by `lock`, which runs the generators' checks).
    let other = url.replace("2.10.0", "2.9.1");
    std::fs::write(
        dir.join("gpustack.toml"),
        spec_with_prebuilt(&other, WHEEL_SHA),
    )
    .unwrap();
    let relock = run_in(&dir, &["lock", "-q"]);
    assert_eq!(relock.code, 2, "{}", relock.stderr);
    assert!(
        relock.stderr.contains("is not torch 2.10.0+cu128"),
        "{}",
        relock.stderr
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Docker reuses the named wheel too: `torch-build` is a `FROM scratch` stage that only
/// fetches it with BuildKit's `ADD --checksum` (the locked sha256), the framework stage
/// installs it exactly as the built one, no build script is written or copied, and the
/// Dockerfile passes hadolint. The same decision (`TorchBuildPlan::builds_here`) keeps
/// Packer from building.
#[test]
fn docker_fetches_a_named_prebuilt_wheel_checked_by_sha256_instead_of_building() {
    let (dir, url) = locked_with_prebuilt("torch-prebuilt-docker");
    let gen = run_in(&dir, &["gen", "docker", "--out", "out"]);
    assert_eq!(gen.code, 0, "{}", gen.stderr);
    let docker = dir.join("out/docker");
    let text = std::fs::read_to_string(docker.join("Dockerfile")).unwrap();
    let (order, stages) = parse_dockerfile(&text);
    let tb = &stages["torch-build"];
    assert_eq!(tb.from, "scratch", "{text}");
    let file = "torch-2.10.0+cu128-cp311-cp311-linux_x86_64.whl";
    assert_eq!(
        tb.instructions,
        vec![(
            "ADD".to_string(),
            format!("--checksum=sha256:{WHEEL_SHA} {url} /wheels/{file}")
        )],
        "{text}"
    );
    // The stage comes before the framework stage, which installs its wheel without deps.
    let pos = |n: &str| order.iter().position(|s| s == n).unwrap();
    assert!(pos("torch-build") < pos("framework"), "{order:?}");
    let fw: Vec<&str> = stages["framework"]
        .instructions
        .iter()
        .filter(|(k, _)| k == "RUN")
        .map(|(_, v)| v.as_str())
        .collect();
    assert!(
        fw.iter().any(|v| v.contains("from=torch-build")
            && v.contains("uv pip install --no-deps /wheels/torch-*.whl")),
        "{fw:?}"
    );
    // Nothing compiles torch: no build script in the context, none copied or run.
    assert!(!docker.join("build-torch.sh").exists());
    assert!(!text.contains("build-torch.sh"), "{text}");
    let ignore = std::fs::read_to_string(docker.join(".dockerignore")).unwrap();
    assert!(!ignore.contains("build-torch.sh"), "{ignore}");
    assert_copies_are_in_the_context(&docker);
    if let Some(h) = validator("hadolint") {
        let (code, out) = run_tool(&h, &["Dockerfile"], &docker);
        assert_eq!(code, 0, "{out}");
    }
    // Without `prebuilt` the same spec builds in `torch-build`.
    std::fs::copy(
        root().join(format!("fixtures/specs/{NAME}.toml")),
        dir.join("gpustack.toml"),
    )
    .unwrap();
    assert_eq!(run_in(&dir, &["lock", "-q"]).code, 0);
    assert_eq!(run_in(&dir, &["gen", "docker", "--out", "built"]).code, 0);
    let built = std::fs::read_to_string(dir.join("built/docker/Dockerfile")).unwrap();
    let (_, stages) = parse_dockerfile(&built);
    assert_ne!(stages["torch-build"].from, "scratch");
    assert!(dir.join("built/docker/build-torch.sh").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_malformed_prebuilt_wheel_is_refused_at_its_line() {
    let dir = tempdir("torch-prebuilt-bad");
    for (url, sha, want) in [
        (
            "http://cache.example.org/torch-2.10.0.whl",
            WHEEL_SHA,
            "must be an https:// URL of a `torch-….whl` file",
        ),
        (
            "https://cache.example.org/$(id)/torch-2.10.0.whl",
            WHEEL_SHA,
            "must be an https:// URL",
        ),
        (
            "https://cache.example.org/numpy-2.0.whl",
            WHEEL_SHA,
            "`torch-….whl`",
        ),
        (
            "https://cache.example.org/torch-2.10.0.whl",
            "ABC",
            "must be 64 lowercase hex digits",
        ),
    ] {
        std::fs::write(dir.join("gpustack.toml"), spec_with_prebuilt(url, sha)).unwrap();
        let out = run_in(&dir, &["lock", "-q"]);
        assert_eq!(out.code, 2, "{url}: {}", out.stderr);
        assert!(out.stderr.contains(want), "{url}: {}", out.stderr);
        assert!(out.stderr.contains("gpustack.toml:"), "{}", out.stderr);
        assert!(out.stderr.contains("hint:"), "{}", out.stderr);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `torch.source-arch-names`: an arch list entry the release's CMake does not accept is
/// refused. Stock 2.10.0 accepts `N.N`, `N.Na` and `N.Nf` (`[source.cmake_archs]`), so the
/// conflict uses an overlay whose `[[source]]` entry is the stock one with `suffixes = ["a"]`,
/// the pattern (`[0-9]+\.[0-9]a?`) of the 2.6.0–2.8.0 wheels' `select_compute_arch.cmake`.
/// Its neighbour, the same spec on the stock catalog, locks and says why in `because`.
#[test]
fn an_arch_entry_the_cmake_rejects_is_refused_and_the_stock_pattern_locks() {
    let dir = tempdir("torch-source-arch-names");
    let spec = "[stack]\nname = \"b200-torch-source-family\"\nos = \"ubuntu24.04\"\n[hardware]\ngpus = [\"b200\"]\n[components]\ntorch = { version = \"==2.10.0\", build = \"source\", archs = [\"10.0f\"] }\ncuda = \"13.0\"\n";
    std::fs::write(dir.join("gpustack.toml"), spec).unwrap();
    let stock = std::fs::read_to_string(root().join("catalog/torch.toml")).unwrap();
    let start = stock.find("[[source]]\ntorch = \"2.10.0\"").unwrap();
    let end = start + stock[start..].find("\n[[source.nvcc_host_gcc]]").unwrap();
    let entry = &stock[start..end];
    assert!(entry.contains("suffixes = [\"a\", \"f\"]"), "{entry}");
    let overlay = dir.join("overlay");
    std::fs::create_dir_all(&overlay).unwrap();
    std::fs::write(
        overlay.join("torch.toml"),
        format!(
            "family = \"torch\"\ndescription = \"test: a CMake without `f`\"\n\n{}",
            entry.replace("suffixes = [\"a\", \"f\"]", "suffixes = [\"a\"]")
        ),
    )
    .unwrap();

    let refused = run_in(&dir, &["lock", "--catalog", "overlay"]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains("does not accept `10.0f` in TORCH_CUDA_ARCH_LIST"),
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains("rule `torch.source-arch-names`"),
        "{}",
        refused.stderr
    );

    let locked = run_in(&dir, &["lock"]);
    assert_eq!(locked.code, 0, "{}", locked.stderr);
    let lock = std::fs::read_to_string(dir.join("gpustack.lock")).unwrap();
    assert!(lock.contains("arch-list = [\"10.0f\"]"), "{lock}");
    assert!(
        lock.contains(
            "`N.N`, `N.Na` or `N.Nf` (each with or without `+PTX`) [torch.source-arch-names]"
        ),
        "{lock}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
