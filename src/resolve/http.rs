//! gpustack's one door to the network: a [`Transport`] trait (one request, GET or HEAD,
//! with headers) and [`Http`], its `ureq` implementation. Lock-time resolution uses it
//! directly; the importers through their own request view ([`crate::import::http`]).
//!
//! The registry, apt and dnf clients above this file work on [`Response`] values, so their
//! parsing is tested on recorded responses and the client against real local servers
//! (`tests/resolve.rs`). `gen` never constructs one: only `gpustack lock` resolves.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

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

/// Why a request got no usable response: the cause, as curl and uv name them.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cause {
    /// The host name did not resolve.
    Dns,
    /// No connection (refused, reset, no route).
    Connect(String),
    /// The proxy (`HTTPS_PROXY`, `ALL_PROXY`) refused to open a tunnel to the host.
    Proxy(String),
    /// The TLS handshake failed (an unknown CA: a site proxy needs `SSL_CERT_FILE`).
    Tls(String),
    /// One request ran past its own timeout.
    Timeout,
    /// The run's time budget (`--timeout`, `[resolve].timeout`) was spent.
    Deadline {
        /// The budget, in seconds.
        secs: u64,
    },
    /// Not sent: the run's first request found no network at all.
    NoNetwork {
        /// The host that request went to.
        host: String,
        /// Why it failed.
        first: Box<Cause>,
    },
    /// Not sent: an earlier request to the same host failed.
    HostDown(Box<Cause>),
    /// A redirect gpustack does not follow (another scheme, a downgrade to `http://`,
    /// another host over plain HTTP, too many hops).
    Redirect {
        /// Where the server sent the request.
        to: String,
    },
    /// The response is larger than one response may be.
    TooLarge {
        /// The cap, in bytes.
        limit: u64,
    },
    /// The run has read as many bytes as a run may.
    RunBytes {
        /// The cap, in bytes.
        limit: u64,
    },
    /// Anything else the client reported (a malformed response).
    Other(String),
}

impl Cause {
    /// Whether the host could not be reached at all (DNS, connect, timeout, deadline, no
    /// network): what resolution falls back on (the previous lock, the catalog). A host
    /// that answered wrongly (TLS, a refused redirect, an oversized body) is an error.
    pub fn is_unreachable(&self) -> bool {
        match self {
            Cause::Dns
            | Cause::Connect(_)
            | Cause::Proxy(_)
            | Cause::Timeout
            | Cause::Deadline { .. } => true,
            Cause::NoNetwork { .. } => true,
            Cause::HostDown(c) => c.is_unreachable(),
            _ => false,
        }
    }
}

fn mib(n: u64) -> String {
    format!("{} MiB", n / (1024 * 1024))
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cause::Dns => f.write_str("DNS: the host name does not resolve"),
            Cause::Connect(d) => write!(f, "connect: {}", escape_control(d)),
            Cause::Proxy(d) => write!(f, "proxy: {}", escape_control(d)),
            Cause::Tls(d) => write!(f, "TLS: {}", escape_control(d)),
            Cause::Timeout => f.write_str("timeout: no answer in time"),
            Cause::Deadline { secs } => {
                write!(
                    f,
                    "timeout: the run's {secs} s budget for network queries is spent"
                )
            }
            Cause::NoNetwork { host, first } => write!(
                f,
                "not sent: no network (the run's first request, to `{host}`, failed: {first})"
            ),
            Cause::HostDown(c) => {
                write!(f, "not sent: an earlier request to this host failed ({c})")
            }
            Cause::Redirect { to } => write!(f, "redirect to `{}` refused", escape_control(to)),
            Cause::TooLarge { limit } => {
                write!(f, "the response is larger than {} (refused)", mib(*limit))
            }
            Cause::RunBytes { limit } => {
                write!(f, "the run has read {}, its cap (refused)", mib(*limit))
            }
            Cause::Other(d) => write!(f, "{}", escape_control(d)),
        }
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
    /// The host could not be reached, or answered in a way gpustack refuses ([`Cause`]).
    Unreachable {
        /// The URL.
        url: String,
        /// Why.
        cause: Cause,
    },
}

impl FetchError {
    /// The URL asked for.
    pub fn url(&self) -> &str {
        match self {
            FetchError::Offline { url } | FetchError::Unreachable { url, .. } => url,
        }
    }

    /// The host (`host[:port]`) of the URL.
    pub fn host(&self) -> &str {
        host_of(self.url())
    }

    /// Whether resolution may fall back (offline, or the host not reachable at all).
    pub fn may_fall_back(&self) -> bool {
        match self {
            FetchError::Offline { .. } => true,
            FetchError::Unreachable { cause, .. } => cause.is_unreachable(),
        }
    }
}

/// `host[:port]` of an `http(s)://` URL (the whole string when it has no scheme).
pub fn host_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    authority.rsplit_once('@').map_or(authority, |(_, h)| h)
}

fn escape_control(s: &str) -> std::borrow::Cow<'_, str> {
    crate::error::escape_control(s)
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FetchError::Offline { url } => {
                write!(f, "`{}` not fetched: offline", escape_control(url))
            }
            FetchError::Unreachable { url, cause } => write!(
                f,
                "`{}` ({}): {cause}",
                escape_control(host_of(url)),
                escape_control(url)
            ),
        }
    }
}

/// Sends requests. [`Http`] goes to the network; tests may serve recordings. `Sync`:
/// resolution sends a lock's registry and repository queries from several threads at once
/// ([`crate::resolve::resolve`]).
pub trait Transport: Sync {
    /// Sends one request. HTTP error statuses are a [`Response`], not an error.
    fn send(&self, req: &Request) -> Result<Response, FetchError>;

    /// The spec's `[resolve].timeout`: the run's budget in seconds, unless the command
    /// line set one. Transports without a budget ignore it.
    fn budget_secs(&self, _secs: u64) {}

    /// Whether every request is answered at once without I/O ([`Offline`]): then queries
    /// are not worth a thread each.
    fn answers_locally(&self) -> bool {
        false
    }

    /// Whether this is [`Offline`]: every request fails as offline, so a resolution over
    /// it is the offline one.
    fn offline(&self) -> bool {
        false
    }
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

    fn answers_locally(&self) -> bool {
        true
    }

    fn offline(&self) -> bool {
        true
    }
}

pub use crate::spec::resolve::DEFAULT_TIMEOUT_SECS;

/// The largest body one response may have: a `Packages` index of NVIDIA's CUDA
/// repository is tens of MB, the pinned uv wheel 25 MB.
pub const RESPONSE_LIMIT: u64 = 128 * 1024 * 1024;

/// The most a run reads, all responses together.
pub const RUN_LIMIT: u64 = 512 * 1024 * 1024;

/// The most a gzip member may inflate to ([`gunzip`]).
pub const INFLATE_LIMIT: u64 = 256 * 1024 * 1024;

/// Redirect hops followed per request.
const MAX_REDIRECTS: usize = 5;

/// One run's budget: a deadline shared by every request, the bytes read so far, and what
/// the run learnt about the network (no network at all; hosts that are down).
struct Budget {
    start: Instant,
    /// The deadline in seconds from `start`; `None`: no run deadline (importers).
    secs: Mutex<Option<u64>>,
    /// Set by `--timeout`: the spec's `[resolve].timeout` does not override it.
    fixed: bool,
    read: AtomicU64,
    answered: AtomicBool,
    /// The hosts that answered in this run: reachable, whatever another host's failure
    /// suggests (queries run concurrently, so a failure can arrive before their answers).
    answered_hosts: Mutex<std::collections::BTreeSet<String>>,
    no_network: Mutex<Option<(String, Cause)>>,
    down: Mutex<BTreeMap<String, Cause>>,
}

/// The real client: `ureq` with rustls; the system trust roots where there are some,
/// Mozilla's otherwise; `HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY` and `NO_PROXY` from the
/// environment (ureq's `Proxy::try_from_env`, as curl reads them).
///
/// Redirects are followed by hand, at most five hops: to `http(s)://` only, never from
/// `https://` down to `http://`, and to another host only over `https://` (registries send
/// blobs to CDNs); the `Authorization` header never leaves its host.
pub struct Http {
    agent: ureq::Agent,
    offline: bool,
    budget: Budget,
}

impl Http {
    /// A client without a run deadline (importers, the uv download); with `offline`,
    /// every request fails with [`FetchError::Offline`].
    pub fn new(offline: bool) -> Http {
        Http::build(offline, None, false)
    }

    /// A client for one `gpustack lock` run: every request shares one deadline, `secs`
    /// from now (`--timeout`; `None`: the spec's `[resolve].timeout`, else
    /// [`DEFAULT_TIMEOUT_SECS`]); the first request that finds no network makes every
    /// later one fail at once, and a host that did not answer is not asked again.
    pub fn for_lock(secs: Option<u64>) -> Http {
        Http::build(
            false,
            Some(secs.unwrap_or(DEFAULT_TIMEOUT_SECS)),
            secs.is_some(),
        )
    }

    /// A client for one run of another command (an importer): one deadline, `secs` from
    /// now, that the spec cannot change; with `offline`, nothing is sent.
    pub fn for_run(offline: bool, secs: u64) -> Http {
        Http::build(offline, Some(secs), true)
    }

    fn build(offline: bool, secs: Option<u64>, fixed: bool) -> Http {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .tls_config(
                ureq::tls::TlsConfig::builder()
                    // An offline client never connects: reading and parsing the system's
                    // CA bundle (most of a cold offline `lock`'s client set-up) is skipped.
                    .root_certs(if offline {
                        ureq::tls::RootCerts::WebPki
                    } else {
                        root_certs()
                    })
                    .build(),
            )
            .proxy(ureq::Proxy::try_from_env())
            .timeout_global(Some(Duration::from_secs(120)))
            .timeout_connect(Some(Duration::from_secs(15)))
            .http_status_as_error(false)
            .max_redirects(0)
            .user_agent(concat!("gpustack/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Http {
            agent,
            offline,
            budget: Budget {
                start: Instant::now(),
                secs: Mutex::new(secs),
                fixed,
                read: AtomicU64::new(0),
                answered: AtomicBool::new(false),
                answered_hosts: Mutex::new(std::collections::BTreeSet::new()),
                no_network: Mutex::new(None),
                down: Mutex::new(BTreeMap::new()),
            },
        }
    }

    /// Whether every request fails with [`FetchError::Offline`].
    pub fn is_offline(&self) -> bool {
        self.offline
    }

    /// What is left of the run's deadline: `Err` once it is spent.
    fn remaining(&self) -> Result<Option<Duration>, Cause> {
        let Some(secs) = *lock(&self.budget.secs) else {
            return Ok(None);
        };
        let left = Duration::from_secs(secs).saturating_sub(self.budget.start.elapsed());
        if left.is_zero() {
            Err(Cause::Deadline { secs })
        } else {
            Ok(Some(left))
        }
    }

    /// Why `host` is not asked, when the run already knows. "No network" does not stop a
    /// host that answered in this run, nor one on this machine (a loopback mirror).
    fn known_down(&self, host: &str) -> Option<Cause> {
        if let Some((first, cause)) = lock(&self.budget.no_network).clone() {
            if !is_loopback(host) && !lock(&self.budget.answered_hosts).contains(host) {
                return Some(Cause::NoNetwork {
                    host: first,
                    first: Box::new(cause),
                });
            }
        }
        lock(&self.budget.down)
            .get(host)
            .map(|c| Cause::HostDown(Box::new(c.clone())))
    }

    /// Remembers a failure to reach `host`: no network at all when nothing answered yet
    /// and the failure says so (a name that does not resolve, no route, no answer in
    /// time); a refused connection only marks its host.
    fn note_failure(&self, host: &str, cause: &Cause) {
        let no_route = match cause {
            Cause::Dns | Cause::Timeout => true,
            Cause::Connect(d) => !d.contains("refused"),
            Cause::Proxy(_) => false,
            _ => return,
        };
        if no_route && self.budget.secs_set() && !self.budget.answered.load(Ordering::SeqCst) {
            lock(&self.budget.no_network).get_or_insert((host.to_string(), cause.clone()));
        }
        lock(&self.budget.down)
            .entry(host.to_string())
            .or_insert_with(|| cause.clone());
    }

    /// One request, no redirect followed.
    fn once(&self, req: &Request, url: &str, authorize: bool) -> Result<Response, Cause> {
        let remaining = self.remaining()?;
        let timeout = remaining.map_or(Duration::from_secs(120), |r| {
            r.min(Duration::from_secs(120))
        });
        let deadline_hit = remaining.is_some_and(|r| r <= Duration::from_secs(120));
        let headers = req
            .headers
            .iter()
            .filter(|(k, _)| authorize || !k.eq_ignore_ascii_case("authorization"));
        let result = match req.method {
            Method::Get => {
                let mut r = self.agent.get(url);
                for (k, v) in headers {
                    r = r.header(*k, v);
                }
                r.config().timeout_global(Some(timeout)).build().call()
            }
            Method::Head => {
                let mut r = self.agent.head(url);
                for (k, v) in headers {
                    r = r.header(*k, v);
                }
                r.config().timeout_global(Some(timeout)).build().call()
            }
        };
        let secs = (*lock(&self.budget.secs)).unwrap_or(0);
        let name = |e: ureq::Error| match cause_of(e) {
            Cause::Timeout if deadline_hit => Cause::Deadline { secs },
            c => c,
        };
        let mut resp = result.map_err(name)?;
        self.budget.answered.store(true, Ordering::SeqCst);
        lock(&self.budget.answered_hosts).insert(host_of(url).to_string());
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
        let body = if req.method == Method::Head || (300..400).contains(&status) {
            Vec::new()
        } else {
            self.read_body(resp.body_mut(), name)?
        };
        Ok(Response {
            status,
            headers,
            body,
        })
    }

    /// Reads a body under the per-response and per-run caps.
    fn read_body(
        &self,
        body: &mut ureq::Body,
        name: impl Fn(ureq::Error) -> Cause,
    ) -> Result<Vec<u8>, Cause> {
        use std::io::Read as _;
        let mut reader = body.with_config().limit(u64::MAX).reader();
        let mut out = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => return Ok(out),
                Ok(n) => n,
                Err(e) => {
                    return Err(match e.downcast::<ureq::Error>() {
                        Ok(u) => name(u),
                        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                            name(ureq::Error::Io(e))
                        }
                        Err(e) => Cause::Other(e.to_string()),
                    })
                }
            };
            out.extend_from_slice(&buf[..n]);
            if out.len() as u64 > RESPONSE_LIMIT {
                return Err(Cause::TooLarge {
                    limit: RESPONSE_LIMIT,
                });
            }
            let total = self.budget.read.fetch_add(n as u64, Ordering::SeqCst) + n as u64;
            if total > RUN_LIMIT {
                return Err(Cause::RunBytes { limit: RUN_LIMIT });
            }
        }
    }
}

impl Budget {
    fn secs_set(&self) -> bool {
        lock(&self.secs).is_some()
    }
}

/// `localhost`, `127.0.0.0/8` or `[::1]`, with or without a port.
fn is_loopback(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split_once(']').map_or(rest, |(a, _)| a)
    } else {
        host.rsplit_once(':').map_or(host, |(a, _)| a)
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// ureq's error as a [`Cause`].
fn cause_of(e: ureq::Error) -> Cause {
    use std::io::ErrorKind as K;
    match e {
        ureq::Error::HostNotFound => Cause::Dns,
        ureq::Error::Timeout(_) => Cause::Timeout,
        ureq::Error::ConnectionFailed => Cause::Connect("the connection failed".into()),
        ureq::Error::Io(io) => match io.kind() {
            K::TimedOut | K::WouldBlock => Cause::Timeout,
            K::ConnectionRefused
            | K::ConnectionReset
            | K::ConnectionAborted
            | K::NotConnected
            | K::AddrNotAvailable
            | K::HostUnreachable
            | K::NetworkUnreachable => Cause::Connect(io.to_string()),
            _ if io.to_string().contains("lookup") => Cause::Dns,
            _ => Cause::Other(io.to_string()),
        },
        e @ (ureq::Error::Tls(_) | ureq::Error::Rustls(_) | ureq::Error::Pem(_)) => {
            Cause::Tls(e.to_string())
        }
        ureq::Error::BodyExceedsLimit(limit) => Cause::TooLarge { limit },
        ureq::Error::ConnectProxyFailed(d) => Cause::Proxy(d),
        e => Cause::Other(e.to_string()),
    }
}

/// Where a redirect may go from `from`, or why not.
fn redirect_target(from: &str, location: &str) -> Result<String, Cause> {
    let refused = |to: &str| Cause::Redirect { to: to.to_string() };
    let to = if location.contains("://") {
        location.to_string()
    } else if location.starts_with("//") {
        let scheme = from.split_once("://").map_or("https", |(s, _)| s);
        format!("{scheme}:{location}")
    } else if location.starts_with('/') {
        let scheme = from.split_once("://").map_or("https", |(s, _)| s);
        format!("{scheme}://{}{location}", host_of(from))
    } else {
        let base = from.rsplit_once('/').map_or(from, |(b, _)| b);
        format!("{base}/{location}")
    };
    let scheme = to.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    let from_https = from.starts_with("https://");
    match scheme.as_deref() {
        Some("https") => Ok(to),
        Some("http") if !from_https && host_of(&to) == host_of(from) => Ok(to),
        _ => Err(refused(&to)),
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

impl Transport for Http {
    fn send(&self, req: &Request) -> Result<Response, FetchError> {
        if self.offline {
            return Err(FetchError::Offline {
                url: req.url.clone(),
            });
        }
        let mut url = req.url.clone();
        for _ in 0..=MAX_REDIRECTS {
            let host = host_of(&url).to_string();
            let fail = |cause: Cause| FetchError::Unreachable {
                url: url.clone(),
                cause,
            };
            if let Some(cause) = self.known_down(&host) {
                return Err(fail(cause));
            }
            let authorize = host == host_of(&req.url);
            let resp = match self.once(req, &url, authorize) {
                Ok(r) => r,
                Err(cause) => {
                    self.note_failure(&host, &cause);
                    return Err(fail(cause));
                }
            };
            let location = resp
                .header("location")
                .filter(|_| matches!(resp.status, 301 | 302 | 303 | 307 | 308));
            match location {
                None => return Ok(resp),
                Some(loc) => url = redirect_target(&url, loc).map_err(fail)?,
            }
        }
        Err(FetchError::Unreachable {
            url: url.clone(),
            cause: Cause::Redirect { to: url },
        })
    }

    fn budget_secs(&self, secs: u64) {
        if !self.budget.fixed {
            let mut s = lock(&self.budget.secs);
            if s.is_some() {
                *s = Some(secs);
            }
        }
    }
}

/// `sha256:` and the lowercase hex digest of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    format!("sha256:{}", crate::catalog::hex(&Sha256::digest(bytes)))
}

/// Inflates a gzip member (RFC 1952) whole; at most [`INFLATE_LIMIT`] bytes of output
/// (a bomb is refused with an error). The repository clients read through [`Gunzip`]
/// instead, which holds no more than its window.
pub fn gunzip(data: &[u8]) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    let mut out = Vec::new();
    Gunzip::new(data)?
        .read_to_end(&mut out)
        .map_err(|e| e.to_string())?;
    Ok(out)
}

/// A gzip member (RFC 1952) read as a stream: `Packages.gz`, `primary.xml.gz`, the head
/// of an sdist. Memory stays at the inflater's 32 KiB window and the caller's buffer,
/// whatever the member inflates to; more than [`INFLATE_LIMIT`] bytes of output is an
/// error (a gzip bomb costs at most that much inflating, never that much memory).
pub struct Gunzip<'a> {
    input: &'a [u8],
    state: Box<miniz_oxide::inflate::stream::InflateState>,
    written: u64,
    done: bool,
}

impl<'a> Gunzip<'a> {
    /// Reads the member header; `Err` when `data` is not gzip.
    pub fn new(data: &'a [u8]) -> Result<Gunzip<'a>, String> {
        const FHCRC: u8 = 2;
        const FEXTRA: u8 = 4;
        const FNAME: u8 = 8;
        const FCOMMENT: u8 = 16;
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
        Ok(Gunzip {
            input: &data[i..],
            state: miniz_oxide::inflate::stream::InflateState::new_boxed(
                miniz_oxide::DataFormat::Raw,
            ),
            written: 0,
            done: false,
        })
    }
}

impl std::io::Read for Gunzip<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use miniz_oxide::{MZError, MZFlush, MZStatus};
        if self.done || buf.is_empty() {
            return Ok(0);
        }
        loop {
            let r = miniz_oxide::inflate::stream::inflate(
                &mut self.state,
                self.input,
                buf,
                MZFlush::None,
            );
            self.input = &self.input[r.bytes_consumed..];
            self.written += r.bytes_written as u64;
            if self.written > INFLATE_LIMIT {
                self.done = true;
                return Err(std::io::Error::other(format!(
                    "gzip data inflates to more than {} (refused: a gzip bomb, or not an index)",
                    mib(INFLATE_LIMIT)
                )));
            }
            match r.status {
                Ok(MZStatus::StreamEnd) => {
                    self.done = true;
                    return Ok(r.bytes_written);
                }
                _ if r.bytes_written > 0 => return Ok(r.bytes_written),
                // Input read (a block header), nothing written yet: go on.
                Ok(_) if r.bytes_consumed > 0 => {}
                Ok(_) | Err(MZError::Buf) => {
                    self.done = true;
                    return Err(std::io::Error::other(
                        "gzip data ends before its last block",
                    ));
                }
                Err(e) => {
                    self.done = true;
                    return Err(std::io::Error::other(format!(
                        "gzip data does not inflate ({e:?})"
                    )));
                }
            }
        }
    }
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
