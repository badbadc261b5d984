//! The pinned uv on a machine that has none: the uv wheel the catalog pins for this
//! machine's CPU (its PyPI URL and sha256, `[[package]] name = "uv-wheel"`), downloaded,
//! checked against that sha256, and its `uv` binary unpacked into gpustack's cache
//! (`$XDG_CACHE_HOME/gpustack/uv/<version>/<sha256 prefix>/uv`, else
//! `~/.cache/gpustack/…`; `GPUSTACK_CACHE_DIR` moves it).
//!
//! ```text
//! GPUSTACK_UV ──set──▶ that file, of the pinned version, or an error (never a download)
//!      │ unset
//!      ▼
//! `uv` on PATH of the pinned version ──▶ used
//!      │ none, or another version
//!      ▼
//! cache hit ──▶ used        miss ──▶ wheel from PyPI (or `[resolve].pypi`'s page for the
//!                                     same file name) ──sha256 = catalog's?──▶ unpack ──▶ used
//! ```
//!
//! Only the version the lock pins is used: it is the uv the images install, and the
//! lock's closure records it (`[python] resolver = "uv 0.11.7"`), so the resolver and
//! the installer are the same program.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::catalog::Catalog;
use crate::resolve::http::{sha256_digest, FetchError, Request, Transport};

use super::closure_error::ClosureError;

/// The wheel of uv `version` for a CPU (`x86_64`, `aarch64`), as the catalog pins it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wheel {
    /// `https://files.pythonhosted.org/packages/…/uv-0.11.7-py3-none-manylinux_….whl`.
    pub url: String,
    /// The lowercase hex sha256 PyPI publishes for it.
    pub sha256: String,
    /// The uv version.
    pub version: String,
}

impl Wheel {
    /// The catalog's wheel of uv `version` for `cpu` (`std::env::consts::ARCH`).
    pub fn of(catalog: &Catalog, version: &str, cpu: &str) -> Option<Wheel> {
        catalog
            .packages_named("uv-wheel")
            .filter(|p| p.version.as_deref() == Some(version))
            .filter(|p| p.variant.as_deref() == Some(cpu))
            .find_map(|p| {
                Some(Wheel {
                    url: p.url.clone()?,
                    sha256: p.sha256.clone()?,
                    version: version.to_string(),
                })
            })
    }

    /// The file name (`uv-0.11.7-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl`).
    pub fn file_name(&self) -> &str {
        self.url.rsplit('/').next().unwrap_or(&self.url)
    }

    /// Where its binary is cached under `cache`.
    pub fn cached(&self, cache: &Path) -> PathBuf {
        cache
            .join("uv")
            .join(&self.version)
            .join(&self.sha256[..self.sha256.len().min(16)])
            .join("uv")
    }
}

/// gpustack's cache directory: `GPUSTACK_CACHE_DIR`, else `$XDG_CACHE_HOME/gpustack`, else
/// `~/.cache/gpustack`.
pub fn cache_dir() -> Option<PathBuf> {
    crate::core::fs::cache_dir(
        std::env::var_os("GPUSTACK_CACHE_DIR").map(PathBuf::from),
        std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from),
        std::env::var_os("HOME").map(PathBuf::from),
    )
}

/// The binary of `wheel`, from the cache or downloaded over `transport` (from
/// `pypi`'s simple page for the same file name when a mirror is set), checked against the
/// catalog's sha256 and unpacked into `cache`.
///
/// # Errors
///
/// [`ClosureError::Download`] when the wheel cannot be fetched or is not the pinned file;
/// [`ClosureError::Other`] when the cache cannot be written.
pub fn obtain(
    transport: &dyn Transport,
    wheel: &Wheel,
    cache: &Path,
    pypi: Option<&str>,
) -> Result<PathBuf, ClosureError> {
    let exe = wheel.cached(cache);
    if exe.is_file() {
        return Ok(exe);
    }
    let url = match pypi {
        Some(index) => mirror_url(transport, index, wheel)?,
        None => wheel.url.clone(),
    };
    let failed = |error: FetchError| ClosureError::Download {
        url: url.clone(),
        error,
    };
    let resp = transport.send(&Request::get(&url)).map_err(failed)?;
    if resp.status != 200 {
        return Err(ClosureError::Download {
            url: url.clone(),
            error: FetchError::Unreachable {
                url: url.clone(),
                cause: crate::resolve::http::Cause::Other(format!("HTTP {}", resp.status)),
            },
        });
    }
    let got = sha256_digest(&resp.body);
    if got != format!("sha256:{}", wheel.sha256) {
        return Err(ClosureError::WheelDigest {
            url,
            expected: format!("sha256:{}", wheel.sha256),
            got,
        });
    }
    let binary = zip_entry(&resp.body, &format!("uv-{}.data/scripts/uv", wheel.version))
        .map_err(|e| ClosureError::Other(format!("the uv wheel `{url}`: {e}")))?;
    install(&exe, &binary).map_err(|e| {
        ClosureError::Other(format!(
            "cannot write the uv binary into the cache `{}`: {e}",
            exe.display()
        ))
    })?;
    Ok(exe)
}

/// The wheel's URL on the simple index `index` (a PEP 503 page): the link whose file name
/// is the pinned wheel's.
fn mirror_url(
    transport: &dyn Transport,
    index: &str,
    wheel: &Wheel,
) -> Result<String, ClosureError> {
    let page = format!("{}/uv/", index.trim_end_matches('/'));
    let failed = |error: FetchError| ClosureError::Download {
        url: page.clone(),
        error,
    };
    let resp = transport.send(&Request::get(&page)).map_err(failed)?;
    let missing = |what: String| ClosureError::Download {
        url: page.clone(),
        error: FetchError::Unreachable {
            url: page.clone(),
            cause: crate::resolve::http::Cause::Other(what),
        },
    };
    if resp.status != 200 {
        return Err(missing(format!("HTTP {}", resp.status)));
    }
    let text = String::from_utf8_lossy(&resp.body);
    let name = wheel.file_name();
    for part in text.split("href=\"").skip(1) {
        let href = part.split('"').next().unwrap_or("");
        let bare = href.split('#').next().unwrap_or(href);
        if bare.rsplit('/').next() == Some(name) {
            return Ok(join_url(&page, &bare.replace("&amp;", "&")));
        }
    }
    Err(missing(format!("the index lists no `{name}`")))
}

/// `href` resolved against the page `base`.
fn join_url(base: &str, href: &str) -> String {
    if href.contains("://") {
        href.to_string()
    } else if let Some(path) = href.strip_prefix('/') {
        let (scheme, rest) = base.split_once("://").unwrap_or(("https", base));
        let host = rest.split('/').next().unwrap_or(rest);
        format!("{scheme}://{host}/{path}")
    } else {
        let (scheme, rest) = base.split_once("://").unwrap_or(("https", base));
        let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
        let mut segments: Vec<&str> = path.split('/').collect();
        segments.pop(); // the page's own name (empty after a trailing `/`)
        for s in href.split('/') {
            match s {
                "." => {}
                ".." => {
                    segments.pop();
                }
                s => segments.push(s),
            }
        }
        format!("{scheme}://{host}/{}", segments.join("/"))
    }
}

/// Writes `bytes` to `exe` (mode 755) through a new file beside it, renamed into place.
fn install(exe: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = exe.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = dir.join(format!(".uv-{}-{nanos:x}.tmp", std::process::id()));
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        opts.mode(0o755);
    }
    let written = opts.open(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    match written.and_then(|()| std::fs::rename(&tmp, exe)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

fn u16_at(b: &[u8], i: usize) -> Option<usize> {
    Some(usize::from(u16::from_le_bytes(
        b.get(i..i + 2)?.try_into().ok()?,
    )))
}

fn u32_at(b: &[u8], i: usize) -> Option<usize> {
    usize::try_from(u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?)).ok()
}

/// The largest file unpacked from a wheel (uv's binary is about 60 MB).
const ENTRY_LIMIT: usize = 256 * 1024 * 1024;

/// The bytes of the entry `name` of the zip archive `zip` (stored or deflated).
pub fn zip_entry(zip: &[u8], name: &str) -> Result<Vec<u8>, String> {
    let bad = |what: &str| what.to_string();
    // End of central directory: the last `PK\x05\x06` within the final 64 KiB + 22 bytes.
    let floor = zip.len().saturating_sub(65_557);
    let eocd = (floor..zip.len().saturating_sub(21))
        .rev()
        .find(|&i| zip[i..].starts_with(b"PK\x05\x06"))
        .ok_or_else(|| bad("not a zip archive (no end of central directory)"))?;
    let count = u16_at(zip, eocd + 10).ok_or_else(|| bad("truncated zip"))?;
    let mut p = u32_at(zip, eocd + 16).ok_or_else(|| bad("truncated zip"))?;
    for _ in 0..count {
        if !zip.get(p..).is_some_and(|b| b.starts_with(b"PK\x01\x02")) {
            return Err(bad("a broken central directory"));
        }
        let field = |o: usize| u16_at(zip, p + o).ok_or_else(|| bad("truncated zip"));
        let method = field(10)?;
        let csize = u32_at(zip, p + 20).ok_or_else(|| bad("truncated zip"))?;
        let usize_ = u32_at(zip, p + 24).ok_or_else(|| bad("truncated zip"))?;
        let (n, e, c) = (field(28)?, field(30)?, field(32)?);
        let lho = u32_at(zip, p + 42).ok_or_else(|| bad("truncated zip"))?;
        let entry = zip
            .get(p + 46..p + 46 + n)
            .ok_or_else(|| bad("truncated zip"))?;
        if entry == name.as_bytes() {
            if usize_ > ENTRY_LIMIT {
                return Err(format!("`{name}` is larger than 256 MiB"));
            }
            if !zip.get(lho..).is_some_and(|b| b.starts_with(b"PK\x03\x04")) {
                return Err(bad(
                    "no local file header where the central directory points",
                ));
            }
            let at = lho
                + 30
                + u16_at(zip, lho + 26).ok_or_else(|| bad("truncated zip"))?
                + u16_at(zip, lho + 28).ok_or_else(|| bad("truncated zip"))?;
            let data = zip
                .get(at..at.saturating_add(csize))
                .ok_or_else(|| bad("truncated zip entry"))?;
            return match method {
                0 => Ok(data.to_vec()),
                8 => miniz_oxide::inflate::decompress_to_vec_with_limit(data, usize_.max(1))
                    .map_err(|_| format!("`{name}` does not inflate to its stated size")),
                m => Err(format!("zip compression method {m} is not supported")),
            };
        }
        p += 46 + n + e + c;
    }
    Err(format!("the wheel has no `{name}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zip with one stored entry, as `zip -0` writes it.
    pub(crate) fn stored_zip(name: &str, data: &[u8]) -> Vec<u8> {
        let mut z = Vec::new();
        let n = u16::try_from(name.len()).unwrap();
        let len = u32::try_from(data.len()).unwrap();
        z.extend(b"PK\x03\x04");
        z.extend([20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        z.extend(0u32.to_le_bytes()); // crc (unchecked here)
        z.extend(len.to_le_bytes());
        z.extend(len.to_le_bytes());
        z.extend(n.to_le_bytes());
        z.extend(0u16.to_le_bytes());
        z.extend(name.as_bytes());
        z.extend(data);
        let cd = u32::try_from(z.len()).unwrap();
        z.extend(b"PK\x01\x02");
        z.extend([20, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        z.extend(0u32.to_le_bytes());
        z.extend(len.to_le_bytes());
        z.extend(len.to_le_bytes());
        z.extend(n.to_le_bytes());
        z.extend([0u8; 12]);
        z.extend(0u32.to_le_bytes()); // local header offset
        z.extend(name.as_bytes());
        let cd_len = u32::try_from(z.len()).unwrap() - cd;
        z.extend(b"PK\x05\x06");
        z.extend([0u8; 4]);
        z.extend(1u16.to_le_bytes());
        z.extend(1u16.to_le_bytes());
        z.extend(cd_len.to_le_bytes());
        z.extend(cd.to_le_bytes());
        z.extend(0u16.to_le_bytes());
        z
    }

    /// Serves one body per URL and counts the requests.
    struct Canned(Vec<(String, Vec<u8>)>, std::sync::atomic::AtomicUsize);

    impl Transport for Canned {
        fn send(&self, req: &Request) -> Result<crate::resolve::http::Response, FetchError> {
            self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let body = self
                .0
                .iter()
                .find(|(u, _)| *u == req.url)
                .map(|(_, b)| b.clone());
            Ok(crate::resolve::http::Response {
                status: if body.is_some() { 200 } else { 404 },
                headers: Vec::new(),
                body: body.unwrap_or_default(),
            })
        }
    }

    #[test]
    fn the_pinned_wheel_is_checked_unpacked_and_cached() {
        let script = b"#!/bin/sh\necho uv 0.11.7\n".to_vec();
        let whl = stored_zip("uv-0.11.7.data/scripts/uv", &script);
        let hex = sha256_digest(&whl)["sha256:".len()..].to_string();
        let url = "https://files.example/uv-0.11.7-py3-none-any.whl";
        let wheel = Wheel {
            url: url.into(),
            sha256: hex,
            version: "0.11.7".into(),
        };
        let cache = std::env::temp_dir().join(format!("gpustack-uvtest-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&cache);
        // A mirror's page names the same file; a wrong file is refused, nothing cached.
        let mirror = "http://127.0.0.1:9/simple";
        let page = format!(
            "<a href=\"../../files/{}#sha256=x\">f</a>",
            wheel.file_name()
        );
        let bad = Canned(
            vec![
                (
                    "http://127.0.0.1:9/simple/uv/".into(),
                    page.clone().into_bytes(),
                ),
                (
                    format!("http://127.0.0.1:9/files/{}", wheel.file_name()),
                    b"PK not it".to_vec(),
                ),
            ],
            std::sync::atomic::AtomicUsize::new(0),
        );
        let e = obtain(&bad, &wheel, &cache, Some(mirror)).unwrap_err();
        assert!(
            matches!(&e, ClosureError::WheelDigest { url, .. } if url == "http://127.0.0.1:9/files/uv-0.11.7-py3-none-any.whl"),
            "{e}"
        );
        assert!(!wheel.cached(&cache).exists());
        let good = Canned(
            vec![(url.into(), whl)],
            std::sync::atomic::AtomicUsize::new(0),
        );
        let exe = obtain(&good, &wheel, &cache, None).unwrap();
        assert_eq!(std::fs::read(&exe).unwrap(), script);
        assert_eq!(good.1.load(std::sync::atomic::Ordering::SeqCst), 1);
        // Cached: no request the second time.
        assert_eq!(obtain(&good, &wheel, &cache, None).unwrap(), exe);
        assert_eq!(good.1.load(std::sync::atomic::Ordering::SeqCst), 1);
        let _ = std::fs::remove_dir_all(&cache);
    }

    #[test]
    fn reads_a_stored_entry_and_names_a_missing_one() {
        let z = stored_zip("uv-0.11.7.data/scripts/uv", b"#!/bin/sh\n");
        assert_eq!(
            zip_entry(&z, "uv-0.11.7.data/scripts/uv").unwrap(),
            b"#!/bin/sh\n"
        );
        assert_eq!(
            zip_entry(&z, "uv-0.11.8.data/scripts/uv").unwrap_err(),
            "the wheel has no `uv-0.11.8.data/scripts/uv`"
        );
        assert!(zip_entry(b"not a zip at all, not even close", "x").is_err());
        assert_eq!(
            join_url("http://127.0.0.1:1/simple/uv/", "../../files/a.whl"),
            "http://127.0.0.1:1/files/a.whl"
        );
        assert_eq!(
            join_url("http://127.0.0.1:1/simple/uv/", "/files/a.whl"),
            "http://127.0.0.1:1/files/a.whl"
        );
    }
}
