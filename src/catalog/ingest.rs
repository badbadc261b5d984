//! From a parsed file to keyed entries: the family a file declares, which entries belong
//! in it, each entry's line and canonical text, duplicates inside one layer, and the
//! overlay merge (a later layer's entry replaces an earlier one with the same key).

use std::collections::BTreeMap;
use std::mem::take;
use std::sync::Arc;

use toml::Spanned;

use super::codec;
use super::model::{canonical_text, Canonical, Origin, OriginInner};
use super::wire::*;
use crate::error::{toml_diagnostic, Diagnostic, Stage};

const FAMILIES: &[&str] = &[
    "bandwidth",
    "cuda",
    "cudnn",
    "deepspeed",
    "driver",
    "env",
    "extra",
    "gpu",
    "image",
    "instance",
    "nccl",
    "os",
    "package",
    "python",
    "tested",
    "torch",
    "vllm",
];

/// One layer's worth of parsed entries, keyed for overlay merging.
#[derive(Default)]
pub(super) struct Layers {
    pub(super) branch: BTreeMap<String, (Spanned<DriverBranchWire>, Origin)>,
    pub(super) minor_compat: BTreeMap<String, (MinorCompatWire, Origin)>,
    pub(super) forward_compat: BTreeMap<String, (ForwardCompatWire, Origin)>,
    pub(super) targets: BTreeMap<String, (TargetsWire, Origin)>,
    pub(super) gpu: BTreeMap<String, (GpuWire, Origin)>,
    pub(super) kernel_modules: BTreeMap<String, (KernelModulesWire, Origin)>,
    pub(super) generation: BTreeMap<String, (GenerationWire, Origin)>,
    /// Keyed by family (`cudnn`, `nccl`) and compute capability.
    pub(super) gpu_support: BTreeMap<String, (GpuSupportWire, Origin)>,
    pub(super) torch_minimum: BTreeMap<String, (TorchMinimumWire, Origin)>,
    pub(super) tested: BTreeMap<String, (TestedWire, Origin)>,
    pub(super) os: BTreeMap<String, (OsWire, Origin)>,
    pub(super) wheel: BTreeMap<String, (TorchWheelWire, Origin)>,
    pub(super) source: BTreeMap<String, (TorchSourceWire, Origin)>,
    pub(super) release: BTreeMap<(String, String), (ReleaseWire, Origin)>,
    /// Keyed by name, version and distribution (`cupy` 14.2.0 is both `cupy-cuda12x` and
    /// `cupy-cuda13x`).
    pub(super) extra: BTreeMap<(String, String, String), (ExtraWire, Origin)>,
    pub(super) image: BTreeMap<String, (ImageWire, Origin)>,
    /// `[[no_image]]`, keyed by CUDA release.
    pub(super) no_image: BTreeMap<String, (NoImageWire, Origin)>,
    pub(super) package: BTreeMap<String, (PackageWire, Origin)>,
    pub(super) instance: BTreeMap<String, (InstanceWire, Origin)>,
    pub(super) cloud: BTreeMap<String, (CloudWire, Origin)>,
    pub(super) bandwidth: BTreeMap<String, (BandwidthWire, Origin)>,
    pub(super) env: BTreeMap<String, (EnvWire, Origin)>,
}

/// Byte offsets of line starts, for `file:line` of every entry in one pass.
pub(super) struct LineIndex(Vec<usize>);

impl LineIndex {
    pub(super) fn new(text: &str) -> LineIndex {
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

/// A file's display path and the name locks record for it (`catalog/cuda.toml`, or
/// `overlay/<file name>`), made once per file and shared by its entries' origins.
fn names(path: &str) -> (Arc<str>, Arc<str>) {
    let file: Arc<str> = Arc::from(path);
    let lock_name = if path.starts_with("catalog/") {
        Arc::clone(&file)
    } else {
        Arc::from(format!(
            "overlay/{}",
            path.rsplit('/').next().unwrap_or(path)
        ))
    };
    (file, lock_name)
}

fn origin(
    (file, lock_name): &(Arc<str>, Arc<str>),
    (line, canonical): (usize, Canonical),
    source: String,
) -> Origin {
    Origin(Arc::new(OriginInner {
        lock_name: Arc::clone(lock_name),
        file: Arc::clone(file),
        line,
        source,
        canonical,
        canonical_text: std::sync::OnceLock::new(),
    }))
}

fn canon_text<T: serde::Serialize>(family: &str, v: &T) -> String {
    canonical_text(family, &codec::canonical_body(v))
}

/// Where a file's entries get their line and canonical text.
pub(super) enum Entries<'a> {
    /// Parsed TOML: lines from the text, canonical text from a copy of the entry.
    Toml(LineIndex),
    /// The pre-parsed stock catalog: (canonical body, line) of each entry in [`FileWire`]
    /// field order, both recorded at build time.
    Stock(std::slice::Iter<'a, (&'static str, usize)>),
}

impl Entries<'_> {
    /// The line and canonical text of the next entry (entries are taken in field order).
    fn next<T>(
        &mut self,
        span: &std::ops::Range<usize>,
        family: &'static str,
        v: &T,
    ) -> (usize, Canonical)
    where
        T: serde::Serialize + Clone + Send + Sync + 'static,
    {
        match self {
            Entries::Toml(lines) => {
                let v = v.clone();
                (
                    lines.line(span.start),
                    Canonical::Parsed(Box::new(move || canon_text(family, &v))),
                )
            }
            Entries::Stock(marks) => {
                let (body, line) = *marks
                    .next()
                    .expect("the stock blob records one line per entry");
                (
                    line,
                    Canonical::Stock {
                        family,
                        body: body.as_bytes(),
                    },
                )
            }
        }
    }
}

pub(super) fn parse_file(path: &str, text: &str, out: &mut Layers, diags: &mut Vec<Diagnostic>) {
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
    ingest(
        path,
        text,
        file,
        Entries::Toml(LineIndex::new(text)),
        out,
        diags,
    );
}

/// Checks and files the stock catalog's entries from their build-time encoding
/// ([`codec::decode_files`]), each file with its source text (`texts`, in the same order).
pub(super) fn ingest_stock<'t>(
    files: Vec<codec::Decoded<'static>>,
    texts: impl Iterator<Item = (&'t str, &'t str)>,
    out: &mut Layers,
    diags: &mut Vec<Diagnostic>,
) {
    for (d, (path, text)) in files.into_iter().zip(texts) {
        ingest(
            path,
            text,
            d.file,
            Entries::Stock(d.entries.iter()),
            out,
            diags,
        );
    }
}

/// Checks and files the entries of one parsed catalog file (`text` is its source, for
/// line numbers and diagnostics).
pub(super) fn ingest(
    path: &str,
    text: &str,
    file: FileWire,
    entries: Entries<'_>,
    out: &mut Layers,
    diags: &mut Vec<Diagnostic>,
) {
    let Some(fam) = family(path, text, &file.family, diags) else {
        return;
    };
    check_placement(fam, &file, path, text, diags);
    let mut f = Filing {
        path,
        names: names(path),
        text,
        fam,
        entries,
        out,
        diags,
    };
    // Entries are taken in [`FileWire`] field order: the stock blob records them so.
    let mut file = file;
    file_hardware(&mut f, &mut file);
    file_torch_and_releases(&mut f, &mut file);
    file_deploy(&mut f, file);
}

/// The family a file declares, as one of [`FAMILIES`]; none (and a diagnostic) for an
/// unknown one.
fn family(path: &str, text: &str, fam: &str, diags: &mut Vec<Diagnostic>) -> Option<&'static str> {
    let found = FAMILIES.iter().copied().find(|f| *f == fam);
    if found.is_none() {
        let mut d = Diagnostic::new(Stage::Catalog, format!("unknown catalog family `{fam}`"))
            .at_offset(path, text, text.find("family").unwrap_or(0))
            .hint(format!("`family` is one of: {}", FAMILIES.join(", ")));
        if let Some(s) = crate::core::names::did_you_mean(fam, FAMILIES.iter().copied()) {
            d = d.hint(format!("did you mean `{s}`?"));
        }
        diags.push(d);
    }
    found
}

/// Entries filed in another family's file: each catalog file holds one family.
fn check_placement(
    fam: &str,
    file: &FileWire,
    path: &str,
    text: &str,
    diags: &mut Vec<Diagnostic>,
) {
    let no_releases = matches!(
        fam,
        "driver" | "gpu" | "os" | "image" | "package" | "instance" | "bandwidth" | "env"
    );
    // (entry kind, how many, whether a `fam` file holds them), in the order reported.
    let placed: [(&str, usize, bool); 23] = [
        ("branch", file.branch.len(), fam == "driver"),
        ("minor_compat", file.minor_compat.len(), fam == "cuda"),
        ("forward_compat", file.forward_compat.len(), fam == "cuda"),
        ("targets", file.targets.len(), fam == "cuda"),
        ("gpu", file.gpu.len(), fam == "gpu"),
        ("kernel_modules", file.kernel_modules.len(), fam == "gpu"),
        ("generation", file.generation.len(), fam == "gpu"),
        (
            "gpu_support",
            file.gpu_support.len(),
            matches!(fam, "cudnn" | "nccl"),
        ),
        (
            "torch_minimum",
            file.torch_minimum.len(),
            fam == "deepspeed",
        ),
        ("tested", file.tested.len(), fam == "tested"),
        ("os", file.os.len(), fam == "os"),
        ("wheel", file.wheel.len(), fam == "torch"),
        ("source", file.source.len(), fam == "torch"),
        ("release", file.release.len(), !no_releases),
        ("release", file.release.len(), fam != "extra"),
        ("extra", file.extra.len(), fam == "extra"),
        ("image", file.image.len(), fam == "image"),
        ("no_image", file.no_image.len(), fam == "image"),
        ("package", file.package.len(), fam == "package"),
        ("instance", file.instance.len(), fam == "instance"),
        ("cloud", file.cloud.len(), fam == "instance"),
        ("bandwidth", file.bandwidth.len(), fam == "bandwidth"),
        ("env", file.env.len(), fam == "env"),
    ];
    for (what, n, home) in placed {
        if n > 0 && !home {
            diags.push(
                Diagnostic::new(
                    Stage::Catalog,
                    format!("`[[{what}]]` entries do not belong in a `{fam}` file"),
                )
                .at_offset(path, text, text.find(&format!("[[{what}]]")).unwrap_or(0))
                .hint("each catalog file holds one family; move these entries to the right file"),
            );
        }
    }
}

/// Where one file's entries go: the layer being filled, and the file for locations.
struct Filing<'a, 'e> {
    path: &'a str,
    /// [`names`] of `path`.
    names: (Arc<str>, Arc<str>),
    text: &'a str,
    fam: &'static str,
    entries: Entries<'e>,
    out: &'a mut Layers,
    diags: &'a mut Vec<Diagnostic>,
}

/// A second entry with the same key in one layer.
fn duplicate(
    fam: &str,
    path: &str,
    text: &str,
    key: &str,
    span: &std::ops::Range<usize>,
    first: &Origin,
    diags: &mut Vec<Diagnostic>,
) {
    diags.push(
        Diagnostic::new(Stage::Catalog, format!("duplicate {fam} entry `{key}` (first at {}:{})", first.file, first.line))
            .at_offset(path, text, span.start)
            .hint("an entry may appear once per catalog layer; an overlay directory replaces earlier layers' entries"),
    );
}

/// Files the entries of one family keyed by `$key` (a function of the entry) into the
/// layer's `$field`, reporting a key seen before in this layer.
macro_rules! file_keyed {
    ($f:ident, $items:expr, $field:ident, $key:expr) => {
        for e in $items {
            let span = e.span();
            let mut v = e.into_inner();
            // The entry's source moves into its origin (nothing reads it from the entry).
            let o = origin(
                &$f.names,
                $f.entries.next(&span, stringify!($field), &v),
                take(&mut v.source),
            );
            let key: String = $key(&v);
            if let Some((_, first)) = $f.out.$field.get(&key) {
                duplicate($f.fam, $f.path, $f.text, &key, &span, first, $f.diags);
            }
            $f.out.$field.insert(key, (v, o));
        }
    };
}

/// Driver branches, CUDA's compatibility entries, GPUs and their facts, operating systems.
fn file_hardware(f: &mut Filing<'_, '_>, file: &mut FileWire) {
    for mut b in take(&mut file.branch) {
        let span = b.span();
        let o = origin(
            &f.names,
            f.entries.next(&span, "branch", b.get_ref()),
            take(&mut b.get_mut().source),
        );
        let key = b.get_ref().branch.clone();
        if let Some((_, first)) = f.out.branch.get(&key) {
            duplicate(f.fam, f.path, f.text, &key, &span, first, f.diags);
        }
        f.out.branch.insert(key, (b, o));
    }
    let fam = f.fam;
    file_keyed!(
        f,
        take(&mut file.minor_compat),
        minor_compat,
        |v: &MinorCompatWire| v.major.to_string()
    );
    file_keyed!(
        f,
        take(&mut file.forward_compat),
        forward_compat,
        |v: &ForwardCompatWire| v.package.clone()
    );
    file_keyed!(f, take(&mut file.targets), targets, |v: &TargetsWire| v
        .cuda
        .clone());
    file_keyed!(f, take(&mut file.gpu), gpu, |v: &GpuWire| v
        .id
        .to_ascii_lowercase());
    file_keyed!(
        f,
        take(&mut file.kernel_modules),
        kernel_modules,
        |v: &KernelModulesWire| format!(
            "{}/{}",
            v.arch.as_deref().unwrap_or(""),
            v.gpu.as_deref().unwrap_or("")
        )
    );
    file_keyed!(
        f,
        take(&mut file.generation),
        generation,
        |v: &GenerationWire| v.arch.clone()
    );
    file_keyed!(
        f,
        take(&mut file.gpu_support),
        gpu_support,
        |v: &GpuSupportWire| format!("{fam}/{}", v.cc)
    );
    file_keyed!(
        f,
        take(&mut file.torch_minimum),
        torch_minimum,
        |v: &TorchMinimumWire| v.torch.clone()
    );
    file_keyed!(f, take(&mut file.tested), tested, |v: &TestedWire| v
        .name
        .clone());
    file_keyed!(f, take(&mut file.os), os, |v: &OsWire| v.id.clone());
}

/// Files one torch wheel entry (its `torch` one release) under `<torch>+<variant>`.
fn file_wheel(
    f: &mut Filing<'_, '_>,
    one: TorchWheelWire,
    o: &Origin,
    span: &std::ops::Range<usize>,
) {
    let key = format!("{}+{}", one.torch[0], one.variant);
    if let Some((_, first)) = f.out.wheel.get(&key) {
        duplicate(f.fam, f.path, f.text, &key, span, first, f.diags);
    }
    f.out.wheel.insert(key, (one, o.clone()));
}

/// Torch wheels (one entry per release it serves) and sources, every family's
/// `[[release]]` entries, and extras.
fn file_torch_and_releases(f: &mut Filing<'_, '_>, file: &mut FileWire) {
    for w in take(&mut file.wheel) {
        let span = w.span();
        let mut v = w.into_inner();
        let o = origin(
            &f.names,
            f.entries.next(&span, "wheel", &v),
            take(&mut v.source),
        );
        // One entry per torch release the wheel serves: copies for all but the last, which
        // takes the entry itself.
        let mut torches = std::mem::take(&mut v.torch);
        let last = torches.pop();
        for t in torches {
            let mut one = v.clone();
            one.torch = vec![t];
            file_wheel(f, one, &o, &span);
        }
        if let Some(t) = last {
            v.torch = vec![t];
            file_wheel(f, v, &o, &span);
        }
    }
    // Taken after `wheel` and before `release`: the stock blob records entries in
    // [`FileWire`] field order.
    file_keyed!(f, take(&mut file.source), source, |v: &TorchSourceWire| v
        .torch
        .clone());
    for r in take(&mut file.release) {
        let span = r.span();
        let mut v = r.into_inner();
        let o = origin(
            &f.names,
            f.entries.next(&span, f.fam, &v),
            take(&mut v.source),
        );
        check_release_fields(f.fam, &v, f.path, f.text, &span, f.diags);
        let key = (f.fam.to_string(), v.version.clone());
        if let Some((_, first)) = f.out.release.get(&key) {
            duplicate(f.fam, f.path, f.text, &v.version, &span, first, f.diags);
        }
        f.out.release.insert(key, (v, o));
    }
    for e in take(&mut file.extra) {
        let span = e.span();
        let mut v = e.into_inner();
        let o = origin(
            &f.names,
            f.entries.next(&span, "extra", &v),
            take(&mut v.source),
        );
        let key = (v.name.clone(), v.version.clone(), v.pypi_name.clone());
        if f.out.extra.contains_key(&key) {
            f.diags.push(
                Diagnostic::new(
                    Stage::Catalog,
                    format!(
                        "duplicate extra entry `{} {}` (`pypi_name = \"{}\"`)",
                        v.name, v.version, v.pypi_name
                    ),
                )
                .at_offset(f.path, f.text, span.start)
                .hint("an extra is keyed by `name`, `version` and `pypi_name`; an entry may appear once per catalog layer, and an overlay directory replaces earlier layers' entries"),
            );
        }
        f.out.extra.insert(key, (v, o));
    }
}

/// The generator-side families: images, packages, instances, clouds, bandwidth, env.
fn file_deploy(f: &mut Filing<'_, '_>, file: FileWire) {
    file_keyed!(f, file.image, image, |v: &ImageWire| format!(
        "{}/{}",
        v.cuda, v.os
    ));
    file_keyed!(f, file.no_image, no_image, |v: &NoImageWire| v.cuda.clone());
    file_keyed!(f, file.package, package, |v: &PackageWire| {
        let mut key = format!(
            "{}/{}/{}",
            v.name,
            v.version
                .as_deref()
                .or(v.follows.as_deref())
                .unwrap_or("driver"),
            v.variant.as_deref().unwrap_or("")
        );
        if let Some(r) = &v.follows_versions {
            key.push_str(&format!("/{r}"));
        }
        key
    });
    file_keyed!(f, file.instance, instance, |v: &InstanceWire| format!(
        "{}/{}/{}",
        v.gpu,
        v.cloud,
        v.instance_type
            .as_deref()
            .or(v.accelerator_type.as_deref())
            .unwrap_or("")
    ));
    file_keyed!(f, file.cloud, cloud, |v: &CloudWire| v.id.clone());
    file_keyed!(f, file.bandwidth, bandwidth, |v: &BandwidthWire| format!(
        "{}/{}/{}x{}/{}/{}/{}",
        v.gpu,
        v.fabric,
        v.nodes,
        v.gpus_per_node,
        v.test,
        v.size.as_deref().unwrap_or(""),
        v.busbw_gbps
    ));
    file_keyed!(f, file.env, env, |v: &EnvWire| format!(
        "{}/{}",
        v.fabric, v.name
    ));
}

fn check_release_fields(
    fam: &str,
    r: &ReleaseWire,
    path: &str,
    text: &str,
    span: &std::ops::Range<usize>,
    diags: &mut Vec<Diagnostic>,
) {
    let present: [(&str, bool); 15] = [
        ("cuda_builds", !r.cuda_builds.is_empty()),
        ("driver_min", r.driver_min.is_some()),
        ("redist_only", r.redist_only),
        ("eol", r.eol.is_some()),
        ("cuda_majors", !r.cuda_majors.is_empty()),
        ("min_cc", r.min_cc.is_some()),
        ("python", r.python.is_some()),
        ("pypi_variant", r.pypi_variant.is_some()),
        ("torch", r.torch.is_some()),
        ("cuda", r.cuda.is_some()),
        ("cuda_mismatch_ok", !r.cuda_mismatch_ok.is_empty()),
        ("platforms", !r.platforms.is_empty()),
        ("yanked", r.yanked.is_some()),
        ("glibc_floor", !r.glibc_floor.is_empty()),
        ("triton", r.triton.is_some()),
    ];
    let allowed: &[&str] = match fam {
        "cuda" => &["driver_min", "redist_only"],
        "python" => &["eol"],
        "cudnn" => &["cuda_majors", "min_cc", "platforms", "yanked"],
        "nccl" => &[
            "cuda_majors",
            "min_cc",
            "cuda_builds",
            "platforms",
            "yanked",
        ],
        "torch" => &[
            "python",
            "pypi_variant",
            "platforms",
            "yanked",
            "glibc_floor",
            "triton",
        ],
        "vllm" => &[
            "torch",
            "cuda",
            "python",
            "min_cc",
            "platforms",
            "yanked",
            "glibc_floor",
        ],
        "deepspeed" => &[
            "torch",
            "python",
            "cuda_mismatch_ok",
            "yanked",
            "glibc_floor",
        ],
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
    if r.redist_only && r.driver_min.is_some() {
        diags.push(
            Diagnostic::new(
                Stage::Catalog,
                format!(
                    "CUDA {} is `redist_only` and has a `driver_min`: a release known only from its redistrib manifest has no Table 3 row",
                    r.version
                ),
            )
            .at_offset(path, text, span.start)
            .hint("drop `redist_only` when the release notes list the release, or drop `driver_min`"),
        );
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

pub(super) fn merge(into: &mut Layers, layer: Layers) {
    absorb(&mut into.branch, layer.branch);
    absorb(&mut into.minor_compat, layer.minor_compat);
    absorb(&mut into.forward_compat, layer.forward_compat);
    absorb(&mut into.targets, layer.targets);
    absorb(&mut into.gpu, layer.gpu);
    absorb(&mut into.kernel_modules, layer.kernel_modules);
    absorb(&mut into.generation, layer.generation);
    absorb(&mut into.gpu_support, layer.gpu_support);
    absorb(&mut into.torch_minimum, layer.torch_minimum);
    absorb(&mut into.tested, layer.tested);
    absorb(&mut into.os, layer.os);
    absorb(&mut into.wheel, layer.wheel);
    absorb(&mut into.source, layer.source);
    absorb(&mut into.release, layer.release);
    absorb(&mut into.extra, layer.extra);
    absorb(&mut into.image, layer.image);
    absorb(&mut into.no_image, layer.no_image);
    absorb(&mut into.package, layer.package);
    absorb(&mut into.instance, layer.instance);
    absorb(&mut into.cloud, layer.cloud);
    absorb(&mut into.bandwidth, layer.bandwidth);
    absorb(&mut into.env, layer.env);
}

/// `into.extend(from)`: an entry of `from` replaces the one with its key. Into an empty map
/// (the stock layer, merged first) the map moves whole instead of being rebuilt entry by
/// entry.
fn absorb<K: Ord, V>(into: &mut BTreeMap<K, V>, from: BTreeMap<K, V>) {
    if into.is_empty() {
        *into = from;
    } else {
        into.extend(from);
    }
}
