//! What a URL and a registry host may look like wherever the crate writes one (a spec's
//! `[resolve]` tables, a lock's `[[python.build]]` sources): one rule, no crate dependency.

/// An `http://` or `https://` URL with a host, printable ASCII without quotes, spaces,
/// backslashes or template characters, at most 512 bytes.
pub fn is_url(s: &str) -> bool {
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"));
    rest.is_some_and(|r| {
        let host = r.split('/').next().unwrap_or("");
        !host.is_empty() && is_registry_host(host)
    }) && s.len() <= 512
        && s.bytes()
            .all(|c| c.is_ascii_graphic() && !b"\"'\\`<>{}|^$;".contains(&c))
}

/// A registry host: lowercase `host[:port]` (`docker.io`, `127.0.0.1:5000`).
pub fn is_registry_host(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && !s.starts_with(['.', '-', ':'])
        && s.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b".-:".contains(&c))
}
