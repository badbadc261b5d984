//! NVIDIA's redistrib manifests (`redistrib_X.Y.Z.json`, one per release, under
//! `https://developer.download.nvidia.com/compute/<product>/redist/`): a CUDA toolkit
//! release with its components' versions and the driver it ships, or a cuDNN release
//! with the CUDA majors (`cuda_variant`) it is built for.
//!
//! The CUDA manifest's `nvidia_driver` is the driver bundled with the release; the
//! catalog's `driver_min` is Table 3 of the release notes, a different fact, so it is kept
//! from the catalog or left out, never copied from the manifest.

use std::collections::BTreeMap;

use super::{Entry, Family, Import, ImportError, Value};
use crate::catalog::Catalog;
use crate::core::version::Version;

/// The URL NVIDIA publishes a manifest at: the citable source of its entries.
pub fn canonical_url(product: &str, label: &str) -> String {
    format!("https://developer.download.nvidia.com/compute/{product}/redist/redistrib_{label}.json")
}

/// A parsed manifest: the release and its components (name → version, Linux x86_64
/// archive sha256 where present, CUDA variants).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// `cuda`, `cudnn`, …
    pub product: String,
    /// `12.6.3`.
    pub label: String,
    /// `2024-11-20`.
    pub release_date: Option<String>,
    /// Components in name order.
    pub components: BTreeMap<String, Component>,
}

/// One component of a manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Component {
    /// `12.6.85`.
    pub version: String,
    /// Has a Linux x86_64 archive.
    pub linux_x86_64: bool,
    /// cuDNN-style `cuda_variant`: `["11", "12"]`.
    pub cuda_variant: Vec<String>,
}

/// Parses a manifest's JSON; `shown` names it in errors.
pub fn parse(shown: &str, text: &str) -> Result<Manifest, ImportError> {
    let bad = |what: String| ImportError::Malformed {
        url: shown.to_string(),
        what,
    };
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| bad(format!("not JSON: {e}")))?;
    let obj = v
        .as_object()
        .ok_or_else(|| bad("not a JSON object".into()))?;
    let s = |k: &str| obj.get(k).and_then(|x| x.as_str()).map(str::to_string);
    let product = s("release_product")
        .ok_or_else(|| bad("no `release_product`: not a redistrib manifest".into()))?;
    let label = s("release_label")
        .ok_or_else(|| bad("no `release_label`: not a redistrib manifest".into()))?;
    if Version::parse(&label).is_err() {
        return Err(bad(format!("`release_label` `{label}` is not a version")));
    }
    let mut components = BTreeMap::new();
    for (name, c) in obj {
        let Some(c) = c.as_object() else {
            continue;
        };
        let Some(version) = c.get("version").and_then(|x| x.as_str()) else {
            continue;
        };
        components.insert(
            name.clone(),
            Component {
                version: version.to_string(),
                linux_x86_64: c.contains_key("linux-x86_64"),
                cuda_variant: c
                    .get("cuda_variant")
                    .and_then(|x| x.as_array())
                    .into_iter()
                    .flatten()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect(),
            },
        );
    }
    Ok(Manifest {
        product,
        label,
        release_date: s("release_date"),
        components,
    })
}

/// Catalog entries from manifests: a `cuda` release per CUDA manifest, a `cudnn` release
/// per cuDNN manifest. `date` is the day the manifests were read.
pub fn import(base: &Catalog, manifests: &[Manifest], date: &str) -> Result<Import, ImportError> {
    super::check_date(date)?;
    let mut entries = Vec::new();
    for m in manifests {
        let url = canonical_url(&m.product, &m.label);
        let released = m
            .release_date
            .as_deref()
            .map(|d| format!(", release_date {d}"))
            .unwrap_or_default();
        let source = format!("{url} (NVIDIA redistrib manifest{released}), read {date}");
        match m.product.as_str() {
            "cuda" => {
                let sort = Version::parse(&m.label).map_err(|e| ImportError::Malformed {
                    url: url.clone(),
                    what: e.to_string(),
                })?;
                let mut e = Entry::new(Family::Cuda, "release", format!("cuda {}", m.label), sort.clone());
                e.str("version", &m.label);
                let known = base.cuda.iter().find(|c| c.version == sort);
                let driver = m.components.get("nvidia_driver").map(|c| c.version.clone());
                e.not_derived(
                    "driver_min",
                    match &driver {
                        Some(d) => format!("the manifest's nvidia_driver {d} is the bundled driver; the minimum is Table 3 of the release notes"),
                        None => "the minimum driver is Table 3 of the release notes, not the manifest".to_string(),
                    },
                    known.and_then(|k| {
                        k.driver_min
                            .as_ref()
                            .map(|d| (Value::Str(d.to_string()), k.origin.location()))
                    }),
                    false,
                );
                if known.is_some_and(|k| k.redist_only) {
                    e.not_derived(
                        "redist_only",
                        "whether NVIDIA ships install packages and release notes for this exact release is not in the manifest",
                        known.map(|k| (Value::Bool(true), k.origin.location())),
                        false,
                    );
                }
                let parts: Vec<String> = m
                    .components
                    .iter()
                    .filter(|(_, c)| c.linux_x86_64)
                    .filter(|(n, _)| {
                        matches!(
                            n.as_str(),
                            "cuda_cudart" | "cuda_nvcc" | "cuda_nvrtc" | "cuda_cupti" | "cuda_cccl" | "libcublas" | "libcufft" | "libcusparse" | "libnvjitlink" | "nvidia_driver"
                        )
                    })
                    .map(|(n, c)| format!("{n} {}", c.version))
                    .collect();
                e.notes.push(format!("Linux x86_64 components: {}", parts.join(", ")));
                if !base.targets.iter().any(|t| t.cuda.matches(&sort)) {
                    e.missing
                        .push("a `[[targets]]` entry covering this release (nvcc's GPU targets are not in the manifest)".into());
                }
                e.source = source;
                entries.push(e);
            }
            "cudnn" => {
                let c = m.components.get("cudnn").ok_or_else(|| ImportError::Malformed {
                    url: url.clone(),
                    what: "a cuDNN manifest without a `cudnn` component".into(),
                })?;
                let sort = Version::parse(&c.version).map_err(|e| ImportError::Malformed {
                    url: url.clone(),
                    what: e.to_string(),
                })?;
                let mut e = Entry::new(Family::Cudnn, "release", format!("cudnn {}", c.version), sort.clone());
                e.str("version", &c.version);
                let mut majors: Vec<u64> = c.cuda_variant.iter().filter_map(|v| v.parse().ok()).collect();
                majors.sort_unstable();
                majors.dedup();
                if majors.is_empty() {
                    e.missing.push("cuda_majors (the manifest lists no `cuda_variant`)".into());
                } else {
                    e.set("cuda_majors", Value::Ints(majors));
                }
                let known = base.cudnn.iter().find(|l| l.version == sort);
                e.not_derived(
                    "min_cc",
                    "the lowest compute capability is in NVIDIA's support matrix, not the manifest",
                    known.and_then(|k| k.min_cc.map(|cc| (Value::Str(cc.to_string()), k.origin.location()))),
                    false,
                );
                e.notes.push(format!(
                    "cuda_variant from the manifest's `cudnn` component{}",
                    if c.linux_x86_64 { " (Linux x86_64 archives listed)" } else { "" }
                ));
                e.source = source;
                entries.push(e);
            }
            other => {
                return Err(ImportError::Usage(format!(
                    "`{other}` manifests are not imported; the catalog takes `cuda` and `cudnn` manifests"
                )))
            }
        }
    }
    entries.sort_by(|a, b| (a.family, &a.sort).cmp(&(b.family, &b.sort)));
    entries.dedup_by(|a, b| a.family == b.family && a.label == b.label);
    Ok(Import {
        entries,
        command: "catalog import redist".into(),
        origin: "NVIDIA redistrib manifests".into(),
        file_suffix: "-redist".into(),
        ..Import::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_what_is_not_a_manifest() {
        let e = parse("x.json", r#"{"a": 1}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot read `x.json`: no `release_product`: not a redistrib manifest"
        );
        assert!(parse("x.json", "[").is_err());
    }

    /// A release the catalog lists as known only from its manifest keeps `redist_only` when
    /// it is imported again, so an overlay cannot make it lockable. (No stock release is
    /// `redist_only` since 12.8.2 and its like turned out to be updates of their own; a
    /// site overlay marks one here.)
    #[test]
    fn a_redist_only_release_stays_redist_only() {
        let site = vec![(
            "site/cuda.toml".to_string(),
            "family = \"cuda\"\n[[release]]\nversion = \"12.8.2\"\nredist_only = true\nsource = \"https://example.org/redistrib_12.8.2.json\"\n".to_string(),
        )];
        let cat = Catalog::stock_with(&[site]).unwrap();
        let text = r#"{"release_date": "2026-04-21", "release_label": "12.8.2", "release_product": "cuda",
            "cuda_cudart": {"name": "CUDA Runtime (cudart)", "version": "12.8.90",
              "linux-x86_64": {"relative_path": "cuda_cudart/linux-x86_64/cuda_cudart-linux-x86_64-12.8.90-archive.tar.xz"}}}"#;
        let m = parse("redistrib_12.8.2.json", text).unwrap();
        let out = import(&cat, &[m], "2026-11-26").unwrap();
        let e = &out.entries[0];
        assert_eq!(e.field("redist_only").as_deref(), Some("true"));
        assert_eq!(e.field("driver_min"), None);
        let kept = e
            .not_derived
            .iter()
            .find(|n| n.field == "redist_only")
            .unwrap();
        assert!(
            kept.kept_from
                .as_deref()
                .is_some_and(|k| k.starts_with("site/cuda.toml:")),
            "{kept:?}"
        );
    }
}
