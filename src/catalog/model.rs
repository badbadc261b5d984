//! The validated catalog: the types the rest of gpustack reads ([`Catalog`], [`Gpu`],
//! [`LibRelease`], …), each fact with its [`Origin`], and the catalog's lookups.

use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::core::arch::{Cc, Suffix, Target};
use crate::core::version::{Version, VersionReq};
use crate::core::{Component, Layer};

/// Where a fact comes from: the catalog file and line, and the upstream source. Cheap to
/// clone (shared).
#[derive(Clone)]
pub struct Origin(pub(super) Arc<OriginInner>);

/// The data behind an [`Origin`].
pub struct OriginInner {
    /// `catalog/cuda.toml` for the stock catalog; the overlay path as given otherwise.
    /// (Shared by the file's entries.)
    pub file: Arc<str>,
    /// The file's name as locks record it: `catalog/cuda.toml`, or `overlay/<file name>` for
    /// an overlay (never an absolute or user-typed path).
    pub lock_name: Arc<str>,
    /// 1-based line of the entry.
    pub line: usize,
    /// The upstream source a reader can open.
    pub source: String,
    /// Where the canonical text of the entry comes from, for the catalog digest (made only
    /// for the entries a lock uses).
    pub(super) canonical: Canonical,
    /// That text, once produced: a lock's solve and its lock build digest the same entries.
    pub(super) canonical_text: std::sync::OnceLock<String>,
}

/// Where an entry's canonical text (`[family]` and the entry as `toml::to_string` writes
/// it) comes from.
pub(crate) enum Canonical {
    /// A stock entry: the body was written at build time, into the stock blob (UTF-8,
    /// checked when the text is made: most entries are never digested).
    Stock {
        family: &'static str,
        body: &'static [u8],
    },
    /// An overlay entry: serialized from a copy of the parsed entry, on first use.
    Parsed(Box<dyn Fn() -> String + Send + Sync>),
}

/// An entry's canonical text: its family, then its canonical body
/// ([`super::codec::canonical_body`]).
pub(super) fn canonical_text(family: &str, body: &str) -> String {
    format!("[{family}]\n{body}")
}

/// A long source in a message: its first URL, or its first 100 characters; the full text
/// is for `--verbose` and `gpustack catalog show`.
///
/// ```
/// use gpustack::catalog::short_source;
/// assert_eq!(short_source("CUDA notes https://docs.nvidia.com/x (Table 3); https://y"), "https://docs.nvidia.com/x (and more)");
/// assert_eq!(short_source("vendor runbook"), "vendor runbook");
/// ```
pub fn short_source(source: &str) -> String {
    if let Some(i) = source.find("https://").or_else(|| source.find("http://")) {
        let url: String = source[i..]
            .chars()
            .take_while(|c| !c.is_whitespace() && !matches!(c, ')' | ';' | ',' | '\'' | '"'))
            .collect();
        let url = url.trim_end_matches(['.', ':']);
        return if url.len() + 2 >= source.trim().len() {
            url.to_string()
        } else {
            format!("{url} (and more)")
        };
    }
    const MAX: usize = 100;
    match source.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &source[..i]),
        None => source.to_string(),
    }
}

impl std::ops::Deref for Origin {
    type Target = OriginInner;
    fn deref(&self) -> &OriginInner {
        &self.0
    }
}

impl PartialEq for Origin {
    fn eq(&self, other: &Origin) -> bool {
        self.file == other.file && self.line == other.line && self.source == other.source
    }
}

impl Eq for Origin {}

impl std::fmt::Debug for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Origin({}:{})", self.file, self.line)
    }
}

impl Origin {
    /// `catalog/cuda.toml:42`.
    pub fn location(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }

    /// The canonical text of the entry.
    /// Produced on first use and kept.
    pub(crate) fn canonical(&self) -> &str {
        self.0
            .canonical_text
            .get_or_init(|| match &self.0.canonical {
                Canonical::Stock { family, body } => {
                    canonical_text(family, &String::from_utf8_lossy(body))
                }
                Canonical::Parsed(make) => make(),
            })
    }
}

/// A driver branch's support type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum BranchKind {
    /// Long-term support branch (about 3 years).
    Ltsb,
    /// Production branch (about 1 year).
    Pb,
    /// New feature branch (no updates).
    Nfb,
}

impl BranchKind {
    /// `ltsb`, `pb`, `nfb`.
    pub fn as_str(self) -> &'static str {
        match self {
            BranchKind::Ltsb => "ltsb",
            BranchKind::Pb => "pb",
            BranchKind::Nfb => "nfb",
        }
    }
}

/// A driver branch (`R535`).
#[derive(Clone, Debug)]
pub struct DriverBranch {
    /// `535`.
    pub number: u64,
    /// LTSB, PB or NFB.
    pub kind: BranchKind,
    /// `true` while NVIDIA supports it (as of the catalog's date).
    pub supported: bool,
    /// End of life, as the source writes it.
    pub eol: Option<String>,
    /// Where this comes from.
    pub origin: Origin,
}

/// A released driver version.
#[derive(Clone, Debug)]
pub struct DriverRelease {
    /// `550.54.15`.
    pub version: Version,
    /// Index into [`Catalog::branches`].
    pub branch: usize,
}

/// A CUDA toolkit release.
#[derive(Clone, Debug)]
pub struct CudaRelease {
    /// `12.4.1`.
    pub version: Version,
    /// Full-feature minimum Linux driver (Table 3), when published.
    pub driver_min: Option<Version>,
    /// Known only from NVIDIA's redistrib manifest: listed, never locked (rule
    /// `cuda.redist-only`).
    pub redist_only: bool,
    /// Where this comes from.
    pub origin: Origin,
}

/// The minor-version-compatibility floor of a CUDA major.
#[derive(Clone, Debug)]
pub struct MinorCompat {
    /// `12`.
    pub major: u64,
    /// `525.60.13`.
    pub driver_min: Version,
    /// Where this comes from.
    pub origin: Origin,
}

/// A `cuda-compat-X-Y` forward-compatibility package.
#[derive(Clone, Debug)]
pub struct ForwardCompat {
    /// `13.0`.
    pub cuda: Version,
    /// `cuda-compat-13-0`.
    pub package: String,
    /// Base driver branches it supports (`535`, `570`).
    pub bases: Vec<u64>,
    /// Where this comes from.
    pub origin: Origin,
}

/// The GPU targets nvcc accepts for a range of CUDA releases.
#[derive(Clone, Debug)]
pub struct TargetSet {
    /// The CUDA releases this applies to.
    pub cuda: VersionReq,
    /// The accepted targets (SASS spelling).
    pub sm: Vec<Target>,
    /// Where this comes from.
    pub origin: Origin,
}

/// A GPU product.
#[derive(Clone, Debug)]
pub struct Gpu {
    /// `h100`.
    pub id: String,
    /// `NVIDIA H100 SXM5 80GB`.
    pub name: String,
    /// Other ids the spec may use.
    pub aliases: Vec<String>,
    /// Compute capability.
    pub cc: Cc,
    /// `hopper`.
    pub arch: String,
    /// A data center GPU (forward compatibility applies).
    pub datacenter: bool,
    /// On an NVSwitch board (Fabric Manager required).
    pub nvswitch: bool,
    /// Memory in GiB.
    pub memory_gib: Option<u32>,
    /// GPU Feature Discovery `nvidia.com/gpu.product` label.
    pub gfd_product: Option<String>,
    /// Names printed by `nvidia-smi`.
    pub smi_names: Vec<String>,
    /// Lowest driver supporting the product, when sourced.
    pub min_driver: Option<Version>,
    /// Last driver branch supporting it (legacy architectures).
    pub last_driver_branch: Option<u64>,
    /// CPU architecture of its hosts: `x86_64`, or `aarch64` for Grace systems.
    pub cpu: String,
    /// The NVSwitch generation of its boards, where sourced (Fabric Manager user guide).
    pub nvswitch_generation: Option<u32>,
    /// Where this comes from.
    pub origin: Origin,
}

/// Whether NVIDIA's open GPU kernel modules drive a GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenModules {
    /// Only the open modules do (Blackwell, Grace Hopper).
    Required,
    /// Both flavours do; the branch decides the default.
    Supported,
    /// Only the proprietary modules do (Volta and older).
    Unsupported,
}

/// The kernel-module flavours of an architecture, or of one product.
#[derive(Clone, Debug)]
pub struct KernelModules {
    /// `[[gpu]].arch` it applies to.
    pub arch: Option<String>,
    /// GPU id it applies to (wins over its architecture's entry).
    pub gpu: Option<String>,
    /// Whether the open modules drive it.
    pub open: OpenModules,
    /// For [`OpenModules::Supported`]: the first driver branch whose default is open (`560`).
    pub open_default_from: Option<u64>,
    /// Where this comes from.
    pub origin: Origin,
}

/// The driver branches that support a GPU architecture (`[[generation]]` in `gpus.toml`).
#[derive(Clone, Debug)]
pub struct Generation {
    /// `hopper`, as [`Gpu::arch`] spells it.
    pub arch: String,
    /// The first driver that supports the architecture.
    pub min_driver: Option<Version>,
    /// The last driver branch that supports it.
    pub last_driver_branch: Option<u64>,
    /// Where this comes from.
    pub origin: Origin,
}

/// The first cuDNN or NCCL release with kernels for a compute capability and every newer
/// one (`[[gpu_support]]`).
#[derive(Clone, Debug)]
pub struct GpuSupport {
    /// Applies to GPUs of this compute capability or newer.
    pub cc: Cc,
    /// The first release that supports them.
    pub since: Version,
    /// Where this comes from.
    pub origin: Origin,
}

/// The oldest DeepSpeed release that works with a torch minor (`[[torch_minimum]]`).
#[derive(Clone, Debug)]
pub struct DeepspeedTorchMinimum {
    /// torch major and minor: `(2, 4)`.
    pub torch: (u64, u64),
    /// The oldest DeepSpeed release that works with it.
    pub deepspeed: Version,
    /// Where this comes from.
    pub origin: Origin,
}

/// A vendor-validated combination (`[[tested]]` in `tested.toml`): the exact versions an
/// NGC container release or a cloud deep-learning image ships. Fields the vendor does not
/// state are `None`.
#[derive(Clone, Debug)]
pub struct Tested {
    /// `NGC PyTorch 25.10`.
    pub name: String,
    /// CUDA toolkit release.
    pub cuda: Option<Version>,
    /// cuDNN release.
    pub cudnn: Option<Version>,
    /// NCCL release.
    pub nccl: Option<Version>,
    /// Python minor.
    pub python: Option<Version>,
    /// A PyPI torch release.
    pub torch: Option<Version>,
    /// Where this comes from.
    pub origin: Origin,
}

impl Tested {
    /// The version this tuple states for a component, if any.
    pub fn version_of(&self, c: Component) -> Option<&Version> {
        match c {
            Component::Cuda => self.cuda.as_ref(),
            Component::Cudnn => self.cudnn.as_ref(),
            Component::Nccl => self.nccl.as_ref(),
            Component::Python => self.python.as_ref(),
            Component::Torch => self.torch.as_ref(),
            _ => None,
        }
    }
}

/// One Linux platform tag of a binary wheel: `manylinux_2_28_x86_64`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WheelPlatform {
    /// The tag as the wheel's file name spells it.
    pub tag: String,
    /// `x86_64` or `aarch64`.
    pub cpu: String,
    /// The glibc the tag requires (`manylinux1` = 2.5, `manylinux2014` = 2.17,
    /// `manylinux_X_Y` = X.Y); `None` for a plain `linux_*` tag, which states none.
    pub glibc: Option<Version>,
}

impl WheelPlatform {
    /// Parses a PEP 600 / legacy manylinux tag or a `linux_*` tag.
    pub fn parse(tag: &str) -> Option<WheelPlatform> {
        if tag.starts_with("win") || tag.starts_with("macosx_") {
            // Not a Linux tag: recorded for a release with no Linux wheel at all, which no
            // Linux host installs (`cpu` is the OS, never a host's CPU).
            let os = if tag.starts_with("win") {
                "windows"
            } else {
                "macos"
            };
            return Some(WheelPlatform {
                tag: tag.to_string(),
                cpu: os.to_string(),
                glibc: None,
            });
        }
        let (rest, cpu) = ["x86_64", "aarch64"]
            .iter()
            .find_map(|c| tag.strip_suffix(&format!("_{c}")).map(|r| (r, *c)))?;
        let glibc = match rest {
            "linux" => None,
            "manylinux1" => Some("2.5"),
            "manylinux2010" => Some("2.12"),
            "manylinux2014" => Some("2.17"),
            _ => {
                let v = rest.strip_prefix("manylinux_")?;
                let (a, b) = v.split_once('_')?;
                if a.is_empty()
                    || b.is_empty()
                    || !a.bytes().chain(b.bytes()).all(|c| c.is_ascii_digit())
                {
                    return None;
                }
                return Some(WheelPlatform {
                    tag: tag.to_string(),
                    cpu: cpu.to_string(),
                    glibc: Version::parse(&format!("{a}.{b}")).ok(),
                });
            }
        };
        Some(WheelPlatform {
            tag: tag.to_string(),
            cpu: cpu.to_string(),
            glibc: glibc.and_then(|g| Version::parse(g).ok()),
        })
    }

    /// A Linux tag (not a Windows or macOS one).
    pub fn is_linux(&self) -> bool {
        matches!(self.cpu.as_str(), "x86_64" | "aarch64")
    }

    /// Whether pip installs a wheel with this tag on a host with this CPU and glibc.
    pub fn installs_on(&self, cpu: &str, glibc: &Version) -> bool {
        self.cpu == cpu && self.glibc.as_ref().is_none_or(|g| g <= glibc)
    }
}

/// PEP 592: every file of the release is yanked on its index. Such a release is listed,
/// never locked (rule `pypi.yanked`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Yank {
    /// The index's reason, when it gives one.
    pub reason: Option<String>,
    /// The day an import saw it yanked (PyPI does not publish when a file was yanked).
    pub observed: String,
    /// The project page read.
    pub source: String,
}

/// The least glibc an install of a release needs on one CPU, its dependencies' wheels
/// included (rule `wheel.dependency-glibc`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GlibcFloor {
    /// `x86_64` or `aarch64`.
    pub cpu: String,
    /// `2.31`.
    pub glibc: Version,
    /// What sets it: `llguidance>=1.7.0,<1.8.0 (manylinux_2_31_x86_64)`.
    pub by: String,
    /// The project pages read, and the day.
    pub source: String,
}

/// The facts of a PyPI release that decide whether it installs at all: yanked status and
/// the glibc floor of its install (dependencies included).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Installability {
    /// Yanked on PyPI.
    pub yanked: Option<Yank>,
    /// Per CPU, when computed.
    pub glibc_floor: Vec<GlibcFloor>,
}

impl Installability {
    /// The floor for `cpu` above `glibc`, if any.
    pub fn floor_above(&self, cpu: &str, glibc: &Version) -> Option<&GlibcFloor> {
        self.glibc_floor
            .iter()
            .find(|f| f.cpu == cpu && &f.glibc > glibc)
    }
}

/// An operating system with the CUDA releases it has images for.
#[derive(Clone, Debug)]
pub struct Os {
    /// `ubuntu22.04`.
    pub id: String,
    /// CUDA releases with `nvidia/cuda` images for it.
    pub cuda: VersionReq,
    /// The glibc version it ships, when sourced.
    pub glibc: Option<Version>,
    /// Its point releases, oldest first.
    pub releases: Vec<OsRelease>,
    /// Its cloud images, by release and CPU.
    pub images: Vec<OsImage>,
    /// Where this comes from.
    pub origin: Origin,
}

impl Os {
    /// The newest release with a cloud image for `cpu`, and that image.
    pub fn newest_image(&self, cpu: &str) -> Option<(&OsRelease, &OsImage)> {
        self.releases.iter().rev().find_map(|r| {
            self.images
                .iter()
                .find(|i| i.cpu == cpu && i.release == r.version)
                .map(|i| (r, i))
        })
    }

    /// The release after `r`, if the catalog knows one (Rocky: a superseded minor's
    /// packages move to the vault when its successor ships).
    pub fn successor(&self, r: &OsRelease) -> Option<&OsRelease> {
        self.releases.iter().find(|x| x.version > r.version)
    }
}

/// A point release of an OS (`[[os.release]]`).
#[derive(Clone, Debug)]
pub struct OsRelease {
    /// `9.7`, `24.04`.
    pub version: Version,
    /// `2025-12-01` or `2024-04`.
    pub released: Option<String>,
    /// End of life: `2025-11`, `2029-05-31`.
    pub eol: Option<String>,
    /// Where its packages and images live once superseded.
    pub vault: Option<String>,
    /// Where the dates come from.
    pub source: String,
}

/// A dated cloud image of an OS release for one CPU (`[[os.image]]`).
#[derive(Clone, Debug)]
pub struct OsImage {
    /// `9.7`.
    pub release: Version,
    /// `x86_64`, `aarch64`.
    pub cpu: String,
    /// The image.
    pub url: String,
    /// Its sha256 (hex).
    pub sha256: String,
    /// Where the URL and digest come from.
    pub source: String,
}

/// A Python release.
#[derive(Clone, Debug)]
pub struct PythonRelease {
    /// `3.11`.
    pub version: Version,
    /// End of life.
    pub eol: Option<String>,
    /// Where this comes from.
    pub origin: Origin,
}

/// A cuDNN or NCCL release.
#[derive(Clone, Debug)]
pub struct LibRelease {
    /// `9.1.0.70`, `2.21.5`.
    pub version: Version,
    /// CUDA majors it ships builds for.
    pub cuda_majors: Vec<u64>,
    /// NCCL: the CUDA minors NVIDIA publishes packages for (`12.9`), where a listing was
    /// found; empty when unknown.
    pub cuda_builds: Vec<Version>,
    /// Lowest compute capability it supports, when sourced.
    pub min_cc: Option<Cc>,
    /// Recorded only for a release with no Linux wheel on PyPI (`win_amd64`).
    pub platforms: Vec<WheelPlatform>,
    /// Yanked on PyPI.
    pub install: Installability,
    /// Where this comes from.
    pub origin: Origin,
}

/// A file with a known hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRef {
    /// The release it belongs to, when an entry covers several.
    pub version: Option<Version>,
    /// Python minor of the wheel tag.
    pub python: Option<Version>,
    /// Index it is served from.
    pub index: Option<String>,
    /// File name.
    pub filename: String,
    /// Hex sha256.
    pub sha256: String,
}

/// A torch release (all variants).
#[derive(Clone, Debug)]
pub struct TorchRelease {
    /// `2.5.1`.
    pub version: Version,
    /// Python minors with published wheels.
    pub python: VersionReq,
    /// The variant the PyPI wheel is.
    pub pypi_variant: String,
    /// The CPUs whose PyPI wheel is the `pypi_variant` CUDA build (`x86_64`, `aarch64`);
    /// on any other CPU the PyPI wheel is a CPU build and the variant's index serves it.
    pub pypi_cuda_cpus: Vec<String>,
    /// Platform tags of the PyPI wheels (the `pypi_variant` build), when read.
    pub platforms: Vec<WheelPlatform>,
    /// Yanked status and glibc floor of the PyPI release.
    pub install: Installability,
    /// The release's `Requires-Dist` on triton (`==3.5.0`), when read.
    pub triton: Option<String>,
    /// Where this comes from.
    pub origin: Origin,
}

/// One torch wheel build: a release in one CUDA variant.
#[derive(Clone, Debug)]
pub struct TorchBuild {
    /// `2.5.1`.
    pub version: Version,
    /// `cu124`.
    pub variant: String,
    /// `2.5.1+cu124`.
    pub full: Version,
    /// CUDA runtime in the wheel (`12.4`).
    pub cuda: Version,
    /// Index URL of the variant.
    pub index_url: String,
    /// `TORCH_CUDA_ARCH_LIST` of the build.
    pub arch_list: Vec<Target>,
    /// cuDNN pin, when known.
    pub cudnn: Option<Version>,
    /// NCCL pin, when known.
    pub nccl: Option<Version>,
    /// cuSPARSELt pin, when known.
    pub cusparselt: Option<Version>,
    /// Python minors with wheels for this build.
    pub python: VersionReq,
    /// Where `python` comes from: the `[[wheel]]` entry when the variant narrows the
    /// release's range (its own `python`), else the `[[release]]` entry.
    pub python_origin: Origin,
    /// `true` when this variant is the PyPI default of the release.
    pub pypi_default: bool,
    /// The CPUs whose PyPI wheel is this build (the PyPI default only; else empty).
    pub pypi_cpus: Vec<String>,
    /// Platform tags of its wheels, when read (the PyPI default build only).
    pub platforms: Vec<WheelPlatform>,
    /// The release's yanked status and glibc floor (its `[[release]]` entry's, read from
    /// PyPI; the variant builds install the same dependencies).
    pub install: Installability,
    /// Files with hashes for this release.
    pub files: Vec<FileRef>,
    /// The `[[wheel]]` entry.
    pub origin: Origin,
    /// The `[[release]]` entry.
    pub release_origin: Origin,
}

/// The source of a torch release, for `torch = { build = "source" }`.
#[derive(Clone, Debug)]
pub struct TorchSource {
    /// `2.10.0`.
    pub version: Version,
    /// `https://github.com/pytorch/pytorch`.
    pub repository: String,
    /// `v2.10.0`.
    pub tag: String,
    /// The commit the tag points to, when the catalog has read it.
    pub commit: Option<String>,
    /// The source archive with submodules, when its digest is published.
    pub archive: Option<SourceArchive>,
    /// The host compiler facts of a source build, when the catalog has them.
    pub compiler: HostCompiler,
    /// The `TORCH_CUDA_ARCH_LIST` entries the release's CMake accepts, when read.
    pub cmake_archs: Option<CmakeArchs>,
    /// The oldest cuDNN a source build supports.
    pub cudnn_min: Version,
    /// The build's own requirements (`[build-system].requires`).
    pub build_requires: Vec<String>,
    /// What the built wheel requires (setup.py `install_requires`).
    pub runtime_requires: Vec<String>,
    /// The `[[source]]` entry.
    pub origin: Origin,
}

/// A release's source archive: what a source build downloads and checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceArchive {
    /// An `https://` URL.
    pub url: String,
    /// The archive's sha256, 64 lowercase hex digits.
    pub sha256: String,
}

/// The `TORCH_CUDA_ARCH_LIST` entries a release's CMake accepts (`CUDA_SELECT_NVCC_ARCH_FLAGS`
/// in `select_compute_arch.cmake`): `NUM.NUM`, with one of `suffixes` or none, with or
/// without `+PTX`. (Its names, `Ampere`, `Hopper`, …, are never written by gpustack.)
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CmakeArchs {
    /// The suffixes its pattern accepts after `NUM.NUM` (`a`, `f`).
    pub suffixes: Vec<Suffix>,
    /// The `[source.cmake_archs]` table's `source`.
    pub source: String,
}

impl CmakeArchs {
    /// Whether the CMake accepts the `TORCH_CUDA_ARCH_LIST` entry of `t`.
    pub fn accepts(&self, t: &Target) -> bool {
        t.suffix == Suffix::None || self.suffixes.contains(&t.suffix)
    }
}

/// What decides a source build's host compiler: PyTorch's minimum GCC, nvcc's newest GCC
/// major per CUDA minor, and the GCC each OS installs. Each list is empty where unread.
#[derive(Clone, Debug, Default)]
pub struct HostCompiler {
    /// The oldest GCC PyTorch builds with (`9.4.0`).
    pub gcc_min: Option<Version>,
    /// (CUDA minor `12.8`, newest GCC major nvcc accepts `14`).
    pub nvcc_gcc_max: Vec<(Version, u32)>,
    /// (`[[os]]` id, the GCC it installs as `gcc`).
    pub os_gcc: Vec<(String, Version)>,
}

impl HostCompiler {
    /// The GCC `os` installs, if known.
    pub fn os_gcc(&self, os: &str) -> Option<&Version> {
        self.os_gcc.iter().find(|(o, _)| o == os).map(|(_, v)| v)
    }
    /// The newest GCC major nvcc of CUDA `cuda` (its minor) accepts, if known.
    pub fn nvcc_gcc_max(&self, cuda: &Version) -> Option<u32> {
        self.nvcc_gcc_max
            .iter()
            .find(|(c, _)| c.major() == cuda.major() && c.minor() == cuda.minor())
            .map(|(_, m)| *m)
    }
}

/// A vLLM release.
#[derive(Clone, Debug)]
pub struct VllmRelease {
    /// `0.6.3.post1`.
    pub version: Version,
    /// Exact torch pin.
    pub torch: Version,
    /// CUDA of vLLM's PyPI wheel.
    pub cuda: Version,
    /// Python range.
    pub python: VersionReq,
    /// Minimum compute capability.
    pub min_cc: Option<Cc>,
    /// Files with hashes.
    pub files: Vec<FileRef>,
    /// Platform tags of its PyPI wheels, when read.
    pub platforms: Vec<WheelPlatform>,
    /// Yanked status and glibc floor.
    pub install: Installability,
    /// Where this comes from.
    pub origin: Origin,
}

/// A DeepSpeed release.
#[derive(Clone, Debug)]
pub struct DeepspeedRelease {
    /// `0.16.4`.
    pub version: Version,
    /// torch requirement, when declared.
    pub torch: Option<VersionReq>,
    /// Python range, when known.
    pub python: Option<VersionReq>,
    /// CUDA minors within which nvcc and torch may differ.
    pub cuda_mismatch_ok: Vec<Version>,
    /// Yanked status and glibc floor.
    pub install: Installability,
    /// Where this comes from.
    pub origin: Origin,
}

/// One release of an optional framework component (an "extra": flash-attn, xformers, …),
/// from `[[extra]]`.
#[derive(Clone, Debug)]
pub struct ExtraRelease {
    /// Which component: [`Component::is_extra`] holds.
    pub component: Component,
    /// `2.8.3.post2`.
    pub version: Version,
    /// The layer every entry of the component states (the component's own layer).
    pub layer: Layer,
    /// The package's requirement on torch, when it has one. Compared with the torch release
    /// without its `+cuXXX` label.
    pub torch: Option<VersionReq>,
    /// CUDA majors of the published binaries, when known.
    pub cuda_majors: Option<Vec<u64>>,
    /// Lowest compute capability, where a source states one.
    pub min_cc: Option<Cc>,
    /// `Requires-Python`, when known.
    pub python: Option<VersionReq>,
    /// The distribution to install: `cupy-cuda12x`, `flash_attn_3`.
    pub pypi_name: String,
    /// The index it installs from.
    pub index: String,
    /// The CUDA variant of the wheel on `index` (`cu128`), where stated.
    pub pypi_variant: Option<String>,
    /// What is published and how it installs, free text.
    pub prebuilt: Option<String>,
    /// Files with hashes.
    pub files: Vec<FileRef>,
    /// Platform tags of its PyPI wheels, when read.
    pub platforms: Vec<WheelPlatform>,
    /// Yanked status and glibc floor.
    pub install: Installability,
    /// Where this comes from.
    pub origin: Origin,
}

impl ExtraRelease {
    /// `true` when the distribution is the component's own PyPI project (`flash-attn`),
    /// not a differently named one (`flash_attn_3`, `cupy-cuda12x`). PEP 503 normalized.
    pub fn is_own_project(&self) -> bool {
        pep503(&self.pypi_name) == self.component.name()
    }

    /// The version, with the distribution when it is not the component's own project:
    /// `2.8.3`, `14.2.0 (cupy-cuda13x)`. Two entries of one component never share it.
    pub fn label(&self) -> String {
        if self.is_own_project() {
            self.version.to_string()
        } else {
            format!("{} ({})", self.version, self.pypi_name)
        }
    }
}

/// PEP 503 normalization: lowercase, runs of `-`, `_`, `.` become one `-`.
pub(crate) fn pep503(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// The validated, indexed catalog. Every list is sorted newest first (or by id).
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    /// Driver branches, newest first.
    pub branches: Vec<DriverBranch>,
    /// Driver releases, newest first.
    pub drivers: Vec<DriverRelease>,
    /// CUDA releases, newest first.
    pub cuda: Vec<CudaRelease>,
    /// Minor-version-compatibility floors.
    pub minor_compat: Vec<MinorCompat>,
    /// Forward-compatibility packages.
    pub forward_compat: Vec<ForwardCompat>,
    /// nvcc target sets.
    pub targets: Vec<TargetSet>,
    /// GPUs by id.
    pub gpus: Vec<Gpu>,
    /// Kernel-module flavours by architecture or product.
    pub kernel_modules: Vec<KernelModules>,
    /// Driver support per GPU architecture, by architecture.
    pub generations: Vec<Generation>,
    /// cuDNN support of compute capabilities, oldest capability first.
    pub cudnn_gpu_support: Vec<GpuSupport>,
    /// NCCL support of compute capabilities, oldest capability first.
    pub nccl_gpu_support: Vec<GpuSupport>,
    /// The oldest DeepSpeed per torch minor, by torch minor.
    pub deepspeed_torch_minimum: Vec<DeepspeedTorchMinimum>,
    /// Vendor-validated combinations, by name.
    pub tested: Vec<Tested>,
    /// Operating systems by id.
    pub os: Vec<Os>,
    /// Python releases, newest first.
    pub python: Vec<PythonRelease>,
    /// cuDNN releases, newest first.
    pub cudnn: Vec<LibRelease>,
    /// NCCL releases, newest first.
    pub nccl: Vec<LibRelease>,
    /// torch releases, newest first.
    pub torch_releases: Vec<TorchRelease>,
    /// torch builds, newest release first, then PyPI default, then newest CUDA.
    pub torch: Vec<TorchBuild>,
    /// Where torch releases' sources live, for source builds (`[[source]]`), newest first.
    pub torch_sources: Vec<TorchSource>,
    /// vLLM releases, newest first.
    pub vllm: Vec<VllmRelease>,
    /// DeepSpeed releases, newest first.
    pub deepspeed: Vec<DeepspeedRelease>,
    /// Extra releases: by component (in [`Component`] order), then newest first, then by
    /// distribution name.
    pub extras: Vec<ExtraRelease>,
    /// `nvidia/cuda` images, by CUDA (newest first) then OS.
    pub images: Vec<BaseImage>,
    /// CUDA releases without runtime and devel tags on any OS, and why (`[[no_image]]`),
    /// newest first.
    pub no_images: Vec<NoImage>,
    /// Packages by name, newest first.
    pub packages: Vec<Package>,
    /// Cloud instance types, by GPU then cloud.
    pub instances: Vec<Instance>,
    /// Per-cloud settings.
    pub clouds: Vec<CloudSettings>,
    /// nccl-tests bandwidth figures, by GPU then fabric.
    pub bandwidth: Vec<Bandwidth>,
    /// Fabric environment variables, by fabric then name.
    pub env: Vec<EnvVar>,
}

/// `nvidia/cuda` image tags for one CUDA release on one OS.
#[derive(Clone, Debug)]
pub struct BaseImage {
    /// The CUDA release.
    pub cuda: Version,
    /// The OS id.
    pub os: String,
    /// Every tag NVIDIA lists for the pair (for [`ImageStatus::Observed`]: every tag seen
    /// in the cited public files).
    pub tags: Vec<String>,
    /// Where the tags come from: NVIDIA's supported or unsupported list, or public files.
    pub status: ImageStatus,
    /// The cuDNN inside the `cudnn` tags, where sourced.
    pub cudnn: Option<Version>,
    /// Digests sources showed the tags carrying, each with its date (several per tag when
    /// the tag moved).
    pub digests: Vec<DigestObservation>,
    /// Where this comes from.
    pub origin: Origin,
}

impl BaseImage {
    /// Lists the `<cuda>-runtime-<os>` and `<cuda>-devel-<os>` tags, which every target
    /// builds on.
    pub fn has_base_tags(&self) -> bool {
        // `<cuda>-<flavour>-<os>`, matched piece by piece (the solver asks this of every
        // image at every start).
        let is = |t: &str, f: &str| {
            t.strip_prefix(self.cuda.as_str())
                .and_then(|r| r.strip_prefix('-'))
                .and_then(|r| r.strip_prefix(f))
                .and_then(|r| r.strip_prefix('-'))
                == Some(self.os.as_str())
        };
        ["runtime", "devel"]
            .iter()
            .all(|f| self.tags.iter().any(|t| is(t, f)))
    }

    /// The observation of `tag`'s digest a lock may pin the image by: the newest one that
    /// is not known to name a single platform's manifest (a `FROM` by such a digest pulls
    /// on that platform only); the first listed among equally new ones.
    pub fn observation(&self, tag: &str) -> Option<&DigestObservation> {
        self.digests
            .iter()
            .filter(|d| d.tag == tag && d.kind != DigestKind::Manifest)
            .fold(None, |best: Option<&DigestObservation>, d| match best {
                Some(b) if b.observed >= d.observed => Some(b),
                _ => Some(d),
            })
    }
}

/// `[[no_image]]`: why a CUDA release has no `nvidia/cuda` runtime and devel tags in the
/// catalog, on any OS.
#[derive(Clone, Debug)]
pub struct NoImage {
    /// The CUDA release.
    pub cuda: Version,
    /// NVIDIA published none, or whether it did is not known.
    pub status: NoImageStatus,
    /// Why, for [`NoImageStatus::Unknown`] (required there).
    pub note: Option<String>,
    /// Where this comes from: NVIDIA's tag lists at a commit.
    pub origin: Origin,
}

/// The `status` of a `[[no_image]]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NoImageStatus {
    /// NVIDIA's tag lists at the cited commit, which list a later release of the same
    /// series, have no tag of it (supported or unsupported), and NVIDIA's `dist/` tree
    /// has no directory for it.
    Unpublished,
    /// No public copy of NVIDIA's tag lists covers the release (they predate it, or public
    /// files disagree): an open gap, with the reason in the note.
    Unknown,
}

impl NoImageStatus {
    /// The catalog's word: `unpublished`, `unknown`.
    pub fn name(self) -> &'static str {
        match self {
            NoImageStatus::Unpublished => "unpublished",
            NoImageStatus::Unknown => "unknown",
        }
    }

    /// From the catalog's word.
    pub fn parse(s: &str) -> Option<NoImageStatus> {
        match s {
            "unpublished" => Some(NoImageStatus::Unpublished),
            "unknown" => Some(NoImageStatus::Unknown),
            _ => None,
        }
    }
}

/// The `status` of an `[[image]]`: which of NVIDIA's tag lists files the tags, or that
/// none was read for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ImageStatus {
    /// In NVIDIA's `supported-tags.md`.
    Supported,
    /// In NVIDIA's `unsupported-tags.md`: the tags may contain critical vulnerabilities
    /// and may be deleted.
    Unsupported,
    /// Not read from NVIDIA's lists (the copy the catalog cites predates the release):
    /// the tags are observed in public files that pull them, each cited. NVIDIA's
    /// support of them is not known.
    Observed,
}

impl ImageStatus {
    /// The catalog's and the lock's word: `supported`, `unsupported`, `observed`.
    pub fn name(self) -> &'static str {
        match self {
            ImageStatus::Supported => "supported",
            ImageStatus::Unsupported => "unsupported",
            ImageStatus::Observed => "observed",
        }
    }

    /// From the catalog's word.
    pub fn parse(s: &str) -> Option<ImageStatus> {
        match s {
            "supported" => Some(ImageStatus::Supported),
            "unsupported" => Some(ImageStatus::Unsupported),
            "observed" => Some(ImageStatus::Observed),
            _ => None,
        }
    }
}

/// Which manifest a recorded digest names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DigestKind {
    /// The multi-arch image index (what `docker pull` prints, and what a `FROM …@sha256`
    /// copied from it names).
    Index,
    /// One platform's image manifest.
    Manifest,
    /// The source does not say.
    Unknown,
}

impl DigestKind {
    /// How the lock words it.
    pub fn describe(self) -> &'static str {
        match self {
            DigestKind::Index => "the multi-arch index",
            DigestKind::Manifest => "one platform's manifest",
            DigestKind::Unknown => "index or platform manifest: the source does not say",
        }
    }
}

/// A digest a source showed an image tag carrying, on a date: catalog knowledge, not
/// registry truth (tags move), used when the registry cannot be asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DigestObservation {
    /// The tag (`12.8.1-devel-ubuntu22.04`, `v1.20.0`).
    pub tag: String,
    /// `sha256:…`.
    pub digest: String,
    /// `YYYY-MM-DD`, the source's date.
    pub observed: String,
    /// Where it was seen.
    pub source: String,
    /// What the digest names.
    pub kind: DigestKind,
}

/// A fabric, MPI or cluster package at one version.
#[derive(Clone, Debug)]
pub struct Package {
    /// `ucx`.
    pub name: String,
    /// The upstream version text (`1.22.0`, `4.7.0-4.9.0`); `None` for packages that follow
    /// the driver.
    pub version: Option<String>,
    /// The version as a [`Version`] where it parses, for ordering.
    pub order: Option<Version>,
    /// Build variant.
    pub variant: Option<String>,
    /// Download URL.
    pub url: Option<String>,
    /// sha256 of the download, from a published source.
    pub sha256: Option<String>,
    /// The git commit of a source fetched from the repository `url` (no tarball checksum
    /// is published; git verifies the commit's content by its hash).
    pub commit: Option<String>,
    /// apt packages with pins (may hold `{driver}` / `{branch}`).
    pub apt_packages: Vec<String>,
    /// The apt version string.
    pub apt_pin: Option<String>,
    /// RPM packages (may hold `{driver}` / `{branch}`).
    pub dnf_packages: Vec<String>,
    /// Container image (without tag) shipping this version.
    pub image: Option<String>,
    /// `sha256:…` of the image at this version.
    pub image_digest: Option<String>,
    /// The dated observation behind `image_digest`, where the catalog records its date.
    pub image_observation: Option<DigestObservation>,
    /// Tags of `image` published for this version, where sourced.
    pub image_tags: Vec<String>,
    /// The oldest version without known critical vulnerabilities.
    pub minimum_safe: bool,
    /// Its version equals the locked driver's.
    pub follows_driver: bool,
    /// The locked component its pins follow (the driver for `follows_driver`; CUDA, cuDNN
    /// or NCCL for the stack's own OS packages), and the versions of it the naming
    /// applies to.
    pub follows: Option<(crate::core::Component, VersionReq)>,
    /// Requirements in words.
    pub requires: Option<String>,
    /// A host requirement of GPUs on this NVSwitch generation (unpinned, no version).
    pub nvswitch_generation: Option<u32>,
    /// Kernel modules the host requirement loads at every boot.
    pub kernel_modules: Vec<String>,
    /// The host requirement's packages come from the OS release's repositories.
    pub os_release: bool,
    /// Why, in words (the entry's `note`).
    pub note: Option<String>,
    /// Where this comes from.
    pub origin: Origin,
}

/// A cloud instance type for a GPU.
#[derive(Clone, Debug)]
pub struct Instance {
    /// GPU id.
    pub gpu: String,
    /// `aws`, `gcp`, `azure`.
    pub cloud: String,
    /// `p5.48xlarge`.
    pub instance_type: Option<String>,
    /// GPUs per instance.
    pub gpus: Option<u32>,
    /// GCP accelerator type.
    pub accelerator_type: Option<String>,
    /// Where this comes from.
    pub origin: Origin,
}

/// Per-cloud settings for GPU machines.
#[derive(Clone, Debug)]
pub struct CloudSettings {
    /// `gcp`.
    pub id: String,
    /// `TERMINATE`.
    pub on_host_maintenance: Option<String>,
    /// Where this comes from.
    pub origin: Origin,
}

/// A published nccl-tests bus bandwidth figure.
#[derive(Clone, Debug)]
pub struct Bandwidth {
    /// GPU id.
    pub gpu: String,
    /// `nvlink`, `infiniband`, ….
    pub fabric: String,
    /// `all_reduce_perf`.
    pub test: String,
    /// Message size, where stated.
    pub size: Option<String>,
    /// GB/s as published.
    pub busbw_gbps: String,
    /// Job shape.
    pub nodes: u32,
    /// Job shape.
    pub gpus_per_node: u32,
    /// Measured with InfiniBand SHARP (`Some(true)`), without (`Some(false)`), or not
    /// stated by the source.
    pub sharp: Option<bool>,
    /// Where this comes from.
    pub origin: Origin,
}

/// An environment variable NCCL jobs on a fabric set.
#[derive(Clone, Debug)]
pub struct EnvVar {
    /// A `[cluster].fabric`, or `all`.
    pub fabric: String,
    /// `NCCL_IB_DISABLE`.
    pub name: String,
    /// `0`.
    pub value: String,
    /// Where this comes from.
    pub origin: Origin,
}

/// The newest NVSwitch generation the Fabric Manager user guide describes (HGX/DGX B200,
/// B300 and B100 boards).
pub(crate) const MAX_NVSWITCH_GENERATION: u32 = 4;

/// Cluster fabrics (`[cluster].fabric`), plus `nvlink` for figures inside one node.
pub const FABRICS: &[&str] = &[
    "infiniband",
    "roce",
    "efa",
    "slingshot",
    "ethernet",
    "nvlink",
];

/// The built-in catalog's identity ([`Catalog::stock_identity`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StockIdentity {
    /// `sha256:…` over every file's path and text, in file-name order.
    pub digest: String,
    /// The newest `YYYY-MM-DD` a source records as read (`read 2026-11-22`, `as of …`,
    /// `retrieved …`, `checked …`, `accessed …`, `fetched …`), if any.
    pub date: Option<String>,
    /// How many files.
    pub files: usize,
}

impl Catalog {
    /// The `nvidia/cuda` image entry for a CUDA release on an OS.
    pub fn image(&self, cuda: &Version, os: &str) -> Option<&BaseImage> {
        self.images.iter().find(|i| &i.cuda == cuda && i.os == os)
    }

    /// Why a CUDA release has no `nvidia/cuda` runtime and devel tags, where the catalog
    /// says (`[[no_image]]`).
    pub fn no_image(&self, cuda: &Version) -> Option<&NoImage> {
        self.no_images.iter().find(|n| &n.cuda == cuda)
    }

    /// CUDA releases the catalog neither has runtime and devel tags for on some OS nor
    /// says why (`[[no_image]]`), oldest first: each one a gap `catalog validate` reports.
    pub fn cuda_without_images(&self) -> Vec<&CudaRelease> {
        let mut out: Vec<&CudaRelease> = self
            .cuda
            .iter()
            .filter(|r| {
                self.no_image(&r.version).is_none()
                    && !self
                        .images
                        .iter()
                        .any(|i| i.cuda == r.version && i.has_base_tags())
            })
            .collect();
        out.sort_by(|a, b| a.version.cmp(&b.version));
        out
    }

    /// What `catalog validate` checks beyond loading: every CUDA release has runtime and
    /// devel tags on some OS, or a `[[no_image]]` saying why not. One diagnostic per gap,
    /// at the release's entry in `cuda.toml`.
    pub fn coverage(&self) -> Vec<crate::error::Diagnostic> {
        self.cuda_without_images()
            .into_iter()
            .map(|r| {
                crate::error::Diagnostic::new(
                    crate::error::Stage::Catalog,
                    format!(
                        "CUDA `{}` has no `nvidia/cuda` runtime and devel tags on any OS in images.toml, and no `[[no_image]]` entry saying why",
                        r.version
                    ),
                )
                .at(crate::error::Location {
                    file: r.origin.file.to_string(),
                    line: r.origin.line,
                    col: 0,
                })
                .hint(format!(
                    "add its tags (`gpustack catalog import images` on NVIDIA's lists), or a `[[no_image]]` with `cuda = \"{}\"`, `status = \"unpublished\"` (NVIDIA's lists at a cited commit have none) or `\"unknown\"` (with a `note` saying why), and a `source`",
                    r.version
                ))
            })
            .collect()
    }

    /// Packages named `name`, newest first.
    pub fn packages_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Package> + 'a {
        self.packages.iter().filter(move |p| p.name == name)
    }

    /// The `[[source]]` entry of a torch release, for source builds.
    pub fn torch_source(&self, release: &Version) -> Option<&TorchSource> {
        self.torch_sources.iter().find(|s| &s.version == release)
    }

    /// The branch a driver version belongs to, when the catalog knows it.
    pub fn branch_of(&self, driver: &Version) -> Option<&DriverBranch> {
        self.branches.iter().find(|b| b.number == driver.major())
    }

    /// A warning when `driver` is on a branch the catalog does not know (`999.1.1`): the
    /// solver can only check its version against minimums, not its branch's support or end
    /// of life. Names the known branches.
    ///
    /// ```
    /// let catalog = gpustack::Catalog::stock().unwrap();
    /// let w = catalog.unknown_branch(&"999.1.1".parse().unwrap()).unwrap();
    /// assert!(w.starts_with("driver 999.1.1 is on branch R999, which the catalog does not know"), "{w}");
    /// assert!(catalog.unknown_branch(&"550.54.15".parse().unwrap()).is_none());
    /// ```
    pub fn unknown_branch(&self, driver: &Version) -> Option<String> {
        if self.branch_of(driver).is_some() {
            return None;
        }
        let known: Vec<String> = self
            .branches
            .iter()
            .map(|b| format!("R{}", b.number))
            .collect();
        Some(format!(
            "driver {driver} is on branch R{}, which the catalog does not know (known branches: {}): its support status and end of life are not checked",
            driver.major(),
            known.join(", ")
        ))
    }

    /// The nvcc targets of a CUDA release.
    pub fn targets_for(&self, cuda: &Version) -> Option<&TargetSet> {
        self.targets.iter().find(|t| t.cuda.matches(cuda))
    }

    /// The minor-version-compatibility floor for a CUDA major.
    pub fn minor_compat_for(&self, major: u64) -> Option<&MinorCompat> {
        self.minor_compat.iter().find(|m| m.major == major)
    }

    /// The catalog releases of an extra, with their indices into [`Catalog::extras`],
    /// newest first.
    pub fn extras_of(&self, c: Component) -> impl Iterator<Item = (usize, &ExtraRelease)> {
        self.extras
            .iter()
            .enumerate()
            .filter(move |(_, e)| e.component == c)
    }

    /// The forward-compatibility package for a CUDA major.minor.
    pub fn forward_compat_for(&self, cuda: &Version) -> Option<&ForwardCompat> {
        self.forward_compat
            .iter()
            .find(|f| f.cuda.major() == cuda.major() && f.cuda.minor() == cuda.minor())
    }
}

/// sha256 over the canonical text of the given origins, sorted: `sha256:…`.
pub(crate) fn digest_of<'a>(origins: impl IntoIterator<Item = &'a Origin>) -> String {
    let mut texts: Vec<&str> = origins.into_iter().map(Origin::canonical).collect();
    texts.sort_unstable();
    texts.dedup();
    let mut h = Sha256::new();
    for t in texts {
        h.update(t.as_bytes());
        h.update(b"\n\0");
    }
    format!("sha256:{}", hex(&h.finalize()))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    push_hex(&mut s, bytes);
    s
}

/// Appends `bytes` in lowercase hex (what `{:02x}` prints for each), without formatting
/// machinery: digests are written for every table of every lock.
pub(crate) fn push_hex(s: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
}
