//! Packer provisioning, executed. For every example lock, the generated provisioning
//! scripts run, in the order `build.pkr.hcl` runs them, on a stand-in machine
//! (`tests/provision/machine.sh`: a private mount namespace with copy-on-write /etc, /opt,
//! /usr and /var) whose package managers and system tools are `tests/provision/fake`:
//! apt-get, dnf, dpkg, rpm, systemctl, modinfo, curl, … implementing their documented
//! command lines far enough to run, and modelling what each package manager can see (a
//! package from a repository that is not yet enabled fails, as it does on a real host).
//! Every package request is recorded; the tests then hold the record to the lock and the
//! catalog:
//!
//! * the driver is pinned to the lock's exact version, in the lock's kernel-module flavour,
//!   and on EL through its branch's module stream enabled (never `dnf module install`);
//! * the NCCL packages are a build NVIDIA publishes: the lock's `nccl-build` fact, one of
//!   the catalog's `cuda_builds` for that release, of the locked CUDA major;
//! * DCGM's diagnostics package is `datacenter-gpu-manager-4-cuda<N>` for the lock's CUDA
//!   major, at DCGM's version;
//! * the set of pinned packages is exactly the lock's, and every one is held;
//! * the NVSwitch generation's host requirements (NVLSM, libibumad3, infiniband-diags on
//!   HGX B200) are requested by name, their kernel modules (`ib_umad`) are in
//!   `/etc/modules-load.d`, and Fabric Manager's service is enabled;
//! * on Rocky, PowerTools/CRB and EPEL are enabled before anything from them installs;
//! * the exporter image the VM pulls is the one the GPU Operator values name.
//!
//! Needs `unshare` with user and mount namespaces (and overlayfs); without them the test is
//! skipped loudly (a failure with `CI=true`).

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use gpustack::lock::Lock;
use gpustack::{Catalog, Component, Version};

/// The tools the stand-in implements (each a link to the machine's copy of
/// `tests/provision/fake`).
const TOOLS: &[&str] = &[
    "apt-get",
    "apt-mark",
    "dpkg",
    "dnf",
    "rpm",
    "uname",
    "modinfo",
    "modprobe",
    "nvidia-smi",
    "systemctl",
    "curl",
    "gpg",
    "sha256sum",
    "tar",
    "make",
    "cmake",
    "ldconfig",
    "swapoff",
    "swapon",
    "sysctl",
    "numactl",
    "nvidia-ctk",
    "dcgmi",
    "docker",
    "python",
    "git",
    "nvcc",
    "gcc",
    "passwd",
];

fn isolation() -> bool {
    namespaces("provisioning harness")
}

/// One package request: manager, name, version (`None` when unpinned).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Request {
    manager: String,
    name: String,
    version: Option<String>,
}

/// What the stand-in machine recorded.
struct Record {
    ok: bool,
    output: String,
    requests: Vec<Request>,
    holds: BTreeSet<String>,
    modules: Vec<String>,
    repos: BTreeSet<String>,
    installed_names: BTreeSet<String>,
    docker: String,
    log: String,
    /// The stand-in's state directory (pip installs, downloads, checksums, python runs).
    state: PathBuf,
    /// `systemctl` calls that change a unit (`enable x.service`).
    services: BTreeSet<String>,
}

impl Record {
    /// The kernel modules the machine's `/etc/modules-load.d/*.conf` load at boot
    /// (modules-load.d(5): one name a line, `#` and `;` comments), from the overlay the
    /// scripts wrote.
    fn boot_modules(&self) -> Vec<String> {
        let dir = self
            .state
            .parent()
            .unwrap()
            .join("upper/etc/modules-load.d");
        let mut out = Vec::new();
        if !dir.is_dir() {
            return out;
        }
        for f in sorted_files(&dir, "conf") {
            for l in std::fs::read_to_string(f).unwrap().lines() {
                let l = l.trim();
                if !l.is_empty() && !l.starts_with('#') && !l.starts_with(';') {
                    out.push(l.to_string());
                }
            }
        }
        out
    }
}

fn lines(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Paths the provisioners run, in `build.pkr.hcl` order: `"${path.root}/scripts/x.sh"`.
fn provisioner_scripts(build: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in build.split("\"${path.root}/scripts/").skip(1) {
        let s = r.split('"').next().unwrap().to_string();
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// The default Packer gives `driver_kernel_modules` (what it passes the scripts).
fn kernel_modules_default(vars: &str) -> Option<String> {
    let block = vars.split("variable \"driver_kernel_modules\"").nth(1)?;
    let block = block.split("\nvariable ").next()?;
    let d = block.split("default").nth(1)?;
    Some(d.split('"').nth(1)?.to_string())
}

/// Runs the scripts of a generated `packer/` directory on a fresh stand-in machine, with the
/// checkout's harness (`tests/provision/`).
fn provision_dir(packer: &Path, os: &str, tag: &str) -> Record {
    provision_with(&root().join("tests/provision"), packer, os, tag)
}

/// Runs the scripts of `packer` on a fresh stand-in machine, with the harness (`machine.sh`
/// and `fake`) in `harness`. The stand-in is copied into the machine directory's `bin/`, and
/// each tool is a relative link to that copy: `machine.sh` mounts an empty tmpfs over /tmp,
/// so a link into a checkout under /tmp would dangle inside the machine, and the real
/// `apt-get` would run in its place.
fn provision_with(harness: &Path, packer: &Path, os: &str, tag: &str) -> Record {
    let m = tempdir(&format!("provision-{tag}"));
    copy_dir(packer, &m.join("packer"));
    let bin = m.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(m.join("state")).unwrap();
    // std::fs::copy keeps the permission bits: the copy stays executable.
    std::fs::copy(harness.join("fake"), bin.join("fake")).unwrap();
    for t in TOOLS {
        std::os::unix::fs::symlink("fake", bin.join(t)).unwrap();
    }
    let build = std::fs::read_to_string(packer.join("build.pkr.hcl")).unwrap();
    let vars = std::fs::read_to_string(packer.join("variables.pkr.hcl")).unwrap();
    let scripts = provisioner_scripts(&build);
    let mut cmd = Command::new("unshare");
    cmd.arg("-rm")
        .arg("bash")
        .arg(harness.join("machine.sh"))
        .arg(&m)
        .arg(os)
        .args(&scripts);
    if let Some(k) = kernel_modules_default(&vars) {
        cmd.env("GPUSTACK_DRIVER_KERNEL_MODULES", k);
    }
    let out = cmd.output().unwrap();
    let state = m.join("state");
    let requests = lines(&state.join("requests"))
        .iter()
        .map(|l| {
            let mut f = l.splitn(3, ' ');
            let manager = f.next().unwrap().to_string();
            let name = f.next().unwrap().to_string();
            let v = f.next().unwrap_or("-");
            Request {
                manager,
                name,
                version: (v != "-").then(|| v.to_string()),
            }
        })
        .collect();
    Record {
        ok: out.status.success(),
        output: format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        requests,
        holds: lines(&state.join("holds")).into_iter().collect(),
        modules: lines(&state.join("modules")),
        repos: lines(&state.join("repos")).into_iter().collect(),
        installed_names: lines(&state.join("installed-names")).into_iter().collect(),
        docker: std::fs::read_to_string(state.join("docker")).unwrap_or_default(),
        log: std::fs::read_to_string(state.join("log")).unwrap_or_default(),
        services: lines(&state.join("services")).into_iter().collect(),
        state,
    }
}

fn os_of(lock: &Lock) -> String {
    lock.package("cuda-image")
        .and_then(|p| p.get("os"))
        .unwrap()
        .to_string()
}

/// `name=ver` apt pins as dnf requests (epoch dropped).
fn as_request(pin: &str, apt: bool) -> Request {
    if apt {
        let (n, v) = pin.split_once('=').unwrap();
        Request {
            manager: "apt".into(),
            name: n.into(),
            version: Some(v.into()),
        }
    } else {
        let (n, v) = pin.split_once('=').map_or_else(
            || {
                // Already dnf form: split like the stand-in does.
                let parts: Vec<&str> = pin.split('-').collect();
                let i = parts
                    .iter()
                    .enumerate()
                    .skip(1)
                    .find(|(_, f)| f.starts_with(|c: char| c.is_ascii_digit()) && f.contains('.'))
                    .map(|(i, _)| i)
                    .unwrap();
                (parts[..i].join("-"), parts[i..].join("-"))
            },
            |(n, v)| {
                (
                    n.to_string(),
                    v.split_once(':').map_or(v, |(_, r)| r).to_string(),
                )
            },
        );
        Request {
            manager: "dnf".into(),
            name: n,
            version: Some(v),
        }
    }
}

/// The pins the lock says the image installs, independently of the Packer plan: the driver
/// (by the lock's flavour), the CUDA toolkit meta-package, NCCL at the lock's build, and
/// the host packages' lists. cuDNN is checked by its version (its package naming has
/// several schemes), so it is returned apart.
fn expected_pins(lock: &Lock, cat: &Catalog, apt: bool) -> (BTreeSet<Request>, Option<String>) {
    let mut out = BTreeSet::new();
    let drv = lock.hardware.driver.to_string();
    let br = lock.hardware.driver.major();
    let flavour = lock
        .fact("kernel-modules", "driver")
        .and_then(|f| f.get("flavour"))
        .expect("every example lock records the kernel-module flavour");
    let driver: Vec<String> = match (apt, flavour) {
        (true, "open") => vec![format!("nvidia-open-{br}={drv}-1")],
        (true, _) => vec![format!("cuda-drivers-{br}={drv}-1")],
        (false, f) => vec![
            format!("nvidia-driver={drv}"),
            format!("nvidia-driver-cuda={drv}"),
            format!(
                "kmod-nvidia-{}-dkms={drv}",
                if f == "open" { "open" } else { "latest" }
            ),
        ],
    };
    for d in &driver {
        out.insert(as_request(d, apt));
    }
    if let Some(c) = lock.component(Component::Cuda) {
        let v = &c.version;
        out.insert(as_request(
            &format!("cuda-toolkit-{}-{}={}-1", v.major(), v.minor(), v.as_str()),
            apt,
        ));
        let nccl = lock
            .facts
            .iter()
            .find(|f| f.kind == "nccl-build")
            .expect("a lock with CUDA and NCCL records the NCCL build");
        let build = nccl.get("cuda").unwrap();
        let version = nccl.get("nccl").unwrap();
        let rel = cat
            .nccl
            .iter()
            .find(|n| n.version.as_str() == version)
            .expect("the NCCL release is the catalog's");
        let b = Version::parse(build).unwrap();
        assert_eq!(
            b.major(),
            v.major(),
            "NCCL build {build} is not CUDA {v}'s major"
        );
        if nccl.get("known") == Some("true") {
            assert!(
                rel.cuda_builds.contains(&b),
                "NCCL {version}+cuda{build} is not a build the catalog lists ({:?})",
                rel.cuda_builds
            );
        }
        let (r, d) = if apt {
            ("libnccl2", "libnccl-dev")
        } else {
            ("libnccl", "libnccl-devel")
        };
        for n in [r, d] {
            out.insert(as_request(&format!("{n}={version}-1+cuda{build}"), apt));
        }
    }
    for p in ["dcgm", "nvidia-fabricmanager", "nvidia-container-toolkit"] {
        let Some(p) = lock.package(p) else { continue };
        let list = if apt || p.list("dnf").is_empty() {
            p.list("apt")
        } else {
            p.list("dnf")
        };
        for pin in list {
            out.insert(as_request(pin, apt));
        }
    }
    let cudnn = lock
        .component(Component::Cudnn)
        .map(|c| c.version.to_string());
    (out, cudnn)
}

/// Checks one example's record against its lock and the catalog; the failures, if any.
fn check(
    name: &str,
    lock: &Lock,
    cat: &Catalog,
    r: &Record,
    k8s_exporter: Option<&str>,
) -> Vec<String> {
    let mut f = Vec::new();
    if !r.ok {
        f.push(format!(
            "{name}: the scripts failed on the stand-in machine:\n{}",
            r.output
        ));
        return f;
    }
    let os = os_of(lock);
    let apt = !os.starts_with("rocky");
    // The kernel is upgraded and booted before anything builds against its headers: the
    // headers base.sh installs are the running (new) kernel's.
    let reboot = r.log.find("systemctl reboot");
    let headers = r.log.find(if apt {
        "linux-headers-"
    } else {
        "kernel-devel-"
    });
    match (reboot, headers) {
        (Some(b), Some(h)) if b < h => {
            let new = if apt { "linux-headers-6.8.0-2000-fake" } else { "kernel-devel-5.14.0-611.fake" };
            if !r.log.contains(new) {
                f.push(format!("{name}: base.sh installed headers of another kernel than the one kernel.sh booted"));
            }
        }
        _ => f.push(format!("{name}: kernel.sh must upgrade the kernel and reboot before base.sh installs its headers")),
    }
    let (expected, cudnn) = expected_pins(lock, cat, apt);
    let pinned: BTreeSet<Request> = r
        .requests
        .iter()
        .filter(|q| q.version.is_some())
        .filter(|q| !q.name.starts_with("kernel-") && !q.name.starts_with("linux-headers"))
        .filter(|q| !(cudnn.is_some() && q.name.starts_with("libcudnn")))
        .cloned()
        .collect();
    for q in pinned.difference(&expected) {
        f.push(format!(
            "{name}: requested {q:?}, which the lock does not pin"
        ));
    }
    for q in expected.difference(&pinned) {
        f.push(format!(
            "{name}: the lock pins {q:?}, which no script requested"
        ));
    }
    if let Some(v) = &cudnn {
        let c: Vec<&Request> = r
            .requests
            .iter()
            .filter(|q| q.name.starts_with("libcudnn"))
            .collect();
        if c.is_empty()
            || c.iter()
                .any(|q| !q.version.as_deref().unwrap_or("").starts_with(v.as_str()))
        {
            f.push(format!(
                "{name}: cuDNN requests {c:?} are not at the locked {v}"
            ));
        }
    }
    // Every pin is held at its version.
    for q in &expected {
        let held = if apt {
            r.holds.contains(&q.name)
        } else {
            r.holds
                .iter()
                .any(|h| h == &format!("{}-{}", q.name, q.version.as_deref().unwrap_or("")))
        };
        if !held {
            f.push(format!("{name}: {q:?} is not held"));
        }
    }
    // DCGM's diagnostics for the lock's CUDA major, at DCGM's version.
    if let Some(d) = lock.package("dcgm") {
        let m = d.get("cuda-major").unwrap_or("?");
        let diag: Vec<&Request> = r
            .requests
            .iter()
            .filter(|q| q.name.starts_with("datacenter-gpu-manager-4-cuda"))
            .collect();
        let core = r
            .requests
            .iter()
            .find(|q| q.name == "datacenter-gpu-manager-4-core")
            .and_then(|q| q.version.clone());
        if diag.len() != 1
            || diag[0].name != format!("datacenter-gpu-manager-4-cuda{m}")
            || diag[0].version != core
        {
            f.push(format!(
                "{name}: DCGM diagnostics {diag:?}, expected datacenter-gpu-manager-4-cuda{m} at {core:?}"
            ));
        }
    }
    if !apt {
        let br = lock.hardware.driver.major();
        let flavour = lock
            .fact("kernel-modules", "driver")
            .and_then(|x| x.get("flavour"))
            .unwrap();
        let stream = format!(
            "nvidia-driver:{br}-{}",
            if flavour == "open" { "open" } else { "dkms" }
        );
        if r.modules != [stream.clone()] {
            f.push(format!(
                "{name}: module streams {:?}, expected [{stream}]",
                r.modules
            ));
        }
        if r.log.contains("dnf module install") {
            f.push(format!(
                "{name}: `dnf module install` takes a stream's newest driver"
            ));
        }
        let crb = if os == "rockylinux8" {
            "powertools"
        } else {
            "crb"
        };
        if !r.repos.contains(crb) || !r.installed_names.contains("epel-release") {
            f.push(format!(
                "{name}: {crb} and EPEL are not both enabled ({:?})",
                r.repos
            ));
        }
    }
    // The NVSwitch generation's host requirements (NVLSM, libibumad3, infiniband-diags on
    // fourth-generation boards): requested by name from the image's package manager, and
    // their kernel modules in /etc/modules-load.d, loaded before Fabric Manager starts.
    let boot_modules = r.boot_modules();
    for p in lock
        .packages
        .iter()
        .filter(|p| p.get("nvswitch-generation").is_some())
    {
        let (manager, names) = if apt {
            ("apt", p.list("apt-names"))
        } else {
            ("dnf", p.list("dnf-names"))
        };
        for n in names {
            if !r
                .requests
                .iter()
                .any(|q| q.manager == manager && &q.name == n)
            {
                f.push(format!(
                    "{name}: {} needs {n}, which no script requested",
                    p.name
                ));
            }
        }
        for m in p.list("kernel-modules") {
            if !boot_modules.contains(m) {
                f.push(format!(
                    "{name}: {} needs the {m} module at boot; /etc/modules-load.d has {boot_modules:?}",
                    p.name
                ));
            }
        }
    }
    if lock.package("nvidia-fabricmanager").is_some()
        && !r.services.contains("enable nvidia-fabricmanager.service")
    {
        f.push(format!("{name}: Fabric Manager's service is not enabled"));
    }
    if let Some(e) = k8s_exporter {
        let pulled = |l: &str| match e.split_once('@') {
            // The operator pulls by digest alone (its `imagePath`): the VM's
            // `image:tag@digest` is the same image.
            Some((image, digest)) => l.strip_prefix("pull ").is_some_and(|p| {
                p.starts_with(&format!("{image}:")) && p.ends_with(&format!("@{digest}"))
            }),
            None => l == format!("pull {e}"),
        };
        if !r.docker.lines().any(pulled) {
            f.push(format!(
                "{name}: the VM image pulls {:?}, the GPU Operator values name {e}",
                r.docker
                    .lines()
                    .find(|l| l.starts_with("pull ") && l.contains("dcgm-exporter"))
            ));
        }
    }
    f
}

/// `repository/image:version` of `dcgmExporter` in the GPU Operator values, or
/// `repository/image@sha256:…` when the version is a digest (the operator's `imagePath`).
fn operator_exporter(values: &str) -> Option<String> {
    let block = values.split("\ndcgmExporter:\n").nth(1)?;
    let field = |k: &str| {
        block
            .lines()
            .take_while(|l| l.starts_with(' ') || l.is_empty())
            .find_map(|l| l.trim().strip_prefix(&format!("{k}: ")))
            .map(|v| v.trim_matches('"').to_string())
    };
    let version = field("version")?;
    let sep = if version.starts_with("sha256:") {
        '@'
    } else {
        ':'
    };
    Some(format!(
        "{}/{}{sep}{version}",
        field("repository")?,
        field("image")?
    ))
}

fn values_of(name: &str) -> String {
    std::fs::read_to_string(generate(name, "k8s").join("gpu-operator-values.yaml")).unwrap()
}

#[test]
fn every_example_provisions_the_lock_on_a_stand_in_machine() {
    if !isolation() {
        return;
    }
    let cat = Catalog::stock().unwrap();
    let mut failures = Vec::new();
    for name in example_names() {
        let lock = lock_of(&name);
        let packer = generate(&name, "packer");
        let r = provision_dir(&packer, &os_of(&lock), &name);
        let exporter = operator_exporter(&values_of(&name));
        failures.extend(check(&name, &lock, &cat, &r, exporter.as_deref()));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The harness does not depend on where the checkout lives. A checkout under /tmp (a CI
/// runner's, a `git clone` into `mktemp -d`) is hidden inside the machine, which mounts an
/// empty tmpfs over /tmp: the harness (`machine.sh` and `fake`) is copied to a fresh
/// directory under /tmp, as such a checkout would hold it, and an Ubuntu and a Rocky example
/// provision from there exactly as from this checkout.
#[test]
fn the_harness_works_from_a_checkout_under_tmp() {
    if !isolation() {
        return;
    }
    let checkout = std::path::Path::new("/tmp").join(format!(
        "gpustack-checkout-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    let harness = checkout.join("tests/provision");
    std::fs::create_dir_all(&harness).unwrap();
    for f in ["machine.sh", "fake"] {
        std::fs::copy(root().join("tests/provision").join(f), harness.join(f)).unwrap();
    }
    let cat = Catalog::stock().unwrap();
    let mut failures = Vec::new();
    let mut oses = BTreeSet::new();
    for name in ["h100-ib-train-serve", "slurm-apptainer-h100"] {
        let lock = lock_of(name);
        let os = os_of(&lock);
        let packer = generate(name, "packer");
        let r = provision_with(&harness, &packer, &os, &format!("tmp-checkout-{name}"));
        // The stand-in answered (it logs every call), not the host's tools or nothing.
        if r.log.is_empty() {
            failures.push(format!(
                "{name}: the stand-in was never called:\n{}",
                r.output
            ));
        }
        let exporter = operator_exporter(&values_of(name));
        failures.extend(check(name, &lock, &cat, &r, exporter.as_deref()));
        oses.insert(
            os.split(|c: char| c.is_ascii_digit())
                .next()
                .unwrap()
                .to_string(),
        );
    }
    let _ = std::fs::remove_dir_all(&checkout);
    assert_eq!(oses.len(), 2, "an apt and a dnf example: {oses:?}");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A closed lock's Packer scripts run too: every layer installs exactly its pylock's
/// packages, the compiled package comes from its locked sdist (downloaded, its sha256
/// checked, built with `--no-index`) and is installed from the wheel that build left.
#[test]
fn a_closed_lock_provisions_its_pylocks() {
    if !isolation() {
        return;
    }
    let fixture = root().join("fixtures/closed/h100-ib-train-serve");
    let dir = tempdir("provision-closed");
    copy_dir(&fixture, &dir);
    let out = run_in(
        &dir,
        &["gen", "packer", "--lock", "gpustack.lock", "--out", "out"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lock = Lock::parse(
        "gpustack.lock",
        &std::fs::read_to_string(dir.join("gpustack.lock")).unwrap(),
    )
    .unwrap();
    let r = provision_dir(&dir.join("out/packer"), &os_of(&lock), "closed");
    assert!(r.ok, "{}", r.output);
    let state = |f: &str| std::fs::read_to_string(r.state.join(f)).unwrap_or_default();
    let pip = state("pip");
    for file in [
        "pylock.framework.toml",
        "pylock.inference.toml",
        "pylock.training.toml",
        "pylock.build.toml",
    ] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let p: toml::Table = toml::from_str(&text).unwrap();
        for pkg in p["packages"].as_array().unwrap() {
            let line = format!(
                "{} {}",
                pkg["name"].as_str().unwrap(),
                pkg["version"].as_str().unwrap()
            );
            assert!(
                pip.lines().any(|l| l == line),
                "{file}: {line} not installed"
            );
        }
    }
    assert!(
        pip.lines()
            .any(|l| l == "wheel deepspeed-0.19.8-py3-none-any.whl"),
        "{pip}"
    );
    let b = &lock.python.as_ref().unwrap().builds[0];
    assert!(
        state("downloads").lines().any(|l| l == b.url),
        "{}",
        state("downloads")
    );
    assert!(
        state("checksums").contains(&b.sha256),
        "{}",
        state("checksums")
    );
    let py = state("python");
    assert!(py.contains("-m pip wheel --no-deps --no-build-isolation --no-index -w /opt/gpustack/wheels /opt/gpustack/sdists/deepspeed-0.19.8.tar.gz"), "{py}");
}

/// The harness catches what it is for: a Rocky image whose base.sh no longer enables CRB
/// fails where ninja-build installs; an NCCL pin for a build NVIDIA does not publish, a
/// driver from the stream's newest, or a pin the lock does not hold are reported.
#[test]
fn the_harness_rejects_broken_provisioning() {
    if !isolation() {
        return;
    }
    let cat = Catalog::stock().unwrap();
    let edit = |name: &str, from: &str, to: &str| -> (Lock, PathBuf) {
        let lock = lock_of(name);
        let packer = generate(name, "packer");
        let dir = tempdir(&format!("provision-broken-{name}"));
        copy_dir(&packer, &dir);
        let base = dir.join("scripts/base.sh");
        let text = std::fs::read_to_string(&base).unwrap();
        assert!(text.contains(from), "{name}: base.sh has no `{from}`");
        std::fs::write(&base, text.replace(from, to)).unwrap();
        (lock, dir)
    };

    // No CRB on Rocky 9 in any script: the fabric stack's ninja-build cannot install (each
    // install-plan step enables what its packages need, so every script is edited).
    let (lock, dir) = edit(
        "slurm-apptainer-h100",
        "dnf config-manager --set-enabled crb",
        "true",
    );
    for s in sorted_files(&dir.join("scripts"), "sh") {
        let text = std::fs::read_to_string(&s).unwrap();
        std::fs::write(
            &s,
            text.replace("dnf config-manager --set-enabled crb", "true"),
        )
        .unwrap();
    }
    let r = provision_dir(&dir, &os_of(&lock), "no-crb");
    assert!(!r.ok && r.output.contains("ninja-build"), "{}", r.output);

    // The driver from the module stream: refused (the stand-in's dnf, like the check).
    let (lock, dir) = edit(
        "slurm-apptainer-h100",
        "install_pkgs \"${driver_pkgs[@]}\"",
        "dnf module install -y \"${driver_stream}\"",
    );
    let r = provision_dir(&dir, &os_of(&lock), "module-install");
    assert!(!r.ok && r.output.contains("module install"), "{}", r.output);

    // An HGX B200 image that no longer loads ib_umad at boot.
    let (lock, dir) = edit("b200-serve", "<<'MODULES'\nib_umad\n", "<<'MODULES'\n");
    let r = provision_dir(&dir, &os_of(&lock), "no-ib-umad");
    let f = check("b200-serve", &lock, &cat, &r, None);
    assert!(f.iter().any(|x| x.contains("ib_umad")), "{f:?}");

    // NCCL for the toolkit's CUDA minor, which NVIDIA does not build for 2.27.5.
    let (lock, dir) = edit("h100-ib-train-serve", "+cuda12.9", "+cuda12.8");
    let r = provision_dir(&dir, &os_of(&lock), "nccl-minor");
    let f = check("h100-ib-train-serve", &lock, &cat, &r, None);
    assert!(
        f.iter()
            .any(|x| x.contains("libnccl2") && x.contains("12.8")),
        "{f:?}"
    );
}

#[test]
fn the_record_parsers_read_what_packer_and_helm_see() {
    let vars = "variable \"x\" {\n  default = \"a\"\n}\n\nvariable \"driver_kernel_modules\" {\n  type    = string\n  default = \"open\"\n}\n";
    assert_eq!(kernel_modules_default(vars).as_deref(), Some("open"));
    let values = "driver:\n  enabled: true\ndcgmExporter:\n  # note\n  enabled: true\n  repository: \"nvcr.io/nvidia/k8s\"\n  image: \"dcgm-exporter\"\n  version: \"4.6.0-4.8.3-distroless\"\ngdrcopy:\n  enabled: true\n";
    assert_eq!(
        operator_exporter(values).as_deref(),
        Some("nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless")
    );
    assert_eq!(
        as_request("cuda-toolkit-12-4-12.4.1-1", false).name,
        "cuda-toolkit-12-4"
    );
    assert_eq!(
        as_request("datacenter-gpu-manager-4-core=1:4.6.0-1", false)
            .version
            .as_deref(),
        Some("4.6.0-1")
    );
}
