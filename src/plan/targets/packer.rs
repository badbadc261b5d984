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
//! The pins are the container plan's ([`DockerPlan`]): the same NCCL package, fabric
//! tarballs and requirement lines, so a VM and a container of one lock agree.
//!
//! Image names are content-addressed: `<image_name>-<host>-<layers>`, where `<host>` is the
//! first 12 hex digits of the lock's `host` layer hash (which covers the `base` layer too:
//! driver, CUDA, cuDNN, NCCL, fabric stack, plus the host packages) and `<layers>` is the
//! first 8 hex digits of the sha256 of the closure hashes of the optional layers the
//! toggles install. The same lock and toggles give the same name; a changed pin in any
//! installed layer gives another.

use serde::Serialize;

use super::docker::{DockerPlan, Requirement, SourceBuild};
use crate::core::Cloud;
use crate::core::{Component, Layer};
use crate::error::{Diagnostic, Error, Stage};
use crate::lock::Lock;
use crate::plan::host::{HostPlan, OsPins};
use crate::plan::locked::{self, HostPackage};
use crate::plan::Common;
use crate::render::RenderedFile;

/// GCP image names are at most 63 characters; the suffix takes 1 + 12 + 1 + 8.
const IMAGE_NAME_MAX: usize = 63 - 22;

/// Default disk size of the built image, GiB (CUDA, a torch venv, vLLM and DeepSpeed fit
/// with room for models to be pulled later).
const DISK_SIZE_GB: u32 = 200;

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
    /// CUDA toolkit.
    pub cuda: Option<Cuda>,
    /// cuDNN.
    pub cudnn: Option<Pins>,
    /// NCCL.
    pub nccl: Option<Pins>,
    /// DCGM.
    pub dcgm: Option<Pins>,
    /// Fabric Manager.
    pub fabricmanager: Option<Pins>,
    /// Container Toolkit.
    pub toolkit: Option<Toolkit>,
    /// What `base.sh` holds at the installed version (apt names, dnf specs).
    pub held: Vec<String>,
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
    azure: [&'static str; 3],
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

/// A qemu cloud image pinned to a dated release: (URL, `sha256:<hex>`, source).
type QemuImage = (&'static str, &'static str, &'static str);

/// The qemu cloud image of an OS release: a dated release directory (never the moving
/// `release/` or `latest` one), with the sha256 its publisher lists beside it. The values
/// are those lima-vm/lima pins in its templates; Canonical's `SHA256SUMS` and Rocky's
/// `CHECKSUM` in the same directory publish them. Canonical removes dated releases after a
/// while: set `qemu_source_image_url` and `qemu_source_image_checksum` to a newer one then.
fn qemu_image(os: &str) -> Option<QemuImage> {
    Some(match os {
        "ubuntu20.04" => (
            "https://cloud-images.ubuntu.com/releases/focal/release-20250429/ubuntu-20.04-server-cloudimg-amd64.img",
            "sha256:d8099fc706ba63de95e1e3657a019ce46c4e8eface838319138d1a18f274ddb4",
            "https://cloud-images.ubuntu.com/releases/focal/release-20250429/SHA256SUMS (as pinned by lima-vm/lima templates/_images/ubuntu-20.04.yaml)",
        ),
        "ubuntu22.04" => (
            "https://cloud-images.ubuntu.com/releases/jammy/release-20250516/ubuntu-22.04-server-cloudimg-amd64.img",
            "sha256:a037d6d0299171ba62019f3c3f895eb902c271f8e9676cfe0f22e38070344579",
            "https://cloud-images.ubuntu.com/releases/jammy/release-20250516/SHA256SUMS (as pinned by lima-vm/lima templates/_images/ubuntu-22.04.yaml)",
        ),
        "ubuntu24.04" => (
            "https://cloud-images.ubuntu.com/releases/noble/release-20250430/ubuntu-24.04-server-cloudimg-amd64.img",
            "sha256:bc471ca49de03b5129c65b70f9862b7f4b5e721622fd34ade78132f6f7999e2d",
            "https://cloud-images.ubuntu.com/releases/noble/release-20250430/SHA256SUMS (as pinned by lima-vm/lima templates/_images/ubuntu-24.04.yaml)",
        ),
        "rockylinux8" => (
            "https://dl.rockylinux.org/pub/rocky/8.10/images/x86_64/Rocky-8-GenericCloud-Base-8.10-20240528.0.x86_64.qcow2",
            "sha256:e56066c58606191e96184de9a9183a3af33c59bcbd8740d8b10ca054a7a89c14",
            "https://dl.rockylinux.org/pub/rocky/8.10/images/x86_64/CHECKSUM (as pinned by lima-vm/lima templates/_images/rocky-8.yaml)",
        ),
        "rockylinux9" => (
            "https://dl.rockylinux.org/pub/rocky/9.6/images/x86_64/Rocky-9-GenericCloud-Base-9.6-20250531.0.x86_64.qcow2",
            "sha256:2c72815bb83cadccbede4704780e9b52033722db8a45c3fb02130aa380690a3d",
            "https://dl.rockylinux.org/pub/rocky/9.6/images/x86_64/CHECKSUM (as pinned by lima-vm/lima templates/_images/rocky-9.yaml)",
        ),
        _ => return None,
    })
}

fn os_images(os: &str) -> Option<OsImages> {
    let ubuntu = |aws_ami_name, gcp_family, azure| OsImages {
        aws_ami_name,
        aws_owner: "099720109477",
        aws_user: "ubuntu",
        gcp_family,
        gcp_project: "ubuntu-os-cloud",
        azure,
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

/// NVIDIA's repository directory for an OS: `ubuntu2204`, `rhel9`.
fn repo_name(os: &str) -> String {
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
                i.map_or_else(|| os.to_string(), |i| format!("`{}` ({os} for amd64; the lock records no CPU architecture, use the arm64 name on Grace systems)", i.aws_ami_name))
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
            i.map(|i| i.azure[0]),
            format!("Marketplace image of {os}: publisher."),
        );
        self.image(
            v,
            "azure_image_offer",
            i.map(|i| i.azure[1]),
            "Marketplace image: offer.".into(),
        );
        self.image(
            v,
            "azure_image_sku",
            i.map(|i| i.azure[2]),
            "Marketplace image: SKU (generation 2).".into(),
        );
        v.add("azure_image_version", "string", None, "Required: the exact Marketplace image version (not `latest`, which moves); gpustack records none it could cite. `az vm image list --publisher <publisher> --offer <offer> --sku <sku> --all` lists them.".into());
    }

    /// QEMU: the cloud image the build VM boots and its size.
    fn qemu_vars(&self, v: &mut Vars) {
        let os = self.os;
        v.group("qemu");
        let q = qemu_image(os);
        self.image(v, "qemu_source_image_url", q.map(|q| q.0), format!("Cloud image (qcow2, with cloud-init) of {os} the build VM boots, amd64 (the lock records no CPU architecture): a dated release, never the moving one. Published with its checksum at {}.", q.map_or("(none known)", |q| q.2)));
        self.image(v, "qemu_source_image_checksum", q.map(|q| q.1), "sha256 of the cloud image, as its publisher lists it beside the image (`sha256:<hex>`); Packer checks the download against it, offline.".into());
        v.add(
            "qemu_accelerator",
            "string",
            Some("kvm"),
            "QEMU accelerator: kvm, or tcg where the build host has no KVM.".into(),
        );
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

/// The driver packages at the exact locked version, in NVIDIA's CUDA repository names: apt
/// `nvidia-open-<branch>` / `cuda-drivers-<branch>` at `<version>-1`; dnf `nvidia-driver`,
/// `nvidia-driver-cuda` (nvidia-smi) and `kmod-nvidia-open-dkms` /
/// `kmod-nvidia-latest-dkms` at `<version>` (any release), after enabling the branch's
/// module stream where the repository has one (so its packages are visible; a
/// `dnf module install` would take the stream's newest driver instead).
fn driver(lock: &Lock, apt: bool, repo: &str) -> Driver {
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
    dp: &DockerPlan,
    host: &HostPlan,
    cuda: Option<&Cuda>,
    apt: bool,
) -> Option<Pins> {
    let (r, d) = (dp.nccl_runtime.as_ref()?, dp.nccl_dev.as_ref()?);
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

/// The Python layers of the container plan, with what each compiles on the VM.
fn py_layers(lock: &Lock, dp: &DockerPlan) -> Result<Vec<PyLayer>, Error> {
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
    }
}

/// The Packer plugins of the clouds built for.
fn plugins(clouds: &[Cloud]) -> Vec<Plugin> {
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
                version: ">= 1.0.0".into(),
            }
        })
        .collect()
}

/// The build's sources, one per cloud.
fn sources(clouds: &[Cloud]) -> Vec<String> {
    clouds
        .iter()
        .map(|c| {
            match c {
                Cloud::Aws => "source.amazon-ebs.gpu",
                Cloud::Gcp => "source.googlecompute.gpu",
                Cloud::Azure => "source.azure-arm.gpu",
                Cloud::Qemu => "source.qemu.gpu",
            }
            .to_string()
        })
        .collect()
}

/// The packages `base.sh` installs and holds.
struct BasePackages {
    cuda: Option<Cuda>,
    cudnn: Option<Pins>,
    nccl: Option<Pins>,
    dcgm: Option<Pins>,
    fabricmanager: Option<Pins>,
    toolkit: Option<Toolkit>,
    held: Vec<String>,
}

fn base_packages(lock: &Lock, dp: &DockerPlan, host: &HostPlan, apt: bool) -> BasePackages {
    let cuda = cuda(lock, apt);
    let cudnn = cudnn(lock, cuda.as_ref(), apt);
    let nccl = nccl(lock, dp, host, cuda.as_ref(), apt);
    let dcgm = host_pins(lock, HostPackage::Dcgm, apt);
    let fabricmanager = host_pins(lock, HostPackage::FabricManager, apt);
    let toolkit = toolkit(lock, apt);
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
        toolkit,
        held,
    }
}

/// nccl-tests on the VM: the container plan's build, run as the acceptance test runs it.
fn nccl_tests(
    dp: &DockerPlan,
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
    let mut provisioners = vec![
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
fn unverified(host: &HostPlan, dp: &DockerPlan, uv: Option<&Uv>) -> Vec<String> {
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
fn python_on_vm(lock: &Lock, dp: &DockerPlan) -> Result<(Option<Uv>, Vec<PyLayer>), Error> {
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
    dp: &DockerPlan,
) -> VarCtx<'a> {
    let has = |l: Layer| dp.stages.iter().any(|s| s.name == l.name());
    VarCtx {
        lock,
        common,
        host,
        os,
        images: os_images(os),
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
    pub fn new(lock: &Lock, common: &Common) -> Result<PackerPlan, Error> {
        let dp = DockerPlan::new(lock, common)?;
        let os = locked::cuda_image(lock).and_then(|p| p.os).ok_or_else(|| {
            bad(
                "the lock names no OS release (no `cuda-image` package)".into(),
                "re-lock with `gpustack lock`",
            )
        })?;
        let apt = dp.pkg == "apt";
        let repo = repo_name(&os);
        let clouds: Vec<Cloud> = (lock.request.deploy.packer.as_ref())
            .map_or_else(|| vec![Cloud::Qemu], |p| p.clouds.clone());
        let has = |l: Layer| dp.stages.iter().any(|s| s.name == l.name());
        let fabric = !dp.fabric.is_empty();
        let host = HostPlan::new(lock);
        let vars = variables(lock, common, &host, &os, &dp).vars(&clouds);
        let examples = vars.examples();
        // Packages of base.sh.
        let base = base_packages(lock, &dp, &host, apt);
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
        let driver = driver(lock, apt, &repo);
        // EL's extra repository: PowerTools on Rocky 8, CRB from 9.
        let crb_repo = (os.strip_prefix("rockylinux")).map(|v| {
            String::from(if v.starts_with('8') {
                "powertools"
            } else {
                "crb"
            })
        });
        Ok(PackerPlan {
            common: common.clone(),
            host,
            crb_repo,
            pkg: dp.pkg.clone(),
            repo,
            os,
            clouds: clouds.iter().map(|c| c.name().to_string()).collect(),
            sources: sources(&clouds),
            groups: vars.groups,
            examples,
            plugins: plugins(&clouds),
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
            cuda: base.cuda,
            cudnn: base.cudnn,
            nccl: base.nccl,
            dcgm: base.dcgm,
            fabricmanager: base.fabricmanager,
            toolkit: base.toolkit,
            held: base.held,
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
