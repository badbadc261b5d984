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

use super::locked::{self, HostPackage, PinSource};
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
    /// `nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless`, with `@sha256:…` when
    /// the lock resolved its digest.
    pub reference: String,
    /// `nvcr.io/nvidia/k8s` (the GPU Operator's `repository`).
    pub repository: String,
    /// `dcgm-exporter` (the GPU Operator's `image`).
    pub name: String,
    /// `4.6.0-4.8.3-distroless` (the GPU Operator's `version`).
    pub tag: String,
    /// `4.6.0-4.8.3`: DCGM and exporter versions.
    pub version: String,
    /// `sha256:…`, when the lock resolved the tag's digest.
    pub digest: Option<String>,
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

/// A lock package's OS pins for one package manager, and what is not verified about them
/// (from the lock's `<manager>-source`: `repository` when `gpustack lock` read them from
/// the repository's index, `catalog` for the catalog's observation, `naming` for the
/// catalog's naming rule).
#[derive(Clone, Debug, Serialize)]
pub struct OsPins {
    /// `libnccl2=2.27.5-1+cuda12.9`, … in the manager's syntax.
    pub pins: Vec<String>,
    /// Comments for what was not read from the repository.
    pub unverified: Vec<String>,
}

impl OsPins {
    /// The pins of lock package `name` for `manager` (`apt`, `dnf`); `None` when the lock
    /// has none (a lock written before the stack's OS packages were locked).
    pub(crate) fn of(lock: &Lock, package: HostPackage, manager: &str) -> Option<OsPins> {
        let p = locked::host_package(lock, package)?;
        let (pins, from) = p.pins(manager);
        let pins = pins.to_vec();
        if pins.is_empty() {
            return None;
        }
        let shown = pins
            .iter()
            .map(|x| format!("`{x}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let unverified = match from {
            PinSource::Repository => Vec::new(),
            PinSource::Naming => vec![format!(
                "{shown}: NVIDIA's naming (the catalog's rule), not read from the repository's index; `gpustack lock` with the repository or a `[resolve] {manager}` mirror reachable checks and corrects it"
            )],
            PinSource::Catalog => vec![format!(
                "{shown}: as the catalog observed it, not read from the repository's index at lock time"
            )],
        };
        Some(OsPins { pins, unverified })
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
    /// assert!(host.exporter.unwrap().reference.contains("-distroless@sha256:"));
    /// # Ok::<(), gpustack::Error>(())
    /// ```
    pub fn new(lock: &Lock) -> HostPlan {
        let kernel_modules = locked::kernel_modules(lock).and_then(|f| {
            let flavour = match f.flavour.as_str() {
                "open" => Flavour::Open,
                "proprietary" => Flavour::Proprietary,
                _ => return None,
            };
            Some(KernelModules {
                flavour,
                name: flavour.name().into(),
                because: f.because,
                source: f.source,
            })
        });
        let exporter = locked::dcgm_exporter(lock).and_then(|p| {
            let image = p.image.as_deref()?;
            let (repository, name) = image.rsplit_once('/')?;
            let (tag, tag_sourced) = match &p.tag {
                Some(t) => (t.clone(), true),
                None => (p.version.clone(), false),
            };
            // Pulled by digest where the lock resolved one (`gpustack lock`, src/resolve).
            let digest = p.digest.as_deref();
            let mut unverified = Vec::new();
            if digest.is_none() {
                unverified.push(
                    "the lock records no digest for the exporter image: it is pinned by tag only"
                        .to_string(),
                );
            }
            if !tag_sourced {
                unverified.push(format!(
                    "the catalog lists no published tag for DCGM Exporter {}: the bare version is used as the tag",
                    p.version
                ));
            }
            Some(ExporterImage {
                reference: match digest {
                    Some(d) => format!("{image}:{tag}@{d}"),
                    None => format!("{image}:{tag}"),
                },
                repository: repository.to_string(),
                name: name.to_string(),
                tag,
                version: p.version.clone(),
                digest: digest.map(str::to_string),
                tag_sourced,
                source: p.source.clone(),
                unverified,
            })
        });
        let dcgm_diag = locked::dcgm_cuda_major(lock).map(|m| DcgmDiag {
            package: format!("datacenter-gpu-manager-4-cuda{m}"),
            cuda_major: m,
        });
        let nccl = locked::nccl_build(lock).map(|f| NcclBuild {
            version: f.nccl,
            cuda: f.cuda,
            known: f.known,
            because: f.because,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Catalog;

    fn host(spec: &str) -> HostPlan {
        let cat = Catalog::stock().unwrap();
        let spec = if spec.contains("[components]") {
            spec.to_string()
        } else {
            format!("{spec}[components]\ncuda = \"*\"\n")
        };
        let text = format!("[stack]\nname = \"t\"\n{spec}");
        HostPlan::new(&crate::lock_spec(&cat, "gpustack.toml", &text).unwrap())
    }

    fn flavour(spec: &str) -> (String, Vec<String>) {
        let k = host(spec).kernel_modules.unwrap();
        (k.name, k.because)
    }

    #[test]
    fn the_kernel_module_flavour_follows_the_gpus_and_the_branch() {
        // Volta cannot use the open modules, whatever the branch.
        let (f, why) = flavour("[hardware]\ngpus = [\"v100\"]\n[components]\ncuda = \"*\"\n");
        assert_eq!(f, "proprietary");
        assert!(
            why[0].contains("cannot use NVIDIA's open kernel modules"),
            "{why:?}"
        );
        // Hopper: the branch's default (open from R560).
        let (f, _) = flavour("[hardware]\ngpus = [\"h100\"]\ndriver = \"550.54.15\"\n");
        assert_eq!(f, "proprietary");
        let (f, _) = flavour("[hardware]\ngpus = [\"h100\"]\ndriver = \"595.91.07\"\n");
        assert_eq!(f, "open");
        // Grace Hopper (by product) and Blackwell need them, on any branch.
        let (f, why) = flavour("[hardware]\ngpus = [\"gh200\"]\n");
        assert_eq!(f, "open");
        assert!(why[0].contains("GH200"), "{why:?}");
        let (f, _) = flavour("[hardware]\ngpus = [\"b200\"]\n");
        assert_eq!(f, "open");
        // No GPUs: the arch list's architectures.
        let (f, why) = flavour("[hardware]\narchs = [\"sm_80\"]\ndriver = \"535.183.06\"\n");
        assert_eq!(f, "proprietary");
        assert!(why[0].starts_with("no GPUs named"), "{why:?}");
    }

    #[test]
    fn nccl_packages_are_a_build_nvidia_publishes() {
        // NCCL 2.27.5 has +cuda12.4 and +cuda12.9 builds, none for 12.8: the newer one.
        let h = host(
            "[hardware]\ngpus = [\"h100\"]\n[components]\ncuda = \"12.8\"\nnccl = \"2.27.5\"\n",
        );
        let b = h.nccl.unwrap();
        assert_eq!((b.cuda.as_str(), b.known), ("12.9", true));
        assert_eq!(
            b.pins(true),
            (
                "libnccl2=2.27.5-1+cuda12.9".to_string(),
                "libnccl-dev=2.27.5-1+cuda12.9".to_string()
            )
        );
        assert_eq!(b.pins(false).0, "libnccl-2.27.5-1+cuda12.9");
        // The locked minor when NVIDIA builds it.
        let h = host(
            "[hardware]\ngpus = [\"h100\"]\n[components]\ncuda = \"12.4\"\nnccl = \"2.21.5\"\n",
        );
        assert_eq!(h.nccl.unwrap().cuda, "12.4");
    }

    #[test]
    fn dcgm_diagnostics_follow_the_cuda_the_driver_runs() {
        // R595 runs CUDA 13; a V100 on R580 cannot (CUDA 13 dropped Volta): CUDA 12.
        let h = host("[hardware]\ngpus = [\"h100\"]\ndriver = \"595.91.07\"\n");
        assert_eq!(
            h.dcgm_diag.unwrap().package,
            "datacenter-gpu-manager-4-cuda13"
        );
        let h = host("[hardware]\ngpus = [\"v100\"]\n[components]\ncuda = \"*\"\n");
        assert_eq!(
            h.dcgm_diag.unwrap().package,
            "datacenter-gpu-manager-4-cuda12"
        );
        // A CUDA 13 toolkit on R535 through cuda-compat: the driver still reports 12.
        let h = host(
            "[hardware]\ngpus = [\"h100\"]\ndriver = \"535.104.05\"\n[components]\ncuda = \"13.0\"\n",
        );
        assert_eq!(h.dcgm_diag.unwrap().cuda_major, "12");
    }

    #[test]
    fn one_exporter_reference_with_a_published_tag() {
        let e = host("[hardware]\ngpus = [\"h100\"]\n").exporter.unwrap();
        // By the digest NVIDIA's GPU Operator bundle names for the tag (catalog/packages.toml).
        assert_eq!(
            e.reference,
            "nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless@sha256:613ab03c11d442fd960ff515f547e9921537454a712d08160bc8f677f89f1c35"
        );
        assert_eq!(
            format!(
                "{}/{}:{}@{}",
                e.repository,
                e.name,
                e.tag,
                e.digest.as_deref().unwrap_or_default()
            ),
            e.reference
        );
        assert!(e.tag_sourced);
    }
}
