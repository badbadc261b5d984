//! The importers' one door to the network: a [`Fetch`] trait (one GET, optionally with an
//! `Accept` header or a byte range) and [`Http`], its `ureq` implementation.
//!
//! Everything above this file works on [`Response`] values, so the parsing is tested on
//! recorded responses and the client on a local server (`tests/import.rs`). Only this
//! file talks to the network, as only `catalog::load` reads catalog files.

use std::time::Duration;

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

/// Why a request got no response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FetchError {
    /// `--offline` was given and the request needs the network.
    Offline {
        /// The URL.
        url: String,
    },
    /// The host could not be reached (DNS, connection refused, TLS, timeout).
    Unreachable {
        /// The URL.
        url: String,
        /// The client's words.
        detail: String,
    },
}

/// Performs GET requests. [`Http`] goes to the network; tests may serve recordings.
pub trait Fetch {
    /// Sends one request. HTTP error statuses are a [`Response`], not an error.
    fn fetch(&self, req: &Request) -> Result<Response, FetchError>;
}

/// The real client: `ureq` with rustls and the Mozilla root certificates.
pub struct Http {
    agent: ureq::Agent,
    offline: bool,
}

impl Http {
    /// A client; with `offline`, every request fails with [`FetchError::Offline`].
    pub fn new(offline: bool) -> Http {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .tls_config(
                ureq::tls::TlsConfig::builder()
                    .root_certs(root_certs())
                    .build(),
            )
            .timeout_global(Some(Duration::from_secs(120)))
            .timeout_connect(Some(Duration::from_secs(15)))
            .http_status_as_error(false)
            .user_agent(concat!("gpustack/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Http { agent, offline }
    }
}

/// The trust roots: the system bundle where there is one (`SSL_CERT_FILE`, else the
/// Debian or Red Hat path), as curl and pip use it, so a site's TLS-inspecting proxy CA
/// works; Mozilla's roots (compiled in) otherwise.
fn root_certs() -> ureq::tls::RootCerts {
    let candidates = std::env::var_os("SSL_CERT_FILE")
        .map(std::path::PathBuf::from)
        .into_iter()
        .chain(
            [
                "/etc/ssl/certs/ca-certificates.crt",
                "/etc/pki/tls/certs/ca-bundle.crt",
            ]
            .map(std::path::PathBuf::from),
        );
    for path in candidates {
        let Ok(pem) = std::fs::read(&path) else {
            continue;
        };
        let certs: Vec<ureq::tls::Certificate<'static>> = ureq::tls::parse_pem(&pem)
            .filter_map(|item| match item {
                Ok(ureq::tls::PemItem::Certificate(c)) => Some(c),
                _ => None,
            })
            .collect();
        if !certs.is_empty() {
            return ureq::tls::RootCerts::Specific(std::sync::Arc::new(certs));
        }
    }
    ureq::tls::RootCerts::WebPki
}

/// The largest body read (a wheel's tail or head is 64 KiB; a project page a few MB).
const BODY_LIMIT: u64 = 256 * 1024 * 1024;

impl Fetch for Http {
    fn fetch(&self, req: &Request) -> Result<Response, FetchError> {
        if self.offline {
            return Err(FetchError::Offline {
                url: req.url.clone(),
            });
        }
        let unreachable = |e: ureq::Error| FetchError::Unreachable {
            url: req.url.clone(),
            detail: e.to_string(),
        };
        let mut r = self.agent.get(&req.url);
        if let Some(a) = req.accept {
            r = r.header("Accept", a);
        }
        if let Some(range) = req.range {
            r = r.header("Range", range.header());
        }
        let mut resp = r.call().map_err(unreachable)?;
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let status = resp.status().as_u16();
        let content_type = header("content-type");
        let date = header("date");
        let content_range = header("content-range").and_then(|v| parse_content_range(&v));
        let body = resp
            .body_mut()
            .with_config()
            .limit(BODY_LIMIT)
            .read_to_vec()
            .map_err(unreachable)?;
        Ok(Response {
            status,
            body,
            content_type,
            date,
            content_range,
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
