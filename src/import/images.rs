//! NVIDIA's `nvidia/cuda` tag lists: `doc/supported-tags.md` and `doc/unsupported-tags.md`
//! of gitlab.com/nvidia/container-images/cuda, one Markdown file per status.
//!
//! ```text
//! ## Supported tags                        ## Unsupported tags
//! ### ubuntu24.04                          ### ubuntu24.04
//! #### CUDA 13.2.1                         #### CUDA 13.2.0
//! - [`13.2.1-base-ubuntu24.04` (*…*)](…)   - `13.2.0-base-ubuntu24.04`
//! ```
//!
//! A tag's CUDA release is the text before its first `-` (the `####` heading is not used:
//! old sections read `#### CUDA 11.2 Update 2`), its OS the `###` section it is listed
//! under, and every tag must end with `-<os>`. The lists say nothing of the cuDNN inside
//! the `cudnn` tags or of digests, so those are kept from the catalog.

use std::collections::BTreeMap;

use super::{Entry, Family, Import, ImportError, NotDerived, Value};
use crate::catalog::{BaseImage, Catalog, DigestKind};
use crate::core::version::Version;

/// Where NVIDIA publishes the lists: the directory a list's file name is appended to.
pub const UPSTREAM_DOC: &str = "https://gitlab.com/nvidia/container-images/cuda/-/blob/master/doc";

/// Which list a file is, from its first heading.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    /// `## Supported tags`.
    Supported,
    /// `## Unsupported tags` ("these tags still exist and may contain critical
    /// vulnerabilities").
    Unsupported,
}

impl Status {
    /// The catalog's `status = "…"`.
    pub fn name(self) -> &'static str {
        match self {
            Status::Supported => "supported",
            Status::Unsupported => "unsupported",
        }
    }

    /// The list's file name upstream: `supported-tags.md`.
    pub fn file_name(self) -> &'static str {
        match self {
            Status::Supported => "supported-tags.md",
            Status::Unsupported => "unsupported-tags.md",
        }
    }
}

/// One parsed list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagList {
    /// Which list it is.
    pub status: Status,
    /// The URL its entries cite.
    pub source: String,
    /// Tags by (CUDA release, OS), in the order listed.
    pub groups: BTreeMap<(Version, String), Vec<String>>,
}

/// Parses a list. `shown` names it in errors (a path or URL); `origin` is the directory
/// URL it was published under (a URL given on the command line is its own source: pass
/// its directory), and the entries cite `<origin>/<supported-tags.md|unsupported-tags.md>`.
pub fn parse(shown: &str, origin: &str, text: &str) -> Result<TagList, ImportError> {
    let bad = |line: usize, what: String| ImportError::Malformed {
        url: shown.to_string(),
        what: if line == 0 {
            what
        } else {
            format!("line {line}: {what}")
        },
    };
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let status = match first {
        "## Supported tags" => Status::Supported,
        "## Unsupported tags" => Status::Unsupported,
        other => {
            return Err(bad(
                0,
                format!("not one of NVIDIA's nvidia/cuda tag lists: it starts with `{other}`, not `## Supported tags` or `## Unsupported tags`"),
            ))
        }
    };
    let mut os: Option<&str> = None;
    let mut groups: BTreeMap<(Version, String), Vec<String>> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if let Some(h) = line.strip_prefix("### ") {
            os = Some(h.trim());
            continue;
        }
        let Some(item) = line.strip_prefix("- ") else {
            continue;
        };
        let tag = item
            .split('`')
            .nth(1)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| bad(n, format!("a list item without a `tag`: `{line}`")))?;
        let os = os.ok_or_else(|| {
            bad(
                n,
                format!("tag `{tag}` comes before any `### <os>` heading"),
            )
        })?;
        let cuda = tag.split('-').next().and_then(|v| Version::parse(v).ok());
        let fits = tag
            .strip_suffix(os)
            .is_some_and(|rest| rest.ends_with('-') && rest.matches('-').count() >= 2);
        let (Some(cuda), true) = (cuda, fits) else {
            return Err(bad(
                n,
                format!("tag `{tag}` under `### {os}` is not `<cuda>-<flavour>-{os}`"),
            ));
        };
        let tags = groups.entry((cuda, os.to_string())).or_default();
        if !tags.iter().any(|t| t == tag) {
            tags.push(tag.to_string());
        }
    }
    if groups.is_empty() {
        return Err(bad(0, "the list has no tags".into()));
    }
    Ok(TagList {
        status,
        source: format!("{}/{}", origin.trim_end_matches('/'), status.file_name()),
        groups,
    })
}

/// `[[image]]` entries from the lists (at most one of each status): one per CUDA release
/// and OS that the catalog models. `date` is the day the lists were read.
pub fn import(base: &Catalog, lists: &[TagList], date: &str) -> Result<Import, ImportError> {
    super::check_date(date)?;
    for s in [Status::Supported, Status::Unsupported] {
        let of: Vec<&str> = lists
            .iter()
            .filter(|l| l.status == s)
            .map(|l| l.source.as_str())
            .collect();
        if of.len() > 1 {
            return Err(ImportError::Usage(format!(
                "{} {} lists given ({}): give one of each, from the same commit",
                of.len(),
                s.name(),
                of.join(", ")
            )));
        }
    }
    // Supported first: a pair both lists hold is written as supported, and noted.
    let mut ordered: Vec<&TagList> = lists.iter().collect();
    ordered.sort_by_key(|l| l.status);
    let mut picked: BTreeMap<(Version, String), (&TagList, &Vec<String>)> = BTreeMap::new();
    let mut both = Vec::new();
    let mut no_cuda: BTreeMap<Version, Vec<String>> = BTreeMap::new();
    let mut no_os: BTreeMap<String, usize> = BTreeMap::new();
    for l in ordered {
        for ((cuda, os), tags) in &l.groups {
            if !base.cuda.iter().any(|c| &c.version == cuda) {
                no_cuda.entry(cuda.clone()).or_default().push(os.clone());
                continue;
            }
            if !base.os.iter().any(|o| &o.id == os) {
                *no_os.entry(os.clone()).or_default() += 1;
                continue;
            }
            let key = (cuda.clone(), os.clone());
            if picked.contains_key(&key) {
                both.push(format!("{cuda} {os}"));
                continue;
            }
            picked.insert(key, (l, tags));
        }
    }
    let os_rank = |os: &str| base.os.iter().position(|o| o.id == os);
    let mut keys: Vec<&(Version, String)> = picked.keys().collect();
    keys.sort_by(|a, b| (&a.0, os_rank(&a.1)).cmp(&(&b.0, os_rank(&b.1))));
    let mut entries = Vec::new();
    let mut changed = Vec::new();
    for key in keys {
        let (list, tags) = picked[key];
        let (cuda, os) = key;
        let label = format!("image {cuda} {os}");
        let mut e = Entry::new(Family::Image, "image", label.clone(), cuda.clone());
        e.str("cuda", cuda.to_string());
        e.str("os", os.clone());
        e.set("tags", Value::Strs(tags.clone()));
        e.str("status", list.status.name());
        let known = base.image(cuda, os);
        keep(&mut e, known, tags);
        if let Some(k) = known {
            changed.extend(differences(&label, k, list.status, tags));
        } else {
            changed.push(format!("{label}: new (the catalog has no entry)"));
        }
        if both.iter().any(|b| *b == format!("{cuda} {os}")) {
            e.notes
                .push("also in the unsupported list; written as supported".to_string());
        }
        if base
            .cuda
            .iter()
            .any(|c| &c.version == cuda && c.redist_only)
        {
            e.notes.push(format!(
                "CUDA {cuda} is `redist_only` in the catalog: rule `cuda.redist-only` keeps it out of locks whatever its images"
            ));
        }
        e.source = format!(
            "{} (NVIDIA's list of {} nvidia/cuda tags), read {date}",
            list.source,
            list.status.name()
        );
        entries.push(e);
    }
    let mut not_written: Vec<String> = no_cuda
        .into_iter()
        .map(|(v, oses)| {
            format!(
                "CUDA {v} ({} OS{}): not a release in cuda.toml",
                oses.len(),
                if oses.len() == 1 { "" } else { "es" }
            )
        })
        .collect();
    not_written.extend(no_os.into_iter().map(|(os, n)| {
        format!(
            "OS {os} ({n} CUDA release{}): not an OS in os.toml",
            if n == 1 { "" } else { "s" }
        )
    }));
    let origin = lists
        .iter()
        .map(|l| l.source.as_str())
        .collect::<Vec<_>>()
        .join(" and ");
    Ok(Import {
        entries,
        command: "catalog import images".into(),
        origin: format!("NVIDIA's nvidia/cuda tag lists ({origin})"),
        file_suffix: String::new(),
        not_written,
        changed,
    })
}

/// Keeps what the lists do not carry from the catalog's entry: the cuDNN inside the
/// `cudnn` tags and the dated digest observations of the tags still listed.
fn keep(e: &mut Entry, known: Option<&BaseImage>, tags: &[String]) {
    let at = known.map(|k| k.origin.location());
    if let Some(c) = known.and_then(|k| k.cudnn.as_ref()) {
        e.fields.push(("cudnn", Value::Str(c.to_string())));
        e.not_derived.push(NotDerived {
            field: "cudnn",
            why: "the cuDNN inside the `cudnn` tags is in each Dockerfile, not the tag list".into(),
            kept_from: at.clone(),
        });
    }
    let all = known.map(|k| k.digests.as_slice()).unwrap_or_default();
    let (digests, dropped): (Vec<_>, Vec<_>) = all.iter().partition(|d| tags.contains(&d.tag));
    for d in &dropped {
        e.notes.push(format!(
            "the catalog's digest observation for `{}` is dropped: the list no longer has the tag",
            d.tag
        ));
    }
    for d in &digests {
        e.children.push((
            "image.digest",
            vec![
                ("tag", Value::Str(d.tag.clone())),
                ("digest", Value::Str(d.digest.clone())),
                ("observed", Value::Str(d.observed.clone())),
                ("source", Value::Str(d.source.clone())),
                ("kind", Value::Str(kind_name(d.kind).into())),
            ],
        ));
    }
    if !digests.is_empty() {
        e.not_derived.push(NotDerived {
            field: "digest",
            why: "the lists carry no digests; each is a dated observation".into(),
            kept_from: at,
        });
    }
}

fn kind_name(k: DigestKind) -> &'static str {
    match k {
        DigestKind::Index => "index",
        DigestKind::Manifest => "manifest",
        _ => "unknown",
    }
}

/// How a listed pair differs from the catalog's entry, for review.
fn differences(label: &str, k: &BaseImage, status: Status, tags: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let was = k.status.name();
    if was != status.name() {
        out.push(format!("{label}: status {was} -> {}", status.name()));
    }
    let added: Vec<&str> = tags
        .iter()
        .filter(|t| !k.tags.contains(t))
        .map(String::as_str)
        .collect();
    let gone: Vec<&str> = k
        .tags
        .iter()
        .filter(|t| !tags.contains(t))
        .map(String::as_str)
        .collect();
    if !added.is_empty() {
        out.push(format!("{label}: tags added: {}", added.join(", ")));
    }
    if !gone.is_empty() {
        out.push(format!(
            "{label}: tags no longer listed: {}",
            gone.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUPPORTED: &str = "## Supported tags\n\n### ubuntu24.04\n\n#### CUDA 12.6.3\n\n\
        - [`12.6.3-base-ubuntu24.04` (*12.6.3/ubuntu24.04/base/Dockerfile*)](https://gitlab.com/x)\n\
        - [`12.6.3-runtime-ubuntu24.04` (*12.6.3/ubuntu24.04/runtime/Dockerfile*)](https://gitlab.com/y)\n\n\
        ### ubi9\n\n#### CUDA 11.2 Update 2\n\n- [`11.2.2-base-ubi9` (*…*)](…)\n";

    #[test]
    fn the_release_comes_from_the_tag_and_the_os_from_the_section() {
        let l = parse("s.md", UPSTREAM_DOC, SUPPORTED).unwrap();
        assert_eq!(l.status, Status::Supported);
        assert_eq!(
            l.source,
            "https://gitlab.com/nvidia/container-images/cuda/-/blob/master/doc/supported-tags.md"
        );
        let keys: Vec<String> = l.groups.keys().map(|(v, o)| format!("{v} {o}")).collect();
        assert_eq!(keys, ["11.2.2 ubi9", "12.6.3 ubuntu24.04"]);
    }

    #[test]
    fn what_is_not_a_tag_list_is_refused_with_the_line() {
        let e = parse("x.md", UPSTREAM_DOC, "# README\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot read `x.md`: not one of NVIDIA's nvidia/cuda tag lists: it starts with `# README`, not `## Supported tags` or `## Unsupported tags`"
        );
        let e = parse(
            "x.md",
            UPSTREAM_DOC,
            "## Unsupported tags\n### ubuntu22.04\n- `12.0.0-base-ubuntu20.04`\n",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot read `x.md`: line 3: tag `12.0.0-base-ubuntu20.04` under `### ubuntu22.04` is not `<cuda>-<flavour>-ubuntu22.04`"
        );
    }

    /// The stock catalog's digests and cuDNN are kept, and what the catalog does not model
    /// is listed, not written.
    #[test]
    fn keeps_digests_and_lists_what_it_leaves_out() {
        let cat = Catalog::stock().unwrap();
        let l = parse("s.md", UPSTREAM_DOC, SUPPORTED).unwrap();
        let imp = import(&cat, &[l], "2026-11-26").unwrap();
        assert_eq!(imp.entries.len(), 1);
        let files = imp.files();
        assert_eq!(files[0].name, "images.toml");
        let text = &files[0].contents;
        assert!(text.contains("family = \"image\""), "{text}");
        assert!(
            text.contains("\n[[image.digest]]\ntag = \"12.6.3-runtime-ubuntu24.04\""),
            "{text}"
        );
        assert!(
            text.contains("digest observation for `12.6.3-devel-ubuntu24.04` is dropped"),
            "{text}"
        );
        assert!(
            text.contains("tags = [\"12.6.3-base-ubuntu24.04\", \"12.6.3-runtime-ubuntu24.04\"]"),
            "{text}"
        );
        assert_eq!(
            imp.not_written,
            ["CUDA 11.2.2 (1 OS): not a release in cuda.toml"]
        );
        assert_eq!(
            imp.changed,
            ["image 12.6.3 ubuntu24.04: tags no longer listed: 12.6.3-devel-ubuntu24.04, 12.6.3-cudnn-runtime-ubuntu24.04, 12.6.3-cudnn-devel-ubuntu24.04"]
        );
    }
}
