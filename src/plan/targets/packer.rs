//! The Packer plan: VM images of the locked stack for AWS (`amazon-ebs`), GCP
//! (`googlecompute`), Azure (`azure-arm`) and on premises (`qemu`), one source per
//! `[packer].clouds` entry (`qemu` alone without a `[packer]` table).
//!
//! The image is provisioned by shell scripts, one per layer, each idempotent:
//!
//! * `base.sh`: the locked driver, CUDA toolkit, cuDNN and NCCL, the NCCL environment of the
//!   container images, DCGM, Fabric Manager (only on NVSwitch GPUs, at exactly the driver's
//!   version), the NVIDIA Container Toolkit with Docker's default runtime set to `nvidia`,
//!   every pin held;
//! * `performance.sh`: swap off, hugepages, CPU governor, irqbalance off, NUMA tools;
//! * `monitoring.sh`: the DCGM Exporter as a systemd service;
//! * `framework.sh`: uv, the locked Python and torch variant;
//! * `inference.sh`, `training.sh`, `multinode.sh` (the fabric stack, as the Dockerfile
//!   builds it): toggled by Packer variables
//!   (`enable_inference`, `enable_training`, `enable_multinode`) through `dynamic
//!   "provisioner"` blocks: an empty `only` means "every build" in Packer, so `only` cannot
//!   switch a provisioner off;
//! * `validate.sh`: nccl-tests against the locked NCCL (and MPI, with `enable_multinode`).
//!
//! Every package, repository and pin is the install plan's ([`InstallPlan`]): the same
//! NCCL packages, fabric tarballs, Python layers and repository steps as the container
//! image, laid out as script lines, so a VM and a container of one lock agree.
//!
//! Image names are content-addressed: `<image_name>-<host>-<layers>`, where `<host>` is the
//! first 12 hex digits of the lock's `host` layer hash (which covers the `base` layer too:
//! driver, CUDA, cuDNN, NCCL, fabric stack, plus the host packages) and `<layers>` is the
//! first 8 hex digits of the sha256 of the closure hashes of the optional layers the
//! toggles install. The same lock and toggles give the same name; a changed pin in any
//! installed layer gives another.

use serde::Serialize;

use crate::core::Cloud;
use crate::core::Layer;
use crate::error::{Diagnostic, Error, Stage};
use crate::lock::Lock;
use crate::plan::host::HostPlan;
use crate::plan::install::{BasePackages, Driver, InstallPlan, Requirement, SourceBuild, Steps};

pub use crate::plan::install::{Cuda, NvswitchHost, Pins, Toolkit};
use crate::plan::locked;
use crate::plan::Common;
use crate::render::RenderedFile;

/// GCP image names are at most 63 characters; the suffix takes 1 + 12 + 1 + 8.
const IMAGE_NAME_MAX: usize = 63 - 22;

/// Default disk size of the built image, GiB (CUDA, a torch venv, vLLM and DeepSpeed fit
/// with room for models to be pulled later).
const DISK_SIZE_GB: u32 = 200;

/// AAVMF, the UEFI firmware of QEMU's aarch64 `virt` machine, where Debian and Ubuntu's
/// `qemu-efi-aarch64` package installs it
/// (<https://packages.ubuntu.com/noble/all/qemu-efi-aarch64/filelist>).
const AAVMF_CODE: &str = "/usr/share/AAVMF/AAVMF_CODE.fd";
const AAVMF_VARS: &str = "/usr/share/AAVMF/AAVMF_VARS.fd";

/// The SSH user and password of the qemu build VM, set by `cloud-init/user-data`; the
/// account is locked at the end of the build and removed on the image's first boot.
const QEMU_USER: &str = "packer";

/// A Packer variable.
#[derive(Clone, Debug, Serialize)]
pub struct Variable {
    /// `aws_instance_type`.
    pub name: String,
    /// `string`, `number` or `bool`.
    pub kind: String,
    /// The default, as text (`None`: the variable is required).
    pub default: Option<String>,
    /// What it is, and where the default comes from.
    pub description: String,
}

/// A titled group of variables.
#[derive(Clone, Debug, Serialize)]
pub struct VarGroup {
    /// `every`, `aws`, `gcp`, `azure` or `qemu`.
    pub title: String,
    /// Its variables.
    pub vars: Vec<Variable>,
}

/// A value in `example.pkrvars.hcl`.
#[derive(Clone, Debug, Serialize)]
pub struct Example {
    /// Variable name.
    pub name: String,
    /// `string`, `number` or `bool`.
    pub kind: String,
    /// The value as text.
    pub value: String,
    /// Why the example sets it: `driver` (the kernel modules), `toggle`, `account` (an
    /// example value of an account setting) or `required` (`CHANGE-ME`: a fact the lock lacks).
    pub why: String,
}

/// A Packer plugin for `plugins.pkr.hcl`.
#[derive(Clone, Debug, Serialize)]
pub struct Plugin {
    /// `amazon`.
    pub name: String,
    /// `github.com/hashicorp/amazon`.
    pub source: String,
    /// `>= 1.0.0`.
    pub version: String,
}

/// An environment variable passed from a Packer variable to a script.
#[derive(Clone, Debug, Serialize)]
pub struct ScriptEnv {
    /// `GPUSTACK_MAX_JOBS`.
    pub name: String,
    /// The Packer variable: `max_jobs`.
    pub var: String,
}

/// A shell provisioner.
#[derive(Clone, Debug, Serialize)]
pub struct Provisioner {
    /// `scripts/base.sh`.
    pub script: String,
    /// What it installs.
    pub title: String,
    /// The bool variable that switches it on, if any.
    pub toggle: Option<String>,
    /// Environment from Packer variables.
    pub env: Vec<ScriptEnv>,
    /// The script reboots the VM: Packer's `expect_disconnect`.
    pub expect_disconnect: bool,
    /// Packer's `pause_before`: the wait after a reboot before this one connects.
    pub pause_before: Option<String>,
}

/// A qemu source: one per CPU of the stack's hosts.
#[derive(Clone, Debug, Serialize)]
pub struct QemuSource {
    /// The source's name: `gpu`, or `gpu-aarch64` in a stack with several CPUs.
    pub name: String,
    /// `x86_64`, `aarch64`.
    pub cpu: String,
    /// The suffix of its own variables: empty, or `_aarch64` with several CPUs.
    pub var: String,
    /// An aarch64 VM: `qemu-system-aarch64`, `-machine virt`, UEFI firmware (AAVMF).
    pub arm: bool,
}

/// A layer installed into the image, for the image name and the manifest.
#[derive(Clone, Debug, Serialize)]
pub struct InstalledLayer {
    /// `inference`, or `multinode` (the fabric stack, pinned by the `base` layer).
    pub name: String,
    /// Its closure hash in the lock.
    pub hash: String,
    /// The toggle that installs it, if any.
    pub toggle: Option<String>,
}

/// The DCGM Exporter service.
#[derive(Clone, Debug, Serialize)]
pub struct Exporter {
    /// `nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-ubuntu22.04`.
    pub image: String,
    /// `4.6.0-4.8.3`.
    pub version: String,
    /// Where the version comes from.
    pub source: String,
}

/// uv, copied out of its (digest-pinned) image.
#[derive(Clone, Debug, Serialize)]
pub struct Uv {
    /// `ghcr.io/astral-sh/uv:0.11.7@sha256:…`.
    pub image: String,
    /// `0.11.7`.
    pub version: String,
    /// Whether the image reference carries a digest.
    pub pinned: bool,
}

/// A component compiled on the VM against the installed torch (the Dockerfile's `build`
/// stage).
#[derive(Clone, Debug, Serialize)]
pub struct Compiled {
    /// `deepspeed`.
    pub name: String,
    /// `0.19.8`.
    pub version: String,
    /// The wheel it builds: `/opt/gpustack/wheels/deepspeed-0.19.8-*.whl`.
    pub wheel_glob: String,
    /// sha256 of its source distribution, when the lock knows it.
    pub sha256: Option<String>,
    /// The requirement file that pins the source distribution by that hash.
    pub sdist_file: String,
}

/// A Python layer: its requirement lines and what is compiled on the VM.
#[derive(Clone, Debug, Serialize)]
pub struct PyLayer {
    /// `framework`, `inference`, `training`.
    pub name: String,
    /// `/opt/gpustack/requirements-framework.lock`.
    pub file: String,
    /// Requirement lines.
    pub requirements: Vec<Requirement>,
    /// Indexes besides PyPI, highest priority first (the torch variant's, an extra's own).
    pub indexes: Vec<String>,
    /// What is installed before compiling (the layer without its compiled components),
    /// when something is compiled.
    pub prebuild: Vec<Requirement>,
    /// Its requirement file: `/opt/gpustack/requirements-framework-build.lock`.
    pub prebuild_file: String,
    /// Compiled against the installed torch before the install.
    pub compiled: Vec<Compiled>,
    /// Its closure hash.
    pub hash: String,
    /// A closed lock: the pylock this layer installs (path on the VM and text); no
    /// requirement file, no index.
    pub pylock: Option<PyLockOnVm>,
    /// A closed lock: the build closure installed before compiling, when this layer
    /// installs wheels compiled on the VM.
    pub build_pylock: Option<PyLockOnVm>,
    /// A closed lock: the locked sdists compiled on the VM for this layer.
    pub sdists: Vec<crate::plan::python::Sdist>,
    /// A closed lock: wheel file name prefixes it installs from /opt/gpustack/wheels.
    pub built: Vec<String>,
}

/// A pylock file written onto the VM.
#[derive(Clone, Debug, Serialize)]
pub struct PyLockOnVm {
    /// `/opt/gpustack/pylock.framework.toml`: where the script writes the VM's pylock, on
    /// every platform.
    pub path: String,
    /// Its text (a lock with one platform).
    pub contents: String,
    /// A lock with several platforms: each platform's text, by the VM's `uname -m`; the
    /// script writes the one of the VM's own CPU to [`path`](Self::path).
    pub by_machine: Vec<MachineFile>,
    /// The `printf` format of the error for a VM whose CPU the lock has no pylock for (`%s`
    /// is `uname -m`).
    pub missing: String,
}

/// One platform's pylock, for the VM whose `uname -m` is `machine`.
#[derive(Clone, Debug, Serialize)]
pub struct MachineFile {
    /// `x86_64`, `aarch64`.
    pub machine: String,
    /// The lock's file: `pylock.framework.x86_64.toml`.
    pub file: String,
    /// Its text.
    pub contents: String,
}

/// Memory per compile job of a torch build on the VM, GiB, passed to build-torch.sh as
/// `MEM_PER_JOB_GIB`: gpustack's default, a choice rather than a sourced fact (a site sets
/// the Packer variable `mem_per_job_gib` from what its builds use).
pub const TORCH_MEM_PER_JOB_GIB: u32 = 4;

/// Where `build-torch.sh` runs on the VM: its own environment, never the image's venv.
pub const TORCH_BUILD_VENV: &str = "/opt/gpustack/build-venv";

/// The heredoc terminator the scripts write pylock files with.
pub const PYLOCK_EOF: &str = crate::render::HEREDOC_EOF;

/// nccl-tests.
#[derive(Clone, Debug, Serialize)]
pub struct NcclTests {
    /// The source build (args with MPI when the lock has Open MPI).
    pub build: SourceBuild,
    /// `make` arguments without MPI.
    pub args_single: Vec<String>,
    /// Whether the MPI build is possible (Open MPI in the fabric stack).
    pub mpi: bool,
    /// The acceptance run on one node, from the workload plan (`all_reduce_perf -b 8 …`).
    pub run: crate::plan::workload::Launch,
}

/// The Packer plan. LOAD-BEARING: `generators/packer/*.j2` print these fields.
#[derive(Clone, Debug, Serialize)]
pub struct PackerPlan {
    /// Shared values.
    pub common: Common,
    /// torch built from source on the VM by the container image's `build-torch.sh`
    /// (`torch_build_script`, the same bytes).
    pub torch_build: Option<crate::plan::torch_build::TorchBuildPlan>,
    /// The text of `build-torch.sh`, when torch is built from source.
    pub torch_build_script: Option<String>,
    /// The environment `build-torch.sh` installs its build tools into and builds in: never
    /// the image's venv, which gets only the built wheel.
    pub torch_build_venv: String,
    /// Host decisions shared with the GPU Operator values and Slurm (kernel modules,
    /// exporter image, DCGM diagnostics, paths).
    pub host: HostPlan,
    /// EL: the repository holding build tools such as `ninja-build` (`powertools` on Rocky
    /// 8, `crb` on Rocky 9), enabled with EPEL before anything is installed.
    pub crb_repo: Option<String>,
    /// `ubuntu22.04`.
    pub os: String,
    /// `apt` or `dnf`.
    pub pkg: String,
    /// NVIDIA's repository name for the OS: `ubuntu2204`, `rhel9`.
    pub repo: String,
    /// Clouds, in `[packer].clouds` order: `aws`, `gcp`, `azure`, `qemu`.
    pub clouds: Vec<String>,
    /// `source.amazon-ebs.gpu`, ….
    pub sources: Vec<String>,
    /// The qemu sources, one per CPU of the stack's hosts (empty without qemu).
    pub qemu: Vec<QemuSource>,
    /// The CPUs of the stack's hosts (`uname -m`), from the lock.
    pub cpus: Vec<String>,
    /// Variables, grouped.
    pub groups: Vec<VarGroup>,
    /// Values of `example.pkrvars.hcl`.
    pub examples: Vec<Example>,
    /// Plugins for Packer ≥ 1.7.
    pub plugins: Vec<Plugin>,
    /// Shell provisioners, in order.
    pub provisioners: Vec<Provisioner>,
    /// `host` (or `base` when the lock has no host layer).
    pub name_layer: String,
    /// Its full closure hash.
    pub name_hash: String,
    /// Its first 12 hex digits.
    pub name_tag: String,
    /// Optional layers the image may hold.
    pub layers: Vec<InstalledLayer>,
    /// `sha256:<hex>` of the site's `[network]` values the image's profile carries
    /// (`NAME=value` lines, in name order), when there are any: one of the
    /// `installed_layers` the image name hashes, so two sites' images never share a name.
    pub site_hash: Option<String>,
    /// `cuda=12.8.1,driver=…`: the manifest's `versions`.
    pub versions_line: String,
    /// `execute_command` of every shell provisioner.
    pub execute_command: String,
    /// qemu build user.
    pub qemu_user: String,
    /// The qemu `-smbios` argument pointing cloud-init at Packer's HTTP server.
    pub qemu_smbios: String,
    /// Longest `image_name`.
    pub image_name_max: usize,
    /// Driver.
    pub driver: Driver,
    /// The install plan's host packages (CUDA, cuDNN, NCCL, DCGM, Fabric Manager and the
    /// NVSwitch requirements, the Container Toolkit, what is held): their fields print as
    /// the plan's own.
    #[serde(flatten)]
    pub base: BasePackages,
    /// DCGM Exporter.
    pub exporter: Option<Exporter>,
    /// uv.
    pub uv: Option<Uv>,
    /// Python: the exact patch the lock pins, else the minor.
    pub python: Option<String>,
    /// The CPython build uv installs, when the lock pins one.
    pub interpreter: Option<super::docker::Interpreter>,
    /// Python layers.
    pub py: Vec<PyLayer>,
    /// Build environment of compiled components (`DS_BUILD_FUSED_ADAM=1`, ccache as the
    /// compiler launcher, `FLASH_ATTN_CUDA_ARCHS`): the container plan's.
    pub build_env: Vec<(String, String)>,
    /// ccache's masquerade directory, first on `PATH` while compiling.
    pub ccache_path: Option<String>,
    /// The fabric stack (the Dockerfile's `fabric` stage).
    pub fabric: Vec<SourceBuild>,
    /// OS packages the fabric build needs.
    pub fabric_build_deps: Vec<String>,
    /// OS packages the fabric stack needs at run time.
    pub fabric_runtime_deps: Vec<String>,
    /// nccl-tests.
    pub nccl_tests: Option<NcclTests>,
    /// The install plan's OS package steps (the `host` layout of each).
    pub steps: Steps,
    /// What is not verified (comments in build.pkr.hcl).
    pub unverified: Vec<String>,
}

fn bad(msg: String, hint: &str) -> Error {
    Diagnostic::new(Stage::Generate, msg).hint(hint).into()
}

/// Public, documented base images of an OS release (generic configuration, not facts of
/// the stack): Canonical's AMI names and owner, GCP image families, Azure Marketplace
/// images and cloud images. `None` for an OS gpustack knows none for (the variables are
/// then required).
struct OsImages {
    aws_ami_name: &'static str,
    aws_owner: &'static str,
    aws_user: &'static str,
    gcp_family: &'static str,
    gcp_project: &'static str,
    azure: Option<[&'static str; 3]>,
}

/// The hash of the site values a VM image's profile carries ([`PackerPlan::site_hash`]).
fn site_hash(site_env: &[crate::plan::EnvVar]) -> Option<String> {
    use sha2::{Digest, Sha256};
    if site_env.is_empty() {
        return None;
    }
    let mut h = Sha256::new();
    for e in site_env {
        h.update(format!("{}={}\n", e.name, e.value).as_bytes());
    }
    Some(format!("sha256:{}", crate::catalog::hex(&h.finalize())))
}

/// The public images of an OS release for hosts with CPU `cpu`. Canonical names its arm64
/// AMIs and GCP families as the amd64 ones with `arm64` for `amd64` (and GCP's pre-24.04
/// families with `-arm64` appended); gpustack knows no sourced arm64 Azure SKU, so on Grace
/// the Azure image is required.
fn os_images_for(os: &str, cpu: &str) -> Option<OsImages> {
    let i = os_images(os)?;
    if cpu != "aarch64" {
        return Some(i);
    }
    let arm = |s: &str| -> &'static str {
        let t = if s.contains("amd64") {
            s.replace("amd64", "arm64")
        } else {
            format!("{s}-arm64")
        };
        Box::leak(t.into_boxed_str())
    };
    Some(OsImages {
        aws_ami_name: arm(i.aws_ami_name),
        gcp_family: arm(i.gcp_family),
        azure: None,
        ..i
    })
}

fn os_images(os: &str) -> Option<OsImages> {
    let ubuntu = |aws_ami_name, gcp_family, azure| OsImages {
        aws_ami_name,
        aws_owner: "099720109477",
        aws_user: "ubuntu",
        gcp_family,
        gcp_project: "ubuntu-os-cloud",
        azure: Some(azure),
    };
    match os {
        "ubuntu20.04" => Some(ubuntu(
            "ubuntu/images/hvm-ssd/ubuntu-focal-20.04-amd64-server-*",
            "ubuntu-2004-lts",
            [
                "Canonical",
                "0001-com-ubuntu-server-focal",
                "20_04-lts-gen2",
            ],
        )),
        "ubuntu22.04" => Some(ubuntu(
            "ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-amd64-server-*",
            "ubuntu-2204-lts",
            [
                "Canonical",
                "0001-com-ubuntu-server-jammy",
                "22_04-lts-gen2",
            ],
        )),
        "ubuntu24.04" => Some(ubuntu(
            "ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-amd64-server-*",
            "ubuntu-2404-lts-amd64",
            ["Canonical", "ubuntu-24_04-lts", "server"],
        )),
        _ => None,
    }
}

/// The variables of every source and of each cloud, grouped.
struct Vars {
    groups: Vec<VarGroup>,
}

impl Vars {
    fn group(&mut self, title: &str) {
        self.groups.push(VarGroup {
            title: title.into(),
            vars: Vec::new(),
        });
    }

    fn add(&mut self, name: &str, kind: &str, default: Option<&str>, description: String) {
        let g = self.groups.last_mut().expect("a group");
        g.vars.push(Variable {
            name: name.into(),
            kind: kind.into(),
            default: default.map(str::to_string),
            description,
        });
    }

    /// `example.pkrvars.hcl`: the driver flavour, the toggles at their defaults, and every
    /// other required variable (an example value for account settings, `CHANGE-ME` where
    /// the lock lacks a fact).
    fn examples(&self) -> Vec<Example> {
        let mut out = Vec::new();
        for v in self.groups.iter().flat_map(|g| &g.vars) {
            let (value, why) = match (v.name.as_str(), &v.default) {
                ("driver_kernel_modules", Some(d)) => (d.as_str(), "driver"),
                ("driver_kernel_modules", None) => ("CHANGE-ME", "required"),
                (_, Some(d)) if v.kind == "bool" => (d.as_str(), "toggle"),
                (_, Some(_)) => continue,
                ("aws_region", None) => ("us-east-1", "account"),
                ("gcp_project_id", None) => ("my-project", "account"),
                ("gcp_zone", None) => ("us-central1-a", "account"),
                ("azure_subscription_id", None) => {
                    ("00000000-0000-0000-0000-000000000000", "account")
                }
                ("azure_resource_group", None) => ("images", "account"),
                ("azure_location", None) => ("eastus", "account"),
                (_, None) => ("CHANGE-ME", "required"),
            };
            out.push(Example {
                name: v.name.clone(),
                kind: v.kind.clone(),
                value: value.into(),
                why: why.into(),
            });
        }
        out
    }
}

/// What the variables need to know about the lock.
struct VarCtx<'a> {
    lock: &'a Lock,
    common: &'a Common,
    host: &'a HostPlan,
    os: &'a str,
    images: Option<OsImages>,
    cpus: Vec<String>,
    qemu: Vec<QemuSource>,
    vm_images: Vec<locked::VmImage>,
    gpu: String,
    inference: bool,
    training: bool,
    fabric: bool,
    /// torch is built from source on the VM.
    torch_builds: bool,
}

impl VarCtx<'_> {
    /// The default compile jobs: 8, or 16 where torch is built on the VM.
    fn max_jobs(&self) -> u32 {
        if self.torch_builds {
            16
        } else {
            8
        }
    }

    fn image_prefix(&self) -> String {
        let stack = &self.common.stack;
        let mut p = if stack.starts_with(|c: char| c.is_ascii_digit()) {
            format!("gpustack-{stack}")
        } else {
            stack.clone()
        };
        p.truncate(IMAGE_NAME_MAX);
        p.trim_end_matches('-').to_string()
    }

    /// An instance type from the lock's `instance` fact, or a required variable.
    fn instance(&self, v: &mut Vars, cloud: Cloud, name: &str, what: &str) {
        let fact = locked::instance(self.lock, cloud);
        match fact
            .as_ref()
            .and_then(|f| Some((f.instance_type.as_deref()?, &f.cited)))
        {
            Some((t, f)) => v.add(
                name,
                "string",
                Some(t),
                format!(
                    "{what} of the build VM; from the lock: {} ({}).",
                    f.because, f.source
                ),
            ),
            None => v.add(
                name,
                "string",
                None,
                format!(
                    "Required: the lock has no {} {} for {} (the catalog lists none with a sourced type name).",
                    cloud.name(),
                    what.to_lowercase(),
                    self.gpu
                ),
            ),
        }
    }

    /// A public image setting, or a required variable where gpustack knows none.
    fn image(&self, v: &mut Vars, name: &str, value: Option<&str>, description: String) {
        match value {
            Some(x) => v.add(name, "string", Some(x), description),
            None => v.add(
                name,
                "string",
                None,
                format!(
                    "Required: gpustack knows no public image for {}; set the {} of one of that OS release.",
                    self.os,
                    name.replace('_', " ")
                ),
            ),
        }
    }

    fn vars(&self, clouds: &[Cloud]) -> Vars {
        let mut v = Vars { groups: Vec::new() };
        self.every_vars(&mut v);
        for c in clouds {
            match c {
                Cloud::Aws => self.aws_vars(&mut v),
                Cloud::Gcp => self.gcp_vars(&mut v),
                Cloud::Azure => self.azure_vars(&mut v),
                Cloud::Qemu => self.qemu_vars(&mut v),
            }
        }
        v
    }

    /// The variables of every build: image name, driver flavour, disk, jobs, hugepages and
    /// the layer toggles.
    fn every_vars(&self, v: &mut Vars) {
        v.group("every");
        v.add(
            "image_name",
            "string",
            Some(&self.image_prefix()),
            format!(
                "Prefix of the image name; the first 12 hex digits of the lock's host layer hash and 8 of the installed layers' hash are appended. At most {IMAGE_NAME_MAX} characters."
            ),
        );
        match &self.host.kernel_modules {
            Some(k) => v.add(
                "driver_kernel_modules",
                "string",
                Some(&k.name),
                format!(
                    "Kernel modules of the NVIDIA driver {}: \"open\" or \"proprietary\". The default is the lock's: {} ({}). Override it only for hardware the lock does not describe.",
                    self.lock.hardware.driver,
                    k.because
                        .iter()
                        .filter(|b| !b.contains("Packer"))
                        .map(String::as_str)
                        .collect::<Vec<_>>()
                        .join("; "),
                    k.source
                ),
            ),
            None => v.add(
                "driver_kernel_modules",
                "string",
                None,
                format!(
                    "Kernel modules of the NVIDIA driver {}: \"open\" or \"proprietary\". Required: the catalog has no kernel-module rule for {} (NVIDIA's open modules drive Turing and newer and are the only ones for Grace Hopper and Blackwell; Volta and older need the proprietary ones).",
                    self.lock.hardware.driver, self.gpu
                ),
            ),
        }
        v.add(
            "disk_size_gb",
            "number",
            Some(&DISK_SIZE_GB.to_string()),
            "Size of the image's root disk, GiB.".into(),
        );
        v.add(
            "max_jobs",
            "number",
            Some(&self.max_jobs().to_string()),
            "Parallel compile jobs for what is built on the VM (fabric stack, compiled Python packages, nccl-tests{}).".replace("{}", if self.torch_builds { ", torch" } else { "" }),
        );
        if self.torch_builds {
            v.add(
                "mem_per_job_gib",
                "number",
                Some(&TORCH_MEM_PER_JOB_GIB.to_string()),
                "Memory per compile job of the torch build, GiB: build-torch.sh caps max_jobs at the VM's MemAvailable / mem_per_job_gib. The qemu VM's memory default is max_jobs × this, plus 4 GiB.".into(),
            );
        }
        v.add(
            "hugepages",
            "number",
            Some("0"),
            "2 MiB hugepages reserved at boot (vm.nr_hugepages); 0 reserves none.".into(),
        );
        if self.inference {
            v.add(
                "enable_inference",
                "bool",
                Some("true"),
                "Install the inference layer (scripts/inference.sh).".into(),
            );
        }
        if self.training {
            v.add(
                "enable_training",
                "bool",
                Some("true"),
                "Install the training layer (scripts/training.sh).".into(),
            );
        }
        if self.fabric {
            v.add(
                "enable_multinode",
                "bool",
                Some(if self.common.nodes > 1 { "true" } else { "false" }),
                format!(
                    "Install the {} fabric stack and build nccl-tests with MPI (scripts/multinode.sh); the default follows [cluster].nodes ({}).",
                    self.common.fabric_name(), self.common.nodes
                ),
            );
        }
    }

    /// AWS (`amazon-ebs`): region, instance type, source AMI, gp3 volume.
    fn aws_vars(&self, v: &mut Vars) {
        let i = self.images.as_ref();
        let os = self.os;
        v.group("aws");
        v.add(
            "aws_region",
            "string",
            None,
            "AWS region to build in.".into(),
        );
        self.instance(v, Cloud::Aws, "aws_instance_type", "Instance type");
        // Exact names only: a name pattern with `most_recent` would take whatever
        // AMI the publisher released last. gpustack knows no sourced exact name.
        v.add("aws_source_ami_name", "string", None, format!(
                "Required: the exact name of the source AMI (no wildcards), one release of {}; gpustack records no AMI name it could cite, and never lets AWS pick the newest (`most_recent`). `aws ec2 describe-images --owners <aws_source_ami_owner> --filters Name=name,Values=<pattern>` lists the dated names.",
                i.map_or_else(|| os.to_string(), |i| format!("`{}` ({os} for {}, the CPU of the lock's hosts)", i.aws_ami_name, self.cpus.join(", ")))
            ));
        self.image(
            v,
            "aws_source_ami_owner",
            i.map(|i| i.aws_owner),
            "Owner of the source AMI (Canonical).".into(),
        );
        self.image(
            v,
            "aws_ssh_username",
            i.map(|i| i.aws_user),
            "SSH user of the source AMI.".into(),
        );
        v.add(
            "aws_volume_iops",
            "number",
            Some("3000"),
            "gp3 IOPS of the root volume (3000 is gp3's baseline).".into(),
        );
        v.add("aws_volume_throughput", "number", Some("125"), "gp3 throughput of the root volume, MiB/s (125 is gp3's baseline; Packer 1.6.6 requires it for gp3).".into());
    }

    /// GCP (`googlecompute`): project, zone, machine type, accelerators, source image.
    fn gcp_vars(&self, v: &mut Vars) {
        let i = self.images.as_ref();
        let os = self.os;
        v.group("gcp");
        v.add(
            "gcp_project_id",
            "string",
            None,
            "GCP project to build in.".into(),
        );
        v.add(
            "gcp_zone",
            "string",
            None,
            "GCP zone to build in (one that offers the machine type).".into(),
        );
        self.instance(v, Cloud::Gcp, "gcp_machine_type", "Machine type");
        let fact = locked::instance(self.lock, Cloud::Gcp);
        match fact.as_ref().and_then(|f| f.accelerator_type.as_deref()) {
            Some(a) => {
                v.add("gcp_accelerator_type", "string", Some(a), "Guest accelerator type attached to the build VM; from the lock's instance fact.".into());
                v.add(
                    "gcp_accelerator_count",
                    "number",
                    Some(fact.as_ref().and_then(|f| f.gpus.as_deref()).unwrap_or("1")),
                    "Guest accelerators attached to the build VM; from the lock's instance fact."
                        .into(),
                );
            }
            None => {
                v.add("gcp_accelerator_type", "string", Some(""), "Guest accelerator type (empty: none). The lock names none: accelerator-optimized machine types attach their GPUs themselves.".into());
                v.add(
                    "gcp_accelerator_count",
                    "number",
                    Some("0"),
                    "Guest accelerators attached to the build VM (0 with no accelerator type)."
                        .into(),
                );
            }
        }
        let settings = locked::gcp_settings(self.lock);
        match settings.as_ref().and_then(|f| Some((f.on_host_maintenance.as_deref()?, &f.cited))) {
                Some((m, f)) => v.add("gcp_on_host_maintenance", "string", Some(m), format!("Host maintenance policy of the build VM; from the lock: {}", f.source)),
                None => v.add("gcp_on_host_maintenance", "string", None, "Required: the lock has no GCP settings; VMs with GPUs cannot live-migrate (normally TERMINATE).".into()),
            }
        // One image by name, not a family (which moves to each new image).
        v.add("gcp_source_image", "string", None, format!(
                "Required: the exact source image name, one image of {}; gpustack records no image name it could cite, and never builds from a family, which moves. `gcloud compute images describe-from-family <family> --project <gcp_source_image_project>` names the current one.",
                i.map_or_else(|| os.to_string(), |i| format!("the `{}` family ({os})", i.gcp_family))
            ));
        self.image(
            v,
            "gcp_source_image_project",
            i.map(|i| i.gcp_project),
            "Project of the source image.".into(),
        );
    }

    /// Azure (`azure-arm`): subscription, resource group, VM size, Marketplace image.
    fn azure_vars(&self, v: &mut Vars) {
        let i = self.images.as_ref();
        let os = self.os;
        v.group("azure");
        v.add(
            "azure_subscription_id",
            "string",
            None,
            "Azure subscription to build in (authentication: the Azure CLI's login).".into(),
        );
        v.add(
            "azure_resource_group",
            "string",
            None,
            "Resource group of the managed image.".into(),
        );
        v.add(
            "azure_location",
            "string",
            None,
            "Azure region to build in.".into(),
        );
        self.instance(v, Cloud::Azure, "azure_vm_size", "VM size");
        self.image(
            v,
            "azure_image_publisher",
            i.and_then(|i| i.azure).map(|a| a[0]),
            format!("Marketplace image of {os}: publisher."),
        );
        self.image(
            v,
            "azure_image_offer",
            i.and_then(|i| i.azure).map(|a| a[1]),
            "Marketplace image: offer.".into(),
        );
        self.image(
            v,
            "azure_image_sku",
            i.and_then(|i| i.azure).map(|a| a[2]),
            "Marketplace image: SKU (generation 2).".into(),
        );
        v.add("azure_image_version", "string", None, "Required: the exact Marketplace image version (not `latest`, which moves); gpustack records none it could cite. `az vm image list --publisher <publisher> --offer <offer> --sku <sku> --all` lists them.".into());
    }

    /// QEMU: per source (one per CPU), the cloud image the build VM boots, the
    /// accelerator and, on aarch64, the emulator, CPU model and UEFI firmware; then the
    /// VM's size.
    fn qemu_vars(&self, v: &mut Vars) {
        let os = self.os;
        v.group("qemu");
        for q in &self.qemu {
            let img = self.vm_images.iter().find(|i| i.cpu == q.cpu);
            let pinned = img.and_then(|i| Some((i.url.as_deref()?, i.sha256.as_deref()?, i)));
            let n = |base: &str| format!("{base}{}", q.var);
            let checksum = pinned.map(|(_, h, _)| format!("sha256:{h}"));
            self.image(v, &n("qemu_source_image_url"), pinned.map(|(u, _, _)| u), format!(
                "Cloud image (qcow2, with cloud-init) of {os} the {} build VM boots: a dated release, never the moving one; from the lock ({} {}: {}).",
                q.cpu,
                img.map_or(os, |i| i.os.as_str()),
                img.map_or("", |i| i.release.as_str()),
                pinned.map_or("no image in the catalog", |(_, _, i)| i.source.as_str()),
            ));
            self.image(v, &n("qemu_source_image_checksum"), checksum.as_deref(), "sha256 of the cloud image, as its publisher lists it beside the image (`sha256:<hex>`); Packer checks the download against it, offline.".into());
            v.add(
                &n("qemu_accelerator"),
                "string",
                Some("kvm"),
                format!("QEMU accelerator of the {} VM: kvm on a build host with that CPU, tcg (emulation, slow) elsewhere.", q.cpu),
            );
            if q.arm {
                v.add(
                    &n("qemu_binary"),
                    "string",
                    Some("qemu-system-aarch64"),
                    "QEMU emulator of the aarch64 VM (packer-plugin-qemu `qemu_binary`).".into(),
                );
                v.add(&n("qemu_cpu_model"), "string", Some("host"), "CPU model of the aarch64 VM (`cpu_model`, QEMU's `-cpu`): host with kvm; max with tcg. The `virt` machine's default CPU is 32-bit.".into());
                v.add(&n("qemu_efi_firmware_code"), "string", Some(AAVMF_CODE), "UEFI firmware of the aarch64 VM, code part (`efi_firmware_code`): AAVMF from Debian/Ubuntu's qemu-efi-aarch64 package.".into());
                v.add(&n("qemu_efi_firmware_vars"), "string", Some(AAVMF_VARS), "UEFI variable store template of the aarch64 VM (`efi_firmware_vars`); Packer copies it into the output directory.".into());
            }
        }
        // Sized for the compile jobs: one CPU per job, and mem_per_job_gib per job plus
        // 4 GiB for the rest of the VM where torch is built here.
        let (memory_mb, cpus) = if self.torch_builds {
            (
                (self.max_jobs() * TORCH_MEM_PER_JOB_GIB + 4) * 1024,
                self.max_jobs(),
            )
        } else {
            (8192, 4)
        };
        v.add(
            "qemu_memory_mb",
            "number",
            Some(&memory_mb.to_string()),
            "Memory of the build VM, MiB.".into(),
        );
        v.add(
            "qemu_cpus",
            "number",
            Some(&cpus.to_string()),
            "CPUs of the build VM.".into(),
        );
    }
}

/// The Python layers of the container plan, with what each compiles on the VM.
fn py_layers(lock: &Lock, dp: &InstallPlan) -> Result<Vec<PyLayer>, Error> {
    let on_vm = |l: &crate::plan::python::LayerInstall| -> Result<PyLockOnVm, Error> {
        // Written with a quoted heredoc: no line of it may be the terminator.
        if let Some(f) = l
            .files
            .iter()
            .find(|f| f.contents.lines().any(|x| x.trim() == PYLOCK_EOF))
        {
            return Err(Diagnostic::new(
                Stage::Generate,
                format!("`{}` holds the line `{PYLOCK_EOF}`", f.file),
            )
            .hint("re-lock with `gpustack lock`; the pylock files are uv's output")
            .into());
        }
        let machines: Vec<&str> = l.files.iter().map(|f| f.machine.as_str()).collect();
        Ok(PyLockOnVm {
            path: format!("/opt/gpustack/{}", l.file),
            contents: match l.files.as_slice() {
                [one] => one.contents.clone(),
                _ => String::new(),
            },
            by_machine: if l.files.len() > 1 {
                l.files
                    .iter()
                    .map(|f| MachineFile {
                        machine: f.machine.clone(),
                        file: f.file.clone(),
                        contents: f.contents.clone(),
                    })
                    .collect()
            } else {
                Vec::new()
            },
            missing: format!(
                "error: gpustack.lock has no pylock of the {} layer for the CPU of this VM, %s (it has {})\\n",
                l.layer,
                machines.join(", ")
            ),
        })
    };
    let pi = dp.python_install.as_ref();
    dp.stages
        .iter()
        .map(|s| {
            let closed = pi.and_then(|p| p.layer(&s.name));
            let built = closed.map(|l| l.built.clone()).unwrap_or_default();
            let pylock = closed.map(on_vm).transpose()?;
            // The build closure: for the wheels compiled for this layer, and for torch
            // built from source on the VM (the framework layer).
            let torch_here = s.name == "framework"
                && dp
                    .torch_build
                    .as_ref()
                    .is_some_and(crate::plan::torch_build::TorchBuildPlan::builds_here);
            let build_pylock = if built.is_empty() && !torch_here {
                None
            } else {
                pi.and_then(|p| p.layer("build")).map(on_vm).transpose()?
            };
            let sdists: Vec<crate::plan::python::Sdist> = pi
                .filter(|_| !built.is_empty())
                .map(|p| {
                    p.sdists
                        .iter()
                        .filter(|d| {
                            built.iter().any(|b| {
                                *b == format!("{}-{}", d.name.replace('-', "_"), d.version)
                            })
                        })
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            let compiled: Vec<Compiled> = s
                .requirements
                .iter()
                .filter(|r| r.compiled)
                .map(|r| Compiled {
                    name: r.name.clone(),
                    version: r.version.clone(),
                    wheel_glob: format!(
                        "/opt/gpustack/wheels/{}-{}-*.whl",
                        r.name.replace('-', "_"),
                        r.version
                    ),
                    sha256: r.sha256.clone(),
                    sdist_file: format!("/opt/gpustack/requirements-{}-sdist.lock", r.name),
                })
                .collect();
            Ok(PyLayer {
                name: s.name.clone(),
                file: format!("/opt/gpustack/{}", s.requirements_file),
                requirements: s.requirements.clone(),
                indexes: s.indexes.clone(),
                prebuild: if compiled.is_empty() {
                    Vec::new()
                } else {
                    s.requirements
                        .iter()
                        .filter(|r| !r.compiled)
                        .cloned()
                        .collect()
                },
                prebuild_file: format!("/opt/gpustack/requirements-{}-build.lock", s.name),
                compiled,
                hash: Layer::from_name(&s.name)
                    .and_then(|l| lock.layer(l))
                    .map(|l| l.hash.clone())
                    .unwrap_or_default(),
                pylock,
                build_pylock,
                sdists,
                built,
            })
        })
        .collect()
}

fn env(name: &str, var: &str) -> ScriptEnv {
    ScriptEnv {
        name: name.into(),
        var: var.into(),
    }
}

fn provisioner(
    script: &str,
    title: &str,
    toggle: Option<&str>,
    env: Vec<ScriptEnv>,
) -> Provisioner {
    Provisioner {
        script: format!("scripts/{script}.sh"),
        title: title.into(),
        toggle: toggle.map(str::to_string),
        env,
        expect_disconnect: false,
        pause_before: None,
    }
}

/// The Packer plugins of the clouds built for. An aarch64 qemu source needs
/// packer-plugin-qemu 1.0.9 or newer: `efi_boot` and `efi_firmware_*` came in 1.0.7,
/// `cpu_model` in 1.0.9 (<https://github.com/hashicorp/packer-plugin-qemu>, commits
/// 4076d6d and 946d4e5).
fn plugins(clouds: &[Cloud], arm: bool) -> Vec<Plugin> {
    clouds
        .iter()
        .map(|c| {
            let name = match c {
                Cloud::Aws => "amazon",
                Cloud::Gcp => "googlecompute",
                Cloud::Azure => "azure",
                Cloud::Qemu => "qemu",
            };
            Plugin {
                name: name.into(),
                source: format!("github.com/hashicorp/{name}"),
                version: if arm && *c == Cloud::Qemu {
                    ">= 1.0.9"
                } else {
                    ">= 1.0.0"
                }
                .into(),
            }
        })
        .collect()
}

/// The qemu sources: one per CPU of the stack's hosts, named `gpu` when there is one.
fn qemu_sources(cpus: &[String]) -> Vec<QemuSource> {
    let several = cpus.len() > 1;
    cpus.iter()
        .map(|cpu| QemuSource {
            name: if several {
                format!("gpu-{cpu}")
            } else {
                "gpu".into()
            },
            cpu: cpu.clone(),
            var: if several {
                format!("_{cpu}")
            } else {
                String::new()
            },
            arm: cpu == "aarch64",
        })
        .collect()
}

/// The build's sources, one per cloud (qemu: one per CPU).
fn sources(clouds: &[Cloud], qemu: &[QemuSource]) -> Vec<String> {
    let mut out = Vec::new();
    for c in clouds {
        match c {
            Cloud::Aws => out.push("source.amazon-ebs.gpu".into()),
            Cloud::Gcp => out.push("source.googlecompute.gpu".into()),
            Cloud::Azure => out.push("source.azure-arm.gpu".into()),
            Cloud::Qemu => out.extend(qemu.iter().map(|q| format!("source.qemu.{}", q.name))),
        }
    }
    out
}

/// A stack whose hosts have several CPUs builds one VM image per CPU, on qemu, where the
/// lock pins each CPU's image. A cloud build would need an instance type, a source image
/// and an account setting per CPU that the lock does not have (its instance fact is the
/// first GPU's): refused, saying so.
fn refuse_mixed_clouds(cpus: &[String], clouds: &[Cloud]) -> Result<(), Error> {
    if cpus.len() < 2 {
        return Ok(());
    }
    match clouds.iter().find(|c| **c != Cloud::Qemu) {
        Some(c) => Err(bad(
            format!(
                "the stack's hosts have several CPUs ({}): gpustack builds their VM images on qemu only, one per CPU; a {} image would need an instance type and a source image per CPU, which the lock does not record",
                cpus.join(", "),
                c.name()
            ),
            "set `[packer].clouds = [\"qemu\"]`, or split the stack into one per CPU",
        )),
        None => Ok(()),
    }
}

/// nccl-tests on the VM: the container plan's build, run as the acceptance test runs it.
fn nccl_tests(
    dp: &InstallPlan,
    acceptance: Option<crate::plan::workload::Acceptance>,
) -> Option<NcclTests> {
    dp.nccl_tests
        .clone()
        .zip(acceptance)
        .map(|(b, a)| NcclTests {
            run: a.per_node,
            mpi: b.args.iter().any(|a| a == "MPI=1"),
            args_single: b
                .args
                .iter()
                .filter(|a| *a != "MPI=1" && !a.starts_with("MPI_HOME="))
                .cloned()
                .collect(),
            build: b,
        })
}

/// The layers the image installs above the host layer (the image name's second hash).
fn installed_layers(
    lock: &Lock,
    py: &[PyLayer],
    fabric: bool,
    validate: bool,
) -> Vec<InstalledLayer> {
    let mut layers: Vec<InstalledLayer> = py
        .iter()
        .map(|p| InstalledLayer {
            name: p.name.clone(),
            hash: p.hash.clone(),
            toggle: (p.name != "framework").then(|| format!("enable_{}", p.name)),
        })
        .collect();
    if fabric {
        layers.push(InstalledLayer {
            name: "multinode".into(),
            hash: lock
                .layer(Layer::Base)
                .map(|l| l.hash.clone())
                .unwrap_or_default(),
            toggle: Some("enable_multinode".into()),
        });
    }
    if let (true, Some(l)) = (validate, lock.layer(Layer::Validate)) {
        layers.push(InstalledLayer {
            name: "validate".into(),
            hash: l.hash.clone(),
            toggle: None,
        });
    }
    layers
}

/// What the provisioners of a build install, for [`provisioners`].
struct Installs {
    monitoring: bool,
    framework_compiles: Option<bool>,
    /// torch is built from source on the VM (`build-torch.sh`).
    torch_builds: bool,
    fabric: bool,
    inference: bool,
    training: bool,
    validate: bool,
}

/// Provisioners, in order: base, tuning, monitoring, framework, then the toggled layers
/// (the fabric first: training and nccl-tests use it), then nccl-tests.
fn provisioners(common: &Common, i: &Installs) -> Vec<Provisioner> {
    let jobs = || env("GPUSTACK_MAX_JOBS", "max_jobs");
    // The kernel first: upgraded to the OS repositories' newest and booted, so that the
    // headers DKMS builds the driver against exist for the running kernel (a dated cloud
    // image boots a kernel whose headers the live mirror may no longer carry: Rocky moves
    // a superseded minor to the vault). Packer's shell provisioner: `expect_disconnect`
    // lets the script reboot, `pause_before` gives the VM time to go down before the next
    // one connects (https://developer.hashicorp.com/packer/docs/provisioners/shell).
    let mut kernel = provisioner(
        "kernel",
        "the newest kernel of the OS repositories, booted",
        None,
        vec![],
    );
    kernel.expect_disconnect = true;
    let mut provisioners = vec![
        kernel,
        provisioner(
            "base",
            "driver, CUDA, cuDNN, NCCL, DCGM, Fabric Manager, Container Toolkit",
            None,
            vec![env(
                "GPUSTACK_DRIVER_KERNEL_MODULES",
                "driver_kernel_modules",
            )],
        ),
        provisioner(
            "performance",
            "host tuning",
            None,
            vec![env("GPUSTACK_HUGEPAGES", "hugepages")],
        ),
    ];
    if i.monitoring {
        provisioners.push(provisioner(
            "monitoring",
            "DCGM Exporter service",
            None,
            vec![],
        ));
    }
    provisioners[1].pause_before = Some("30s".into());
    if let Some(compiles) = i.framework_compiles {
        let mut env = if compiles || i.torch_builds {
            vec![jobs()]
        } else {
            vec![]
        };
        if i.torch_builds {
            env.push(self::env("GPUSTACK_MEM_PER_JOB_GIB", "mem_per_job_gib"));
        }
        provisioners.push(provisioner("framework", "uv, Python, torch", None, env));
    }
    if i.fabric {
        let title = format!("{} fabric stack", common.fabric_name());
        provisioners.push(provisioner(
            "multinode",
            &title,
            Some("enable_multinode"),
            vec![jobs()],
        ));
    }
    if i.inference {
        provisioners.push(provisioner(
            "inference",
            "inference layer",
            Some("enable_inference"),
            vec![jobs()],
        ));
    }
    if i.training {
        provisioners.push(provisioner(
            "training",
            "training layer",
            Some("enable_training"),
            vec![jobs()],
        ));
    }
    if i.validate {
        let mut env = vec![jobs()];
        if i.fabric {
            env.push(ScriptEnv {
                name: "GPUSTACK_MULTINODE".into(),
                var: "enable_multinode".into(),
            });
        }
        provisioners.push(provisioner("validate", "nccl-tests", None, env));
    }
    provisioners
}

/// What is not verified on the VM image, besides the notes next to each pin in the
/// scripts: the exporter image, the container plan's notes that apply to a VM, uv's tag.
fn unverified(host: &HostPlan, dp: &InstallPlan, uv: Option<&Uv>) -> Vec<String> {
    let mut unverified = Vec::new();
    if let Some(e) = &host.exporter {
        for u in &e.unverified {
            unverified.push(format!("DCGM Exporter image `{}`: {u}", e.reference));
        }
    }
    unverified.extend(
        dp.unverified
            .iter()
            .filter(|u| {
                !u.starts_with("nvidia/cuda base images")
                    && !u.starts_with("NCCL ")
                    && !u.starts_with("no validate stage")
            })
            .cloned(),
    );
    if let Some(u) = uv.filter(|u| !u.pinned) {
        unverified.push(format!("uv {}: image pinned by tag only", u.version));
    }
    unverified.push("NVIDIA's repository keyrings and the OS packages outside the stack (Docker, compilers, NUMA tools) come from the repositories over TLS, unpinned".into());
    unverified
}

/// uv and the Python layers the VM image installs (a Python needs uv).
fn python_on_vm(lock: &Lock, dp: &InstallPlan) -> Result<(Option<Uv>, Vec<PyLayer>), Error> {
    let uv = locked::uv(lock)
        .zip(dp.uv_image.as_ref())
        .map(|(p, image)| Uv {
            image: image.clone(),
            version: p.version.clone(),
            pinned: image.contains('@'),
        });
    let py = py_layers(lock, dp)?;
    if py.iter().any(|p| p.name == "framework") && uv.is_none() {
        return Err(bad(
            "the lock has a Python but no `uv` image to install it with".into(),
            "re-lock with `gpustack lock`",
        ));
    }
    Ok((uv, py))
}

/// What the variables of the build depend on.
fn variables<'a>(
    lock: &'a Lock,
    common: &'a Common,
    host: &'a HostPlan,
    os: &'a str,
    dp: &InstallPlan,
) -> VarCtx<'a> {
    let has = |l: Layer| dp.stages.iter().any(|s| s.name == l.name());
    let cpus = locked::host_cpus(lock);
    VarCtx {
        lock,
        common,
        host,
        os,
        images: os_images_for(os, cpus.first().map_or("x86_64", String::as_str)),
        qemu: qemu_sources(&cpus),
        cpus,
        vm_images: locked::vm_images(lock),
        gpu: (lock.hardware.gpus.first()).map_or_else(|| "the GPU".to_string(), |g| g.id.clone()),
        inference: has(Layer::Inference),
        training: has(Layer::Training),
        fabric: !dp.fabric.is_empty(),
        torch_builds: dp
            .torch_build
            .as_ref()
            .is_some_and(crate::plan::torch_build::TorchBuildPlan::builds_here),
    }
}

impl PackerPlan {
    /// Plans the VM images from the lock.
    // long: the plan's fields, each copied or derived from the install plan in one place.
    pub fn new(lock: &Lock, common: &Common) -> Result<PackerPlan, Error> {
        let dp = InstallPlan::new(lock, common)?;
        let os = dp.os.id.clone();
        let repo = dp.os.nvidia_repo.clone();
        let clouds: Vec<Cloud> = (lock.request.deploy.packer.as_ref())
            .map_or_else(|| vec![Cloud::Qemu], |p| p.clouds.clone());
        let has = |l: Layer| dp.stages.iter().any(|s| s.name == l.name());
        let fabric = !dp.fabric.is_empty();
        let host = HostPlan::new(lock);
        let cpus = locked::host_cpus(lock);
        refuse_mixed_clouds(&cpus, &clouds)?;
        let qemu = if clouds.contains(&Cloud::Qemu) {
            qemu_sources(&cpus)
        } else {
            Vec::new()
        };
        let vars = variables(lock, common, &host, &os, &dp).vars(&clouds);
        let examples = vars.examples();
        // Packages of base.sh: the install plan's host packages.
        let base: BasePackages = dp.host.clone();
        // The exporter image is the host plan's: the reference the GPU Operator values use.
        let exporter = host.exporter.as_ref().map(|e| Exporter {
            image: e.reference.clone(),
            version: e.version.clone(),
            source: e.source.clone(),
        });
        let (uv, py) = python_on_vm(lock, &dp)?;
        let acceptance = crate::plan::workload::acceptance(lock, common)?;
        let nccl_tests = nccl_tests(&dp, acceptance);
        // The image name: the host layer (or base), then the optional layers installed.
        let named =
            (lock.layer(Layer::Host).or_else(|| lock.layer(Layer::Base))).ok_or_else(|| {
                bad(
                    "the lock has no layers".into(),
                    "re-lock with `gpustack lock`",
                )
            })?;
        let layers = installed_layers(lock, &py, fabric, nccl_tests.is_some());
        let provisioners = provisioners(
            common,
            &Installs {
                monitoring: exporter.is_some(),
                framework_compiles: py
                    .iter()
                    .find(|p| p.name == "framework")
                    .map(|fw| !fw.compiled.is_empty()),
                torch_builds: dp
                    .torch_build
                    .as_ref()
                    .is_some_and(crate::plan::torch_build::TorchBuildPlan::builds_here),
                fabric,
                inference: has(Layer::Inference),
                training: has(Layer::Training),
                validate: nccl_tests.is_some(),
            },
        );
        let unverified = unverified(&host, &dp, uv.as_ref());
        let driver = dp.driver.clone();
        let crb_repo = dp.os.builder_repo.clone();
        Ok(PackerPlan {
            common: common.clone(),
            host,
            crb_repo,
            pkg: dp.pkg.clone(),
            repo,
            os,
            clouds: clouds.iter().map(|c| c.name().to_string()).collect(),
            sources: sources(&clouds, &qemu),
            plugins: plugins(&clouds, qemu.iter().any(|q| q.arm)),
            qemu,
            cpus,
            groups: vars.groups,
            examples,
            provisioners,
            name_layer: named.layer.name().to_string(),
            name_tag: named
                .hash
                .trim_start_matches("sha256:")
                .chars()
                .take(12)
                .collect(),
            name_hash: named.hash.clone(),
            layers,
            site_hash: site_hash(&common.network.site_env),
            versions_line: (common.versions.iter())
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(","),
            execute_command: "sudo -n env {{ .Vars }} bash '{{ .Path }}'".into(),
            qemu_user: QEMU_USER.into(),
            qemu_smbios: "type=1,serial=ds=nocloud-net;s=http://{{ .HTTPIP }}:{{ .HTTPPort }}/"
                .into(),
            image_name_max: IMAGE_NAME_MAX,
            driver,
            base,
            exporter,
            uv,
            python: dp.python.clone(),
            interpreter: dp.interpreter.clone(),
            py,
            build_env: dp.build_env.clone(),
            ccache_path: dp.ccache_path.clone(),
            torch_build_script: dp
                .torch_build
                .as_ref()
                .filter(|tb| tb.builds_here())
                .map(crate::plan::torch_build::TorchBuildPlan::script)
                .transpose()?,
            torch_build: dp.torch_build.clone(),
            torch_build_venv: TORCH_BUILD_VENV.into(),
            fabric: dp.fabric.clone(),
            fabric_build_deps: dp.fabric_build_deps.clone(),
            fabric_runtime_deps: dp.fabric_runtime_deps.clone(),
            steps: dp.steps.clone(),
            nccl_tests,
            unverified,
        })
    }
}

/// `out/packer/`: the HCL templates, the example variables, the provisioning scripts and
/// the qemu cloud-init seed.
pub fn render(lock: &Lock, common: &Common) -> Result<Vec<RenderedFile>, Error> {
    let plan = PackerPlan::new(lock, common)?;
    #[derive(Serialize)]
    struct Top<'a> {
        plan: &'a PackerPlan,
    }
    let top = crate::render::Context::new(&Top { plan: &plan });
    let t = |name: &str| crate::render::render_with(&format!("packer/{name}.j2"), &top);
    let mut files = vec![
        RenderedFile::new("build.pkr.hcl", t("build.pkr.hcl")?),
        RenderedFile::new("variables.pkr.hcl", t("variables.pkr.hcl")?),
        RenderedFile::new("plugins.pkr.hcl", t("plugins.pkr.hcl")?),
        RenderedFile::new("example.pkrvars.hcl", t("example.pkrvars.hcl")?),
    ];
    if plan.clouds.iter().any(|c| c == "qemu") {
        files.push(RenderedFile::new(
            "cloud-init/user-data",
            t("cloud-init/user-data")?,
        ));
        files.push(RenderedFile::new(
            "cloud-init/meta-data",
            t("cloud-init/meta-data")?,
        ));
        files.push(RenderedFile::new(
            "scripts/qemu-cleanup.sh",
            t("scripts/qemu-cleanup.sh")?,
        ));
    }
    for p in &plan.provisioners {
        files.push(RenderedFile::new(p.script.clone(), t(&p.script)?));
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}
