//! apt repository metadata: `InRelease` (or `Release`) and the `Packages` index it lists,
//! read the way apt reads a flat repository (`deb URL /`, NVIDIA's CUDA and container
//! toolkit repositories): the index's size and SHA-256 must be those `Release` states.
//!
//! The OpenPGP signature of `InRelease` is not checked here (no OpenPGP implementation
//! among the dependencies): the hash chain from `Release` to `Packages` is, and the lock
//! records the digest of the `Release` text it trusted, so a later check can verify the
//! signature over the same bytes.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use super::http::{sha256_digest, Gunzip, Request, Transport};
use super::RepoError;

/// The versions a repository publishes, by package name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AptIndex {
    /// The repository URL read (a mirror's, when one is configured).
    pub url: String,
    /// `sha256:` of the `Release` text (the signed part of `InRelease`).
    pub release_digest: String,
    /// Package name → versions, newest first.
    pub packages: BTreeMap<String, Vec<String>>,
}

/// Reads a flat repository's index at `base` (its `InRelease` or `Release`, then the
/// `Packages` file that lists, compressed with gzip or not).
pub fn fetch_index(t: &dyn Transport, base: &str) -> Result<AptIndex, RepoError> {
    let base = base.trim_end_matches('/');
    let get = |path: &str| -> Result<(String, super::http::Response), RepoError> {
        let url = format!("{base}/{path}");
        let r = t.send(&Request::get(&url))?;
        Ok((url, r))
    };
    let (url, r) = get("InRelease")?;
    let release = if r.status == 200 {
        clearsigned_body(&String::from_utf8_lossy(&r.body)).ok_or_else(|| RepoError::Bad {
            url: url.clone(),
            detail: "not a clear-signed Release file".into(),
        })?
    } else {
        let (url, r) = get("Release")?;
        if r.status != 200 {
            return Err(RepoError::Status {
                url,
                status: r.status,
            });
        }
        String::from_utf8_lossy(&r.body).into_owned()
    };
    let files = release_sha256(&release);
    let pick = ["Packages.gz", "Packages"]
        .into_iter()
        .find_map(|name| files.iter().find(|f| f.2 == name))
        .ok_or_else(|| RepoError::Bad {
            url: format!("{base}/Release"),
            detail: "its SHA256 list names no `Packages` or `Packages.gz`".into(),
        })?;
    let (purl, pr) = get(&pick.2)?;
    if pr.status != 200 {
        return Err(RepoError::Status {
            url: purl,
            status: pr.status,
        });
    }
    let got = sha256_digest(&pr.body);
    if got != format!("sha256:{}", pick.0) || pr.body.len() as u64 != pick.1 {
        return Err(RepoError::HashMismatch {
            url: purl,
            expected: format!("sha256:{} ({} bytes)", pick.0, pick.1),
            got: format!("{got} ({} bytes)", pr.body.len()),
        });
    }
    let bad = |detail: String| RepoError::Bad {
        url: purl.clone(),
        detail,
    };
    // Read as a stream: memory holds the compressed body and one line, not the index.
    let packages = if pick.2.ends_with(".gz") {
        read_packages(std::io::BufReader::new(Gunzip::new(&pr.body).map_err(bad)?))
    } else {
        read_packages(&pr.body[..])
    }
    .map_err(bad)?;
    Ok(AptIndex {
        url: base.to_string(),
        release_digest: sha256_digest(release.as_bytes()),
        packages,
    })
}

/// The signed text of a clear-signed message (RFC 4880 §7), dash-escaping undone.
pub fn clearsigned_body(s: &str) -> Option<String> {
    let start = s.find("-----BEGIN PGP SIGNED MESSAGE-----")?;
    let rest = &s[start..];
    let body_start = rest.find("\n\n")? + 2;
    let body_end = rest.find("\n-----BEGIN PGP SIGNATURE-----")?;
    let body = rest.get(body_start..=body_end)?;
    Some(
        body.lines()
            .map(|l| l.strip_prefix("- ").unwrap_or(l))
            .collect::<Vec<_>>()
            .join("\n")
            + "\n",
    )
}

/// The `SHA256:` field of a `Release` file: `(hex, size, path)` per line.
pub fn release_sha256(release: &str) -> Vec<(String, u64, String)> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in release.lines() {
        if !line.starts_with([' ', '\t']) {
            inside = line.trim_end() == "SHA256:";
            continue;
        }
        if !inside {
            continue;
        }
        let mut it = line.split_whitespace();
        if let (Some(h), Some(n), Some(p)) = (it.next(), it.next(), it.next()) {
            if let Ok(n) = n.parse() {
                out.push((
                    h.to_ascii_lowercase(),
                    n,
                    p.trim_start_matches("./").to_string(),
                ));
            }
        }
    }
    out
}

/// Whether `v` is a Debian version as deb-version(7) and Debian Policy §5.6.12 define
/// it: `[epoch:]upstream_version[-debian_revision]`, the epoch an unsigned integer, the
/// upstream version starting with a digit and made of alphanumerics and `.+~` (and `-`
/// when there is a revision), the revision of alphanumerics and `.+~`. A repository
/// version outside this grammar never enters the lock: it is copied into `apt-get install
/// NAME=VERSION` lines. The `Err` says which part is wrong.
///
/// ```
/// use gpustack::resolve::apt::debian_version;
/// assert!(debian_version("1:4.6.0-1").is_ok());
/// assert!(debian_version("2.27.5-1+cuda12.4").is_ok());
/// assert!(debian_version("1$(touch /tmp/PWNED):4.6.0-1").is_err());
/// assert!(debian_version("4.6.0\n-1").is_err());
/// ```
pub fn debian_version(v: &str) -> Result<(), &'static str> {
    let (epoch, rest) = match v.split_once(':') {
        Some((e, r)) => (Some(e), r),
        None => (None, v),
    };
    if let Some(e) = epoch {
        if e.is_empty() || !e.bytes().all(|b| b.is_ascii_digit()) {
            return Err("the epoch (before `:`) must be an unsigned integer");
        }
    }
    let (upstream, revision) = match rest.rsplit_once('-') {
        Some((u, r)) => (u, Some(r)),
        None => (rest, None),
    };
    let part = |s: &str, extra: &[u8]| {
        s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".+~".contains(&b) || extra.contains(&b))
    };
    if !upstream.as_bytes().first().is_some_and(u8::is_ascii_digit) {
        return Err("the upstream version must start with a digit");
    }
    if !part(upstream, if revision.is_some() { b"-" } else { b"" }) {
        return Err("the upstream version may hold only letters, digits and `.+~-`");
    }
    if let Some(r) = revision {
        if r.is_empty() || !part(r, b"") {
            return Err(
                "the Debian revision (after the last `-`) may hold only letters, digits and `.+~`",
            );
        }
    }
    Ok(())
}

/// `Package:` and `Version:` of each stanza; versions newest first, deduplicated. A
/// version outside the Debian grammar ([`debian_version`]) is refused: `Err` names the
/// package, the version (escaped and cut for printing) and what is wrong.
pub fn parse_packages(text: &str) -> Result<BTreeMap<String, Vec<String>>, String> {
    read_packages(text.as_bytes())
}

/// The longest line a `Packages` index may have: its longest fields (`Description`,
/// `Depends`) are a few KiB.
const LINE_LIMIT: u64 = 1024 * 1024;

/// [`parse_packages`] over a stream, one line in memory at a time.
pub fn read_packages(
    mut r: impl std::io::BufRead,
) -> Result<BTreeMap<String, Vec<String>>, String> {
    use std::io::{BufRead as _, Read as _};
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let (mut name, mut version): (Option<String>, Option<String>) = (None, None);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut r)
            .take(LINE_LIMIT + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| e.to_string())?;
        if n as u64 > LINE_LIMIT {
            return Err(format!(
                "a line is longer than {LINE_LIMIT} bytes (not an index)"
            ));
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\n', '\r']);
        if n == 0 || text.is_empty() {
            if let (Some(n), Some(v)) = (name.take(), version.take()) {
                if let Err(why) = debian_version(&v) {
                    return Err(format!(
                        "package `{}` has version `{}`, which is not a Debian version: {why}",
                        crate::error::shown_value(&n),
                        crate::error::shown_value(&v)
                    ));
                }
                out.entry(n).or_default().push(v);
            }
            name = None;
            version = None;
            if n == 0 {
                break;
            }
        } else if let Some(v) = text.strip_prefix("Package:") {
            name = Some(v.trim().to_string());
        } else if let Some(v) = text.strip_prefix("Version:") {
            version = Some(v.trim().to_string());
        }
    }
    for vs in out.values_mut() {
        vs.sort_by(|a, b| compare(b, a));
        vs.dedup();
    }
    Ok(out)
}

/// What the repository says about a pin `name=version`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PinCheck {
    /// The repository publishes exactly that version.
    Published,
    /// Not that string, but the same upstream version under another epoch or Debian
    /// revision (`1:4.6.0-1` for `4.6.0-1`, `-2` for `-1`): the newest such.
    Corrected(String),
    /// Neither; the newest versions it has (at most three), if the name exists at all.
    Missing(Vec<String>),
}

/// Checks `name=version` against the index.
pub fn check_pin(index: &AptIndex, name: &str, version: &str) -> PinCheck {
    let Some(versions) = index.packages.get(name) else {
        return PinCheck::Missing(Vec::new());
    };
    if versions.iter().any(|v| v == version) {
        return PinCheck::Published;
    }
    // Another epoch or Debian revision of the same upstream version is the same build; a
    // `+cudaX.Y` build tag in the revision is part of what was pinned (NCCL's and cuDNN 8's
    // packages exist once per CUDA build), so it must match too.
    let want = (upstream(version), build_tag(version));
    match versions
        .iter()
        .find(|v| (upstream(v), build_tag(v)) == want)
    {
        Some(v) => PinCheck::Corrected(v.clone()),
        None => PinCheck::Missing(versions.iter().take(3).cloned().collect()),
    }
}

/// The `+…` build tag of a Debian revision (`+cuda12.9` in `2.27.5-1+cuda12.9`).
fn build_tag(v: &str) -> Option<&str> {
    v.rsplit_once('-')
        .and_then(|(_, rev)| rev.split_once('+'))
        .map(|(_, tag)| tag)
}

/// The upstream part of a Debian version: no epoch, no revision.
fn upstream(v: &str) -> &str {
    let v = v.split_once(':').map_or(v, |(_, r)| r);
    v.rsplit_once('-').map_or(v, |(u, _)| u)
}

/// dpkg's version order (deb-version(7)): epoch numerically, then upstream version and
/// revision by dpkg's string rule (`~` sorts before everything, letters before other
/// characters, digit runs numerically).
pub fn compare(a: &str, b: &str) -> Ordering {
    fn split(v: &str) -> (u64, &str, &str) {
        let (epoch, rest) = match v.split_once(':') {
            Some((e, r)) if e.bytes().all(|c| c.is_ascii_digit()) => (e.parse().unwrap_or(0), r),
            _ => (0, v),
        };
        let (up, rev) = rest.rsplit_once('-').unwrap_or((rest, ""));
        (epoch, up, rev)
    }
    let (ea, ua, ra) = split(a);
    let (eb, ub, rb) = split(b);
    ea.cmp(&eb)
        .then_with(|| verrevcmp(ua, ub))
        .then_with(|| verrevcmp(ra, rb))
}

fn order(c: Option<u8>) -> i32 {
    match c {
        None => 0,
        Some(b'~') => -1,
        Some(c) if c.is_ascii_digit() => 0,
        Some(c) if c.is_ascii_alphabetic() => i32::from(c),
        Some(c) => i32::from(c) + 256,
    }
}

fn verrevcmp(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        while (i < a.len() && !a[i].is_ascii_digit()) || (j < b.len() && !b[j].is_ascii_digit()) {
            let ac = order(a.get(i).copied().filter(|c| !c.is_ascii_digit()));
            let bc = order(b.get(j).copied().filter(|c| !c.is_ascii_digit()));
            if ac != bc {
                return ac.cmp(&bc);
            }
            i += 1;
            j += 1;
        }
        while i < a.len() && a[i] == b'0' {
            i += 1;
        }
        while j < b.len() && b[j] == b'0' {
            j += 1;
        }
        let mut first = Ordering::Equal;
        while i < a.len() && a[i].is_ascii_digit() && j < b.len() && b[j].is_ascii_digit() {
            if first == Ordering::Equal {
                first = a[i].cmp(&b[j]);
            }
            i += 1;
            j += 1;
        }
        if i < a.len() && a[i].is_ascii_digit() {
            return Ordering::Greater;
        }
        if j < b.len() && b[j].is_ascii_digit() {
            return Ordering::Less;
        }
        if first != Ordering::Equal {
            return first;
        }
    }
    Ordering::Equal
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dpkg_order() {
        for (a, b) in [
            ("1.0-1", "1.0-2"),
            ("1.0~rc1-1", "1.0-1"),
            ("595.91.07-1", "1:4.6.0-1"),
            ("2.29.3-1+cuda12.6", "2.29.3-1+cuda12.9"),
            ("9.10.2.21-1", "9.10.10.1-1"),
            ("1.0", "1.0a"),
        ] {
            assert_eq!(compare(a, b), Ordering::Less, "{a} < {b}");
            assert_eq!(compare(b, a), Ordering::Greater, "{b} > {a}");
        }
        assert_eq!(compare("1.0-1", "1.0-1"), Ordering::Equal);
    }

    #[test]
    fn release_and_packages_read() {
        let signed = "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n\nOrigin: x\nSHA256:\n abc 12 ./Packages\n 0DEF 7 Packages.gz\n- -dash\n-----BEGIN PGP SIGNATURE-----\nxx\n-----END PGP SIGNATURE-----\n";
        let body = clearsigned_body(signed).unwrap();
        assert_eq!(
            body,
            "Origin: x\nSHA256:\n abc 12 ./Packages\n 0DEF 7 Packages.gz\n-dash\n"
        );
        assert_eq!(
            release_sha256(&body),
            [
                ("abc".to_string(), 12, "Packages".to_string()),
                ("0def".to_string(), 7, "Packages.gz".to_string())
            ]
        );
        let idx = AptIndex {
            packages: parse_packages("Package: dcgm\nVersion: 1:4.6.0-1\n\nPackage: dcgm\nVersion: 1:4.5.2-1\n\nPackage: x\nVersion: 1.0-2\n").unwrap(),
            ..AptIndex::default()
        };
        assert_eq!(idx.packages["dcgm"], ["1:4.6.0-1", "1:4.5.2-1"]);
        assert_eq!(check_pin(&idx, "dcgm", "1:4.6.0-1"), PinCheck::Published);
        assert_eq!(
            check_pin(&idx, "dcgm", "4.6.0-1"),
            PinCheck::Corrected("1:4.6.0-1".into())
        );
        assert_eq!(
            check_pin(&idx, "x", "1.0-1"),
            PinCheck::Corrected("1.0-2".into())
        );
        assert_eq!(
            check_pin(&idx, "x", "2.0-1"),
            PinCheck::Missing(vec!["1.0-2".into()])
        );
        assert_eq!(check_pin(&idx, "y", "1"), PinCheck::Missing(vec![]));
        // A CUDA build tag is part of the pin: another build of the same NCCL is not it.
        let idx = AptIndex {
            packages: parse_packages("Package: libnccl2\nVersion: 2.27.5-1+cuda12.4\n\nPackage: libnccl2\nVersion: 2.27.5-1ubuntu1+cuda12.9\n").unwrap(),
            ..AptIndex::default()
        };
        assert_eq!(
            check_pin(&idx, "libnccl2", "2.27.5-1+cuda12.9"),
            PinCheck::Corrected("2.27.5-1ubuntu1+cuda12.9".into())
        );
        assert_eq!(
            check_pin(&idx, "libnccl2", "2.27.5-1+cuda12.8"),
            PinCheck::Missing(vec![
                "2.27.5-1+cuda12.4".into(),
                "2.27.5-1ubuntu1+cuda12.9".into()
            ])
        );
    }
}
