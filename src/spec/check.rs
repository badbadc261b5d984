//! The spec's `[check]` table: which warnings of `gpustack check` the stack acknowledges,
//! each with a reason. It is part of the spec (review policy, not part of the request): the
//! codes it names ([`Code`]) are defined here, below both the spec and the checks, so that
//! `check` reads the spec and never the other way round.

use crate::error::{Diagnostic, Location, Stage};
use serde::Serialize;

/// What kind of problem a finding is. The kebab-case names are the stable `code` of the
/// JSON output.
///
/// New checks add codes, so a `match` on it needs a `_` arm (`#[non_exhaustive]`); an
/// existing code keeps its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Code {
    /// A digest recorded in the lock does not match its content: the lock was edited.
    TamperedLock,
    /// The spec changed since the lock was written.
    StaleSpec,
    /// The catalog now resolves the same spec to a different lock.
    StaleCatalog,
    /// A generated file differs from what the lock renders now.
    Drift,
    /// A target's files were generated from a different lock.
    OtherLock,
    /// Every file of a target that names its lock names another one: the whole target
    /// was generated from another lock (re-locked, then `gen` forgotten).
    StaleOutputs,
    /// The driver differs between the lock, the Packer scripts and the GPU Operator values.
    InconsistentDriver,
    /// An image reference in Kubernetes, Slurm or Apptainer is not the bake file's tag.
    InconsistentImage,
    /// The NCCL/fabric environment differs between Dockerfile, ConfigMap and `nccl.env`.
    InconsistentEnv,
    /// What torchrun runs (the training script or module and its arguments) differs between
    /// the Kubernetes training pods and the Slurm training script.
    InconsistentCommand,
    /// The node's driver cannot run the locked stack.
    DriverTooOld,
    /// The lock says the nodes run an installed driver (`[hardware].driver`), and the
    /// node runs another one.
    InstalledDriverMismatch,
    /// The node's driver runs the locked stack but is older than the locked driver the VM
    /// image and GPU Operator install: the node was not built from the generated image.
    DriverOlderThanLocked,
    /// A GPU of the node is not covered by the locked arch list.
    ArchNotCovered,
    /// torch is built from source, and its arch list (the only kernels it has) does not
    /// cover a GPU of the node.
    TorchArchNotBuilt,
    /// A GPU of the node is not one the stack was locked for (its arch list covers it).
    GpuNotLocked,
    /// An artifact is pinned by name only: no sha256 or image digest.
    Unpinned,
    /// The locked driver's branch is end of life.
    EolDriver,
    /// The OS release the lock's VM images boot is end of life (as of the check's date).
    EolOs,
    /// A locked version has a known security problem.
    UnsafeVersion,
    /// The lock has a Python layer but no Python closure (`gpustack lock --allow-open`, or
    /// an offline first lock): its builds resolve Python packages at build time. Reported
    /// with `--strict` (and `--pedantic`).
    OpenClosure,
    /// An entry of the spec's `[check].allow` matched no finding: the acknowledgement is
    /// stale (the problem was fixed) and would hide the next one.
    UnusedAllow,
    /// A queued pod requests a resource its ClusterQueue does not cover (or names a queue
    /// with no generated LocalQueue): Kueue never admits the workload.
    UncoveredResource,
    /// A queued workload's total request exceeds its ClusterQueue's quota.
    ExceedsQuota,
    /// A pod requests an extended resource that no generated object provides and the spec
    /// does not name as the site's.
    UnprovidedResource,
    /// A workload whose pods wait for each other across nodes is not gang scheduled.
    NoGang,
    /// A ServiceMonitor/PodMonitor lacks the labels the cluster's Prometheus selects.
    UnselectedMonitor,
    /// An image the cluster pulls names no registry (`localhost/…`).
    UnpullableImage,
    /// A pod requests more than one node of `[cluster]` has.
    NoNodeFits,
    /// A Slurm job asks for more nodes or time than `[slurm]` says the partition allows.
    ExceedsPartition,
}

impl Code {
    /// The stable name (`stale-spec`).
    pub fn name(self) -> &'static str {
        match self {
            Code::TamperedLock => "tampered-lock",
            Code::StaleSpec => "stale-spec",
            Code::StaleCatalog => "stale-catalog",
            Code::Drift => "drift",
            Code::OtherLock => "other-lock",
            Code::StaleOutputs => "stale-outputs",
            Code::InconsistentDriver => "inconsistent-driver",
            Code::InconsistentImage => "inconsistent-image",
            Code::InconsistentEnv => "inconsistent-env",
            Code::InconsistentCommand => "inconsistent-command",
            Code::DriverTooOld => "driver-too-old",
            Code::InstalledDriverMismatch => "installed-driver-mismatch",
            Code::DriverOlderThanLocked => "driver-older-than-locked",
            Code::ArchNotCovered => "arch-not-covered",
            Code::TorchArchNotBuilt => "torch-arch-not-built",
            Code::GpuNotLocked => "gpu-not-locked",
            Code::Unpinned => "unpinned",
            Code::EolDriver => "eol-driver",
            Code::EolOs => "eol-os",
            Code::UnsafeVersion => "unsafe-version",
            Code::OpenClosure => "open-closure",
            Code::UnusedAllow => "unused-allow",
            Code::UncoveredResource => "uncovered-resource",
            Code::ExceedsQuota => "exceeds-quota",
            Code::UnprovidedResource => "unprovided-resource",
            Code::NoGang => "no-gang",
            Code::UnselectedMonitor => "unselected-monitor",
            Code::UnpullableImage => "unpullable-image",
            Code::NoNodeFits => "no-node-fits",
            Code::ExceedsPartition => "exceeds-partition",
        }
    }

    /// Every code, in report order.
    pub const ALL: [Code; 30] = [
        Code::TamperedLock,
        Code::StaleSpec,
        Code::StaleCatalog,
        Code::Drift,
        Code::OtherLock,
        Code::StaleOutputs,
        Code::InconsistentDriver,
        Code::InconsistentImage,
        Code::InconsistentEnv,
        Code::InconsistentCommand,
        Code::UncoveredResource,
        Code::ExceedsQuota,
        Code::UnprovidedResource,
        Code::NoGang,
        Code::UnselectedMonitor,
        Code::UnpullableImage,
        Code::NoNodeFits,
        Code::ExceedsPartition,
        Code::DriverTooOld,
        Code::InstalledDriverMismatch,
        Code::DriverOlderThanLocked,
        Code::ArchNotCovered,
        Code::TorchArchNotBuilt,
        Code::GpuNotLocked,
        Code::Unpinned,
        Code::EolDriver,
        Code::EolOs,
        Code::UnsafeVersion,
        Code::OpenClosure,
        Code::UnusedAllow,
    ];

    /// The code with this stable name (`--allow unpinned`).
    pub fn from_name(name: &str) -> Option<Code> {
        Code::ALL.into_iter().find(|c| c.name() == name)
    }

    /// Errors fail the check (exit 1); warnings fail it only with `--strict`.
    pub fn severity(self) -> Severity {
        match self {
            Code::GpuNotLocked
            | Code::Unpinned
            | Code::EolDriver
            | Code::EolOs
            | Code::UnsafeVersion
            | Code::OpenClosure
            | Code::UnusedAllow
            | Code::UnpullableImage
            | Code::DriverOlderThanLocked => Severity::Warning,
            _ => Severity::Error,
        }
    }

    /// Findings about facts the user cannot act on from the spec: reported only when asked
    /// (`--pedantic`). An artifact pinned by name only is a catalog gap (the catalog has no
    /// published digest for it); the user can only add one in a catalog overlay.
    pub fn pedantic(self) -> bool {
        matches!(self, Code::Unpinned)
    }

    /// The check that reports this code: an acknowledgement of a code whose check did not
    /// run is not stale.
    pub(crate) fn check(self) -> &'static str {
        match self {
            Code::TamperedLock => "integrity",
            Code::StaleSpec | Code::StaleCatalog => "staleness",
            Code::Drift | Code::OtherLock | Code::StaleOutputs => "drift",
            Code::InconsistentDriver
            | Code::InconsistentImage
            | Code::InconsistentEnv
            | Code::InconsistentCommand => "consistency",
            Code::UncoveredResource
            | Code::ExceedsQuota
            | Code::UnprovidedResource
            | Code::NoGang
            | Code::UnselectedMonitor
            | Code::UnpullableImage
            | Code::NoNodeFits
            | Code::ExceedsPartition => "admission",
            Code::DriverTooOld
            | Code::InstalledDriverMismatch
            | Code::DriverOlderThanLocked
            | Code::ArchNotCovered
            | Code::TorchArchNotBuilt
            | Code::GpuNotLocked => "hardware",
            Code::Unpinned
            | Code::EolDriver
            | Code::EolOs
            | Code::UnsafeVersion
            | Code::OpenClosure
            | Code::UnusedAllow => "hygiene",
        }
    }
}

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    /// Fails the check.
    Error,
    /// Reported; fails the check only when warnings are denied.
    Warning,
}

/// One acknowledged finding: an entry of the spec's `[check].allow`. `check` leaves out the
/// findings it matches and says so, with the reason; an entry that matches nothing is itself
/// a warning ([`Code::UnusedAllow`]). Only warnings can be acknowledged: an error (a
/// tampered lock, drift) is never accepted by a file under review.
///
/// ```
/// let catalog = gpustack::Catalog::stock()?;
/// let spec = gpustack::Spec::parse("gpustack.toml", r#"
/// [stack]
/// name = "demo"
/// [hardware]
/// gpus = ["a100"]
/// driver = "535.104.05"
/// [components]
/// torch = "*"
/// [check]
/// allow = [{ code = "eol-driver", reason = "the nodes move to R580 in March" }]
/// "#, &catalog)?;
/// assert_eq!(spec.check[0].code, gpustack::check::Code::EolDriver);
/// assert_eq!(spec.check[0].line, 10);
/// # Ok::<(), gpustack::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allowance {
    /// The warning acknowledged.
    pub code: Code,
    /// Only findings about this component or package (its `name` in the lock); every
    /// finding with the code when `None`.
    pub name: Option<String>,
    /// Why, for the reviewer (shown by `check` beside the count).
    pub reason: String,
    /// The 1-based line of the entry in the spec.
    pub line: usize,
}

/// `[check]` as written.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CheckWire {
    #[serde(default)]
    pub(crate) allow: Vec<toml::Spanned<AllowWire>>,
}

/// One `[check].allow` entry as written.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AllowWire {
    code: toml::Spanned<String>,
    name: Option<toml::Spanned<String>>,
    reason: Option<toml::Spanned<String>>,
}

/// Validates the spec's `[check]` table: known warning codes, a reason each, no entry twice.
pub(crate) fn allowances(
    wire: toml::Spanned<CheckWire>,
    file: &str,
    text: &str,
    diags: &mut Vec<Diagnostic>,
) -> Vec<Allowance> {
    let warnings: Vec<&str> = Code::ALL
        .into_iter()
        .filter(|c| c.severity() == Severity::Warning && *c != Code::UnusedAllow)
        .map(Code::name)
        .collect();
    let mut out: Vec<Allowance> = Vec::new();
    for entry in wire.into_inner().allow {
        let start = entry.span().start;
        let line = Location::at_offset(file, text, start).line;
        let e = entry.into_inner();
        let name = e.code.get_ref();
        let code = match Code::from_name(name) {
            Some(c) if warnings.contains(&c.name()) => c,
            Some(c) => {
                diags.push(
                    Diagnostic::new(
                        Stage::Spec,
                        format!("`{}` cannot be allowed in the spec: it is {}", c.name(), if c == Code::UnusedAllow { "about the allowances themselves" } else { "an error" }),
                    )
                    .at_offset(file, text, e.code.span().start)
                    .hint(format!("only warnings can be acknowledged here ({}); fix the problem, or pass `--allow {}` to one `gpustack check` run", warnings.join(", "), c.name())),
                );
                continue;
            }
            None => {
                let mut d = Diagnostic::new(
                    Stage::Spec,
                    format!("unknown check code `{}`", name.escape_debug()),
                )
                .at_offset(file, text, e.code.span().start);
                if let Some(s) = crate::core::names::did_you_mean(name, warnings.iter().copied()) {
                    d = d.hint(format!("did you mean `{s}`?"));
                }
                diags.push(d.hint(format!(
                    "the warnings `check` reports are: {}",
                    warnings.join(", ")
                )));
                continue;
            }
        };
        let reason = match e.reason {
            Some(r) if !r.get_ref().trim().is_empty() => r.into_inner(),
            Some(r) => {
                diags.push(
                    Diagnostic::new(Stage::Spec, "empty `reason`")
                        .at_offset(file, text, r.span().start)
                        .hint("say why the warning is accepted, for the reviewer: `reason = \"the nodes move to R580 in March\"`"),
                );
                continue;
            }
            None => {
                diags.push(
                    Diagnostic::new(
                        Stage::Spec,
                        format!("`[check].allow` entry for `{}` has no `reason`", code.name()),
                    )
                    .at_offset(file, text, start)
                    .hint("say why the warning is accepted, for the reviewer: `reason = \"the nodes move to R580 in March\"`"),
                );
                continue;
            }
        };
        let name = e.name.map(toml::Spanned::into_inner);
        if let Some(first) = out.iter().find(|a| a.code == code && a.name == name) {
            diags.push(
                Diagnostic::new(Stage::Spec, format!("`{}` is allowed twice", code.name()))
                    .at_offset(file, text, start)
                    .hint(format!(
                        "keep one entry (the first is at line {})",
                        first.line
                    )),
            );
            continue;
        }
        out.push(Allowance {
            code,
            name,
            reason,
            line,
        });
    }
    out
}
