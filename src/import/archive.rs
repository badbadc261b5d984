//! Core metadata out of a distribution file without downloading it whole: a wheel's
//! `*.dist-info/METADATA` through HTTP range reads of the zip's tail (end of central
//! directory, central directory, then the one entry), and an sdist's `PKG-INFO` from the
//! first 64 KiB of its `.tar.gz`.

use super::http::{ByteRange, Fetch, Request, Response};
use super::ImportError;

/// How much of a file's tail (wheel) or head (sdist) the first request asks for.
pub(crate) const WINDOW: u64 = 64 * 1024;

/// Bytes of a remote file known so far: `start..start + data.len()` of a file of `total`.
struct Window {
    start: u64,
    data: Vec<u8>,
    total: u64,
}

impl Window {
    fn get(&self, from: u64, len: u64) -> Option<&[u8]> {
        let a = usize::try_from(from.checked_sub(self.start)?).ok()?;
        let b = a.checked_add(usize::try_from(len).ok()?)?;
        self.data.get(a..b)
    }
}

fn ranged(fetch: &dyn Fetch, url: &str, range: ByteRange) -> Result<Response, ImportError> {
    let r = fetch
        .fetch(&Request {
            url: url.to_string(),
            accept: None,
            range: Some(range),
        })
        .map_err(ImportError::Fetch)?;
    if r.status != 206 && r.status != 200 {
        return Err(ImportError::Status {
            url: url.to_string(),
            status: r.status,
        });
    }
    Ok(r)
}

/// The whole file (200) or the range (206) as a [`Window`].
fn window(r: Response, url: &str) -> Result<Window, ImportError> {
    if r.status == 200 {
        let total = r.body.len() as u64;
        return Ok(Window {
            start: 0,
            data: r.body,
            total,
        });
    }
    let (start, total) = r.content_range.ok_or_else(|| ImportError::Malformed {
        url: url.to_string(),
        what: "a 206 response without a `Content-Range` header".into(),
    })?;
    Ok(Window {
        start,
        data: r.body,
        total,
    })
}

fn u16_at(b: &[u8], i: usize) -> u64 {
    u64::from(u16::from_le_bytes([b[i], b[i + 1]]))
}

fn u32_at(b: &[u8], i: usize) -> u64 {
    u64::from(u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]))
}

fn u64_at(b: &[u8], i: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[i..i + 8]);
    u64::from_le_bytes(a)
}

/// Reads `*.dist-info/METADATA` of the wheel at `url` with range requests: the last
/// 64 KiB, the rest of the central directory if it starts earlier, and the entry itself
/// if it is not already in hand. Returns the metadata text.
pub(crate) fn wheel_metadata(fetch: &dyn Fetch, url: &str) -> Result<String, ImportError> {
    let bad = |what: &str| ImportError::Malformed {
        url: url.to_string(),
        what: what.to_string(),
    };
    let mut w = window(ranged(fetch, url, ByteRange::Suffix(WINDOW))?, url)?;
    // End of central directory: the last `PK\x05\x06` with room for its 22 bytes.
    let eocd = w
        .data
        .windows(4)
        .rposition(|s| s == b"PK\x05\x06")
        .filter(|&p| p + 22 <= w.data.len())
        .ok_or_else(|| bad("no zip end-of-central-directory record in the file's tail"))?;
    let mut cd_size = u32_at(&w.data, eocd + 12);
    let mut cd_off = u32_at(&w.data, eocd + 16);
    if (cd_off == 0xFFFF_FFFF || cd_size == 0xFFFF_FFFF) && eocd >= 20 {
        // Zip64: the locator sits right before the EOCD and points at the zip64 record.
        let loc = eocd - 20;
        if w.data[loc..loc + 4] == *b"PK\x06\x07" {
            let rec = u64_at(&w.data, loc + 8);
            let r = w
                .get(rec, 56)
                .ok_or_else(|| bad("the zip64 end record is outside the tail"))?;
            cd_size = u64_at(r, 40);
            cd_off = u64_at(r, 48);
        }
    }
    if cd_off < w.start {
        let r = ranged(fetch, url, ByteRange::Span(cd_off, w.start - 1))?;
        let mut head = window(r, url)?;
        if head.start == 0 && head.data.len() as u64 == w.total {
            w = head; // the server sent the whole file
        } else {
            if head.start != cd_off || head.data.len() as u64 != w.start - cd_off {
                return Err(bad("the server answered another range than asked"));
            }
            head.data.extend_from_slice(&w.data);
            w = Window {
                start: cd_off,
                data: head.data,
                total: w.total,
            };
        }
    }
    let cd = w
        .get(cd_off, cd_size)
        .ok_or_else(|| bad("the central directory is outside the bytes read"))?
        .to_vec();
    let mut p = 0usize;
    while p + 46 <= cd.len() && cd[p..p + 4] == *b"PK\x01\x02" {
        let method = u16_at(&cd, p + 10);
        let csize = u32_at(&cd, p + 20);
        let usize_ = u32_at(&cd, p + 24);
        let n = usize::try_from(u16_at(&cd, p + 28)).unwrap_or(0);
        let e = usize::try_from(u16_at(&cd, p + 30)).unwrap_or(0);
        let c = usize::try_from(u16_at(&cd, p + 32)).unwrap_or(0);
        let lho = u32_at(&cd, p + 42);
        let name = cd.get(p + 46..p + 46 + n).unwrap_or_default();
        let name = String::from_utf8_lossy(name);
        if name.ends_with(".dist-info/METADATA") && name.matches('/').count() == 1 {
            // The local header repeats the name and has its own extra field; read
            // generously, then exactly if that was not enough.
            let guess = 30 + n as u64 + e as u64 + csize + 256;
            let local = match w.get(lho, guess.min(w.total - lho)) {
                Some(b) => b.to_vec(),
                None => {
                    let end = (lho + guess).min(w.total) - 1;
                    window(ranged(fetch, url, ByteRange::Span(lho, end))?, url)?
                        .get(lho, end - lho + 1)
                        .ok_or_else(|| bad("the server answered another range than asked"))?
                        .to_vec()
                }
            };
            if local.len() < 30 || local[..4] != *b"PK\x03\x04" {
                return Err(bad(
                    "no local file header where the central directory points",
                ));
            }
            let data_at =
                30 + usize::try_from(u16_at(&local, 26) + u16_at(&local, 28)).unwrap_or(0);
            let csize_us = usize::try_from(csize).unwrap_or(usize::MAX);
            let data: Vec<u8> = match local.get(data_at..data_at.saturating_add(csize_us)) {
                Some(d) => d.to_vec(),
                None => {
                    let from = lho + data_at as u64;
                    window(
                        ranged(fetch, url, ByteRange::Span(from, from + csize - 1))?,
                        url,
                    )?
                    .get(from, csize)
                    .ok_or_else(|| bad("the server answered another range than asked"))?
                    .to_vec()
                }
            };
            let raw = match method {
                0 => data,
                8 => miniz_oxide::inflate::decompress_to_vec_with_limit(
                    &data,
                    usize::try_from(usize_).unwrap_or(usize::MAX).max(1),
                )
                .map_err(|_| bad("the METADATA entry does not inflate"))?,
                m => return Err(bad(&format!("zip compression method {m} is not supported"))),
            };
            return String::from_utf8(raw).map_err(|_| bad("METADATA is not UTF-8"));
        }
        p += 46 + n + e + c;
    }
    Err(bad("the wheel has no `*.dist-info/METADATA`"))
}

/// Reads the top-level `PKG-INFO` of the sdist at `url` from its first 64 KiB (setuptools
/// writes it among the first tar members), or from the whole file when it is further in.
pub(crate) fn sdist_metadata(fetch: &dyn Fetch, url: &str) -> Result<String, ImportError> {
    let bad = |what: &str| ImportError::Malformed {
        url: url.to_string(),
        what: what.to_string(),
    };
    let head = ranged(fetch, url, ByteRange::Span(0, WINDOW - 1))?;
    let whole = head.status == 200 || head.content_range.is_some_and(|(_, t)| t <= WINDOW);
    if let Some(text) = pkg_info(&gunzip_prefix(&head.body))? {
        return Ok(text);
    }
    if !whole {
        let all = fetch
            .fetch(&Request::get(url))
            .map_err(ImportError::Fetch)?;
        if all.status == 200 {
            if let Some(text) = pkg_info(&gunzip_prefix(&all.body))? {
                return Ok(text);
            }
        }
    }
    Err(bad("no top-level PKG-INFO in the sdist"))
}

/// Inflates as much of a gzip stream as the bytes allow (a prefix inflates to a prefix),
/// at most 64 MiB, through the one streaming inflater ([`crate::resolve::http::Gunzip`]).
fn gunzip_prefix(gz: &[u8]) -> Vec<u8> {
    use std::io::Read as _;
    let Ok(z) = crate::resolve::http::Gunzip::new(gz) else {
        return Vec::new();
    };
    let mut z = z.take(64 << 20);
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    // A truncated stream ends in an error after its last whole bytes: keep those.
    while let Ok(n) = z.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    out
}

/// Walks tar headers for `<top>/PKG-INFO`; `Ok(None)` when the bytes end first.
fn pkg_info(tar: &[u8]) -> Result<Option<String>, ImportError> {
    let mut p = 0usize;
    let mut long_name: Option<String> = None;
    while p + 512 <= tar.len() {
        let h = &tar[p..p + 512];
        if h.iter().all(|&b| b == 0) {
            return Ok(None);
        }
        let field = |a: usize, b: usize| {
            let s = &h[a..b];
            let end = s.iter().position(|&c| c == 0).unwrap_or(s.len());
            String::from_utf8_lossy(&s[..end]).into_owned()
        };
        let size = u64::from_str_radix(field(124, 136).trim(), 8).unwrap_or(0);
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        let kind = h[156];
        let prefix = field(345, 500);
        let mut name = match long_name.take() {
            Some(n) => n,
            None if prefix.is_empty() => field(0, 100),
            None => format!("{prefix}/{}", field(0, 100)),
        };
        let body = p + 512;
        let next = body.saturating_add(size.div_ceil(512).saturating_mul(512));
        if kind == b'L' {
            let Some(b) = tar.get(body..body.saturating_add(size)) else {
                return Ok(None);
            };
            long_name = Some(
                String::from_utf8_lossy(b)
                    .trim_end_matches('\0')
                    .to_string(),
            );
        } else if kind == b'x' || kind == b'g' {
            // pax headers: a `path=` record renames the next member.
            if let Some(b) = tar.get(body..body.saturating_add(size)) {
                let text = String::from_utf8_lossy(b);
                for rec in text.lines() {
                    if let Some((_, kv)) = rec.split_once(' ') {
                        if let Some(path) = kv.strip_prefix("path=") {
                            long_name = Some(path.to_string());
                        }
                    }
                }
            }
        } else {
            name = name.trim_start_matches("./").to_string();
            if name.ends_with("/PKG-INFO") && name.matches('/').count() == 1 {
                return match tar.get(body..body.saturating_add(size)) {
                    Some(b) => Ok(Some(String::from_utf8_lossy(b).into_owned())),
                    None => Ok(None),
                };
            }
        }
        p = next;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tar_walk_finds_top_level_pkg_info_only() {
        fn member(name: &str, body: &[u8]) -> Vec<u8> {
            let mut h = vec![0u8; 512];
            h[..name.len()].copy_from_slice(name.as_bytes());
            let size = format!("{:011o}\0", body.len());
            h[124..136].copy_from_slice(size.as_bytes());
            h[156] = b'0';
            let mut out = h;
            out.extend_from_slice(body);
            out.resize(out.len().div_ceil(512) * 512, 0);
            out
        }
        let mut tar = member("p-1.0/p.egg-info/PKG-INFO", b"nested");
        tar.extend(member("p-1.0/PKG-INFO", b"Name: p\n"));
        assert_eq!(pkg_info(&tar).unwrap().as_deref(), Some("Name: p\n"));
        // Cut short: not found yet, no error.
        assert_eq!(pkg_info(&tar[..700]).unwrap(), None);
    }
}
