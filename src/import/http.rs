//! The importers' view of the network: a [`Fetch`] trait (one GET, optionally with an
//! `Accept` header or a byte range) and [`Http`], which sends it through gpustack's one
//! HTTP client, [`crate::resolve::http::Http`] (one `ureq` agent, one TLS setup, one
//! [`FetchError`]). This file only translates requests and responses.
//!
//! Everything above this file works on [`Response`] values, so the parsing is tested on
//! recorded responses and the client on a local server (`tests/import.rs`).

use crate::resolve::http::{self as net, Transport as _};

pub use crate::resolve::http::FetchError;

/// The default time budget of one `catalog import` or `catalog outdated` run, in seconds:
/// an import that follows pins reads a few hundred index pages and metadata files.
pub const IMPORT_TIMEOUT_SECS: u64 = 600;

/// One GET request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// `https://pypi.org/simple/torch/`.
    pub url: String,
    /// The `Accept` header, when the server negotiates (PEP 691).
    pub accept: Option<&'static str>,
    /// A byte range.
    pub range: Option<ByteRange>,
}

impl Request {
    /// A plain GET.
    pub fn get(url: impl Into<String>) -> Request {
        Request {
            url: url.into(),
            accept: None,
            range: None,
        }
    }
}

/// The `Range` header of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByteRange {
    /// `bytes=-N`: the last N bytes.
    Suffix(u64),
    /// `bytes=A-B`, both inclusive.
    Span(u64, u64),
}

impl ByteRange {
    fn header(self) -> String {
        match self {
            ByteRange::Suffix(n) => format!("bytes=-{n}"),
            ByteRange::Span(a, b) => format!("bytes={a}-{b}"),
        }
    }
}

/// What came back.
#[derive(Clone, Debug, Default)]
pub struct Response {
    /// The HTTP status.
    pub status: u16,
    /// The body (for a 206, the bytes of the range).
    pub body: Vec<u8>,
    /// The `Content-Type` header.
    pub content_type: Option<String>,
    /// The `Date` header, as sent (`Wed, 25 Nov 2026 17:33:42 GMT`).
    pub date: Option<String>,
    /// For a 206: the first byte's offset and the whole file's size, from `Content-Range`.
    pub content_range: Option<(u64, u64)>,
}

/// Performs GET requests. [`Http`] goes to the network; tests may serve recordings.
pub trait Fetch {
    /// Sends one request. HTTP error statuses are a [`Response`], not an error.
    fn fetch(&self, req: &Request) -> Result<Response, FetchError>;
}

/// The importers' client: requests go through [`net::Http`].
pub struct Http {
    inner: net::Http,
}

impl Http {
    /// A client; with `offline`, every request fails with [`FetchError::Offline`].
    pub fn new(offline: bool) -> Http {
        Http {
            inner: net::Http::new(offline),
        }
    }

    /// A client for one importer run: every request shares one deadline, `secs` from now
    /// (default [`IMPORT_TIMEOUT_SECS`]), with the per-run byte cap and the no-network
    /// shortcut of [`net::Http::for_lock`].
    pub fn with_timeout(offline: bool, secs: Option<u64>) -> Http {
        Http {
            inner: net::Http::for_run(offline, secs.unwrap_or(IMPORT_TIMEOUT_SECS)),
        }
    }
}

impl Fetch for Http {
    fn fetch(&self, req: &Request) -> Result<Response, FetchError> {
        let mut r = net::Request::get(req.url.clone());
        if let Some(a) = req.accept {
            r = r.header("Accept", a);
        }
        if let Some(range) = req.range {
            r = r.header("Range", range.header());
        }
        let resp = self.inner.send(&r)?;
        let header = |name: &str| resp.header(name).map(str::to_string);
        Ok(Response {
            status: resp.status,
            content_type: header("content-type"),
            date: header("date"),
            content_range: resp.header("content-range").and_then(parse_content_range),
            body: resp.body,
        })
    }
}

/// `bytes 100-199/1000` → `(100, 1000)`.
pub(crate) fn parse_content_range(v: &str) -> Option<(u64, u64)> {
    let rest = v.trim().strip_prefix("bytes ")?;
    let (span, total) = rest.split_once('/')?;
    let (start, _) = span.split_once('-')?;
    Some((start.trim().parse().ok()?, total.trim().parse().ok()?))
}

/// `Wed, 25 Nov 2026 17:33:42 GMT` (RFC 9110 IMF-fixdate) → `2026-11-25`.
pub(crate) fn http_date_to_iso(v: &str) -> Option<String> {
    let mut it = v.split_whitespace().skip(1);
    let day: u32 = it.next()?.parse().ok()?;
    let month = match it.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: u32 = it.next()?.parse().ok()?;
    Some(format!("{year:04}-{month:02}-{day:02}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_parse() {
        assert_eq!(
            parse_content_range("bytes 194721143-194786678/194786679"),
            Some((194_721_143, 194_786_679))
        );
        assert_eq!(parse_content_range("bytes */100"), None);
        assert_eq!(
            http_date_to_iso("Wed, 25 Nov 2026 17:33:42 GMT").as_deref(),
            Some("2026-11-25")
        );
        assert_eq!(http_date_to_iso("yesterday"), None);
        assert_eq!(ByteRange::Suffix(10).header(), "bytes=-10");
        assert_eq!(ByteRange::Span(1, 2).header(), "bytes=1-2");
    }
}
