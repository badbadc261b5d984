//! The spec's `[resolve]` table: where lock-time resolution looks.
//!
//! ```toml
//! [resolve]
//! exclude-newer = "2026-11-25T00:00:00Z"   # the index snapshot time (uv's option)
//! timeout = 30                              # seconds for all registry/repository queries
//! pypi = "https://pypi.org/simple"
//! indexes = { "https://download.pytorch.org/whl" = "http://127.0.0.1:8081/whl" }
//! registries = { "docker.io" = "http://127.0.0.1:5000" }
//! apt = { "https://developer.download.nvidia.com/compute/cuda/repos" = "http://127.0.0.1:8080/cuda" }
//! dnf = { "https://developer.download.nvidia.com/compute/cuda/repos" = "http://127.0.0.1:8080/cuda" }
//! ```
//!
//! Mirrors change where gpustack reads, never what the lock names: generated files still
//! reference `nvidia/cuda:…@sha256:…` and NVIDIA's repository URLs, so a lock made through
//! a mirror builds anywhere the originals (or the same mirror) are reachable. The table is
//! recorded in the lock's `[request.resolve]`.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use crate::spec::at::At;

/// `[resolve]`, validated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resolve {
    /// `exclude-newer`: an RFC 3339 UTC time (`2026-11-25T00:00:00Z`) or a date.
    pub exclude_newer: Option<String>,
    /// `pypi`: the PyPI simple index to use instead of `https://pypi.org/simple`.
    pub pypi: Option<String>,
    /// `indexes`: Python index URL prefix → mirror.
    pub indexes: BTreeMap<String, String>,
    /// `registries`: registry host (`docker.io`, `nvcr.io`) → mirror base URL.
    pub registries: BTreeMap<String, String>,
    /// `apt`: repository URL prefix → mirror.
    pub apt: BTreeMap<String, String>,
    /// `dnf`: repository URL prefix → mirror.
    pub dnf: BTreeMap<String, String>,
    /// `variant-index = true`: take torch from its variant's index (`+cu128` wheels from
    /// download.pytorch.org) even where PyPI's torch is the same build.
    pub variant_index: bool,
    /// `timeout`: the seconds one `gpustack lock` run may spend on registry and
    /// repository queries, all together (`--timeout` overrides it; default 30).
    pub timeout: Option<u64>,
}

impl Resolve {
    /// `url` with the longest matching prefix of `table` replaced by its mirror.
    pub fn mirror(table: &BTreeMap<String, String>, url: &str) -> String {
        table
            .iter()
            .filter(|(k, _)| {
                url.strip_prefix(k.trim_end_matches('/'))
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
            })
            .max_by_key(|(k, _)| k.len())
            .map_or_else(
                || url.to_string(),
                |(k, m)| {
                    format!(
                        "{}{}",
                        m.trim_end_matches('/'),
                        &url[k.trim_end_matches('/').len()..]
                    )
                },
            )
    }
}

/// The seconds a `gpustack lock` run spends on registry and repository queries when
/// neither `--timeout` nor `[resolve].timeout` says otherwise.
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;

type S<T> = Spanned<T>;

/// `[resolve]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct ResolveWire {
    pub(crate) exclude_newer: Option<S<String>>,
    pub(crate) pypi: Option<S<String>>,
    pub(crate) indexes: Option<S<BTreeMap<String, String>>>,
    pub(crate) registries: Option<S<BTreeMap<String, String>>>,
    pub(crate) apt: Option<S<BTreeMap<String, String>>>,
    pub(crate) dnf: Option<S<BTreeMap<String, String>>>,
    pub(crate) variant_index: Option<S<bool>>,
    pub(crate) timeout: Option<S<i64>>,
}

/// An `http://` or `https://` URL with a host (a port, when named, in 1..=65535) and no
/// credentials, printable ASCII without quotes, spaces, backslashes or template
/// characters, at most 512 bytes.
pub fn is_url(s: &str) -> bool {
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"));
    rest.is_some_and(|r| {
        let host = r.split('/').next().unwrap_or("");
        !host.is_empty() && is_registry_host(host)
    }) && s.len() <= 512
        && s.bytes()
            .all(|c| c.is_ascii_graphic() && !b"\"'\\`<>{}|^$;".contains(&c))
        && !crate::core::url::has_credentials(s)
}

/// A registry host: lowercase `host[:port]` (`docker.io`, `127.0.0.1:5000`), the port in
/// 1..=65535.
pub fn is_registry_host(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && !s.starts_with(['.', '-', ':'])
        && s.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b".-:".contains(&c))
        && crate::core::url::port_ok(s)
}

/// `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM:SSZ`: a real calendar date (`2026-02-30` is not,
/// [`crate::core::url::calendar_date`]) from 1970 on, and a time in range.
pub fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>, lo: u32, hi: u32| {
        s.get(r)
            .filter(|d| d.bytes().all(|c| c.is_ascii_digit()))
            .and_then(|d| d.parse::<u32>().ok())
            .is_some_and(|n| (lo..=hi).contains(&n))
    };
    let date = s
        .get(..10)
        .and_then(crate::core::url::parse_date)
        .is_some_and(|(y, _, _)| y >= 1970);
    date && (b.len() == 10
        || (b.len() == 20
            && b[10] == b'T'
            && b[13] == b':'
            && b[16] == b':'
            && b[19] == b'Z'
            && num(11..13, 0, 23)
            && num(14..16, 0, 59)
            && num(17..19, 0, 60)))
}

impl ResolveWire {
    pub(crate) fn validate(self, at: &mut At<'_>) -> Resolve {
        let mut r = Resolve {
            variant_index: self.variant_index.is_some_and(|v| *v.get_ref()),
            ..Resolve::default()
        };
        if let Some(t) = self.exclude_newer {
            if !is_timestamp(t.get_ref()) {
                at.fail(
                    t.span(),
                    format!(
                        "invalid `exclude-newer` `{}`: not a calendar date or an RFC 3339 UTC time",
                        t.get_ref().escape_debug()
                    ),
                    "write an RFC 3339 UTC time like `2026-11-25T00:00:00Z`, or a date like `2026-11-25`",
                );
            }
            r.exclude_newer = Some(t.into_inner());
        }
        if let Some(t) = self.timeout {
            match u64::try_from(*t.get_ref()) {
                // The default written out is the default: the same request.
                Ok(DEFAULT_TIMEOUT_SECS) => {}
                Ok(n @ 1..=3600) => r.timeout = Some(n),
                _ => at.fail(
                    t.span(),
                    format!("invalid `timeout` {}", t.get_ref()),
                    "write the seconds a lock run may spend on registry and repository queries, 1 to 3600 (default 30)",
                ),
            }
        }
        if let Some(p) = self.pypi {
            if crate::core::url::has_credentials(p.get_ref()) {
                at.fail(
                    p.span(),
                    "the `pypi` URL holds credentials (`user:password@` before the host)"
                        .to_string(),
                    crate::core::url::CREDENTIALS_HINT,
                );
            } else if !is_url(p.get_ref()) {
                at.fail(
                    p.span(),
                    format!("invalid `pypi` URL `{}`", p.get_ref().escape_debug()),
                    "write an http:// or https:// URL of a simple index, like `https://pypi.org/simple`",
                );
            }
            r.pypi = Some(p.into_inner());
        }
        let mut urls = |m: Option<S<BTreeMap<String, String>>>, key: &str, keys_are_hosts: bool| {
            let Some(m) = m else {
                return BTreeMap::new();
            };
            let span = m.span();
            for (k, v) in m.get_ref() {
                let key_ok = if keys_are_hosts {
                    is_registry_host(k)
                } else {
                    is_url(k)
                };
                if let Some(u) = [k, v]
                    .into_iter()
                    .find(|u| crate::core::url::has_credentials(u))
                {
                    at.fail(
                        span.clone(),
                        format!(
                            "a URL in `[resolve].{key}` holds credentials (`user:password@` before the host{})",
                            if u == k { ", in the key" } else { "" }
                        ),
                        crate::core::url::CREDENTIALS_HINT,
                    );
                    continue;
                }
                if !key_ok {
                    at.fail(
                        span.clone(),
                        format!("invalid `{key}` key `{}`", k.escape_debug()),
                        if keys_are_hosts {
                            "write a registry host, like `docker.io` or `nvcr.io`"
                        } else {
                            "write the http:// or https:// URL prefix being mirrored"
                        },
                    );
                }
                if !is_url(v) {
                    at.fail(
                        span.clone(),
                        format!(
                            "invalid `{key}` mirror `{}` for `{}`",
                            v.escape_debug(),
                            k.escape_debug()
                        ),
                        "write an http:// or https:// URL, like `http://127.0.0.1:5000`",
                    );
                }
            }
            m.into_inner()
        };
        r.indexes = urls(self.indexes, "indexes", false);
        r.registries = urls(self.registries, "registries", true);
        r.apt = urls(self.apt, "apt", false);
        r.dnf = urls(self.dnf, "dnf", false);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values() {
        assert!(is_timestamp("2026-11-25T00:00:00Z"));
        assert!(is_timestamp("2026-11-25"));
        assert!(!is_timestamp("2026-13-25"));
        assert!(!is_timestamp("2026-11-25T00:00:00+01:00"));
        assert!(is_url("http://127.0.0.1:5000"));
        assert!(is_url("https://download.pytorch.org/whl"));
        assert!(!is_url("ftp://x"));
        assert!(!is_url("https://x/$(id)"));
        assert!(!is_url("https:///path"));
        assert!(is_registry_host("docker.io"));
        assert!(!is_registry_host("Docker.io"));
    }

    #[test]
    fn longest_prefix_wins() {
        let t = BTreeMap::from([
            (
                "https://a.example/repos".to_string(),
                "http://127.0.0.1:1/r".to_string(),
            ),
            (
                "https://a.example/repos/ubuntu2204".to_string(),
                "http://127.0.0.1:2/".to_string(),
            ),
        ]);
        assert_eq!(
            Resolve::mirror(&t, "https://a.example/repos/ubuntu2204/x86_64"),
            "http://127.0.0.1:2/x86_64"
        );
        assert_eq!(
            Resolve::mirror(&t, "https://a.example/repos/rhel9"),
            "http://127.0.0.1:1/r/rhel9"
        );
        assert_eq!(
            Resolve::mirror(&t, "https://a.example/reposx"),
            "https://a.example/reposx"
        );
    }
}
