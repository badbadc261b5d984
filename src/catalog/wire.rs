//! The on-disk shape of `catalog/*.toml`: one file per component family.
//!
//! These types mirror the TOML exactly (`deny_unknown_fields` everywhere) and do no
//! validation beyond what serde does; [`super::model`] turns them into a validated,
//! indexed [`super::Catalog`]. Every entry carries a `source` a reader can open.
//!
//! A file declares its family with a top-level `family = "..."` key, so a site overlay
//! may name its files as it likes.

use serde::{Deserialize, Serialize};
use toml::Spanned;

/// A whole catalog file. Exactly one family table list is expected, matching `family`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileWire {
    /// Which family this file holds: `driver`, `cuda`, `gpu`, `python`, `os`, `cudnn`,
    /// `nccl`, `torch`, `vllm`, `deepspeed`, `extra`.
    pub(crate) family: String,
    /// Free text describing the file (ignored by the solver).
    #[serde(default)]
    #[allow(dead_code)]
    pub(crate) description: Option<String>,

    // driver.toml
    #[serde(default)]
    pub(crate) branch: Vec<Spanned<DriverBranchWire>>,

    // cuda.toml
    #[serde(default)]
    pub(crate) minor_compat: Vec<Spanned<MinorCompatWire>>,
    #[serde(default)]
    pub(crate) forward_compat: Vec<Spanned<ForwardCompatWire>>,
    #[serde(default)]
    pub(crate) targets: Vec<Spanned<TargetsWire>>,

    // gpus.toml
    #[serde(default)]
    pub(crate) gpu: Vec<Spanned<GpuWire>>,
    #[serde(default)]
    pub(crate) kernel_modules: Vec<Spanned<KernelModulesWire>>,
    #[serde(default)]
    pub(crate) generation: Vec<Spanned<GenerationWire>>,

    // cudnn.toml, nccl.toml
    #[serde(default)]
    pub(crate) gpu_support: Vec<Spanned<GpuSupportWire>>,

    // deepspeed.toml
    #[serde(default)]
    pub(crate) torch_minimum: Vec<Spanned<TorchMinimumWire>>,

    // tested.toml
    #[serde(default)]
    pub(crate) tested: Vec<Spanned<TestedWire>>,

    // os.toml
    #[serde(default)]
    pub(crate) os: Vec<Spanned<OsWire>>,

    // torch.toml
    #[serde(default)]
    pub(crate) wheel: Vec<Spanned<TorchWheelWire>>,
    #[serde(default)]
    pub(crate) source: Vec<Spanned<TorchSourceWire>>,

    // python, cuda, cudnn, nccl, torch, vllm, deepspeed
    #[serde(default)]
    pub(crate) release: Vec<Spanned<ReleaseWire>>,

    // extras.toml
    #[serde(default)]
    pub(crate) extra: Vec<Spanned<ExtraWire>>,
    // images.toml
    #[serde(default)]
    pub(crate) image: Vec<Spanned<ImageWire>>,
    #[serde(default)]
    pub(crate) no_image: Vec<Spanned<NoImageWire>>,
    // packages.toml
    #[serde(default)]
    pub(crate) package: Vec<Spanned<PackageWire>>,
    // cloud.toml
    #[serde(default)]
    pub(crate) instance: Vec<Spanned<InstanceWire>>,
    #[serde(default)]
    pub(crate) cloud: Vec<Spanned<CloudWire>>,
    // bandwidth.toml
    #[serde(default)]
    pub(crate) bandwidth: Vec<Spanned<BandwidthWire>>,
    // env.toml
    #[serde(default)]
    pub(crate) env: Vec<Spanned<EnvWire>>,
}

/// `[[branch]]` in `driver.toml`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DriverBranchWire {
    /// `R535`.
    pub(crate) branch: String,
    /// `ltsb`, `pb` or `nfb`.
    #[serde(rename = "type")]
    pub(crate) kind: String,
    /// `supported` or `eol` as of the catalog's date.
    pub(crate) status: String,
    /// End of life, free text (`2026-06`).
    #[serde(default)]
    pub(crate) eol: Option<String>,
    /// Released Linux x86_64 versions known to the catalog.
    pub(crate) versions: Vec<String>,
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) note: Option<String>,
}

/// `[[minor_compat]]` in `cuda.toml`: the minor-version-compatibility floor of a CUDA major.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MinorCompatWire {
    pub(crate) major: u32,
    pub(crate) driver_min: String,
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) note: Option<String>,
}

/// `[[forward_compat]]` in `cuda.toml`: which base driver branches a `cuda-compat-X-Y`
/// package supports.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ForwardCompatWire {
    /// `13.0`.
    pub(crate) cuda: String,
    /// `cuda-compat-13-0`.
    pub(crate) package: String,
    /// Base branches the package is supported on: `["R535", "R570"]`.
    pub(crate) bases: Vec<String>,
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) note: Option<String>,
}

/// `[[targets]]` in `cuda.toml`: the GPU targets nvcc accepts for a range of releases.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TargetsWire {
    /// A requirement over CUDA versions: `">=12.0, <12.8"`.
    pub(crate) cuda: String,
    /// Targets without prefix: `["50", "90", "90a", "100f"]`.
    pub(crate) sm: Vec<String>,
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) note: Option<String>,
}

/// `[[gpu]]` in `gpus.toml`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GpuWire {
    /// `h100`.
    pub(crate) id: String,
    /// Marketing name: `NVIDIA H100 SXM5 80GB`.
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) aliases: Vec<String>,
    /// Compute capability `9.0`.
    pub(crate) cc: String,
    /// Architecture family: `hopper`.
    pub(crate) arch: String,
    pub(crate) datacenter: bool,
    #[serde(default)]
    pub(crate) nvswitch: bool,
    #[serde(default)]
    pub(crate) memory_gib: Option<u32>,
    /// The `nvidia.com/gpu.product` label GPU Feature Discovery sets, where known.
    #[serde(default)]
    pub(crate) gfd_product: Option<String>,
    /// Names `nvidia-smi --query-gpu=name` prints, for `probe`.
    #[serde(default)]
    pub(crate) smi_names: Vec<String>,
    /// Lowest driver known to support the product, where sourced.
    #[serde(default)]
    pub(crate) min_driver: Option<String>,
    /// Last driver branch supporting the architecture (legacy GPUs): `R580`.
    #[serde(default)]
    pub(crate) last_driver_branch: Option<String>,
    /// CPU architecture of the hosts the product ships in, when not `x86_64`: `aarch64`
    /// (Grace Hopper, Grace Blackwell).
    #[serde(default)]
    pub(crate) cpu: Option<String>,
    /// The NVSwitch generation of the product's boards (Fabric Manager user guide,
    /// "NVIDIA Server Architectures"), where sourced: its host requirements follow it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) nvswitch_generation: Option<u32>,
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) note: Option<String>,
}

/// `[[generation]]` in `gpus.toml`: the driver branches that support a GPU architecture.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GenerationWire {
    /// The architecture, as `[[gpu]] arch` spells it: `hopper`.
    pub(crate) arch: String,
    /// The first driver that supports the architecture: `520.61.05`.
    #[serde(default)]
    pub(crate) min_driver: Option<String>,
    /// The last driver branch that supports it: `R580`.
    #[serde(default)]
    pub(crate) last_driver_branch: Option<String>,
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) note: Option<String>,
}

/// `[[gpu_support]]` in `cudnn.toml` / `nccl.toml`: the first release with kernels for a
/// compute capability (and every newer one).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GpuSupportWire {
    /// `10.0`: applies to GPUs of this compute capability or newer.
    pub(crate) cc: String,
    /// The first release that supports it: `9.7.0`.
    pub(crate) since: String,
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) note: Option<String>,
}

/// `[[torch_minimum]]` in `deepspeed.toml`: the oldest DeepSpeed that works with a torch
/// minor.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TorchMinimumWire {
    /// A torch minor: `2.4`.
    pub(crate) torch: String,
    /// The oldest DeepSpeed release that works with it: `0.14.4`.
    pub(crate) deepspeed: String,
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) note: Option<String>,
}

/// `[[tested]]` in `tested.toml`: a combination a vendor validated and published (an NGC
/// container release, an AWS Deep Learning Container). Each field is the exact version the
/// vendor lists; a field the vendor does not state is left out.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TestedWire {
    /// How `gpustack why` names it: `NGC PyTorch 25.10`.
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) cuda: Option<String>,
    #[serde(default)]
    pub(crate) cudnn: Option<String>,
    #[serde(default)]
    pub(crate) nccl: Option<String>,
    #[serde(default)]
    pub(crate) python: Option<String>,
    /// A PyPI torch release (`2.7.1`), for vendors that ship public wheels.
    #[serde(default)]
    pub(crate) torch: Option<String>,
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) note: Option<String>,
}

/// `[[kernel_modules]]` in `gpus.toml`: which NVIDIA kernel-module flavours drive a GPU
/// architecture (or one product, which then overrides its architecture's entry).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct KernelModulesWire {
    /// An architecture as `[[gpu]].arch` spells it: `volta`, `hopper`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) arch: Option<String>,
    /// A GPU id, for a product whose platform decides (`gh200`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) gpu: Option<String>,
    /// The open GPU kernel modules: `required`, `supported` or `unsupported`.
    pub(crate) open: String,
    /// For `supported`: the first branch whose default flavour is open (`R560`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) open_default_from: Option<String>,
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) note: Option<String>,
}

/// `[[os]]` in `os.toml`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OsWire {
    /// `ubuntu22.04`.
    pub(crate) id: String,
    /// CUDA releases with `nvidia/cuda` images / packages: a requirement `">=11.8, <13.1"`.
    pub(crate) cuda: String,
    /// The glibc version the release ships: `2.28`.
    #[serde(default)]
    pub(crate) glibc: Option<String>,
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) note: Option<String>,
    /// `[[os.release]]`: the point releases (Rocky minors; one per Ubuntu LTS) with their
    /// lifecycle dates.
    #[serde(default)]
    pub(crate) release: Vec<OsReleaseWire>,
    /// `[[os.image]]`: the cloud images (qcow2 with cloud-init) of a release, per CPU.
    #[serde(default)]
    pub(crate) image: Vec<OsImageWire>,
}

/// `[[os.release]]` in `os.toml`: one point release of an OS and its lifecycle.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OsReleaseWire {
    /// `9.7`, `24.04`.
    pub(crate) version: String,
    /// First general availability: `2025-12-01` (or `2024-04`, a month).
    #[serde(default)]
    pub(crate) released: Option<String>,
    /// End of life (Rocky: the next minor's release; Ubuntu: end of standard support):
    /// `2025-11` or `2029-05-31`.
    #[serde(default)]
    pub(crate) eol: Option<String>,
    /// Where the release's packages and images live once it is superseded:
    /// `https://dl.rockylinux.org/vault/rocky/9.7/`.
    #[serde(default)]
    pub(crate) vault: Option<String>,
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) note: Option<String>,
}

/// `[[os.image]]` in `os.toml`: a dated cloud image of one release for one CPU.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OsImageWire {
    /// The `[[os.release]]` it belongs to: `9.7`.
    pub(crate) release: String,
    /// `x86_64` or `aarch64`.
    pub(crate) cpu: String,
    /// A dated image (never a moving `latest`/`release` name).
    pub(crate) url: String,
    /// Its sha256 (hex), as its publisher lists it beside the image.
    pub(crate) sha256: String,
    pub(crate) source: String,
}

/// `[[release]]`, shared by the version-list families. Fields a family does not use are
/// rejected by the model with the family named.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReleaseWire {
    /// The exact catalog string: `12.4.1`, `9.1.0.70`, `2.21.5`, `0.6.3.post1`.
    pub(crate) version: String,
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) note: Option<String>,

    // cuda
    /// Full-feature minimum Linux driver (release notes, Table 3).
    #[serde(default)]
    pub(crate) driver_min: Option<String>,
    /// cuda: the release is known only from NVIDIA's redistrib manifest (`redistrib_X.Y.Z.json`):
    /// no Table 3 row and no install package or image recorded, so it is listed but never locked.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) redist_only: bool,

    // python
    #[serde(default)]
    pub(crate) eol: Option<String>,

    // cudnn, nccl
    /// CUDA majors this release ships builds for: `[11, 12]`.
    #[serde(default)]
    pub(crate) cuda_majors: Vec<u32>,
    /// Lowest compute capability supported (`7.5` from cuDNN 9.11).
    #[serde(default)]
    pub(crate) min_cc: Option<String>,
    /// nccl: the CUDA minors NVIDIA publishes packages of this release for (`+cuda12.9`),
    /// where a listing was found: `["12.9", "13.0"]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) cuda_builds: Vec<String>,

    // torch
    /// Python range of the wheels actually published: `">=3.9, <3.13"`.
    #[serde(default)]
    pub(crate) python: Option<String>,
    /// torch: the variant the PyPI wheel is (`cu124`).
    #[serde(default)]
    pub(crate) pypi_variant: Option<String>,
    /// torch: the CPUs whose PyPI wheel is that CUDA build (`["x86_64", "aarch64"]`);
    /// absent, x86_64 only (PyPI's aarch64 wheels of torch 2.10 and older are CPU builds).
    #[serde(default)]
    pub(crate) pypi_cuda_cpus: Vec<String>,

    // vllm, deepspeed
    /// vllm: exact torch pin (`2.4.0`); deepspeed: a requirement (`>=2.0`).
    #[serde(default)]
    pub(crate) torch: Option<String>,
    /// vllm: CUDA of its PyPI wheel (`12.1`).
    #[serde(default)]
    pub(crate) cuda: Option<String>,
    /// deepspeed: CUDA minors nvcc and torch may differ within (`["12.0", "12.1"]`).
    #[serde(default)]
    pub(crate) cuda_mismatch_ok: Vec<String>,
    /// Known files with hashes.
    #[serde(default)]
    pub(crate) files: Vec<FileRefWire>,
    /// torch, vllm: the Linux platform tags of the release's binary wheels on PyPI
    /// (`manylinux_2_28_x86_64`), read from PyPI's JSON API; absent when unknown or when a
    /// pure-Python wheel exists. cudnn, nccl: written only for a release without any Linux
    /// wheel on PyPI (`["win_amd64"]`), which is never locked.
    #[serde(default)]
    pub(crate) platforms: Vec<String>,
    /// torch, vllm, deepspeed, cudnn, nccl: PEP 592, every file of the release is yanked on
    /// PyPI; never locked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) yanked: Option<YankWire>,
    /// torch, vllm, deepspeed: the least glibc an install of the release needs per CPU,
    /// its dependencies' wheels included (`catalog import installability`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) glibc_floor: Vec<GlibcFloorWire>,
    /// torch: the release's `Requires-Dist` on triton (`==3.5.0`, `~=3.9.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) triton: Option<String>,
}

/// `yanked = { reason = "…", observed = "2026-12-07", source = "https://pypi.org/simple/…/" }`:
/// PEP 592 yanked status as the simple index shows it. PyPI does not publish when a file
/// was yanked, so `observed` is the day an import saw it yanked.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct YankWire {
    /// The index's `yanked` reason, when it gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    /// `YYYY-MM-DD`: the day the yanked status was read.
    pub(crate) observed: String,
    /// The project page read.
    pub(crate) source: String,
}

/// One row of `glibc_floor`: `{ cpu = "x86_64", glibc = "2.31", by = "llguidance>=1.7.0,<1.8.0
/// (manylinux_2_31_x86_64)", source = "https://pypi.org/simple/llguidance/ …" }`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GlibcFloorWire {
    /// `x86_64` or `aarch64`.
    pub(crate) cpu: String,
    /// The least glibc the install needs on that CPU: `2.31`.
    pub(crate) glibc: String,
    /// What sets it: the release's own wheels, or a dependency and its best wheel tag.
    pub(crate) by: String,
    /// The project pages read, and the day.
    pub(crate) source: String,
}

/// `[[wheel]]` in `torch.toml`: one CUDA variant of one or more torch releases.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TorchWheelWire {
    /// The torch releases this variant entry covers: `["2.5.0", "2.5.1"]`.
    pub(crate) torch: Vec<String>,
    /// `cu124`.
    pub(crate) variant: String,
    /// CUDA runtime bundled in the wheel: `12.4` (from the build scripts: 12.4.1).
    pub(crate) cuda: String,
    pub(crate) index_url: String,
    /// `TORCH_CUDA_ARCH_LIST` of the build: `["5.0", "8.0", "9.0", "12.0+PTX"]`.
    pub(crate) arch_list: Vec<String>,
    /// Exact cuDNN pin of the wheel, when known.
    #[serde(default)]
    pub(crate) cudnn: Option<String>,
    /// Exact NCCL pin of the wheel, when known.
    #[serde(default)]
    pub(crate) nccl: Option<String>,
    #[serde(default)]
    pub(crate) cusparselt: Option<String>,
    /// Narrower Python range for this variant, when it differs from the release's.
    #[serde(default)]
    pub(crate) python: Option<String>,
    #[serde(default)]
    pub(crate) files: Vec<FileRefWire>,
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) note: Option<String>,
}

/// `[[source]]` in `torch.toml`: where a release's source lives and what building it needs
/// (for `torch = { build = "source" }`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TorchSourceWire {
    /// The torch release: `2.10.0` (must have a `[[release]]` entry).
    pub(crate) torch: String,
    /// The git repository: `https://github.com/pytorch/pytorch`.
    pub(crate) repository: String,
    /// The release tag: `v2.10.0`.
    pub(crate) tag: String,
    /// The commit the tag points to (40 hex digits), when read.
    #[serde(default)]
    pub(crate) commit: Option<String>,
    /// The release's source archive with its submodules, when its digest is published.
    #[serde(default)]
    pub(crate) archive: Option<SourceArchiveWire>,
    /// The oldest host GCC PyTorch builds with: `9.4.0`.
    #[serde(default)]
    pub(crate) gcc_min: Option<String>,
    /// `[[source.nvcc_host_gcc]]`: the newest host GCC major nvcc accepts, per CUDA minor.
    #[serde(default)]
    pub(crate) nvcc_host_gcc: Vec<NvccHostGccWire>,
    /// `[[source.os_gcc]]`: the GCC each OS installs as `gcc`.
    #[serde(default)]
    pub(crate) os_gcc: Vec<OsGccWire>,
    /// `[source.cmake_archs]`: the `TORCH_CUDA_ARCH_LIST` entries the release's CMake accepts.
    #[serde(default)]
    pub(crate) cmake_archs: Option<CmakeArchsWire>,
    /// The oldest cuDNN the source build supports: `8.5`.
    pub(crate) cudnn_min: String,
    /// PEP 508 requirements of the build itself (`[build-system].requires`).
    pub(crate) build_requires: Vec<String>,
    /// PEP 508 requirements the built wheel declares (setup.py `install_requires`).
    pub(crate) runtime_requires: Vec<String>,
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) note: Option<String>,
}

/// `archive = { url, sha256 }` of a torch `[[source]]` entry: the release's source tarball
/// with its submodules (`pytorch-v2.10.0.tar.gz`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SourceArchiveWire {
    /// `https://github.com/pytorch/pytorch/releases/download/v2.10.0/pytorch-v2.10.0.tar.gz`.
    pub(crate) url: String,
    /// 64 lowercase hex digits.
    pub(crate) sha256: String,
}

/// `[[source.nvcc_host_gcc]]`: nvcc's host GCC ceiling for one CUDA minor.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NvccHostGccWire {
    /// `12.8`.
    pub(crate) cuda: String,
    /// `14`: nvcc stops on a newer GCC major (`crt/host_config.h`).
    pub(crate) gcc_max: u32,
    pub(crate) source: String,
}

/// `[source.cmake_archs]`: which `TORCH_CUDA_ARCH_LIST` entries a release's CMake accepts
/// (`CUDA_SELECT_NVCC_ARCH_FLAGS` in `select_compute_arch.cmake`): `NUM.NUM`, optionally with
/// one of `suffixes`, optionally with `+PTX`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CmakeArchsWire {
    /// The target suffixes its pattern accepts after `NUM.NUM`: `["a", "f"]`.
    pub(crate) suffixes: Vec<String>,
    pub(crate) source: String,
}

/// `[[source.os_gcc]]`: the GCC an OS installs as `gcc`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OsGccWire {
    /// `ubuntu22.04` (an `[[os]]` id).
    pub(crate) os: String,
    /// `11.2.0`.
    pub(crate) gcc: String,
    pub(crate) source: String,
}

/// `[[extra]]` in `extras.toml`: one release of an optional framework component (a Python
/// package installed on top of torch: flash-attn, xformers, …).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExtraWire {
    /// The component id, the PyPI project name: `flash-attn`.
    pub(crate) name: String,
    /// The exact release string: `2.8.3.post2`.
    pub(crate) version: String,
    /// The image layer the package belongs in: `framework`, `inference` or `training`.
    pub(crate) layer: String,
    /// The package's own requirement on torch: `">=2.2"`, `"==2.10.0"`.
    #[serde(default)]
    pub(crate) torch: Option<String>,
    /// CUDA majors of the published binaries, when known: `[12, 13]`.
    #[serde(default)]
    pub(crate) cuda_majors: Option<Vec<u32>>,
    /// Lowest compute capability, only where a source states it: `"8.0"`.
    #[serde(default)]
    pub(crate) min_cc: Option<String>,
    /// `Requires-Python`: `">=3.10,<3.16"`.
    #[serde(default)]
    pub(crate) python: Option<String>,
    /// The distribution to install, as PyPI spells it: `cupy-cuda12x`.
    pub(crate) pypi_name: String,
    /// The index it is installed from: `https://pypi.org/simple`.
    pub(crate) index: String,
    /// The CUDA variant of the wheel on `index`, where the source states it (`cu128`).
    #[serde(default)]
    pub(crate) pypi_variant: Option<String>,
    /// What is published and how it installs, free text.
    #[serde(default)]
    pub(crate) prebuilt: Option<String>,
    /// Files with hashes (those `prebuilt` names with their sha256).
    #[serde(default)]
    pub(crate) files: Vec<FileRefWire>,
    /// Linux platform tags of the binary wheels on PyPI, as for `[[release]]`.
    #[serde(default)]
    pub(crate) platforms: Vec<String>,
    /// PEP 592 yanked status, as for `[[release]]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) yanked: Option<YankWire>,
    /// The least glibc per CPU, dependencies included, as for `[[release]]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) glibc_floor: Vec<GlibcFloorWire>,
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) note: Option<String>,
}

/// A concrete downloadable file with its hash.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileRefWire {
    /// Which release this file belongs to, when the entry covers several (`2.5.1`).
    #[serde(default)]
    pub(crate) version: Option<String>,
    /// Python minor of the wheel tag: `3.11`.
    #[serde(default)]
    pub(crate) python: Option<String>,
    /// Where it is served from (`https://pypi.org/simple`).
    #[serde(default)]
    pub(crate) index: Option<String>,
    pub(crate) filename: String,
    pub(crate) sha256: String,
}

/// `[[image]]` in `images.toml`: the `nvidia/cuda` tags NVIDIA publishes for one CUDA
/// release on one OS.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ImageWire {
    /// The CUDA release, exactly as in `cuda.toml`: `12.4.1`.
    pub(crate) cuda: String,
    /// The OS id, as in `os.toml`: `ubuntu22.04`.
    pub(crate) os: String,
    /// Tags: `12.4.1-runtime-ubuntu22.04`, `12.4.1-cudnn-devel-ubuntu22.04`, ….
    pub(crate) tags: Vec<String>,
    /// `supported` or `unsupported`, as NVIDIA's tag lists file it.
    pub(crate) status: String,
    /// The cuDNN inside the `cudnn` tags, where sourced.
    #[serde(default)]
    pub(crate) cudnn: Option<String>,
    /// The old, undated form (`<tag>@sha256:…`): no longer read, refused with a hint to
    /// write `[[image.digest]]` instead.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) digests: Vec<String>,
    /// `[[image.digest]]`: digests a source showed a tag carrying, each with its date.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) digest: Vec<DigestWire>,
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) note: Option<String>,
}

/// `[[no_image]]` in `images.toml`: why a CUDA release of `cuda.toml` has no `[[image]]`
/// entry with its runtime and devel tags.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoImageWire {
    /// The CUDA release, exactly as in `cuda.toml`: `12.2.1`.
    pub(crate) cuda: String,
    /// `unpublished`: NVIDIA's tag lists at the cited commit, newer than the release, list
    /// no tag of it. `unknown`: no public copy of the lists covers it; `note` says why.
    pub(crate) status: String,
    /// The tag lists (or the newest copy of them found) at a commit.
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) note: Option<String>,
}

/// `[[image.digest]]`: one observation of the digest a tag pointed to. Tags move (NVIDIA
/// re-pushes), so each observation carries the date it was true and where it was seen.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DigestWire {
    /// One of the entry's tags.
    pub(crate) tag: String,
    /// `sha256:<64 lowercase hex>`.
    pub(crate) digest: String,
    /// `YYYY-MM-DD`: the date of the source (a commit's date, a release's).
    pub(crate) observed: String,
    /// Where it was seen: a URL at a commit, a release.
    pub(crate) source: String,
    /// `index` (the multi-arch image index, what `docker pull` prints), `manifest` (one
    /// platform's manifest) or `unknown` (the source does not say).
    pub(crate) kind: String,
}

/// `[[package]]` in `packages.toml`: a fabric, MPI or cluster package at one version.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PackageWire {
    /// `ucx`, `openmpi`, `nvidia-container-toolkit`, ….
    pub(crate) name: String,
    /// The upstream version. Absent when the package follows the driver
    /// (`follows_driver`).
    #[serde(default)]
    pub(crate) version: Option<String>,
    /// Build or download variant (`cuda12-linux-x86_64`, `source`).
    #[serde(default)]
    pub(crate) variant: Option<String>,
    /// Source or binary download.
    #[serde(default)]
    pub(crate) url: Option<String>,
    /// sha256 of `url`, from a published source.
    #[serde(default)]
    pub(crate) sha256: Option<String>,
    /// A source published without a tarball checksum: `url` is then a git repository and
    /// this its commit (40 hex), which git verifies when it checks the commit out.
    #[serde(default)]
    pub(crate) commit: Option<String>,
    /// Debian/Ubuntu packages with pins (`name=version`); `{driver}` and `{branch}` stand
    /// for the locked driver for packages that follow it.
    #[serde(default)]
    pub(crate) apt_packages: Vec<String>,
    /// The apt version string (`1.17.8-1`).
    #[serde(default)]
    pub(crate) apt_pin: Option<String>,
    /// RPM packages, same placeholders.
    #[serde(default)]
    pub(crate) dnf_packages: Vec<String>,
    /// A container image (without tag) that ships this version.
    #[serde(default)]
    pub(crate) image: Option<String>,
    /// `sha256:…` of `image:version`, from a published source.
    #[serde(default)]
    pub(crate) image_digest: Option<String>,
    /// `YYYY-MM-DD`: when `image_digest` was observed (the source's date).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) image_digest_observed: Option<String>,
    /// Where `image_digest` was observed, when not the entry's `source`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) image_digest_source: Option<String>,
    /// `index`, `manifest` or `unknown`, as for `[[image.digest]]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) image_digest_kind: Option<String>,
    /// Tags of `image` published for this version, where sourced
    /// (`4.6.0-4.8.3-distroless`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) image_tags: Vec<String>,
    /// The oldest version without known critical vulnerabilities.
    #[serde(default)]
    pub(crate) minimum_safe: bool,
    /// The package's version must equal the locked driver's (Fabric Manager).
    #[serde(default)]
    pub(crate) follows_driver: bool,
    /// The locked component whose version the package's pins follow (`driver`, `cuda`,
    /// `cudnn`, `nccl`): NVIDIA's repository naming for the stack's own packages, with
    /// placeholders (`{cuda}`, `{cuda_major}`, `{cudnn_major}`, `{nccl_cuda}`, …).
    #[serde(default)]
    pub(crate) follows: Option<String>,
    /// The versions of the followed component this naming applies to (`>=9`).
    #[serde(default)]
    pub(crate) follows_versions: Option<String>,
    /// A host requirement of GPUs on this NVSwitch generation (`gpus.toml`
    /// `nvswitch_generation`): installed on their hosts, unpinned (no `version`), with
    /// `kernel_modules` loaded at boot. Fourth-generation NVSwitch systems need NVLSM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) nvswitch_generation: Option<u32>,
    /// Kernel modules a host requirement loads at every boot (`ib_umad`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) kernel_modules: Vec<String>,
    /// A host requirement's packages come from the OS release's own repositories, not
    /// NVIDIA's CUDA repository.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) os_release: bool,
    /// Requirements in words (not enforced).
    #[serde(default)]
    pub(crate) requires: Option<String>,
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) note: Option<String>,
}

/// `[[instance]]` in `cloud.toml`: a cloud instance type for a GPU.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct InstanceWire {
    /// GPU id (`gpus.toml`).
    pub(crate) gpu: String,
    /// `aws`, `gcp` or `azure`.
    pub(crate) cloud: String,
    #[serde(default)]
    pub(crate) instance_type: Option<String>,
    /// GPUs per instance.
    #[serde(default)]
    pub(crate) gpus: Option<u32>,
    /// GCP N1-style accelerator type.
    #[serde(default)]
    pub(crate) accelerator_type: Option<String>,
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) note: Option<String>,
}

/// `[[cloud]]` in `cloud.toml`: per-cloud settings GPU machines need.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CloudWire {
    /// `gcp`.
    pub(crate) id: String,
    /// GCP: `TERMINATE` (GPU VMs cannot live-migrate).
    #[serde(default)]
    pub(crate) on_host_maintenance: Option<String>,
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) note: Option<String>,
}

/// `[[bandwidth]]` in `bandwidth.toml`: a published nccl-tests bus bandwidth.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BandwidthWire {
    pub(crate) gpu: String,
    /// `nvlink` (one node), `infiniband`, `roce`, `efa`, `slingshot`, `ethernet`.
    pub(crate) fabric: String,
    /// `all_reduce_perf`.
    pub(crate) test: String,
    /// Message size of the figure (`8G`), where stated.
    #[serde(default)]
    pub(crate) size: Option<String>,
    /// Bus bandwidth as published, in text (`478.87`) so no float rounding creeps in.
    pub(crate) busbw_gbps: String,
    pub(crate) nodes: u32,
    pub(crate) gpus_per_node: u32,
    /// Whether the run used InfiniBand SHARP (NCCL's CollNet): `true`, `false`, or left
    /// out when the source does not say. A SHARP figure is the threshold only of a spec
    /// with `[network].sharp = true`.
    #[serde(default)]
    pub(crate) sharp: Option<bool>,
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) note: Option<String>,
}

/// `[[env]]` in `env.toml`: an environment variable a fabric's NCCL jobs set.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EnvWire {
    /// A `[cluster].fabric`, or `all`.
    pub(crate) fabric: String,
    /// `NCCL_IB_DISABLE`.
    pub(crate) name: String,
    /// The value, as the source gives it.
    pub(crate) value: String,
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) note: Option<String>,
}
