//! The PyPI import driver: which catalog family a project is, its releases read from the
//! index, and the facts (Python, CUDA, installability) each release's entries carry.

use std::collections::{BTreeMap, BTreeSet};

use crate::catalog::Catalog;
use crate::core::version::Version;
use crate::core::Component;

use super::pypi_entries::{Pulled, Release};
use super::*;

/// What a requested project is, for the catalog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Torch,
    Vllm,
    Deepspeed,
    /// `nvidia-cudnn-cuXX` (`true`) or `nvidia-nccl-cuXX` (`false`).
    Lib(bool),
    Extra(Component),
}

fn kind_of(base: &Catalog, project: &str) -> Option<Kind> {
    let p = pypi::normalize(project);
    match p.as_str() {
        "torch" => return Some(Kind::Torch),
        "vllm" => return Some(Kind::Vllm),
        "deepspeed" => return Some(Kind::Deepspeed),
        _ => {}
    }
    for (prefix, cudnn) in [("nvidia-cudnn-cu", true), ("nvidia-nccl-cu", false)] {
        if let Some(n) = p.strip_prefix(prefix) {
            if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) {
                return Some(Kind::Lib(cudnn));
            }
        }
    }
    if let Some(e) = base
        .extras
        .iter()
        .find(|e| pypi::normalize(&e.pypi_name) == p)
    {
        return Some(Kind::Extra(e.component));
    }
    Component::from_name(&p)
        .filter(|c| c.is_extra())
        .map(Kind::Extra)
}

/// The options of `catalog import pypi`.
#[derive(Clone, Debug)]
pub struct PypiOptions {
    /// The simple index (`https://pypi.org/simple`, `https://download.pytorch.org/whl/cu124`).
    pub index: String,
    /// The index URL the entries record (`files`, an extra's `index`, a variant's
    /// `index_url`) when `index` is a mirror of it; `None`: `index` itself.
    pub record_index: Option<String>,
    /// The date entries record as read; `None`: each page's `Date` header.
    pub date: Option<String>,
    /// Also import the cuDNN/NCCL releases a torch wheel pins and the torch release a
    /// vLLM release pins, when the base catalog lacks them.
    pub follow_pins: bool,
}

impl Default for PypiOptions {
    fn default() -> PypiOptions {
        PypiOptions {
            index: PYPI.to_string(),
            record_index: None,
            date: None,
            follow_pins: true,
        }
    }
}

/// `index` is PyPI itself (its own spelling or a trailing slash).
pub(super) fn is_pypi(index: &str) -> bool {
    let i = index.trim_end_matches('/');
    i == PYPI || i == "https://pypi.org/simple"
}

/// The overlay-file suffix of a non-PyPI index: `-cu124` for
/// `https://download.pytorch.org/whl/cu124`.
pub(super) fn suffix_of(index: &str) -> String {
    if is_pypi(index) {
        return String::new();
    }
    let last = index.trim_end_matches('/').rsplit('/').next().unwrap_or("");
    if last == "simple" {
        return String::new(); // PyPI or a mirror of it
    }
    let slug: String = last
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    if slug.is_empty() {
        "-index".into()
    } else {
        format!("-{slug}")
    }
}

/// Imports `requests` (`NAME` or `NAME==VERSION`) from a simple index.
///
/// `base` is the catalog the overlay will sit on: facts an importer cannot derive are kept
/// from it where it has the entry, and pins it lacks are followed.
pub fn import_pypi(
    fetch: &dyn Fetch,
    base: &Catalog,
    requests: &[String],
    opts: &PypiOptions,
) -> Result<Import, ImportError> {
    if let Some(d) = &opts.date {
        check_date(d)?;
    }
    let mut queue: Vec<(String, Option<String>)> = Vec::new();
    for r in requests {
        let (name, version) = match r.split_once("==") {
            Some((n, v)) => (n.trim(), Some(v.trim().to_string())),
            None => (r.trim(), None),
        };
        if name.is_empty() || r.contains(['<', '>', '~', '!']) || version.as_deref() == Some("") {
            return Err(ImportError::Usage(format!(
                "invalid request `{r}`: write NAME or NAME==VERSION"
            )));
        }
        if kind_of(base, name).is_none() {
            return Err(ImportError::UnknownProject(name.to_string()));
        }
        queue.push((name.to_string(), version));
    }
    let mut ctx = Ctx::new(fetch, base, opts);
    let mut i = 0;
    while i < queue.len() {
        let (name, version) = queue[i].clone();
        i += 1;
        let key = (pypi::normalize(&name), version.clone().unwrap_or_default());
        if !ctx.done.insert(key) {
            continue;
        }
        ctx.import_one(&name, version.as_deref())?;
        queue.append(&mut ctx.queue);
    }
    let mut entries = ctx.entries;
    entries.sort_by(|a, b| {
        (a.family, a.table, &a.sort, &a.label).cmp(&(b.family, b.table, &b.sort, &b.label))
    });
    entries.dedup_by(|a, b| a.family == b.family && a.table == b.table && a.label == b.label);
    Ok(Import {
        entries,
        command: "catalog import pypi".into(),
        origin: opts.index.trim_end_matches('/').to_string(),
        file_suffix: suffix_of(opts.recorded()),
        ..Import::default()
    })
}

impl PypiOptions {
    /// The index URL entries record.
    pub(super) fn recorded(&self) -> &str {
        self.record_index
            .as_deref()
            .unwrap_or(&self.index)
            .trim_end_matches('/')
    }
}

pub(super) struct Ctx<'a> {
    pub(super) fetch: &'a dyn Fetch,
    pub(super) base: &'a Catalog,
    pub(super) opts: &'a PypiOptions,
    pub(super) pages: BTreeMap<String, Option<pypi::Page>>,
    pub(super) entries: Vec<Entry>,
    pub(super) done: BTreeSet<(String, String)>,
    /// Pins to follow, filled by `import_one`.
    pub(super) queue: Vec<(String, Option<String>)>,
}

impl<'a> Ctx<'a> {
    /// A run over `base` with nothing read yet.
    pub(super) fn new(fetch: &'a dyn Fetch, base: &'a Catalog, opts: &'a PypiOptions) -> Self {
        Ctx {
            fetch,
            base,
            opts,
            pages: BTreeMap::new(),
            entries: Vec::new(),
            done: BTreeSet::new(),
            queue: Vec::new(),
        }
    }
}

/// What [`Ctx::install_facts`] found: the catalog's `yanked`, `platforms` and
/// `glibc_floor`, as written.
#[derive(Clone, Debug, Default)]
pub(super) struct Facts {
    yanked: Option<Vec<(&'static str, String)>>,
    platforms: Vec<String>,
    floors: Vec<Vec<(&'static str, String)>>,
}

impl Facts {
    /// Adds the facts to an entry (`platforms` only when `with_platforms`).
    pub(super) fn write(&self, e: &mut Entry, with_platforms: bool) {
        if with_platforms && !self.platforms.is_empty() {
            e.set("platforms", Value::Strs(self.platforms.clone()));
        }
        if let Some(y) = &self.yanked {
            e.set("yanked", Value::Table(y.clone()));
        }
        if !self.floors.is_empty() {
            e.set("glibc_floor", Value::Tables(self.floors.clone()));
        }
    }
}

impl Ctx<'_> {
    pub(super) fn page(&mut self, project: &str) -> Result<Option<&pypi::Page>, ImportError> {
        let key = pypi::normalize(project);
        if !self.pages.contains_key(&key) {
            let p = pypi::project_page(self.fetch, &self.opts.index, project)?;
            self.pages.insert(key.clone(), p);
        }
        Ok(self.pages.get(&key).and_then(Option::as_ref))
    }

    /// Whether a release installs, from its project page and, with `md`, its
    /// dependencies' pages (see [`install`]).
    pub(super) fn install_facts(
        &mut self,
        project: &str,
        version: &str,
        md: Option<&pypi::Metadata>,
    ) -> Result<Facts, ImportError> {
        let Some(page) = self.page(project)?.cloned() else {
            return Ok(Facts::default());
        };
        let date = self
            .opts
            .date
            .clone()
            .or_else(|| page.date.clone())
            .unwrap_or_else(today);
        let files: Vec<(&pypi::DistFile, pypi::FileName)> = page
            .files
            .iter()
            .filter_map(|f| pypi::parse_filename(project, &f.filename).map(|n| (f, n)))
            .filter(|(_, n)| n.version == version)
            .collect();
        let refs: Vec<&pypi::DistFile> = files.iter().map(|(f, _)| *f).collect();
        let window = install::python_window(md.and_then(|m| m.requires_python.as_deref()));
        let wheels = install::wheels_of(&files, window);
        let mut facts = Facts {
            yanked: install::yank_of(&refs).map(|reason| {
                let mut t = Vec::new();
                if let Some(r) = reason {
                    t.push(("reason", r));
                }
                t.push(("observed", date.clone()));
                t.push(("source", format!("{} ({})", page.url, page.format)));
                t
            }),
            platforms: wheels.catalog_platforms(),
            floors: Vec::new(),
        };
        let Some(md) = md else {
            return Ok(facts);
        };
        let cpus: Vec<&'static str> = if wheels.best.is_empty() {
            install::CPUS.to_vec()
        } else {
            install::CPUS
                .iter()
                .copied()
                .filter(|c| wheels.best.contains_key(c))
                .collect()
        };
        let reqs: Vec<pypi::Requirement> = md
            .requires_dist
            .iter()
            .filter_map(|r| pypi::parse_requirement(r))
            .filter(|r| r.name != pypi::normalize(project))
            .collect();
        for cpu in cpus {
            let mut best = install::own_floor(&wheels, cpu, &page.url);
            for r in reqs.iter().filter(|r| install::applies(r, cpu)) {
                let Some(dep) = self.page(&r.name)? else {
                    continue;
                };
                if let Some(f) = install::dependency_floor(dep, r, cpu, window) {
                    if best.as_ref().is_none_or(|b| f.glibc > b.glibc) {
                        best = Some(f);
                    }
                }
            }
            if let Some(f) = best {
                facts.floors.push(vec![
                    ("cpu", f.cpu.to_string()),
                    ("glibc", f.glibc.to_string()),
                    ("by", f.by),
                    (
                        "source",
                        if f.url == page.url {
                            format!("{} (wheel tags), read {date}", f.url)
                        } else {
                            format!(
                                "{} (wheel tags), read {date}; the requirement is {}'s Requires-Dist",
                                f.url,
                                pypi::normalize(project)
                            )
                        },
                    ),
                ]);
            }
        }
        Ok(facts)
    }

    /// The files of `version` (or the newest final release) of `project`.
    pub(super) fn release<'p>(
        page: &'p pypi::Page,
        project: &str,
        version: Option<&str>,
    ) -> Result<Release<'p>, ImportError> {
        // A release named exactly may be yanked (PEP 592): it is imported with its
        // `yanked` status; "the newest" is never a yanked one.
        let mut by: BTreeMap<String, Vec<(&pypi::DistFile, pypi::FileName)>> = BTreeMap::new();
        let mut yanked: BTreeMap<String, Vec<(&pypi::DistFile, pypi::FileName)>> = BTreeMap::new();
        for f in &page.files {
            if let Some(n) = pypi::parse_filename(project, &f.filename) {
                let installable = n.wheel.as_ref().is_none_or(pypi::WheelTags::linux_x86_64);
                if installable {
                    let into = if f.yanked { &mut yanked } else { &mut by };
                    into.entry(n.version.clone()).or_default().push((f, n));
                }
            }
        }
        if let Some(want) = version.filter(|w| !by.contains_key(*w)) {
            if let Some(files) = yanked.remove(want) {
                by.insert(want.to_string(), files);
            }
        }
        let parsed = |v: &str| Version::parse(v).ok();
        let have = || {
            let mut v: Vec<Version> = by
                .keys()
                .filter(|v| pypi::is_final(v))
                .filter_map(|v| parsed(v))
                .collect();
            v.sort();
            v.iter().rev().take(5).map(ToString::to_string).collect()
        };
        let chosen = match version {
            Some(want) => {
                let w = parsed(want);
                by.keys()
                    .find(|k| *k == want)
                    .or_else(|| {
                        // `2.4.0` matches `2.4.0+cu121` on a variant index, and `2.4`
                        // matches `2.4.0`.
                        by.keys().find(|k| {
                            let public = k.split('+').next().unwrap_or(k);
                            (!want.contains('+') && public == want)
                                || (w.is_some() && parsed(k) == w)
                        })
                    })
                    .cloned()
            }
            None => by
                .keys()
                .filter(|v| pypi::is_final(v))
                .filter_map(|v| parsed(v).map(|p| (p, v)))
                .max_by(|a, b| a.0.cmp(&b.0))
                .map(|(_, v)| v.clone()),
        };
        let Some(chosen) = chosen else {
            return Err(ImportError::NoRelease {
                project: project.to_string(),
                version: version.map(str::to_string),
                have: have(),
            });
        };
        let mut files = by.remove(&chosen).unwrap_or_default();
        files.sort_by(|a, b| a.0.filename.cmp(&b.0.filename));
        Ok(Release {
            page,
            version: chosen,
            files,
        })
    }

    fn import_one(&mut self, project: &str, version: Option<&str>) -> Result<(), ImportError> {
        let kind = kind_of(self.base, project)
            .ok_or_else(|| ImportError::UnknownProject(project.to_string()))?;
        if let Kind::Lib(cudnn) = kind {
            let public = match version {
                Some(v) => v.to_string(),
                None => {
                    let index = self.opts.index.clone();
                    let page = self.page(project)?.ok_or_else(|| ImportError::NoProject {
                        project: project.to_string(),
                        index,
                    })?;
                    Ctx::release(page, project, None)?.version
                }
            };
            return self.import_lib(cudnn, &public);
        }
        let fetch = self.fetch;
        let opts = self.opts;
        let base = self.base;
        let page = self.page(project)?.ok_or_else(|| ImportError::NoProject {
            project: project.to_string(),
            index: opts.index.clone(),
        })?;
        let rel = Ctx::release(page, project, version)?;
        let md_file = rel.metadata_file();
        let Some(md_file) = md_file else {
            return Err(ImportError::NoRelease {
                project: project.to_string(),
                version: version.map(str::to_string),
                have: Vec::new(),
            });
        };
        let (md, how) = pypi::metadata_of(fetch, md_file)?;
        let source = rel.source(md_file, how, opts);
        let reqs: Vec<pypi::Requirement> = md
            .requires_dist
            .iter()
            .filter_map(|r| pypi::parse_requirement(r))
            .filter(pypi::Requirement::unconditional_on_linux)
            .collect();
        let public = rel
            .version
            .split('+')
            .next()
            .unwrap_or(&rel.version)
            .to_string();
        let Ok(sort) = Version::parse(&public) else {
            return Err(ImportError::Malformed {
                url: page.url.clone(),
                what: format!("version `{public}` is not one the catalog can hold"),
            });
        };
        let got = Pulled {
            base,
            opts,
            project,
            url: &page.url,
            rel: &rel,
            md: &md,
            source,
            reqs,
            public,
            sort,
        };
        let mut follow = Vec::new();
        let mut new = match kind {
            Kind::Torch => got.torch(&mut follow)?,
            Kind::Vllm => vec![got.vllm(&mut follow)],
            Kind::Deepspeed => vec![got.deepspeed()],
            Kind::Extra(component) => vec![got.extra(component)],
            Kind::Lib(_) => unreachable!("handled above"),
        };
        let skipped = rel.files.len() - rel.linux_wheels().len();
        for e in &mut new {
            if e.fields.iter().any(|(k, _)| *k == "files") && skipped > 0 {
                e.notes.push(format!(
                    "{skipped} file(s) for other platforms or the sdist not recorded (the catalog models Linux x86_64)"
                ));
            }
        }
        let rel_version = rel.version.clone();
        let facts = self.install_facts(project, &rel_version, Some(&md))?;
        for e in &mut new {
            if e.table == "release" || e.table == "extra" {
                facts.write(e, e.family != Family::Deepspeed);
            }
        }
        self.entries.extend(new);
        self.queue.extend(follow);
        Ok(())
    }

    /// A cuDNN or NCCL release: which `nvidia-*-cuXX` projects have a Linux x86_64 wheel
    /// of exactly this version (11, 12 and 13 are asked).
    pub(super) fn import_lib(&mut self, cudnn: bool, version: &str) -> Result<(), ImportError> {
        let stem = if cudnn {
            "nvidia-cudnn-cu"
        } else {
            "nvidia-nccl-cu"
        };
        let Ok(sort) = Version::parse(version) else {
            return Err(ImportError::Usage(format!(
                "`{version}` is not a version the catalog can hold"
            )));
        };
        let LibWheels {
            mut majors,
            mut urls,
            mut notes,
            date,
            other_majors,
            other_urls,
            mut other_tags,
            all_files,
        } = self.lib_wheels(stem, version)?;
        let windows_only = majors.is_empty() && !other_majors.is_empty();
        if windows_only {
            majors = other_majors;
            urls = other_urls;
            other_tags.sort();
            notes.push(format!(
                "no Linux wheel on PyPI, only {}: never locked",
                other_tags.join(", ")
            ));
        }
        let refs: Vec<&pypi::DistFile> = all_files.iter().collect();
        let yank = install::yank_of(&refs);
        if majors.is_empty() {
            return Err(ImportError::NoRelease {
                project: format!("{stem}XX"),
                version: Some(version.to_string()),
                have: Vec::new(),
            });
        }
        let family = if cudnn { Family::Cudnn } else { Family::Nccl };
        let mut e = Entry::new(
            family,
            "release",
            format!("{} {version}", family.name()),
            sort.clone(),
        );
        e.str("version", version);
        e.set("cuda_majors", Value::Ints(majors));
        if windows_only {
            e.set("platforms", Value::Strs(other_tags));
        }
        if let Some(reason) = yank {
            let mut t = Vec::new();
            if let Some(r) = reason {
                t.push(("reason", r));
            }
            t.push(("observed", date.clone().unwrap_or_else(today)));
            t.push(("source", urls.join(", ")));
            e.set("yanked", Value::Table(t));
        }
        let list = if cudnn {
            &self.base.cudnn
        } else {
            &self.base.nccl
        };
        let known = list.iter().find(|l| l.version == sort);
        e.not_derived(
            "min_cc",
            "the lowest compute capability is in NVIDIA's support matrix, not the package metadata",
            known.and_then(|k| {
                k.min_cc
                    .map(|c| (Value::Str(c.to_string()), k.origin.location()))
            }),
            false,
        );
        e.source = format!(
            "{} (PEP 691/503 project pages: a Linux x86_64 wheel of this exact version per CUDA major), read {}",
            urls.join(", "),
            date.unwrap_or_else(today)
        );
        e.notes = notes;
        self.entries.push(e);
        Ok(())
    }

    /// Which `{stem}11`, `{stem}12` and `{stem}13` projects have wheels of exactly
    /// `version`: those with a Linux x86_64 wheel, and those with other wheels only.
    fn lib_wheels(&mut self, stem: &str, version: &str) -> Result<LibWheels, ImportError> {
        let mut majors = Vec::new();
        let mut urls = Vec::new();
        let mut notes = Vec::new();
        let mut date = None;
        // Majors with only non-Linux wheels (8.9.5.29: `win_amd64`), and whether every file
        // of every major is yanked.
        let mut other_majors = Vec::new();
        let mut other_urls = Vec::new();
        let mut other_tags: Vec<String> = Vec::new();
        let mut all_files: Vec<pypi::DistFile> = Vec::new();
        for major in [11u64, 12, 13] {
            let project = format!("{stem}{major}");
            let opts = self.opts;
            let Some(page) = self.page(&project)? else {
                continue;
            };
            let files: Vec<(&pypi::DistFile, pypi::FileName)> = page
                .files
                .iter()
                .filter_map(|f| pypi::parse_filename(&project, &f.filename).map(|n| (f, n)))
                .filter(|(_, n)| n.version == version && n.wheel.is_some())
                .collect();
            if files.is_empty() {
                continue;
            }
            all_files.extend(files.iter().map(|(f, _)| (*f).clone()));
            let linux: Vec<&(&pypi::DistFile, pypi::FileName)> = files
                .iter()
                .filter(|(_, n)| n.wheel.as_ref().is_some_and(pypi::WheelTags::linux_x86_64))
                .collect();
            let page_date = opts.date.clone().or_else(|| page.date.clone());
            if linux.is_empty() {
                other_majors.push(major);
                other_urls.push(page.url.clone());
                let w = install::wheels_of(&files, (9, 14));
                for t in w.other {
                    if !other_tags.contains(&t) {
                        other_tags.push(t);
                    }
                }
                if date.is_none() {
                    date = page_date;
                }
                continue;
            }
            majors.push(major);
            urls.push(page.url.clone());
            if date.is_none() {
                date = page_date;
            }
            for (f, _) in linux {
                if let Some(h) = &f.sha256 {
                    notes.push(format!("{} sha256 {h}", f.filename));
                }
            }
        }
        Ok(LibWheels {
            majors,
            urls,
            notes,
            date,
            other_majors,
            other_urls,
            other_tags,
            all_files,
        })
    }
}

/// The wheels of one cuDNN or NCCL version across the CUDA majors' projects.
struct LibWheels {
    /// Majors with a Linux x86_64 wheel.
    majors: Vec<u64>,
    /// Their project pages.
    urls: Vec<String>,
    /// One `file sha256 …` note per Linux wheel.
    notes: Vec<String>,
    /// The date the pages were read.
    date: Option<String>,
    /// Majors with only non-Linux wheels (8.9.5.29: `win_amd64`).
    other_majors: Vec<u64>,
    /// Their project pages.
    other_urls: Vec<String>,
    /// Those wheels' platform tags.
    other_tags: Vec<String>,
    /// Every file of the version, for its yanked status.
    all_files: Vec<pypi::DistFile>,
}
