//! Whether a PyPI release installs at all, and where: its PEP 592 yanked status, the
//! platforms of its wheels, and the glibc floor of its install on Linux x86_64 and
//! aarch64, its dependencies' wheels included.
//!
//! The floor is an approximation of the closure uv installs, written out so a reader can
//! check it (the book's catalog chapter says the same):
//!
//! * the release's own wheels: per CPU, the least glibc among its Linux wheels;
//! * each `Requires-Dist` that applies on Linux on that CPU (markers evaluated for
//!   `sys_platform == "linux"` and the CPU; `python_version` clauses count as true;
//!   `extra == …` requirements are left out): of the dependency's non-yanked releases its
//!   specifier allows, the one whose wheels ask the least of glibc, counting only wheels a
//!   regular CPython of the release's Python range loads (not free-threaded `cp3XYt`, not
//!   PyPy). A dependency with a pure-Python wheel in range, or with no Linux wheel in range
//!   at all (an sdist only: it builds from source), sets no floor;
//! * the floor is the highest of those. One level of dependencies: the components the
//!   catalog models (torch under vLLM) carry their own floor, which the solver checks
//!   where they are locked; deeper dependencies are not read.

use std::collections::BTreeMap;

use super::pypi::{self, DistFile, FileName, Page};
use crate::catalog::WheelPlatform;
use crate::core::version::{Version, VersionReq};

/// The CPUs the catalog models.
pub(crate) const CPUS: [&str; 2] = ["x86_64", "aarch64"];

/// PEP 592: `Some(reason)` when every file of the release is yanked.
pub(crate) fn yank_of(files: &[&DistFile]) -> Option<Option<String>> {
    if files.is_empty() || !files.iter().all(|f| f.yanked) {
        return None;
    }
    Some(files.iter().find_map(|f| f.yanked_reason.clone()))
}

/// What a release's wheels say about platforms.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Wheels {
    /// A pure-Python (`any`) wheel exists: no platform limit.
    pub(crate) pure: bool,
    /// Per CPU, the least glibc among its Linux wheels and that wheel's tag.
    pub(crate) best: BTreeMap<&'static str, (Version, String)>,
    /// Non-Linux platform tags (`win_amd64`), sorted.
    pub(crate) other: Vec<String>,
}

impl Wheels {
    /// `platforms = [...]` as the catalog writes it: the best Linux tag per CPU, or, for a
    /// release without any Linux or pure wheel, its other tags; empty when pure or unknown.
    pub(crate) fn catalog_platforms(&self) -> Vec<String> {
        if self.pure {
            return Vec::new();
        }
        if self.best.is_empty() {
            return self.other.clone();
        }
        CPUS.iter()
            .filter_map(|c| self.best.get(c).map(|(_, t)| t.clone()))
            .collect()
    }
}

/// The Python minors (`3.X`) a wheel's tags load on, within `window`; `None` for a wheel
/// no regular CPython loads (free-threaded, PyPy, Python 2 only).
fn serves(n: &pypi::WheelTags, window: (u64, u64)) -> bool {
    let (lo, hi) = window;
    if n.abi
        .split('.')
        .any(|a| a.ends_with('t') && a.starts_with("cp"))
    {
        return false;
    }
    n.python.split('.').any(|p| {
        if p == "py3" || p == "py2.py3" || p == "py30" {
            return true;
        }
        let Some(minor) = p.strip_prefix("cp3").and_then(|m| m.parse::<u64>().ok()) else {
            return false;
        };
        if n.abi == "abi3" {
            minor <= hi
        } else {
            (lo..=hi).contains(&minor)
        }
    })
}

/// The wheels of one release (`files` all of one version).
pub(crate) fn wheels_of(files: &[(&DistFile, FileName)], window: (u64, u64)) -> Wheels {
    let mut w = Wheels::default();
    for (_, n) in files {
        let Some(t) = &n.wheel else { continue };
        if !serves(t, window) {
            continue;
        }
        for tag in t.platform.split('.') {
            if tag == "any" {
                w.pure = true;
                continue;
            }
            match WheelPlatform::parse(tag) {
                Some(p) if p.is_linux() => {
                    let cpu = if p.cpu == "x86_64" { CPUS[0] } else { CPUS[1] };
                    let glibc = p.glibc.unwrap_or_else(|| Version::parse("0").expect("0"));
                    let better = w.best.get(cpu).is_none_or(|(g, _)| glibc < *g);
                    if better {
                        w.best.insert(cpu, (glibc, tag.to_string()));
                    }
                }
                _ if (tag.starts_with("win") || tag.starts_with("macosx_"))
                    && !w.other.iter().any(|o| o == tag) =>
                {
                    w.other.push(tag.to_string());
                }
                _ => {}
            }
        }
    }
    w.other.sort();
    w
}

/// The Python minors a `Requires-Python` allows, as a window `(lo, hi)` of `3.X` minors
/// (default 3.9 to 3.14).
pub(crate) fn python_window(requires_python: Option<&str>) -> (u64, u64) {
    let (mut lo, mut hi) = (9u64, 14u64);
    for clause in requires_python.unwrap_or("").split(',') {
        let c = clause.trim();
        let minor = |v: &str| -> Option<u64> {
            let v = v.trim().trim_end_matches(".*");
            let mut it = v.split('.');
            (it.next()? == "3").then_some(())?;
            it.next()?.parse().ok()
        };
        if let Some(v) = c.strip_prefix(">=") {
            if let Some(m) = minor(v) {
                lo = lo.max(m);
            }
        } else if let Some(v) = c.strip_prefix('<') {
            if let Some(m) = minor(v.trim_start_matches('=')) {
                let top = if c.starts_with("<=") {
                    m
                } else {
                    m.saturating_sub(1)
                };
                hi = hi.min(top);
            }
        }
    }
    (lo, hi.max(lo))
}

/// A dependency's floor on one CPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Floor {
    pub(crate) cpu: &'static str,
    pub(crate) glibc: Version,
    /// What sets it, for the catalog's `by`.
    pub(crate) by: String,
    /// The project page read.
    pub(crate) url: String,
}

/// The releases of a dependency its specifier allows, each with its files (non-yanked,
/// final releases; pre-releases only when the specifier names one).
/// A dependency's releases with their files, oldest first.
type Releases<'p> = Vec<(Version, Vec<(&'p DistFile, FileName)>)>;

fn allowed<'p>(page: &'p Page, project: &str, spec: &str) -> Option<Releases<'p>> {
    // `!=` clauses only exclude: dropping them can only lower the floor (optimistic).
    let kept: Vec<&str> = spec
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty() && !c.starts_with("!="))
        .collect();
    let req = if kept.is_empty() {
        VersionReq::any()
    } else {
        VersionReq::parse(&kept.join(", ")).ok()?
    };
    let mut by: BTreeMap<Version, Vec<(&DistFile, FileName)>> = BTreeMap::new();
    for f in page.files.iter().filter(|f| !f.yanked) {
        let Some(n) = pypi::parse_filename(project, &f.filename) else {
            continue;
        };
        if !pypi::is_final(&n.version) {
            continue;
        }
        let Ok(v) = Version::parse(&n.version) else {
            continue;
        };
        if req.matches(&v) {
            by.entry(v).or_default().push((f, n));
        }
    }
    Some(by.into_iter().collect())
}

/// The floor a dependency sets on `cpu`: the least glibc any allowed release's wheels need
/// there; `None` when an allowed release has a pure wheel or none has a Linux wheel for
/// `cpu`.
pub(crate) fn dependency_floor(
    page: &Page,
    req: &pypi::Requirement,
    cpu: &'static str,
    window: (u64, u64),
) -> Option<Floor> {
    let releases = allowed(page, &req.name, &req.specifier)?;
    let mut least: Option<(Version, String)> = None;
    let mut versions: Vec<&Version> = Vec::new();
    for (v, files) in &releases {
        let w = wheels_of(files, window);
        if w.pure {
            return None;
        }
        if let Some((g, tag)) = w.best.get(cpu) {
            versions.push(v);
            if least.as_ref().is_none_or(|(lg, _)| g < lg) {
                least = Some((g.clone(), tag.clone()));
            }
        }
    }
    let (glibc, tag) = least?;
    let range = match (versions.first(), versions.last()) {
        (Some(a), Some(b)) if a != b => format!("{a} to {b}"),
        (Some(a), _) => a.to_string(),
        _ => String::new(),
    };
    let spec = if req.specifier.is_empty() {
        String::new()
    } else {
        req.specifier.clone()
    };
    Some(Floor {
        cpu,
        glibc,
        by: format!(
            "its dependency `{}{spec}` has {cpu} wheels for `{tag}` and newer only ({range})",
            req.name
        ),
        url: page.url.clone(),
    })
}

/// Whether a `Requires-Dist` applies on Linux on `cpu` (extras excluded).
pub(crate) fn applies(req: &pypi::Requirement, cpu: &str) -> bool {
    match &req.marker {
        None => true,
        Some(m) => marker(m, cpu),
    }
}

/// Evaluates a PEP 508 marker for Linux on `cpu`: `extra` is never set; variables it does
/// not know (`python_version`) make their comparison true.
pub(crate) fn marker(m: &str, cpu: &str) -> bool {
    let toks = tokenize(m);
    let mut p = Parser {
        toks: &toks,
        at: 0,
        cpu,
    };
    p.or().unwrap_or(true)
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Open,
    Close,
    Word(String),
    Str(String),
    Op(String),
}

fn tokenize(m: &str) -> Vec<Tok> {
    let b: Vec<char> = m.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '(' {
            out.push(Tok::Open);
            i += 1;
        } else if c == ')' {
            out.push(Tok::Close);
            i += 1;
        } else if c == '"' || c == '\'' {
            let end = b[i + 1..]
                .iter()
                .position(|x| *x == c)
                .map_or(b.len(), |p| i + 1 + p);
            out.push(Tok::Str(b[i + 1..end].iter().collect()));
            i = end + 1;
        } else if "=!<>~".contains(c) {
            let mut j = i;
            while j < b.len() && "=!<>~".contains(b[j]) {
                j += 1;
            }
            out.push(Tok::Op(b[i..j].iter().collect()));
            i = j;
        } else {
            let mut j = i;
            while j < b.len() && !b[j].is_whitespace() && !"()\"'=!<>~".contains(b[j]) {
                j += 1;
            }
            out.push(Tok::Word(b[i..j].iter().collect()));
            i = j.max(i + 1);
        }
    }
    out
}

struct Parser<'a> {
    toks: &'a [Tok],
    at: usize,
    cpu: &'a str,
}

impl Parser<'_> {
    fn peek_word(&self, w: &str) -> bool {
        matches!(self.toks.get(self.at), Some(Tok::Word(x)) if x == w)
    }
    fn or(&mut self) -> Option<bool> {
        let mut v = self.and()?;
        while self.peek_word("or") {
            self.at += 1;
            let r = self.and()?;
            v = v || r;
        }
        Some(v)
    }
    fn and(&mut self) -> Option<bool> {
        let mut v = self.atom()?;
        while self.peek_word("and") {
            self.at += 1;
            let r = self.atom()?;
            v = v && r;
        }
        Some(v)
    }
    fn atom(&mut self) -> Option<bool> {
        if self.toks.get(self.at) == Some(&Tok::Open) {
            self.at += 1;
            let v = self.or()?;
            if self.toks.get(self.at) == Some(&Tok::Close) {
                self.at += 1;
            }
            return Some(v);
        }
        let lhs = self.value()?;
        let op = match self.toks.get(self.at)? {
            Tok::Op(o) => o.clone(),
            Tok::Word(w) if w == "in" => "in".to_string(),
            Tok::Word(w) if w == "not" => {
                self.at += 1;
                "not in".to_string()
            }
            _ => return None,
        };
        self.at += 1;
        let rhs = self.value()?;
        Some(self.compare(&lhs, &op, &rhs))
    }
    /// A variable (`Ok(name)`) or a literal (`Err(text)`).
    fn value(&mut self) -> Option<Result<String, String>> {
        let t = self.toks.get(self.at)?.clone();
        self.at += 1;
        match t {
            Tok::Word(w) => Some(Ok(w)),
            Tok::Str(s) => Some(Err(s)),
            _ => None,
        }
    }
    fn env(&self, var: &str) -> Option<String> {
        Some(
            match var {
                "sys_platform" => "linux",
                "platform_system" => "Linux",
                "os_name" => "posix",
                "platform_machine" => self.cpu,
                "implementation_name" => "cpython",
                "platform_python_implementation" => "CPython",
                "extra" => "",
                _ => return None,
            }
            .to_string(),
        )
    }
    fn compare(
        &self,
        lhs: &Result<String, String>,
        op: &str,
        rhs: &Result<String, String>,
    ) -> bool {
        let resolve = |v: &Result<String, String>| match v {
            Ok(var) => self.env(var),
            Err(lit) => Some(lit.clone()),
        };
        let (Some(l), Some(r)) = (resolve(lhs), resolve(rhs)) else {
            return true; // a variable this evaluation does not know (python_version)
        };
        match op {
            "==" | "===" => l == r,
            "!=" => l != r,
            "in" => r.contains(&l),
            "not in" => !r.contains(&l),
            _ => true,
        }
    }
}

/// The best tag per CPU as written in a floor row for the release's own wheels.
pub(crate) fn own_floor(w: &Wheels, cpu: &'static str, url: &str) -> Option<Floor> {
    if w.pure {
        return None;
    }
    let (g, tag) = w.best.get(cpu)?;
    Some(Floor {
        cpu,
        glibc: g.clone(),
        by: format!("its own {cpu} wheels are for `{tag}` and newer only"),
        url: url.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers() {
        let m = r#"platform_machine == "x86_64" or platform_machine == "arm64" or platform_machine == "aarch64""#;
        assert!(marker(m, "x86_64") && marker(m, "aarch64"));
        let m = r#"platform_system == "Linux" and platform_machine == "x86_64""#;
        assert!(marker(m, "x86_64") && !marker(m, "aarch64"));
        assert!(!marker(r#"sys_platform == "win32""#, "x86_64"));
        assert!(!marker(r#"extra == "dev""#, "x86_64"));
        assert!(marker(r#"python_version > "3.11""#, "x86_64"));
        assert!(!marker(
            r#"platform_machine != "s390x" and (sys_platform == "darwin")"#,
            "x86_64"
        ));
        assert!(marker(r#"platform_machine in "x86_64 aarch64""#, "aarch64"));
    }

    #[test]
    fn windows() {
        assert_eq!(python_window(Some(">=3.11, <3.15")), (11, 14));
        assert_eq!(python_window(Some("<3.15,>=3.11")), (11, 14));
        assert_eq!(python_window(None), (9, 14));
        let t = |p: &str, a: &str| pypi::WheelTags {
            python: p.into(),
            abi: a.into(),
            platform: "manylinux_2_17_x86_64".into(),
        };
        assert!(!serves(&t("cp314", "cp314t"), (11, 14)));
        assert!(serves(&t("cp39", "abi3"), (11, 14)));
        assert!(!serves(&t("cp36", "cp36m"), (11, 14)));
        assert!(serves(&t("py3", "none"), (11, 14)));
    }
}
