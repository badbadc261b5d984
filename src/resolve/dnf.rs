//! dnf repository metadata: `repodata/repomd.xml` and the `primary` index it points to
//! (`primary.xml`, gzip-compressed or not), whose SHA-256 must be the one `repomd.xml`
//! states. As for apt, the repository's OpenPGP signature (`repomd.xml.asc`) is not
//! checked here; the lock records the digest of the `repomd.xml` it trusted.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use super::http::{sha256_digest, Gunzip, Request, Transport};
use super::RepoError;

/// An RPM's epoch, version and release.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evr {
    /// The epoch (`0` when absent).
    pub epoch: String,
    /// `595.91.07`.
    pub ver: String,
    /// `1.el9`.
    pub rel: String,
}

impl Evr {
    /// `ver-rel`, with `epoch:` in front when it is not 0: dnf's spelling.
    pub fn text(&self) -> String {
        if self.epoch.is_empty() || self.epoch == "0" {
            format!("{}-{}", self.ver, self.rel)
        } else {
            format!("{}:{}-{}", self.epoch, self.ver, self.rel)
        }
    }

    fn cmp_evr(&self, o: &Evr) -> Ordering {
        let e = |s: &str| s.parse::<u64>().unwrap_or(0);
        e(&self.epoch)
            .cmp(&e(&o.epoch))
            .then_with(|| rpmvercmp(&self.ver, &o.ver))
            .then_with(|| rpmvercmp(&self.rel, &o.rel))
    }
}

/// The versions a repository publishes, by package name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DnfIndex {
    /// The repository URL read.
    pub url: String,
    /// `sha256:` of `repomd.xml`.
    pub repomd_digest: String,
    /// Package name → versions, newest first.
    pub packages: BTreeMap<String, Vec<Evr>>,
}

/// Reads the repository at `base` (the directory holding `repodata/`).
pub fn fetch_index(t: &dyn Transport, base: &str) -> Result<DnfIndex, RepoError> {
    let base = base.trim_end_matches('/');
    let url = format!("{base}/repodata/repomd.xml");
    let r = t.send(&Request::get(&url))?;
    if r.status != 200 {
        return Err(RepoError::Status {
            url,
            status: r.status,
        });
    }
    let repomd = String::from_utf8_lossy(&r.body).into_owned();
    let (href, sha) = primary_location(&repomd).map_err(|detail| RepoError::Bad {
        url: url.clone(),
        detail,
    })?;
    let purl = format!("{base}/{href}");
    let pr = t.send(&Request::get(&purl))?;
    if pr.status != 200 {
        return Err(RepoError::Status {
            url: purl,
            status: pr.status,
        });
    }
    let got = sha256_digest(&pr.body);
    if got != format!("sha256:{sha}") {
        return Err(RepoError::HashMismatch {
            url: purl,
            expected: format!("sha256:{sha}"),
            got,
        });
    }
    let bad = |detail: String| RepoError::Bad {
        url: purl.clone(),
        detail,
    };
    // Read as a stream: memory holds the compressed body and one package, not the file.
    let packages = if href.ends_with(".gz") {
        read_primary(Gunzip::new(&pr.body).map_err(bad)?)
    } else if href.ends_with(".xml") {
        read_primary(&pr.body[..])
    } else {
        return Err(bad(
            "only gzip-compressed or plain primary.xml is read (createrepo_c --general-compress-type=gz)".into(),
        ));
    }
    .map_err(bad)?;
    Ok(DnfIndex {
        url: base.to_string(),
        repomd_digest: sha256_digest(repomd.as_bytes()),
        packages,
    })
}

/// The `primary` entry of `repomd.xml`: its `location href` and sha256 checksum.
pub fn primary_location(repomd: &str) -> Result<(String, String), String> {
    let doc = roxmltree::Document::parse(repomd).map_err(|e| format!("not XML: {e}"))?;
    let data = doc
        .descendants()
        .find(|n| n.has_tag_name("data") && n.attribute("type") == Some("primary"))
        .ok_or("no `<data type=\"primary\">`")?;
    let href = data
        .children()
        .find(|n| n.has_tag_name("location"))
        .and_then(|n| n.attribute("href"))
        .ok_or("the primary entry has no location")?;
    let sum = data
        .children()
        .find(|n| n.has_tag_name("checksum"))
        .ok_or("the primary entry has no checksum")?;
    if sum.attribute("type") != Some("sha256") {
        return Err(format!(
            "the primary checksum is `{}`, not sha256",
            sum.attribute("type").unwrap_or("")
        ));
    }
    if href.contains("..") || href.starts_with('/') || href.contains("://") {
        return Err(format!("primary location `{href}` leaves the repository"));
    }
    Ok((
        href.to_string(),
        sum.text().unwrap_or("").trim().to_ascii_lowercase(),
    ))
}

/// Whether `s` is an RPM epoch, version or release (`part`): the epoch an unsigned
/// integer, the version and release non-empty runs of letters, digits and `._+~^`, the
/// characters rpm accepts in a built package's `Version:` and `Release:` (rpm spec file
/// format, "Version" and "Release"; `-` separates them, so neither holds one). Anything
/// else (a newline, `$(…)`) never enters the lock. The `Err` says what is wrong.
///
/// ```
/// use gpustack::resolve::dnf::{rpm_part, RpmPart};
/// assert!(rpm_part(RpmPart::Version, "595.91.07").is_ok());
/// assert!(rpm_part(RpmPart::Release, "1.el9").is_ok());
/// assert!(rpm_part(RpmPart::Epoch, "1$(id)").is_err());
/// assert!(rpm_part(RpmPart::Release, "1\nerror: forged").is_err());
/// ```
pub fn rpm_part(part: RpmPart, s: &str) -> Result<(), &'static str> {
    match part {
        RpmPart::Epoch if !s.bytes().all(|b| b.is_ascii_digit()) => {
            Err("the epoch must be an unsigned integer")
        }
        RpmPart::Epoch => Ok(()),
        _ if s.is_empty() => Err("it is empty"),
        _ if s
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._+~^".contains(&b)) =>
        {
            Ok(())
        }
        _ => Err("it may hold only letters, digits and `._+~^`"),
    }
}

/// The three parts of an RPM's EVR, for [`rpm_part`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RpmPart {
    /// `epoch`.
    Epoch,
    /// `ver`.
    Version,
    /// `rel`.
    Release,
}

impl RpmPart {
    fn name(self) -> &'static str {
        match self {
            RpmPart::Epoch => "epoch",
            RpmPart::Version => "version",
            RpmPart::Release => "release",
        }
    }
}

/// Name → versions (newest first) of every package in `primary.xml`. An epoch, version
/// or release outside the RPM grammar ([`rpm_part`]) is refused, naming the package.
pub fn parse_primary(xml: &str) -> Result<BTreeMap<String, Vec<Evr>>, String> {
    read_primary(xml.as_bytes())
}

/// The largest `<package>` element (or prologue before `<metadata>`) read: an element
/// of `primary.xml` lists a package's provides, requires and a few files, some KiB.
const ELEMENT_LIMIT: usize = 16 * 1024 * 1024;

/// [`parse_primary`] over a stream, one `<package>` element in memory at a time: each
/// element is parsed as XML inside the document's own `<metadata …>` start tag (its
/// namespaces), so memory does not grow with the repository.
pub fn read_primary(mut r: impl std::io::Read) -> Result<BTreeMap<String, Vec<Evr>>, String> {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut eof = false;
    let mut fill = |buf: &mut Vec<u8>, eof: &mut bool| -> Result<(), String> {
        let n = r.read(&mut chunk).map_err(|e| e.to_string())?;
        *eof = n == 0;
        buf.extend_from_slice(&chunk[..n]);
        Ok(())
    };
    // The root start tag, after the prologue (`<?xml …?>`, comments).
    let root = loop {
        if let Some(at) = find(&buf, b"<metadata") {
            if let Some(gt) = find(&buf[at..], b">") {
                let tag = String::from_utf8_lossy(&buf[at..at + gt + 1]).into_owned();
                buf.drain(..at + gt + 1);
                break tag;
            }
        }
        if eof || buf.len() > ELEMENT_LIMIT {
            return Err("not XML: no `<metadata>` element".into());
        }
        fill(&mut buf, &mut eof)?;
    };
    if root.ends_with("/>") {
        return Ok(BTreeMap::new());
    }
    let mut out: BTreeMap<String, Vec<Evr>> = BTreeMap::new();
    loop {
        if let Some(end) = find(&buf, b"</package>") {
            let element = &buf[..end + b"</package>".len()];
            let start = find(element, b"<package").unwrap_or(0);
            let doc = format!(
                "{root}{}</metadata>",
                String::from_utf8_lossy(&element[start..])
            );
            read_packages_of(&doc, &mut out)?;
            buf.drain(..end + b"</package>".len());
            continue;
        }
        if eof {
            break;
        }
        if buf.len() > ELEMENT_LIMIT {
            return Err(format!(
                "not XML: a `<package>` element is longer than {ELEMENT_LIMIT} bytes"
            ));
        }
        fill(&mut buf, &mut eof)?;
    }
    let rest = String::from_utf8_lossy(&buf);
    if rest.trim() != "</metadata>" {
        return Err(format!(
            "not XML: the document ends in `{}` after its last package, not `</metadata>`",
            crate::error::shown_value(rest.trim())
        ));
    }
    for vs in out.values_mut() {
        vs.sort_by(|a, b| b.cmp_evr(a));
        vs.dedup();
    }
    Ok(out)
}

/// Where `needle` first occurs in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The packages of one small document (the root and one `<package>`), into `out`.
fn read_packages_of(xml: &str, out: &mut BTreeMap<String, Vec<Evr>>) -> Result<(), String> {
    let opts = roxmltree::ParsingOptions {
        allow_dtd: false,
        ..roxmltree::ParsingOptions::default()
    };
    let doc =
        roxmltree::Document::parse_with_options(xml, opts).map_err(|e| format!("not XML: {e}"))?;
    for p in doc.descendants().filter(|n| n.has_tag_name("package")) {
        let name = p
            .children()
            .find(|n| n.has_tag_name("name"))
            .and_then(|n| n.text());
        let v = p.children().find(|n| n.has_tag_name("version"));
        if let (Some(name), Some(v)) = (name, v) {
            let evr = Evr {
                epoch: v.attribute("epoch").unwrap_or("0").to_string(),
                ver: v.attribute("ver").unwrap_or("").to_string(),
                rel: v.attribute("rel").unwrap_or("").to_string(),
            };
            for (part, text) in [
                (RpmPart::Epoch, &evr.epoch),
                (RpmPart::Version, &evr.ver),
                (RpmPart::Release, &evr.rel),
            ] {
                if let Err(why) = rpm_part(part, text) {
                    return Err(format!(
                        "package `{}` has {} `{}`, which is not an RPM {}: {why}",
                        crate::error::shown_value(name),
                        part.name(),
                        crate::error::shown_value(text),
                        part.name()
                    ));
                }
            }
            out.entry(name.to_string()).or_default().push(evr);
        }
    }
    Ok(())
}

/// What the repository says about a dnf pin `name-ver[-rel]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PinCheck {
    /// Published: the package name, and the exact `ver-rel` dnf installs for the pin
    /// (the newest release of that version).
    Published {
        /// The package name.
        name: String,
        /// `ver-rel` (with `epoch:` when not 0).
        version: String,
    },
    /// No package in the repository matches; the newest versions of the name the pin
    /// most likely means, if any.
    Missing(Vec<String>),
}

/// Checks a dnf install spec (`nvidia-fabricmanager-595-595.91.07`): every split at a
/// `-` whose left side is a package name in the index is tried, as dnf does.
pub fn check_pin(index: &DnfIndex, pin: &str) -> PinCheck {
    let mut nearest = Vec::new();
    for (i, _) in pin.match_indices('-').rev() {
        let (name, rest) = (&pin[..i], &pin[i + 1..]);
        let Some(versions) = index.packages.get(name) else {
            continue;
        };
        let hit = versions
            .iter()
            .find(|e| e.ver == rest || format!("{}-{}", e.ver, e.rel) == rest || e.text() == rest);
        if let Some(e) = hit {
            return PinCheck::Published {
                name: name.to_string(),
                version: e.text(),
            };
        }
        if nearest.is_empty() {
            nearest = versions.iter().take(3).map(Evr::text).collect();
        }
    }
    PinCheck::Missing(nearest)
}

/// rpm's `rpmvercmp`: alternating digit and letter segments, digits numerically and newer
/// than letters, `~` before everything, `^` after the base version.
pub fn rpmvercmp(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        let skip = |s: &[u8]| {
            let n = s
                .iter()
                .take_while(|c| !c.is_ascii_alphanumeric() && **c != b'~' && **c != b'^')
                .count();
            n
        };
        a = &a[skip(a)..];
        b = &b[skip(b)..];
        match (a.first(), b.first()) {
            (Some(b'~'), Some(b'~')) => {
                a = &a[1..];
                b = &b[1..];
                continue;
            }
            (Some(b'~'), _) => return Ordering::Less,
            (_, Some(b'~')) => return Ordering::Greater,
            (Some(b'^'), Some(b'^')) => {
                a = &a[1..];
                b = &b[1..];
                continue;
            }
            (Some(b'^'), None) => return Ordering::Greater,
            (None, Some(b'^')) => return Ordering::Less,
            (Some(b'^'), _) => return Ordering::Less,
            (_, Some(b'^')) => return Ordering::Greater,
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            _ => {}
        }
        let digits = a[0].is_ascii_digit();
        let seg = |s: &[u8]| {
            s.iter()
                .take_while(|c| {
                    if digits {
                        c.is_ascii_digit()
                    } else {
                        c.is_ascii_alphabetic()
                    }
                })
                .count()
        };
        let (na, nb) = (seg(a), seg(b));
        if nb == 0 {
            return if digits {
                Ordering::Greater
            } else {
                Ordering::Less
            };
        }
        let (sa, sb) = (&a[..na], &b[..nb]);
        let ord = if digits {
            let trim = |s: &[u8]| {
                let z = s.iter().take_while(|c| **c == b'0').count();
                s[z..].to_vec()
            };
            let (ta, tb) = (trim(sa), trim(sb));
            ta.len().cmp(&tb.len()).then_with(|| ta.cmp(&tb))
        } else {
            sa.cmp(sb)
        };
        if ord != Ordering::Equal {
            return ord;
        }
        a = &a[na..];
        b = &b[nb..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rpm_order() {
        for (a, b) in [
            ("1.0", "1.1"),
            ("1.0~rc1", "1.0"),
            ("9.10.2.21", "9.10.10.1"),
            ("1.el8", "1.el9"),
            ("1.0a", "1.0.1"),
            ("1.0", "1.0^git1"),
        ] {
            assert_eq!(rpmvercmp(a, b), Ordering::Less, "{a} < {b}");
            assert_eq!(rpmvercmp(b, a), Ordering::Greater, "{b} > {a}");
        }
        assert_eq!(rpmvercmp("1.01", "1.1"), Ordering::Equal);
    }

    /// Hands out one byte per read: every element crosses a read boundary.
    struct Trickle<'a>(&'a [u8]);

    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            match (self.0.split_first(), buf.first_mut()) {
                (Some((b, rest)), Some(slot)) => {
                    *slot = *b;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    #[test]
    fn primary_reads_as_a_stream_one_package_at_a_time() {
        let primary = r#"<?xml version="1.0" encoding="UTF-8"?>
<metadata xmlns="http://linux.duke.edu/metadata/common" xmlns:rpm="http://linux.duke.edu/metadata/rpm" packages="2">
<package type="rpm"><name>a</name><version epoch="0" ver="1.0" rel="1"/><format><rpm:license>MIT</rpm:license></format></package>
<package type="rpm"><name>a</name><version epoch="0" ver="2.0" rel="1"/></package>
</metadata>
"#;
        let idx = read_primary(Trickle(primary.as_bytes())).unwrap();
        assert_eq!(
            idx["a"].iter().map(Evr::text).collect::<Vec<_>>(),
            ["2.0-1", "1.0-1"]
        );
        assert_eq!(parse_primary(primary).unwrap(), idx);
        // Cut short, or something other than XML after the packages.
        let cut = &primary[..primary.len() - "</metadata>\n".len() - 20];
        assert!(read_primary(cut.as_bytes())
            .unwrap_err()
            .starts_with("not XML"));
        assert!(read_primary(&b"Package: a\n"[..])
            .unwrap_err()
            .starts_with("not XML"));
        // An entity the document would have to declare is refused, not expanded.
        let entity = primary.replace("<name>a</name>", "<name>&x;</name>");
        assert!(read_primary(entity.as_bytes()).is_err());
    }

    #[test]
    fn repomd_and_primary_read() {
        let repomd = r#"<?xml version="1.0" encoding="UTF-8"?>
<repomd xmlns="http://linux.duke.edu/metadata/repo"><revision>1</revision>
<data type="primary"><checksum type="sha256">ABC</checksum><location href="repodata/abc-primary.xml.gz"/></data></repomd>"#;
        assert_eq!(
            primary_location(repomd).unwrap(),
            ("repodata/abc-primary.xml.gz".to_string(), "abc".to_string())
        );
        assert!(primary_location(&repomd.replace("repodata/abc", "../x")).is_err());
        let primary = r#"<metadata xmlns="http://linux.duke.edu/metadata/common" packages="3">
<package type="rpm"><name>nvidia-fabricmanager-595</name><arch>x86_64</arch><version epoch="0" ver="595.91.07" rel="1"/></package>
<package type="rpm"><name>nvidia-fabricmanager-595</name><arch>x86_64</arch><version epoch="0" ver="595.71.05" rel="1"/></package>
<package type="rpm"><name>datacenter-gpu-manager-4-core</name><arch>x86_64</arch><version epoch="1" ver="4.6.0" rel="1"/></package>
</metadata>"#;
        let idx = DnfIndex {
            packages: parse_primary(primary).unwrap(),
            ..DnfIndex::default()
        };
        assert_eq!(
            check_pin(&idx, "nvidia-fabricmanager-595-595.91.07"),
            PinCheck::Published {
                name: "nvidia-fabricmanager-595".into(),
                version: "595.91.07-1".into()
            }
        );
        assert_eq!(
            check_pin(&idx, "datacenter-gpu-manager-4-core-4.6.0"),
            PinCheck::Published {
                name: "datacenter-gpu-manager-4-core".into(),
                version: "1:4.6.0-1".into()
            }
        );
        assert_eq!(
            check_pin(&idx, "nvidia-fabricmanager-595-595.99.01"),
            PinCheck::Missing(vec!["595.91.07-1".into(), "595.71.05-1".into()])
        );
    }
}
