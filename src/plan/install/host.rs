//! The VM's host packages: the driver, CUDA toolkit, cuDNN, NCCL, DCGM, Fabric Manager and
//! the Container Toolkit, each at the lock's exact version in its package manager's pin
//! syntax, and what is held there. Containers take the driver from the host and CUDA and
//! cuDNN from the `nvidia/cuda` base image; only the NCCL pins are shared with them.

use serde::Serialize;

use crate::core::Component;
use crate::lock::Lock;
use crate::plan::host::{HostPlan, OsPins};
use crate::plan::locked::{self, HostPackage};

/// Packages of one install step, in the package manager's pin syntax.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Pins {
    /// `cuda-toolkit-12-8=12.8.1-1` (apt) or `cuda-toolkit-12-8-12.8.1-1` (dnf).
    pub pins: Vec<String>,
    /// Package names to hold at that version.
    pub names: Vec<String>,
    /// Comments: what is not verified about these pins.
    pub unverified: Vec<String>,
}

/// The driver install.
#[derive(Clone, Debug, Serialize)]
pub struct Driver {
    /// `570.211.01`.
    pub version: String,
    /// `570`.
    pub branch: String,
    /// Packages with the open kernel modules, at the exact version.
    pub open: Vec<String>,
    /// The same with the proprietary kernel modules.
    pub proprietary: Vec<String>,
    /// dnf: the branch's module stream enabled before the open packages are installed.
    pub open_stream: Option<String>,
    /// dnf: the same for the proprietary packages.
    pub proprietary_stream: Option<String>,
    /// Whether the spec names it as the installed driver of the hosts.
    pub installed: bool,
    /// What is not verified.
    pub unverified: Vec<String>,
}

/// The CUDA toolkit install.
#[derive(Clone, Debug, Serialize)]
pub struct Cuda {
    /// `12.8.1`.
    pub version: String,
    /// `12.8`.
    pub mm: String,
    /// `/usr/local/cuda-12.8`.
    pub home: String,
    /// The toolkit pins.
    pub pins: Pins,
    /// Forward compatibility packages (`cuda-compat-13-0`), when a component needs them.
    pub compat: Vec<String>,
}

/// The NVIDIA Container Toolkit install.
#[derive(Clone, Debug, Serialize)]
pub struct Toolkit {
    /// `1.20.0`.
    pub version: String,
    /// Pins.
    pub pins: Pins,
    /// The minimum safe version the lock's selection respected, when it names one.
    pub floor: Option<String>,
}

/// NVIDIA's repository directory for an OS: `ubuntu2204`, `rhel9`.
pub(super) fn repo_name(os: &str) -> String {
    if let Some(v) = os.strip_prefix("ubuntu") {
        format!("ubuntu{}", v.replace('.', ""))
    } else if let Some(v) = os.strip_prefix("rockylinux") {
        format!("rhel{v}")
    } else {
        os.replace('.', "")
    }
}

/// `name=ver` apt pins in dnf's `name-ver` form (an epoch dropped).
fn dnf_from_apt(pins: &[String]) -> Vec<String> {
    pins.iter()
        .map(|p| match p.split_once('=') {
            Some((n, v)) => format!("{n}-{}", v.split_once(':').map_or(v, |(_, r)| r)),
            None => p.clone(),
        })
        .collect()
}

impl Pins {
    /// Pins; apt holds package names, dnf's versionlock takes the pinned specs.
    fn new(pins: Vec<String>, apt: bool, unverified: Vec<String>) -> Pins {
        let names = pins
            .iter()
            .map(|p| {
                if apt {
                    p.split('=').next().unwrap_or(p).to_string()
                } else {
                    p.clone()
                }
            })
            .collect();
        Pins {
            pins,
            names,
            unverified,
        }
    }
}

/// The driver packages at the exact locked version, in NVIDIA's CUDA repository names: apt
/// `nvidia-open-<branch>` / `cuda-drivers-<branch>` at `<version>-1`; dnf `nvidia-driver`,
/// `nvidia-driver-cuda` (nvidia-smi) and `kmod-nvidia-open-dkms` /
/// `kmod-nvidia-latest-dkms` at `<version>` (any release), after enabling the branch's
/// module stream where the repository has one (so its packages are visible; a
/// `dnf module install` would take the stream's newest driver instead).
pub(super) fn driver(lock: &Lock, apt: bool, repo: &str) -> Driver {
    let drv = lock.hardware.driver.to_string();
    let branch = lock.hardware.driver.major().to_string();
    let manager = if apt { "apt" } else { "dnf" };
    let locked = (
        OsPins::of(lock, HostPackage::DriverOpen, manager),
        OsPins::of(lock, HostPackage::DriverProprietary, manager),
    );
    let (open, proprietary, unverified) = if let (Some(o), Some(p)) = locked {
        let mut notes = o.unverified;
        notes.extend(p.unverified);
        (o.pins, p.pins, notes)
    } else {
        let (o, p, note) = legacy_driver(&drv, &branch, apt, repo);
        (o, p, vec![note])
    };
    Driver {
        version: drv,
        open_stream: (!apt).then(|| format!("nvidia-driver:{branch}-open")),
        proprietary_stream: (!apt).then(|| format!("nvidia-driver:{branch}-dkms")),
        branch,
        open,
        proprietary,
        installed: lock.hardware.driver_installed,
        unverified,
    }
}

/// The driver pins of a lock written before the stack's OS packages were locked (format 4
/// without them, and older): NVIDIA's naming, marked unverified.
fn legacy_driver(
    drv: &str,
    branch: &str,
    apt: bool,
    repo: &str,
) -> (Vec<String>, Vec<String>, String) {
    if apt {
        (
            vec![format!("nvidia-open-{branch}={drv}-1")],
            vec![format!("cuda-drivers-{branch}={drv}-1")],
            format!("`cuda-drivers-{branch}` / `nvidia-open-{branch}` at `{drv}-1`: NVIDIA's CUDA repository naming for a driver branch; the lock does not record the package version string. apt fails if it does not exist."),
        )
    } else {
        let common = [
            format!("nvidia-driver-{drv}"),
            format!("nvidia-driver-cuda-{drv}"),
        ];
        (
            common
                .iter()
                .cloned()
                .chain([format!("kmod-nvidia-open-dkms-{drv}")])
                .collect(),
            common
                .iter()
                .cloned()
                .chain([format!("kmod-nvidia-latest-dkms-{drv}")])
                .collect(),
            format!("`nvidia-driver`, `nvidia-driver-cuda` and `kmod-nvidia-open-dkms` / `kmod-nvidia-latest-dkms` at `{drv}`: the package names of NVIDIA's {repo} repository (an EL9 host's `rpm -qa` lists kmod-nvidia-open-dkms-570.124.06-1.el9 and nvidia-driver-570.124.06-1.el9; NVIDIA's Amazon Linux 2023 repository both -dkms flavours); dnf fails if that version does not exist."),
        )
    }
}

/// The CUDA toolkit meta-package at `<release>-1`, and the forward compatibility package
/// any component needs.
fn cuda(lock: &Lock, apt: bool) -> Option<Cuda> {
    let c = lock.component(Component::Cuda)?;
    let mm = format!("{}.{}", c.version.major(), c.version.minor());
    let name = format!("cuda-toolkit-{}", mm.replace('.', "-"));
    let pin = if apt {
        format!("{name}={}-1", c.version)
    } else {
        format!("{name}-{}-1", c.version)
    };
    let compat = locked::compat_packages(lock);
    let pins = match OsPins::of(
        lock,
        HostPackage::CudaToolkit,
        if apt { "apt" } else { "dnf" },
    ) {
        Some(o) => Pins::new(o.pins, apt, o.unverified),
        None => {
            let note = format!(
                "`{name}` at `{}-1`: the `<release>-1` version of NVIDIA's meta-packages (the nvidia/cuda images pin `cuda-libraries-X-Y=<release>-1` the same way).",
                c.version
            );
            Pins::new(vec![pin], apt, vec![note])
        }
    };
    Some(Cuda {
        version: c.version.to_string(),
        home: format!("/usr/local/cuda-{mm}"),
        mm,
        pins,
        compat,
    })
}

/// cuDNN runtime and development packages (catalog/env.toml notes on their naming).
fn cudnn(lock: &Lock, cuda: Option<&Cuda>, apt: bool) -> Option<Pins> {
    let d = lock.component(Component::Cudnn)?;
    let c = cuda?;
    if let Some(o) = OsPins::of(lock, HostPackage::Cudnn, if apt { "apt" } else { "dnf" }) {
        return Some(Pins::new(o.pins, apt, o.unverified));
    }
    let cm = c.mm.split('.').next().unwrap_or_default();
    let v = d.version.to_string();
    let major = d.version.major();
    let dev = if apt { "dev" } else { "devel" };
    let (rt, dv, ver) = if major >= 9 {
        (
            format!("libcudnn{major}-cuda-{cm}"),
            format!("libcudnn{major}-{dev}-cuda-{cm}"),
            format!("{v}-1"),
        )
    } else {
        let suffix = if apt { "+cuda" } else { ".cuda" };
        (
            format!("libcudnn{major}"),
            format!("libcudnn{major}-{dev}"),
            format!("{v}-1{suffix}{}", c.mm),
        )
    };
    let sep = if apt { "=" } else { "-" };
    let mut notes = vec![format!(
        "cuDNN {v} as `{rt}{sep}{ver}`: NVIDIA's package naming (catalog/env.toml notes); the lock does not record the package version string."
    )];
    if major < 9 {
        notes.push(format!(
            "cuDNN {major} packages carry the CUDA release they were built for, which need not be {}.",
            c.mm
        ));
    }
    Some(Pins::new(
        vec![format!("{rt}{sep}{ver}"), format!("{dv}{sep}{ver}")],
        apt,
        notes,
    ))
}

/// NCCL: the container plan's packages, at the CUDA build the lock chose (host plan).
fn nccl(
    lock: &Lock,
    nccl_pins: (Option<&String>, Option<&String>),
    host: &HostPlan,
    cuda: Option<&Cuda>,
    apt: bool,
) -> Option<Pins> {
    let (r, d) = (nccl_pins.0?, nccl_pins.1?);
    if let Some(o) = OsPins::of(lock, HostPackage::Nccl, if apt { "apt" } else { "dnf" }) {
        return Some(Pins::new(vec![r.clone(), d.clone()], apt, o.unverified));
    }
    // A build the catalog lists needs no caveat (base.sh prints the lock's reasons).
    let notes = match &host.nccl {
        Some(b) if b.known => Vec::new(),
        Some(b) => vec![format!(
            "NCCL as `{r}`: {} (apt/dnf fails if NVIDIA publishes no such build)",
            b.because.last().map_or("", String::as_str)
        )],
        None => vec![format!(
            "NCCL as `{r}`: NVIDIA does not build every NCCL release for every CUDA minor ({}), and the lock does not record which exist.",
            cuda.map_or("", |c| c.mm.as_str())
        )],
    };
    Some(Pins::new(vec![r.clone(), d.clone()], apt, notes))
}

/// A host package's pins: the lock's apt or dnf list; on dnf with apt pins only, the same
/// versions in RPM form (marked unverified).
fn host_pins(lock: &Lock, which: HostPackage, apt: bool) -> Option<Pins> {
    let p = locked::host_package(lock, which)?;
    let name = which.name();
    let mut notes = Vec::new();
    let pins = if apt {
        p.apt.clone()
    } else if !p.dnf.is_empty() {
        p.dnf.clone()
    } else {
        notes.push(format!(
            "{name} {}: the lock has apt pins only; these dnf pins are the same versions in RPM's `name-version-release` form.",
            p.version
        ));
        dnf_from_apt(&p.apt)
    };
    (!pins.is_empty()).then(|| Pins::new(pins, apt, notes))
}

/// The Container Toolkit, and the minimum safe version its selection respected (the
/// lock's `because` line names it).
fn toolkit(lock: &Lock, apt: bool) -> Option<Toolkit> {
    let p = locked::host_package(lock, HostPackage::ContainerToolkit)?;
    let floor = p.because.iter().find_map(|b| {
        b.strip_prefix("not below ")
            .and_then(|r| r.split_once(", the catalog's minimum safe version"))
            .map(|(v, _)| v.to_string())
    });
    Some(Toolkit {
        version: p.version.clone(),
        pins: host_pins(lock, HostPackage::ContainerToolkit, apt)?,
        floor,
    })
}

/// A host requirement of an NVSwitch generation, as `base.sh` installs it: unpinned
/// packages by name, from NVIDIA's CUDA repository or the OS release's.
#[derive(Clone, Debug, Serialize)]
pub struct NvswitchHost {
    /// `nvlsm`.
    pub name: String,
    /// The packages, for the image's package manager.
    pub packages: Vec<String>,
    /// From the OS release's repositories (else NVIDIA's CUDA repository).
    pub os_release: bool,
    /// Why (the lock's `because`; its unverified lines apart).
    pub because: Vec<String>,
    /// What is not verified (no version is pinned).
    pub unverified: Vec<String>,
    /// Where the catalog found it.
    pub source: String,
}

/// The lock's host requirements for the image's package manager, and the kernel modules
/// they load at boot (deduplicated, in lock order).
pub(super) fn nvswitch_host(lock: &Lock, apt: bool) -> (Vec<NvswitchHost>, Vec<String>) {
    let mut modules: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for r in locked::host_requirements(lock) {
        for m in &r.kernel_modules {
            if !modules.contains(m) {
                modules.push(m.clone());
            }
        }
        let packages = if apt { r.apt } else { r.dnf };
        if packages.is_empty() {
            continue;
        }
        let (unverified, because): (Vec<String>, Vec<String>) = r
            .because
            .into_iter()
            .partition(|b| b.starts_with("UNVERIFIED: "));
        out.push(NvswitchHost {
            name: r.name,
            packages,
            os_release: r.os_release,
            because,
            unverified: unverified
                .into_iter()
                .map(|u| u.trim_start_matches("UNVERIFIED: ").to_string())
                .collect(),
            source: r.source,
        });
    }
    (out, modules)
}

/// The packages `base.sh` installs and holds.
#[derive(Clone, Debug, Serialize)]
pub struct BasePackages {
    /// The CUDA toolkit.
    pub cuda: Option<Cuda>,
    /// cuDNN.
    pub cudnn: Option<Pins>,
    /// NCCL (the container images' packages).
    pub nccl: Option<Pins>,
    /// DCGM.
    pub dcgm: Option<Pins>,
    /// Fabric Manager (NVSwitch GPUs).
    pub fabricmanager: Option<Pins>,
    /// The host requirements of the GPUs' NVSwitch generation, installed next to Fabric
    /// Manager (NVLSM and the InfiniBand management stack on fourth-generation boards).
    pub nvswitch_host: Vec<NvswitchHost>,
    /// Kernel modules loaded at every boot (`/etc/modules-load.d`), before Fabric Manager
    /// starts: the host requirements' (`ib_umad`).
    pub boot_modules: Vec<String>,
    /// The NVIDIA Container Toolkit.
    pub toolkit: Option<Toolkit>,
    /// What is held at the installed version (apt names, dnf specs).
    pub held: Vec<String>,
}

pub(super) fn base_packages(
    lock: &Lock,
    nccl_pins: (Option<&String>, Option<&String>),
    host: &HostPlan,
    apt: bool,
) -> BasePackages {
    let cuda = cuda(lock, apt);
    let cudnn = cudnn(lock, cuda.as_ref(), apt);
    let nccl = nccl(lock, nccl_pins, host, cuda.as_ref(), apt);
    let dcgm = host_pins(lock, HostPackage::Dcgm, apt);
    let fabricmanager = host_pins(lock, HostPackage::FabricManager, apt);
    let toolkit = toolkit(lock, apt);
    let (nvswitch_host, boot_modules) = nvswitch_host(lock, apt);
    let held = [
        cuda.as_ref().map(|c| &c.pins),
        cudnn.as_ref(),
        nccl.as_ref(),
        dcgm.as_ref(),
        fabricmanager.as_ref(),
        toolkit.as_ref().map(|t| &t.pins),
    ]
    .into_iter()
    .flatten()
    .flat_map(|p| p.names.iter().cloned())
    .collect();
    BasePackages {
        cuda,
        cudnn,
        nccl,
        dcgm,
        fabricmanager,
        nvswitch_host,
        boot_modules,
        toolkit,
        held,
    }
}

/// The NCCL runtime and development package pins: the lock's OS pins, else the CUDA build
/// the host plan chose, else NVIDIA's naming for the locked CUDA minor.
pub(super) fn nccl_packages(
    lock: &Lock,
    pkg: &str,
    unverified: &mut Vec<String>,
) -> (Option<String>, Option<String>) {
    let cuda = lock.component(Component::Cuda);
    let nccl = lock.component(Component::Nccl);
    // NCCL: the locked component, else the version the torch wheel pins.
    let nccl_version = nccl
        .map(|n| n.version.to_string())
        .or_else(|| locked::torch_nccl(lock));
    let nccl_build = crate::plan::host::HostPlan::new(lock)
        .nccl
        .filter(|b| nccl_version.as_deref() == Some(b.version.as_str()));
    let locked_nccl = crate::plan::host::OsPins::of(lock, HostPackage::Nccl, pkg)
        .filter(|o| o.pins.len() == 2 && cuda.is_some());
    match (nccl_version, cuda) {
        _ if locked_nccl.is_some() => {
            // The lock's NCCL packages (the nccl-build fact's CUDA build, read from the
            // repository's index where `gpustack lock` could).
            let o = locked_nccl.expect("checked above");
            unverified.extend(o.unverified);
            (Some(o.pins[0].clone()), Some(o.pins[1].clone()))
        }
        (Some(_), Some(_)) if nccl_build.is_some() => {
            // The lock chose the package's CUDA build (host plan): one NVIDIA publishes.
            let b = nccl_build.as_ref().expect("checked above");
            if !b.known {
                unverified.push(format!(
                    "NCCL {} as a `+cuda{}` package: the catalog lists no such build",
                    b.version, b.cuda
                ));
            }
            let (r, d) = b.pins(pkg == "apt");
            (Some(r), Some(d))
        }
        (Some(n), Some(c)) => {
            let mm = format!("{}.{}", c.version.major(), c.version.minor());
            unverified.push(format!(
                "NCCL {n} as a `+cuda{mm}` package: NVIDIA does not build every NCCL release for every CUDA minor, and the catalog does not record which exist"
            ));
            if pkg == "apt" {
                (
                    Some(format!("libnccl2={n}-1+cuda{mm}")),
                    Some(format!("libnccl-dev={n}-1+cuda{mm}")),
                )
            } else {
                (
                    Some(format!("libnccl-{n}-1+cuda{mm}")),
                    Some(format!("libnccl-devel-{n}-1+cuda{mm}")),
                )
            }
        }
        _ => (None, None),
    }
}
