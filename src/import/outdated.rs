//! `catalog outdated`: what upstream has that the catalog lacks, per family.
//!
//! For the Python families the simple index is read (every final, non-yanked release with
//! a Linux x86_64 wheel or an sdist, from the catalog's oldest listed release on); for CUDA
//! and cuDNN the manifests given. Nothing is written: the report lists the
//! `catalog import` commands that would add the missing releases.

use std::collections::{BTreeMap, BTreeSet};

use super::{pypi, redist::Manifest, Fetch, ImportError};
use crate::catalog::Catalog;
use crate::core::version::Version;

/// One family's comparison.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FamilyReport {
    /// `torch`, `cudnn`, `extra flash-attn`.
    pub family: String,
    /// Where upstream was read: project pages or manifests.
    pub sources: Vec<String>,
    /// The projects the import command takes (`nvidia-cudnn-cu12`), empty for manifests.
    pub projects: Vec<String>,
    /// The catalog's newest release.
    pub catalog_newest: Option<String>,
    /// Upstream's newest release (from the catalog's oldest on).
    pub upstream_newest: Option<String>,
    /// Releases upstream has and the catalog lacks, oldest first.
    pub missing: Vec<String>,
    /// The `catalog import pypi` arguments that add them (`nvidia-cudnn-cu12==9.28.1.4`,
    /// each with a project that has the release); empty for manifests.
    pub import: Vec<String>,
    /// Releases the catalog offers (no `yanked` recorded) whose every file is yanked
    /// upstream (PEP 592), with the reason when given: `9.25.0.15 (no reason given)`.
    pub yanked: Vec<String>,
}

/// The whole report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Per family, in a fixed order.
    pub families: Vec<FamilyReport>,
    /// Projects the index does not have (skipped).
    pub not_found: Vec<String>,
}

fn newest(v: &BTreeSet<Version>) -> Option<String> {
    v.last().map(ToString::to_string)
}

/// The releases of `project` whose every file is yanked, with the reason when given.
fn yanked(page: &pypi::Page, project: &str) -> BTreeMap<Version, Option<String>> {
    let mut by: BTreeMap<Version, (bool, Option<String>)> = BTreeMap::new();
    for f in &page.files {
        let Some(n) = pypi::parse_filename(project, &f.filename) else {
            continue;
        };
        let Ok(v) = Version::parse(&n.version) else {
            continue;
        };
        let e = by.entry(v).or_insert((true, None));
        e.0 &= f.yanked;
        if e.1.is_none() {
            e.1.clone_from(&f.yanked_reason);
        }
    }
    by.into_iter()
        .filter(|(_, (all, _))| *all)
        .map(|(v, (_, r))| (v, r))
        .collect()
}

/// `9.25.0.15 (reason)` for each release the catalog offers that upstream yanked.
fn newly_yanked(
    up: &BTreeMap<Version, Option<String>>,
    offered: &BTreeSet<Version>,
) -> Vec<String> {
    up.iter()
        .filter(|(v, _)| offered.contains(*v))
        .map(|(v, r)| format!("{v} ({})", r.as_deref().unwrap_or("no reason given")))
        .collect()
}

/// The final public releases of `project` installable on Linux x86_64.
fn upstream(page: &pypi::Page, project: &str) -> BTreeSet<Version> {
    page.files
        .iter()
        .filter(|f| !f.yanked)
        .filter_map(|f| pypi::parse_filename(project, &f.filename))
        .filter(|n| n.wheel.as_ref().is_none_or(pypi::WheelTags::linux_x86_64))
        .filter(|n| pypi::is_final(&n.version))
        .filter_map(|n| Version::parse(n.version.split('+').next().unwrap_or(&n.version)).ok())
        .collect()
}

fn compare(
    family: String,
    sources: Vec<String>,
    projects: Vec<String>,
    have: &BTreeSet<Version>,
    up: &BTreeMap<Version, String>,
) -> FamilyReport {
    let from = have.first();
    let up: BTreeMap<&Version, &String> = up
        .iter()
        .filter(|(v, _)| from.is_none_or(|f| *v >= f))
        .collect();
    let missing: Vec<(&Version, &String)> = up
        .iter()
        .filter(|(v, _)| !have.contains(**v))
        .map(|(v, p)| (*v, *p))
        .collect();
    FamilyReport {
        family,
        sources,
        import: if projects.is_empty() {
            Vec::new()
        } else {
            missing.iter().map(|(v, p)| format!("{p}=={v}")).collect()
        },
        projects,
        catalog_newest: newest(have),
        upstream_newest: up.keys().next_back().map(ToString::to_string),
        missing: missing.iter().map(|(v, _)| v.to_string()).collect(),
        yanked: Vec::new(),
    }
}

/// Compares the catalog with `index` (Python families) and `manifests` (CUDA, cuDNN).
/// `date` overrides the date the pages report.
pub fn outdated(
    fetch: &dyn Fetch,
    base: &Catalog,
    index: &str,
    manifests: &[Manifest],
    date: Option<&str>,
) -> Result<Report, ImportError> {
    let mut report = Report::default();
    let pages = Pages { fetch, index, date };
    python_families(&pages, base, &mut report)?;
    extra_families(&pages, base, &mut report)?;
    manifest_families(base, manifests, &mut report);
    Ok(report)
}

/// A project's upstream versions, the source to cite, and its yanked releases.
type Read = (BTreeSet<Version>, String, BTreeMap<Version, Option<String>>);

/// Where the Python families' project pages are read.
struct Pages<'a> {
    fetch: &'a dyn Fetch,
    index: &'a str,
    /// Overrides the date the pages report.
    date: Option<&'a str>,
}

impl Pages<'_> {
    /// A project's upstream versions and the source to cite; a project the index does not
    /// have is recorded in `report`.
    fn read(&self, project: &str, report: &mut Report) -> Result<Option<Read>, ImportError> {
        match pypi::project_page(self.fetch, self.index, project)? {
            Some(p) => {
                let d = self.date.map(str::to_string).or_else(|| p.date.clone());
                let src = match d {
                    Some(d) => format!("{} (read {d})", p.url),
                    None => p.url.clone(),
                };
                Ok(Some((upstream(&p, project), src, yanked(&p, project))))
            }
            None => {
                report.not_found.push(project.to_string());
                Ok(None)
            }
        }
    }
}

fn set<'a>(it: impl Iterator<Item = &'a Version>) -> BTreeSet<Version> {
    it.cloned().collect()
}

/// torch, vLLM, DeepSpeed, and cuDNN and NCCL from their `nvidia-*-cuXX` wheels.
fn python_families(
    pages: &Pages<'_>,
    base: &Catalog,
    report: &mut Report,
) -> Result<(), ImportError> {
    let offered = |it: &mut dyn Iterator<Item = (&Version, bool)>| -> BTreeSet<Version> {
        it.filter(|(_, y)| !y).map(|(v, _)| v.clone()).collect()
    };
    /// (family, projects, the catalog's releases, those it offers: not yanked)
    type Group<'a> = (&'a str, Vec<String>, BTreeSet<Version>, BTreeSet<Version>);
    let groups: Vec<Group<'_>> = vec![
        (
            "torch",
            vec!["torch".into()],
            set(base.torch_releases.iter().map(|r| &r.version)),
            offered(
                &mut base
                    .torch_releases
                    .iter()
                    .map(|r| (&r.version, r.install.yanked.is_some())),
            ),
        ),
        (
            "vllm",
            vec!["vllm".into()],
            set(base.vllm.iter().map(|r| &r.version)),
            offered(
                &mut base
                    .vllm
                    .iter()
                    .map(|r| (&r.version, r.install.yanked.is_some())),
            ),
        ),
        (
            "deepspeed",
            vec!["deepspeed".into()],
            set(base.deepspeed.iter().map(|r| &r.version)),
            offered(
                &mut base
                    .deepspeed
                    .iter()
                    .map(|r| (&r.version, r.install.yanked.is_some())),
            ),
        ),
        (
            "cudnn",
            (11..=13).map(|m| format!("nvidia-cudnn-cu{m}")).collect(),
            set(base.cudnn.iter().map(|r| &r.version)),
            offered(
                &mut base
                    .cudnn
                    .iter()
                    .map(|r| (&r.version, r.install.yanked.is_some())),
            ),
        ),
        (
            "nccl",
            (11..=13).map(|m| format!("nvidia-nccl-cu{m}")).collect(),
            set(base.nccl.iter().map(|r| &r.version)),
            offered(
                &mut base
                    .nccl
                    .iter()
                    .map(|r| (&r.version, r.install.yanked.is_some())),
            ),
        ),
    ];
    for (family, projects, have, offer) in groups {
        let mut up = BTreeMap::new();
        let mut sources = Vec::new();
        let mut found = Vec::new();
        // A release is yanked when every file of every project that has it is.
        let mut gone: BTreeMap<Version, Option<String>> = BTreeMap::new();
        let mut live: BTreeSet<Version> = BTreeSet::new();
        for p in &projects {
            if let Some((v, s, y)) = pages.read(p, report)? {
                for v in v {
                    live.insert(v.clone());
                    up.entry(v).or_insert_with(|| p.clone());
                }
                for (v, r) in y {
                    let e = gone.entry(v).or_insert(None);
                    if e.is_none() {
                        *e = r;
                    }
                }
                sources.push(s);
                found.push(p.clone());
            }
        }
        gone.retain(|v, _| !live.contains(v));
        let mut r = compare(family.to_string(), sources, found, &have, &up);
        r.yanked = newly_yanked(&gone, &offer);
        report.families.push(r);
    }
    Ok(())
}

/// Extras: one row per distribution the catalog installs from the index.
fn extra_families(
    pages: &Pages<'_>,
    base: &Catalog,
    report: &mut Report,
) -> Result<(), ImportError> {
    type Have = (String, BTreeSet<Version>, BTreeSet<Version>);
    let mut extras: BTreeMap<String, Have> = BTreeMap::new();
    for e in &base.extras {
        if e.index.trim_end_matches('/') != pages.index.trim_end_matches('/') {
            continue;
        }
        let row = extras.entry(e.pypi_name.clone()).or_insert_with(|| {
            (
                e.component.name().to_string(),
                BTreeSet::new(),
                BTreeSet::new(),
            )
        });
        row.1.insert(e.version.clone());
        if e.install.yanked.is_none() {
            row.2.insert(e.version.clone());
        }
    }
    for (pypi_name, (component, have, offer)) in extras {
        if let Some((up, s, y)) = pages.read(&pypi_name, report)? {
            let up = up.into_iter().map(|v| (v, pypi_name.clone())).collect();
            let mut r = compare(
                format!("extra {component} ({pypi_name})"),
                vec![s],
                vec![pypi_name.clone()],
                &have,
                &up,
            );
            r.yanked = newly_yanked(&y, &offer);
            report.families.push(r);
        }
    }
    Ok(())
}

/// CUDA and cuDNN from the redistrib manifests given.
fn manifest_families(base: &Catalog, manifests: &[Manifest], report: &mut Report) {
    for (product, have) in [
        ("cuda", set(base.cuda.iter().map(|r| &r.version))),
        ("cudnn", set(base.cudnn.iter().map(|r| &r.version))),
    ] {
        let mut up = BTreeMap::new();
        let mut sources = Vec::new();
        for m in manifests.iter().filter(|m| m.product == product) {
            let v = if product == "cuda" {
                Some(m.label.clone())
            } else {
                m.components.get("cudnn").map(|c| c.version.clone())
            };
            if let Some(v) = v.and_then(|v| Version::parse(&v).ok()) {
                up.insert(v, String::new());
                sources.push(super::redist::canonical_url(&m.product, &m.label));
            }
        }
        if !sources.is_empty() {
            // Manifests are named one by one: every one the catalog lacks is reported.
            let mut r = compare(
                format!("{product} (redistrib manifests)"),
                sources,
                Vec::new(),
                &BTreeSet::new(),
                &up,
            );
            r.catalog_newest = newest(&have);
            r.missing
                .retain(|v| Version::parse(v).is_ok_and(|v| !have.contains(&v)));
            report.families.push(r);
        }
    }
}

impl Report {
    /// The text report: one block per family, and the import commands.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for f in &self.families {
            let cat = f.catalog_newest.as_deref().unwrap_or("none");
            let up = f.upstream_newest.as_deref().unwrap_or("none");
            if !f.yanked.is_empty() {
                out.push_str(&format!(
                    "{}: {} yanked upstream that the catalog still offers: {}\n  record it: gpustack catalog import installability\n",
                    f.family,
                    f.yanked.len(),
                    f.yanked.join(", ")
                ));
            }
            if f.missing.is_empty() {
                out.push_str(&format!(
                    "{}: up to date (catalog newest {cat}, upstream newest {up})\n",
                    f.family
                ));
                continue;
            }
            out.push_str(&format!(
                "{}: {} missing (catalog newest {cat}, upstream newest {up})\n  {}\n",
                f.family,
                f.missing.len(),
                f.missing.join(", ")
            ));
            if !f.import.is_empty() {
                out.push_str(&format!(
                    "  import: gpustack catalog import pypi {}\n",
                    f.import.join(" ")
                ));
            } else if f.family.starts_with("cuda") || f.family.starts_with("cudnn") {
                out.push_str("  import: gpustack catalog import redist FILE_OR_URL\n");
            }
        }
        for p in &self.not_found {
            out.push_str(&format!("note: the index has no project `{p}`\n"));
        }
        out
    }

    /// The JSON report.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "families": self.families.iter().map(|f| serde_json::json!({
                "family": f.family,
                "projects": f.projects,
                "sources": f.sources,
                "catalog_newest": f.catalog_newest,
                "upstream_newest": f.upstream_newest,
                "missing": f.missing,
                "import": f.import,
                "yanked": f.yanked,
            })).collect::<Vec<_>>(),
            "not_found": self.not_found,
        })
    }
}
