//! `gpustack check`: every problem between the spec, the catalog, the lock, the generated
//! files and the hardware, each with a typed [`Code`], reported together.
//!
//! # What is checked
//!
//! | check | needs | finds |
//! |---|---|---|
//! | integrity | the lock | [`Code::TamperedLock`]: a recorded digest does not match the lock's content ([`Lock::verify`]) |
//! | staleness | spec + catalog | [`Code::StaleSpec`]: the spec changed since the lock was written; [`Code::StaleCatalog`]: the catalog now resolves the same spec differently |
//! | drift | `--out` | [`Code::StaleOutputs`]: no generated file names this lock, and some name another (the whole tree is another lock's: re-locked, `gen` forgotten); [`Code::Drift`]: a generated file differs from what the lock renders now, is missing, or is extra; [`Code::OtherLock`]: one target of a tree was generated from another lock |
//! | consistency | `--out` | [`Code::InconsistentDriver`], [`Code::InconsistentImage`], [`Code::InconsistentEnv`], [`Code::InconsistentCommand`]: values read back from the generated files themselves disagree across targets |
//! | admission | `--out` | [`Code::UncoveredResource`], [`Code::ExceedsQuota`], [`Code::UnprovidedResource`], [`Code::NoGang`], [`Code::UnselectedMonitor`], [`Code::NoNodeFits`], [`Code::ExceedsPartition`]; warning [`Code::UnpullableImage`]: the generated Kubernetes and Slurm files read back as the cluster reads them (Kueue admission, the scheduler's fit, the Prometheus selector, slurmctld's partition limits) |
//! | hardware | `--hardware` | [`Code::DriverTooOld`], [`Code::InstalledDriverMismatch`], [`Code::ArchNotCovered`], [`Code::TorchArchNotBuilt`], [`Code::GpuNotLocked`] |
//! | hygiene | the lock (and the date) | warnings: [`Code::Unpinned`], [`Code::EolDriver`], [`Code::EolOs`], [`Code::UnsafeVersion`] |
//! | acknowledgements | the spec's `[check].allow` ([`Allowance`]) | [`Code::UnusedAllow`]: an entry that matches no finding ([`Report::apply`]) |
//!
//! Consistency is read back from the files, not recomputed from the lock: it holds even for
//! an output tree assembled from several `gen` runs, and says which file disagrees.
//!
//! The checks are pure: the caller reads the files ([`crate::emit::read_tree`]) and passes
//! their contents in [`Inputs`]. Invalid input (a lock or spec that does not parse, an
//! unknown GPU in the hardware profile) is an [`Error`], not a finding.

mod admission;
mod consistency;
mod drift;
mod hardware;
mod hygiene;
mod integrity;
mod report;
mod staleness;

use std::collections::BTreeMap;

use crate::catalog::Catalog;
use crate::error::{Error, Location};
use crate::lock::Lock;

pub use crate::spec::check::{Allowance, Code, Severity};
pub use hardware::HostHardware;
pub use report::{Finding, Policy, Report, Skipped, Suppressed};

use admission::admission;
use consistency::consistency;
use drift::{drift, stale_outputs};
use hardware::hardware;
use hygiene::hygiene;
use integrity::{integrity, pylocks};
use staleness::staleness;

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
    /// The date end-of-life dates are compared with, `YYYY-MM-DD` (the CLI's `--today`, else
    /// today in UTC); `None` leaves the date-dependent warnings out.
    pub today: Option<&'a str>,
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
///     today: Some("2026-01-01"),
/// })?;
/// assert_eq!(report.errors(), 0);
/// # Ok::<(), gpustack::Error>(())
/// ```
pub fn check(inputs: &Inputs<'_>) -> Result<Report, Error> {
    let (lock_file, lock_text) = inputs.lock;
    let mut lock = Lock::parse(lock_file, lock_text)?;
    lock.require_seals(lock_file, lock_text)?;
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
    if let Some(today) = inputs.today {
        hygiene::eol_os(&lock, lock_file, lock_text, today, f);
    }
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
            for check in ["drift", "consistency", "admission"] {
                report.skipped.push(Skipped {
                    check,
                    reason: "the lock's pylock files do not match it".into(),
                });
            }
        }
        Some((dir, files)) if stale_outputs(&lock, dir, files, f) => {
            report.checked.push("drift");
            for check in ["consistency", "admission"] {
                report.skipped.push(Skipped {
                    check,
                    reason: format!(
                        "{}/ holds the outputs of another lock",
                        dir.trim_end_matches('/')
                    ),
                });
            }
        }
        Some((dir, files)) => {
            report.checked.push("drift");
            report.checked.push("consistency");
            report.checked.push("admission");
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
            admission(&lock, dir, files, f);
        }
        None => {
            for check in ["drift", "consistency", "admission"] {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_diff_points_at_the_first_change() {
        let (line, d) = short_diff("a\nb\nc\n", "a\nB\nc\n");
        assert_eq!(line, Some(2));
        assert_eq!(d, vec!["- b", "+ B"]);
    }
}
