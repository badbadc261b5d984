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

mod classify;
mod render;

pub use classify::diff;

use serde::Serialize;

use crate::lock::Lock;

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
}

#[cfg(test)]
mod tests;
