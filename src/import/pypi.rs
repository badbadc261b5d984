//! The Python package index side: project pages from the simple API (PEP 691 JSON, or
//! PEP 503 HTML with PEP 658/714 attributes, which download.pytorch.org serves), core
//! metadata (PEP 658 `.metadata` files, else range reads of the wheel), wheel file names
//! (PEP 427 tags) and the few PEP 508 requirement forms the catalog needs.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use super::http::{Fetch, Request, Response};
use super::{archive, ImportError};

/// PEP 691's JSON, preferred; HTML as the fallback.
pub(crate) const ACCEPT: &str =
    "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01";

/// One file on a project page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DistFile {
    pub(crate) filename: String,
    /// Absolute URL, without fragment.
    pub(crate) url: String,
    /// Hex sha256, when the page gives it.
    pub(crate) sha256: Option<String>,
    pub(crate) requires_python: Option<String>,
    /// PEP 658/714: the `.metadata` file exists; its sha256 when given.
    pub(crate) core_metadata: Option<Option<String>>,
    pub(crate) yanked: bool,
    /// PEP 592: the reason the index gives for the yank, when it gives one.
    pub(crate) yanked_reason: Option<String>,
    /// PEP 700 `upload-time` (`2026-07-20T19:56:36.678707Z`), when the index gives it.
    pub(crate) upload_time: Option<String>,
}

/// A project page, as read.
#[derive(Clone, Debug)]
pub(crate) struct Page {
    /// The page URL (`https://pypi.org/simple/torch/`).
    pub(crate) url: String,
    /// `2026-11-25`, from the response's `Date` header.
    pub(crate) date: Option<String>,
    /// `PEP 691 JSON` or `PEP 503 HTML`, for the sources.
    pub(crate) format: &'static str,
    pub(crate) files: Vec<DistFile>,
}

/// PEP 503 normalized name.
pub(crate) fn normalize(name: &str) -> String {
    crate::catalog::pep503(name)
}

/// The project page URL on `index`.
pub(crate) fn page_url(index: &str, project: &str) -> String {
    format!("{}/{}/", index.trim_end_matches('/'), normalize(project))
}

/// Reads a project page; `Ok(None)` for a 404 (no such project on this index).
pub(crate) fn project_page(
    fetch: &dyn Fetch,
    index: &str,
    project: &str,
) -> Result<Option<Page>, ImportError> {
    let url = page_url(index, project);
    let r = fetch
        .fetch(&Request {
            url: url.clone(),
            accept: Some(ACCEPT),
            range: None,
        })
        .map_err(ImportError::Fetch)?;
    match r.status {
        200 => parse_page(&url, &r).map(Some),
        404 | 410 => Ok(None),
        s => Err(ImportError::Status { url, status: s }),
    }
}

pub(crate) fn parse_page(url: &str, r: &Response) -> Result<Page, ImportError> {
    let date = r.date.as_deref().and_then(super::http::http_date_to_iso);
    let ct = r.content_type.as_deref().unwrap_or("");
    let text = String::from_utf8_lossy(&r.body);
    let (format, files) = if ct.contains("json") || text.trim_start().starts_with('{') {
        ("PEP 691 JSON", parse_json(url, &text)?)
    } else {
        ("PEP 503 HTML", parse_html(url, &text))
    };
    Ok(Page {
        url: url.to_string(),
        date,
        format,
        files,
    })
}

fn parse_json(url: &str, text: &str) -> Result<Vec<DistFile>, ImportError> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| ImportError::Malformed {
        url: url.to_string(),
        what: format!("not PEP 691 JSON: {e}"),
    })?;
    let mut out = Vec::new();
    for f in v["files"].as_array().into_iter().flatten() {
        let Some(filename) = f["filename"].as_str() else {
            continue;
        };
        let Some(href) = f["url"].as_str() else {
            continue;
        };
        let hash_of = |v: &serde_json::Value| v["sha256"].as_str().map(str::to_string);
        // PEP 714 renamed `data-dist-info-metadata` to `core-metadata`; read both.
        let md = f
            .get("core-metadata")
            .or_else(|| f.get("dist-info-metadata"));
        let core_metadata = match md {
            None | Some(serde_json::Value::Bool(false) | serde_json::Value::Null) => None,
            Some(serde_json::Value::Bool(true)) => Some(None),
            Some(o) => Some(hash_of(o)),
        };
        out.push(DistFile {
            filename: filename.to_string(),
            url: join(url, href),
            sha256: hash_of(&f["hashes"]),
            requires_python: f["requires-python"].as_str().map(str::to_string),
            core_metadata,
            yanked: f["yanked"].as_bool().unwrap_or(false) || f["yanked"].is_string(),
            yanked_reason: f["yanked"]
                .as_str()
                .map(str::trim)
                .filter(|r| !r.is_empty())
                .map(str::to_string),
            upload_time: f["upload-time"].as_str().map(str::to_string),
        });
    }
    Ok(out)
}

/// PEP 503 HTML: `<a href="URL#sha256=…" data-requires-python="…"
/// data-core-metadata="sha256=…">name</a>`. A small tolerant scanner, not an HTML parser.
fn parse_html(url: &str, text: &str) -> Vec<DistFile> {
    let mut out = Vec::new();
    let lower = text.to_ascii_lowercase();
    let mut at = 0;
    while let Some(i) = lower[at..].find("<a ") {
        let start = at + i;
        let Some(close) = lower[start..].find('>') else {
            break;
        };
        let tag = &text[start..start + close];
        let Some(end) = lower[start + close..].find("</a>") else {
            break;
        };
        let inner = text[start + close + 1..start + close + end].trim();
        at = start + close + end;
        let attrs = attributes(tag);
        let Some(href) = attrs.get("href") else {
            continue;
        };
        let (href, fragment) = href.split_once('#').unwrap_or((href, ""));
        let sha256 = fragment.strip_prefix("sha256=").map(str::to_string);
        let md = attrs
            .get("data-core-metadata")
            .or_else(|| attrs.get("data-dist-info-metadata"));
        let core_metadata = md.map(|v| v.strip_prefix("sha256=").map(str::to_string));
        let filename = if inner.is_empty() {
            href.rsplit('/').next().unwrap_or(href).to_string()
        } else {
            inner.to_string()
        };
        out.push(DistFile {
            filename: unescape(&filename),
            url: join(url, &unescape(href)),
            sha256,
            requires_python: attrs.get("data-requires-python").cloned(),
            core_metadata,
            yanked: attrs.contains_key("data-yanked"),
            yanked_reason: attrs
                .get("data-yanked")
                .map(|r| r.trim())
                .filter(|r| !r.is_empty())
                .map(str::to_string),
            upload_time: None,
        });
    }
    out
}

fn attributes(tag: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let b = tag.as_bytes();
    let mut i = 2; // after `<a`
    while i < b.len() {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let ks = i;
        while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'=' && b[i] != b'/' {
            i += 1;
        }
        let key = tag[ks..i].to_ascii_lowercase();
        if key.is_empty() {
            i += 1;
            continue;
        }
        if i < b.len() && b[i] == b'=' {
            i += 1;
            let (vs, ve, next) = if i < b.len() && (b[i] == b'"' || b[i] == b'\'') {
                let q = b[i];
                let vs = i + 1;
                let ve = tag[vs..]
                    .bytes()
                    .position(|c| c == q)
                    .map_or(b.len(), |p| vs + p);
                (vs, ve, ve + 1)
            } else {
                let vs = i;
                let ve = tag[vs..]
                    .bytes()
                    .position(|c| c.is_ascii_whitespace())
                    .map_or(b.len(), |p| vs + p);
                (vs, ve, ve)
            };
            out.insert(key, unescape(&tag[vs..ve]));
            i = next;
        } else {
            out.insert(key, String::new());
        }
    }
    out
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&amp;", "&")
}

/// Resolves `href` against the page URL (absolute, root-relative or relative).
fn join(base: &str, href: &str) -> String {
    if href.contains("://") {
        return href.to_string();
    }
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    if let Some(rest) = href.strip_prefix('/') {
        let host_end = base[scheme_end..]
            .find('/')
            .map_or(base.len(), |i| scheme_end + i);
        return format!("{}/{rest}", &base[..host_end]);
    }
    let dir = &base[..=base.rfind('/').unwrap_or(base.len() - 1)];
    let mut parts: Vec<&str> = dir[scheme_end..].trim_end_matches('/').split('/').collect();
    for seg in href.split('/') {
        match seg {
            ".." if parts.len() > 1 => {
                parts.pop();
            }
            "." | ".." => {}
            s => parts.push(s),
        }
    }
    format!("{}{}", &base[..scheme_end], parts.join("/"))
}

/// A distribution file name, split: `torch-2.4.0-cp311-cp311-manylinux1_x86_64.whl`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FileName {
    /// `2.4.0`, `2.5.1+cu124`.
    pub(crate) version: String,
    /// `None` for an sdist.
    pub(crate) wheel: Option<WheelTags>,
}

/// PEP 427 tags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WheelTags {
    /// `cp311`, `py3`, `cp38.cp39`.
    pub(crate) python: String,
    /// `cp311`, `abi3`, `none`.
    pub(crate) abi: String,
    /// `manylinux1_x86_64`, `manylinux_2_17_x86_64.manylinux2014_x86_64`, `any`.
    pub(crate) platform: String,
}

impl WheelTags {
    /// Installs on Linux x86_64 (a `manylinux*`/`linux` x86_64 tag, or `any`).
    pub(crate) fn linux_x86_64(&self) -> bool {
        self.platform
            .split('.')
            .any(|p| p == "any" || (p.ends_with("_x86_64") && p.contains("linux")))
    }

    /// The CPython minor of a `cpXY` tag (`3.11`), when the wheel is for one minor only.
    pub(crate) fn cpython_minor(&self) -> Option<String> {
        if self.abi == "abi3" || self.python.contains('.') {
            return None;
        }
        let n = self.python.strip_prefix("cp")?;
        let (major, minor) = n.split_at(1);
        (major == "3" && !minor.is_empty() && minor.bytes().all(|b| b.is_ascii_digit()))
            .then(|| format!("3.{minor}"))
    }
}

/// Splits a file name of `project`; `None` when it is not one of its distributions.
pub(crate) fn parse_filename(project: &str, filename: &str) -> Option<FileName> {
    let norm = normalize(project);
    if let Some(stem) = filename.strip_suffix(".whl") {
        let parts: Vec<&str> = stem.split('-').collect();
        if !(5..=6).contains(&parts.len()) || normalize(parts[0]) != norm {
            return None;
        }
        let n = parts.len();
        return Some(FileName {
            version: parts[1].to_string(),
            wheel: Some(WheelTags {
                python: parts[n - 3].to_string(),
                abi: parts[n - 2].to_string(),
                platform: parts[n - 1].to_string(),
            }),
        });
    }
    let stem = filename
        .strip_suffix(".tar.gz")
        .or_else(|| filename.strip_suffix(".zip"))?;
    // The version is after the last `-` (names may contain `-`; versions do not).
    let (name, version) = stem.rsplit_once('-')?;
    (normalize(name) == norm).then(|| FileName {
        version: version.to_string(),
        wheel: None,
    })
}

/// `true` for a final or post release (no `a`, `b`, `rc`, `dev`); the local label is
/// ignored.
pub(crate) fn is_final(version: &str) -> bool {
    let public = version
        .split('+')
        .next()
        .unwrap_or(version)
        .to_ascii_lowercase();
    let core = match public.find(".post") {
        Some(i) => &public[..i],
        None => &public,
    };
    !core.is_empty() && core.bytes().all(|b| b.is_ascii_digit() || b == b'.')
}

/// The fields of core metadata the catalog uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Metadata {
    pub(crate) requires_python: Option<String>,
    /// `Requires-Dist` lines, as written.
    pub(crate) requires_dist: Vec<String>,
}

/// Parses the RFC 822-style header block of `METADATA`/`PKG-INFO`.
pub(crate) fn parse_metadata(text: &str) -> Metadata {
    let mut m = Metadata::default();
    for line in text.lines() {
        if line.is_empty() {
            break; // the body (description) follows
        }
        if line.starts_with([' ', '\t']) {
            continue; // continuation
        }
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim().to_string();
        match k.trim().to_ascii_lowercase().as_str() {
            "requires-python" => m.requires_python = Some(v),
            "requires-dist" => m.requires_dist.push(v),
            _ => {}
        }
    }
    m
}

/// A `Requires-Dist` entry, reduced to what the catalog uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Requirement {
    /// PEP 503 normalized.
    pub(crate) name: String,
    /// `==2.4.0`, `>=2.0,<3` (spaces removed), empty when unversioned.
    pub(crate) specifier: String,
    /// The environment marker, when any.
    pub(crate) marker: Option<String>,
}

impl Requirement {
    /// The version of an exact `==V` pin (no wildcard).
    pub(crate) fn exact(&self) -> Option<&str> {
        let v = self.specifier.strip_prefix("==")?;
        (!v.contains([',', '*'])).then_some(v)
    }

    /// Applies on Linux x86_64 for any Python, as far as a simple reading of the marker
    /// tells: only `extra == …` markers exclude (those are optional extras).
    pub(crate) fn unconditional_on_linux(&self) -> bool {
        let Some(m) = &self.marker else {
            return true;
        };
        let m = m.replace(['\'', '"'], "");
        if m.contains("extra ==") || m.contains("extra==") {
            return false;
        }
        !(m.contains("sys_platform == win32")
            || m.contains("sys_platform == darwin")
            || m.contains("platform_system == Windows")
            || m.contains("platform_system == Darwin")
            || m.contains("platform_machine == aarch64")
            || m.contains("platform_machine == arm64"))
    }
}

/// Parses `name [extras] (specifier) ; marker` and `name specifier ; marker`.
pub(crate) fn parse_requirement(s: &str) -> Option<Requirement> {
    let (req, marker) = match s.split_once(';') {
        Some((r, m)) => (r.trim(), Some(m.trim().to_string())),
        None => (s.trim(), None),
    };
    let name_end = req
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        .unwrap_or(req.len());
    let name = &req[..name_end];
    if name.is_empty() {
        return None;
    }
    let mut rest = req[name_end..].trim();
    if rest.starts_with('[') {
        rest = rest[rest.find(']')? + 1..].trim();
    }
    let rest = rest.trim_start_matches('(').trim_end_matches(')');
    Some(Requirement {
        name: normalize(name),
        specifier: rest.chars().filter(|c| !c.is_whitespace()).collect(),
        marker,
    })
}

/// Core metadata of `file`: the PEP 658 `.metadata` file when the page offers one (its
/// sha256 checked), else range reads of the wheel or the head of the sdist. Returns the
/// text and how it was read, for the entry's source.
pub(crate) fn metadata_of(
    fetch: &dyn Fetch,
    file: &DistFile,
) -> Result<(Metadata, &'static str), ImportError> {
    if let Some(expected) = &file.core_metadata {
        let url = format!("{}.metadata", file.url);
        let r = fetch
            .fetch(&Request::get(url.clone()))
            .map_err(ImportError::Fetch)?;
        if r.status == 200 {
            if let Some(want) = expected {
                let got = crate::catalog::hex(&Sha256::digest(&r.body));
                if &got != want {
                    return Err(ImportError::Malformed {
                        url,
                        what: format!("sha256 {got} differs from the page's {want}"),
                    });
                }
            }
            let text = String::from_utf8_lossy(&r.body);
            return Ok((parse_metadata(&text), "PEP 658 metadata"));
        }
    }
    if file.filename.ends_with(".whl") {
        let text = archive::wheel_metadata(fetch, &file.url)?;
        Ok((
            parse_metadata(&text),
            "METADATA read by HTTP range requests",
        ))
    } else {
        let text = archive::sdist_metadata(fetch, &file.url)?;
        Ok((parse_metadata(&text), "PKG-INFO"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filenames() {
        let f = parse_filename("torch", "torch-2.5.1+cu124-cp311-cp311-linux_x86_64.whl").unwrap();
        assert_eq!(f.version, "2.5.1+cu124");
        let t = f.wheel.unwrap();
        assert!(t.linux_x86_64());
        assert_eq!(t.cpython_minor().as_deref(), Some("3.11"));
        let f = parse_filename(
            "nvidia-cudnn-cu12",
            "nvidia_cudnn_cu12-9.1.0.70-py3-none-manylinux2014_x86_64.whl",
        )
        .unwrap();
        assert_eq!(f.version, "9.1.0.70");
        assert_eq!(f.wheel.unwrap().cpython_minor(), None);
        let f = parse_filename("deepspeed", "deepspeed-0.14.4.tar.gz").unwrap();
        assert_eq!((f.version.as_str(), f.wheel), ("0.14.4", None));
        assert!(parse_filename("torch", "torchvision-0.1-py3-none-any.whl").is_none());
        let mac = parse_filename("torch", "torch-2.5.1-cp310-none-macosx_11_0_arm64.whl").unwrap();
        assert!(!mac.wheel.unwrap().linux_x86_64());
        assert!(is_final("0.6.3.post1") && is_final("2.5.1+cu124"));
        assert!(!is_final("2.6.0rc1") && !is_final("0.1.dev3") && !is_final("1.0a1"));
    }

    #[test]
    fn requirements() {
        let r = parse_requirement(
            "nvidia-cudnn-cu12 ==9.1.0.70; platform_system == \"Linux\" and platform_machine == \"x86_64\"",
        )
        .unwrap();
        assert_eq!(r.name, "nvidia-cudnn-cu12");
        assert_eq!(r.exact(), Some("9.1.0.70"));
        assert!(r.unconditional_on_linux());
        let r = parse_requirement("torch (>=2.0.0, <3)").unwrap();
        assert_eq!((r.specifier.as_str(), r.exact()), (">=2.0.0,<3", None));
        let r = parse_requirement("pytest[cov]>=7; extra == \"dev\"").unwrap();
        assert!(!r.unconditional_on_linux());
        assert_eq!(parse_requirement("torch").unwrap().specifier, "");
    }

    #[test]
    fn metadata_stops_at_the_body() {
        let m = parse_metadata(
            "Name: x\nRequires-Python: >=3.8\nRequires-Dist: torch==2.4.0\n\nRequires-Dist: not-a-header\n",
        );
        assert_eq!(m.requires_python.as_deref(), Some(">=3.8"));
        assert_eq!(m.requires_dist, vec!["torch==2.4.0"]);
    }

    #[test]
    fn html_pages_with_pep_658_attributes() {
        let html = r#"<html><body>
<a href="/whl/cu124/torch-2.5.1%2Bcu124-cp311-cp311-linux_x86_64.whl#sha256=abc" data-requires-python="&gt;=3.9" data-dist-info-metadata="sha256=def">torch-2.5.1+cu124-cp311-cp311-linux_x86_64.whl</a><br/>
<a href='../../x/torch-2.5.1-cp39-none-macosx_11_0_arm64.whl' data-yanked>torch-2.5.1-cp39-none-macosx_11_0_arm64.whl</a>
</body></html>"#;
        let files = parse_html("https://download.pytorch.org/whl/cu124/torch/", html);
        assert_eq!(files.len(), 2);
        assert_eq!(
            files[0].url,
            "https://download.pytorch.org/whl/cu124/torch-2.5.1%2Bcu124-cp311-cp311-linux_x86_64.whl"
        );
        assert_eq!(files[0].sha256.as_deref(), Some("abc"));
        assert_eq!(files[0].requires_python.as_deref(), Some(">=3.9"));
        assert_eq!(files[0].core_metadata, Some(Some("def".into())));
        assert_eq!(
            files[1].url,
            "https://download.pytorch.org/whl/x/torch-2.5.1-cp39-none-macosx_11_0_arm64.whl"
        );
        assert!(files[1].yanked && files[1].core_metadata.is_none());
    }
}
