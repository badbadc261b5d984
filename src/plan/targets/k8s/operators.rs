//! The NVIDIA GPU Operator's Helm values (`gpu-operator-values.yaml`): the driver it
//! installs or leaves to the hosts, its component images, and GPUDirect RDMA.

use serde::Serialize;

use crate::core::Component;
use crate::lock::Lock;
use crate::plan::locked::{self, HostPackage};
use crate::plan::Common;

/// A component of the GPU Operator values.
#[derive(Clone, Debug, Serialize)]
pub struct OperatorImage {
    /// `toolkit`, `dcgmExporter`.
    pub key: String,
    /// Version/tag to print, when the lock has the package.
    pub version: Option<String>,
    /// Registry path (`nvcr.io/nvidia/k8s`), when the lock names the image.
    pub repository: Option<String>,
    /// Image name (`dcgm-exporter`).
    pub image: Option<String>,
    /// `serviceMonitor.enabled` (the DCGM Exporter's GPU metrics).
    pub service_monitor: bool,
    /// Comments.
    pub notes: Vec<String>,
}

/// `driver.rdma` of the GPU Operator values: written only when GPUDirect RDMA needs the
/// legacy nvidia-peermem module.
#[derive(Clone, Debug, Serialize)]
pub struct OperatorRdma {
    /// `driver.rdma.useHostMofed`: the hosts provide the MLNX_OFED/DOCA-OFED driver
    /// (gpustack's NicClusterPolicy deploys no `ofedDriver`).
    pub use_host_mofed: bool,
    /// Comments.
    pub notes: Vec<String>,
}

/// `gpu-operator-values.yaml`.
#[derive(Clone, Debug, Serialize)]
pub struct OperatorPlan {
    /// Whether the operator installs the driver (false when the lock's driver is installed).
    pub driver_enabled: bool,
    /// The locked driver, or the digest of its container image when the lock read it.
    pub driver_version: String,
    /// `driver.repository` and `driver.image`, written with a digest `version`.
    pub driver_repository: Option<(String, String)>,
    /// Comments on the driver.
    pub driver_notes: Vec<String>,
    /// `driver.kernelModuleType`: the host plan's flavour (`open`, `proprietary`), when the
    /// lock records one.
    pub kernel_module_type: Option<String>,
    /// Why that flavour (comments).
    pub kernel_module_notes: Vec<String>,
    /// `driver.rdma` (nvidia-peermem), only when GPUDirect RDMA needs it.
    pub rdma: Option<OperatorRdma>,
    /// Comments on GPUDirect RDMA where `driver.rdma` stays unset (DMA-BUF, an unknown
    /// kernel-module flavour, a host-installed driver).
    pub rdma_notes: Vec<String>,
    /// The toolkit and DCGM Exporter.
    pub images: Vec<OperatorImage>,
    /// GDRCopy driver (`gdrcopy.enabled`), when the lock has the gdrcopy library.
    pub gdrcopy: Option<String>,
}

/// The driver the operator installs (or not, when the hosts have one): its version or
/// digest, its repository when pulled by digest, and the notes that explain it.
struct OperatorDriver {
    installed: bool,
    version: String,
    repository: Option<(String, String)>,
    notes: Vec<String>,
}

fn operator_driver(lock: &Lock, common: &Common) -> OperatorDriver {
    let driver = lock.component(Component::Driver);
    let installed = lock.hardware.driver_installed;
    let mut driver_notes = Vec::new();
    if installed {
        driver_notes.push(format!(
            "the stack was resolved for the driver installed on the hosts ({}): the operator must not install another",
            common.driver
        ));
    } else {
        driver_notes.push(format!(
            "the stack was resolved for driver {}: the operator must install exactly this one (the CUDA compatibility mode in the lock depends on it)",
            common.driver
        ));
    }
    // The driver container: by the digest the lock read from the registry (the operator
    // then uses it as is: NVIDIA/gpu-operator `resolveDriverTag`), else the version the
    // operator appends the node's OS to.
    let driver_image = locked::gpu_operator_driver(lock)
        .filter(|_| !installed)
        .and_then(|p| {
            let image = p.image.as_deref()?;
            let tag = p.tag.clone()?;
            let (repository, name) = image.rsplit_once('/')?;
            Some((repository.to_string(), name.to_string(), tag, p.digest))
        });
    let mut driver_version = common.driver.clone();
    let mut driver_repository = None;
    if !installed {
        match &driver_image {
            Some((repository, name, tag, Some(digest))) => {
                driver_notes.push(format!(
                    "`{repository}/{name}:{tag}`, pulled by the digest the lock read from the registry (the operator appends no OS tag to a digest)"
                ));
                driver_version = digest.clone();
                driver_repository = Some((repository.clone(), name.clone()));
            }
            Some((repository, name, tag, None)) => driver_notes.push(format!(
                "`{repository}/{name}:{tag}` is pinned by tag only: the lock could not read its digest from the registry (lock with nvcr.io or a `[resolve] registries` mirror reachable)"
            )),
            None => driver_notes.push("the operator appends the node OS to the driver image tag (`<version>-<os>`); the catalog knows that tag form for Ubuntu and Rocky Linux nodes only, so the lock records no digest for it".into()),
        }
    }
    if let Some(d) = driver {
        driver_notes.push(format!("source: {}", d.source));
    }
    if let Some(fm) = locked::host_package(lock, HostPackage::FabricManager) {
        driver_notes.push(if installed {
            format!(
                "NVSwitch: Fabric Manager {} must run on the hosts, matching the driver exactly",
                fm.version
            )
        } else {
            format!(
                "NVSwitch: the driver container runs Fabric Manager ({}), which matches the driver",
                fm.version
            )
        });
    }
    let reqs = locked::host_requirements(lock);
    if !reqs.is_empty() {
        let what: Vec<String> = reqs
            .iter()
            .flat_map(|r| r.apt.iter().map(|p| format!("`{p}`")))
            .chain(
                reqs.iter()
                    .flat_map(|r| &r.kernel_modules)
                    .map(|m| format!("the `{m}` kernel module loaded at boot")),
            )
            .collect();
        driver_notes.push(if installed {
            format!(
                "NVSwitch: Fabric Manager starts NVLSM on these boards; the hosts also need {} (the lock's {})",
                what.join(", "),
                reqs.iter().map(|r| format!("`{}`", r.name)).collect::<Vec<_>>().join(", ")
            )
        } else {
            format!(
                "NVSwitch: the driver container installs nvlsm and infiniband-diags itself and, on boards with a CX7 bridge for NVLink management, waits for the hosts' mlx5_core and ib_umad modules before it starts Fabric Manager with NVLSM: the hosts need {} (source: {DRIVER_CONTAINER_NVLINK5})",
                what.iter().filter(|w| w.contains("kernel module")).cloned().collect::<Vec<_>>().join(", ")
            )
        });
    }
    OperatorDriver {
        installed,
        version: driver_version,
        repository: driver_repository,
        notes: driver_notes,
    }
}

/// Where NVIDIA's GPU Operator driver container installs NVLSM and waits for `ib_umad` on
/// fourth-generation NVSwitch (NVLink5) boards.
const DRIVER_CONTAINER_NVLINK5: &str = "https://github.com/NVIDIA/gpu-driver-container/blob/06a208ca9747c82b1ba99b76ecdcf2469b0a0207/ubuntu24.04/nvidia-driver (_start_daemons, _ensure_nvlink5_prerequisites) and ubuntu24.04/install.sh (nvlink5_pkgs_install)";

/// The Container Toolkit and DCGM Exporter images the operator deploys: the lock's, else
/// the chart's defaults.
fn operator_images(lock: &Lock, host: &crate::plan::host::HostPlan) -> Vec<OperatorImage> {
    let tag_note = "image tag suffixes (e.g. `-ubuntu22.04`, `-ubi9`) are not verified by the catalog: append the one NVIDIA publishes for this version if the bare tag does not exist";
    let mut images = Vec::new();
    let toolkit_image = locked::container_toolkit_image(lock).and_then(|i| {
        let image = i.image.clone()?;
        let (repository, name) = image.rsplit_once('/')?;
        Some(pinned_operator_image("toolkit", repository, name, &i))
    });
    match (
        locked::host_package(lock, HostPackage::ContainerToolkit),
        toolkit_image,
    ) {
        (Some(p), Some(mut t)) => {
            t.notes.insert(
                0,
                format!(
                    "nvidia-container-toolkit {}, the lock's host package; source: {}",
                    p.version, p.source
                ),
            );
            images.push(t);
        }
        (Some(p), None) => images.push(OperatorImage {
            key: "toolkit".into(),
            version: Some(format!("v{}", p.version)),
            repository: None,
            image: None,
            service_monitor: false,
            notes: vec![
                format!(
                    "nvidia-container-toolkit {}, the lock's host package; source: {}",
                    p.version, p.source
                ),
                tag_note.into(),
            ],
        }),
        (None, _) => images.push(OperatorImage {
            key: "toolkit".into(),
            version: None,
            repository: None,
            image: None,
            service_monitor: false,
            notes: vec![
                "the lock has no nvidia-container-toolkit package: the chart's default is used"
                    .into(),
            ],
        }),
    }
    match &host.exporter {
        // The host plan's reference: the image Packer's dcgm-exporter service runs.
        Some(e) => {
            let mut notes = vec![format!("DCGM Exporter {}; source: {}", e.version, e.source)];
            notes.extend(e.unverified.iter().cloned());
            // The operator pulls `repository/image@version` when `version` is a digest
            // (NVIDIA/gpu-operator, api/nvidia/v1/clusterpolicy_types.go, `imagePath`).
            if e.digest.is_some() {
                notes.push(format!(
                    "tag `{}`, pulled by the digest the lock resolved",
                    e.tag
                ));
            }
            notes.extend(locked::dcgm_exporter(lock).and_then(|p| p.observation));
            images.push(OperatorImage {
                key: "dcgmExporter".into(),
                version: Some(e.digest.clone().unwrap_or_else(|| e.tag.clone())),
                repository: Some(e.repository.clone()),
                image: Some(e.name.clone()),
                service_monitor: true,
                notes,
            });
        }
        None => images.push(OperatorImage {
            key: "dcgmExporter".into(),
            version: None,
            repository: None,
            image: None,
            service_monitor: true,
            notes: vec![
                "the lock has no dcgm-exporter package: the chart's default is used".into(),
            ],
        }),
    }
    images
}

/// An operator component image the lock names (`repository/name:tag`): by its digest
/// where the lock has one (the operator pulls `repository/image@version` when `version`
/// is a `sha256:` digest: NVIDIA/gpu-operator, api/nvidia/v1/clusterpolicy_types.go,
/// `imagePath`), else by its tag.
fn pinned_operator_image(
    key: &str,
    repository: &str,
    name: &str,
    i: &locked::PinnedImage,
) -> OperatorImage {
    let tag = i.tag.clone().unwrap_or_else(|| i.version.clone());
    let mut notes = Vec::new();
    match &i.digest {
        Some(_) => notes.push(format!(
            "`{repository}/{name}:{tag}`, pulled by the digest the lock records"
        )),
        None => notes.push(format!(
            "`{repository}/{name}:{tag}` is pinned by tag only: the lock could not read its digest from the registry (lock with nvcr.io or a `[resolve] registries` mirror reachable)"
        )),
    }
    notes.extend(i.observation.clone());
    OperatorImage {
        key: key.into(),
        version: Some(i.digest.clone().unwrap_or(tag)),
        repository: Some(repository.into()),
        image: Some(name.into()),
        service_monitor: false,
        notes,
    }
}

pub(super) fn operator_plan(lock: &Lock, common: &Common) -> OperatorPlan {
    let driver = operator_driver(lock, common);
    let host = crate::plan::host::HostPlan::new(lock);
    let images = operator_images(lock, &host);
    let (kernel_module_type, kernel_module_notes) = match &host.kernel_modules {
        Some(k) => (
            Some(k.name.clone()),
            k.because
                .iter()
                .filter(|b| !b.contains("Packer"))
                .cloned()
                .chain([format!("source: {}", k.source)])
                .collect(),
        ),
        None => (None, Vec::new()),
    };
    let (rdma, rdma_notes) = operator_rdma(common, driver.installed);
    OperatorPlan {
        driver_enabled: !driver.installed,
        driver_version: driver.version,
        driver_repository: driver.repository,
        driver_notes: driver.notes,
        kernel_module_type,
        kernel_module_notes,
        rdma,
        rdma_notes,
        images,
        gdrcopy: locked::host_package(lock, HostPackage::Gdrcopy).map(|p| p.version),
    }
}

/// `driver.rdma`: set only when GPUDirect RDMA needs nvidia-peermem (the proprietary
/// kernel modules); DMA-BUF (the open modules) needs no operator setting.
fn operator_rdma(common: &Common, installed: bool) -> (Option<OperatorRdma>, Vec<String>) {
    use crate::plan::network::{GpuDirect, GPU_OPERATOR_RDMA};
    if !(common.rdma && common.nodes > 1) {
        return (None, Vec::new());
    }
    let source = format!("source: {GPU_OPERATOR_RDMA}");
    match common.network.gpudirect {
        Some(GpuDirect::DmaBuf) => (
            None,
            vec![
                "GPUDirect RDMA uses DMA-BUF (the lock's open kernel modules): driver.rdma stays unset, no nvidia-peermem module is loaded".into(),
                source,
            ],
        ),
        Some(GpuDirect::PeerMem) if !installed => (
            Some(OperatorRdma {
                use_host_mofed: true,
                notes: vec![
                    "GPUDirect RDMA through nvidia-peermem (the lock's proprietary kernel modules): it needs the MLNX_OFED/DOCA-OFED driver, which the hosts provide (gpustack's NicClusterPolicy deploys no ofedDriver)".into(),
                    source,
                ],
            }),
            Vec::new(),
        ),
        Some(GpuDirect::PeerMem) => (
            None,
            vec![
                "GPUDirect RDMA through nvidia-peermem (proprietary kernel modules): the hosts' driver must load it (`modprobe nvidia-peermem`), with DOCA-OFED installed".into(),
                source,
            ],
        ),
        None => (
            None,
            vec![
                "the lock records no kernel-module flavour, so gpustack cannot say whether GPUDirect RDMA uses DMA-BUF or nvidia-peermem: driver.rdma stays unset".into(),
                source,
            ],
        ),
    }
}
