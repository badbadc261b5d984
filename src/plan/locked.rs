//! Typed views of the lock's packages, facts and component fields: the one place in `plan/`
//! that knows their string keys (`image-digest`, `kernel-modules`, `cuda-image`, …).
//!
//! The lock stores what the catalog and the resolvers found as `name → Field` tables, so
//! that its format can grow without a type per package. The plans read typed values: each
//! view here is built from the lock through its public accessors ([`Lock::package`],
//! [`Lock::fact`], [`Lock::component`]) and says, in its fields, what a plan may rely on. A
//! key renamed in the lock is a change to this file alone.

use crate::core::{Cloud, Component, Layer};
use crate::lock::{Lock, LockedComponent, LockedFact, LockedPackage};

/// The base images' package: `nvidia/cuda`'s runtime and devel tags for the locked CUDA
/// and OS.
pub(crate) const CUDA_IMAGE: &str = "cuda-image";

/// A container image the lock pins: the `uv` and Dockerfile-frontend images, DCGM
/// Exporter, the GPU Operator's driver container, the RDMA device plugin.
#[derive(Clone, Debug)]
pub(crate) struct PinnedImage {
    /// `repository/name`, when the lock records it.
    pub(crate) image: Option<String>,
    /// The published tag, when the catalog lists one.
    pub(crate) tag: Option<String>,
    /// `sha256:…`, when the lock resolved the tag's digest.
    pub(crate) digest: Option<String>,
    /// The package version.
    pub(crate) version: String,
    /// Where the catalog found it.
    pub(crate) source: String,
    /// When the digest is the catalog's dated observation rather than the registry's
    /// answer: the lock's line saying which (`` `image:tag`: catalog observation of … ``).
    pub(crate) observation: Option<String>,
}

impl PinnedImage {
    fn of(p: &LockedPackage) -> PinnedImage {
        let image = p.get("image").map(str::to_string);
        let tag = p.get("image-tag").map(str::to_string);
        let observation = image
            .as_deref()
            .and_then(|i| observation(p, &format!("{i}:{}", tag.as_deref().unwrap_or(&p.version))));
        PinnedImage {
            image,
            tag,
            digest: p.get("image-digest").map(str::to_string),
            version: p.version.clone(),
            source: p.source.clone(),
            observation,
        }
    }

    /// `image:version[@digest]`: the reference of an image tagged by its version (uv, the
    /// Dockerfile frontend); `None` without an image.
    pub(crate) fn by_version(&self) -> Option<String> {
        let image = self.image.as_deref()?;
        Some(match &self.digest {
            Some(d) => format!("{image}:{}@{d}", self.version),
            None => format!("{image}:{}", self.version),
        })
    }
}

/// The `uv` image that installs the locked Python.
pub(crate) fn uv(lock: &Lock) -> Option<PinnedImage> {
    lock.package("uv").map(PinnedImage::of)
}

/// The Dockerfile syntax frontend (`# syntax=`).
pub(crate) fn dockerfile_frontend(lock: &Lock) -> Option<PinnedImage> {
    lock.package("dockerfile-frontend").map(PinnedImage::of)
}

/// The `because` line of `reference`'s catalog digest observation, when the lock's digest
/// is one (`select::observation_because`; `gpustack lock` removes it when the registry
/// answers).
fn observation(p: &LockedPackage, reference: &str) -> Option<String> {
    let marker = format!("`{reference}`: {}", crate::select::OBSERVATION);
    p.because.iter().find(|b| b.starts_with(&marker)).cloned()
}

/// The GPU Operator's Container Toolkit image (`nvcr.io/nvidia/k8s/container-toolkit`),
/// when the lock's toolkit package names it.
pub(crate) fn container_toolkit_image(lock: &Lock) -> Option<PinnedImage> {
    lock.package(HostPackage::ContainerToolkit.name())
        .map(PinnedImage::of)
        .filter(|p| p.image.is_some())
}

/// The DCGM Exporter image.
pub(crate) fn dcgm_exporter(lock: &Lock) -> Option<PinnedImage> {
    lock.package("dcgm-exporter").map(PinnedImage::of)
}

/// The GPU Operator's driver container.
pub(crate) fn gpu_operator_driver(lock: &Lock) -> Option<PinnedImage> {
    lock.package("gpu-operator-driver").map(PinnedImage::of)
}

/// The RDMA shared device plugin the NicClusterPolicy deploys.
pub(crate) fn rdma_shared_dev_plugin(lock: &Lock) -> Option<PinnedImage> {
    lock.package("k8s-rdma-shared-dev-plugin")
        .map(PinnedImage::of)
}

/// A Network Operator component image of the NicClusterPolicy (`multus-cni`,
/// `cni-plugins`, `nvidia-k8s-ipam`, `ipoib-cni`).
pub(crate) fn network_operator_image(lock: &Lock, name: &str) -> Option<PinnedImage> {
    lock.package(name).map(PinnedImage::of)
}

/// One flavour (`runtime`, `devel`) of the `nvidia/cuda` base image.
#[derive(Clone, Debug)]
pub(crate) struct CudaImageTag {
    /// `12.8.1-cudnn-runtime-ubuntu24.04`.
    pub(crate) tag: Option<String>,
    /// `sha256:…`, when the catalog has a sourced digest.
    pub(crate) digest: Option<String>,
    /// When the digest is the catalog's dated observation: the lock's line saying which.
    pub(crate) observation: Option<String>,
}

/// The `nvidia/cuda` base images of the locked CUDA release and OS.
#[derive(Clone, Debug)]
pub(crate) struct CudaImage {
    /// `nvidia/cuda`.
    pub(crate) repository: String,
    /// The CUDA version the tags belong to.
    pub(crate) version: String,
    /// `ubuntu24.04`, `rockylinux9`.
    pub(crate) os: Option<String>,
    /// The runtime image (every runtime stage).
    pub(crate) runtime: CudaImageTag,
    /// The devel image (every build stage).
    pub(crate) devel: CudaImageTag,
}

/// The lock's `nvidia/cuda` base images.
pub(crate) fn cuda_image(lock: &Lock) -> Option<CudaImage> {
    let p = lock.package(CUDA_IMAGE)?;
    let repository = p.get("repository").unwrap_or("nvidia/cuda").to_string();
    let tag = |flavour: &str| {
        let tag = p.get(&format!("{flavour}-tag")).map(str::to_string);
        CudaImageTag {
            observation: tag
                .as_deref()
                .and_then(|t| observation(p, &format!("{repository}:{t}"))),
            tag,
            digest: p.get(&format!("{flavour}-digest")).map(str::to_string),
        }
    };
    Some(CudaImage {
        repository: repository.clone(),
        version: p.version.clone(),
        os: p.get("os").map(str::to_string),
        runtime: tag("runtime"),
        devel: tag("devel"),
    })
}

/// The exact CPython build the locked uv installs (the `cpython` package: patch, URL and
/// sha256 of uv's download table).
#[derive(Clone, Debug)]
pub(crate) struct CPython {
    /// `3.12.13`.
    pub(crate) version: String,
    /// python-build-standalone's archive.
    pub(crate) url: String,
    /// Its sha256.
    pub(crate) sha256: String,
    /// The CPU of the build (`x86_64`, `aarch64`: the variant `aarch64-gnu` without its libc).
    pub(crate) cpu: String,
}

/// The lock's CPython build, when it records one with its URL and sha256.
pub(crate) fn cpython(lock: &Lock) -> Option<CPython> {
    let p = lock.package("cpython")?;
    Some(CPython {
        version: p.version.clone(),
        url: p.get("url")?.to_string(),
        sha256: p.get("sha256")?.to_string(),
        cpu: p
            .get("variant")
            .and_then(|v| v.split('-').next())
            .unwrap_or("x86_64")
            .to_string(),
    })
}

/// A package built from a source tarball (the fabric stack, nccl-tests) or installed by a
/// downloaded installer (AWS's EFA installer).
#[derive(Clone, Debug)]
pub(crate) struct SourcePackage {
    /// `ucx`.
    pub(crate) name: String,
    /// `1.22.0`.
    pub(crate) version: String,
    /// The download URL.
    pub(crate) url: Option<String>,
    /// The published sha256.
    pub(crate) sha256: Option<String>,
    /// The git commit, when `url` is a repository (no published tarball checksum).
    pub(crate) commit: Option<String>,
    /// Where the catalog found it.
    pub(crate) source: String,
}

impl SourcePackage {
    fn of(p: &LockedPackage) -> SourcePackage {
        SourcePackage {
            name: p.name.clone(),
            version: p.version.clone(),
            url: p.get("url").map(str::to_string),
            sha256: p.get("sha256").map(str::to_string),
            commit: p.get("commit").map(str::to_string),
            source: p.source.clone(),
        }
    }
}

/// The base layer's source builds, in install order: its images (the `nvidia/cuda` base,
/// the Dockerfile frontend) are pulled and its OS packages installed, not built.
pub(crate) fn fabric_sources(lock: &Lock) -> Vec<SourcePackage> {
    lock.packages
        .iter()
        .filter(|p| {
            p.layer == Layer::Base
                && p.name != CUDA_IMAGE
                && p.get("image").is_none()
                && p.list("apt").is_empty()
                && p.list("dnf").is_empty()
        })
        .map(SourcePackage::of)
        .collect()
}

/// nccl-tests' source.
pub(crate) fn nccl_tests(lock: &Lock) -> Option<SourcePackage> {
    lock.package("nccl-tests").map(SourcePackage::of)
}

/// AWS's EFA installer.
pub(crate) fn efa_installer(lock: &Lock) -> Option<SourcePackage> {
    lock.package("efa-installer").map(SourcePackage::of)
}

/// Whether the base layer installs AWS's EFA installer.
pub(crate) fn has_efa_installer(lock: &Lock) -> bool {
    lock.packages
        .iter()
        .any(|p| p.name == "efa-installer" && p.layer == Layer::Base)
}

/// Whether the lock has a `cuda-image` package: without it nothing can be built.
pub(crate) fn has_cuda_image(lock: &Lock) -> bool {
    lock.package(CUDA_IMAGE).is_some()
}

/// The host packages whose OS pins the plans install.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HostPackage {
    /// `libnccl2`/`libnccl-dev` (`libnccl`/`libnccl-devel` on EL).
    Nccl,
    /// `cuda-toolkit-X-Y`.
    CudaToolkit,
    /// `libcudnn9-cuda-12` and its development package.
    Cudnn,
    /// The driver with the open kernel modules (`nvidia-open`).
    DriverOpen,
    /// The driver with the proprietary kernel modules (`cuda-drivers`).
    DriverProprietary,
    /// NVIDIA's Container Toolkit.
    ContainerToolkit,
    /// Fabric Manager (NVSwitch boards).
    FabricManager,
    /// DCGM (`datacenter-gpu-manager-4-core`).
    Dcgm,
    /// GDRCopy.
    Gdrcopy,
}

impl HostPackage {
    /// The lock's package name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            HostPackage::Nccl => "libnccl",
            HostPackage::CudaToolkit => "cuda-toolkit",
            HostPackage::Cudnn => "libcudnn",
            HostPackage::DriverOpen => "nvidia-open",
            HostPackage::DriverProprietary => "cuda-drivers",
            HostPackage::ContainerToolkit => "nvidia-container-toolkit",
            HostPackage::FabricManager => "nvidia-fabricmanager",
            HostPackage::Dcgm => "dcgm",
            HostPackage::Gdrcopy => "gdrcopy",
        }
    }
}

/// Where a package's OS pins were read (the lock's `<manager>-source`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PinSource {
    /// `gpustack lock` read them from the repository's index.
    Repository,
    /// The catalog's naming rule.
    Naming,
    /// The catalog's observation.
    Catalog,
}

/// A host package as the lock pins it.
#[derive(Clone, Debug)]
pub(crate) struct HostPackagePins {
    /// The upstream version.
    pub(crate) version: String,
    /// Where the catalog found it.
    pub(crate) source: String,
    /// Why this version.
    pub(crate) because: Vec<String>,
    /// The apt pins (`name=version`).
    pub(crate) apt: Vec<String>,
    /// The dnf pins (`name-version-release`).
    pub(crate) dnf: Vec<String>,
    /// Where the apt pins come from.
    pub(crate) apt_source: PinSource,
    /// Where the dnf pins come from.
    pub(crate) dnf_source: PinSource,
}

impl HostPackagePins {
    /// The pins for `manager` (`apt`, `dnf`) and where they come from.
    pub(crate) fn pins(&self, manager: &str) -> (&[String], PinSource) {
        if manager == "apt" {
            (&self.apt, self.apt_source)
        } else {
            (&self.dnf, self.dnf_source)
        }
    }
}

/// A host package of the lock.
pub(crate) fn host_package(lock: &Lock, which: HostPackage) -> Option<HostPackagePins> {
    let p = lock.package(which.name())?;
    let source = |manager: &str| match p.get(&format!("{manager}-source")) {
        Some("repository") => PinSource::Repository,
        Some("naming") => PinSource::Naming,
        _ => PinSource::Catalog,
    };
    Some(HostPackagePins {
        version: p.version.clone(),
        source: p.source.clone(),
        because: p.because.clone(),
        apt: p.list("apt").to_vec(),
        dnf: p.list("dnf").to_vec(),
        apt_source: source("apt"),
        dnf_source: source("dnf"),
    })
}

/// A host requirement of the locked GPUs' NVSwitch generation (NVLSM and the InfiniBand
/// management stack on fourth-generation boards): unpinned packages by name, and kernel
/// modules loaded at every boot.
#[derive(Clone, Debug)]
pub(crate) struct HostRequirement {
    /// `nvlsm`.
    pub(crate) name: String,
    /// The packages for `apt`.
    pub(crate) apt: Vec<String>,
    /// The packages for `dnf`.
    pub(crate) dnf: Vec<String>,
    /// From the OS release's repositories (else NVIDIA's CUDA repository).
    pub(crate) os_release: bool,
    /// Kernel modules loaded at boot (`ib_umad`).
    pub(crate) kernel_modules: Vec<String>,
    /// Why, as the lock says.
    pub(crate) because: Vec<String>,
    /// Where the catalog found it.
    pub(crate) source: String,
}

/// The lock's host requirements (packages with an `nvswitch-generation`), in lock order.
pub(crate) fn host_requirements(lock: &Lock) -> Vec<HostRequirement> {
    lock.packages
        .iter()
        .filter(|p| p.layer == Layer::Host && p.get("nvswitch-generation").is_some())
        .map(|p| HostRequirement {
            name: p.name.clone(),
            apt: p.list("apt-names").to_vec(),
            dnf: p.list("dnf-names").to_vec(),
            os_release: p.get("from") == Some("os-release"),
            kernel_modules: p.list("kernel-modules").to_vec(),
            because: p.because.clone(),
            source: p.source.clone(),
        })
        .collect()
}

/// The DCGM package's CUDA major (`dcgmi diag` needs the matching
/// `datacenter-gpu-manager-4-cuda<N>`).
pub(crate) fn dcgm_cuda_major(lock: &Lock) -> Option<String> {
    lock.package(HostPackage::Dcgm.name())?
        .get("cuda-major")
        .map(str::to_string)
}

/// The lock's `kernel-modules` fact: the driver's flavour (`open`, `proprietary`) and why.
#[derive(Clone, Debug)]
pub(crate) struct KernelModulesFact {
    /// `open` or `proprietary`, as the lock spells it.
    pub(crate) flavour: String,
    /// The lock's reasons.
    pub(crate) because: Vec<String>,
    /// Where the rule comes from.
    pub(crate) source: String,
}

/// The driver's kernel-module flavour, when the catalog has a rule for the GPUs.
pub(crate) fn kernel_modules(lock: &Lock) -> Option<KernelModulesFact> {
    let f = lock.fact("kernel-modules", "driver")?;
    Some(KernelModulesFact {
        flavour: f.get("flavour")?.to_string(),
        because: f.because.clone(),
        source: f.source.clone(),
    })
}

/// The lock's `nccl-build` fact: the CUDA build of the NCCL packages.
#[derive(Clone, Debug)]
pub(crate) struct NcclBuildFact {
    /// `2.27.5`.
    pub(crate) nccl: String,
    /// `12.9`.
    pub(crate) cuda: String,
    /// Whether the build is known to be published: the catalog lists it, or the lock read
    /// it from the repository's index (`known = "repository"`).
    pub(crate) known: bool,
    /// The lock's reasons.
    pub(crate) because: Vec<String>,
}

/// The NCCL packages' CUDA build, when the lock chose one.
pub(crate) fn nccl_build(lock: &Lock) -> Option<NcclBuildFact> {
    let f = lock.facts.iter().find(|f| f.kind == "nccl-build")?;
    Some(NcclBuildFact {
        nccl: f.get("nccl").unwrap_or(&f.key).to_string(),
        cuda: f.get("cuda")?.to_string(),
        known: matches!(f.get("known"), Some("true" | "repository")),
        because: f.because.clone(),
    })
}

/// An environment variable the catalog sets for the stack (an `env` fact).
#[derive(Clone, Debug)]
pub(crate) struct EnvFact {
    /// `NCCL_IB_DISABLE`.
    pub(crate) name: String,
    /// `0`.
    pub(crate) value: String,
    /// Where it is documented.
    pub(crate) source: String,
}

/// The lock's environment, in lock order.
pub(crate) fn env(lock: &Lock) -> Vec<EnvFact> {
    lock.facts
        .iter()
        .filter(|f| f.kind == "env")
        .map(|f| EnvFact {
            name: f.key.clone(),
            value: f.get("value").unwrap_or_default().to_string(),
            source: f.source.clone(),
        })
        .collect()
}

/// A published nccl-tests bus bandwidth (a `bandwidth` fact).
#[derive(Clone, Debug)]
pub(crate) struct BandwidthFact {
    /// `intra-node` or `inter-node` (`osu_bw` for the OSU figure).
    pub(crate) scope: String,
    /// The GPU of the figure.
    pub(crate) gpu: String,
    /// GB/s.
    pub(crate) busbw_gbps: String,
    /// Nodes of the figure's job (`?` when not stated).
    pub(crate) nodes: String,
    /// GPUs per node of the figure's job (`?` when not stated).
    pub(crate) gpus_per_node: String,
    /// `nvlink`, `infiniband`, ….
    pub(crate) fabric: String,
    /// Message size, where stated.
    pub(crate) size: Option<String>,
    /// The test.
    pub(crate) test: String,
    /// Whether SHARP was on, where the source says.
    pub(crate) sharp: Option<bool>,
    /// Where it is published.
    pub(crate) source: String,
}

/// The expected bandwidths, intra- then inter-node, where the lock has them.
pub(crate) fn bandwidth(lock: &Lock) -> Vec<BandwidthFact> {
    ["intra-node", "inter-node"]
        .iter()
        .filter_map(|scope| bandwidth_fact(lock, scope))
        .collect()
}

/// The expected `osu_bw` point-to-point bandwidth (its `busbw_gbps` is the catalog's GB/s),
/// where the lock has it: the fact `crate::select` records beside the OSU run.
pub(crate) fn osu_bandwidth(lock: &Lock) -> Option<BandwidthFact> {
    bandwidth_fact(lock, crate::select::OSU_TEST)
}

fn bandwidth_fact(lock: &Lock, scope: &str) -> Option<BandwidthFact> {
    lock.fact("bandwidth", scope).map(|f| BandwidthFact {
        scope: f.key.clone(),
        gpu: f.get("gpu").unwrap_or_default().to_string(),
        busbw_gbps: f.get("busbw-gbps").unwrap_or_default().to_string(),
        nodes: f.get("nodes").unwrap_or("?").to_string(),
        gpus_per_node: f.get("gpus-per-node").unwrap_or("?").to_string(),
        fabric: f.get("fabric").unwrap_or_default().to_string(),
        size: f.get("size").map(str::to_string),
        test: f.get("test").unwrap_or_default().to_string(),
        sharp: f.get("sharp").map(|v| v == "true"),
        source: f.source.clone(),
    })
}

/// A fact's first reason and source, for the variable descriptions that cite it.
#[derive(Clone, Debug)]
pub(crate) struct Cited {
    /// The first `because` line (empty when none).
    pub(crate) because: String,
    /// Where it comes from.
    pub(crate) source: String,
}

impl Cited {
    fn of(f: &LockedFact) -> Cited {
        Cited {
            because: f.because.first().cloned().unwrap_or_default(),
            source: f.source.clone(),
        }
    }
}

/// The build VM of a cloud (an `instance` fact).
#[derive(Clone, Debug)]
pub(crate) struct InstanceFact {
    /// `p5.48xlarge`, `a3-highgpu-8g`.
    pub(crate) instance_type: Option<String>,
    /// GCP's guest accelerator type, where the machine type does not attach its GPUs.
    pub(crate) accelerator_type: Option<String>,
    /// How many GPUs.
    pub(crate) gpus: Option<String>,
    /// Why and where from.
    pub(crate) cited: Cited,
}

/// The lock's build VM for `cloud`.
pub(crate) fn instance(lock: &Lock, cloud: Cloud) -> Option<InstanceFact> {
    let f = lock.fact("instance", cloud.name())?;
    Some(InstanceFact {
        instance_type: f.get("instance-type").map(str::to_string),
        accelerator_type: f.get("accelerator-type").map(str::to_string),
        gpus: f.get("gpus").map(str::to_string),
        cited: Cited::of(f),
    })
}

/// GCP's VM settings (the `cloud` fact `gcp`).
#[derive(Clone, Debug)]
pub(crate) struct GcpSettings {
    /// `TERMINATE`.
    pub(crate) on_host_maintenance: Option<String>,
    /// Why and where from.
    pub(crate) cited: Cited,
}

/// The lock's GCP settings.
pub(crate) fn gcp_settings(lock: &Lock) -> Option<GcpSettings> {
    let f = lock.fact("cloud", Cloud::Gcp.name())?;
    Some(GcpSettings {
        on_host_maintenance: f.get("on-host-maintenance").map(str::to_string),
        cited: Cited::of(f),
    })
}

/// A Python component's wheel and index, as the lock records them.
#[derive(Clone, Debug)]
pub(crate) struct PyComponent {
    /// The PyPI name (`torch`, `flash-attn`).
    pub(crate) pypi_name: String,
    /// The wheel's (or sdist's) sha256.
    pub(crate) sha256: Option<String>,
    /// The wheel file that hash belongs to.
    pub(crate) wheel: Option<String>,
    /// The source distribution, for a package compiled in `build`.
    pub(crate) sdist: Option<String>,
    /// Its index, besides PyPI.
    pub(crate) index_url: Option<String>,
    /// The index the wheel was found on.
    pub(crate) wheel_index: Option<String>,
    /// torch: the variant is the one PyPI serves by default.
    pub(crate) pypi_default: bool,
}

impl PyComponent {
    /// The Python view of a locked component.
    pub(crate) fn of(c: &LockedComponent) -> PyComponent {
        PyComponent {
            pypi_name: c
                .get("pypi-name")
                .map_or_else(|| c.name.name().to_string(), str::to_string),
            sha256: c.get("sha256").map(str::to_string),
            wheel: c.get("wheel").map(str::to_string),
            sdist: c.get("sdist").map(str::to_string),
            index_url: c.get("index-url").map(str::to_string),
            wheel_index: c.get("wheel-index").map(str::to_string),
            pypi_default: c.get("pypi-default") == Some("true"),
        }
    }
}

/// The NCCL version the locked torch wheel pins (used when NCCL is not a component).
pub(crate) fn torch_nccl(lock: &Lock) -> Option<String> {
    lock.component(Component::Torch)?
        .get("nccl")
        .map(str::to_string)
}

/// torch's source build, as the lock records it (`build = "source"`).
#[derive(Clone, Debug)]
pub(crate) struct TorchSource {
    /// `source-repository`.
    pub(crate) repository: Option<String>,
    /// `source-tag`.
    pub(crate) tag: Option<String>,
    /// `source-commit`.
    pub(crate) commit: Option<String>,
    /// `source-archive`: the source tarball with submodules.
    pub(crate) archive: Option<String>,
    /// `source-archive-sha256`.
    pub(crate) archive_sha256: Option<String>,
    /// `host-gcc`: the OS's GCC the build compiles with (`11.2.0`).
    pub(crate) host_gcc: Option<String>,
    /// The CUDA the build targets (`12.8`).
    pub(crate) cuda: Option<String>,
    /// `TORCH_CUDA_ARCH_LIST` entries.
    pub(crate) arch_list: Vec<String>,
    /// Build requirements.
    pub(crate) build_requires: Vec<String>,
    /// Runtime requirements.
    pub(crate) runtime_requires: Vec<String>,
}

/// The locked torch's source build; `None` for a wheel (or no torch).
pub(crate) fn torch_source(lock: &Lock) -> Option<TorchSource> {
    let t = lock.component(Component::Torch)?;
    if t.get("build") != Some("source") {
        return None;
    }
    let s = |k: &str| t.get(k).map(str::to_string);
    Some(TorchSource {
        repository: s("source-repository"),
        tag: s("source-tag"),
        commit: s("source-commit"),
        archive: s("source-archive"),
        archive_sha256: s("source-archive-sha256"),
        host_gcc: s("host-gcc"),
        cuda: s("cuda"),
        arch_list: t.list("arch-list").to_vec(),
        build_requires: t.list("build-requires").to_vec(),
        runtime_requires: t.list("runtime-requires").to_vec(),
    })
}

/// The CUDA forward-compatibility packages the components need (`compat = "forward"`),
/// sorted and deduplicated.
pub(crate) fn compat_packages(lock: &Lock) -> Vec<String> {
    let mut compat: Vec<String> = lock
        .components
        .iter()
        .filter(|x| x.get("compat") == Some("forward"))
        .filter_map(|x| x.get("compat-package").map(str::to_string))
        .collect();
    compat.sort();
    compat.dedup();
    compat
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(name: &str) -> Lock {
        let path = format!("{}/lockfiles/{name}", env!("CARGO_MANIFEST_DIR"));
        Lock::parse(name, &std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn views_read_a_committed_lock() {
        let l = lock("h100-ib-train-serve.lock");
        let img = cuda_image(&l).unwrap();
        assert_eq!(img.repository, "nvidia/cuda");
        assert!(img.runtime.tag.is_some() && img.devel.tag.is_some());
        assert!(img.os.is_some());
        assert_eq!(kernel_modules(&l).unwrap().flavour, "open");
        let exporter = dcgm_exporter(&l).unwrap();
        assert!(exporter.image.is_some() && exporter.tag.is_some());
        assert!(!env(&l).is_empty());
        let fabric: Vec<String> = fabric_sources(&l).into_iter().map(|p| p.name).collect();
        assert!(fabric.contains(&"ucx".to_string()), "{fabric:?}");
        assert!(!fabric.contains(&CUDA_IMAGE.to_string()));
        assert!(nccl_tests(&l).is_some_and(|p| p.url.is_some()));
        assert!(uv(&l).and_then(|u| u.by_version()).is_some());
    }

    #[test]
    fn a_pinned_image_is_referenced_by_version_and_digest() {
        let mut p = PinnedImage {
            image: Some("ghcr.io/astral-sh/uv".into()),
            tag: None,
            digest: None,
            version: "0.11.7".into(),
            source: String::new(),
            observation: None,
        };
        assert_eq!(p.by_version().unwrap(), "ghcr.io/astral-sh/uv:0.11.7");
        p.digest = Some("sha256:ab".into());
        assert_eq!(
            p.by_version().unwrap(),
            "ghcr.io/astral-sh/uv:0.11.7@sha256:ab"
        );
        p.image = None;
        assert_eq!(p.by_version(), None);
    }
}

/// The cloud image a VM of one CPU boots (the lock's `vm-image-<cpu>` package).
#[derive(Clone, Debug)]
pub(crate) struct VmImage {
    /// `x86_64`, `aarch64`.
    pub(crate) cpu: String,
    /// `rockylinux9`.
    pub(crate) os: String,
    /// The OS release: `9.8`, `24.04` (the OS id when the catalog had no image).
    pub(crate) release: String,
    /// The dated image and its sha256 (hex), when the catalog has one.
    pub(crate) url: Option<String>,
    pub(crate) sha256: Option<String>,
    /// Where the image and digest come from.
    pub(crate) source: String,
}

/// The lock's VM images, one per CPU of the stack's hosts, in the lock's (CPU) order.
/// Empty for a lock written before gpustack recorded them.
pub(crate) fn vm_images(lock: &Lock) -> Vec<VmImage> {
    lock.packages
        .iter()
        .filter(|p| p.name.starts_with("vm-image-"))
        .filter_map(|p| {
            Some(VmImage {
                cpu: p.get("cpu")?.to_string(),
                os: p.get("os")?.to_string(),
                release: p.version.clone(),
                url: p.get("url").map(str::to_string),
                sha256: p.get("sha256").map(str::to_string),
                source: p.source.clone(),
            })
        })
        .collect()
}

/// The CPUs of the stack's hosts (`uname -m`), sorted: the lock's VM images', else (a lock
/// written before they were recorded) `aarch64` for Grace GPUs and `x86_64` for the others.
pub(crate) fn host_cpus(lock: &Lock) -> Vec<String> {
    let mut cpus: Vec<String> = vm_images(lock).into_iter().map(|i| i.cpu).collect();
    if cpus.is_empty() {
        cpus = lock
            .hardware
            .gpus
            .iter()
            .map(|g| {
                if crate::select::grace_host([g.id.as_str()]) {
                    "aarch64".to_string()
                } else {
                    "x86_64".to_string()
                }
            })
            .collect();
    }
    if cpus.is_empty() {
        cpus.push("x86_64".into());
    }
    cpus.sort();
    cpus.dedup();
    cpus
}
