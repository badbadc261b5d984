//! The install plan: what a machine of the lock installs, from which repository, at which
//! pin, computed once from the lock. A Dockerfile stage, an Apptainer definition and a
//! Packer script are layouts of these same steps (hpccm's building blocks are the model:
//! one object that knows its distribution's repositories and package names, whose
//! primitives print Docker or Singularity syntax).
//!
//! It holds:
//!
//! * the OS release ([`OsRelease`]): its package manager, NVIDIA's repository name, and the
//!   repositories an EL release ships disabled (CRB or PowerTools) or not at all (EPEL);
//! * every OS package step ([`PackageStep`]) with its pins, and the repository-enabling
//!   commands it needs before its packages are visible: a step never installs from a
//!   repository it has not enabled, on any target;
//! * the host packages of a VM (driver, CUDA, cuDNN, NCCL, DCGM, Fabric Manager, the
//!   Container Toolkit) and what is held (`host`);
//! * the source builds of the fabric stack and nccl-tests ([`SourceBuild`]);
//! * the Python layers: uv, the interpreter, each layer's requirements or pylock, what is
//!   compiled from checked sdists and its build environment, torch from source.
//!
//! [`PackageStep::image`] and [`PackageStep::host`] are the one shell renderer's two
//! layouts: the same repositories and packages, as one `RUN` (with the image's cache
//! clean-up) or as script lines. Targets print them; none decides a package, a repository or
//! a pin.

mod host;
mod py;
mod sources;

use serde::Serialize;

pub use host::{BasePackages, Cuda, Driver, NvswitchHost, Pins, Toolkit};
pub use py::{ArchFile, Interpreter, PyStage, PylockPick, Requirement};
pub use sources::SourceBuild;

use crate::error::{Diagnostic, Error, Stage};
use crate::lock::Lock;
use crate::plan::host::HostPlan;
use crate::plan::locked;
use crate::plan::Common;

pub(crate) fn bad(msg: String, hint: &str) -> Error {
    Diagnostic::new(Stage::Generate, msg).hint(hint).into()
}

/// The package manager of an OS release.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Manager {
    /// Debian/Ubuntu.
    Apt,
    /// Rocky Linux (EL).
    Dnf,
}

impl Manager {
    /// `apt` or `dnf`.
    pub fn name(self) -> &'static str {
        match self {
            Manager::Apt => "apt",
            Manager::Dnf => "dnf",
        }
    }
}

/// A repository of an EL release that its images and cloud images do not enable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ElRepo {
    /// CodeReady Linux Builder (EL9's `crb`), or EL8's `powertools`: developer packages
    /// such as `ninja-build` (Rocky's repository list,
    /// <https://wiki.rockylinux.org/rocky/repo/>).
    Builder,
    /// Extra Packages for Enterprise Linux (`ccache`, `dkms`), from `epel-release`. EPEL
    /// packages may require CRB/PowerTools, so it is enabled with it
    /// (<https://docs.fedoraproject.org/en-US/epel/getting-started/>).
    Epel,
}

/// The OS release packages are installed on, and what its package manager sees by default.
#[derive(Clone, Debug, Serialize)]
pub struct OsRelease {
    /// `ubuntu22.04`, `rockylinux9`.
    pub id: String,
    /// Its package manager.
    pub manager: Manager,
    /// NVIDIA's repository directory for it: `ubuntu2204`, `rhel9`.
    pub nvidia_repo: String,
    /// EL: the builder repository's name (`powertools` on EL8, `crb` from EL9).
    pub builder_repo: Option<String>,
}

impl OsRelease {
    /// The release of an OS id of the catalog.
    pub fn new(id: &str) -> OsRelease {
        let el = id
            .strip_prefix("rockylinux")
            .and_then(|v| v.split('.').next())
            .and_then(|v| v.parse::<u32>().ok());
        OsRelease {
            id: id.to_string(),
            manager: if el.is_some() {
                Manager::Dnf
            } else {
                Manager::Apt
            },
            nvidia_repo: host::repo_name(id),
            builder_repo: el.map(|m| if m < 9 { "powertools" } else { "crb" }.to_string()),
        }
    }

    /// The repository an EL package comes from when it is not in BaseOS or AppStream,
    /// which every EL image enables: `ninja-build` is in CRB/PowerTools
    /// (<https://dl.rockylinux.org/pub/rocky/9/CRB/x86_64/os/Packages/n/>,
    /// <https://dl.rockylinux.org/pub/rocky/8/PowerTools/x86_64/os/Packages/n/>), `ccache`
    /// and `dkms` in EPEL (<https://dl.fedoraproject.org/pub/epel/9/Everything/x86_64/Packages/c/>,
    /// <https://dl.fedoraproject.org/pub/epel/9/Everything/x86_64/Packages/d/>).
    fn el_repo_of(&self, package: &str) -> Option<ElRepo> {
        self.builder_repo.as_ref()?;
        match package {
            "ninja-build" => Some(ElRepo::Builder),
            "ccache" | "dkms" => Some(ElRepo::Epel),
            _ => None,
        }
    }

    /// The commands that make `repos` visible, in order (EPEL after the builder
    /// repository it may need; `config-manager` comes with dnf-plugins-core). Empty on
    /// apt: the OS release's own archive is always there.
    pub fn enable(&self, repos: &[ElRepo]) -> Vec<Command> {
        let Some(builder) = &self.builder_repo else {
            return Vec::new();
        };
        if repos.is_empty() {
            return Vec::new();
        }
        vec![
            Command::new("dnf install -y", ["dnf-plugins-core"]),
            Command::new("dnf config-manager --set-enabled", [builder.as_str()]),
            Command::new("dnf install -y", ["epel-release"]),
        ]
    }
}

/// One shell command: a literal program with its options, then its arguments.
/// LOAD-BEARING: templates print [`program`](Self::program) through the `cmd` filter (which
/// re-checks that it is a literal) and each argument through `sh`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Command {
    /// `apt-get install -y --no-install-recommends`: a literal of this module, never data.
    pub program: String,
    /// The arguments (package specs, a repository name), unquoted.
    pub args: Vec<String>,
    /// A package list: an image layout prints one argument per line.
    pub list: bool,
    /// The whole line, each argument quoted as a shell word (for tests and messages).
    pub line: String,
}

impl Command {
    /// `program` is a literal of this module (never data); `args` are quoted when printed.
    fn new<'a>(program: &'static str, args: impl IntoIterator<Item = &'a str>) -> Command {
        let args: Vec<String> = args.into_iter().map(String::from).collect();
        let mut line = program.to_string();
        for a in &args {
            line.push(' ');
            line.push_str(&crate::render::sh_quote(a));
        }
        Command {
            program: program.to_string(),
            list: args.len() > 1
                && (program.ends_with("install -y")
                    || program.contains("install -y --no-install-recommends")),
            args,
            line,
        }
    }
}

/// Where a step runs: its layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// A container image's `RUN` (or Apptainer `%post`): caches cleaned in the same layer.
    Image,
    /// A VM's provisioning script.
    Host,
}

/// OS packages installed in one step, with the repositories they come from.
#[derive(Clone, Debug, Serialize)]
pub struct PackageStep {
    /// Package specs in the manager's syntax (`libnccl2=2.27.5-1+cuda12.9`, `ninja-build`).
    pub packages: Vec<String>,
    /// The EL repositories they need, enabled first.
    pub repos: Vec<ElRepo>,
    /// apt: pinned packages may replace held ones (`--allow-change-held-packages`).
    pub allow_held: bool,
    /// The step as an image `RUN`'s commands, joined with `&&`.
    pub image: Vec<Command>,
    /// The step as script lines.
    pub host: Vec<Command>,
    /// apt: whether the image `RUN` carries apt's cache mounts.
    pub apt: bool,
}

impl PackageStep {
    /// A step installing `packages` on `os`; `None` when there is nothing to install.
    pub fn new(os: &OsRelease, packages: Vec<String>, allow_held: bool) -> Option<PackageStep> {
        if packages.is_empty() {
            return None;
        }
        let mut repos: Vec<ElRepo> = packages
            .iter()
            .filter_map(|p| os.el_repo_of(package_name(p, os.manager)))
            .collect();
        if repos.contains(&ElRepo::Epel) {
            repos.push(ElRepo::Builder);
        }
        repos.sort();
        repos.dedup();
        let mut step = PackageStep {
            packages,
            repos,
            allow_held,
            image: Vec::new(),
            host: Vec::new(),
            apt: os.manager == Manager::Apt,
        };
        step.image = step.commands(os, Layout::Image);
        step.host = step.commands(os, Layout::Host);
        Some(step)
    }

    /// The one shell renderer: the step's commands in `layout`.
    pub fn commands(&self, os: &OsRelease, layout: Layout) -> Vec<Command> {
        let pkgs = self.packages.iter().map(String::as_str);
        let mut out = Vec::new();
        match os.manager {
            Manager::Apt => {
                if layout == Layout::Image {
                    out.push(Command::new(
                        "rm -f /etc/apt/apt.conf.d/docker-clean",
                        None::<&str>,
                    ));
                }
                out.push(Command::new("apt-get update", None::<&str>));
                out.push(if self.allow_held {
                    Command::new(
                        "apt-get install -y --no-install-recommends --allow-change-held-packages",
                        pkgs,
                    )
                } else {
                    Command::new("apt-get install -y --no-install-recommends", pkgs)
                });
                if layout == Layout::Image {
                    out.push(Command::new("rm -rf /var/lib/apt/lists/*", None::<&str>));
                }
            }
            Manager::Dnf => {
                out.extend(os.enable(&self.repos));
                out.push(Command::new("dnf install -y", pkgs));
                if layout == Layout::Image {
                    out.push(Command::new("dnf clean all", None::<&str>));
                }
            }
        }
        out
    }
}

/// The package name of a spec: apt's `name=version`, dnf's `name-version-release`.
fn package_name(spec: &str, manager: Manager) -> &str {
    match manager {
        Manager::Apt => spec.split('=').next().unwrap_or(spec),
        Manager::Dnf => {
            // The name ends before the first dash-separated field that starts with a digit
            // and holds a dot (`cuda-toolkit-12-8-12.8.1-1`).
            let mut end = spec.len();
            let mut at = 0;
            for field in spec.split('-') {
                if at > 0 && field.starts_with(|c: char| c.is_ascii_digit()) && field.contains('.')
                {
                    end = at - 1;
                    break;
                }
                at += field.len() + 1;
            }
            &spec[..end]
        }
    }
}

/// The OS package steps, by where they run. LOAD-BEARING: the Dockerfile's stages and
/// Packer's scripts print them.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Steps {
    /// The image's `fabric` stage: the fabric build's tools (and NCCL for UCC).
    pub fabric: Option<PackageStep>,
    /// The image's `base` stage: NCCL and the fabric stack's shared libraries.
    pub base: Option<PackageStep>,
    /// The image's `build` stage: the compilers' helpers.
    pub build: Option<PackageStep>,
    /// The image's `torch-build` stage: NCCL and the build tools.
    pub torch_build: Option<PackageStep>,
    /// The image's `validate-build` stage: NCCL to build nccl-tests against.
    pub validate_build: Option<PackageStep>,
    /// The image's `validate` stage: OpenSSH for `mpirun` over SSH.
    pub validate_ssh: Option<PackageStep>,
    /// The VM: what the host's repositories need before the driver (EPEL's `dkms` for the
    /// DKMS driver packages on EL).
    pub vm_repos: Vec<Command>,
    /// The VM: the compilers and helpers of every source build on it.
    pub vm_build_tools: Option<PackageStep>,
    /// The VM: the fabric stack's build tools and shared libraries.
    pub vm_fabric: Option<PackageStep>,
    /// The VM: the RDMA user-space tools of an InfiniBand/RoCE fabric.
    pub vm_rdma_tools: Option<PackageStep>,
    /// The VM: NUMA tools.
    pub vm_numa: Option<PackageStep>,
    /// The VM: the tools nccl-tests builds with.
    pub vm_validate: Option<PackageStep>,
}

/// The install plan. LOAD-BEARING: the container, Apptainer and Packer plans format it.
#[derive(Clone, Debug, Serialize)]
pub struct InstallPlan {
    /// The OS release.
    pub os: OsRelease,
    /// `apt` or `dnf`.
    pub pkg: String,
    /// NCCL runtime package pin (`libnccl2=2.27.5-1+cuda12.8`).
    pub nccl_runtime: Option<String>,
    /// NCCL development package pin.
    pub nccl_dev: Option<String>,
    /// The fabric stack.
    pub fabric: Vec<SourceBuild>,
    /// Installers of the fabric stack that also run where the stack runs: their system
    /// packages (rdma-core, libfabric, Open MPI of the EFA installer) are not under the
    /// fabric prefix.
    pub runtime_installers: Vec<SourceBuild>,
    /// OS packages the fabric build needs (unpinned build tools).
    pub fabric_build_deps: Vec<String>,
    /// The fabric build installs the locked NCCL: UCC's NCCL layer (`--with-nccl`) builds
    /// against it.
    pub fabric_nccl: bool,
    /// OS packages the fabric stack needs at run time.
    pub fabric_runtime_deps: Vec<String>,
    /// `uv` image with digest.
    pub uv_image: Option<String>,
    /// The Dockerfile syntax frontend (`# syntax=`), by digest where the lock has one.
    pub frontend: String,
    /// The Python `uv python install` installs: the exact patch the lock pins, else the
    /// locked minor.
    pub python: Option<String>,
    /// The CPython build of that patch, when the lock pins one.
    pub interpreter: Option<Interpreter>,
    /// The Python layers (framework, inference, training).
    pub stages: Vec<PyStage>,
    /// Components compiled against the installed torch.
    pub compiled: Vec<Requirement>,
    /// What is installed before compiling: the framework layer without the compiled
    /// components.
    pub build_requirements: Vec<Requirement>,
    /// Build environment of every source build of Python packages (the Dockerfile's `build`
    /// stage, Packer's `install.sh`): the components' own switches, ccache as the compiler
    /// launcher and flash-attn's `FLASH_ATTN_CUDA_ARCHS`.
    pub build_env: Vec<(String, String)>,
    /// ccache's compiler masquerade directory, put first on `PATH` in every source build;
    /// `None` when nothing is compiled.
    pub ccache_path: Option<String>,
    /// nccl-tests build.
    pub nccl_tests: Option<SourceBuild>,
    /// The Python closure's install plan (a closed lock); `None` for an open lock.
    pub python_install: Option<crate::plan::python::PythonInstall>,
    /// A closed lock with several platforms: how the build stages pick the platform's
    /// `pylock.build.toml`.
    pub build_pick: Option<PylockPick>,
    /// The OCI platforms the images are built for (a closed lock: its closure's platforms).
    pub platforms: Vec<String>,
    /// torch built from source.
    pub torch_build: Option<crate::plan::torch_build::TorchBuildPlan>,
    /// The VM's host packages.
    pub host: BasePackages,
    /// The VM's driver packages.
    pub driver: Driver,
    /// The OS package steps.
    pub steps: Steps,
    /// Lines saying what is not verified.
    pub unverified: Vec<String>,
}

/// OpenSSH client and server, for `mpirun` over SSH.
pub(crate) fn ssh_packages(manager: Manager) -> (Vec<String>, &'static str) {
    match manager {
        Manager::Apt => (
            vec!["openssh-client".into(), "openssh-server".into()],
            "https://packages.ubuntu.com/jammy/openssh-server ; https://packages.ubuntu.com/noble/openssh-server ; https://packages.ubuntu.com/noble/openssh-client",
        ),
        Manager::Dnf => (
            vec!["openssh-clients".into(), "openssh-server".into()],
            "https://dl.rockylinux.org/pub/rocky/9/BaseOS/x86_64/os/Packages/o/ (openssh-server, openssh-clients)",
        ),
    }
}

impl InstallPlan {
    /// Plans every install of the lock's images and VMs.
    pub fn new(lock: &Lock, common: &Common) -> Result<InstallPlan, Error> {
        let mut unverified = Vec::new();
        let os_id = locked::cuda_image(lock).and_then(|p| p.os).ok_or_else(|| {
            bad(
                "the lock names no OS release (no `cuda-image` package)".into(),
                "re-lock with `gpustack lock`",
            )
        })?;
        let os = OsRelease::new(&os_id);
        let pkg = os.manager.name().to_string();
        let apt = os.manager == Manager::Apt;
        let (nccl_runtime, nccl_dev) = host::nccl_packages(lock, &pkg, &mut unverified);
        let fabric = sources::fabric_builds(lock, common, &mut unverified)?;
        let (fabric_build_deps, fabric_runtime_deps) =
            sources::fabric_os_packages(&fabric, common, &pkg);
        let fabric_nccl = nccl_dev.is_some() && fabric.iter().any(|b| b.name == "ucc");
        let mut tools = py::tools(lock)?;
        let torch_build = py::torch_source_build(lock, nccl_dev.is_some(), &mut unverified)?;
        let mut pys = py::py_stages(lock, common, torch_build.is_some(), &mut unverified);
        let ccache_path = py::finish_build_env(lock, common, &pkg, &mut pys);
        let build_requirements: Vec<Requirement> = pys
            .stages
            .iter()
            .find(|s| s.name == "framework")
            .map(|s| {
                s.requirements
                    .iter()
                    .filter(|r| !r.compiled)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        let python_install = py::python_install(lock, &mut pys.stages, &mut unverified)?;
        if let (Some(i), Some(p)) = (tools.interpreter.as_mut(), python_install.as_ref()) {
            i.other_cpus = p
                .platforms
                .iter()
                .map(|x| x.machine.clone())
                .filter(|m| *m != i.cpu)
                .collect();
        }
        let nccl_tests =
            sources::nccl_tests_build(lock, common, nccl_dev.is_some(), &mut unverified)?;
        let hostplan = HostPlan::new(lock);
        let host = host::base_packages(
            lock,
            (nccl_runtime.as_ref(), nccl_dev.as_ref()),
            &hostplan,
            apt,
        );
        let driver = host::driver(lock, apt, &os.nvidia_repo);
        let steps = steps(
            &os,
            &Sets {
                nccl: (nccl_runtime.as_deref(), nccl_dev.as_deref()),
                fabric: !fabric.is_empty(),
                fabric_nccl,
                fabric_build_deps: &fabric_build_deps,
                fabric_runtime_deps: &fabric_runtime_deps,
                compiles: !pys.compiled.is_empty(),
                torch_build: torch_build.is_some(),
                nccl_tests: nccl_tests.is_some(),
                ssh: nccl_tests.is_some() && crate::plan::workload::mpi_ssh(common).is_some(),
                rdma: common.rdma,
            },
        );
        Ok(InstallPlan {
            build_pick: python_install.as_ref().and_then(|pi| {
                pi.layer("build")
                    .and_then(|l| PylockPick::of(l, &pi.oci_platforms()))
            }),
            platforms: python_install
                .as_ref()
                .map(crate::plan::python::PythonInstall::oci_platforms)
                .unwrap_or_default(),
            os,
            pkg,
            runtime_installers: fabric
                .iter()
                .filter(|b| b.recipe == "installer")
                .cloned()
                .collect(),
            nccl_runtime,
            nccl_dev,
            fabric,
            fabric_build_deps,
            fabric_nccl,
            fabric_runtime_deps,
            uv_image: tools.uv_image,
            frontend: tools.frontend,
            python: tools.python,
            interpreter: tools.interpreter,
            stages: pys.stages,
            compiled: pys.compiled,
            build_requirements,
            build_env: pys.build_env,
            ccache_path,
            nccl_tests,
            python_install,
            torch_build,
            host,
            driver,
            steps,
            unverified,
        })
    }
}

/// What the steps install, from the plan's other decisions.
struct Sets<'a> {
    nccl: (Option<&'a str>, Option<&'a str>),
    fabric: bool,
    fabric_nccl: bool,
    fabric_build_deps: &'a [String],
    fabric_runtime_deps: &'a [String],
    compiles: bool,
    torch_build: bool,
    nccl_tests: bool,
    ssh: bool,
    rdma: bool,
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_string()).collect()
}

/// Every OS package step of the images and the VM.
fn steps(os: &OsRelease, s: &Sets<'_>) -> Steps {
    let apt = os.manager == Manager::Apt;
    let nccl: Vec<String> = [s.nccl.0, s.nccl.1]
        .into_iter()
        .flatten()
        .map(String::from)
        .collect();
    let nccl_rt: Vec<String> = s.nccl.0.into_iter().map(String::from).collect();
    let build_tools = strs(&["ccache", "git", "ninja-build", "ca-certificates"]);
    let step = |packages: Vec<String>, held: bool| PackageStep::new(os, packages, held);
    let fabric = s.fabric.then(|| {
        let mut p = s.fabric_build_deps.to_vec();
        if s.fabric_nccl {
            p.extend(nccl.iter().cloned());
        }
        if apt {
            p.push("ca-certificates".into());
        }
        step(p, s.fabric_nccl)
    });
    let mut base = nccl_rt;
    base.extend(s.fabric_runtime_deps.iter().cloned());
    if apt {
        base.push("ca-certificates".into());
    }
    let mut torch = nccl.clone();
    torch.extend(build_tools.iter().cloned());
    let vm_compilers = if apt {
        strs(&["build-essential", "ninja-build", "git", "ccache"])
    } else {
        strs(&["gcc", "gcc-c++", "make", "ninja-build", "git", "ccache"])
    };
    let mut vm_fabric = s.fabric_build_deps.to_vec();
    vm_fabric.extend(s.fabric_runtime_deps.iter().cloned());
    Steps {
        fabric: fabric.flatten(),
        base: step(base, true),
        build: s.compiles.then(|| step(build_tools, false)).flatten(),
        torch_build: s.torch_build.then(|| step(torch, true)).flatten(),
        validate_build: s.nccl_tests.then(|| step(nccl, true)).flatten(),
        validate_ssh: s
            .ssh
            .then(|| step(ssh_packages(os.manager).0, false))
            .flatten(),
        // The driver's DKMS packages need EPEL's dkms on EL (kmod-nvidia-*-dkms).
        vm_repos: os.enable(&[ElRepo::Builder, ElRepo::Epel]),
        vm_build_tools: step(vm_compilers, false),
        vm_fabric: s.fabric.then(|| step(vm_fabric, false)).flatten(),
        vm_rdma_tools: s
            .rdma
            .then(|| {
                step(
                    if apt {
                        strs(&["rdma-core", "ibverbs-utils", "infiniband-diags", "perftest"])
                    } else {
                        strs(&[
                            "rdma-core",
                            "libibverbs-utils",
                            "infiniband-diags",
                            "perftest",
                        ])
                    },
                    false,
                )
            })
            .flatten(),
        vm_numa: step(strs(&["numactl", "hwloc"]), false),
        vm_validate: step(
            if apt {
                strs(&["build-essential", "curl", "ca-certificates"])
            } else {
                strs(&["gcc", "gcc-c++", "make", "curl", "ca-certificates"])
            },
            false,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dnf_names_split_at_the_version() {
        for (spec, name) in [
            ("cuda-toolkit-12-8-12.8.1-1", "cuda-toolkit-12-8"),
            ("libnccl-2.27.5-1+cuda12.9", "libnccl"),
            ("ninja-build", "ninja-build"),
            ("kmod-nvidia-open-dkms-570.124.06", "kmod-nvidia-open-dkms"),
        ] {
            assert_eq!(package_name(spec, Manager::Dnf), name, "{spec}");
        }
        assert_eq!(
            package_name("libnccl2=2.27.5-1+cuda12.9", Manager::Apt),
            "libnccl2"
        );
    }

    #[test]
    fn an_el_step_enables_what_its_packages_come_from() {
        let rocky9 = OsRelease::new("rockylinux9");
        let s = PackageStep::new(&rocky9, strs(&["ccache", "git", "ninja-build"]), false).unwrap();
        assert_eq!(s.repos, [ElRepo::Builder, ElRepo::Epel]);
        let lines: Vec<&str> = s.image.iter().map(|c| c.line.as_str()).collect();
        assert_eq!(
            lines,
            [
                "dnf install -y dnf-plugins-core",
                "dnf config-manager --set-enabled crb",
                "dnf install -y epel-release",
                "dnf install -y ccache git ninja-build",
                "dnf clean all",
            ]
        );
        let rocky8 = OsRelease::new("rockylinux8");
        let s = PackageStep::new(&rocky8, strs(&["ninja-build"]), false).unwrap();
        assert!(s.host[1].line.ends_with("powertools"));
        // Nothing from an extra repository: nothing enabled.
        let s = PackageStep::new(&rocky9, strs(&["git"]), false).unwrap();
        assert_eq!(s.host.len(), 1);
        // apt: the archive is always there.
        let jammy = OsRelease::new("ubuntu22.04");
        let s = PackageStep::new(&jammy, strs(&["ninja-build"]), false).unwrap();
        assert!(s.repos.is_empty());
        assert_eq!(s.host[0].line, "apt-get update");
        assert!(PackageStep::new(&jammy, Vec::new(), false).is_none());
    }
}
