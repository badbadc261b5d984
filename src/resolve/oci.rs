//! A small OCI distribution client: `repository:tag` → the digest of what the tag names
//! (an image index / manifest list, or a single manifest) and, for an index, the digest of
//! each platform's manifest.
//!
//! One `GET /v2/<name>/manifests/<tag>` with the `Accept` types of the OCI image spec and
//! Docker's schema 2. A `401` with `WWW-Authenticate: Bearer realm=…,service=…,scope=…`
//! starts the anonymous token flow Docker Hub, nvcr.io and ghcr.io use (distribution's
//! token spec): `GET realm?service=…&scope=…`, then the request again with
//! `Authorization: Bearer <token>`. The digest is computed from the bytes received and must
//! equal the registry's `Docker-Content-Digest` when it sends one, so a mirror cannot
//! substitute a manifest under the same tag unnoticed by the lock.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

use super::http::{host_of, sha256_digest, FetchError, Request, Transport};

/// Manifest media types asked for, index types first.
pub const ACCEPT: &str = "application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";

/// An image reference: registry host, repository path and tag.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ImageRef {
    /// `docker.io`, `nvcr.io`, `ghcr.io`, `localhost:5000`.
    pub registry: String,
    /// `nvidia/cuda`; Docker Hub's official images as `library/ubuntu`.
    pub repository: String,
    /// `12.6.3-devel-ubuntu22.04`.
    pub tag: String,
}

impl ImageRef {
    /// Parses `[registry/]repository:tag[@digest]` as Docker reads it: the first path
    /// segment is a registry when it holds a `.` or a `:` or is `localhost`; otherwise the
    /// registry is `docker.io`, where a one-segment name is an official (`library/`) image.
    /// A digest after the tag is ignored (it is what resolution finds).
    pub fn parse(s: &str) -> Result<ImageRef, String> {
        let bad = |why: &str| format!("image reference `{}`: {why}", s.escape_debug());
        let s_no_digest = s.split_once('@').map_or(s, |(a, _)| a);
        let (name, tag) = match s_no_digest.rsplit_once(':') {
            Some((n, t)) if !t.contains('/') => (n, t),
            _ => return Err(bad("no tag")),
        };
        let (registry, repository) = match name.split_once('/') {
            Some((first, rest))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (first.to_string(), rest.to_string())
            }
            _ => ("docker.io".to_string(), name.to_string()),
        };
        let repository = if registry == "docker.io" && !repository.contains('/') {
            format!("library/{repository}")
        } else {
            repository
        };
        let name_ok = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit() || b"._-/".contains(&c);
        let tag_ok = |c: u8| c.is_ascii_alphanumeric() || b"._-".contains(&c);
        if repository.is_empty()
            || !repository.bytes().all(name_ok)
            || repository.split('/').any(str::is_empty)
        {
            return Err(bad("invalid repository name"));
        }
        if tag.is_empty() || tag.len() > 128 || !tag.bytes().all(tag_ok) {
            return Err(bad("invalid tag"));
        }
        Ok(ImageRef {
            registry,
            repository,
            tag: tag.to_string(),
        })
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}:{}", self.registry, self.repository, self.tag)
    }
}

/// What a tag resolves to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// `sha256:…` of the manifest or index the tag names: what `image:tag@digest` pins.
    pub digest: String,
    /// Its media type.
    pub media_type: String,
    /// For an index: `(os/arch[/variant], digest)` per platform manifest, sorted by
    /// platform; attestation entries (`unknown/unknown`) left out. Empty for a manifest.
    pub platforms: Vec<(String, String)>,
}

/// Why a tag did not resolve.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OciError {
    /// No response (offline, unreachable).
    Fetch(FetchError),
    /// The registry answered with an error status.
    Status {
        /// The URL.
        url: String,
        /// The status.
        status: u16,
    },
    /// The token flow failed.
    Auth {
        /// The URL that asked for authentication.
        url: String,
        /// What went wrong.
        detail: String,
    },
    /// The manifest is not one this client reads.
    BadManifest {
        /// The URL.
        url: String,
        /// What went wrong.
        detail: String,
    },
    /// The image reference the catalog names does not parse (nothing was sent).
    BadReference {
        /// The reference.
        reference: String,
        /// What went wrong.
        detail: String,
    },
    /// `Docker-Content-Digest` is not the digest of the bytes received.
    DigestMismatch {
        /// The URL.
        url: String,
        /// The header's value.
        header: String,
        /// The digest of the body.
        computed: String,
    },
}

impl fmt::Display for OciError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OciError::Fetch(e) => e.fmt(f),
            OciError::Status { url, status } => write!(f, "`{url}` answered HTTP {status}"),
            OciError::Auth { url, detail } => {
                write!(f, "anonymous token for `{url}` not granted: {detail}")
            }
            OciError::BadManifest { url, detail } => {
                write!(f, "manifest at `{url}` not readable: {detail}")
            }
            OciError::BadReference { reference, detail } => {
                write!(f, "reference `{reference}` does not parse: {detail}")
            }
            OciError::DigestMismatch {
                url,
                header,
                computed,
            } => write!(
                f,
                "`{url}` says its manifest is `{header}`, but the bytes received are `{computed}`"
            ),
        }
    }
}

impl From<FetchError> for OciError {
    fn from(e: FetchError) -> OciError {
        OciError::Fetch(e)
    }
}

/// The HTTPS endpoint of a registry host: Docker Hub's API lives at
/// `registry-1.docker.io`; every other host serves it itself.
pub fn default_endpoint(registry: &str) -> String {
    match registry {
        "docker.io" | "index.docker.io" | "registry-1.docker.io" => {
            "https://registry-1.docker.io".into()
        }
        host => format!("https://{host}"),
    }
}

/// A registry client over a [`Transport`], with `[resolve].registries` mirrors.
pub struct Registry<'a> {
    transport: &'a dyn Transport,
    mirrors: &'a BTreeMap<String, String>,
}

impl<'a> Registry<'a> {
    /// A client; `mirrors` maps a registry host to the base URL that serves it.
    pub fn new(transport: &'a dyn Transport, mirrors: &'a BTreeMap<String, String>) -> Self {
        Registry { transport, mirrors }
    }

    /// The base URL requests for `registry` go to.
    pub fn endpoint(&self, registry: &str) -> String {
        self.mirrors.get(registry).map_or_else(
            || default_endpoint(registry),
            |m| m.trim_end_matches('/').to_string(),
        )
    }

    /// Resolves a tag.
    pub fn resolve(&self, r: &ImageRef) -> Result<Resolved, OciError> {
        let url = format!(
            "{}/v2/{}/manifests/{}",
            self.endpoint(&r.registry),
            r.repository,
            r.tag
        );
        let req = Request::get(&url).header("Accept", ACCEPT);
        let mut resp = self.transport.send(&req)?;
        if resp.status == 401 {
            let challenge = resp
                .header("www-authenticate")
                .unwrap_or_default()
                .to_string();
            let token = self.token(&url, &challenge, &r.repository)?;
            resp = self
                .transport
                .send(&req.header("Authorization", format!("Bearer {token}")))?;
        }
        if resp.status != 200 {
            return Err(OciError::Status {
                url,
                status: resp.status,
            });
        }
        let computed = sha256_digest(&resp.body);
        if let Some(h) = resp.header("docker-content-digest") {
            if h.starts_with("sha256:") && h != computed {
                return Err(OciError::DigestMismatch {
                    url,
                    header: h.to_string(),
                    computed,
                });
            }
        }
        let content_type = resp
            .header("content-type")
            .map(|c| c.split(';').next().unwrap_or(c).trim().to_string());
        parse_manifest(&url, &resp.body, content_type.as_deref(), computed)
    }

    /// The anonymous bearer-token flow.
    fn token(&self, url: &str, challenge: &str, repository: &str) -> Result<String, OciError> {
        let auth = |detail: String| OciError::Auth {
            url: url.to_string(),
            detail,
        };
        let params = parse_challenge(challenge).ok_or_else(|| {
            auth(format!(
                "the registry asks for authentication but sends no Bearer challenge (`{}`)",
                challenge.escape_debug()
            ))
        })?;
        let realm = params
            .get("realm")
            .ok_or_else(|| auth("the Bearer challenge names no realm".into()))?;
        if !realm_allowed(url, realm) {
            return Err(auth(format!(
                "the registry sends its token request to `{}`, outside its own site; gpustack asks for tokens only over `https://` at the registry's site (its host, or a host under the same domain, as `auth.docker.io` for `registry-1.docker.io`), or at the registry's own `http://` host",
                crate::error::shown_value(realm)
            )));
        }
        let mut token_url = realm.clone();
        let mut sep = if realm.contains('?') { '&' } else { '?' };
        if let Some(service) = params.get("service") {
            token_url.push_str(&format!("{sep}service={}", query_escape(service)));
            sep = '&';
        }
        let scope = params
            .get("scope")
            .cloned()
            .unwrap_or_else(|| format!("repository:{repository}:pull"));
        token_url.push_str(&format!("{sep}scope={}", query_escape(&scope)));
        let resp = self.transport.send(&Request::get(&token_url))?;
        if resp.status != 200 {
            return Err(auth(format!("`{token_url}` answered HTTP {}", resp.status)));
        }
        #[derive(Deserialize)]
        struct Token {
            token: Option<String>,
            access_token: Option<String>,
        }
        let t: Token = serde_json::from_slice(&resp.body)
            .map_err(|e| auth(format!("the token response is not JSON: {e}")))?;
        t.token
            .or(t.access_token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| auth("the token response holds no `token`".into()))
    }
}

/// Whether the token request may go to `realm` for the registry URL `url`: over
/// `https://` to the registry's host or a host sharing its domain (the last two labels:
/// `auth.docker.io` serves `registry-1.docker.io`, `nvcr.io/proxy_auth` serves `nvcr.io`),
/// or to the very `scheme://host:port` of the registry (a mirror over plain HTTP). The
/// challenge comes from the registry's answer, so a hostile or compromised registry could
/// otherwise send gpustack to any host, a file, or a service inside the network.
pub fn realm_allowed(url: &str, realm: &str) -> bool {
    let scheme = |u: &str| u.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    let name = |u: &str| {
        let h = host_of(u);
        let h = if h.starts_with('[') {
            h.split_once(']').map_or(h, |(a, _)| a)
        } else {
            h.rsplit_once(':').map_or(h, |(a, _)| a)
        };
        h.to_ascii_lowercase()
    };
    if scheme(realm) == scheme(url) && host_of(realm).eq_ignore_ascii_case(host_of(url)) {
        return true;
    }
    if scheme(realm).as_deref() != Some("https") {
        return false;
    }
    let site = |h: &str| -> String {
        if h.parse::<std::net::IpAddr>().is_ok() || h.starts_with('[') {
            return h.to_string();
        }
        let labels: Vec<&str> = h.split('.').collect();
        labels[labels.len().saturating_sub(2)..].join(".")
    };
    let (r, u) = (name(realm), name(url));
    !r.is_empty() && site(&r) == site(&u)
}

/// `Bearer realm="…",service="…",scope="…"` → its parameters; `None` unless Bearer.
pub fn parse_challenge(h: &str) -> Option<BTreeMap<String, String>> {
    let rest = h.trim();
    let (scheme, rest) = rest.split_once(' ').unwrap_or((rest, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let mut out = BTreeMap::new();
    let mut chars = rest.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if key.is_empty() {
            break;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next()),
                    '"' => break,
                    c => value.push(c),
                }
            }
        } else {
            while let Some(c) = chars.peek().copied() {
                if c == ',' {
                    break;
                }
                value.push(c);
                chars.next();
            }
        }
        out.insert(key.trim().to_ascii_lowercase(), value);
    }
    Some(out)
}

/// Percent-encodes a query value (RFC 3986 unreserved characters, `:` and `/` kept).
fn query_escape(s: &str) -> String {
    let mut o = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~:/".contains(&b) {
            o.push(char::from(b));
        } else {
            o.push_str(&format!("%{b:02X}"));
        }
    }
    o
}

const INDEX_TYPES: [&str; 2] = [
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];
const MANIFEST_TYPES: [&str; 2] = [
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
];

/// Reads a manifest or index body whose digest is `digest`.
pub fn parse_manifest(
    url: &str,
    body: &[u8],
    content_type: Option<&str>,
    digest: String,
) -> Result<Resolved, OciError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Platform {
        os: String,
        architecture: String,
        variant: Option<String>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Entry {
        digest: String,
        platform: Option<Platform>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Body {
        schema_version: Option<u32>,
        media_type: Option<String>,
        manifests: Option<Vec<Entry>>,
        config: Option<serde_json::Value>,
    }
    let bad = |detail: String| OciError::BadManifest {
        url: url.to_string(),
        detail,
    };
    let b: Body = serde_json::from_slice(body).map_err(|e| bad(format!("not JSON: {e}")))?;
    if b.schema_version != Some(2) {
        return Err(bad(format!(
            "schemaVersion {:?}: only schema 2 (OCI, Docker v2) is read",
            b.schema_version
        )));
    }
    let media_type = b
        .media_type
        .clone()
        .or_else(|| content_type.map(str::to_string))
        .unwrap_or_else(|| {
            if b.manifests.is_some() {
                INDEX_TYPES[0].to_string()
            } else {
                MANIFEST_TYPES[0].to_string()
            }
        });
    if INDEX_TYPES.contains(&media_type.as_str()) {
        let mut platforms = Vec::new();
        for m in b.manifests.unwrap_or_default() {
            if !is_digest(&m.digest) {
                return Err(bad(format!("entry digest `{}` is not sha256", m.digest)));
            }
            let Some(p) = m.platform else { continue };
            if p.os == "unknown" || p.architecture == "unknown" {
                continue;
            }
            let name = match p.variant {
                Some(v) => format!("{}/{}/{v}", p.os, p.architecture),
                None => format!("{}/{}", p.os, p.architecture),
            };
            platforms.push((name, m.digest));
        }
        platforms.sort();
        platforms.dedup();
        return Ok(Resolved {
            digest,
            media_type,
            platforms,
        });
    }
    if MANIFEST_TYPES.contains(&media_type.as_str()) && b.config.is_some() {
        return Ok(Resolved {
            digest,
            media_type,
            platforms: Vec::new(),
        });
    }
    Err(bad(format!(
        "media type `{media_type}` is not an image index or manifest"
    )))
}

/// `sha256:` and 64 lowercase hex digits.
pub fn is_digest(s: &str) -> bool {
    s.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve::http::Response;

    #[test]
    fn references_parse_as_docker_reads_them() {
        let r = ImageRef::parse("nvidia/cuda:12.6.3-devel-ubuntu22.04").unwrap();
        assert_eq!(r.registry, "docker.io");
        assert_eq!(r.repository, "nvidia/cuda");
        assert_eq!(
            r.to_string(),
            "docker.io/nvidia/cuda:12.6.3-devel-ubuntu22.04"
        );
        let r = ImageRef::parse("ubuntu:22.04").unwrap();
        assert_eq!(r.repository, "library/ubuntu");
        let r = ImageRef::parse("ghcr.io/astral-sh/uv:0.11.7@sha256:240f").unwrap();
        assert_eq!((r.registry.as_str(), r.tag.as_str()), ("ghcr.io", "0.11.7"));
        let r = ImageRef::parse("localhost:5000/a/b:1").unwrap();
        assert_eq!(r.registry, "localhost:5000");
        assert!(ImageRef::parse("nvidia/cuda").is_err());
        assert!(ImageRef::parse("Nvidia/cuda:1").is_err());
        assert!(ImageRef::parse("nvidia/cuda:$(x)").is_err());
    }

    #[test]
    fn challenges_parse() {
        // As Docker Hub sends it.
        let c = parse_challenge(r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:nvidia/cuda:pull""#).unwrap();
        assert_eq!(c["realm"], "https://auth.docker.io/token");
        assert_eq!(c["service"], "registry.docker.io");
        assert_eq!(c["scope"], "repository:nvidia/cuda:pull");
        assert!(parse_challenge(r#"Basic realm="x""#).is_none());
        assert_eq!(
            query_escape("repository:a/b:pull,push"),
            "repository:a/b:pull%2Cpush"
        );
    }

    #[test]
    fn token_realms_stay_on_the_registrys_site() {
        let hub = "https://registry-1.docker.io/v2/nvidia/cuda/manifests/x";
        assert!(realm_allowed(hub, "https://auth.docker.io/token"));
        assert!(realm_allowed(
            "https://nvcr.io/v2/a/manifests/x",
            "https://nvcr.io/proxy_auth"
        ));
        assert!(realm_allowed(
            "https://ghcr.io/v2/a/manifests/x",
            "https://ghcr.io/token"
        ));
        assert!(realm_allowed(
            "http://127.0.0.1:5000/v2/a/manifests/x",
            "http://127.0.0.1:5000/token"
        ));
        // Another site, a downgrade, another port over HTTP, a file, no host.
        assert!(!realm_allowed(hub, "https://auth.example.com/token"));
        assert!(!realm_allowed(hub, "http://auth.docker.io/token"));
        assert!(!realm_allowed(
            "http://127.0.0.1:5000/v2/a/manifests/x",
            "http://127.0.0.1:6000/token"
        ));
        assert!(!realm_allowed(
            "http://127.0.0.1:5000/v2/a/manifests/x",
            "http://169.254.169.254/latest/meta-data"
        ));
        assert!(!realm_allowed(hub, "file:///etc/passwd"));
        assert!(!realm_allowed(hub, "https:///token"));
        assert!(!realm_allowed(
            "https://10.0.0.1/v2/a/manifests/x",
            "https://10.0.0.2/token"
        ));
    }

    /// Serves canned responses by URL and records the requests.
    struct Canned {
        answers: Vec<(String, Response)>,
        seen: std::sync::Mutex<Vec<Request>>,
    }

    impl Transport for Canned {
        fn send(&self, req: &Request) -> Result<Response, FetchError> {
            self.seen.lock().unwrap().push(req.clone());
            let authed = req.headers.iter().any(|(k, _)| *k == "Authorization");
            for (u, r) in &self.answers {
                let (u, need_auth) = match u.strip_prefix("auth:") {
                    Some(u) => (u, true),
                    None => (u.as_str(), false),
                };
                if u == req.url && need_auth == authed {
                    return Ok(r.clone());
                }
            }
            Err(FetchError::Unreachable {
                url: req.url.clone(),
                cause: crate::resolve::http::Cause::Connect("no canned answer".into()),
            })
        }
    }

    #[test]
    fn token_flow_then_index() {
        let index = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:1111111111111111111111111111111111111111111111111111111111111111","size":1,"platform":{"architecture":"arm64","os":"linux","variant":"v8"}},{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:2222222222222222222222222222222222222222222222222222222222222222","size":1,"platform":{"architecture":"amd64","os":"linux"}},{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:3333333333333333333333333333333333333333333333333333333333333333","size":1,"platform":{"architecture":"unknown","os":"unknown"}}]}"#;
        let digest = sha256_digest(index);
        let url = "https://registry-1.docker.io/v2/nvidia/cuda/manifests/12.6.3-devel-ubuntu22.04";
        let canned = Canned {
            answers: vec![
                (
                    url.into(),
                    Response {
                        status: 401,
                        headers: vec![("www-authenticate".into(), r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:nvidia/cuda:pull""#.into())],
                        body: Vec::new(),
                    },
                ),
                (
                    "https://auth.docker.io/token?service=registry.docker.io&scope=repository:nvidia/cuda:pull".into(),
                    Response {
                        status: 200,
                        headers: Vec::new(),
                        body: br#"{"token":"t0k","expires_in":300}"#.to_vec(),
                    },
                ),
                (
                    format!("auth:{url}"),
                    Response {
                        status: 200,
                        headers: vec![("docker-content-digest".into(), digest.clone())],
                        body: index.to_vec(),
                    },
                ),
            ],
            seen: std::sync::Mutex::default(),
        };
        let mirrors = BTreeMap::new();
        let reg = Registry::new(&canned, &mirrors);
        let r = reg
            .resolve(&ImageRef::parse("nvidia/cuda:12.6.3-devel-ubuntu22.04").unwrap())
            .unwrap();
        assert_eq!(r.digest, digest);
        assert_eq!(
            r.platforms
                .iter()
                .map(|(p, _)| p.as_str())
                .collect::<Vec<_>>(),
            ["linux/amd64", "linux/arm64/v8"]
        );
        let seen = canned.seen.lock().unwrap();
        assert_eq!(seen.len(), 3);
        assert!(seen[2]
            .headers
            .contains(&("Authorization", "Bearer t0k".to_string())));
        assert!(seen[0].headers.contains(&("Accept", ACCEPT.to_string())));
    }

    #[test]
    fn a_lying_mirror_is_caught() {
        let body = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{},"layers":[]}"#;
        let url = "http://127.0.0.1:1/v2/library/ubuntu/manifests/22.04";
        let canned = Canned {
            answers: vec![(
                url.into(),
                Response {
                    status: 200,
                    headers: vec![(
                        "docker-content-digest".into(),
                        "sha256:0000000000000000000000000000000000000000000000000000000000000000"
                            .into(),
                    )],
                    body: body.to_vec(),
                },
            )],
            seen: std::sync::Mutex::default(),
        };
        let mirrors =
            BTreeMap::from([("docker.io".to_string(), "http://127.0.0.1:1/".to_string())]);
        let err = Registry::new(&canned, &mirrors)
            .resolve(&ImageRef::parse("ubuntu:22.04").unwrap())
            .unwrap_err();
        assert!(matches!(err, OciError::DigestMismatch { .. }), "{err}");
    }
}
