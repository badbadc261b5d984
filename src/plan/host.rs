//! The host plan: every decision about the GPU hosts that more than one target renders,
//! derived from the lock alone.
//!
//! * the driver's **kernel-module flavour** (the lock's `kernel-modules` fact): Packer's
//!   `driver_kernel_modules` default and the GPU Operator's `driver.kernelModuleType`;
//! * the **DCGM Exporter image**, one reference (`repository/name:tag`) that Packer's
//!   systemd unit and the GPU Operator's `dcgmExporter` values both print;
//! * the **DCGM diagnostics package** (`datacenter-gpu-manager-4-cuda<N>`) that `dcgmi diag`
//!   needs, for the CUDA major the lock chose;
//! * the **NCCL packages** (`libnccl2=<nccl>-1+cuda<X.Y>`) at the CUDA build the lock chose
//!   (the Dockerfile, the Apptainer definition and Packer's `base.sh` install them);
//! * the **paths** of the VM image that bare-metal jobs use: the virtual environment and
//!   nccl-tests' binaries (Packer installs them there, Slurm runs them from there).
//!
//! Targets format these values; none of them decides one.

use serde::Serialize;

use crate::lock::Lock;

/// Where bare-metal jobs find torchrun and vLLM: the virtual environment of the VM image.
pub const HOST_VENV: &str = "/opt/venv";
/// Where Packer builds nccl-tests on the VM image.
pub const HOST_NCCL_TESTS_DIR: &str = "/opt/nccl-tests";
/// Where bare-metal jobs find nccl-tests' binaries on the VM image.
pub const HOST_NCCL_TESTS: &str = "/opt/nccl-tests/build";

/// The NVIDIA driver's kernel-module flavour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Flavour {
    /// NVIDIA's open GPU kernel modules (`nvidia-open`, `kmod-nvidia-open-dkms`).
    Open,
    /// The proprietary modules (`cuda-drivers`, `kmod-nvidia-latest-dkms`).
    Proprietary,
}

impl Flavour {
    /// `open` or `proprietary`: the lock's spelling, Packer's variable value and the GPU
    /// Operator's `driver.kernelModuleType`.
    pub fn name(self) -> &'static str {
        match self {
            Flavour::Open => "open",
            Flavour::Proprietary => "proprietary",
        }
    }
}

/// The kernel-module flavour and why.
#[derive(Clone, Debug, Serialize)]
pub struct KernelModules {
    /// The flavour.
    pub flavour: Flavour,
    /// `open` / `proprietary`.
    pub name: String,
    /// The lock's reasons.
    pub because: Vec<String>,
    /// Where the rule comes from.
    pub source: String,
}

/// The DCGM Exporter image: one reference for every target.
#[derive(Clone, Debug, Serialize)]
pub struct ExporterImage {
    /// `nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless`.
    pub reference: String,
    /// `nvcr.io/nvidia/k8s` (the GPU Operator's `repository`).
    pub repository: String,
    /// `dcgm-exporter` (the GPU Operator's `image`).
    pub name: String,
    /// `4.6.0-4.8.3-distroless` (the GPU Operator's `version`).
    pub tag: String,
    /// `4.6.0-4.8.3`: DCGM and exporter versions.
    pub version: String,
    /// Whether the catalog lists this tag as published (else the bare version is used).
    pub tag_sourced: bool,
    /// Where the version comes from.
    pub source: String,
    /// What is not verified about the reference.
    pub unverified: Vec<String>,
}

/// The package `dcgmi diag` needs.
#[derive(Clone, Debug, Serialize)]
pub struct DcgmDiag {
    /// `12`.
    pub cuda_major: String,
    /// `datacenter-gpu-manager-4-cuda12`.
    pub package: String,
}

/// The CUDA build of the NCCL packages.
#[derive(Clone, Debug, Serialize)]
pub struct NcclBuild {
    /// `2.27.5`.
    pub version: String,
    /// `12.9`: the `+cuda12.9` of the package version.
    pub cuda: String,
    /// Whether the catalog lists that build as published.
    pub known: bool,
    /// The lock's reasons.
    pub because: Vec<String>,
}

impl NcclBuild {
    /// The runtime and development packages in the package manager's pin syntax:
    /// `libnccl2=2.27.5-1+cuda12.9` (apt), `libnccl-2.27.5-1+cuda12.9` (dnf).
    pub fn pins(&self, apt: bool) -> (String, String) {
        let v = format!("{}-1+cuda{}", self.version, self.cuda);
        if apt {
            (format!("libnccl2={v}"), format!("libnccl-dev={v}"))
        } else {
            (format!("libnccl-{v}"), format!("libnccl-devel-{v}"))
        }
    }
}

/// The host plan. LOAD-BEARING: Packer's scripts and the GPU Operator values print these
/// fields.
#[derive(Clone, Debug, Serialize)]
pub struct HostPlan {
    /// The driver's kernel-module flavour (none when the catalog knows no rule for the GPUs).
    pub kernel_modules: Option<KernelModules>,
    /// The DCGM Exporter image.
    pub exporter: Option<ExporterImage>,
    /// The DCGM diagnostics package.
    pub dcgm_diag: Option<DcgmDiag>,
    /// The NCCL packages' build.
    pub nccl: Option<NcclBuild>,
    /// The VM image's virtual environment: `/opt/venv`.
    pub venv: String,
    /// Where nccl-tests is built: `/opt/nccl-tests`.
    pub nccl_tests_dir: String,
    /// nccl-tests' binaries: `/opt/nccl-tests/build`.
    pub nccl_tests: String,
}

impl HostPlan {
    /// Derives the host decisions from the lock.
    ///
    /// ```
    /// let text = std::fs::read_to_string("lockfiles/h100-ib-train-serve.lock").unwrap();
    /// let lock = gpustack::Lock::parse("gpustack.lock", &text)?;
    /// let host = gpustack::plan::host::HostPlan::new(&lock);
    /// assert_eq!(host.kernel_modules.unwrap().name, "open");
    /// assert!(host.exporter.unwrap().reference.ends_with("-distroless"));
    /// # Ok::<(), gpustack::Error>(())
    /// ```
    pub fn new(lock: &Lock) -> HostPlan {
        let kernel_modules = lock.fact("kernel-modules", "driver").and_then(|f| {
            let flavour = match f.get("flavour")? {
                "open" => Flavour::Open,
                "proprietary" => Flavour::Proprietary,
                _ => return None,
            };
            Some(KernelModules {
                flavour,
                name: flavour.name().into(),
                because: f.because.clone(),
                source: f.source.clone(),
            })
        });
        let exporter = lock.package("dcgm-exporter").and_then(|p| {
            let image = p.get("image")?;
            let (repository, name) = image.rsplit_once('/')?;
            let (tag, tag_sourced) = match p.get("image-tag") {
                Some(t) => (t.to_string(), true),
                None => (p.version.clone(), false),
            };
            let mut unverified = vec![
                "the lock records no digest for the exporter image: it is pinned by tag only"
                    .to_string(),
            ];
            if !tag_sourced {
                unverified.push(format!(
                    "the catalog lists no published tag for DCGM Exporter {}: the bare version is used as the tag",
                    p.version
                ));
            }
            Some(ExporterImage {
                reference: format!("{image}:{tag}"),
                repository: repository.to_string(),
                name: name.to_string(),
                tag,
                version: p.version.clone(),
                tag_sourced,
                source: p.source.clone(),
                unverified,
            })
        });
        let dcgm_diag = lock.package("dcgm").and_then(|p| {
            let m = p.get("cuda-major")?;
            Some(DcgmDiag {
                cuda_major: m.to_string(),
                package: format!("datacenter-gpu-manager-4-cuda{m}"),
            })
        });
        let nccl = lock
            .facts
            .iter()
            .find(|f| f.kind == "nccl-build")
            .and_then(|f| {
                Some(NcclBuild {
                    version: f.get("nccl").unwrap_or(&f.key).to_string(),
                    cuda: f.get("cuda")?.to_string(),
                    known: f.get("known") == Some("true"),
                    because: f.because.clone(),
                })
            });
        HostPlan {
            kernel_modules,
            exporter,
            dcgm_diag,
            nccl,
            venv: HOST_VENV.into(),
            nccl_tests_dir: HOST_NCCL_TESTS_DIR.into(),
            nccl_tests: HOST_NCCL_TESTS.into(),
        }
    }
}
