//! The catalog: sourced compatibility facts, one TOML file per component family.
//!
//! The stock catalog (`catalog/*.toml` in the repository) is embedded in the binary, so
//! gpustack works from any directory. Site overlays (`--catalog DIR`, repeatable) are
//! loaded after it, in the order given; inside a directory, files are read in file-name
//! order. An overlay entry with the same key as an earlier one (a CUDA release's version,
//! a GPU's id, a torch wheel's release + variant, …) replaces it; a new key adds an entry.
//! Two entries with the same key inside one layer (the stock catalog or one overlay
//! directory) are an error, so an overlay can never be ambiguous.
//!
//! Loading reports every problem of every file at once ([`crate::Error::Invalid`] with one
//! [`Diagnostic`] each), with `file:line:col`.

mod wire;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use sha2::{Digest, Sha256};
use toml::Spanned;

use crate::arch::{Cc, Target};
use crate::error::{toml_diagnostic, Diagnostic, Error, Location, Stage};
use crate::version::{Version, VersionReq};
use wire::*;

/// The embedded stock catalog: (display path, contents).
const STOCK: &[(&str, &str)] = &[
    ("catalog/cuda.toml", include_str!("../../catalog/cuda.toml")),
    (
        "catalog/cudnn.toml",
        include_str!("../../catalog/cudnn.toml"),
    ),
    (
        "catalog/deepspeed.toml",
        include_str!("../../catalog/deepspeed.toml"),
    ),
    (
        "catalog/driver.toml",
        include_str!("../../catalog/driver.toml"),
    ),
    ("catalog/gpus.toml", include_str!("../../catalog/gpus.toml")),
    ("catalog/nccl.toml", include_str!("../../catalog/nccl.toml")),
    ("catalog/os.toml", include_str!("../../catalog/os.toml")),
    (
        "catalog/python.toml",
        include_str!("../../catalog/python.toml"),
    ),
    (
        "catalog/torch.toml",
        include_str!("../../catalog/torch.toml"),
    ),
    ("catalog/vllm.toml", include_str!("../../catalog/vllm.toml")),
];

const FAMILIES: &[&str] = &[
    "cuda",
    "cudnn",
    "deepspeed",
    "driver",
    "gpu",
    "nccl",
    "os",
    "python",
    "torch",
    "vllm",
];

/// Where a fact comes from: the catalog file and line, and the upstream source. Cheap to
/// clone (shared).
#[derive(Clone)]
pub struct Origin(Arc<OriginInner>);

/// The data behind an [`Origin`].
pub struct OriginInner {
    /// `catalog/cuda.toml` for the stock catalog; the overlay path as given otherwise.
    pub file: String,
    /// The file's name as locks record it: `catalog/cuda.toml`, or `overlay/<file name>` for
    /// an overlay (never an absolute or user-typed path).
    pub lock_name: String,
    /// 1-based line of the entry.
    pub line: usize,
    /// The upstream source a reader can open.
    pub source: String,
    /// Produces the canonical text of the entry, for the catalog digest (computed only for
    /// the entries a lock uses).
    canonical: Box<dyn Fn() -> String + Send + Sync>,
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
    pub(crate) fn canonical(&self) -> String {
        (self.0.canonical)()
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
    /// Where this comes from.
    pub origin: Origin,
}

/// An operating system with the CUDA releases it has images for.
#[derive(Clone, Debug)]
pub struct Os {
    /// `ubuntu22.04`.
    pub id: String,
    /// CUDA releases with `nvidia/cuda` images for it.
    pub cuda: VersionReq,
    /// Where this comes from.
    pub origin: Origin,
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
    /// Lowest compute capability it supports, when sourced.
    pub min_cc: Option<Cc>,
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
    /// `true` when this variant is the PyPI default of the release.
    pub pypi_default: bool,
    /// Files with hashes for this release.
    pub files: Vec<FileRef>,
    /// The `[[wheel]]` entry.
    pub origin: Origin,
    /// The `[[release]]` entry.
    pub release_origin: Origin,
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
    /// Where this comes from.
    pub origin: Origin,
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
    /// vLLM releases, newest first.
    pub vllm: Vec<VllmRelease>,
    /// DeepSpeed releases, newest first.
    pub deepspeed: Vec<DeepspeedRelease>,
}

/// One layer's worth of parsed entries, keyed for overlay merging.
#[derive(Default)]
struct Layers {
    branch: BTreeMap<String, (Spanned<DriverBranchWire>, Origin)>,
    minor_compat: BTreeMap<String, (MinorCompatWire, Origin)>,
    forward_compat: BTreeMap<String, (ForwardCompatWire, Origin)>,
    targets: BTreeMap<String, (TargetsWire, Origin)>,
    gpu: BTreeMap<String, (GpuWire, Origin)>,
    os: BTreeMap<String, (OsWire, Origin)>,
    wheel: BTreeMap<String, (TorchWheelWire, Origin)>,
    release: BTreeMap<(String, String), (ReleaseWire, Origin)>,
}

impl Catalog {
    /// The embedded stock catalog.
    ///
    /// ```
    /// let catalog = gpustack::Catalog::stock().unwrap();
    /// assert!(catalog.gpu("H100").is_some());
    /// ```
    pub fn stock() -> Result<Catalog, Error> {
        Catalog::load(&[])
    }

    /// The stock catalog plus overlay directories, in order.
    pub fn load(overlays: &[&Path]) -> Result<Catalog, Error> {
        let mut sources: Vec<Vec<(String, String)>> = vec![STOCK
            .iter()
            .map(|(p, t)| ((*p).to_string(), (*t).to_string()))
            .collect()];
        let mut diags = Vec::new();
        for dir in overlays {
            sources.push(read_overlay(dir, &mut diags));
        }
        if !diags.is_empty() {
            return Err(Error::Invalid(diags));
        }
        Catalog::from_layers(&sources)
    }

    /// Builds a catalog from in-memory layers: each a list of (display path, TOML text).
    /// The first layer is the base; later layers overlay it. Used by tests and by tools that
    /// keep catalogs elsewhere.
    pub fn from_layers(layers: &[Vec<(String, String)>]) -> Result<Catalog, Error> {
        let mut diags = Vec::new();
        let mut merged = Layers::default();
        for layer in layers {
            let mut this = Layers::default();
            for (path, text) in layer {
                parse_file(path, text, &mut this, &mut diags);
            }
            merge(&mut merged, this);
        }
        if !diags.is_empty() {
            return Err(Error::Invalid(diags));
        }
        let cat = build(merged, &mut diags);
        if diags.is_empty() {
            Ok(cat)
        } else {
            Err(Error::Invalid(diags))
        }
    }

    /// A GPU by id or alias, case-insensitive.
    pub fn gpu(&self, name: &str) -> Option<&Gpu> {
        let n = name.trim().to_ascii_lowercase();
        self.gpus
            .iter()
            .find(|g| g.id == n || g.aliases.iter().any(|a| *a == n))
    }

    /// The branch a driver version belongs to, when the catalog knows it.
    pub fn branch_of(&self, driver: &Version) -> Option<&DriverBranch> {
        self.branches.iter().find(|b| b.number == driver.major())
    }

    /// The nvcc targets of a CUDA release.
    pub fn targets_for(&self, cuda: &Version) -> Option<&TargetSet> {
        self.targets.iter().find(|t| t.cuda.matches(cuda))
    }

    /// The minor-version-compatibility floor for a CUDA major.
    pub fn minor_compat_for(&self, major: u64) -> Option<&MinorCompat> {
        self.minor_compat.iter().find(|m| m.major == major)
    }

    /// The forward-compatibility package for a CUDA major.minor.
    pub fn forward_compat_for(&self, cuda: &Version) -> Option<&ForwardCompat> {
        self.forward_compat
            .iter()
            .find(|f| f.cuda.major() == cuda.major() && f.cuda.minor() == cuda.minor())
    }
}

fn read_overlay(dir: &Path, diags: &mut Vec<Diagnostic>) -> Vec<(String, String)> {
    let shown = dir.display().to_string();
    if !dir.is_dir() {
        diags.push(
            Diagnostic::new(
                Stage::Catalog,
                format!("catalog overlay `{shown}` is not a directory"),
            )
            .hint("`--catalog` takes a directory of `*.toml` files"),
        );
        return Vec::new();
    }
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(dir)
        .follow_links(false)
        .sort_by_file_name()
    {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                diags.push(Diagnostic::new(
                    Stage::Catalog,
                    format!("cannot read catalog overlay `{shown}`: {e}"),
                ));
                continue;
            }
        };
        if !entry.file_type().is_file() || entry.path().extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let rel = entry.path().strip_prefix(dir).unwrap_or(entry.path());
        let display = format!("{}/{}", shown.trim_end_matches('/'), rel.display());
        match std::fs::read(entry.path()) {
            Ok(bytes) if bytes.len() > 8 << 20 => diags.push(
                Diagnostic::new(Stage::Catalog, "catalog file is larger than 8 MiB")
                    .at(Location::file(&display)),
            ),
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => out.push((display, text)),
                Err(e) => diags.push(
                    Diagnostic::new(
                        Stage::Catalog,
                        format!(
                            "catalog file is not UTF-8 (invalid byte at offset {})",
                            e.utf8_error().valid_up_to()
                        ),
                    )
                    .at(Location::file(&display)),
                ),
            },
            Err(e) => diags.push(
                Diagnostic::new(Stage::Catalog, format!("cannot read: {e}"))
                    .at(Location::file(&display)),
            ),
        }
    }
    out
}

/// Byte offsets of line starts, for `file:line` of every entry in one pass.
struct LineIndex(Vec<usize>);

impl LineIndex {
    fn new(text: &str) -> LineIndex {
        LineIndex(
            std::iter::once(0)
                .chain(text.match_indices('\n').map(|(i, _)| i + 1))
                .collect(),
        )
    }
    fn line(&self, offset: usize) -> usize {
        self.0.partition_point(|&s| s <= offset)
    }
}

type Canonical = Box<dyn Fn() -> String + Send + Sync>;

fn origin(
    path: &str,
    lines: &LineIndex,
    span: std::ops::Range<usize>,
    source: &str,
    canonical: Canonical,
) -> Origin {
    let lock_name = if path.starts_with("catalog/") {
        path.to_string()
    } else {
        format!("overlay/{}", path.rsplit('/').next().unwrap_or(path))
    };
    Origin(Arc::new(OriginInner {
        lock_name,
        file: path.to_string(),
        line: lines.line(span.start),
        source: source.to_string(),
        canonical,
    }))
}

fn canon<T: serde::Serialize + Clone + Send + Sync + 'static>(family: &str, v: &T) -> Canonical {
    let family = family.to_string();
    let v = v.clone();
    Box::new(move || format!("[{family}]\n{}", toml::to_string(&v).unwrap_or_default()))
}

fn parse_file(path: &str, text: &str, out: &mut Layers, diags: &mut Vec<Diagnostic>) {
    let lines = LineIndex::new(text);
    let file: FileWire = match toml::from_str(text) {
        Ok(f) => f,
        Err(e) => {
            let mut d = toml_diagnostic(Stage::Catalog, path, text, &e);
            if d.message.contains("unknown field") {
                d = d.hint("see the catalog reference in the book for the fields of each family");
            }
            diags.push(d);
            return;
        }
    };
    let fam = file.family.as_str();
    if !FAMILIES.contains(&fam) {
        let mut d = Diagnostic::new(Stage::Catalog, format!("unknown catalog family `{fam}`"))
            .at_offset(path, text, text.find("family").unwrap_or(0))
            .hint(format!("`family` is one of: {}", FAMILIES.join(", ")));
        if let Some(s) = crate::error::did_you_mean(fam, FAMILIES.iter().copied()) {
            d = d.hint(format!("did you mean `{s}`?"));
        }
        diags.push(d);
        return;
    }
    let misplaced = |what: &str, n: usize, diags: &mut Vec<Diagnostic>| {
        if n > 0 {
            diags.push(
                Diagnostic::new(
                    Stage::Catalog,
                    format!("`[[{what}]]` entries do not belong in a `{fam}` file"),
                )
                .at_offset(path, text, text.find(&format!("[[{what}]]")).unwrap_or(0))
                .hint("each catalog file holds one family; move these entries to the right file"),
            );
        }
    };
    let dup = |key: &str, span: &std::ops::Range<usize>, diags: &mut Vec<Diagnostic>| {
        diags.push(
            Diagnostic::new(Stage::Catalog, format!("duplicate {fam} entry `{key}`"))
                .at_offset(path, text, span.start)
                .hint("an entry may appear once per catalog layer; an overlay directory replaces earlier layers' entries"),
        );
    };
    misplaced(
        "branch",
        if fam == "driver" {
            0
        } else {
            file.branch.len()
        },
        diags,
    );
    misplaced(
        "minor_compat",
        if fam == "cuda" {
            0
        } else {
            file.minor_compat.len()
        },
        diags,
    );
    misplaced(
        "forward_compat",
        if fam == "cuda" {
            0
        } else {
            file.forward_compat.len()
        },
        diags,
    );
    misplaced(
        "targets",
        if fam == "cuda" { 0 } else { file.targets.len() },
        diags,
    );
    misplaced("gpu", if fam == "gpu" { 0 } else { file.gpu.len() }, diags);
    misplaced("os", if fam == "os" { 0 } else { file.os.len() }, diags);
    misplaced(
        "wheel",
        if fam == "torch" { 0 } else { file.wheel.len() },
        diags,
    );
    misplaced(
        "release",
        if matches!(fam, "driver" | "gpu" | "os") {
            file.release.len()
        } else {
            0
        },
        diags,
    );

    for b in file.branch {
        let span = b.span();
        let o = origin(
            path,
            &lines,
            span.clone(),
            &b.get_ref().source,
            canon("branch", b.get_ref()),
        );
        let key = b.get_ref().branch.clone();
        if out.branch.contains_key(&key) {
            dup(&key, &span, diags);
        }
        out.branch.insert(key, (b, o));
    }
    macro_rules! simple {
        ($field:ident, $keyfn:expr) => {
            for e in file.$field {
                let span = e.span();
                let v = e.into_inner();
                let o = origin(
                    path,
                    &lines,
                    span.clone(),
                    &v.source,
                    canon(stringify!($field), &v),
                );
                let key: String = $keyfn(&v);
                if out.$field.contains_key(&key) {
                    dup(&key, &span, diags);
                }
                out.$field.insert(key, (v, o));
            }
        };
    }
    simple!(minor_compat, |v: &MinorCompatWire| v.major.to_string());
    simple!(forward_compat, |v: &ForwardCompatWire| v.package.clone());
    simple!(targets, |v: &TargetsWire| v.cuda.clone());
    simple!(gpu, |v: &GpuWire| v.id.to_ascii_lowercase());
    simple!(os, |v: &OsWire| v.id.clone());
    for w in file.wheel {
        let span = w.span();
        let v = w.into_inner();
        let o = origin(path, &lines, span.clone(), &v.source, canon("wheel", &v));
        for t in &v.torch {
            let key = format!("{t}+{}", v.variant);
            if out.wheel.contains_key(&key) {
                dup(&key, &span, diags);
            }
            let mut one = v.clone();
            one.torch = vec![t.clone()];
            out.wheel.insert(key, (one, o.clone()));
        }
    }
    for r in file.release {
        let span = r.span();
        let v = r.into_inner();
        let o = origin(path, &lines, span.clone(), &v.source, canon(fam, &v));
        check_release_fields(fam, &v, path, text, &span, diags);
        let key = (fam.to_string(), v.version.clone());
        if out.release.contains_key(&key) {
            dup(&v.version, &span, diags);
        }
        out.release.insert(key, (v, o));
    }
}

fn check_release_fields(
    fam: &str,
    r: &ReleaseWire,
    path: &str,
    text: &str,
    span: &std::ops::Range<usize>,
    diags: &mut Vec<Diagnostic>,
) {
    let present: [(&str, bool); 9] = [
        ("driver_min", r.driver_min.is_some()),
        ("eol", r.eol.is_some()),
        ("cuda_majors", !r.cuda_majors.is_empty()),
        ("min_cc", r.min_cc.is_some()),
        ("python", r.python.is_some()),
        ("pypi_variant", r.pypi_variant.is_some()),
        ("torch", r.torch.is_some()),
        ("cuda", r.cuda.is_some()),
        ("cuda_mismatch_ok", !r.cuda_mismatch_ok.is_empty()),
    ];
    let allowed: &[&str] = match fam {
        "cuda" => &["driver_min"],
        "python" => &["eol"],
        "cudnn" | "nccl" => &["cuda_majors", "min_cc"],
        "torch" => &["python", "pypi_variant"],
        "vllm" => &["torch", "cuda", "python", "min_cc"],
        "deepspeed" => &["torch", "python", "cuda_mismatch_ok"],
        _ => &[],
    };
    for (name, is) in present {
        if is && !allowed.contains(&name) {
            diags.push(
                Diagnostic::new(
                    Stage::Catalog,
                    format!("field `{name}` is not used by `{fam}` releases"),
                )
                .at_offset(path, text, span.start)
                .hint(format!(
                    "`{fam}` releases take: version, source, note{}",
                    allowed.iter().map(|a| format!(", {a}")).collect::<String>()
                )),
            );
        }
    }
    if !r.files.is_empty() && !matches!(fam, "vllm" | "torch") {
        diags.push(
            Diagnostic::new(
                Stage::Catalog,
                format!("field `files` is not used by `{fam}` releases"),
            )
            .at_offset(path, text, span.start),
        );
    }
}

fn merge(into: &mut Layers, layer: Layers) {
    into.branch.extend(layer.branch);
    into.minor_compat.extend(layer.minor_compat);
    into.forward_compat.extend(layer.forward_compat);
    into.targets.extend(layer.targets);
    into.gpu.extend(layer.gpu);
    into.os.extend(layer.os);
    into.wheel.extend(layer.wheel);
    into.release.extend(layer.release);
}

/// Validation context: turns wire strings into typed values, recording diagnostics at the
/// entry's line.
struct V<'a> {
    diags: &'a mut Vec<Diagnostic>,
}

impl V<'_> {
    fn fail(&mut self, o: &Origin, msg: String) {
        self.diags
            .push(Diagnostic::new(Stage::Catalog, msg).at(Location {
                file: o.file.clone(),
                line: o.line,
                col: 0,
            }));
    }
    fn version(&mut self, o: &Origin, what: &str, s: &str) -> Option<Version> {
        match Version::parse(s) {
            Ok(v) => Some(v),
            Err(e) => {
                self.fail(o, format!("{what}: {e}"));
                None
            }
        }
    }
    fn req(&mut self, o: &Origin, what: &str, s: &str) -> Option<VersionReq> {
        match VersionReq::parse(s) {
            Ok(v) => Some(v),
            Err(e) => {
                self.fail(o, format!("{what}: {e}"));
                None
            }
        }
    }
    fn cc(&mut self, o: &Origin, what: &str, s: &str) -> Option<Cc> {
        match s.parse::<Cc>() {
            Ok(c) => Some(c),
            Err(e) => {
                self.fail(o, format!("{what}: {e}"));
                None
            }
        }
    }
    fn branch(&mut self, o: &Origin, s: &str) -> Option<u64> {
        match s.strip_prefix('R').and_then(|n| n.parse::<u64>().ok()) {
            Some(n) => Some(n),
            None => {
                self.fail(
                    o,
                    format!("driver branch `{s}` must be written `R` and a number, like `R535`"),
                );
                None
            }
        }
    }
    fn source(&mut self, o: &Origin) {
        if o.source.trim().is_empty() {
            self.fail(
                o,
                "`source` is empty: every catalog fact needs a source a reader can open".into(),
            );
        }
    }
    fn files(&mut self, o: &Origin, files: &[FileRefWire]) -> Vec<FileRef> {
        let mut out = Vec::new();
        for f in files {
            if f.sha256.len() != 64
                || !f
                    .sha256
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            {
                self.fail(
                    o,
                    format!("sha256 of `{}` must be 64 lowercase hex digits", f.filename),
                );
                continue;
            }
            if f.filename.is_empty()
                || f.filename
                    .contains(['/', '\\', '\n', ' ', '"', '\'', '$', '`'])
            {
                self.fail(
                    o,
                    format!("file name `{}` must be a plain file name", f.filename),
                );
                continue;
            }
            out.push(FileRef {
                version: f
                    .version
                    .as_deref()
                    .and_then(|s| self.version(o, "file version", s)),
                python: f
                    .python
                    .as_deref()
                    .and_then(|s| self.version(o, "file python", s)),
                index: f.index.clone(),
                filename: f.filename.clone(),
                sha256: f.sha256.clone(),
            });
        }
        out
    }
}

fn newest_first<T>(v: &mut [T], key: impl Fn(&T) -> &Version) {
    v.sort_by(|a, b| key(b).cmp(key(a)));
}

fn build(l: Layers, diags: &mut Vec<Diagnostic>) -> Catalog {
    let mut v = V { diags };
    let mut c = Catalog::default();

    // Driver branches and releases.
    let mut seen_drivers = BTreeSet::new();
    let mut branch_rows: Vec<(DriverBranch, Vec<Version>)> = Vec::new();
    for (_, (b, o)) in l.branch {
        let b = b.into_inner();
        v.source(&o);
        let Some(number) = v.branch(&o, &b.branch) else {
            continue;
        };
        let kind = match b.kind.as_str() {
            "ltsb" => BranchKind::Ltsb,
            "pb" => BranchKind::Pb,
            "nfb" => BranchKind::Nfb,
            other => {
                v.fail(
                    &o,
                    format!("driver branch type `{other}` is not one of `ltsb`, `pb`, `nfb`"),
                );
                continue;
            }
        };
        let supported = match b.status.as_str() {
            "supported" => true,
            "eol" => false,
            other => {
                v.fail(
                    &o,
                    format!("driver branch status `{other}` is not `supported` or `eol`"),
                );
                continue;
            }
        };
        let mut versions = Vec::new();
        for s in &b.versions {
            if let Some(ver) = v.version(&o, "driver version", s) {
                if ver.major() != number {
                    v.fail(
                        &o,
                        format!("driver `{ver}` is listed under branch `{}`", b.branch),
                    );
                } else if !seen_drivers.insert(ver.clone()) {
                    v.fail(&o, format!("driver `{ver}` is listed twice"));
                } else {
                    versions.push(ver);
                }
            }
        }
        branch_rows.push((
            DriverBranch {
                number,
                kind,
                supported,
                eol: b.eol.clone(),
                origin: o,
            },
            versions,
        ));
    }
    branch_rows.sort_by(|a, b| b.0.number.cmp(&a.0.number));
    for (i, (b, versions)) in branch_rows.into_iter().enumerate() {
        c.branches.push(b);
        for ver in versions {
            c.drivers.push(DriverRelease {
                version: ver,
                branch: i,
            });
        }
    }
    newest_first(&mut c.drivers, |d| &d.version);

    for (_, (m, o)) in l.minor_compat {
        v.source(&o);
        if let Some(d) = v.version(&o, "driver_min", &m.driver_min) {
            c.minor_compat.push(MinorCompat {
                major: u64::from(m.major),
                driver_min: d,
                origin: o,
            });
        }
    }
    for (_, (f, o)) in l.forward_compat {
        v.source(&o);
        let Some(cuda) = v.version(&o, "cuda", &f.cuda) else {
            continue;
        };
        let bases = f.bases.iter().filter_map(|b| v.branch(&o, b)).collect();
        c.forward_compat.push(ForwardCompat {
            cuda,
            package: f.package.clone(),
            bases,
            origin: o,
        });
    }
    for (_, (t, o)) in l.targets {
        v.source(&o);
        let Some(req) = v.req(&o, "cuda", &t.cuda) else {
            continue;
        };
        let mut sm = Vec::new();
        for s in &t.sm {
            match Target::parse(s) {
                Ok(x) if !x.ptx => sm.push(x),
                Ok(_) => v.fail(&o, format!("target `{s}` must be an `sm` target")),
                Err(e) => v.fail(&o, e),
            }
        }
        sm.sort();
        c.targets.push(TargetSet {
            cuda: req,
            sm,
            origin: o,
        });
    }
    let mut names = BTreeMap::new();
    for (_, (g, o)) in l.gpu {
        v.source(&o);
        let id = g.id.to_ascii_lowercase();
        if !valid_id(&id) {
            v.fail(
                &o,
                format!("GPU id `{}` must match [a-z0-9][a-z0-9-]*", g.id),
            );
            continue;
        }
        for n in std::iter::once(&id).chain(g.aliases.iter()) {
            if let Some(prev) = names.insert(n.to_ascii_lowercase(), id.clone()) {
                if prev != id {
                    v.fail(
                        &o,
                        format!("GPU name `{n}` is used by both `{prev}` and `{id}`"),
                    );
                }
            }
        }
        let Some(cc) = v.cc(&o, "cc", &g.cc) else {
            continue;
        };
        c.gpus.push(Gpu {
            id,
            name: g.name.clone(),
            aliases: g.aliases.iter().map(|a| a.to_ascii_lowercase()).collect(),
            cc,
            arch: g.arch.clone(),
            datacenter: g.datacenter,
            nvswitch: g.nvswitch,
            memory_gib: g.memory_gib,
            gfd_product: g.gfd_product.clone(),
            smi_names: g.smi_names.clone(),
            min_driver: g
                .min_driver
                .as_deref()
                .and_then(|s| v.version(&o, "min_driver", s)),
            last_driver_branch: g
                .last_driver_branch
                .as_deref()
                .and_then(|s| v.branch(&o, s)),
            origin: o,
        });
    }
    for (_, (os, o)) in l.os {
        v.source(&o);
        if let Some(req) = v.req(&o, "cuda", &os.cuda) {
            c.os.push(Os {
                id: os.id.clone(),
                cuda: req,
                origin: o,
            });
        }
    }

    let mut torch_rel: BTreeMap<String, TorchRelease> = BTreeMap::new();
    for ((fam, _), (r, o)) in l.release {
        v.source(&o);
        let Some(version) = v.version(&o, "version", &r.version) else {
            continue;
        };
        match fam.as_str() {
            "cuda" => {
                let driver_min = r
                    .driver_min
                    .as_deref()
                    .and_then(|s| v.version(&o, "driver_min", s));
                c.cuda.push(CudaRelease {
                    version,
                    driver_min,
                    origin: o,
                });
            }
            "python" => c.python.push(PythonRelease {
                version,
                eol: r.eol.clone(),
                origin: o,
            }),
            "cudnn" | "nccl" => {
                if r.cuda_majors.is_empty() {
                    v.fail(&o, format!("{fam} `{version}` needs `cuda_majors`"));
                }
                let lib = LibRelease {
                    version,
                    cuda_majors: r.cuda_majors.iter().map(|m| u64::from(*m)).collect(),
                    min_cc: r.min_cc.as_deref().and_then(|s| v.cc(&o, "min_cc", s)),
                    origin: o,
                };
                if fam == "cudnn" {
                    c.cudnn.push(lib)
                } else {
                    c.nccl.push(lib)
                }
            }
            "torch" => {
                let (Some(py), Some(pv)) = (r.python.as_deref(), r.pypi_variant.as_deref()) else {
                    v.fail(
                        &o,
                        format!("torch `{version}` needs `python` and `pypi_variant`"),
                    );
                    continue;
                };
                let Some(python) = v.req(&o, "python", py) else {
                    continue;
                };
                torch_rel.insert(
                    r.version.clone(),
                    TorchRelease {
                        version,
                        python,
                        pypi_variant: pv.to_string(),
                        origin: o,
                    },
                );
            }
            "vllm" => {
                let (Some(t), Some(cu), Some(py)) =
                    (r.torch.as_deref(), r.cuda.as_deref(), r.python.as_deref())
                else {
                    v.fail(
                        &o,
                        format!("vllm `{version}` needs `torch`, `cuda` and `python`"),
                    );
                    continue;
                };
                let (Some(torch), Some(cuda), Some(python)) = (
                    v.version(&o, "torch", t),
                    v.version(&o, "cuda", cu),
                    v.req(&o, "python", py),
                ) else {
                    continue;
                };
                let files = v.files(&o, &r.files);
                let min_cc = r.min_cc.as_deref().and_then(|s| v.cc(&o, "min_cc", s));
                c.vllm.push(VllmRelease {
                    version,
                    torch,
                    cuda,
                    python,
                    min_cc,
                    files,
                    origin: o,
                });
            }
            "deepspeed" => {
                let torch = r.torch.as_deref().and_then(|s| v.req(&o, "torch", s));
                let python = r.python.as_deref().and_then(|s| v.req(&o, "python", s));
                let cuda_mismatch_ok = r
                    .cuda_mismatch_ok
                    .iter()
                    .filter_map(|s| v.version(&o, "cuda_mismatch_ok", s))
                    .collect();
                c.deepspeed.push(DeepspeedRelease {
                    version,
                    torch,
                    python,
                    cuda_mismatch_ok,
                    origin: o,
                });
            }
            _ => {}
        }
    }

    for (key, (w, o)) in l.wheel {
        v.source(&o);
        let t = &w.torch[0];
        let Some(rel) = torch_rel.get(t) else {
            v.fail(
                &o,
                format!(
                    "torch wheel `{key}` names release `{t}`, which has no `[[release]]` entry"
                ),
            );
            continue;
        };
        let (Some(cuda), Some(full)) =
            (v.version(&o, "cuda", &w.cuda), v.version(&o, "torch", &key))
        else {
            continue;
        };
        if !w.variant.starts_with("cu")
            || !w.variant[2..].bytes().all(|b| b.is_ascii_digit())
            || w.variant.len() < 4
        {
            v.fail(
                &o,
                format!("torch variant `{}` must look like `cu124`", w.variant),
            );
            continue;
        }
        let mut arch_list = Vec::new();
        for a in &w.arch_list {
            match crate::arch::parse_torch_entry(a) {
                Ok(x) => arch_list.extend(x),
                Err(e) => v.fail(&o, e),
            }
        }
        arch_list.sort();
        let python = match w.python.as_deref() {
            Some(p) => v.req(&o, "python", p).unwrap_or_else(|| rel.python.clone()),
            None => rel.python.clone(),
        };
        let pin = |v: &mut V<'_>, what: &str, s: &Option<String>| {
            s.as_deref().and_then(|s| v.version(&o, what, s))
        };
        let files = v
            .files(&o, &w.files)
            .into_iter()
            .filter(|f| f.version.as_ref().is_none_or(|fv| fv == &rel.version))
            .collect();
        c.torch.push(TorchBuild {
            version: rel.version.clone(),
            variant: w.variant.clone(),
            full,
            cuda,
            index_url: w.index_url.clone(),
            arch_list,
            cudnn: pin(&mut v, "cudnn", &w.cudnn),
            nccl: pin(&mut v, "nccl", &w.nccl),
            cusparselt: pin(&mut v, "cusparselt", &w.cusparselt),
            python,
            pypi_default: rel.pypi_variant == w.variant,
            files,
            origin: o.clone(),
            release_origin: rel.origin.clone(),
        });
    }
    c.torch_releases = torch_rel.into_values().collect();
    newest_first(&mut c.torch_releases, |t| &t.version);
    for r in &c.torch_releases {
        if !c
            .torch
            .iter()
            .any(|b| b.version == r.version && b.variant == r.pypi_variant)
        {
            v.fail(&r.origin, format!("torch `{}` says its PyPI wheel is `{}`, but no `[[wheel]]` entry has that variant", r.version, r.pypi_variant));
        }
    }
    c.torch.sort_by(|a, b| {
        b.version
            .cmp(&a.version)
            .then_with(|| b.pypi_default.cmp(&a.pypi_default))
            .then_with(|| b.cuda.cmp(&a.cuda))
    });
    newest_first(&mut c.cuda, |r| &r.version);
    newest_first(&mut c.python, |r| &r.version);
    newest_first(&mut c.cudnn, |r| &r.version);
    newest_first(&mut c.nccl, |r| &r.version);
    newest_first(&mut c.vllm, |r| &r.version);
    newest_first(&mut c.deepspeed, |r| &r.version);
    c.minor_compat.sort_by_key(|m| m.major);
    c.forward_compat.sort_by(|a, b| a.cuda.cmp(&b.cuda));

    // Cross-family references.
    for b in &c.torch {
        for (what, pin, list) in [("cudnn", &b.cudnn, &c.cudnn), ("nccl", &b.nccl, &c.nccl)] {
            if let Some(p) = pin {
                if !list.iter().any(|r| r.version == *p) {
                    v.fail(
                        &b.origin,
                        format!(
                            "torch `{}` pins {what} `{p}`, which the catalog does not list",
                            b.full
                        ),
                    );
                }
            }
        }
    }
    for r in &c.vllm {
        if !c.torch_releases.iter().any(|t| t.version == r.torch) {
            v.fail(
                &r.origin,
                format!(
                    "vllm `{}` pins torch `{}`, which the catalog does not list",
                    r.version, r.torch
                ),
            );
        }
    }
    let mut overlaps: Vec<(String, String)> = Vec::new();
    for cu in &c.cuda {
        let matching: Vec<&TargetSet> = c
            .targets
            .iter()
            .filter(|t| t.cuda.matches(&cu.version))
            .collect();
        if matching.len() > 1
            && !overlaps.contains(&(matching[0].cuda.to_string(), matching[1].cuda.to_string()))
        {
            overlaps.push((matching[0].cuda.to_string(), matching[1].cuda.to_string()));
            v.fail(&matching[1].origin, format!("CUDA `{}` matches two `[[targets]]` entries (`{}` and `{}`); their ranges must not overlap", cu.version, matching[0].cuda, matching[1].cuda));
        }
        if c.targets_for(&cu.version).is_none() {
            v.fail(
                &cu.origin,
                format!(
                    "CUDA `{}` has no `[[targets]]` entry listing the GPU targets nvcc accepts",
                    cu.version
                ),
            );
        }
    }
    c
}

pub(crate) fn valid_id(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// sha256 over the canonical text of the given origins, sorted: `sha256:…`.
pub(crate) fn digest_of<'a>(origins: impl IntoIterator<Item = &'a Origin>) -> String {
    let mut texts: Vec<String> = origins.into_iter().map(Origin::canonical).collect();
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
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}
