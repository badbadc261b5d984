//! Installability on the OS: yanked releases, wheel platform tags against the OS's glibc
//! and CPU, and the glibc floor of a release's dependencies.

use crate::catalog::Origin;
use crate::core::version::Version;

use super::{Ctx, Rule, Violation};

impl<'c> Ctx<'c> {
    /// Whether a PyPI release installs at all, and on the OS:
    /// * [`Rule::Yanked`]: a release yanked on PyPI is never locked;
    /// * [`Rule::WheelPlatform`]: a release with Windows/macOS wheels only is never locked,
    ///   and with `[stack].os` some wheel must install on the OS's glibc and the hosts' CPU
    ///   (releases whose platform tags the catalog does not record pass);
    /// * [`Rule::DependencyGlibc`]: with `[stack].os`, the glibc floor of the release's
    ///   install (its dependencies' wheels included), where recorded, must not be newer
    ///   than the OS's glibc.
    pub(super) fn wheel_installs(
        &self,
        platforms: &[crate::catalog::WheelPlatform],
        install: &crate::catalog::Installability,
        what: impl Fn() -> String,
        fact: impl Fn() -> Origin,
    ) -> Result<(), Violation> {
        if let Some(y) = &install.yanked {
            return Err(self.violation(
                Rule::Yanked,
                || {
                    format!(
                        "{} is yanked on PyPI (seen {}): {}",
                        what(),
                        y.observed,
                        y.reason.as_deref().unwrap_or("no reason given")
                    )
                },
                || vec![fact()],
            ));
        }
        if !platforms.is_empty() && !platforms.iter().any(|p| p.is_linux()) {
            return Err(self.violation(
                Rule::WheelPlatform,
                || {
                    let tags: Vec<String> =
                        platforms.iter().map(|p| format!("`{}`", p.tag)).collect();
                    format!(
                        "{} has no Linux wheel on PyPI, only {}",
                        what(),
                        tags.join(", ")
                    )
                },
                || vec![fact()],
            ));
        }
        let Some((os, glibc)) = self.platform else {
            return Ok(());
        };
        if !platforms.is_empty() && !platforms.iter().any(|p| p.installs_on(self.cpu, glibc)) {
            return Err(self.platform_violation(platforms, &what, &fact, os, glibc));
        }
        if let Some(f) = install.floor_above(self.cpu, glibc) {
            return Err(self.violation(
                Rule::DependencyGlibc,
                || {
                    format!(
                        "{} needs glibc ≥ {} on {}, and {os} ships glibc {glibc}: {} ({})",
                        what(),
                        f.glibc,
                        f.cpu,
                        f.by,
                        first_url(&f.source)
                    )
                },
                || vec![fact()],
            ));
        }
        Ok(())
    }

    /// [`Rule::WheelPlatform`]: no wheel of the release installs on the OS and CPU.
    pub(super) fn platform_violation(
        &self,
        platforms: &[crate::catalog::WheelPlatform],
        what: &impl Fn() -> String,
        fact: &impl Fn() -> Origin,
        os: &str,
        glibc: &Version,
    ) -> Violation {
        self.violation(
            Rule::WheelPlatform,
            || {
                let tags: Vec<String> = platforms.iter().map(|p| format!("`{}`", p.tag)).collect();
                let on_cpu = platforms.iter().any(|p| p.cpu == self.cpu);
                format!(
                    "{}'s wheels are built for {} only; {os} ships glibc {glibc}{}",
                    what(),
                    tags.join(", "),
                    if on_cpu {
                        String::new()
                    } else {
                        format!(" and the hosts are {}", self.cpu)
                    }
                )
            },
            || vec![fact()],
        )
    }
}

/// A catalog entry's origin as an explanation cites it.
/// The first URL of a source (the whole source when it has none).
fn first_url(source: &str) -> &str {
    source.find("https://").map_or(source, |i| {
        source[i..].split_whitespace().next().unwrap_or(source)
    })
}
