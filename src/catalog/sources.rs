//! `gpustack catalog validate --sources`: what kind of source each catalog fact cites, and
//! which facts cite only pages the public tools cannot open.
//!
//! A *fact* here is one `source = "…"` (or `<field>_source = "…"`) line of a catalog file:
//! an entry, or a sub-table such as a dated digest observation. Its source text is split
//! into citations: every URL in it, plus a PyPI citation written as text (`PyPI
//! cuda-toolkit==13.3.0`). The report works per source line, not per field: a source that
//! cites a vendor page for the driver minimum and PyPI for the version counts as having a
//! second public source.

use std::collections::BTreeMap;
use std::fmt;

/// What one citation points at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SourceKind {
    /// A GitHub repository at a commit (`/blob/<40 hex>/…`, `/commit/<40 hex>`).
    GithubCommit,
    /// A GitHub URL at a branch or tag, or a repository page (it may move).
    Github,
    /// PyPI: a project or file URL, or a `PyPI …` citation.
    Pypi,
    /// A vendor documentation page (docs.nvidia.com, developer.nvidia.com, NGC catalog).
    VendorPage,
    /// A vendor download or registry (developer.download.nvidia.com, nvcr.io, …).
    VendorDownload,
    /// Any other URL.
    OtherUrl,
    /// Text without a URL: a citation a reader looks up by name.
    Citation,
}

impl SourceKind {
    /// The report's name for it.
    pub fn name(self) -> &'static str {
        match self {
            SourceKind::GithubCommit => "github-commit",
            SourceKind::Github => "github",
            SourceKind::Pypi => "pypi",
            SourceKind::VendorPage => "vendor-page",
            SourceKind::VendorDownload => "vendor-download",
            SourceKind::OtherUrl => "other-url",
            SourceKind::Citation => "citation",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            SourceKind::GithubCommit => "a GitHub repository at a commit",
            SourceKind::Github => "GitHub at a branch or tag (may move)",
            SourceKind::Pypi => "PyPI (a project, a file, or `PyPI name==version`)",
            SourceKind::VendorPage => "a vendor documentation page",
            SourceKind::VendorDownload => "a vendor download or registry",
            SourceKind::OtherUrl => "another public URL",
            SourceKind::Citation => "text without a URL",
        }
    }
}

/// Hosts whose pages the public-source tools could not open (issue 33: the CUDA release
/// notes' driver tables were confirmed only through second public copies). A fact whose
/// every citation is on one of these is listed for a second public source.
pub const CLOSED_HOSTS: &[&str] = &[
    "docs.nvidia.com",
    "developer.nvidia.com",
    "catalog.ngc.nvidia.com",
];

/// One fact's source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fact {
    /// `catalog/cuda.toml`.
    pub file: String,
    /// 1-based line of the `source` key.
    pub line: usize,
    /// The table it belongs to: `release`, `image.digest`.
    pub table: String,
    /// The key: `source`, `image_digest_source`.
    pub key: String,
    /// The source text.
    pub source: String,
    /// Its citations' kinds, first cited first.
    pub kinds: Vec<SourceKind>,
    /// Every citation is on a [`CLOSED_HOSTS`] page.
    pub closed_only: bool,
}

/// The report: every fact's source, by file and line.
#[derive(Clone, Debug, Default)]
pub struct SourceReport {
    /// Files read.
    pub files: usize,
    /// Every fact, in file then line order.
    pub facts: Vec<Fact>,
}

impl SourceReport {
    /// Facts per kind of their first citation.
    pub fn by_kind(&self) -> BTreeMap<SourceKind, usize> {
        let mut m = BTreeMap::new();
        for f in &self.facts {
            if let Some(k) = f.kinds.first() {
                *m.entry(*k).or_default() += 1;
            }
        }
        m
    }

    /// Facts that cite each kind anywhere in their source.
    pub fn citing(&self) -> BTreeMap<SourceKind, usize> {
        let mut m = BTreeMap::new();
        for f in &self.facts {
            let mut ks = f.kinds.clone();
            ks.sort();
            ks.dedup();
            for k in ks {
                *m.entry(k).or_default() += 1;
            }
        }
        m
    }

    /// Facts whose only sources are pages the public tools cannot open.
    pub fn closed_only(&self) -> impl Iterator<Item = &Fact> {
        self.facts.iter().filter(|f| f.closed_only)
    }
}

impl fmt::Display for SourceReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} facts with a source in {} files, by the kind of their first citation (and how many cite the kind at all):",
            self.facts.len(),
            self.files
        )?;
        let citing = self.citing();
        for (k, n) in self.by_kind() {
            writeln!(
                f,
                "  {:<16} {n:>5}  ({:>4} cite it)  {}",
                k.name(),
                citing.get(&k).copied().unwrap_or(0),
                k.describe()
            )?;
        }
        let closed: Vec<&Fact> = self.closed_only().collect();
        writeln!(
            f,
            "\n{} facts cite only pages the public tools cannot open ({}); each needs a second public source:",
            closed.len(),
            CLOSED_HOSTS.join(", ")
        )?;
        for c in closed {
            writeln!(f, "  {}:{} [[{}]] {}", c.file, c.line, c.table, c.source)?;
        }
        Ok(())
    }
}

/// Reads the sources of catalog files given as (display path, TOML text).
pub fn report(files: &[(String, String)]) -> SourceReport {
    let mut facts = Vec::new();
    for (path, text) in files {
        let mut table = String::new();
        for (i, line) in text.lines().enumerate() {
            let t = line.trim_start();
            if let Some(h) = t.strip_prefix("[[").and_then(|h| h.split("]]").next()) {
                table = h.trim().to_string();
                continue;
            }
            if let Some(h) = t.strip_prefix('[').and_then(|h| h.split(']').next()) {
                table = h.trim().to_string();
                continue;
            }
            let Some((key, _)) = t.split_once('=') else {
                continue;
            };
            let key = key.trim();
            if key != "source" && !key.ends_with("_source") {
                continue;
            }
            let Ok(v) = toml::from_str::<toml::Table>(t) else {
                continue;
            };
            let Some(source) = v.get(key).and_then(toml::Value::as_str) else {
                continue;
            };
            let (kinds, closed_only) = classify(source);
            facts.push(Fact {
                file: path.clone(),
                line: i + 1,
                table: table.clone(),
                key: key.to_string(),
                source: source.to_string(),
                kinds,
                closed_only,
            });
        }
    }
    SourceReport {
        files: files.len(),
        facts,
    }
}

/// The kinds of a source's citations, and whether every one is on a closed host.
fn classify(source: &str) -> (Vec<SourceKind>, bool) {
    let mut kinds = Vec::new();
    let mut open = false;
    for url in urls(source) {
        let host = url
            .split("://")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .unwrap_or("");
        if !CLOSED_HOSTS.contains(&host) {
            open = true;
        }
        kinds.push(kind_of(host, url));
    }
    if mentions_pypi(source) && !kinds.contains(&SourceKind::Pypi) {
        kinds.push(SourceKind::Pypi);
        open = true;
    }
    if kinds.is_empty() {
        return (vec![SourceKind::Citation], false);
    }
    (kinds, !open)
}

fn urls(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("http") {
        let tail = &rest[i..];
        if tail.starts_with("https://") || tail.starts_with("http://") {
            let end = tail
                .find(|c: char| c.is_whitespace() || matches!(c, ')' | ',' | ';' | '\'' | '"'))
                .unwrap_or(tail.len());
            out.push(&tail[..end]);
            rest = &tail[end..];
        } else {
            rest = &tail[4..];
        }
    }
    out
}

fn mentions_pypi(text: &str) -> bool {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| w == "PyPI")
}

fn kind_of(host: &str, url: &str) -> SourceKind {
    let at_commit = |u: &str| {
        u.split('/')
            .any(|seg| seg.len() == 40 && seg.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    match host {
        "github.com" | "raw.githubusercontent.com" | "gitlab.com" if at_commit(url) => {
            SourceKind::GithubCommit
        }
        "github.com" | "raw.githubusercontent.com" => SourceKind::Github,
        "pypi.org" | "files.pythonhosted.org" => SourceKind::Pypi,
        h if CLOSED_HOSTS.contains(&h) || h.ends_with("nvidia.com") && !h.contains("download") => {
            SourceKind::VendorPage
        }
        "developer.download.nvidia.com"
        | "download.nvidia.com"
        | "nvcr.io"
        | "us.download.nvidia.com" => SourceKind::VendorDownload,
        _ => SourceKind::OtherUrl,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_each_citation() {
        let k = |s: &str| classify(s);
        assert_eq!(
            k("https://docs.nvidia.com/cuda/archive/13.2.2/cuda-toolkit-release-notes/index.html (Table 3)"),
            (vec![SourceKind::VendorPage], true)
        );
        assert_eq!(
            k("https://docs.nvidia.com/x (Table 3); PyPI cuda-toolkit==13.3.0"),
            (vec![SourceKind::VendorPage, SourceKind::Pypi], false)
        );
        assert_eq!(
            k("https://github.com/NixOS/nixpkgs/blob/d3014e3b99f507913efac23a7278d0d00544f424/pkgs/x.json (manifest)"),
            (vec![SourceKind::GithubCommit], false)
        );
        assert_eq!(
            k("https://github.com/NVIDIA/nccl/releases/tag/v2.21.5-1"),
            (vec![SourceKind::Github], false)
        );
        assert_eq!(
            k("ptxas --help from nvcc 13.4"),
            (vec![SourceKind::Citation], false)
        );
        assert_eq!(
            k("https://developer.download.nvidia.com/compute/cuda/redist/redistrib_12.6.3.json"),
            (vec![SourceKind::VendorDownload], false)
        );
    }

    #[test]
    fn reads_sources_with_their_table_and_line() {
        let files = vec![(
            "catalog/images.toml".to_string(),
            "family = \"image\"\n\n[[image]]\ncuda = \"12.4.1\"\nsource = \"https://docs.nvidia.com/a\"\n\n[[image.digest]]\nsource = \"https://github.com/o/r/blob/0123456789012345678901234567890123456789/f\"\n".to_string(),
        )];
        let r = report(&files);
        assert_eq!(r.facts.len(), 2);
        assert_eq!((r.facts[0].line, r.facts[0].table.as_str()), (5, "image"));
        assert_eq!(
            (r.facts[1].line, r.facts[1].table.as_str()),
            (8, "image.digest")
        );
        assert_eq!(r.closed_only().count(), 1);
        let text = r.to_string();
        assert!(
            text.contains("  catalog/images.toml:5 [[image]] https://docs.nvidia.com/a\n"),
            "{text}"
        );
    }
}
