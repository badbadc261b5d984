//! The hygiene warnings: end-of-life drivers, artifacts pinned by name only, versions with
//! known security problems.

use crate::core::version::Version;
use crate::core::Component;
use crate::lock::Lock;
use crate::spec::check::Code;

use super::line_of;
use super::report::Finding;

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

pub(super) fn hygiene(lock: &Lock, file: &str, text: &str, f: &mut Vec<Finding>) {
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
    if lock.component(Component::Torch).is_some() && lock.python.is_none() {
        f.push(
            Finding::new(
                Code::OpenClosure,
                "the lock has no Python closure: the builds resolve Python packages at build time, so two builds can install different wheels".to_string(),
            )
            .at(file, None)
            .about("python")
            .hint("run `gpustack lock` where PyPI (or `[resolve].pypi`) answers; it fetches the pinned uv when none is installed"),
        );
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

/// Whether an end-of-life date (`YYYY-MM-DD`, or `YYYY-MM`: some time in that month) has
/// passed on `today` (`YYYY-MM-DD`): a day on that day, a month once the month is over.
fn reached(eol: &str, today: &str) -> bool {
    if eol.len() == 7 {
        today.get(..7).is_some_and(|m| m > eol)
    } else {
        today >= eol
    }
}

/// The OS release the lock's VM images boot, when it is end of life on `today`: one
/// warning per release, with the dates and, for a Rocky minor, where its packages went.
pub(super) fn eol_os(lock: &Lock, file: &str, text: &str, today: &str, f: &mut Vec<Finding>) {
    let mut seen: Vec<(String, String)> = Vec::new();
    for p in lock
        .packages
        .iter()
        .filter(|p| p.name.starts_with("vm-image-"))
    {
        let (Some(os), Some(eol)) = (p.get("os"), p.get("eol")) else {
            continue;
        };
        if !reached(eol, today) || seen.contains(&(os.to_string(), p.version.clone())) {
            continue;
        }
        seen.push((os.to_string(), p.version.clone()));
        let vault = p
            .get("vault")
            .map(|v| format!("; its packages and images move to {v}"))
            .unwrap_or_default();
        f.push(
            Finding::new(
                Code::EolOs,
                format!(
                    "{os} {} (the VM images' OS{}) reached end of life {eol}, before today ({today}): no more updates{vault}",
                    p.version,
                    p.get("released")
                        .map(|r| format!(", released {r}"))
                        .unwrap_or_default()
                ),
            )
            .at(file, line_of(text, &format!("name = \"{}\"", p.name)))
            .about(&p.name)
            .source(&p.source)
            .hint("re-lock (`gpustack lock`) to take the catalog's current release, or move `[stack].os` to a supported one; to keep it, acknowledge it with a reason in the spec's `[check].allow`"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::reached;

    #[test]
    fn end_of_life_by_day_and_by_month() {
        assert!(!reached("2025-11", "2025-11-30"));
        assert!(reached("2025-11", "2025-12-01"));
        assert!(!reached("2029-05-31", "2029-05-30"));
        assert!(reached("2029-05-31", "2029-05-31"));
    }
}
