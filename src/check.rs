//! `gpustack check`: every problem between the spec, the catalog, the lock, the generated
//! files and the hardware, each with a typed [`Code`], reported together.
//!
//! # What is checked
//!
//! | check | needs | finds |
//! |---|---|---|
//! | integrity | the lock | [`Code::TamperedLock`]: a recorded digest does not match the lock's content ([`Lock::verify`]) |
//! | staleness | spec + catalog | [`Code::StaleSpec`]: the spec changed since the lock was written; [`Code::StaleCatalog`]: the catalog now resolves the same spec differently |
//! | drift | `--out` | [`Code::Drift`]: a generated file differs from what the lock renders now, is missing, or is extra; [`Code::OtherLock`]: a target was generated from another lock |
//! | consistency | `--out` | [`Code::InconsistentDriver`], [`Code::InconsistentImage`], [`Code::InconsistentEnv`], [`Code::InconsistentCommand`]: values read back from the generated files themselves disagree across targets |
//! | hardware | `--hardware` | [`Code::DriverTooOld`], [`Code::ArchNotCovered`], [`Code::TorchArchNotBuilt`], [`Code::GpuNotLocked`] |
//! | hygiene | the lock | warnings: [`Code::Unpinned`], [`Code::EolDriver`], [`Code::UnsafeVersion`] |
//! | acknowledgements | the spec's `[check].allow` ([`Allowance`]) | [`Code::UnusedAllow`]: an entry that matches no finding ([`Report::apply`]) |
//!
//! Consistency is read back from the files, not recomputed from the lock: it holds even for
//! an output tree assembled from several `gen` runs, and says which file disagrees.
//!
//! The checks are pure: the caller reads the files ([`crate::emit::read_tree`]) and passes
//! their contents in [`Inputs`]. Invalid input (a lock or spec that does not parse, an
//! unknown GPU in the hardware profile) is an [`Error`], not a finding.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::catalog::Catalog;
use crate::core::arch::{best_way, Cc, RunsVia, Target};
use crate::core::version::Version;
use crate::core::Component;
use crate::error::{Diagnostic, Error, Location, Stage};
use crate::lock::{spec_digest, Lock};
use crate::plan;
use crate::spec::Spec;

/// What kind of problem a finding is. The kebab-case names are the stable `code` of the
/// JSON output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
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
    /// A locked version has a known security problem.
    UnsafeVersion,
    /// An entry of the spec's `[check].allow` matched no finding: the acknowledgement is
    /// stale (the problem was fixed) and would hide the next one.
    UnusedAllow,
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
            Code::InconsistentDriver => "inconsistent-driver",
            Code::InconsistentImage => "inconsistent-image",
            Code::InconsistentEnv => "inconsistent-env",
            Code::InconsistentCommand => "inconsistent-command",
            Code::DriverTooOld => "driver-too-old",
            Code::DriverOlderThanLocked => "driver-older-than-locked",
            Code::ArchNotCovered => "arch-not-covered",
            Code::TorchArchNotBuilt => "torch-arch-not-built",
            Code::GpuNotLocked => "gpu-not-locked",
            Code::Unpinned => "unpinned",
            Code::EolDriver => "eol-driver",
            Code::UnsafeVersion => "unsafe-version",
            Code::UnusedAllow => "unused-allow",
        }
    }

    /// Every code, in report order.
    pub const ALL: [Code; 18] = [
        Code::TamperedLock,
        Code::StaleSpec,
        Code::StaleCatalog,
        Code::Drift,
        Code::OtherLock,
        Code::InconsistentDriver,
        Code::InconsistentImage,
        Code::InconsistentEnv,
        Code::InconsistentCommand,
        Code::DriverTooOld,
        Code::DriverOlderThanLocked,
        Code::ArchNotCovered,
        Code::TorchArchNotBuilt,
        Code::GpuNotLocked,
        Code::Unpinned,
        Code::EolDriver,
        Code::UnsafeVersion,
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
            | Code::UnsafeVersion
            | Code::UnusedAllow
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
    fn check(self) -> &'static str {
        match self {
            Code::TamperedLock => "integrity",
            Code::StaleSpec | Code::StaleCatalog => "staleness",
            Code::Drift | Code::OtherLock => "drift",
            Code::InconsistentDriver
            | Code::InconsistentImage
            | Code::InconsistentEnv
            | Code::InconsistentCommand => "consistency",
            Code::DriverTooOld
            | Code::DriverOlderThanLocked
            | Code::ArchNotCovered
            | Code::TorchArchNotBuilt
            | Code::GpuNotLocked => "hardware",
            Code::Unpinned | Code::EolDriver | Code::UnsafeVersion | Code::UnusedAllow => "hygiene",
        }
    }
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

/// Which findings a report keeps: `--pedantic` and `--allow CODE`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    /// Keep findings whose [`Code::pedantic`] is true.
    pub pedantic: bool,
    /// Drop findings with these codes.
    pub allow: Vec<Code>,
}

/// Findings a [`Policy`] left out of the report, counted per code.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Suppressed {
    /// What kind of finding.
    pub code: Code,
    /// How many.
    pub count: usize,
    /// `pedantic` (shown with `--pedantic`), `allowed` (`--allow CODE`) or `acknowledged`
    /// (the spec's `[check].allow`).
    pub why: &'static str,
    /// For `acknowledged`: where (`gpustack.toml:24`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// For `acknowledged`: the entry's reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
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

/// One problem.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What kind of problem.
    pub code: Code,
    /// Error or warning (from the code).
    pub severity: Severity,
    /// The file it is about, as the user named it (`out/k8s/trainjob.yaml`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// 1-based line in that file, where one applies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// One sentence.
    pub message: String,
    /// Supporting lines: a short diff, the value each file has.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub detail: Vec<String>,
    /// What to do about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The source of the fact behind it, in full (the text output shortens it to one URL
    /// unless verbose).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The component or package it is about (its `name` in the lock), which a
    /// `[check].allow` entry's `name` matches.
    #[serde(skip)]
    pub subject: Option<String>,
}

impl Finding {
    fn new(code: Code, message: impl Into<String>) -> Finding {
        Finding {
            code,
            severity: code.severity(),
            file: None,
            line: None,
            message: message.into(),
            detail: Vec::new(),
            hint: None,
            source: None,
            subject: None,
        }
    }
    fn about(mut self, subject: &str) -> Finding {
        self.subject = Some(subject.to_string());
        self
    }
    fn source(mut self, source: &str) -> Finding {
        self.source = Some(source.to_string());
        self
    }
    fn at(mut self, file: &str, line: Option<usize>) -> Finding {
        self.file = Some(file.to_string());
        self.line = line.filter(|&l| l > 0);
        self
    }
    fn detail(mut self, d: Vec<String>) -> Finding {
        self.detail = d;
        self
    }
    fn hint(mut self, h: impl Into<String>) -> Finding {
        self.hint = Some(h.into());
        self
    }
}

/// A check that did not run, and why (no spec, no `--out`, …).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// `staleness`, `drift`, `consistency`, `hardware`.
    pub check: &'static str,
    /// Why it did not run.
    pub reason: String,
}

/// The result of [`check`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The lock checked, as named.
    pub lock: String,
    /// Checks that ran.
    pub checked: Vec<&'static str>,
    /// Checks that did not run.
    pub skipped: Vec<Skipped>,
    /// Every finding: errors first, then by code, file and line.
    pub findings: Vec<Finding>,
    /// Findings left out by the [`Policy`] ([`Report::apply`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub suppressed: Vec<Suppressed>,
    /// The spec's `[check].allow` entries, applied by [`Report::apply`]; with the spec's
    /// name as shown.
    #[serde(skip)]
    pub allowances: Option<(String, Vec<Allowance>)>,
}

/// The host facts `--hardware` gives: the `[hardware]` table `gpustack probe` prints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostHardware {
    /// Catalog GPU ids with their capability.
    pub gpus: Vec<(String, Cc)>,
    /// The installed driver.
    pub driver: Option<Version>,
}

impl HostHardware {
    /// The hardware a [`crate::probe::Probe`] found.
    pub fn from_probe(probe: &crate::probe::Probe, catalog: &Catalog) -> HostHardware {
        HostHardware {
            gpus: probe
                .gpus
                .iter()
                .filter_map(|g| {
                    let cc = g.cc.or_else(|| catalog.gpu(&g.id).map(|c| c.cc))?;
                    Some((g.id.clone(), cc))
                })
                .collect(),
            driver: probe.driver.clone(),
        }
    }

    /// Parses a `[hardware]` table (`gpus = ["h100"]`, `driver = "550.54.15"`), mapping GPU
    /// names through the catalog.
    ///
    /// ```
    /// let catalog = gpustack::Catalog::stock()?;
    /// let hw = gpustack::check::HostHardware::parse(
    ///     "node.toml", "[hardware]\ngpus = [\"h100\"]\ndriver = \"550.54.15\"\n", &catalog)?;
    /// assert_eq!(hw.gpus[0].0, "h100");
    /// # Ok::<(), gpustack::Error>(())
    /// ```
    pub fn parse(file: &str, text: &str, catalog: &Catalog) -> Result<HostHardware, Error> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Wire {
            hardware: HwWire,
        }
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct HwWire {
            #[serde(default)]
            gpus: Vec<toml::Spanned<String>>,
            driver: Option<toml::Spanned<String>>,
            #[serde(default)]
            #[allow(dead_code)]
            archs: Vec<String>,
        }
        let w: Wire = toml::from_str(text).map_err(|e| {
            crate::error::toml_diagnostic(Stage::Spec, file, text, &e).hint(
                "`--hardware` takes the `[hardware]` table `gpustack probe` prints, or raw `nvidia-smi` output",
            )
        })?;
        let mut gpus = Vec::new();
        for g in &w.hardware.gpus {
            let Some(found) = catalog.gpu(g.get_ref()) else {
                let ids: Vec<&str> = catalog.gpus.iter().map(|g| g.id.as_str()).collect();
                let mut d = Diagnostic::new(Stage::Spec, format!("unknown GPU `{}`", g.get_ref()))
                    .at_offset(file, text, g.span().start);
                if let Some(s) = crate::core::names::did_you_mean(g.get_ref(), ids.iter().copied())
                {
                    d = d.hint(format!("did you mean `{s}`?"));
                }
                return Err(d.hint(format!("GPU ids are: {}", ids.join(", "))).into());
            };
            gpus.push((found.id.clone(), found.cc));
        }
        let driver = match &w.hardware.driver {
            None => None,
            Some(d) => Some(Version::parse(d.get_ref()).map_err(|e| {
                Diagnostic::new(
                    Stage::Spec,
                    format!("invalid driver version `{}`: {e}", d.get_ref()),
                )
                .at_offset(file, text, d.span().start)
                .hint("write the version `nvidia-smi` prints, like `550.54.15`")
            })?),
        };
        Ok(HostHardware { gpus, driver })
    }
}

/// What [`check`] looks at. Only `lock` is required; each other input enables checks.
pub struct Inputs<'a> {
    /// The lock, as named, and its text.
    pub lock: (&'a str, &'a str),
    /// The spec, as named, and its text: enables the staleness checks.
    pub spec: Option<(&'a str, &'a str)>,
    /// The catalog the spec resolves against (stock, or with overlays).
    pub catalog: &'a Catalog,
    /// The output directory as named (`out`) and its files by relative path
    /// (`k8s/trainjob.yaml`): enables drift and consistency.
    pub out: Option<(&'a str, &'a BTreeMap<String, Vec<u8>>)>,
    /// What else is in the output directory: entries that are not regular files (never
    /// opened) and an interrupted `gen`'s journal, as (relative path, what it is)
    /// ([`crate::emit::read_out_tree`]); each is a drift finding.
    pub unusual: &'a [(String, String)],
    /// The node's hardware: enables the hardware checks.
    pub hardware: Option<&'a HostHardware>,
    /// The `pylock.*.toml` files beside the lock, by file name, as read (a closed lock's
    /// Python closure; empty otherwise). Each must match the digest the lock records.
    pub pylocks: &'a BTreeMap<String, String>,
}

/// Runs every check the inputs allow.
///
/// ```
/// use gpustack::check::{check, Inputs};
/// let catalog = gpustack::Catalog::stock()?;
/// let spec = "[stack]\nname = \"demo\"\n[hardware]\ngpus = [\"a100\"]\n[components]\ntorch = \"*\"\n";
/// let lock = gpustack::lock_spec(&catalog, "gpustack.toml", spec)?.to_toml();
/// let report = check(&Inputs {
///     lock: ("gpustack.lock", &lock),
///     spec: Some(("gpustack.toml", spec)),
///     catalog: &catalog,
///     out: None,
///     hardware: None,
///     unusual: &[],
///     pylocks: &Default::default(),
/// })?;
/// assert_eq!(report.errors(), 0);
/// # Ok::<(), gpustack::Error>(())
/// ```
pub fn check(inputs: &Inputs<'_>) -> Result<Report, Error> {
    let (lock_file, lock_text) = inputs.lock;
    let mut lock = Lock::parse(lock_file, lock_text)?;
    let mut report = Report {
        lock: lock_file.to_string(),
        checked: vec!["integrity", "hygiene"],
        skipped: Vec::new(),
        findings: Vec::new(),
        suppressed: Vec::new(),
        allowances: None,
    };
    let f = &mut report.findings;
    integrity(&lock, lock_file, lock_text, f);
    let closure_read = pylocks(&mut lock, lock_file, lock_text, inputs.pylocks, f);
    hygiene(&lock, lock_file, lock_text, f);
    match inputs.spec {
        Some((spec_file, spec_text)) => {
            report.checked.push("staleness");
            let allowed = staleness(&lock, inputs, spec_file, spec_text, f)?;
            report.allowances = Some((spec_file.to_string(), allowed));
        }
        None => report.skipped.push(Skipped {
            check: "staleness",
            reason: "no spec".into(),
        }),
    }
    match inputs.out {
        Some(_) if !closure_read => {
            for check in ["drift", "consistency"] {
                report.skipped.push(Skipped {
                    check,
                    reason: "the lock's pylock files do not match it".into(),
                });
            }
        }
        Some((dir, files)) => {
            report.checked.push("drift");
            report.checked.push("consistency");
            drift(&lock, dir, files, f);
            for (p, what) in inputs.unusual {
                let shown = join(dir, p);
                f.push(
                    Finding::new(Code::Drift, format!("{shown} is {what}"))
                        .at(&shown, None)
                        .hint("gpustack writes only regular files and never reads anything else; remove it, or run `gpustack gen` to roll back an interrupted run"),
                );
            }
            consistency(&lock, lock_file, dir, files, f);
        }
        None => {
            for check in ["drift", "consistency"] {
                report.skipped.push(Skipped {
                    check,
                    reason: "no output directory".into(),
                });
            }
        }
    }
    match inputs.hardware {
        Some(hw) => {
            report.checked.push("hardware");
            hardware(&lock, lock_file, lock_text, hw, inputs.catalog, f);
        }
        None => report.skipped.push(Skipped {
            check: "hardware",
            reason: "no hardware profile".into(),
        }),
    }
    report.findings.sort_by(|a, b| {
        (a.severity, a.code, &a.file, a.line).cmp(&(b.severity, b.code, &b.file, b.line))
    });
    report.findings.dedup();
    let cmds = Commands {
        spec: inputs.spec.map(|(s, _)| s),
        lock: lock_file,
        out: inputs.out.map(|(d, _)| d),
    };
    for x in &mut report.findings {
        if let Some(h) = &mut x.hint {
            *h = cmds.rewrite(h);
        }
    }
    Ok(report)
}

/// When no file under an output directory names `lock` in its header and some name another
/// lock: that other lock's short hash. `check` compares a default `out/` only when it was
/// generated from the lock checked.
pub fn foreign_out(lock: &Lock, files: &BTreeMap<String, Vec<u8>>) -> Option<String> {
    let ours = plan::Common::new(lock).ok()?.lock_hash;
    let mut other = None;
    for b in files.values() {
        match header_lock_hash(&String::from_utf8_lossy(b)) {
            Some(h) if h == ours => return None,
            Some(h) => other = other.or(Some(h)),
            None => {}
        }
    }
    other.map(|h| short_hash(&h))
}

/// The paths the user gave, repeated in every hint's command line: a hint for
/// `check --lock stacks/a.lock` says `gpustack gen docker --lock stacks/a.lock`, not a
/// `gpustack gen docker` that would read another lock.
struct Commands<'a> {
    spec: Option<&'a str>,
    lock: &'a str,
    out: Option<&'a str>,
}

impl Commands<'_> {
    fn lock_args(&self) -> String {
        let mut a = String::new();
        if let Some(s) = self.spec.filter(|s| *s != "gpustack.toml") {
            a.push_str(&format!(" --spec {}", crate::render::sh_quote(s)));
        }
        if self.lock != "gpustack.lock" {
            a.push_str(&format!(" --out {}", crate::render::sh_quote(self.lock)));
        }
        a
    }

    fn gen_args(&self) -> String {
        let mut a = String::new();
        if self.lock != "gpustack.lock" {
            a.push_str(&format!(" --lock {}", crate::render::sh_quote(self.lock)));
        }
        if let Some(d) = self.out.filter(|d| d.trim_end_matches('/') != "out") {
            a.push_str(&format!(" --out {}", crate::render::sh_quote(d)));
        }
        a
    }

    /// Every `` `gpustack lock` `` and `` `gpustack gen …` `` in a hint, with the paths.
    fn rewrite(&self, hint: &str) -> String {
        let mut out = String::new();
        let mut rest = hint;
        while let Some(i) = rest.find("`gpustack ") {
            out.push_str(&rest[..i]);
            let cmd_start = &rest[i + 1..];
            let Some(end) = cmd_start.find('`') else {
                break;
            };
            let cmd = &cmd_start[..end];
            let args = if cmd == "gpustack lock" {
                self.lock_args()
            } else if cmd.starts_with("gpustack gen ") {
                self.gen_args()
            } else {
                String::new()
            };
            out.push('`');
            out.push_str(cmd);
            out.push_str(&args);
            out.push('`');
            rest = &cmd_start[end + 1..];
        }
        out.push_str(rest);
        out
    }
}

fn integrity(lock: &Lock, file: &str, text: &str, f: &mut Vec<Finding>) {
    let mut lines = Vec::new();
    for m in lock.verify() {
        let line = m
            .offset(text)
            .map(|at| Location::at_offset("", text, at).line);
        // One finding per edited line: a broken seal and the digest it also broke (an
        // edited `spec-digest`) point at the same line.
        if line.is_some() && lines.contains(&line) {
            continue;
        }
        lines.push(line);
        f.push(
            Finding::new(
                Code::TamperedLock,
                format!(
                    "the lock's {} does not match its content: it was edited by hand",
                    m.what
                ),
            )
            .at(file, line)
            .detail(vec![
                format!("recorded: {}", m.recorded),
                format!("computed: {}", m.computed),
            ])
            .hint(
                "edit gpustack.toml (or a catalog overlay), not the lock; then run `gpustack lock`",
            ),
        );
    }
}

/// Loads the closure's pylock files into the lock; each one missing or not matching its
/// recorded digest is a `tampered-lock` finding at that digest's line. Whether all loaded.
fn pylocks(
    lock: &mut Lock,
    file: &str,
    text: &str,
    files: &BTreeMap<String, String>,
    f: &mut Vec<Finding>,
) -> bool {
    let Some(py) = lock.python.as_mut() else {
        return true;
    };
    let mut all = true;
    for p in &mut py.files {
        let line = line_of(text, &p.digest);
        let shown = join(file.rsplit_once('/').map_or(".", |(d, _)| d), &p.file);
        match files.get(&p.file) {
            Some(t) if crate::resolve::python::digest(t) == p.digest => {
                p.contents = Some(t.clone())
            }
            Some(t) => {
                all = false;
                f.push(
                    Finding::new(
                        Code::TamperedLock,
                        format!("{shown} does not match the digest the lock records: it was edited by hand"),
                    )
                    .at(file, line)
                    .detail(vec![
                        format!("recorded: {}", p.digest),
                        format!("computed: {}", crate::resolve::python::digest(t)),
                    ])
                    .hint("the pylock files are written by `gpustack lock`; run it again instead of editing them"),
                );
            }
            None => {
                all = false;
                f.push(
                    Finding::new(Code::TamperedLock, format!("{shown}, which the lock names, is missing"))
                        .at(file, line)
                        .hint("commit the pylock files with gpustack.lock; `gpustack lock` writes them beside it"),
                );
            }
        }
    }
    all
}

fn staleness(
    lock: &Lock,
    inputs: &Inputs<'_>,
    spec_file: &str,
    spec_text: &str,
    f: &mut Vec<Finding>,
) -> Result<Vec<Allowance>, Error> {
    let (lock_file, lock_text) = inputs.lock;
    let spec = Spec::parse(spec_file, spec_text, inputs.catalog)?;
    let allowed = spec.check.clone();
    let spec_changed = spec_digest(&spec) != lock.spec_digest;
    // What `gpustack lock --offline` would write: the lock's own registry digests and
    // verified pins stand (check never uses the network).
    // The lock's picks that still fit are kept, as `gpustack lock` keeps them.
    let keep = lock
        .components
        .iter()
        .map(|c| (c.name, c.version.clone()))
        .collect();
    let fresh = crate::solve::solve_locked(inputs.catalog, &spec, &keep).map(|r| {
        let mut l = Lock::from_resolution(inputs.catalog, &r).expect("a solved resolution locks");
        let _ = crate::resolve::resolve(&mut l, &crate::resolve::http::Offline, Some(lock));
        // The Python closure as an offline re-lock keeps it: reused when its inputs did
        // not change (a closure that would need resolving again leaves `l` different).
        let _ = crate::lock_python(
            inputs.catalog,
            &mut l,
            true,
            Some(lock),
            &crate::PythonUpgrade::default(),
        );
        l
    });
    let fresh = match fresh {
        Ok(l) => l,
        Err(Error::NoSolution(e)) => {
            f.push(
                Finding::new(
                    if spec_changed {
                        Code::StaleSpec
                    } else {
                        Code::StaleCatalog
                    },
                    "the spec no longer resolves: `gpustack lock` would fail",
                )
                .at(spec_file, None)
                .detail(e.to_string().lines().map(str::to_string).collect())
                .hint("see the explanation; `gpustack lock` prints it too"),
            );
            return Ok(allowed);
        }
        Err(e) => return Err(e),
    };
    let fresh_text = fresh.to_toml();
    if fresh_text == lock_text {
        return Ok(allowed);
    }
    let mut detail = component_changes(lock, &fresh);
    if detail.is_empty() {
        detail = short_diff(lock_text, &fresh_text).1;
    }
    let finding = if spec_changed {
        Finding::new(
            Code::StaleSpec,
            format!("the lock is stale: {spec_file} changed since it was written"),
        )
        .at(lock_file, line_of(lock_text, "[request]"))
    } else {
        let (line, _) = short_diff(lock_text, &fresh_text);
        Finding::new(
            Code::StaleCatalog,
            if fresh.catalog_digest == lock.catalog_digest {
                "the lock is stale: `gpustack lock` would write it differently".to_string()
            } else {
                "the lock is stale: the catalog changed since it was written".to_string()
            },
        )
        .at(lock_file, line)
    };
    f.push(
        finding.detail(detail).hint(
            "run `gpustack lock` and commit the result (`gpustack diff` shows what it costs)",
        ),
    );
    Ok(allowed)
}

/// `torch 2.5.1+cu124 → 2.6.0+cu126`, one line per component that changed.
fn component_changes(old: &Lock, new: &Lock) -> Vec<String> {
    let mut out = Vec::new();
    for c in Component::ALL {
        match (old.component(c), new.component(c)) {
            (Some(a), Some(b)) if a.version.as_str() != b.version.as_str() => {
                out.push(format!("{} {} → {}", c.name(), a.version, b.version));
            }
            (Some(a), None) => out.push(format!("{} {} → (removed)", c.name(), a.version)),
            (None, Some(b)) => out.push(format!("{} (new) → {}", c.name(), b.version)),
            _ => {}
        }
    }
    out
}

fn drift(lock: &Lock, dir: &str, files: &BTreeMap<String, Vec<u8>>, f: &mut Vec<Finding>) {
    // The shared values (and the lock hash every output names) are derived once.
    let common = plan::Common::new(lock);
    let lock_hash = common.as_ref().ok().map(|c| c.lock_hash.clone());
    for t in plan::Target::ALL {
        let prefix = format!("{}/", t.name());
        let present: Vec<(&String, &Vec<u8>)> = files
            .iter()
            .filter(|(p, _)| p.starts_with(&prefix))
            .collect();
        if present.is_empty() {
            continue;
        }
        let shown_dir = join(dir, t.name());
        let rendered = match &common {
            Ok(c) => plan::generate_with(lock, c, t).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        let rendered = match rendered {
            Ok(r) => r,
            Err(e) => {
                f.push(
                    Finding::new(
                        Code::Drift,
                        format!("{shown_dir}/ cannot be compared: the lock does not render it"),
                    )
                    .at(&shown_dir, None)
                    .detail(e.lines().map(str::to_string).collect()),
                );
                continue;
            }
        };
        if let Some(h) = &lock_hash {
            if let Some((path, other)) = present.iter().find_map(|(p, b)| {
                let text = String::from_utf8_lossy(b);
                header_lock_hash(&text).filter(|x| x != h).map(|x| (*p, x))
            }) {
                f.push(
                    Finding::new(
                        Code::OtherLock,
                        format!(
                            "{shown_dir}/ was generated from another lock ({}), not this one ({})",
                            short_hash(&other),
                            short_hash(h)
                        ),
                    )
                    .at(&join(dir, path), None)
                    .hint(format!("run `gpustack gen {}`", t.name())),
                );
            }
        }
        let mut expected = BTreeSet::new();
        for r in &rendered {
            let rel = format!("{prefix}{}", r.path);
            let shown = join(dir, &rel);
            expected.insert(rel.clone());
            match files.get(&rel) {
                None => f.push(
                    Finding::new(Code::Drift, format!("{shown} is missing"))
                        .at(&shown, None)
                        .hint(format!("run `gpustack gen {}`", t.name())),
                ),
                Some(b) if b.as_slice() == r.contents.as_bytes() => {}
                Some(b) => {
                    let (line, detail) = short_diff(&String::from_utf8_lossy(b), &r.contents);
                    f.push(
                        Finding::new(
                            Code::Drift,
                            format!("{shown} differs from what the lock renders"),
                        )
                        .at(&shown, line)
                        .detail(detail)
                        .hint(format!(
                            "generated files are not edited by hand: change gpustack.toml, then run `gpustack lock` and `gpustack gen {}`",
                            t.name()
                        )),
                    );
                }
            }
        }
        for (p, _) in &present {
            if !expected.contains(*p) {
                let shown = join(dir, p);
                f.push(
                    Finding::new(Code::Drift, format!("{shown} is not generated by gpustack"))
                        .at(&shown, None)
                        .hint(format!(
                            "`gpustack gen {}` replaces {shown_dir}/ as a whole; keep other files elsewhere",
                            t.name()
                        )),
                );
            }
        }
    }
}

/// Variables read back from one file: name → (line, value).
type EnvMap = BTreeMap<String, (usize, String)>;

/// A value read back from a generated file, with where it was found.
struct Seen {
    file: String,
    line: usize,
    value: String,
}

fn consistency(
    lock: &Lock,
    lock_file: &str,
    dir: &str,
    files: &BTreeMap<String, Vec<u8>>,
    f: &mut Vec<Finding>,
) {
    let text = |p: &str| {
        files
            .get(p)
            .map(|b| String::from_utf8_lossy(b).into_owned())
    };
    // The driver: lock = Packer scripts = Packer manifest versions = GPU Operator values.
    let mut drivers = Vec::new();
    if let Some(t) = text("packer/scripts/base.sh") {
        drivers.extend(find_values(&t, "packer/scripts/base.sh", |l| {
            l.strip_prefix("readonly DRIVER_VERSION=").map(unquote_sh)
        }));
    }
    if let Some(t) = text("packer/build.pkr.hcl") {
        drivers.extend(find_values(&t, "packer/build.pkr.hcl", |l| {
            let v = l
                .trim()
                .strip_prefix("versions")?
                .trim_start()
                .strip_prefix('=')?;
            let v = v.trim().trim_matches('"');
            v.split(',')
                .find_map(|kv| kv.strip_prefix("driver="))
                .map(str::to_string)
        }));
    }
    if let Some(t) = text("k8s/gpu-operator-values.yaml") {
        let mut in_driver = false;
        for (i, l) in t.lines().enumerate() {
            if !l.starts_with(' ') && !l.starts_with('#') && !l.is_empty() {
                in_driver = l.trim_end() == "driver:";
                continue;
            }
            if let Some(v) = l.strip_prefix("  version:").filter(|_| in_driver) {
                let mut value = v.trim().trim_matches('"').to_string();
                // The driver container by the digest the lock read: that is the locked
                // driver's image.
                if value.starts_with("sha256:")
                    && lock
                        .package("gpu-operator-driver")
                        .and_then(|p| p.get("image-digest"))
                        == Some(value.as_str())
                {
                    value = lock.hardware.driver.to_string();
                }
                drivers.push(Seen {
                    file: "k8s/gpu-operator-values.yaml".into(),
                    line: i + 1,
                    value,
                });
            }
        }
    }
    let want = lock.hardware.driver.to_string();
    let wrong: Vec<&Seen> = drivers.iter().filter(|s| s.value != want).collect();
    if let Some(first) = wrong.first() {
        let mut detail = vec![format!("{lock_file}: {want}")];
        detail.extend(
            drivers
                .iter()
                .map(|s| format!("{}:{}: {}", join(dir, &s.file), s.line, s.value)),
        );
        f.push(
            Finding::new(
                Code::InconsistentDriver,
                format!(
                    "the driver differs across targets: {} says {}, the lock {want}",
                    join(dir, &first.file),
                    first.value
                ),
            )
            .at(&join(dir, &first.file), Some(first.line))
            .detail(detail)
            .hint("regenerate every target from the one lock: `gpustack gen all`"),
        );
    }

    // Images: every reference to the stack's images = the bake file's tag for that layer.
    if let Some(bake) = text("docker/docker-bake.hcl") {
        let tags = bake_tags(&bake);
        let repos: BTreeSet<&str> = tags
            .values()
            .filter_map(|t| t.rsplit_once(':').map(|x| x.0))
            .collect();
        let mut refs = Vec::new();
        for (p, b) in files {
            let t = String::from_utf8_lossy(b);
            if p.starts_with("k8s/") {
                refs.extend(find_values(&t, p, |l| {
                    l.trim()
                        .strip_prefix("image:")
                        .map(|v| v.trim().trim_matches('"').to_string())
                }));
            } else if p.starts_with("slurm/") && p.ends_with(".sbatch") {
                refs.extend(find_values(&t, p, |l| {
                    l.strip_prefix("image=")
                        .map(|v| unquote_sh(v).replacen('#', "/", 1))
                }));
            } else if p.starts_with("apptainer/") {
                refs.extend(find_values(&t, p, |l| {
                    l.strip_prefix("From:").map(|v| v.trim().to_string())
                }));
            }
        }
        for r in refs {
            let Some((repo, tag)) = r.value.rsplit_once(':') else {
                continue;
            };
            if !repos.contains(repo) {
                continue;
            }
            let layer = tag.split_once('-').map_or(tag, |x| x.0);
            // The bake target with this repository and layer: the layer's own target, or
            // (the code image, `<stack>-code:training-…`) the one whose tag has both.
            let built = tags
                .iter()
                .find(|(_, t)| {
                    t.rsplit_once(':').is_some_and(|(rp, tg)| {
                        rp == repo && tg.split_once('-').map_or(tg, |x| x.0) == layer
                    })
                })
                .map(|(_, t)| t)
                .or_else(|| tags.get(layer));
            match built {
                Some(t) if *t == r.value => {}
                Some(t) => f.push(
                    Finding::new(
                        Code::InconsistentImage,
                        format!(
                            "{} uses image {}, but the bake file builds {t}",
                            join(dir, &r.file),
                            r.value
                        ),
                    )
                    .at(&join(dir, &r.file), Some(r.line))
                    .detail(vec![format!(
                        "{}: the {layer} layer's target tags {t}",
                        join(dir, "docker/docker-bake.hcl")
                    )])
                    .hint("regenerate every target from the one lock: `gpustack gen all`"),
                ),
                None => f.push(
                    Finding::new(
                        Code::InconsistentImage,
                        format!(
                            "{} uses image {}, which the bake file does not build",
                            join(dir, &r.file),
                            r.value
                        ),
                    )
                    .at(&join(dir, &r.file), Some(r.line))
                    .hint("regenerate every target from the one lock: `gpustack gen all`"),
                ),
            }
        }
    }

    // What torchrun runs: the pods' args after the rendezvous options = train.sbatch's
    // `entry` array (both render the workload plan's entry). The TrainJob carries them
    // (Kubeflow Trainer v2), or the PyTorchJob (`training_api = "pytorchjob"`).
    let job = ["k8s/trainjob.yaml", "k8s/pytorchjob.yaml"]
        .into_iter()
        .find_map(|f| text(f).map(|t| (f, t)));
    if let (Some((job, k)), Some(sl)) = (job, text("slurm/train.sbatch")) {
        let (k_line, k_entry) = k8s_entry(&k);
        let (s_line, s_entry) = slurm_entry(&sl);
        if k_entry != s_entry {
            f.push(
                Finding::new(
                    Code::InconsistentCommand,
                    format!(
                        "{} and {} start different training commands",
                        join(dir, job),
                        join(dir, "slurm/train.sbatch")
                    ),
                )
                .at(&join(dir, "slurm/train.sbatch"), Some(s_line))
                .detail(vec![
                    format!(
                        "{}:{k_line}: torchrun … {}",
                        join(dir, job),
                        k_entry.join(" ")
                    ),
                    format!(
                        "{}:{s_line}: torchrun … {}",
                        join(dir, "slurm/train.sbatch"),
                        s_entry.join(" ")
                    ),
                ])
                .hint("regenerate every target from the one lock: `gpustack gen all`"),
            );
        }
    }

    // The NCCL/fabric environment: Dockerfile ENV = ConfigMap data = nccl.env.
    let mut envs: Vec<(String, EnvMap)> = Vec::new();
    if let Some(t) = text("docker/Dockerfile") {
        envs.push(("docker/Dockerfile".into(), dockerfile_env(&t)));
    }
    // Every namespace's ConfigMap (`nccl-env.yaml`, `nccl-env-training.yaml`, …), in name
    // order: each carries the one environment.
    for (path, bytes) in files {
        let Some(name) = path.strip_prefix("k8s/") else {
            continue;
        };
        if name.starts_with("nccl-env") && name.ends_with(".yaml") && !name.contains('/') {
            envs.push((path.clone(), configmap_env(&String::from_utf8_lossy(bytes))));
        }
    }
    if let Some(t) = text("slurm/env/nccl.env") {
        envs.push(("slurm/env/nccl.env".into(), shell_env(&t)));
    }
    let mut names: BTreeSet<String> = lock
        .facts
        .iter()
        .filter(|x| x.kind == "env")
        .map(|x| x.key.clone())
        .collect();
    for (file, m) in &envs {
        if file != "docker/Dockerfile" {
            names.extend(m.keys().cloned());
        }
    }
    if envs.len() >= 2 {
        for name in &names {
            let values: Vec<(&str, Option<&(usize, String)>)> = envs
                .iter()
                .map(|(file, m)| (file.as_str(), m.get(name)))
                .collect();
            let first = values[0].1.map(|x| &x.1);
            if values.iter().all(|(_, v)| v.map(|x| &x.1) == first) {
                continue;
            }
            let (file, at) = values
                .iter()
                .skip(1)
                .find(|(_, v)| v.map(|x| &x.1) != first)
                .map_or((values[0].0, values[0].1), |(file, v)| (file, *v));
            let detail = values
                .iter()
                .map(|(file, v)| match v {
                    Some((line, value)) => format!("{}:{line}: {name}={value}", join(dir, file)),
                    None => format!("{}: {name} not set", join(dir, file)),
                })
                .collect();
            f.push(
                Finding::new(
                    Code::InconsistentEnv,
                    format!("`{name}` differs between the images, Kubernetes and Slurm"),
                )
                .at(&join(dir, file), at.map(|x| x.0))
                .detail(detail)
                .hint("regenerate every target from the one lock: `gpustack gen all`"),
            );
        }
    }
}

fn hardware(
    lock: &Lock,
    lock_file: &str,
    lock_text: &str,
    hw: &HostHardware,
    catalog: &Catalog,
    f: &mut Vec<Finding>,
) {
    let arch_list: &[Target] = &lock.hardware.arch_list;
    let listed: Vec<String> = arch_list.iter().map(ToString::to_string).collect();
    for (id, cc) in &hw.gpus {
        match best_way(arch_list, *cc) {
            None => f.push(
                Finding::new(
                    Code::ArchNotCovered,
                    format!(
                        "the node's {id} (compute capability {cc}) is not covered by the locked arch list [{}]: kernels fail with \"no kernel image is available\"",
                        listed.join(", ")
                    ),
                )
                .at(lock_file, line_of(lock_text, "arch-list"))
                .hint(format!("add \"{id}\" to `[hardware].gpus` in gpustack.toml and run `gpustack lock`")),
            ),
            Some(way) if !lock.hardware.gpus.iter().any(|g| &g.id == id) => f.push(
                Finding::new(
                    Code::GpuNotLocked,
                    format!(
                        "the node's {id} is not a GPU the stack was locked for; the arch list covers it{}",
                        if way == RunsVia::PtxJit { " through PTX JIT only (slow first start)" } else { "" }
                    ),
                )
                .at(lock_file, line_of(lock_text, "[hardware]"))
                .about(id)
                .hint(format!("add \"{id}\" to `[hardware].gpus` so the lock states it")),
            ),
            Some(_) => {}
        }
    }
    // A source-built torch has exactly the kernels of its own arch list: no wheel's wider
    // list or PTX to fall back to.
    if let Some(t) = lock
        .component(crate::core::Component::Torch)
        .filter(|t| t.get("build") == Some("source"))
    {
        let mut built: Vec<Target> = Vec::new();
        for a in t.list("arch-list") {
            built.extend(crate::core::arch::parse_torch_entry(a).unwrap_or_default());
        }
        for (id, cc) in &hw.gpus {
            if best_way(&built, *cc).is_none() {
                f.push(
                    Finding::new(
                        Code::TorchArchNotBuilt,
                        format!(
                            "the node's {id} (compute capability {cc}) is not in the arch list torch {} was built for from source ({}): it has no kernels for it and no PTX to fall back to",
                            t.version,
                            t.list("arch-list").join(";")
                        ),
                    )
                    .at(lock_file, line_of(lock_text, "build = \"source\""))
                    .hint(format!("add \"{}\" to `archs` of `torch` in gpustack.toml (or leave `archs` out to build for every GPU in [hardware]) and run `gpustack lock`", Target { cc: *cc, suffix: crate::core::arch::Suffix::None, ptx: false }.torch_form())),
                );
            }
        }
    }
    let Some(have) = &hw.driver else { return };
    let locked = &lock.hardware.driver;
    // The authority: does the locked stack still resolve on this node? Re-solve the lock's
    // own request with every component pinned and the node's driver as a host fact.
    let mut spec = lock.request.clone();
    spec.driver = Some(have.clone());
    spec.components = lock
        .components
        .iter()
        .filter(|c| c.name != Component::Driver)
        .filter_map(|c| {
            Some((
                c.name,
                crate::core::version::VersionReq::parse(&format!("=={}", c.version)).ok()?,
            ))
        })
        .collect();
    if !hw.gpus.is_empty() {
        spec.gpus = lock.hardware.gpus.iter().map(|g| g.id.clone()).collect();
    }
    match crate::solve::solve(catalog, &spec) {
        Ok(_) if have.cmp(locked) != std::cmp::Ordering::Less || lock.hardware.driver_installed => {}
        Ok(_) => f.push(
            Finding::new(
                Code::DriverOlderThanLocked,
                format!("the node's driver {have} is older than the locked driver {locked}, which the VM image and GPU Operator install"),
            )
            .at(lock_file, line_of(lock_text, "name = \"driver\""))
            .about("driver")
            .hint("the locked stack runs on this driver, so this is a warning: the node was not built from the generated image; rebuild it from `gpustack gen packer`, or lock for this driver with `[hardware].driver`"),
        ),
        Err(Error::NoSolution(e)) => f.push(
            Finding::new(
                Code::DriverTooOld,
                format!("the node's driver {have} cannot run the locked stack (locked for driver {locked})"),
            )
            .at(lock_file, line_of(lock_text, "name = \"driver\""))
            .detail(e.to_string().lines().map(str::to_string).collect())
            .hint(format!("upgrade the node's driver to {locked}, or set `[hardware].driver = \"{have}\"` and run `gpustack lock`")),
        ),
        Err(_) => {}
    }
}

/// Known security problems by package: versions below `fixed` are affected.
struct Advisory {
    package: &'static str,
    fixed: &'static str,
    what: &'static str,
    source: &'static str,
}

/// Sourced advisories `check` warns about. The catalog's own entries start at the fixed
/// versions; these catch site overlays and old locks.
const ADVISORIES: &[Advisory] = &[Advisory {
    package: "nvidia-container-toolkit",
    fixed: "1.17.8",
    what: "CVE-2025-23266 (NVIDIAScape, container escape, CVSS 9.0) and CVE-2025-23267",
    source: "https://nvd.nist.gov/vuln/detail/CVE-2025-23266 ; https://nvd.nist.gov/vuln/detail/CVE-2025-23267 ; catalog/packages.toml (nvidia-container-toolkit 1.17.8: minimum safe version)",
}];

fn hygiene(lock: &Lock, file: &str, text: &str, f: &mut Vec<Finding>) {
    if let Some(d) = lock.component(Component::Driver) {
        if d.get("branch-status") == Some("eol") {
            f.push(
                Finding::new(
                    Code::EolDriver,
                    format!(
                        "driver {} is on an end-of-life branch ({}{}): no more security fixes",
                        d.version,
                        d.get("branch").unwrap_or("?"),
                        d.get("eol")
                            .map(|e| format!(", end of life {e}"))
                            .unwrap_or_default()
                    ),
                )
                .at(file, line_of(text, "name = \"driver\""))
                .about("driver")
                .hint(if lock.hardware.driver_installed {
                    "the nodes run this driver (`[hardware].driver`): upgrade them to a supported production or LTS branch (`gpustack catalog show driver`) and update `[hardware].driver`; to keep it, acknowledge it with a reason in the spec's `[check].allow`"
                } else {
                    "move to a supported production or LTS branch (`gpustack catalog show driver`)"
                }),
            );
        }
    }
    for c in &lock.components {
        let artifact = c.get("wheel").or_else(|| c.get("sdist"));
        if let (Some(a), None) = (artifact, c.get("sha256")) {
            f.push(
                Finding::new(
                    Code::Unpinned,
                    format!("{} {}: `{a}` has no sha256", c.name.name(), c.version),
                )
                .at(
                    file,
                    line_of(text, &format!("name = \"{}\"", c.name.name())),
                )
                .about(c.name.name())
                .hint("add the file's sha256 to the catalog entry (PyPI shows it) and re-lock"),
            );
        }
    }
    for p in &lock.packages {
        let downloads = ["url", "tag", "image", "runtime-tag", "devel-tag"]
            .iter()
            .any(|k| p.get(k).is_some());
        let pinned = p.get("sha256").is_some()
            || p.get("image-digest").is_some()
            || p.get("digest").is_some();
        if downloads && !pinned {
            f.push(
                Finding::new(
                    Code::Unpinned,
                    format!(
                        "{} {} is pinned by name only: no sha256 or image digest",
                        p.name, p.version
                    ),
                )
                .at(file, line_of(text, &format!("name = \"{}\"", p.name)))
                .about(&p.name)
                .hint("add a published digest to the catalog entry and re-lock"),
            );
        }
        if p.get("status") == Some("unsupported") {
            f.push(
                Finding::new(
                    Code::UnsafeVersion,
                    format!(
                        "{} {}: NVIDIA lists these image tags as unsupported (no security updates; they may be deleted)",
                        p.get("repository").unwrap_or(&p.name),
                        p.version
                    ),
                )
                .at(file, line_of(text, &format!("name = \"{}\"", p.name)))
                .about(&p.name)
                .source(&p.source)
                .hint("move to a CUDA release whose images NVIDIA still supports (`gpustack catalog show image`)"),
            );
        }
        for a in ADVISORIES.iter().filter(|a| a.package == p.name) {
            if let (Ok(fixed), Ok(have)) = (Version::parse(a.fixed), Version::parse(&p.version)) {
                if have < fixed {
                    f.push(
                        Finding::new(
                            Code::UnsafeVersion,
                            format!(
                                "{} {} is affected by {}; fixed in {}",
                                p.name, p.version, a.what, a.fixed
                            ),
                        )
                        .at(file, line_of(text, &format!("name = \"{}\"", p.name)))
                        .about(&p.name)
                        .source(a.source)
                        .hint(format!("lock {} >= {}", p.name, a.fixed)),
                    );
                }
            }
        }
    }
}

impl Report {
    /// Leaves out the findings `policy` does not want (pedantic ones unless asked, allowed
    /// codes), counting them in [`Report::suppressed`].
    ///
    /// The spec's `[check].allow` entries ([`Report::allowances`]) come first: a finding
    /// they match is `acknowledged`, and an entry that matched nothing although its check
    /// ran is reported as [`Code::UnusedAllow`] at its line in the spec.
    pub fn apply(&mut self, policy: &Policy) {
        let (spec_file, allowances) = self.allowances.clone().unwrap_or_default();
        let mut used = vec![false; allowances.len()];
        // What each code's findings are about, before any is left out (for an entry whose
        // `name` matches none of them).
        let mut subjects: BTreeMap<Code, BTreeSet<String>> = BTreeMap::new();
        for x in &self.findings {
            if let Some(s) = &x.subject {
                subjects.entry(x.code).or_default().insert(s.clone());
            }
        }
        // (code, why, index of the allowance) → count
        let mut counts: BTreeMap<(Code, &'static str, usize), usize> = BTreeMap::new();
        self.findings.retain(|x| {
            let acknowledged = allowances.iter().position(|a| {
                a.code == x.code
                    && a.name
                        .as_ref()
                        .is_none_or(|n| Some(n) == x.subject.as_ref())
            });
            let (why, i) = if let Some(i) = acknowledged {
                used[i] = true;
                ("acknowledged", i)
            } else if policy.allow.contains(&x.code) {
                ("allowed", 0)
            } else if x.code.pedantic() && !policy.pedantic {
                ("pedantic", 0)
            } else {
                return true;
            };
            *counts.entry((x.code, why, i)).or_default() += 1;
            false
        });
        for (a, _) in allowances.iter().zip(&used).filter(|(_, u)| !**u) {
            if !self.checked.contains(&a.code.check()) {
                continue;
            }
            let what = match &a.name {
                Some(n) => format!("`{}` for `{n}`", a.code.name()),
                None => format!("`{}`", a.code.name()),
            };
            let others = subjects.get(&a.code).filter(|_| a.name.is_some());
            let hint = match others {
                Some(o) => {
                    let near = a.name.as_deref().and_then(|n| {
                        crate::core::names::did_you_mean(n, o.iter().map(String::as_str))
                    });
                    format!(
                        "{}check found `{}` for: {}",
                        near.map(|n| format!("did you mean `{n}`? ")).unwrap_or_default(),
                        a.code.name(),
                        o.iter().cloned().collect::<Vec<_>>().join(", ")
                    )
                }
                None => "the problem is gone: remove the entry from `[check].allow`, so that it does not hide the next one".to_string(),
            };
            let x = Finding::new(
                Code::UnusedAllow,
                format!("{spec_file} allows {what}, but check found none"),
            )
            .at(&spec_file, Some(a.line))
            .detail(vec![format!("reason: {}", a.reason)])
            .hint(hint);
            if !policy.allow.contains(&Code::UnusedAllow) {
                self.findings.push(x);
            } else {
                *counts.entry((Code::UnusedAllow, "allowed", 0)).or_default() += 1;
            }
        }
        self.suppressed = counts
            .into_iter()
            .map(|((code, why, i), count)| {
                let (at, reason) = if why == "acknowledged" {
                    let a = &allowances[i];
                    (
                        Some(format!("{spec_file}:{}", a.line)),
                        Some(a.reason.clone()),
                    )
                } else {
                    (None, None)
                };
                Suppressed {
                    code,
                    count,
                    why,
                    at,
                    reason,
                }
            })
            .collect();
    }

    /// Replaces the reason a check did not run (`drift`: the default `out/` belongs to
    /// another lock).
    pub fn skip(&mut self, check: &'static str, reason: String) {
        self.checked.retain(|c| *c != check);
        match self.skipped.iter_mut().find(|s| s.check == check) {
            Some(s) => s.reason = reason,
            None => self.skipped.push(Skipped { check, reason }),
        }
    }

    /// The number of error findings.
    pub fn errors(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .count()
    }

    /// The number of warnings.
    pub fn warnings(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Warning)
            .count()
    }

    /// The exit code: 0 clean, 1 when there are errors (or warnings, with `strict`).
    pub fn exit_code(&self, strict: bool) -> u8 {
        u8::from(self.errors() > 0 || (strict && self.warnings() > 0))
    }

    /// Human-readable text, one block per finding, then a summary line; sources shortened
    /// to one URL ([`crate::catalog::short_source`]).
    pub fn to_text(&self) -> String {
        self.text(false)
    }

    /// [`Report::to_text`], with sources in full when `verbose` (`check -v`).
    pub fn text(&self, verbose: bool) -> String {
        let mut o = String::new();
        for x in &self.findings {
            let sev = match x.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
            };
            o.push_str(&format!("{sev}[{}]: {}\n", x.code.name(), x.message));
            if let Some(file) = &x.file {
                match x.line {
                    Some(l) => o.push_str(&format!("  --> {file}:{l}\n")),
                    None => o.push_str(&format!("  --> {file}\n")),
                }
            }
            for d in &x.detail {
                o.push_str(&format!("    {d}\n"));
            }
            if let Some(s) = &x.source {
                let s = if verbose {
                    s.clone()
                } else {
                    crate::catalog::short_source(s)
                };
                o.push_str(&format!("    source: {s}\n"));
            }
            if let Some(h) = &x.hint {
                o.push_str(&format!("  hint: {h}\n"));
            }
            o.push('\n');
        }
        let skipped: Vec<String> = self
            .skipped
            .iter()
            .map(|s| format!("{} ({})", s.check, s.reason))
            .collect();
        for s in self.suppressed.iter().filter(|s| s.why == "acknowledged") {
            if let (Some(at), Some(r)) = (&s.at, &s.reason) {
                o.push_str(&format!(
                    "acknowledged: {} {} at {at}: {r}\n",
                    s.count,
                    s.code.name()
                ));
            }
        }
        if self.suppressed.iter().any(|s| s.why != "acknowledged") {
            let parts: Vec<String> = self
                .suppressed
                .iter()
                .filter(|s| s.why != "acknowledged")
                .map(|s| {
                    format!(
                        "{} {} ({})",
                        s.count,
                        s.code.name(),
                        if s.why == "allowed" {
                            format!("--allow {}", s.code.name())
                        } else {
                            "a catalog gap; shown with --pedantic".to_string()
                        }
                    )
                })
                .collect();
            o.push_str(&format!("not shown: {}\n", parts.join(", ")));
        }
        o.push_str(&format!(
            "checked {}: {}, {} error{}, {} warning{}{}\n",
            self.lock,
            self.checked.join(", "),
            self.errors(),
            if self.errors() == 1 { "" } else { "s" },
            self.warnings(),
            if self.warnings() == 1 { "" } else { "s" },
            if skipped.is_empty() {
                String::new()
            } else {
                format!("; skipped {}", skipped.join(", "))
            }
        ));
        o
    }

    /// Stable JSON (see the book's "Checks in pull requests" for the schema).
    pub fn to_json(&self) -> String {
        #[derive(Serialize)]
        struct Out<'a> {
            format: u32,
            #[serde(flatten)]
            report: &'a Report,
            errors: usize,
            warnings: usize,
        }
        let mut s = serde_json::to_string_pretty(&Out {
            format: 1,
            report: self,
            errors: self.errors(),
            warnings: self.warnings(),
        })
        .unwrap_or_default();
        s.push('\n');
        s
    }

    /// GitHub Actions workflow commands: one `::error` or `::warning` annotation per
    /// finding, then the text summary line.
    pub fn to_github(&self) -> String {
        let mut o = String::new();
        for x in &self.findings {
            let sev = match x.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
            };
            let mut props = Vec::new();
            if let Some(file) = &x.file {
                props.push(format!("file={}", gh_property(file)));
                if let Some(l) = x.line {
                    props.push(format!("line={l}"));
                }
            }
            props.push(format!(
                "title={}",
                gh_property(&format!("gpustack {}", x.code.name()))
            ));
            let mut msg = x.message.clone();
            for d in &x.detail {
                msg.push('\n');
                msg.push_str(d);
            }
            if let Some(s) = &x.source {
                msg.push_str("\nsource: ");
                msg.push_str(&crate::catalog::short_source(s));
            }
            if let Some(h) = &x.hint {
                msg.push_str("\nhint: ");
                msg.push_str(h);
            }
            o.push_str(&format!("::{sev} {}::{}\n", props.join(","), gh_data(&msg)));
        }
        if let Some(last) = self.to_text().lines().last() {
            o.push_str(last);
            o.push('\n');
        }
        o
    }
}

/// Escapes a workflow-command message (`%`, CR, LF), as the Actions toolkit does.
fn gh_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a workflow-command property (also `:` and `,`).
fn gh_property(s: &str) -> String {
    gh_data(s).replace(':', "%3A").replace(',', "%2C")
}

fn join(dir: &str, rel: &str) -> String {
    if dir.is_empty() || dir == "." {
        rel.to_string()
    } else {
        format!("{}/{rel}", dir.trim_end_matches('/'))
    }
}

fn short_hash(h: &str) -> String {
    let hex = h.trim_start_matches("sha256:");
    format!("sha256:{}", &hex[..hex.len().min(12)])
}

/// The 1-based line of the first occurrence of `needle`.
fn line_of(text: &str, needle: &str) -> Option<usize> {
    let at = text.find(needle)?;
    Some(Location::at_offset("", text, at).line)
}

/// The lock hash in a generated file's header: `gpustack.lock (sha256:…)` or the
/// `gpustack.dev/lock` annotation / `dev.gpustack.lock` label.
fn header_lock_hash(text: &str) -> Option<String> {
    for l in text.lines().take(12) {
        if let Some(i) = l.find("gpustack.lock (sha256:") {
            let rest = &l[i + "gpustack.lock (".len()..];
            return rest.split(')').next().map(str::to_string);
        }
    }
    None
}

/// The first differing line (1-based, in `old`) and a short `-`/`+` diff around it.
fn short_diff(old: &str, new: &str) -> (Option<usize>, Vec<String>) {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let removed = &a[prefix..a.len() - suffix];
    let added = &b[prefix..b.len() - suffix];
    const MAX: usize = 6;
    let mut out = Vec::new();
    for l in removed.iter().take(MAX) {
        out.push(format!("- {l}"));
    }
    if removed.len() > MAX {
        out.push(format!("  … {} more removed", removed.len() - MAX));
    }
    for l in added.iter().take(MAX) {
        out.push(format!("+ {l}"));
    }
    if added.len() > MAX {
        out.push(format!("  … {} more added", added.len() - MAX));
    }
    (Some(prefix + 1), out)
}

fn find_values(text: &str, file: &str, get: impl Fn(&str) -> Option<String>) -> Vec<Seen> {
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            get(l).map(|value| Seen {
                file: file.to_string(),
                line: i + 1,
                value,
            })
        })
        .collect()
}

/// Undoes the `sh` filter's quoting: `'a'\''b'` → `a'b`; bare words as they are.
fn unquote_sh(s: &str) -> String {
    let s = s.trim();
    let mut out = String::new();
    let mut chars = s.chars();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match c {
            '\'' => quoted = !quoted,
            '\\' if !quoted => {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            }
            '"' if !quoted => {}
            _ => out.push(c),
        }
    }
    out
}

/// Undoes JSON string quoting (`"a\"b"` → `a"b`); other text as it is.
fn unquote_json(s: &str) -> String {
    let s = s.trim();
    serde_json::from_str::<String>(s).unwrap_or_else(|_| s.to_string())
}

/// The first training container's args after `--rdzv-id=…`: what torchrun runs, and the
/// line of the first of them.
fn k8s_entry(text: &str) -> (usize, Vec<String>) {
    let mut out = Vec::new();
    let mut line = 0;
    let mut in_args = false;
    let mut after_rdzv = false;
    for (i, l) in text.lines().enumerate() {
        let t = l.trim();
        if t == "args:" {
            in_args = out.is_empty();
            continue;
        }
        if !in_args {
            continue;
        }
        let Some(item) = t.strip_prefix("- ") else {
            in_args = false;
            continue;
        };
        let v = unquote_json(item);
        if after_rdzv {
            if out.is_empty() {
                line = i + 1;
            }
            out.push(v);
        } else if v.starts_with("--rdzv-id=") {
            after_rdzv = true;
        }
    }
    (line, out)
}

/// `entry=(` … `)` of a training script: one shell word a line.
fn slurm_entry(text: &str) -> (usize, Vec<String>) {
    let mut out = Vec::new();
    let mut line = 0;
    let mut inside = false;
    for (i, l) in text.lines().enumerate() {
        if l == "entry=(" {
            inside = true;
            line = i + 1;
        } else if inside && l == ")" {
            break;
        } else if inside {
            out.push(unquote_sh(l));
        }
    }
    (line, out)
}

/// `target "base" { … tags = ["…"] }` → layer → tag.
fn bake_tags(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut current: Option<String> = None;
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("target \"") {
            current = rest.split('"').next().map(str::to_string);
        } else if let (Some(t), Some(rest)) = (&current, l.trim().strip_prefix("tags")) {
            let v = rest.trim_start().trim_start_matches('=').trim();
            let v = v.trim_start_matches('[').trim_end_matches(']');
            if let Some(first) = v.split(',').next() {
                out.insert(t.clone(), unquote_json(first));
            }
        }
    }
    out
}

/// `ENV A="1" \` / `    B="2"` → name → (line, value), for every ENV instruction.
fn dockerfile_env(text: &str) -> EnvMap {
    let mut out = BTreeMap::new();
    let mut continuing = false;
    for (i, l) in text.lines().enumerate() {
        let body = if let Some(rest) = l.strip_prefix("ENV ") {
            rest
        } else if continuing {
            l
        } else {
            continue;
        };
        continuing = body.trim_end().ends_with('\\');
        let body = body.trim().trim_end_matches('\\').trim();
        if let Some((k, v)) = body.split_once('=') {
            if !k.contains(' ') {
                out.insert(k.to_string(), (i + 1, unquote_json(v)));
            }
        }
    }
    out
}

/// A ConfigMap's `data:` entries.
fn configmap_env(text: &str) -> EnvMap {
    let mut out = BTreeMap::new();
    let mut in_data = false;
    for (i, l) in text.lines().enumerate() {
        if !l.starts_with(' ') && !l.starts_with('#') && !l.is_empty() {
            in_data = l.trim_end() == "data:";
            continue;
        }
        if !in_data || l.trim_start().starts_with('#') {
            continue;
        }
        let t = l.trim();
        // `"KEY": "value"` with JSON-style quoting on both sides.
        if let Some(rest) = t.strip_prefix('"') {
            if let Some(end) = rest.find("\":") {
                let key = unquote_json(&format!("\"{}\"", &rest[..end]));
                out.insert(key, (i + 1, unquote_json(&rest[end + 2..])));
            }
        } else if let Some((k, v)) = t.split_once(':') {
            out.insert(k.trim().to_string(), (i + 1, unquote_json(v)));
        }
    }
    out
}

/// `export A=1` lines.
fn shell_env(text: &str) -> EnvMap {
    let mut out = BTreeMap::new();
    for (i, l) in text.lines().enumerate() {
        if let Some((k, v)) = l.strip_prefix("export ").and_then(|r| r.split_once('=')) {
            out.insert(k.to_string(), (i + 1, unquote_sh(v)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unquoting_matches_the_filters() {
        for s in ["plain", "a b", "it's", "$HOME", "a\\b", "x'y'z", ""] {
            assert_eq!(unquote_sh(&crate::render::sh_quote(s)), s, "{s}");
            assert_eq!(unquote_json(&crate::render::json_quote(s)), s, "{s}");
        }
    }

    #[test]
    fn short_diff_points_at_the_first_change() {
        let (line, d) = short_diff("a\nb\nc\n", "a\nB\nc\n");
        assert_eq!(line, Some(2));
        assert_eq!(d, vec!["- b", "+ B"]);
    }

    #[test]
    fn github_escaping() {
        assert_eq!(gh_property("a:b,c%\n"), "a%3Ab%2Cc%25%0A");
        assert_eq!(gh_data("50%\nnext"), "50%25%0Anext");
    }
}
