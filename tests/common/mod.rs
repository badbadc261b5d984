//! What the integration tests share: running the binary, temporary directories and file
//! trees, the stock catalog and the committed locks, validators and the network check,
//! snapshots (`snapshot.rs`), the book's code blocks (`markdown.rs`) and generated
//! Dockerfiles read back (`dockerfile.rs`). A helper two test files need lives here.
#![allow(dead_code)]

mod dockerfile;
mod markdown;
mod snapshot;
#[allow(unused_imports)] // each test binary uses a part
pub(crate) use dockerfile::*;
#[allow(unused_imports)]
pub(crate) use markdown::*;
#[allow(unused_imports)]
pub(crate) use snapshot::*;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The stock catalog, loaded once per test binary.
pub(crate) fn catalog() -> &'static gpustack::Catalog {
    static C: std::sync::OnceLock<gpustack::Catalog> = std::sync::OnceLock::new();
    C.get_or_init(|| gpustack::Catalog::stock().expect("stock catalog"))
}

/// The committed lock of the example spec `name` (`lockfiles/<name>.lock`).
pub(crate) fn lock_of(name: &str) -> gpustack::Lock {
    read_lock(&root().join("lockfiles").join(format!("{name}.lock")))
}

/// The lock at `path`.
pub(crate) fn read_lock(path: &Path) -> gpustack::Lock {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    gpustack::Lock::parse(&path.display().to_string(), &text).unwrap()
}

pub(crate) struct Output {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

pub(crate) fn run_in(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_gpustack"))
        .args(args)
        .current_dir(dir)
        .env_remove("GPUSTACK_DEBUG")
        // Hermetic: `lock` resolves from the catalog, never from the network.
        .env("GPUSTACK_OFFLINE", "1")
        .output()
        .expect("run gpustack");
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Every file under `dir` with its contents, for "nothing was written" checks; the
/// manifests `gen` keeps in target directories (`.gpustack-manifest`, its bookkeeping,
/// tested in `tests/safety.rs`) are left out, so a generated tree compares with the
/// rendered files.
pub(crate) fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let e = e.unwrap();
        if e.file_type().is_file() && e.file_name() != ".gpustack-manifest" {
            out.insert(
                e.path().strip_prefix(dir).unwrap().to_path_buf(),
                std::fs::read(e.path()).unwrap(),
            );
        }
    }
    out
}

/// A fresh directory, unique per call (tests run in parallel threads).
pub(crate) fn tempdir(tag: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("gpustack-test-{}-{n}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub(crate) fn copy_dir(from: &Path, to: &Path) {
    for e in walkdir::WalkDir::new(from).sort_by_file_name() {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(from).unwrap();
        let dst = to.join(rel);
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&dst).unwrap();
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}

pub(crate) fn sorted_files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

/// A validator (hadolint, shellcheck, packer, yamllint, kubernetes-validate, sbatch, …):
/// found on `PATH` or in `.venv-validate/bin` (where `tests/run.sh` installs the PyPI
/// ones). Missing: with `CI=true` the test fails; otherwise it prints a loud skip notice
/// and the caller skips that check.
#[allow(clippy::print_stderr)] // the loud skip notice is the point
pub(crate) fn validator(name: &str) -> Option<PathBuf> {
    let venv = root().join(".venv-validate/bin").join(name);
    if venv.is_file() {
        return Some(venv);
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    let msg = format!(
        "\n!!! VALIDATOR MISSING: `{name}` — its checks are SKIPPED. Run `bash tests/run.sh` (as root it installs the validators).\n"
    );
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{msg}CI=true: a missing validator is a failure");
    }
    eprintln!("{msg}");
    None
}

/// Runs a validator; returns (exit code, stdout+stderr).
pub(crate) fn run_tool(tool: &Path, args: &[&str], dir: &Path) -> (i32, String) {
    let out = Command::new(tool)
        .args(args)
        .current_dir(dir)
        .env("CHECKPOINT_DISABLE", "1")
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", tool.display()));
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// The example specs' names (`fixtures/specs/<name>.toml`, locked in `lockfiles/<name>.lock`).
pub(crate) fn example_names() -> Vec<String> {
    sorted_files(&root().join("fixtures/specs"), "toml")
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect()
}

/// Runs `gpustack gen <target>` on `lockfiles/<name>.lock` into a fresh temporary
/// directory; returns that directory's `<target>/` (panics when generation fails).
pub(crate) fn generate(name: &str, target: &str) -> PathBuf {
    let dir = tempdir(&format!("gen-{name}-{target}"));
    let lock = root().join("lockfiles").join(format!("{name}.lock"));
    let out = run_in(
        &dir,
        &[
            "gen",
            target,
            "--lock",
            lock.to_str().unwrap(),
            "--out",
            "out",
        ],
    );
    assert_eq!(out.code, 0, "gen {target} for {name}: {}", out.stderr);
    dir.join("out").join(target)
}

/// Runs `gpustack gen` with every target named (`gen all` renders only the configured
/// ones) on `lockfiles/<name>.lock` into a fresh temporary directory; returns its `out/`.
pub(crate) fn generate_every(name: &str) -> PathBuf {
    let dir = tempdir(&format!("gen-{name}-every"));
    let lock = root().join("lockfiles").join(format!("{name}.lock"));
    let mut args = vec!["gen"];
    args.extend(gpustack::plan::Target::ALL.map(gpustack::plan::Target::name));
    args.extend(["--lock", lock.to_str().unwrap(), "--out", "out"]);
    let out = run_in(&dir, &args);
    assert_eq!(out.code, 0, "gen (every target) for {name}: {}", out.stderr);
    dir.join("out")
}

/// Whether `host:port` answers a TCP connection within 5 s, for tests that need the
/// network (named `network_*`). Unreachable: with `CI=true` the test fails (CI must reach
/// PyPI); otherwise it prints a loud skip notice and the caller returns.
#[allow(clippy::print_stderr)] // the loud skip notice is the point
pub(crate) fn network(host: &str, port: u16) -> bool {
    use std::net::ToSocketAddrs;
    let reachable = (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .is_some_and(|addr| {
            std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(5)).is_ok()
        });
    if reachable {
        return true;
    }
    let msg =
        format!("\n!!! NETWORK UNREACHABLE: `{host}:{port}` — this network test is SKIPPED.\n");
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{msg}CI=true: a skipped network test is a failure");
    }
    eprintln!("{msg}");
    false
}

/// The forms of `[train].command` torchrun's contract distinguishes: a script after the
/// interpreter (with and without `-u`), a module, a bare script, an executable
/// (`tests/workload.rs`, `tests/slurm.rs`).
pub(crate) const COMMAND_FORMS: &[(&str, &str)] = &[
    (
        "script",
        r#"["python", "train.py", "--lr", "3e-4", "a b", "--", "-x"]"#,
    ),
    ("unbuffered", r#"["python3", "-u", "train.py", "--seed=1"]"#),
    (
        "module",
        r#"["python", "-m", "pkg.train", "--epochs", "1"]"#,
    ),
    ("bare", r#"["train.py", "--config", "c.yaml"]"#),
    ("executable", r#"["./run.sh", "--steps", "2"]"#),
];

/// `fixtures/specs/h100-ib-train-serve.toml` on a 2 x 4 cluster (Slurm partition `normal`)
/// with `[train].command = command` and `[slurm].container = runtime`.
pub(crate) fn small_cluster_spec(command: &str, runtime: &str) -> String {
    let base =
        std::fs::read_to_string(root().join("fixtures/specs/h100-ib-train-serve.toml")).unwrap();
    let spec = base
        .replace(
            "command = [\"python\", \"train.py\", \"--deepspeed\", \"ds_config.json\"]",
            &format!("command = {command}"),
        )
        .replace(
            "nodes = 8\ngpus_per_node = 8",
            "nodes = 2\ngpus_per_node = 4",
        )
        .replace("tensor_parallel = 8", "tensor_parallel = 4")
        .replace("partition = \"gpu\"", "partition = \"normal\"")
        .replace(
            "container = \"pyxis\"",
            &format!("container = \"{runtime}\""),
        );
    assert!(spec.contains(command) && spec.contains("nodes = 2"));
    spec
}

/// The training code of a test project: `train.py` and `pkg/train.py` (the recording
/// program, `tests/standins/train.py`) and `run.sh`, an executable that runs it.
pub(crate) fn write_training_code(dir: &Path) {
    let program = root().join("tests/standins/train.py");
    std::fs::copy(&program, dir.join("train.py")).unwrap();
    std::fs::create_dir_all(dir.join("pkg")).unwrap();
    std::fs::write(dir.join("pkg/__init__.py"), "").unwrap();
    std::fs::copy(&program, dir.join("pkg/train.py")).unwrap();
    std::fs::write(
        dir.join("run.sh"),
        "#!/bin/sh\nexec python3 \"$(dirname \"$0\")/train.py\" \"$@\"\n",
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for f in ["train.py", "run.sh"] {
            std::fs::set_permissions(dir.join(f), std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
}

/// Whether this host can make the stand-in machine of `tests/provision/machine.sh` (user and
/// mount namespaces, `unshare -rm`); a loud skip notice naming `harness` otherwise, and a
/// failure with `CI=true`.
#[allow(clippy::print_stderr)] // the loud skip notice is the point
pub(crate) fn namespaces(harness: &str) -> bool {
    let ok = Command::new("unshare")
        .args(["-rm", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        let msg = format!("\n!!! `unshare -rm` is unavailable: the {harness} is SKIPPED (it needs user and mount namespaces).\n");
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{msg}CI=true: a missing tool is a failure");
        }
        eprintln!("{msg}");
    }
    ok
}
