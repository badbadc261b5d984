//! What a check run found: [`Finding`]s with their [`Code`], the [`Report`] that holds them,
//! the [`Policy`] that leaves some out, and the text, JSON and GitHub renderings.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::spec::check::{Allowance, Code, Severity};

/// Which findings a report keeps: `--pedantic` and `--allow CODE`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    /// Keep findings whose [`Code::pedantic`] is true.
    pub pedantic: bool,
    /// `--strict`: keep [`Code::OpenClosure`] too (left out silently otherwise: every lock
    /// made with `--offline` or `--allow-open` has it, and `gpustack lock` said so).
    pub strict: bool,
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
    pub(super) fn new(code: Code, message: impl Into<String>) -> Finding {
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
    pub(super) fn about(mut self, subject: &str) -> Finding {
        self.subject = Some(subject.to_string());
        self
    }
    pub(super) fn source(mut self, source: &str) -> Finding {
        self.source = Some(source.to_string());
        self
    }
    pub(super) fn at(mut self, file: &str, line: Option<usize>) -> Finding {
        self.file = Some(file.to_string());
        self.line = line.filter(|&l| l > 0);
        self
    }
    pub(super) fn detail(mut self, d: Vec<String>) -> Finding {
        self.detail = d;
        self
    }
    pub(super) fn hint(mut self, h: impl Into<String>) -> Finding {
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

/// The result of `check`.
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
            } else if x.code == Code::OpenClosure && !policy.strict && !policy.pedantic {
                return false;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_escaping() {
        assert_eq!(gh_property("a:b,c%\n"), "a%3Ab%2Cc%25%0A");
        assert_eq!(gh_data("50%\nnext"), "50%25%0Anext");
    }
}
