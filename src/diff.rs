//! `gpustack diff OLD.lock NEW.lock`: what a lock change costs an operator.
//!
//! [`diff`] compares two locks and classifies every change by the work it causes, from a
//! new VM image and a rolling reboot (a driver branch change) down to regenerating a
//! manifest (a request setting). The report also names the layers whose closure hash
//! changed (the images to rebuild) and the generated files that change, per target. It
//! renders as text for a terminal, JSON for tools and Markdown for a pull request comment.
//!
//! The comparison is pure: both locks are already parsed, the generated files are rendered
//! in memory and nothing is written.
//!
//! # Classes
//!
//! Every change gets one [`Class`]. The classes are declared costliest first, so the
//! report's summary and table lead with the change that costs the most; the table in
//! `book/src/diff.md` lists them with their triggers and actions ([`Class::trigger`],
//! [`Class::action`]).
//!
//! A component or package whose version is unchanged but whose fields differ counts as a
//! change of its own class when its layer's closure hash changed too (the lock hashes only
//! the fields that change what a layer installs), and as [`Class::Metadata`] otherwise:
//! descriptive facts such as a branch's support status or a minimum driver.
//!
//! # Generated files
//!
//! Both locks are rendered for every [`crate::plan::Target`]. Every generated file carries
//! the lock's hash as a label, so every file differs whenever the lock text does; a file
//! whose only difference is that label is listed as *relabelled*, apart from the files whose
//! content really changes. A lock that cannot render (a version 1 lock has no deployment
//! picks) makes the file comparison unavailable, with the reason, and the rest of the
//! report stands.
//!
//! # JSON (schema 1)
//!
//! `--format json` writes one object; field names are `snake_case`, class names
//! `kebab-case`. Fields are only ever added within schema 1; a change that would misread
//! old consumers bumps `schema`.
//!
//! ```text
//! { "schema": 1,
//!   "old": { "stack", "spec_digest", "catalog_digest" }, "new": { … },
//!   "empty": bool,
//!   "summary": [ { "class", "action", "count" } ],            costliest first
//!   "changes": [ { "kind", "name", "status", "old", "new", "class", "fields", "note" } ],
//!   "layers":  [ { "layer", "status", "old_hash", "new_hash" } ],
//!   "files":   { "available", "reason",
//!                "targets": [ { "target", "added", "removed", "changed", "relabelled", "error" } ] } }
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::core::version::Version;
use crate::core::{Component, Layer};
use crate::error::Error;
use crate::lock::{Field, Lock, LockedFact};
use crate::plan::{self, Common};
use crate::render::RenderedFile;

/// The version of the JSON report's shape.
pub const SCHEMA: u32 = 1;

/// What a change costs, costliest first (the declaration order is the severity order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Class {
    /// The GPU models changed.
    Gpu,
    /// The driver's branch (its first dotted part: 550 → 570) changed.
    DriverBranch,
    /// The driver changed within its branch (550.54.15 → 550.144.03).
    DriverPatch,
    /// A host package changed: the Container Toolkit, DCGM, Fabric Manager, or the driver's
    /// kernel-module flavour.
    HostPackage,
    /// The base operating system changed.
    Os,
    /// CUDA's major version changed (11 → 12).
    CudaMajor,
    /// The arch list (the compute capabilities kernels are built for) changed.
    ArchList,
    /// CUDA changed within its major version: a minor release or an update (12.4 → 12.6,
    /// 12.4.0 → 12.4.1).
    CudaMinor,
    /// cuDNN changed.
    Cudnn,
    /// NCCL changed, or the CUDA build of its packages.
    Nccl,
    /// A package of the base or validate layer other than the CUDA base image changed: the
    /// fabric stack (rdma-core, UCX, gdrcopy, Open MPI) or nccl-tests.
    Fabric,
    /// A fabric environment variable (`NCCL_*`) changed.
    Env,
    /// Python changed.
    Python,
    /// A framework changed: torch (its CUDA variant included), vLLM, DeepSpeed or an extra.
    Framework,
    /// A package of a layer's Python closure (`pylock.<layer>.toml`) changed, or a source
    /// build's sdist.
    PythonPackage,
    /// Another package changed (the `nvidia/cuda` base image, uv).
    Package,
    /// A deployment fact changed: an expected bandwidth, an instance type, a cloud setting.
    Deployment,
    /// A request setting changed (a `[components]` requirement, a `[k8s]` or `[slurm]`
    /// value, the stack name) without a class of its own.
    Request,
    /// Only descriptive facts changed (support status, end of life, minimums): no layer's
    /// closure hash moved.
    Metadata,
}

impl Class {
    /// Every class, costliest first.
    pub const ALL: [Class; 19] = [
        Class::Gpu,
        Class::DriverBranch,
        Class::DriverPatch,
        Class::HostPackage,
        Class::Os,
        Class::CudaMajor,
        Class::ArchList,
        Class::CudaMinor,
        Class::Cudnn,
        Class::Nccl,
        Class::Fabric,
        Class::Env,
        Class::Python,
        Class::Framework,
        Class::PythonPackage,
        Class::Package,
        Class::Deployment,
        Class::Request,
        Class::Metadata,
    ];

    /// The kebab-case name used in every output format.
    pub fn name(self) -> &'static str {
        match self {
            Class::Gpu => "gpu",
            Class::DriverBranch => "driver-branch",
            Class::DriverPatch => "driver-patch",
            Class::HostPackage => "host-package",
            Class::Os => "os",
            Class::CudaMajor => "cuda-major",
            Class::ArchList => "arch-list",
            Class::CudaMinor => "cuda-minor",
            Class::Cudnn => "cudnn",
            Class::Nccl => "nccl",
            Class::Fabric => "fabric",
            Class::Env => "env",
            Class::Python => "python",
            Class::Framework => "framework",
            Class::PythonPackage => "python-package",
            Class::Package => "package",
            Class::Deployment => "deployment",
            Class::Request => "request",
            Class::Metadata => "metadata",
        }
    }

    /// Parses a class name.
    pub fn from_name(s: &str) -> Option<Class> {
        Class::ALL.into_iter().find(|c| c.name() == s)
    }

    /// What in the lock makes a change this class.
    pub fn trigger(self) -> &'static str {
        match self {
            Class::Gpu => "`[[hardware.gpu]]` ids differ",
            Class::DriverBranch => "the driver's first dotted part differs (550 → 570)",
            Class::DriverPatch => "the driver differs within its branch (550.54.15 → 550.144.03)",
            Class::HostPackage => "a `[[package]]` of the `host` layer differs",
            Class::Os => "`[request].os` differs",
            Class::CudaMajor => "CUDA's first dotted part differs, or CUDA is added or removed",
            Class::ArchList => "`[hardware].arch-list` differs",
            Class::CudaMinor => "CUDA differs within its major version (12.4 → 12.6, 12.4.0 → 12.4.1)",
            Class::Cudnn => "the cuDNN component differs",
            Class::Nccl => "the NCCL component differs",
            Class::Fabric => {
                "a `[[package]]` of the `base` or `validate` layer differs, other than `cuda-image`"
            }
            Class::Env => "a `[[fact]]` of kind `env` differs",
            Class::Python => "the Python component differs",
            Class::Framework => {
                "torch (its `+cuXYZ` variant included), vLLM, DeepSpeed or an extra differs"
            }
            Class::PythonPackage => {
                "a package of a `pylock.<layer>.toml` differs, or a `[[python.build]]` sdist"
            }
            Class::Package => "any other `[[package]]` differs (`cuda-image`, `uv`)",
            Class::Deployment => "any other `[[fact]]` differs (bandwidth, instance, cloud)",
            Class::Request => "any other `[request]` value differs",
            Class::Metadata => {
                "same version, fields differ, its layer's closure hash does not (support status, end of life, minimums)"
            }
        }
    }

    /// What the change costs an operator, in words.
    pub fn action(self) -> &'static str {
        match self {
            Class::Gpu => "new node pool and VM image; rebuild and re-validate everything",
            Class::DriverBranch => {
                "new VM image; drain and reboot every node; check each container's CUDA compatibility"
            }
            Class::DriverPatch => "new VM image; rolling drain and reboot of every node",
            Class::HostPackage => "new VM image; restart the container runtime and GPU services",
            Class::Os => "rebuild every container and VM image on the new OS",
            Class::CudaMajor => "rebuild every container; re-validate every workload",
            Class::ArchList => "rebuild every layer that compiles GPU kernels",
            Class::CudaMinor => "rebuild the base image and every layer above it",
            Class::Cudnn => "rebuild from the base image; re-run performance validation",
            Class::Nccl => "rebuild from the base image; re-run NCCL validation (nccl-tests)",
            Class::Fabric => "rebuild from the base image; re-run NCCL validation (nccl-tests)",
            Class::Env => "re-run NCCL validation with the new environment",
            Class::Python => "rebuild the framework layer and above; re-validate the model",
            Class::Framework => "rebuild its layer and those above; re-validate the model",
            Class::PythonPackage => "rebuild the layers whose pylock changed; re-run their tests",
            Class::Package => "rebuild the layer that installs it and those above",
            Class::Deployment => "review the generated deployment values and thresholds",
            Class::Request => "regenerate and re-apply the generated files",
            Class::Metadata => "nothing to rebuild",
        }
    }
}

/// What a change is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Kind {
    /// A `[[component]]`.
    Component,
    /// A `[[package]]`.
    Package,
    /// A `[[fact]]`.
    Fact,
    /// `[hardware]`: the GPUs or the arch list.
    Hardware,
    /// A `[request]` value.
    Request,
    /// A package of the Python closure.
    PythonPackage,
}

/// Whether the thing is new, gone or different.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Only in the new lock.
    Added,
    /// Only in the old lock.
    Removed,
    /// In both, different.
    Changed,
}

impl Status {
    fn of<T>(old: Option<T>, new: Option<T>) -> Status {
        match (old, new) {
            (None, _) => Status::Added,
            (_, None) => Status::Removed,
            _ => Status::Changed,
        }
    }

    /// `added`, `removed`, `changed`.
    pub fn name(self) -> &'static str {
        match self {
            Status::Added => "added",
            Status::Removed => "removed",
            Status::Changed => "changed",
        }
    }
}

/// One classified change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Change {
    /// What it is about.
    pub kind: Kind,
    /// `torch`, `ucx`, `env NCCL_IB_DISABLE`, `gpus`, `arch-list`, `request.k8s.namespace`.
    pub name: String,
    /// New, gone or different.
    pub status: Status,
    /// The old version or value, absent when added.
    pub old: Option<String>,
    /// The new version or value, absent when removed.
    pub new: Option<String>,
    /// What it costs.
    pub class: Class,
    /// The fields that differ besides the version, by key (empty when added or removed).
    pub fields: Vec<FieldChange>,
    /// A detail worth a reviewer's eye: `CUDA variant cu124 → cu126`.
    pub note: Option<String>,
}

/// One field of a component, package or fact that differs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FieldChange {
    /// `compat`, `index-url`, `value`, ….
    pub key: String,
    /// The old value (lists joined by `,`), absent when the field is new.
    pub old: Option<String>,
    /// The new value, absent when the field went.
    pub new: Option<String>,
}

/// A class present in the diff, with its action and how many changes have it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClassCount {
    /// The class.
    pub class: Class,
    /// [`Class::action`].
    pub action: &'static str,
    /// Changes of this class.
    pub count: usize,
}

/// A layer whose closure hash changed, or that appeared or went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LayerChange {
    /// `base`, `framework`, …, `host`.
    pub layer: String,
    /// New, gone or rehashed.
    pub status: Status,
    /// The old closure hash.
    pub old_hash: Option<String>,
    /// The new closure hash.
    pub new_hash: Option<String>,
}

/// The generated files of one target that differ.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TargetFiles {
    /// `docker`, `apptainer`, `packer`, `k8s`, `slurm`.
    pub target: String,
    /// Paths only the new lock generates.
    pub added: Vec<String>,
    /// Paths only the old lock generates.
    pub removed: Vec<String>,
    /// Paths whose content changes beyond the lock-hash label.
    pub changed: Vec<String>,
    /// Paths whose only difference is the lock-hash label.
    pub relabelled: Vec<String>,
    /// Why this target could not be compared, when one lock does not render it.
    pub error: Option<String>,
}

impl TargetFiles {
    fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// The generated-file comparison.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Files {
    /// `false` when either lock cannot render at all.
    pub available: bool,
    /// Why not, when unavailable.
    pub reason: Option<String>,
    /// One entry per target, in `gen all` order (empty when unavailable).
    pub targets: Vec<TargetFiles>,
}

/// Which lock a side of the diff is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Side {
    /// `[request].name`.
    pub stack: String,
    /// `[inputs].spec-digest`.
    pub spec_digest: String,
    /// `[inputs].catalog-digest`.
    pub catalog_digest: String,
}

impl Side {
    fn of(l: &Lock) -> Side {
        Side {
            stack: l.request.name.clone(),
            spec_digest: l.spec_digest.clone(),
            catalog_digest: l.catalog_digest.clone(),
        }
    }
}

/// The report of [`diff`]. Its JSON form is documented in the module doc.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LockDiff {
    /// [`SCHEMA`].
    pub schema: u32,
    /// The old lock.
    pub old: Side,
    /// The new lock.
    pub new: Side,
    /// Nothing to rebuild, re-validate or re-apply ([`LockDiff::is_empty`]).
    pub empty: bool,
    /// The classes present, costliest first.
    pub summary: Vec<ClassCount>,
    /// Every change, costliest class first, then in lock order.
    pub changes: Vec<Change>,
    /// Layers whose closure hash changed or that appeared or went, bottom first.
    pub layers: Vec<LayerChange>,
    /// The generated files that differ.
    pub files: Files,
}

/// Compares two locks.
///
/// ```
/// use gpustack::{Catalog, diff::{diff, Class}};
///
/// let catalog = Catalog::stock()?;
/// let spec = |driver: &str| format!(r#"
/// [stack]
/// name = "demo"
/// [hardware]
/// gpus = ["h100"]
/// driver = "{driver}"
/// [components]
/// cuda = "12.4"
/// "#);
/// let old = gpustack::lock_spec(&catalog, "old.toml", &spec("550.54.15"))?;
/// let new = gpustack::lock_spec(&catalog, "new.toml", &spec("550.144.03"))?;
/// let d = diff(&old, &new);
/// assert_eq!(d.classes().first(), Some(&Class::DriverPatch));
/// assert!(d.to_markdown().contains("| driver | `550.54.15` | `550.144.03` |"));
/// assert!(diff(&old, &old).is_empty());
/// # Ok::<(), gpustack::Error>(())
/// ```
pub fn diff(old: &Lock, new: &Lock) -> LockDiff {
    let mut changes = Vec::new();
    hardware(old, new, &mut changes);
    components(old, new, &mut changes);
    packages(old, new, &mut changes);
    facts(old, new, &mut changes);
    python_packages(old, new, &mut changes);
    request(old, new, &mut changes);
    // Stable: within a class, the lock's own order stays.
    changes.sort_by_key(|c| c.class);

    let mut summary: Vec<ClassCount> = Vec::new();
    for c in &changes {
        match summary.last_mut() {
            Some(s) if s.class == c.class => s.count += 1,
            _ => summary.push(ClassCount {
                class: c.class,
                action: c.class.action(),
                count: 1,
            }),
        }
    }

    let layers = Layer::EVERY
        .into_iter()
        .filter_map(|l| {
            let a = old.layer(l).map(|x| x.hash.clone());
            let b = new.layer(l).map(|x| x.hash.clone());
            (a != b).then(|| LayerChange {
                layer: l.name().to_string(),
                status: Status::of(a.as_ref(), b.as_ref()),
                old_hash: a,
                new_hash: b,
            })
        })
        .collect::<Vec<_>>();

    let files = files(old, new);
    let empty =
        changes.is_empty() && layers.is_empty() && files.targets.iter().all(TargetFiles::is_empty);
    LockDiff {
        schema: SCHEMA,
        old: Side::of(old),
        new: Side::of(new),
        empty,
        summary,
        changes,
        layers,
        files,
    }
}

/// The Python closure, package by package where both locks' pylock files were read, else
/// file by file (by digest); and the source builds' sdists.
fn python_packages(old: &Lock, new: &Lock, out: &mut Vec<Change>) {
    type Pkgs = BTreeMap<String, String>;
    let per_layer = |l: &Lock| -> BTreeMap<String, (String, Option<Pkgs>)> {
        l.python
            .iter()
            .flat_map(|p| p.files.iter())
            .map(|f| {
                let pkgs = f.contents.as_deref().map(|t| {
                    crate::resolve::python::packages(t)
                        .into_iter()
                        .collect::<Pkgs>()
                });
                (f.file.clone(), (f.digest.clone(), pkgs))
            })
            .collect()
    };
    let (a, b) = (per_layer(old), per_layer(new));
    let files: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    // A package whose version moved in several layers is one change, naming the layers.
    let mut moved: BTreeMap<(String, Option<String>, Option<String>), Vec<String>> =
        BTreeMap::new();
    for file in files {
        match (a.get(file), b.get(file)) {
            (Some((da, _)), Some((db, _))) if da == db => {}
            (Some((_, Some(pa))), Some((_, Some(pb)))) => {
                let names: std::collections::BTreeSet<&String> =
                    pa.keys().chain(pb.keys()).collect();
                for n in names {
                    let (x, y) = (pa.get(n), pb.get(n));
                    if x != y {
                        moved
                            .entry((n.clone(), x.cloned(), y.cloned()))
                            .or_default()
                            .push(file.clone());
                    }
                }
            }
            (x, y) => out.push(Change {
                kind: Kind::PythonPackage,
                name: file.clone(),
                status: Status::of(x, y),
                old: x.map(|v| v.0.clone()),
                new: y.map(|v| v.0.clone()),
                class: Class::PythonPackage,
                fields: Vec::new(),
                note: None,
            }),
        }
    }
    for ((name, x, y), files) in moved {
        out.push(Change {
            kind: Kind::PythonPackage,
            status: Status::of(x.as_ref(), y.as_ref()),
            name,
            old: x,
            new: y,
            class: Class::PythonPackage,
            fields: Vec::new(),
            note: Some(format!("in {}", files.join(", "))),
        });
    }
    let builds = |l: &Lock| -> BTreeMap<String, String> {
        l.python
            .iter()
            .flat_map(|p| p.builds.iter())
            .map(|b| {
                (
                    format!("sdist {}", b.name),
                    format!("{} ({})", b.version, b.sha256),
                )
            })
            .collect()
    };
    let (a, b) = (builds(old), builds(new));
    for n in a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))) {
        let (x, y) = (a.get(n), b.get(n));
        if x != y {
            out.push(Change {
                kind: Kind::PythonPackage,
                name: n.clone(),
                status: Status::of(x, y),
                old: x.cloned(),
                new: y.cloned(),
                class: Class::PythonPackage,
                fields: Vec::new(),
                note: None,
            });
        }
    }
}

fn hardware(old: &Lock, new: &Lock, out: &mut Vec<Change>) {
    let ids = |l: &Lock| {
        l.hardware
            .gpus
            .iter()
            .map(|g| g.id.clone())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (a, b) = (ids(old), ids(new));
    if a != b {
        out.push(Change {
            kind: Kind::Hardware,
            name: "gpus".into(),
            status: Status::Changed,
            old: Some(a),
            new: Some(b),
            class: Class::Gpu,
            fields: Vec::new(),
            note: None,
        });
    } else if old.hardware.gpus != new.hardware.gpus {
        // Same GPUs, different recorded facts (a product label, a memory size).
        let mut fields = Vec::new();
        for (x, y) in old.hardware.gpus.iter().zip(&new.hardware.gpus) {
            let opt = |v: Option<String>| v.unwrap_or_else(|| "none".into());
            for (k, a, b) in [
                ("name", x.name.clone(), y.name.clone()),
                ("cc", x.cc.to_string(), y.cc.to_string()),
                (
                    "datacenter",
                    x.datacenter.to_string(),
                    y.datacenter.to_string(),
                ),
                ("nvswitch", x.nvswitch.to_string(), y.nvswitch.to_string()),
                (
                    "memory-gib",
                    opt(x.memory_gib.map(|m| m.to_string())),
                    opt(y.memory_gib.map(|m| m.to_string())),
                ),
                (
                    "gfd-product",
                    opt(x.gfd_product.clone()),
                    opt(y.gfd_product.clone()),
                ),
            ] {
                if a != b {
                    fields.push(FieldChange {
                        key: format!("{}.{k}", x.id),
                        old: Some(a),
                        new: Some(b),
                    });
                }
            }
        }
        out.push(Change {
            kind: Kind::Hardware,
            name: "gpus".into(),
            status: Status::Changed,
            old: Some(a),
            new: Some(b),
            class: Class::Metadata,
            fields,
            note: None,
        });
    }
    let arch = |l: &Lock| {
        l.hardware
            .arch_list
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    let (a, b) = (arch(old), arch(new));
    if a != b {
        out.push(Change {
            kind: Kind::Hardware,
            name: "arch-list".into(),
            status: Status::Changed,
            old: Some(a),
            new: Some(b),
            class: Class::ArchList,
            fields: Vec::new(),
            note: None,
        });
    }
}

/// The fields whose values differ between two field maps, by key.
fn differing(a: &BTreeMap<String, Field>, b: &BTreeMap<String, Field>) -> Vec<FieldChange> {
    let mut keys: Vec<&String> = a
        .keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .map(|k| FieldChange {
            key: k.clone(),
            old: a.get(k).map(field_text),
            new: b.get(k).map(field_text),
        })
        .collect()
}

/// Whether a layer's closure hash is the same in both locks.
fn same_layer(old: &Lock, new: &Lock, l: Layer) -> bool {
    old.layer(l).map(|x| &x.hash) == new.layer(l).map(|x| &x.hash)
}

fn components(old: &Lock, new: &Lock, out: &mut Vec<Change>) {
    for c in Component::ALL {
        let (a, b) = (old.component(c), new.component(c));
        if a.is_none() && b.is_none() {
            continue;
        }
        let (av, bv) = (a.map(|x| &x.version), b.map(|x| &x.version));
        let version_differs = av.map(Version::as_str) != bv.map(Version::as_str);
        let fields = match (a, b) {
            (Some(a), Some(b)) => differing(&a.fields, &b.fields),
            _ => Vec::new(),
        };
        if !version_differs && fields.is_empty() {
            continue;
        }
        let layer = b.or(a).map_or(c.layer(), |x| x.layer);
        let class = if !version_differs && same_layer(old, new, layer) {
            Class::Metadata
        } else {
            match (c, av, bv) {
                (Component::Driver, Some(x), Some(y)) if x.major() == y.major() => {
                    Class::DriverPatch
                }
                (Component::Driver, _, _) => Class::DriverBranch,
                (Component::Cuda, Some(x), Some(y)) if x.major() == y.major() => Class::CudaMinor,
                (Component::Cuda, _, _) => Class::CudaMajor,
                (Component::Cudnn, _, _) => Class::Cudnn,
                (Component::Nccl, _, _) => Class::Nccl,
                (Component::Python, _, _) => Class::Python,
                _ => Class::Framework,
            }
        };
        let mut notes = Vec::new();
        if let (Some(x), Some(y)) = (av, bv) {
            // The release alone: a CUDA variant is no older or newer than another.
            if y.cmp_release(x).is_lt() {
                notes.push("downgrade".to_string());
            }
            if let (Some(x), Some(y)) = (x.local(), y.local()) {
                if x != y {
                    notes.push(format!("CUDA variant {x} → {y}"));
                }
            }
        }
        let note = (!notes.is_empty()).then(|| notes.join("; "));
        out.push(Change {
            kind: Kind::Component,
            name: c.name().to_string(),
            status: Status::of(a, b),
            old: av.map(ToString::to_string),
            new: bv.map(ToString::to_string),
            class,
            fields,
            note,
        });
    }
}

fn packages(old: &Lock, new: &Lock, out: &mut Vec<Change>) {
    let mut names: Vec<&str> = new.packages.iter().map(|p| p.name.as_str()).collect();
    for p in &old.packages {
        if !names.contains(&p.name.as_str()) {
            names.push(&p.name);
        }
    }
    for name in names {
        let (a, b) = (old.package(name), new.package(name));
        let version_differs = a.map(|x| &x.version) != b.map(|x| &x.version);
        let fields = match (a, b) {
            (Some(a), Some(b)) => differing(&a.fields, &b.fields),
            _ => Vec::new(),
        };
        if !version_differs && fields.is_empty() {
            continue;
        }
        let Some(layer) = b.or(a).map(|x| x.layer) else {
            continue;
        };
        let class = if !version_differs && same_layer(old, new, layer) {
            Class::Metadata
        } else if layer == Layer::Host {
            Class::HostPackage
        } else if name != "cuda-image"
            && matches!(layer, Layer::Base | Layer::Validate)
            // OS packages from NVIDIA's repository (NCCL) are not the fabric's source builds.
            && b.or(a).is_some_and(|x| x.list("apt").is_empty() && x.list("dnf").is_empty())
        {
            Class::Fabric
        } else {
            Class::Package
        };
        out.push(Change {
            kind: Kind::Package,
            name: name.to_string(),
            status: Status::of(a, b),
            old: a.map(|x| x.version.clone()),
            new: b.map(|x| x.version.clone()),
            class,
            fields,
            note: match (a, b) {
                (Some(x), Some(y)) => {
                    match (Version::parse(&x.version), Version::parse(&y.version)) {
                        (Ok(x), Ok(y)) if y.cmp_release(&x).is_lt() => {
                            Some("downgrade".to_string())
                        }
                        _ => None,
                    }
                }
                _ => None,
            },
        });
    }
}

fn field_text(f: &Field) -> String {
    match f {
        Field::Str(s) => s.clone(),
        Field::List(l) => l.join(","),
    }
}

/// A fact's value: `value` for an environment variable, else `key=value` for the given keys.
fn fact_text(f: &LockedFact, keys: &[String]) -> String {
    if f.kind == "env" {
        if let Some(v) = f.get("value") {
            return v.to_string();
        }
    }
    keys.iter()
        .filter_map(|k| {
            f.fields
                .get(k)
                .map(|v| match (k.as_str(), field_text(v).as_str()) {
                    // An NCCL build's `known`: whether NVIDIA publishes that build, in words.
                    ("known", "true") => "a build NVIDIA publishes".to_string(),
                    ("known", "false") => "no build NVIDIA publishes".to_string(),
                    (_, t) => format!("{k}={t}"),
                })
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn facts(old: &Lock, new: &Lock, out: &mut Vec<Change>) {
    let mut ids: Vec<(&str, &str)> = new
        .facts
        .iter()
        .map(|f| (f.kind.as_str(), f.key.as_str()))
        .collect();
    for f in &old.facts {
        if !ids.contains(&(f.kind.as_str(), f.key.as_str())) {
            ids.push((&f.kind, &f.key));
        }
    }
    for (kind, key) in ids {
        let (a, b) = (old.fact(kind, key), new.fact(kind, key));
        let fields = match (a, b) {
            (Some(a), Some(b)) => differing(&a.fields, &b.fields),
            _ => Vec::new(),
        };
        if a.is_some() && b.is_some() && fields.is_empty() {
            continue;
        }
        let keys: Vec<String> = fields.iter().map(|f| f.key.clone()).collect();
        let shown = |f: &LockedFact| {
            if keys.is_empty() {
                fact_text(f, &f.fields.keys().cloned().collect::<Vec<_>>())
            } else {
                fact_text(f, &keys)
            }
        };
        out.push(Change {
            kind: Kind::Fact,
            name: format!("{kind} {key}"),
            status: Status::of(a, b),
            old: a.map(shown),
            new: b.map(shown),
            class: {
                // Added, removed, or one of these fields changed (not only the GPUs or the
                // `known` flag that explain it).
                let touches = |f: &str| keys.is_empty() || keys.iter().any(|k| k == f);
                match kind {
                    "env" => Class::Env,
                    // The CUDA build of the NCCL packages the base image installs.
                    "nccl-build" if touches("cuda") || touches("nccl") => Class::Nccl,
                    // The driver packages a VM image installs.
                    "kernel-modules" if touches("flavour") => Class::HostPackage,
                    _ => Class::Deployment,
                }
            },
            fields,
            note: None,
        });
    }
}

/// `request.<table>.<key>` → the TOML value text, from the canonical request text.
fn request_values(l: &Lock) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut table = String::new();
    for line in crate::lock::request_toml(&l.request).lines() {
        if let Some(t) = line.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            table = t.to_string();
        } else if let Some((k, v)) = line.split_once(" = ") {
            // A plain string shows without its quotes; lists and escapes stay TOML.
            let v = match v.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
                Some(inner) if !inner.contains(['"', '\\']) => inner,
                _ => v,
            };
            out.push((format!("{table}.{k}"), v.to_string()));
        }
    }
    out
}

fn request(old: &Lock, new: &Lock, out: &mut Vec<Change>) {
    let a = request_values(old);
    let b = request_values(new);
    let mut keys: Vec<&str> = b.iter().map(|(k, _)| k.as_str()).collect();
    for (k, _) in &a {
        if !keys.contains(&k.as_str()) {
            keys.push(k);
        }
    }
    let get =
        |v: &[(String, String)], k: &str| v.iter().find(|(x, _)| x == k).map(|(_, v)| v.clone());
    for k in keys {
        // The resolved GPUs are compared under [hardware].
        if k == "request.gpus" {
            continue;
        }
        let (x, y) = (get(&a, k), get(&b, k));
        if x == y {
            continue;
        }
        let (name, class) = if k == "request.os" {
            ("os".to_string(), Class::Os)
        } else {
            (k.to_string(), Class::Request)
        };
        out.push(Change {
            kind: Kind::Request,
            name,
            status: Status::of(x.as_ref(), y.as_ref()),
            old: x,
            new: y,
            class,
            fields: Vec::new(),
            note: None,
        });
    }
}

/// An error's messages in one line, for a report.
fn reason(e: &Error) -> String {
    match e {
        Error::Invalid(ds) | Error::Unresolvable(ds) | Error::Network(ds) => ds
            .iter()
            .map(|d| d.message.as_str())
            .collect::<Vec<_>>()
            .join("; "),
        Error::NoSolution(_) => "no compatible stack".to_string(),
    }
}

/// Renders every target of a lock; a target that fails carries its reason.
type Rendered = Vec<(plan::Target, Result<Vec<RenderedFile>, String>)>;

fn render_all(lock: &Lock) -> Result<(String, Rendered), String> {
    let common = Common::new(lock).map_err(|e| reason(&e))?;
    let all = match plan::generate_many(lock, &plan::Target::ALL) {
        Ok(v) => v.into_iter().map(|(t, f)| (t, Ok(f))).collect(),
        Err(_) => plan::Target::ALL
            .into_iter()
            .map(|t| (t, plan::generate(lock, t).map_err(|e| reason(&e))))
            .collect(),
    };
    Ok((common.lock_hash, all))
}

const LABEL: &str = "<lock-hash>";

fn files(old: &Lock, new: &Lock) -> Files {
    let unavailable = |reason: String| Files {
        available: false,
        reason: Some(reason),
        targets: Vec::new(),
    };
    let (a_hash, a) = match render_all(old) {
        Ok(x) => x,
        Err(e) => return unavailable(format!("the old lock does not render: {e}")),
    };
    let (b_hash, b) = match render_all(new) {
        Ok(x) => x,
        Err(e) => return unavailable(format!("the new lock does not render: {e}")),
    };
    let mut targets = Vec::new();
    for ((t, x), (_, y)) in a.into_iter().zip(b) {
        let mut tf = TargetFiles {
            target: t.name().to_string(),
            ..TargetFiles::default()
        };
        match (x, y) {
            (Err(e), _) => tf.error = Some(format!("the old lock does not render it: {e}")),
            (_, Err(e)) => tf.error = Some(format!("the new lock does not render it: {e}")),
            (Ok(x), Ok(y)) => {
                let x: BTreeMap<&str, &str> = x
                    .iter()
                    .map(|f| (f.path.as_str(), f.contents.as_str()))
                    .collect();
                let y: BTreeMap<&str, &str> = y
                    .iter()
                    .map(|f| (f.path.as_str(), f.contents.as_str()))
                    .collect();
                for (p, xc) in &x {
                    match y.get(p) {
                        None => tf.removed.push((*p).to_string()),
                        Some(yc) if yc == xc => {}
                        Some(yc) if yc.replace(&b_hash, LABEL) == xc.replace(&a_hash, LABEL) => {
                            tf.relabelled.push((*p).to_string());
                        }
                        Some(_) => tf.changed.push((*p).to_string()),
                    }
                }
                tf.added = y
                    .keys()
                    .filter(|p| !x.contains_key(*p))
                    .map(|p| (*p).to_string())
                    .collect();
            }
        }
        targets.push(tf);
    }
    Files {
        available: true,
        reason: None,
        targets,
    }
}

/// The first 12 hex digits of a `sha256:…` hash, for display.
fn short(h: &str) -> String {
    let hex = h.trim_start_matches("sha256:");
    format!("sha256:{}", &hex[..hex.len().min(12)])
}

impl Change {
    /// The note, or the fields that differ when the version did not change.
    fn detail(&self) -> Option<String> {
        if let Some(n) = &self.note {
            return Some(n.clone());
        }
        if self.status != Status::Changed || self.old != self.new || self.fields.is_empty() {
            return None;
        }
        let none = || "none".to_string();
        Some(
            self.fields
                .iter()
                .map(|f| {
                    let (a, b) = (
                        f.old.clone().unwrap_or_else(none),
                        f.new.clone().unwrap_or_else(none),
                    );
                    if a.chars().count() + b.chars().count() <= 48 {
                        format!("{}: {a} → {b}", f.key)
                    } else {
                        format!("{} changed", f.key)
                    }
                })
                .collect::<Vec<_>>()
                .join("; "),
        )
    }
}

impl LockDiff {
    /// `true` when nothing needs rebuilding, re-validating or re-applying: no classified
    /// change, no layer hash moved, and no generated file changes beyond its lock-hash
    /// label.
    pub fn is_empty(&self) -> bool {
        self.empty
    }

    /// The classes present, costliest first.
    pub fn classes(&self) -> Vec<Class> {
        self.summary.iter().map(|s| s.class).collect()
    }

    /// The costliest class present.
    pub fn costliest(&self) -> Option<Class> {
        self.summary.first().map(|s| s.class)
    }

    /// The layers to rebuild (added or rehashed), bottom first.
    pub fn rebuild(&self) -> Vec<&str> {
        self.layers
            .iter()
            .filter(|l| l.status != Status::Removed)
            .map(|l| l.layer.as_str())
            .collect()
    }

    fn headline(&self) -> String {
        if self.old.stack == self.new.stack {
            self.new.stack.clone()
        } else {
            format!("{} → {}", self.old.stack, self.new.stack)
        }
    }

    /// The JSON report (schema [`SCHEMA`], documented in the module doc), with a trailing
    /// newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("the report serializes");
        s.push('\n');
        s
    }

    /// The terminal report.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "lock diff: {}", self.headline());
        if self.empty {
            o.push_str("no changes: nothing to rebuild, re-validate or re-apply\n");
            if self.old.catalog_digest != self.new.catalog_digest {
                o.push_str("(the catalog entries differ only in provenance)\n");
            }
            self.text_files(&mut o);
            return o;
        }
        if let Some(c) = self.costliest() {
            let _ = writeln!(o, "costliest: {}: {}", c.name(), c.action());
        }
        if !self.changes.is_empty() {
            o.push_str("\nchanges:\n");
            let w0 = self
                .changes
                .iter()
                .map(|c| c.class.name().len())
                .max()
                .unwrap_or(0);
            let w1 = self
                .changes
                .iter()
                .map(|c| c.name.chars().count())
                .max()
                .unwrap_or(0);
            let none = || "(none)".to_string();
            for c in &self.changes {
                let _ = writeln!(
                    o,
                    "  {}{}  {}{}  {} → {}",
                    c.class.name(),
                    pad(c.class.name(), w0),
                    c.name,
                    pad(&c.name, w1),
                    c.old.clone().unwrap_or_else(none),
                    c.new.clone().unwrap_or_else(none),
                );
                if let Some(d) = c.detail() {
                    let _ = writeln!(o, "  {}    {d}", " ".repeat(w0));
                }
            }
            o.push_str("\nactions, costliest first:\n");
            let w = self
                .summary
                .iter()
                .map(|s| s.class.name().len())
                .max()
                .unwrap_or(0);
            for s in &self.summary {
                let _ = writeln!(
                    o,
                    "  {}{}  {}",
                    s.class.name(),
                    pad(s.class.name(), w),
                    s.action
                );
            }
        }
        if !self.layers.is_empty() {
            o.push_str("\nrebuild (layer closure hash changed):\n");
            let labels: Vec<String> = self.layers.iter().map(|l| layer_label(&l.layer)).collect();
            let w = labels.iter().map(String::len).max().unwrap_or(0);
            for (l, label) in self.layers.iter().zip(&labels) {
                let _ = writeln!(o, "  {label}{}  {}", pad(label, w), layer_text(l, short));
            }
        }
        self.text_files(&mut o);
        o
    }

    fn text_files(&self, o: &mut String) {
        o.push_str("\ngenerated files:\n");
        if let Some(r) = &self.files.reason {
            let _ = writeln!(o, "  not compared: {r}");
            return;
        }
        let w = self
            .files
            .targets
            .iter()
            .map(|t| t.target.len())
            .max()
            .unwrap_or(0);
        for t in &self.files.targets {
            let mut parts = Vec::new();
            if let Some(e) = &t.error {
                parts.push(format!("not compared: {e}"));
            }
            for (what, list) in [
                ("added", &t.added),
                ("removed", &t.removed),
                ("changed", &t.changed),
                ("relabelled", &t.relabelled),
            ] {
                if !list.is_empty() {
                    parts.push(format!("{what} {}", list.join(", ")));
                }
            }
            if parts.is_empty() {
                parts.push("unchanged".into());
            }
            let _ = writeln!(
                o,
                "  {}{}  {}",
                t.target,
                pad(&t.target, w),
                parts.join("; ")
            );
        }
    }

    /// The Markdown report, ready to post as a pull request comment.
    pub fn to_markdown(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "### gpustack lock diff: {}\n", md_code(&self.headline()));
        if self.empty {
            o.push_str("No changes: nothing to rebuild, re-validate or re-apply.\n");
            return o;
        }
        if let Some(c) = self.costliest() {
            let _ = writeln!(
                o,
                "**Costliest change: {}**: {}.\n",
                md_code(c.name()),
                c.action()
            );
        }
        if !self.changes.is_empty() {
            o.push_str("| change | old | new | class | what it costs |\n");
            o.push_str("|---|---|---|---|---|\n");
            for c in &self.changes {
                let mut what = md_cell(&c.name);
                if let Some(d) = c.detail() {
                    let _ = write!(what, " ({})", md_cell(&d));
                }
                let v = |x: &Option<String>| x.as_deref().map_or("—".to_string(), md_code);
                let _ = writeln!(
                    o,
                    "| {what} | {} | {} | `{}` | {} |",
                    v(&c.old),
                    v(&c.new),
                    c.class.name(),
                    c.class.action()
                );
            }
        }
        if !self.layers.is_empty() {
            o.push_str("\n**Rebuild** (layer closure hash changed):\n\n");
            for l in &self.layers {
                let _ = writeln!(
                    o,
                    "- {}: {}",
                    md_code(&l.layer)
                        + if l.layer == Layer::Host.name() {
                            " (VM image)"
                        } else {
                            ""
                        },
                    layer_text(l, |h| format!("`{}`", short(h)))
                );
            }
        }
        o.push('\n');
        if let Some(r) = &self.files.reason {
            let _ = writeln!(o, "Generated files not compared: {}.", md_cell(r));
            return o;
        }
        let count = |f: fn(&TargetFiles) -> usize| self.files.targets.iter().map(f).sum::<usize>();
        let (added, removed, changed, relabelled) = (
            count(|t| t.added.len()),
            count(|t| t.removed.len()),
            count(|t| t.changed.len()),
            count(|t| t.relabelled.len()),
        );
        let _ = writeln!(
            o,
            "<details>\n<summary>Generated files: {changed} changed, {added} added, {removed} removed, {relabelled} relabelled only</summary>\n"
        );
        o.push_str("| target | file | change |\n|---|---|---|\n");
        for t in &self.files.targets {
            if let Some(e) = &t.error {
                let _ = writeln!(o, "| {} | — | not compared: {} |", t.target, md_cell(e));
            }
            for (what, list) in [
                ("added", &t.added),
                ("removed", &t.removed),
                ("changed", &t.changed),
            ] {
                for p in list {
                    let _ = writeln!(o, "| {} | {} | {what} |", t.target, md_code(p));
                }
            }
        }
        if relabelled > 0 {
            o.push_str("\nOnly the lock-hash label changes in: ");
            let all: Vec<String> = self
                .files
                .targets
                .iter()
                .flat_map(|t| {
                    t.relabelled
                        .iter()
                        .map(move |p| md_code(&format!("{}/{p}", t.target)))
                })
                .collect();
            o.push_str(&all.join(", "));
            o.push_str(".\n");
        }
        o.push_str("\n</details>\n");
        o
    }
}

fn layer_text(l: &LayerChange, h: impl Fn(&str) -> String) -> String {
    match (&l.old_hash, &l.new_hash) {
        (Some(a), Some(b)) => format!("{} → {}", h(a), h(b)),
        (None, Some(b)) => format!("added ({})", h(b)),
        (Some(a), None) => format!("removed (was {})", h(a)),
        (None, None) => String::new(),
    }
}

/// `host` is the VM image's own layer, not a container image.
fn layer_label(layer: &str) -> String {
    if layer == Layer::Host.name() {
        format!("{layer} (VM image)")
    } else {
        layer.to_string()
    }
}

fn pad(s: &str, width: usize) -> String {
    " ".repeat(width.saturating_sub(s.chars().count()))
}

/// Text safe inside a Markdown table cell.
fn md_cell(s: &str) -> String {
    // Newlines would end the table row; control characters are shown as escapes. Then
    // every character Markdown or HTML gives a meaning inside a line is backslash-escaped
    // (CommonMark: any ASCII punctuation may be), so a value from a lock cannot open a
    // tag (`</table>`, `<!--`), a link, emphasis or a new table cell.
    let flat = s.replace(['\n', '\r'], " ");
    let flat = crate::error::escape_control(&flat);
    let mut o = String::with_capacity(flat.len());
    for c in flat.chars() {
        if matches!(
            c,
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '&' | '|' | '~' | '!' | '#'
        ) {
            o.push('\\');
        }
        o.push(c);
    }
    o
}

/// A code span safe inside a table cell: HTML is not interpreted inside a code span, the
/// fence is longer than any run of backticks in the value, and `|` is escaped (GitHub
/// splits table cells before it parses code spans).
fn md_code(s: &str) -> String {
    let flat = s.replace(['\n', '\r'], " ");
    let flat = crate::error::escape_control(&flat).replace('|', "\\|");
    let mut longest = 0;
    let mut run = 0;
    for c in flat.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    let pad = if flat.starts_with('`') || flat.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{flat}{pad}{fence}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_listed_costliest_first_with_unique_names() {
        let mut sorted = Class::ALL;
        sorted.sort();
        assert_eq!(sorted, Class::ALL);
        for c in Class::ALL {
            assert_eq!(Class::from_name(c.name()), Some(c));
            // The JSON spelling is the documented name.
            assert_eq!(
                serde_json::to_value(c).unwrap(),
                serde_json::Value::from(c.name())
            );
        }
    }

    #[test]
    fn short_hashes_keep_the_prefix_and_twelve_digits() {
        assert_eq!(short("sha256:0123456789abcdef"), "sha256:0123456789ab");
        assert_eq!(short("sha256:01"), "sha256:01");
    }

    #[test]
    fn markdown_cells_escape_pipes_and_backticks() {
        assert_eq!(md_cell("a|b\nc"), "a\\|b c");
        assert_eq!(md_code("x|y"), "`x\\|y`");
        assert_eq!(md_code("a`b"), "``a`b``");
        assert_eq!(md_code("`a"), "`` `a ``");
        // Nothing a lock holds can open a tag, a comment, a link or emphasis.
        assert_eq!(
            md_cell("</table><!-- [x](y) *b* _i_ &amp; ~s~ !"),
            "\\</table\\>\\<\\!-- \\[x\\](y) \\*b\\* \\_i\\_ \\&amp; \\~s\\~ \\!"
        );
        assert_eq!(md_cell("a\u{1b}[2Jb"), "a\\\\u{1b}\\[2Jb");
        assert_eq!(md_code("a\u{1b}b"), "`a\\u{1b}b`");
    }
}
