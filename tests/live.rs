//! The live tier (`bash tests/run.sh --live`, `GPUSTACK_LIVE=1`): what a generated file
//! installs and starts, run with the real packages from PyPI instead of stand-ins. Not part
//! of CI's time budget: the first run downloads about 4 GB of wheels into uv's cache.
//!
//! The project is the committed closed lock `fixtures/closed/h100-ib-train-serve` (real
//! pylocks, resolved by uv 0.11.7 against PyPI) on one node of 2 GPUs (re-locked offline:
//! the pylocks are reused byte for byte), rendered with `gen docker slurm k8s`. Then:
//!
//! 1. the `framework` stage's `RUN` lines of the generated Dockerfile, as written (only
//!    `/opt/venv` and `/tmp/<pylock>` mapped to the test's directories), with the real uv;
//! 2. torch in that environment against the lock: version, CUDA, compiled archs, cuDNN and
//!    NCCL, read without a GPU;
//! 3. the generated Slurm `train.sbatch` (one-node `srun`/`scontrol` stand-ins) and the
//!    Kubernetes TrainJob's trainer command, each starting the *real* torchrun of that
//!    environment, which starts 2 workers of a gloo (CPU) training program;
//! 4. the `build` stage: its `RUN` lines build the DeepSpeed wheel from the locked sdist, as
//!    written; the wheel's `git_version_info_installed.py` must say
//!    `accelerator_name='cuda'` and its requirements must be in the training closure.
//!
//! Where this machine differs from an image build, the test says so and adapts the least it
//! can: the interpreter (the lock's CPython build is downloaded from GitHub; without GitHub,
//! a local CPython of the same minor: `GPUSTACK_LIVE_PYTHON` or uv's discovery) and, without
//! a CUDA toolkit (`nvcc`), the DeepSpeed ops whose sources are CUDA (`DS_BUILD_FUSED_ADAM`)
//! are switched off; the CPU ops are still built.
#![allow(clippy::print_stderr)] // the live tier reports what it adapted

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::*;
use yaml_rust2::YamlLoader;

/// Whether the live tier runs: `GPUSTACK_LIVE=1` (tests/run.sh --live).
fn live() -> bool {
    let on = std::env::var("GPUSTACK_LIVE").is_ok_and(|v| v == "1");
    if !on {
        eprintln!("live tier skipped: set GPUSTACK_LIVE=1 (bash tests/run.sh --live)");
    }
    on
}

/// uv: `GPUSTACK_UV`, else the validators' (the catalog's pinned version).
fn uv() -> PathBuf {
    if let Some(p) = std::env::var_os("GPUSTACK_UV").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    validator("uv").expect("the live tier needs uv (tests/run.sh installs it)")
}

/// The rendered project, shared by the tests of this binary.
struct Project {
    dir: PathBuf,
    lock: gpustack::Lock,
    dockerfile: String,
}

fn project() -> &'static Project {
    static P: OnceLock<Project> = OnceLock::new();
    P.get_or_init(|| {
        let dir = tempdir("live");
        copy_dir(&root().join("fixtures/closed/h100-ib-train-serve"), &dir);
        // One node of 2 GPUs: 2 workers per launch on this machine.
        let spec = std::fs::read_to_string(dir.join("gpustack.toml")).unwrap();
        let spec = spec
            .replace("\nnodes = 8\n", "\nnodes = 1\n")
            .replace("\ngpus_per_node = 8\n", "\ngpus_per_node = 2\n")
            .replace("\ntensor_parallel = 8\n", "\ntensor_parallel = 2\n");
        std::fs::write(dir.join("gpustack.toml"), spec).unwrap();
        let before = std::fs::read(dir.join("pylock.framework.toml")).unwrap();
        let out = run_in(&dir, &["lock"]);
        assert_eq!(out.code, 0, "lock: {}", out.stderr);
        assert_eq!(
            std::fs::read(dir.join("pylock.framework.toml")).unwrap(),
            before,
            "the offline re-lock reuses the committed pylocks"
        );
        let out = run_in(&dir, &["gen", "docker", "slurm", "k8s"]);
        assert_eq!(out.code, 0, "gen: {}", out.stderr);
        let text = std::fs::read_to_string(dir.join("gpustack.lock")).unwrap();
        Project {
            lock: gpustack::Lock::parse("gpustack.lock", &text).unwrap(),
            dockerfile: std::fs::read_to_string(dir.join("out/docker/Dockerfile")).unwrap(),
            dir,
        }
    })
}

/// A stage's `RUN` commands as a shell runs them: BuildKit's `--mount` flags (cache and
/// bind mounts, not part of the command) dropped, `/opt/venv` and the pylocks copied to
/// `/tmp` mapped to `venv` and the Docker context.
fn run_lines(p: &Project, stage: &str, venv: &Path) -> Vec<String> {
    let (_, stages) = parse_dockerfile(&p.dockerfile);
    let s = stages
        .get(stage)
        .unwrap_or_else(|| panic!("no stage {stage}"));
    let ctx = p.dir.join("out/docker");
    s.instructions
        .iter()
        .filter(|(kw, _)| kw == "RUN")
        .map(|(_, cmd)| {
            let words: Vec<&str> = cmd.split(' ').collect();
            let start = words
                .iter()
                .position(|w| !w.is_empty() && !w.starts_with("--mount="))
                .unwrap();
            let mut c = words[start..].join(" ");
            c = c.replace("/opt/venv", &venv.display().to_string());
            for f in ["pylock.framework.toml", "pylock.build.toml"] {
                c = c.replace(&format!("/tmp/{f}"), &ctx.join(f).display().to_string());
            }
            c
        })
        .collect()
}

/// Runs one `RUN` command with bash as the stage's `SHELL` (`-o pipefail -c`), with the
/// stage's environment: uv on PATH, the venv active. The images set `UV_LINK_MODE=copy`
/// (the cache is a build mount); here the files are hard links into uv's cache, the same
/// files without a second copy of several GB per environment.
fn sh(cmd: &str, venv: &Path, extra: &[(&str, String)]) -> std::process::Output {
    let uv = uv();
    let path = format!(
        "{}:{}:{}",
        venv.join("bin").display(),
        uv.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut c = Command::new("bash");
    c.args(["-o", "pipefail", "-c", cmd])
        .env("PATH", path)
        .env("VIRTUAL_ENV", venv)
        .env("UV_LINK_MODE", "hardlink")
        .env_remove("PYTHONPATH");
    for (k, v) in extra {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// The interpreter line `uv python install X && uv venv --python X DIR`, as written; where
/// the locked CPython build cannot be downloaded (no GitHub), the same minor from
/// `GPUSTACK_LIVE_PYTHON` or uv's discovery, and a note.
fn make_venv(p: &Project, line: &str, venv: &Path) {
    let out = sh(line, venv, &[]);
    if out.status.success() {
        return;
    }
    let minor = p
        .lock
        .component(gpustack::Component::Python)
        .map_or_else(|| "3".to_string(), |c| c.version.to_string());
    let local = std::env::var("GPUSTACK_LIVE_PYTHON").unwrap_or(minor);
    eprintln!(
        "live: `{line}` failed ({}); using the local CPython {local} instead (GPUSTACK_LIVE_PYTHON)",
        String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("")
    );
    let out = Command::new(uv())
        .args(["venv", "--python", &local])
        .arg(venv)
        .env("UV_PYTHON_DOWNLOADS", "never")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "no local CPython {local}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A venv made and filled by a stage's `RUN` lines, up to the line `stop` matches. One at a
/// time: two uv processes unpacking the same wheels each leave a copy in the cache.
fn stage_venv(p: &Project, stage: &str, venv: &Path, stop: impl Fn(&str) -> bool) -> Vec<String> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let lines = run_lines(p, stage, venv);
    let mut rest = Vec::new();
    let mut stopped = false;
    for l in lines {
        if stopped || stop(&l) {
            stopped = true;
            rest.push(l);
        } else if l.starts_with("uv python install") {
            make_venv(p, &l, venv);
        } else if l.starts_with("uv ") {
            let out = sh(&l, venv, &[]);
            assert!(
                out.status.success(),
                "`{l}` failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    rest
}

/// The framework stage's environment, installed once for the tests below.
fn framework_venv() -> &'static PathBuf {
    static V: OnceLock<PathBuf> = OnceLock::new();
    V.get_or_init(|| {
        let p = project();
        let venv = p.dir.join("venv");
        let rest = stage_venv(p, "framework", &venv, |_| false);
        assert!(rest.is_empty());
        venv
    })
}

fn python(venv: &Path, code: &str) -> String {
    let out = Command::new(venv.join("bin/python"))
        .args(["-c", code])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn live_framework_layer_installs_and_torch_is_the_locked_build() {
    if !live() {
        return;
    }
    let p = project();
    let venv = framework_venv();
    // Read without a GPU: `torch.cuda.get_arch_list()` returns [] when CUDA is not
    // available (`if not is_available(): return []`, torch/cuda/__init__.py at v2.10.0,
    // https://github.com/pytorch/pytorch/blob/v2.10.0/torch/cuda/__init__.py); the list it
    // would parse is `torch._C._cuda_getArchFlags()`, compiled into the library. cuDNN's
    // and NCCL's versions are read from the libraries the wheels installed.
    let got = python(
        venv,
        "import json, torch; print(json.dumps({'version': torch.__version__, 'cuda': torch.version.cuda, \
         'archs': torch._C._cuda_getArchFlags(), 'cudnn': torch.backends.cudnn.version(), \
         'nccl': '.'.join(map(str, torch.cuda.nccl.version()))}))",
    );
    let got: serde_json::Value = serde_json::from_str(&got).unwrap();
    let comp = |c: gpustack::Component| p.lock.component(c).unwrap();
    let torch = comp(gpustack::Component::Torch);
    assert_eq!(got["version"], torch.version.to_string());
    assert_eq!(got["cuda"].as_str(), torch.get("cuda"), "{got}");
    // The lock's arch list of the torch build ("its arch list 7.0;7.5;…" in its reasons),
    // as the sm_XY flags the library carries.
    let reason = torch
        .because
        .iter()
        .find_map(|b| b.strip_prefix("its arch list "))
        .expect("the lock records torch's arch list");
    let archs: Vec<String> = reason
        .split_whitespace()
        .next()
        .unwrap()
        .split(';')
        .map(|a| format!("sm_{}", a.replace('.', "")))
        .collect();
    assert_eq!(got["archs"].as_str().unwrap(), archs.join(" "), "{got}");
    let cudnn = comp(gpustack::Component::Cudnn).version.to_string();
    let v: Vec<u64> = cudnn.split('.').map(|x| x.parse().unwrap()).collect();
    assert_eq!(
        got["cudnn"].as_u64().unwrap(),
        v[0] * 10000 + v[1] * 100 + v[2],
        "cuDNN {cudnn}: {got}"
    );
    assert_eq!(
        got["nccl"].as_str().unwrap(),
        comp(gpustack::Component::Nccl).version.to_string()
    );
}

/// The records the gloo program wrote for `launch`, by rank.
fn gloo_records(rec: &Path, launch: &str) -> BTreeMap<u64, serde_json::Value> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(rec).unwrap() {
        let f = e.unwrap().path();
        let name = f.file_name().unwrap().to_str().unwrap().to_string();
        if name.starts_with(&format!("gloo.{launch}.")) {
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
            out.insert(v["rank"].as_u64().unwrap(), v);
        }
    }
    out
}

fn assert_two_workers(rec: &Path, launch: &str, argv: &[&str]) {
    let r = gloo_records(rec, launch);
    assert_eq!(r.len(), 2, "{launch}: {r:?}");
    for v in r.values() {
        assert_eq!(v["world_size"], 2, "{launch}: {v}");
        // 1 + 2: both workers took part in the all-reduce.
        assert_eq!(v["all_reduce"], 3.0, "{launch}: {v}");
        assert_eq!(v["argv"], serde_json::json!(argv), "{launch}: {v}");
    }
}

/// A project directory with the gloo program as `train.py`.
fn code_dir(at: &Path) {
    std::fs::create_dir_all(at).unwrap();
    std::fs::copy(
        root().join("tests/standins/train_gloo.py"),
        at.join("train.py"),
    )
    .unwrap();
}

#[test]
fn live_slurm_and_kubernetes_launches_run_under_the_real_torchrun() {
    if !live() {
        return;
    }
    let p = project();
    let venv = framework_venv();
    let command = &p.lock.request.deploy.train.as_ref().unwrap().command;
    let args: Vec<&str> = command
        .iter()
        .skip_while(|w| w.as_str() == "python")
        .skip(1)
        .map(String::as_str)
        .collect();
    let rec = p.dir.join("rec");
    std::fs::create_dir_all(&rec).unwrap();
    let path = |extra: &Path| {
        format!(
            "{}:{}:/usr/bin:/bin",
            extra.display(),
            venv.join("bin").display()
        )
    };

    // Slurm: `sbatch train.sbatch` from the project directory, on one node (localhost),
    // with the one-node srun/scontrol stand-ins; the container's PATH holds the venv.
    let submit = p.dir.join("submit");
    code_dir(&submit);
    let bin = p.dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for (name, from) in [
        ("srun", "tests/standins/srun.sh"),
        ("scontrol", "tests/standins/scontrol.sh"),
    ] {
        std::fs::copy(root().join(from), bin.join(name)).unwrap();
    }
    let script = p.dir.join("out/slurm/train.sbatch");
    let out = Command::new("bash")
        .arg(&script)
        .current_dir(&submit)
        .env_clear()
        .env("PATH", path(&bin))
        .env("HOME", std::env::var("HOME").unwrap_or_default())
        .env("GPUSTACK_REC_DIR", &rec)
        .env("GPUSTACK_LAUNCH", "slurm")
        .env("GPUSTACK_TEST_SUBMITTED", &script)
        .env("SLURM_JOB_ID", "7")
        .env("SLURM_JOB_NODELIST", "localhost")
        .env("SLURM_NNODES", "1")
        .env("SLURM_SUBMIT_DIR", &submit)
        .env("SLURM_CPUS_ON_NODE", "2")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "train.sbatch: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_two_workers(&rec, "slurm", &args);

    // Kubernetes: the TrainJob's trainer command + args with its env, in the code image's
    // working directory (a copy of the project). The rendezvous endpoint names node 0's pod
    // through the JobSet's headless Service; on this one node it resolves to 127.0.0.1.
    let job = YamlLoader::load_from_str(
        &std::fs::read_to_string(p.dir.join("out/k8s/trainjob.yaml")).unwrap(),
    )
    .unwrap()
    .remove(0);
    let trainer = &job["spec"]["trainer"];
    let strings = |y: &yaml_rust2::Yaml| -> Vec<String> {
        y.as_vec()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    let mut argv = strings(&trainer["command"]);
    argv.extend(strings(&trainer["args"]));
    let name = job["metadata"]["name"].as_str().unwrap();
    let service = format!("{name}-node-0-0.{name}:");
    let argv: Vec<String> = argv
        .iter()
        .map(|a| a.replace(&service, "127.0.0.1:"))
        .collect();
    let ws = p.dir.join("workspace");
    code_dir(&ws);
    let mut cmd = Command::new(venv.join("bin").join(&argv[0]));
    cmd.args(&argv[1..])
        .current_dir(&ws)
        .env_clear()
        .env("PATH", path(&bin))
        .env("HOME", std::env::var("HOME").unwrap_or_default())
        .env("GPUSTACK_REC_DIR", &rec)
        .env("GPUSTACK_LAUNCH", "k8s");
    for e in trainer["env"].as_vec().unwrap() {
        cmd.env(e["name"].as_str().unwrap(), e["value"].as_str().unwrap());
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{argv:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_two_workers(&rec, "k8s", &args);
}

#[test]
fn live_deepspeed_wheel_is_built_for_the_cuda_accelerator() {
    if !live() {
        return;
    }
    let p = project();
    let venv = p.dir.join("build-venv");
    // The build stage up to its source builds: the interpreter and the build closure.
    let rest = stage_venv(p, "build", &venv, |l| l.contains("pip wheel"));
    let sdist = p
        .lock
        .python
        .as_ref()
        .unwrap()
        .builds
        .iter()
        .find(|b| b.name == "deepspeed")
        .unwrap();
    let (_, stages) = parse_dockerfile(&p.dockerfile);
    let add = stages["build"]
        .instructions
        .iter()
        .find(|(kw, a)| kw == "ADD" && a.contains(&sdist.sha256))
        .expect("the build stage adds the locked sdist, checked");
    assert!(add.1.contains(&sdist.url));
    let file = p.dir.join("deepspeed.tar.gz");
    let out = Command::new("curl")
        .args(["-fsSL", "--retry", "3", "-o"])
        .arg(&file)
        .arg(&sdist.url)
        .status()
        .unwrap();
    assert!(out.success());
    let sum = Command::new("sha256sum").arg(&file).output().unwrap();
    assert!(String::from_utf8_lossy(&sum.stdout).starts_with(&sdist.sha256));

    let line = rest
        .iter()
        .find(|l| l.contains("deepspeed"))
        .expect("the build stage builds DeepSpeed");
    let wheels = p.dir.join("wheels");
    let mut line = line
        .replace("/wheels", &wheels.display().to_string())
        .replace(
            &format!("/tmp/{}", sdist.url.rsplit('/').next().unwrap()),
            &file.display().to_string(),
        );
    assert!(line.contains("DS_ACCELERATOR=cuda"), "{line}");
    let nvcc = Command::new("bash")
        .args(["-c", "command -v nvcc"])
        .status()
        .is_ok_and(|s| s.success());
    if !nvcc {
        eprintln!("live: no nvcc here: the CUDA-source op fused_adam is not built (DS_BUILD_FUSED_ADAM=0)");
        line = line.replace("DS_BUILD_FUSED_ADAM=1", "DS_BUILD_FUSED_ADAM=0");
    }
    let out = sh(&line, &venv, &[("MAX_JOBS", "2".into())]);
    assert!(
        out.status.success(),
        "{line}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let wheel = std::fs::read_dir(&wheels)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|w| w.to_string_lossy().contains("deepspeed-"))
        .unwrap();
    // What the wheel says about itself, read with the build venv's Python (zipfile).
    let info = python(
        &venv,
        &format!(
            "import zipfile; z = zipfile.ZipFile({w:?}); print(z.read('deepspeed/git_version_info_installed.py').decode()); \
             m = [n for n in z.namelist() if n.endswith('.dist-info/METADATA')][0]; \
             print('\\n'.join(l for l in z.read(m).decode().splitlines() if l.startswith('Requires-Dist:') and 'extra ==' not in l))",
            w = wheel.display().to_string()
        ),
    );
    assert!(info.contains("accelerator_name='cuda'"), "{info}");
    assert!(
        info.contains("'cpu_adam': 1") && info.contains("'utils': 1"),
        "{info}"
    );
    if nvcc {
        assert!(info.contains("'fused_adam': 1"), "{info}");
    }
    // Every requirement of the wheel (installed `--no-deps`) is in the training closure.
    let training = std::fs::read_to_string(p.dir.join("pylock.training.toml")).unwrap();
    for l in info
        .lines()
        .filter_map(|l| l.strip_prefix("Requires-Dist: "))
    {
        let name: String = l
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_' || *c == '.')
            .collect::<String>()
            .to_ascii_lowercase()
            .replace('_', "-");
        assert!(
            training.contains(&format!("name = \"{name}\"")),
            "the wheel requires {l}, which pylock.training.toml lacks"
        );
    }
    assert!(info.contains("Requires-Dist: nvidia-ml-py"), "{info}");
}
