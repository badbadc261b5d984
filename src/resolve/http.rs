//! gpustack's one door to the network: a [`Transport`] trait (one request, GET or HEAD,
//! with headers) and [`Http`], its `ureq` implementation. Lock-time resolution uses it
//! directly; the importers through their own request view ([`crate::import::http`]).
//!
//! The registry, apt and dnf clients above this file work on [`Response`] values, so their
//! parsing is tested on recorded responses and the client against real local servers
//! (`tests/resolve.rs`). `gen` never constructs one: only `gpustack lock` resolves.

use std::time::Duration;

/// The request method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// `GET`.
    Get,
    /// `HEAD`.
    Head,
}

/// One request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// `GET` or `HEAD`.
    pub method: Method,
    /// The URL.
    pub url: String,
    /// Extra headers (`Accept`, `Authorization`).
    pub headers: Vec<(&'static str, String)>,
}

impl Request {
    /// A plain GET.
    pub fn get(url: impl Into<String>) -> Request {
        Request {
            method: Method::Get,
            url: url.into(),
            headers: Vec::new(),
        }
    }

    /// Adds a header.
    #[must_use]
    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Request {
        self.headers.push((name, value.into()));
        self
    }
}

/// What came back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Response {
    /// The HTTP status.
    pub status: u16,
    /// Response headers, names lowercased, in the order received.
    pub headers: Vec<(String, String)>,
    /// The body (empty for HEAD).
    pub body: Vec<u8>,
}

impl Response {
    /// The first header named `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Why a request got no response.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
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

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FetchError::Offline { url } => write!(f, "`{url}` not fetched: offline"),
            FetchError::Unreachable { url, detail } => {
                write!(f, "`{url}` could not be reached: {detail}")
            }
        }
    }
}

/// Sends requests. [`Http`] goes to the network; tests may serve recordings.
pub trait Transport {
    /// Sends one request. HTTP error statuses are a [`Response`], not an error.
    fn send(&self, req: &Request) -> Result<Response, FetchError>;
}

/// A transport that sends nothing: every request is [`FetchError::Offline`]. What
/// `gpustack lock --offline` and [`crate::lock_spec`] resolve with.
pub struct Offline;

impl Transport for Offline {
    fn send(&self, req: &Request) -> Result<Response, FetchError> {
        Err(FetchError::Offline {
            url: req.url.clone(),
        })
    }
}

/// The real client: `ureq` with rustls; the system trust roots where there are some,
/// Mozilla's otherwise. Redirects are followed (registries send blobs to CDNs).
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
            // Importers read wheels' tails and whole project pages; registries and
            // repositories whole indexes: one budget for both.
            .timeout_global(Some(Duration::from_secs(120)))
            .timeout_connect(Some(Duration::from_secs(15)))
            .http_status_as_error(false)
            .user_agent(concat!("gpustack/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Http { agent, offline }
    }

    /// Whether every request fails with [`FetchError::Offline`].
    pub fn is_offline(&self) -> bool {
        self.offline
    }
}

/// The system bundle (`SSL_CERT_FILE`, else the Debian or Red Hat path), as curl and pip
/// use it, so a site's TLS-inspecting proxy CA works; Mozilla's roots otherwise.
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

/// The largest body read: a `Packages` index of NVIDIA's CUDA repository is tens of MB.
const BODY_LIMIT: u64 = 512 * 1024 * 1024;

impl Transport for Http {
    fn send(&self, req: &Request) -> Result<Response, FetchError> {
        if self.offline {
            return Err(FetchError::Offline {
                url: req.url.clone(),
            });
        }
        let unreachable = |e: ureq::Error| FetchError::Unreachable {
            url: req.url.clone(),
            detail: e.to_string(),
        };
        let result = match req.method {
            Method::Get => {
                let mut r = self.agent.get(&req.url);
                for (k, v) in &req.headers {
                    r = r.header(*k, v);
                }
                r.call()
            }
            Method::Head => {
                let mut r = self.agent.head(&req.url);
                for (k, v) in &req.headers {
                    r = r.header(*k, v);
                }
                r.call()
            }
        };
        let mut resp = result.map_err(unreachable)?;
        let status = resp.status().as_u16();
        let headers = resp
            .headers()
            .iter()
            .filter_map(|(k, v)| {
                Some((
                    k.as_str().to_ascii_lowercase(),
                    v.to_str().ok()?.to_string(),
                ))
            })
            .collect();
        let body = if req.method == Method::Head {
            Vec::new()
        } else {
            resp.body_mut()
                .with_config()
                .limit(BODY_LIMIT)
                .read_to_vec()
                .map_err(unreachable)?
        };
        Ok(Response {
            status,
            headers,
            body,
        })
    }
}

/// `sha256:` and the lowercase hex digest of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    format!("sha256:{}", crate::catalog::hex(&Sha256::digest(bytes)))
}

/// Inflates a gzip member (RFC 1952): `Packages.gz`, `primary.xml.gz`.
pub fn gunzip(data: &[u8]) -> Result<Vec<u8>, String> {
    const FEXTRA: u8 = 4;
    const FNAME: u8 = 8;
    const FCOMMENT: u8 = 16;
    const FHCRC: u8 = 2;
    if data.len() < 18 || data[0] != 0x1f || data[1] != 0x8b || data[2] != 8 {
        return Err("not a gzip file".into());
    }
    let flags = data[3];
    let mut i = 10;
    if flags & FEXTRA != 0 {
        let n = usize::from(u16::from_le_bytes([data[i], data[i + 1]]));
        i += 2 + n;
    }
    for flag in [FNAME, FCOMMENT] {
        if flags & flag != 0 {
            while i < data.len() && data[i] != 0 {
                i += 1;
            }
            i += 1;
        }
    }
    if flags & FHCRC != 0 {
        i += 2;
    }
    if i >= data.len() {
        return Err("truncated gzip header".into());
    }
    miniz_oxide::inflate::decompress_to_vec_with_limit(&data[i..], BODY_LIMIT as usize)
        .map_err(|e| format!("gzip data does not inflate: {e:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gunzip_reads_what_gzip_writes() {
        // `printf 'Package: a\n' | gzip -n | xxd -i`
        let gz = [
            0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x0b, 0x48, 0x4c, 0xce,
            0x4e, 0x4c, 0x4f, 0xb5, 0x52, 0x48, 0xe4, 0x02, 0x00, 0x59, 0x6f, 0x79, 0x97, 0x0b,
            0x00, 0x00, 0x00,
        ];
        assert_eq!(gunzip(&gz).unwrap(), b"Package: a\n");
        assert!(gunzip(b"Package: a\n").is_err());
        assert_eq!(
            sha256_digest(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
