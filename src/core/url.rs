//! Small grammars the parsers share for what a user or a catalog writes: the authority of
//! a URL (no credentials, a port in range), a host path a pod may mount, and calendar
//! dates. Each is checked where the value is parsed, so nothing invalid reaches a lock or
//! a generated file.

/// The authority of `scheme://authority/…` (`user:pass@host:port`), or `None` when `url`
/// has no `://`.
fn authority(url: &str) -> Option<&str> {
    let rest = &url[url.find("://")? + 3..];
    Some(rest.split(['/', '?', '#']).next().unwrap_or(""))
}

/// Whether `url` carries credentials (`https://user:token@host/…`): they would be copied
/// into the lock and every generated file that names the URL (a Dockerfile's `git clone`,
/// uv's index list), and from there into image layers and logs.
///
/// ```
/// use gpustack::core::url::has_credentials;
/// assert!(has_credentials("https://user:ghp_x@github.com/pytorch/pytorch"));
/// assert!(has_credentials("https://token@pypi.example.com/simple"));
/// assert!(!has_credentials("https://github.com/pytorch/pytorch@v2.10.0"));
/// ```
pub fn has_credentials(url: &str) -> bool {
    authority(url).is_some_and(|a| a.contains('@'))
}

/// The hint for a URL with credentials, the same wherever one is refused.
pub const CREDENTIALS_HINT: &str = "keep credentials out of the URL (it is recorded in the lock and copied into generated files): use the tool's own credential store, such as a netrc file, uv's `UV_INDEX_<NAME>_USERNAME`/`_PASSWORD`, or `docker login`";

/// Whether `host[:port]` has a port in 1..=65535 when it has one (`:` once, then digits).
///
/// ```
/// use gpustack::core::url::port_ok;
/// assert!(port_ok("docker.io") && port_ok("127.0.0.1:5000") && port_ok("h:65535"));
/// assert!(!port_ok("h:99999") && !port_ok("h:0") && !port_ok("h:") && !port_ok("h:1:2"));
/// ```
pub fn port_ok(host_port: &str) -> bool {
    match host_port.split_once(':') {
        None => true,
        Some((_, p)) => {
            !p.is_empty()
                && p.len() <= 5
                && p.bytes().all(|b| b.is_ascii_digit())
                && p.parse::<u32>().is_ok_and(|n| (1..=65535).contains(&n))
        }
    }
}

/// The port problem of a URL's authority, for [`port_ok`]: `false` when it names a port
/// out of range.
pub fn url_port_ok(url: &str) -> bool {
    authority(url).is_none_or(|a| port_ok(a.rsplit('@').next().unwrap_or(a)))
}

/// Why a host path must not be mounted into a pod or container, if it must not: the
/// root, or a system directory (or one inside it) whose mount hands the workload the
/// node (`/`, `/etc`, `/proc`, `/var/run/docker.sock`), or an empty or `.` segment that
/// makes the same directory look different.
///
/// ```
/// use gpustack::core::url::host_path_problem;
/// assert_eq!(host_path_problem("/data/ckpt"), None);
/// assert!(host_path_problem("/").is_some());
/// assert!(host_path_problem("/etc/kubernetes").is_some());
/// assert!(host_path_problem("/data//x").is_some());
/// ```
pub fn host_path_problem(path: &str) -> Option<&'static str> {
    const SYSTEM: &[&str] = &[
        "bin", "boot", "dev", "etc", "lib", "lib32", "lib64", "proc", "root", "run", "sbin", "sys",
        "usr", "var",
    ];
    let segs: Vec<&str> = path.strip_prefix('/')?.split('/').collect();
    if segs.iter().all(|s| s.is_empty()) {
        return Some("it is the node's root directory");
    }
    let trimmed = if segs.last() == Some(&"") {
        &segs[..segs.len() - 1]
    } else {
        &segs[..]
    };
    if trimmed
        .iter()
        .any(|s| s.is_empty() || *s == "." || *s == "..")
    {
        return Some("it has an empty, `.` or `..` segment");
    }
    // `/var` itself and its runtime sockets; `/var/lib/…` data directories stay allowed.
    let system = match trimmed {
        ["var"] | ["var", "run", ..] | ["var", "lib", "kubelet", ..] => true,
        ["var", ..] => false,
        [first, ..] => SYSTEM.contains(first),
        [] => true,
    };
    system.then_some("it is a system directory of the node")
}

/// Whether `y-m-d` is a real calendar date (proleptic Gregorian): `2026-02-30` is not,
/// `2024-02-29` is.
///
/// ```
/// use gpustack::core::url::calendar_date;
/// assert!(calendar_date(2024, 2, 29) && !calendar_date(2026, 2, 29) && !calendar_date(2026, 2, 30));
/// assert!(!calendar_date(1900, 2, 29) && calendar_date(2000, 2, 29) && !calendar_date(2026, 13, 1));
/// ```
pub fn calendar_date(y: u32, m: u32, d: u32) -> bool {
    let leap = y.is_multiple_of(4) && (!y.is_multiple_of(100) || y.is_multiple_of(400));
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}

/// `YYYY-MM-DD` as numbers, when it is a real date ([`calendar_date`]).
///
/// ```
/// use gpustack::core::url::parse_date;
/// assert_eq!(parse_date("2026-02-28"), Some((2026, 2, 28)));
/// assert_eq!(parse_date("2026-02-30"), None);
/// assert_eq!(parse_date("2026-2-3"), None);
/// ```
pub fn parse_date(s: &str) -> Option<(u32, u32, u32)> {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())
            .flatten()
    };
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    calendar_date(y, m, d).then_some((y, m, d))
}
