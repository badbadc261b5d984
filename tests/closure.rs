//! The Python closure (issue 15): `gpustack lock` resolves every layer's Python packages
//! with uv into `pylock.<layer>.toml`, every file hashed; builds install from those files
//! and never resolve.
//!
//! * `network_*` tests resolve against live PyPI with a fixed `exclude-newer` (required
//!   with `CI=true`, skipped loudly otherwise), and a torch variant from a PEP 503 index
//!   served on 127.0.0.1 (`fixtures/pyindex/`: a stub wheel with PyPI's real metadata).
//! * `fixtures/closed/<stack>/` is such a lock, committed (`GPUSTACK_BLESS=1` rewrites it
//!   from the live test): the offline tests re-lock it byte for byte, render it, validate
//!   what they render, and tamper with every part of it.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

const STACK: &str = "h100-ib-train-serve";
const EXCLUDE_NEWER: &str = "2026-11-25T00:00:00Z";
const UV_VERSION: &str = "0.11.7";

/// The example stack (vLLM serving and DeepSpeed training on H100) with user packages.
fn closed_spec(extra: &str) -> String {
    let base = std::fs::read_to_string(root().join("fixtures/specs").join(format!("{STACK}.toml")))
        .unwrap();
    format!(
        "{base}\n[python]\nframework = [\"datasets\"]\ninference = [\"openai\"]\n\n[resolve]\nexclude-newer = \"{EXCLUDE_NEWER}\"\n{extra}"
    )
}

/// uv of the pinned version: GPUSTACK_UV, `.venv-validate/bin/uv` (tests/run.sh installs
/// it), or PATH. Missing: a failure with CI=true, a loud skip otherwise.
fn uv() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("GPUSTACK_UV").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let uv = validator("uv")?;
    let out = Command::new(&uv).arg("--version").output().ok()?;
    let v = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        v.contains(UV_VERSION),
        "{} is {v}; tests/run.sh installs uv=={UV_VERSION}",
        uv.display()
    );
    Some(uv)
}

/// uv, when PyPI is reachable too: what every `network_*` test needs.
fn live_uv() -> Option<PathBuf> {
    if network("pypi.org", 443) {
        uv()
    } else {
        None
    }
}

/// `gpustack ARGS` in `dir`, online unless `offline`, with `uv`.
fn gs(dir: &Path, args: &[&str], offline: bool, uv: Option<&Path>) -> (i32, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gpustack"));
    c.args(args).current_dir(dir).env_remove("GPUSTACK_OFFLINE");
    if offline {
        c.env("GPUSTACK_OFFLINE", "1");
    }
    match uv {
        Some(u) => c.env("GPUSTACK_UV", u),
        None => c.env("GPUSTACK_UV", "/nonexistent/uv"),
    };
    let out = c.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[derive(serde::Deserialize)]
struct PyLock {
    #[serde(rename = "lock-version")]
    lock_version: String,
    packages: Vec<Package>,
}

#[derive(serde::Deserialize)]
struct Package {
    name: String,
    version: String,
    marker: Option<String>,
    sdist: Option<Artifact>,
    #[serde(default)]
    wheels: Vec<Artifact>,
}

#[derive(serde::Deserialize)]
struct Artifact {
    url: String,
    hashes: BTreeMap<String, String>,
}

fn read_pylock(path: &Path) -> PyLock {
    toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn versions(p: &PyLock) -> BTreeMap<String, String> {
    p.packages
        .iter()
        .map(|x| (x.name.clone(), x.version.clone()))
        .collect()
}

/// What every closure must satisfy, whatever PyPI published: each file hashed, the
/// layers agree on every shared package and an upper layer only adds, the NVIDIA wheels are
/// the lock's cuDNN and NCCL, nothing from the mirror, the compiled package split out.
fn assert_closure(dir: &Path) {
    let lock = gpustack::Lock::parse(
        "gpustack.lock",
        &std::fs::read_to_string(dir.join("gpustack.lock")).unwrap(),
    )
    .unwrap();
    let py = lock.python.as_ref().expect("a closed lock");
    assert_eq!(py.resolver, format!("uv {UV_VERSION}"));
    assert_eq!(py.exclude_newer, EXCLUDE_NEWER);
    let layers: Vec<&str> = py.files.iter().map(|f| f.layer.as_str()).collect();
    assert_eq!(layers, ["framework", "inference", "training", "build"]);
    let cudnn = lock
        .component(gpustack::Component::Cudnn)
        .unwrap()
        .version
        .to_string();
    let nccl = lock
        .component(gpustack::Component::Nccl)
        .unwrap()
        .version
        .to_string();
    let mut all: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for f in &py.files {
        let text = std::fs::read_to_string(dir.join(&f.file)).unwrap();
        assert!(
            !text.contains("127.0.0.1"),
            "{}: a mirror URL was recorded",
            f.file
        );
        let p = read_pylock(&dir.join(&f.file));
        assert_eq!(p.lock_version, "1.0");
        assert_eq!(p.packages.len() as u32, f.packages, "{}", f.file);
        for pkg in &p.packages {
            let files: Vec<&Artifact> = pkg.sdist.iter().chain(&pkg.wheels).collect();
            assert!(!files.is_empty(), "{}: {} has no file", f.file, pkg.name);
            for a in files {
                let h = a
                    .hashes
                    .get("sha256")
                    .unwrap_or_else(|| panic!("{}: {} {} unhashed", f.file, pkg.name, a.url));
                assert_eq!(h.len(), 64);
                assert!(a.url.starts_with("https://"), "{}", a.url);
            }
        }
        let v = versions(&p);
        assert_eq!(v.get("nvidia-cudnn-cu12"), Some(&cudnn), "{}", f.file);
        assert_eq!(v.get("nvidia-nccl-cu12"), Some(&nccl), "{}", f.file);
        assert!(
            !v.contains_key("deepspeed"),
            "{}: deepspeed is built from its sdist",
            f.file
        );
        all.insert(f.layer.clone(), v);
    }
    // The framework closure is in every layer above it, at the same versions, and the layers
    // agree on every package they share.
    for (layer, v) in &all {
        for (name, version) in &all["framework"] {
            assert_eq!(v.get(name), Some(version), "{layer}: {name}");
        }
        for (other, w) in &all {
            for (name, version) in v {
                if let Some(x) = w.get(name) {
                    assert_eq!(x, version, "{layer} and {other} disagree on {name}");
                }
            }
        }
    }
    // The user's packages are in their layers.
    assert!(all["framework"].contains_key("datasets"));
    assert!(all["inference"].contains_key("openai") && !all["training"].contains_key("openai"));
    assert!(all["inference"].contains_key("vllm"));
    // vLLM 0.19.1 needs setuptools < 81 (its metadata): the first-index trap is gone.
    let setuptools: Vec<u32> = all["inference"]["setuptools"]
        .split('.')
        .map(|x| x.parse().unwrap())
        .collect();
    assert!(setuptools[0] < 81, "setuptools {setuptools:?}");
    // DeepSpeed's wheel is built for the CUDA accelerator and installed `--no-deps`: what
    // that build adds to its requirements (nvidia-ml-py) is in the training closure, and so
    // is setuptools, which torch's extension loader imports, on every Python (torch
    // declares it only for Python >= 3.12: the marker must not survive into this layer).
    assert!(all["training"].contains_key("nvidia-ml-py"));
    assert!(!all["framework"].contains_key("nvidia-ml-py"));
    let training = read_pylock(&dir.join("pylock.training.toml"));
    let st = training
        .packages
        .iter()
        .find(|p| p.name == "setuptools")
        .expect("setuptools in the training closure");
    assert_eq!(st.marker, None, "setuptools is installed on every Python");
    // DeepSpeed: its sdist, as PyPI lists it (the catalog's observation of that sdist).
    let ds: Vec<_> = py.builds.iter().filter(|b| b.name == "deepspeed").collect();
    assert!(!ds.is_empty());
    for b in ds {
        assert_eq!(
            b.sha256,
            "9e491abd0827ea5c389dd702e15e11e13d83d904bac4a20d6c2a4cb37207a9af"
        );
        assert!(
            b.url.starts_with("https://files.pythonhosted.org/")
                && b.url.ends_with("/deepspeed-0.19.8.tar.gz")
        );
    }
    assert!(lock.verify().is_empty());
}

/// No build step resolves: every Python install in the Dockerfile and the Packer scripts
/// installs a pylock, or a wheel built from a locked sdist with `--no-deps`, or builds a
/// downloaded sdist with `--no-index`; none names an index.
fn assert_no_build_step_resolves(out: &Path) {
    let mut files = vec![out.join("docker/Dockerfile")];
    files.extend(sorted_files(&out.join("packer/scripts"), "sh"));
    let mut installs = 0;
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        // Continuation lines joined: one command per line.
        let joined = text.replace("\\\n", " ");
        for line in joined.lines().filter(|l| !l.trim_start().starts_with('#')) {
            for word in [
                "--index",
                "--extra-index-url",
                "--find-links",
                "requirements-",
            ] {
                assert!(!line.contains(word), "{}: `{word}` in {line}", f.display());
            }
            for cmd in line.split("&&") {
                let cmd = cmd.trim();
                if let Some(at) = cmd.find("pip install") {
                    let rest = &cmd[at..];
                    installs += 1;
                    assert!(
                        rest.contains(" -r ") && rest.contains("pylock.")
                            || rest.contains("--no-deps") && rest.contains(".whl"),
                        "{}: resolves: {cmd}",
                        f.display()
                    );
                }
                if let Some(at) = cmd.find("pip wheel") {
                    let rest = &cmd[at..];
                    assert!(
                        rest.contains("--no-deps")
                            && rest.contains("--no-index")
                            && rest.contains(".tar.gz"),
                        "{}: {cmd}",
                        f.display()
                    );
                }
            }
        }
    }
    assert!(installs >= 8, "{installs} installs found");
}

fn files_of(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect()
}

#[test]
fn network_closure_of_a_vllm_and_deepspeed_stack_from_pypi() {
    let Some(uv) = live_uv() else { return };
    let dir = tempdir("closure-live");
    std::fs::write(dir.join("gpustack.toml"), closed_spec("")).unwrap();
    let (code, err) = gs(&dir, &["lock"], false, Some(&uv));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("resolved the Python closure: pylock.framework.toml, pylock.inference.toml, pylock.training.toml, pylock.build.toml"), "{err}");
    assert_closure(&dir);
    // torch: the PyPI-default variant comes from PyPI, with PyPI's hash.
    let fw = read_pylock(&dir.join("pylock.framework.toml"));
    let torch = fw.packages.iter().find(|p| p.name == "torch").unwrap();
    assert_eq!(torch.version, "2.10.0");
    assert!(torch
        .wheels
        .iter()
        .all(|w| w.url.starts_with("https://files.pythonhosted.org/")));

    // With unchanged inputs, a re-lock reuses every file: offline, byte for byte.
    let before = files_of(&dir);
    let (code, err) = gs(&dir, &["lock"], true, None);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("resolved the Python closure"), "{err}");
    assert_eq!(files_of(&dir), before);

    let (code, err) = gs(
        &dir,
        &["gen", "docker", "apptainer", "packer", "k8s", "slurm"],
        true,
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert_no_build_step_resolves(&dir.join("out"));

    if bless() {
        let fixture = root().join("fixtures/closed").join(STACK);
        let _ = std::fs::remove_dir_all(&fixture);
        std::fs::create_dir_all(&fixture).unwrap();
        for (name, bytes) in before {
            std::fs::write(fixture.join(name), bytes).unwrap();
        }
    }
}

#[test]
fn network_torch_variant_from_its_own_index_served_locally() {
    let Some(uv) = live_uv() else { return };
    let Some(python) = validator("python3") else {
        return;
    };
    let dir = tempdir("closure-variant");
    let index = dir.join("index");
    let made = Command::new(&python)
        .arg(root().join("fixtures/pyindex/make_index.py"))
        .arg(
            root().join("fixtures/pyindex/torch-2.10.0-cp312-cp312-manylinux_2_28_x86_64.METADATA"),
        )
        .arg(&index)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let stub_sha = String::from_utf8_lossy(&made.stdout).trim().to_string();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut server = Command::new(&python)
        .args([
            "-m",
            "http.server",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .current_dir(&index)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    for _ in 0..50 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let extra = format!("variant-index = true\nindexes = {{ \"https://download.pytorch.org/whl\" = \"http://127.0.0.1:{port}/whl\" }}\n");
    std::fs::write(dir.join("gpustack.toml"), closed_spec(&extra)).unwrap();
    let (code, err) = gs(&dir, &["lock"], false, Some(&uv));
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(code, 0, "{err}");
    assert_closure(&dir);
    // torch (and only the torch family) from the variant index, recorded under its real URL.
    for f in [
        "pylock.framework.toml",
        "pylock.inference.toml",
        "pylock.training.toml",
        "pylock.build.toml",
    ] {
        let p = read_pylock(&dir.join(f));
        let torch = p.packages.iter().find(|p| p.name == "torch").unwrap();
        assert_eq!(torch.version, "2.10.0+cu128", "{f}");
        assert_eq!(torch.wheels.len(), 1);
        assert_eq!(
            torch.wheels[0].url,
            "https://download.pytorch.org/whl/cu128/torch-2.10.0%2Bcu128-cp312-cp312-manylinux_2_28_x86_64.whl"
        );
        assert_eq!(torch.wheels[0].hashes["sha256"], stub_sha);
        for other in p.packages.iter().filter(|p| p.name != "torch") {
            for a in other.sdist.iter().chain(&other.wheels) {
                assert!(
                    a.url.starts_with("https://files.pythonhosted.org/"),
                    "{f}: {}",
                    a.url
                );
            }
        }
    }
}

/// The install command the targets render (`uv pip install -r pylock.…`) checks every
/// hash: a small CPU-only pylock installs into a venv, and the same file with one hash
/// changed is refused.
#[test]
fn network_pylock_installs_hash_checked() {
    let Some(uv) = live_uv() else { return };
    let dir = tempdir("closure-install");
    std::fs::write(dir.join("requirements.in"), "six==1.17.0\n").unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(&uv)
            .args(args)
            .current_dir(&dir)
            .env("UV_PYTHON_DOWNLOADS", "never")
            .output()
            .unwrap();
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    let (ok, log) = run(&[
        "pip",
        "compile",
        "requirements.in",
        "--quiet",
        "--no-header",
        "--exclude-newer",
        EXCLUDE_NEWER,
        "-o",
        "pylock.small.toml",
    ]);
    assert!(ok, "{log}");
    let text = std::fs::read_to_string(dir.join("pylock.small.toml")).unwrap();
    assert!(
        text.contains("4721f391ed90541fddacab5acf947aa0d3dc7d27b2e1e8eda2be8970586c3274"),
        "six 1.17.0's published wheel hash:\n{text}"
    );
    let (ok, log) = run(&["venv", "--quiet", "good"]);
    assert!(ok, "{log}");
    let (ok, log) = run(&[
        "pip",
        "install",
        "--no-cache",
        "--python",
        "good/bin/python",
        "-r",
        "pylock.small.toml",
    ]);
    assert!(ok, "{log}");
    assert!(log.contains("six==1.17.0"), "{log}");
    std::fs::write(
        dir.join("pylock.bad.toml"),
        text.replace("4721f391", "4721f392"),
    )
    .unwrap();
    let (ok, log) = run(&["venv", "--quiet", "bad"]);
    assert!(ok, "{log}");
    let (ok, log) = run(&[
        "pip",
        "install",
        "--no-cache",
        "--python",
        "bad/bin/python",
        "-r",
        "pylock.bad.toml",
    ]);
    assert!(!ok && log.contains("Hash mismatch"), "{log}");
}

/// The committed closed lock, copied into a temporary project.
fn closed_project(tag: &str) -> Option<PathBuf> {
    let fixture = root().join("fixtures/closed").join(STACK);
    if !fixture.join("gpustack.lock").is_file() {
        panic!(
            "{} is missing: run `GPUSTACK_BLESS=1 cargo test --test closure` with network access",
            fixture.display()
        );
    }
    let dir = tempdir(tag);
    copy_dir(&fixture, &dir);
    Some(dir)
}

#[test]
fn a_closed_lock_relocks_offline_byte_for_byte() {
    let Some(dir) = closed_project("closure-relock") else {
        return;
    };
    let before = files_of(&dir);
    // No uv at all: unchanged inputs reuse every file.
    let (code, err) = gs(&dir, &["lock"], true, None);
    assert_eq!(code, 0, "{err}");
    assert_eq!(files_of(&dir), before);
    let (code, err) = gs(&dir, &["lock", "--check"], true, None);
    assert_eq!(code, 0, "{err}");
    // A pylock edited by hand is stale for `lock --check`.
    let f = dir.join("pylock.training.toml");
    let text = std::fs::read_to_string(&f).unwrap();
    std::fs::write(&f, text.replacen("version = \"", "version = \"9", 1)).unwrap();
    let (code, err) = gs(&dir, &["lock", "--check"], true, None);
    assert_eq!(code, 1, "{err}");
    // Offline, the edited file cannot be put back (its bytes are not in the lock): said so,
    // nothing written.
    let (code, err) = gs(&dir, &["lock"], true, None);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("`pylock.training.toml` must be resolved again: the file beside the lock does not match"), "{err}");
    std::fs::write(&f, &text).unwrap();
    assert_eq!(files_of(&dir), before);

    // New inputs offline: the closure must be resolved, and cannot be.
    let spec = std::fs::read_to_string(dir.join("gpustack.toml")).unwrap();
    std::fs::write(
        dir.join("gpustack.toml"),
        spec.replace(
            "inference = [\"openai\"]",
            "inference = [\"openai\", \"httpx\"]",
        ),
    )
    .unwrap();
    let (code, err) = gs(&dir, &["lock"], true, None);
    assert_eq!(code, 2, "{err}");
    // (the layers are resolved together, so a new package anywhere re-resolves each.)
    assert!(
        err.contains("offline: `pylock.framework.toml` must be resolved (its inputs changed"),
        "{err}"
    );
    assert!(err.contains("hint:"), "{err}");
    // Nothing was written.
    assert_eq!(
        std::fs::read(dir.join("gpustack.lock")).unwrap(),
        before["gpustack.lock"]
    );
}

#[test]
fn a_closed_lock_renders_installs_from_its_pylocks() {
    let Some(dir) = closed_project("closure-gen") else {
        return;
    };
    let (code, err) = gs(
        &dir,
        &["gen", "docker", "apptainer", "packer", "k8s", "slurm"],
        true,
        None,
    );
    assert_eq!(code, 0, "{err}");
    let out = dir.join("out");
    assert_no_build_step_resolves(&out);
    // The Docker context carries the same bytes as the lock's files.
    for f in [
        "pylock.framework.toml",
        "pylock.inference.toml",
        "pylock.training.toml",
        "pylock.build.toml",
    ] {
        assert_eq!(
            std::fs::read(out.join("docker").join(f)).unwrap(),
            std::fs::read(dir.join(f)).unwrap(),
            "{f}"
        );
    }
    assert!(!out.join("docker/requirements-framework.lock").exists());
    // `docker build` sees every file the Dockerfile copies (the pylocks too).
    assert_copies_are_in_the_context(&out.join("docker"));
    let dockerfile = std::fs::read_to_string(out.join("docker/Dockerfile")).unwrap();
    assert!(dockerfile.contains("ADD --checksum=sha256:9e491abd0827ea5c389dd702e15e11e13d83d904bac4a20d6c2a4cb37207a9af"), "{dockerfile}");
    assert!(dockerfile.contains("uv pip install --no-deps /wheels/deepspeed-0.19.8-*.whl"));
    assert!(
        !dockerfile.contains("no sha256 in the lock"),
        "{dockerfile}"
    );
    // The Packer scripts write the same files onto the VM (heredocs), byte for byte.
    let training = std::fs::read_to_string(out.join("packer/scripts/training.sh")).unwrap();
    let pylock = std::fs::read_to_string(dir.join("pylock.training.toml")).unwrap();
    assert!(training.contains(&format!(
        "<<'GPUSTACK_PYLOCK_EOF'\n{pylock}GPUSTACK_PYLOCK_EOF\n"
    )));
    // Their consumers accept them.
    if let Some(h) = validator("hadolint") {
        let (code, log) = run_tool(&h, &["-t", "warning", "Dockerfile"], &out.join("docker"));
        assert_eq!(code, 0, "{log}");
    }
    if let Some(sc) = validator("shellcheck") {
        for s in sorted_files(&out.join("packer/scripts"), "sh") {
            let (code, log) = run_tool(&sc, &[s.to_str().unwrap()], &out);
            assert_eq!(code, 0, "{}: {log}", s.display());
        }
    }
    // A bash run of the Packer heredoc writes the pylock byte for byte.
    let start = training
        .find("cat > /opt/gpustack/pylock.training.toml")
        .unwrap();
    let end = training[start..].find("GPUSTACK_PYLOCK_EOF\n/usr").unwrap()
        + start
        + "GPUSTACK_PYLOCK_EOF\n".len();
    let script =
        training[start..end].replace("/opt/gpustack/", &format!("{}/", dir.join("vm").display()));
    std::fs::create_dir_all(dir.join("vm")).unwrap();
    let ok = Command::new("bash").args(["-c", &script]).status().unwrap();
    assert!(ok.success());
    assert_eq!(
        std::fs::read_to_string(dir.join("vm/pylock.training.toml")).unwrap(),
        pylock
    );
}

#[test]
fn every_part_of_the_closure_is_under_the_lock() {
    let Some(dir) = closed_project("closure-tamper") else {
        return;
    };
    let lock = std::fs::read_to_string(dir.join("gpustack.lock")).unwrap();
    // A pylock changed after locking: `gen` names the file and refuses.
    let f = dir.join("pylock.inference.toml");
    let original = std::fs::read_to_string(&f).unwrap();
    std::fs::write(&f, original.replacen("sha256 = \"", "sha256 = \"0", 1)).unwrap();
    let (code, err) = gs(&dir, &["gen", "docker"], true, None);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("pylock.inference.toml` does not match the lock"),
        "{err}"
    );
    std::fs::write(&f, &original).unwrap();
    std::fs::remove_file(dir.join("pylock.build.toml")).unwrap();
    let (code, err) = gs(&dir, &["gen", "docker"], true, None);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("pylock.build.toml"), "{err}");
    copy_dir(&root().join("fixtures/closed").join(STACK), &dir);
    // `check` reads the same files: clean as written, a tampered-lock finding at the
    // digest's line when one is edited or missing.
    let (code, err) = gs(
        &dir,
        &["gen", "docker", "apptainer", "packer", "k8s", "slurm"],
        true,
        None,
    );
    assert_eq!(code, 0, "{err}");
    let check = |dir: &Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_gpustack"))
            .args([
                "check",
                "--spec",
                "gpustack.toml",
                "--lock",
                "gpustack.lock",
                "--out",
                "out",
                "--format",
                "json",
            ])
            .current_dir(dir)
            .env("GPUSTACK_OFFLINE", "1")
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, json) = check(&dir);
    assert_eq!(code, 0, "{json}");
    assert!(
        !json.contains("\"code\": \"tampered-lock\"")
            && !json.contains("\"code\": \"drift\"")
            && !json.contains("\"code\": \"stale"),
        "{json}"
    );
    std::fs::write(&f, original.replacen("sha256 = \"", "sha256 = \"0", 1)).unwrap();
    let (code, json) = check(&dir);
    assert_eq!(code, 1, "{json}");
    assert!(
        json.contains("tampered-lock")
            && json.contains("pylock.inference.toml does not match the digest the lock records"),
        "{json}"
    );
    std::fs::write(&f, &original).unwrap();
    // Each recorded value of [python], edited in the lock (the file left alone, or the
    // digest edited to match an edited file), fails the layer hashes.
    let edits: Vec<(String, String)> = {
        let mut v = Vec::new();
        for key in [
            "digest = \"sha256:",
            "url = \"https://",
            "sha256 = \"",
            "exclude-newer = \"2026",
            "resolver = \"uv ",
        ] {
            let at = lock
                .find(&format!("\n{key}"))
                .unwrap_or_else(|| panic!("{key}"));
            let line_end = lock[at + 1..].find('\n').unwrap() + at + 1;
            let line = lock[at + 1..line_end].to_string();
            // One character of the value changed, keeping its shape.
            let i = key.len();
            let c = line.as_bytes()[i];
            let edited = format!(
                "{}{}{}",
                &line[..i],
                if c == b'0' { '1' } else { '0' },
                &line[i + 1..]
            );
            v.push((line, edited));
        }
        v
    };
    for (line, edited) in edits {
        std::fs::write(dir.join("gpustack.lock"), lock.replacen(&line, &edited, 1)).unwrap();
        let (code, err) = gs(
            &dir,
            &["gen", "docker", "apptainer", "packer", "k8s", "slurm"],
            true,
            None,
        );
        assert_eq!(code, 2, "{line} → {edited}: {err}");
        assert!(
            err.contains("was edited by hand")
                || err.contains("does not match the lock")
                || err.contains("invalid"),
            "{line}: {err}"
        );
    }
}

#[test]
fn python_requirements_are_checked_at_their_line() {
    let dir = tempdir("closure-bad");
    for (entry, message) in [
        (
            "\"torch>=2.5\"",
            "`torch>=2.5` is a component the solver picks",
        ),
        (
            "\"--index-url https://x.example/simple\"",
            "is a pip option",
        ),
        ("\"pkg @ https://x.example/pkg.whl\"", "names a URL"),
        ("\"\"", "an empty requirement"),
        ("\"evil$(id)\"", "not a PEP 508 requirement"),
    ] {
        let spec = format!("[stack]\nname = \"p\"\n[hardware]\ngpus = [\"h100\"]\n[components]\ntorch = \"*\"\n[python]\nframework = [{entry}]\n");
        std::fs::write(dir.join("gpustack.toml"), spec).unwrap();
        let out = run_in(&dir, &["lock", "--out", "-"]);
        assert_eq!(out.code, 2, "{entry}: {}", out.stderr);
        assert!(out.stderr.contains(message), "{entry}: {}", out.stderr);
        assert!(
            out.stderr.contains("gpustack.toml:8:"),
            "{entry}: {}",
            out.stderr
        );
        assert!(out.stderr.contains("hint:"), "{entry}: {}", out.stderr);
    }
    std::fs::write(dir.join("gpustack.toml"), "[stack]\nname = \"p\"\n[hardware]\ngpus = [\"h100\"]\n[components]\ntorch = \"*\"\n[python]\ndevel = [\"x\"]\n").unwrap();
    let out = run_in(&dir, &["lock", "--out", "-"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    // Accepted lists are recorded in the request; offline without a previous closure the
    // lock stays open and says so.
    std::fs::write(dir.join("gpustack.toml"), "[stack]\nname = \"p\"\n[hardware]\ngpus = [\"h100\"]\n[components]\ntorch = \"*\"\n[python]\nframework = [\"transformers>=4.50\", \"datasets\"]\n").unwrap();
    let out = run_in(&dir, &["lock", "--out", "-"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("[request.python]\nframework = [\"transformers>=4.50\", \"datasets\"]"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("\n[python]\n"));
    assert!(
        out.stderr
            .contains("warning: the Python closure is not locked: offline"),
        "{}",
        out.stderr
    );
}

/// `gpustack diff` names each Python package that moved, once, with the layers it moved in.
#[test]
fn diff_names_the_python_packages_that_moved() {
    let fixture = root().join("fixtures/closed").join(STACK);
    let mut old = gpustack::Lock::parse(
        "gpustack.lock",
        &std::fs::read_to_string(fixture.join("gpustack.lock")).unwrap(),
    )
    .unwrap();
    assert!(gpustack::resolve::python::load(old.python.as_mut().unwrap(), &fixture).is_empty());
    let mut new = old.clone();
    let py = new.python.as_mut().unwrap();
    let inference = py
        .files
        .iter_mut()
        .find(|f| f.layer == "inference")
        .unwrap();
    let text = inference.contents.clone().unwrap();
    let at = text.find("name = \"openai\"\nversion = \"").unwrap()
        + "name = \"openai\"\nversion = \"".len();
    let end = at + text[at..].find('"').unwrap();
    let was = text[at..end].to_string();
    let edited = format!("{}9.9.9{}", &text[..at], &text[end..]);
    inference.digest = gpustack::resolve::python::digest(&edited);
    inference.contents = Some(edited);
    new.rehash();
    let d = gpustack::diff::diff(&old, &new);
    let c: Vec<_> = d
        .changes
        .iter()
        .filter(|c| c.class == gpustack::diff::Class::PythonPackage)
        .collect();
    assert_eq!(c.len(), 1, "{:?}", d.changes);
    assert_eq!(c[0].name, "openai");
    assert_eq!(c[0].old.as_deref(), Some(was.as_str()));
    assert_eq!(c[0].new.as_deref(), Some("9.9.9"));
    assert_eq!(c[0].note.as_deref(), Some("in pylock.inference.toml"));
    assert!(d.layers.iter().any(|l| l.layer == "inference"));
    assert!(!d.layers.iter().any(|l| l.layer == "training"));
    assert!(d.to_markdown().contains("python-package"));
}

/// Where torch comes from is decided per CPU: PyPI's aarch64 wheels of torch 2.10.0 are CPU
/// builds (the catalog's `pypi_cuda_cpus` leaves aarch64 out), so a GH200 platform takes
/// torch from the variant's index while x86_64 takes PyPI's same build; from 2.11.0 PyPI
/// serves the CUDA build on both CPUs. Offline: the closure's inputs only.
#[test]
fn aarch64_takes_torch_from_the_variant_index_where_pypi_has_a_cpu_build() {
    let cat = gpustack::Catalog::stock().unwrap();
    for (torch, aarch64_index) in [
        ("2.10.0", Some("https://download.pytorch.org/whl/cu128")),
        ("2.12.0", None),
    ] {
        let spec = format!(
            "[stack]\nname = \"arm\"\nos = \"ubuntu24.04\"\n[hardware]\ngpus = [\"h100\", \"gh200\"]\n[components]\npython = \"3.12\"\ntorch = \"{torch}\"\n"
        );
        let lock = gpustack::lock_spec(&cat, "s", &spec).unwrap();
        let index = |cpu: &str| {
            gpustack::resolve::python::inputs_for(&lock, cpu)
                .iter()
                .find(|i| i.layer == "framework")
                .and_then(|i| i.sources.get("torch").cloned())
        };
        assert_eq!(index("x86_64"), None, "torch {torch}: PyPI on x86_64");
        assert_eq!(index("aarch64").as_deref(), aarch64_index, "torch {torch}");
    }
}
