//! One version type for the whole GPU stack, and the requirement grammar.
//!
//! The stack's versions are not semver: `550.144.03` (leading zero), `12.4` (two parts),
//! `9.1.0.70` (four parts), `2.21.5-1` (a package revision), `0.6.3.post1` (PEP 440),
//! `2.5.1+cu124` (a local label). [`Version`] parses all of them and keeps the original
//! text for display, so a lock always shows the exact catalog string.
//!
//! # Order
//!
//! [`Version`]'s order is total and consistent with equality:
//!
//! 1. the numeric release parts, compared numerically, the shorter padded with zeros
//!    (`12.4` and `12.4.0` tie here, `550.54.15 < 550.144.03`);
//! 2. the phase: `dev < a < b < rc < (final) < post`, each with its number
//!    (`0.6.3rc1 < 0.6.3 < 0.6.3.post1`); a `-N` package revision (`2.21.5-1`) counts as a
//!    post-release;
//! 3. the local label, absent first, then compared as text (`2.5.1 < 2.5.1+cu121 < 2.5.1+cu124`);
//! 4. the number of release parts written (`12.4 < 12.4.0`), so that two spellings never
//!    compare equal unless they are the same version.
//!
//! Requirements ([`VersionReq`]) compare by steps 1–2 only, as PEP 440 does: `==12.4`
//! matches `12.4.0`, `>=2.5` ignores local labels, and `==2.5.1` matches `2.5.1+cu124`.
//! Only an `==` clause that names a local label (`==2.5.1+cu124`) requires it.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// A parsed version. Displays as the exact text it was parsed from.
#[derive(Clone, Debug)]
pub struct Version {
    text: Box<str>,
    /// The release parts, `len` of them, held inline: the catalog parses thousands of
    /// versions at every start, and a heap slice each was a seventh of a lock's allocations.
    parts: [u64; MAX_PARTS],
    len: u8,
    phase: Phase,
    local: Option<Box<str>>,
}

/// The most release parts a version may have.
const MAX_PARTS: usize = 6;

/// Pre-, final or post-release marker.
/// A parsed version's pieces, as the stock catalog's snapshot stores them
/// (`catalog/snapshot.rs`), so that loading the catalog parses no version. The phase is a
/// tag (`dev`, `a`, `b`, `rc`, final, `post`: 0 to 5) and its number.
pub(crate) struct RawVersion<'a> {
    pub(crate) text: &'a str,
    pub(crate) parts: &'a [u64],
    pub(crate) phase: (u8, u64),
    pub(crate) local: Option<&'a str>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Phase {
    Dev(u64),
    Alpha(u64),
    Beta(u64),
    Rc(u64),
    Final,
    Post(u64),
}

/// Why a version string was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionError {
    /// The rejected text.
    pub text: String,
    /// What was wrong with it.
    pub reason: &'static str,
}

impl fmt::Display for VersionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid version `{}`: {}", self.text, self.reason)
    }
}

impl std::error::Error for VersionError {}

impl Version {
    /// Parses a version: `N(.N)*` then optionally `aN|bN|rcN|.devN|.postN|postN|-N`, then
    /// optionally `+local` (letters, digits and dots).
    ///
    /// ```
    /// use gpustack::Version;
    /// let a: Version = "550.54.15".parse().unwrap();
    /// let b: Version = "550.144.03".parse().unwrap();
    /// assert!(a < b);
    /// assert_eq!(b.to_string(), "550.144.03");
    /// ```
    pub fn parse(text: &str) -> Result<Version, VersionError> {
        let err = |reason| VersionError {
            text: text.to_string(),
            reason,
        };
        if text.is_empty() {
            return Err(err("it is empty"));
        }
        if text.len() > 64 {
            return Err(err("it is longer than 64 characters"));
        }
        let (main, local) = match text.split_once('+') {
            Some((m, l)) => {
                if l.is_empty()
                    || !l.chars().all(|c| c.is_ascii_alphanumeric() || c == '.')
                    || l.starts_with('.')
                    || l.ends_with('.')
                {
                    return Err(err(
                        "the local label after `+` must be letters, digits and dots",
                    ));
                }
                (m, Some(l.to_ascii_lowercase().into_boxed_str()))
            }
            None => (text, None),
        };
        let bytes = main.as_bytes();
        let mut i = 0;
        let mut parts = [0u64; MAX_PARTS];
        let mut len = 0usize;
        loop {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            if start == i {
                return Err(err("expected a number"));
            }
            if i - start > 12 {
                return Err(err("a number has more than 12 digits"));
            }
            let n = main[start..i]
                .parse::<u64>()
                .map_err(|_| err("a number is too large"))?;
            // Past the sixth part only counted: the error below names the count.
            if let Some(slot) = parts.get_mut(len) {
                *slot = n;
            }
            len += 1;
            if i < bytes.len()
                && bytes[i] == b'.'
                && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)
            {
                i += 1;
                continue;
            }
            break;
        }
        if len > MAX_PARTS {
            return Err(err("more than 6 dotted parts"));
        }
        let rest = &main[i..];
        let phase = parse_phase(rest).ok_or_else(|| {
            err("expected numbers separated by dots, like `12.4.1`, optionally followed by `.postN`, `.devN`, `aN`, `bN`, `rcN` or `-N`")
        })?;
        Ok(Version {
            text: text.into(),
            parts,
            len: len as u8,
            phase,
            local,
        })
    }

    /// The pieces of this version ([`RawVersion`]).
    pub(crate) fn raw(&self) -> RawVersion<'_> {
        let phase = match self.phase {
            Phase::Dev(n) => (0, n),
            Phase::Alpha(n) => (1, n),
            Phase::Beta(n) => (2, n),
            Phase::Rc(n) => (3, n),
            Phase::Final => (4, 0),
            Phase::Post(n) => (5, n),
        };
        RawVersion {
            text: &self.text,
            parts: self.parts(),
            phase,
            local: self.local.as_deref(),
        }
    }

    /// The version [`Version::raw`] took apart; none for pieces no parse gives (too many
    /// or no parts, an unknown phase tag).
    pub(crate) fn from_raw(raw: RawVersion<'_>) -> Option<Version> {
        if raw.parts.is_empty() || raw.parts.len() > MAX_PARTS {
            return None;
        }
        let mut parts = [0u64; MAX_PARTS];
        parts[..raw.parts.len()].copy_from_slice(raw.parts);
        let phase = match raw.phase {
            (0, n) => Phase::Dev(n),
            (1, n) => Phase::Alpha(n),
            (2, n) => Phase::Beta(n),
            (3, n) => Phase::Rc(n),
            (4, 0) => Phase::Final,
            (5, n) => Phase::Post(n),
            _ => return None,
        };
        Some(Version {
            text: raw.text.into(),
            parts,
            len: u8::try_from(raw.parts.len()).ok()?,
            phase,
            local: raw.local.map(Into::into),
        })
    }

    /// The numeric release parts: `[12, 4, 1]` for `12.4.1`.
    pub fn parts(&self) -> &[u64] {
        &self.parts[..usize::from(self.len)]
    }

    /// The first part.
    pub fn major(&self) -> u64 {
        self.parts[0]
    }

    /// The second part, 0 when absent.
    pub fn minor(&self) -> u64 {
        self.parts().get(1).copied().unwrap_or(0)
    }

    /// The local label without `+`: `cu124` for `2.5.1+cu124`.
    pub fn local(&self) -> Option<&str> {
        self.local.as_deref()
    }

    /// The exact text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// This version without its local label.
    pub fn without_local(&self) -> Version {
        match self.text.split_once('+') {
            Some((m, _)) => Version {
                text: m.into(),
                local: None,
                ..self.clone()
            },
            None => self.clone(),
        }
    }

    /// `true` when every part of `prefix` equals the same part here (`12.4` is a prefix of
    /// `12.4.1`; `12.4` is not a prefix of `12.40`). The phase must be final unless the
    /// prefix has one too.
    pub fn has_prefix(&self, prefix: &Version) -> bool {
        let (mine, theirs) = (self.parts(), prefix.parts());
        theirs.len() <= mine.len()
            && mine[..theirs.len()] == *theirs
            && (prefix.phase == Phase::Final
                || (theirs.len() == mine.len() && prefix.phase == self.phase))
    }

    /// Release-and-phase comparison used by requirements (ignores the local label and
    /// trailing zeros).
    pub fn cmp_release(&self, other: &Version) -> Ordering {
        // Both padded with zeros to the longer: the inline arrays already are.
        let n = self.len.max(other.len);
        for k in 0..usize::from(n) {
            let (a, b) = (self.parts[k], other.parts[k]);
            match a.cmp(&b) {
                Ordering::Equal => {}
                o => return o,
            }
        }
        self.phase.cmp(&other.phase)
    }
}

fn parse_phase(rest: &str) -> Option<Phase> {
    if rest.is_empty() {
        return Some(Phase::Final);
    }
    let num = |s: &str| -> Option<u64> {
        if s.is_empty() {
            Some(0)
        } else if s.len() <= 12 && s.bytes().all(|b| b.is_ascii_digit()) {
            s.parse().ok()
        } else {
            None
        }
    };
    let lower = rest.to_ascii_lowercase();
    let r = lower.strip_prefix('.').unwrap_or(&lower);
    if let Some(n) = r.strip_prefix("post") {
        return num(n).map(Phase::Post);
    }
    if let Some(n) = r.strip_prefix("dev") {
        return num(n).map(Phase::Dev);
    }
    if let Some(n) = lower.strip_prefix('-') {
        return (!n.is_empty()).then(|| num(n)).flatten().map(Phase::Post);
    }
    if lower.starts_with('.') {
        return None;
    }
    if let Some(n) = r.strip_prefix("rc") {
        return num(n).map(Phase::Rc);
    }
    if let Some(n) = r.strip_prefix('a') {
        return num(n).map(Phase::Alpha);
    }
    if let Some(n) = r.strip_prefix('b') {
        return num(n).map(Phase::Beta);
    }
    None
}

impl FromStr for Version {
    type Err = VersionError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Version::parse(s)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.cmp_release(other)
            .then_with(|| self.local.cmp(&other.local))
            .then_with(|| self.len.cmp(&other.len))
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Version {}

impl std::hash::Hash for Version {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let parts = self.parts();
        let mut n = parts.len();
        while n > 1 && parts[n - 1] == 0 {
            n -= 1;
        }
        parts[..n].hash(state);
        self.phase.hash(state);
        self.local.hash(state);
        parts.len().hash(state);
    }
}

/// One comparison in a requirement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Clause {
    /// `*`: anything.
    Any,
    /// A bare version: that version or any sub-release (`12.4` matches `12.4.1`).
    Prefix(Version),
    /// `==V`.
    Eq(Version),
    /// `!=V`.
    Ne(Version),
    /// `>=V`.
    Ge(Version),
    /// `>V`.
    Gt(Version),
    /// `<=V`.
    Le(Version),
    /// `<V`.
    Lt(Version),
}

impl Clause {
    /// Whether `v` satisfies this clause.
    pub fn matches(&self, v: &Version) -> bool {
        match self {
            Clause::Any => true,
            Clause::Prefix(p) => v.has_prefix(p) && local_ok(p, v),
            Clause::Eq(p) => v.cmp_release(p) == Ordering::Equal && local_ok(p, v),
            Clause::Ne(p) => !(v.cmp_release(p) == Ordering::Equal && local_ok(p, v)),
            Clause::Ge(p) => v.cmp_release(p) != Ordering::Less,
            Clause::Gt(p) => v.cmp_release(p) == Ordering::Greater,
            Clause::Le(p) => v.cmp_release(p) != Ordering::Greater,
            Clause::Lt(p) => v.cmp_release(p) == Ordering::Less,
        }
    }
}

fn local_ok(pattern: &Version, v: &Version) -> bool {
    match pattern.local() {
        None => true,
        Some(l) => v.local() == Some(l),
    }
}

impl fmt::Display for Clause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Clause::Any => f.write_str("*"),
            Clause::Prefix(v) => write!(f, "{v}"),
            Clause::Eq(v) => write!(f, "=={v}"),
            Clause::Ne(v) => write!(f, "!={v}"),
            Clause::Ge(v) => write!(f, ">={v}"),
            Clause::Gt(v) => write!(f, ">{v}"),
            Clause::Le(v) => write!(f, "<={v}"),
            Clause::Lt(v) => write!(f, "<{v}"),
        }
    }
}

/// A requirement: clauses joined by commas, all of which must hold.
///
/// ```
/// use gpustack::{Version, VersionReq};
/// let req: VersionReq = ">=2.4, <2.6".parse().unwrap();
/// assert!(req.matches(&"2.5.1+cu124".parse::<Version>().unwrap()));
/// assert!(!req.matches(&"2.6.0".parse::<Version>().unwrap()));
/// let bare: VersionReq = "12.4".parse().unwrap();
/// assert!(bare.matches(&"12.4.1".parse::<Version>().unwrap()));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionReq {
    clauses: Vec<Clause>,
}

/// Why a requirement string was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReqError {
    /// The rejected requirement.
    pub text: String,
    /// What was wrong.
    pub reason: String,
    /// Byte offset in `text` of the clause at fault (its operator), for a caret.
    pub at: usize,
}

impl fmt::Display for ReqError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid requirement `{}`: {}", self.text, self.reason)
    }
}

impl std::error::Error for ReqError {}

/// One clause of a requirement (`c`, at byte `at` of the text) into `clauses` (`~=` gives
/// two); an error is (byte offset, reason).
fn parse_clause(c: &str, at: usize, clauses: &mut Vec<Clause>) -> Result<(), (usize, String)> {
    let err = |at: usize, reason: String| (at, reason);
    if c.is_empty() {
        return Err(err(at, "an empty clause between commas".into()));
    }
    if c == "*" {
        clauses.push(Clause::Any);
        return Ok(());
    }
    let (op, rest) = ["===", "==", "!=", ">=", "<=", "~=", ">", "<", "=", "^", "~"]
        .iter()
        .find_map(|op| c.strip_prefix(op).map(|r| (*op, r.trim_start())))
        .unwrap_or(("", c));
    // `12.*`: a wildcard is the bare prefix, valid after `==`, `!=` or nothing.
    let (rest, star) = match rest.strip_suffix(".*") {
        Some(r) => (r, true),
        None => (rest, false),
    };
    if op == "=" {
        let fix = match rest.chars().next() {
            Some('>') => format!(">={}", &rest[1..]),
            Some('<') => format!("<={}", &rest[1..]),
            _ => format!("=={rest}"),
        };
        return Err(err(at, format!("`{c}` is not a comparison; write `{fix}`")));
    }
    let v = Version::parse(rest)
        .map_err(|e| err(at + op.len(), format!("`{}`: {}", e.text, e.reason)))?;
    let prefix_of = |keep: usize| -> Version {
        let p = v.parts();
        let s = p[..keep.min(p.len()).max(1)]
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(".");
        Version::parse(&s).unwrap_or_else(|_| v.clone())
    };
    refuse_operator(op, rest, star, &v, at)?;
    if op == "~=" {
        // PEP 440: `~=X.Y` is `>=X.Y, ==X.*`.
        let n = v.parts().len();
        if n < 2 {
            return Err(err(
                at,
                format!("`~=` needs at least two parts (`~={rest}.0`); write `>={rest}`"),
            ));
        }
        clauses.push(Clause::Ge(v.clone()));
        clauses.push(Clause::Prefix(prefix_of(n - 1)));
        return Ok(());
    }
    if star {
        // `==12.*` and `12.*` are the bare prefix `12`.
        if !rest.chars().all(|ch| ch.is_ascii_digit() || ch == '.') {
            return Err(err(
                at + op.len(),
                format!("`{rest}.*`: a wildcard follows a plain release like `12.4`"),
            ));
        }
        clauses.push(Clause::Prefix(v));
        return Ok(());
    }
    clauses.push(match op {
        "==" => Clause::Eq(v),
        "!=" => Clause::Ne(v),
        ">=" => Clause::Ge(v),
        "<=" => Clause::Le(v),
        ">" => Clause::Gt(v),
        "<" => Clause::Lt(v),
        _ => Clause::Prefix(v),
    });
    Ok(())
}

/// Operators and wildcards that parse but gpustack does not accept (other ecosystems'
/// `^` and `~`, `===`, misplaced `.*` and local labels), each refused with what to write.
fn refuse_operator(
    op: &str,
    rest: &str,
    star: bool,
    v: &Version,
    at: usize,
) -> Result<(), (usize, String)> {
    let err = |at: usize, reason: String| (at, reason);
    // The versions bounding a caret or tilde, written out for the hint.
    let bump = |keep: usize| -> String {
        let p = v.parts();
        let keep = keep.min(p.len()).max(1);
        let mut up: Vec<u64> = p[..keep].to_vec();
        if let Some(last) = up.last_mut() {
            *last += 1;
        }
        up.iter().map(u64::to_string).collect::<Vec<_>>().join(".")
    };
    match op {
        "===" => {
            return Err(err(
                at,
                format!("`===` (arbitrary equality) is not supported; write `=={rest}`"),
            ))
        }
        "^" => {
            return Err(err(
                at,
                format!(
                    "`^` is not a PEP 440 operator; write `>={rest}, <{}`",
                    bump(1)
                ),
            ))
        }
        "~" => {
            return Err(err(
                at,
                format!(
                    "`~` is not a PEP 440 operator; write `>={rest}, <{}`",
                    bump(2)
                ),
            ))
        }
        _ => {}
    }
    if star && !matches!(op, "==" | "!=" | "") {
        return Err(err(
            at,
            format!("a wildcard `.*` is only allowed with `==` or `!=`; write `=={rest}.*`"),
        ));
    }
    if star && v.local().is_some() {
        return Err(err(at, "a wildcard cannot follow a local label".into()));
    }
    if v.local().is_some() && !matches!(op, "==" | "!=") {
        return Err(err(
            at,
            format!(
                "a local label such as `+{}` is only allowed with `==` or `!=`",
                v.local().unwrap_or_default()
            ),
        ));
    }
    if star && op == "!=" {
        let n = v.parts().len();
        return Err(err(
            at,
            format!(
                "`!=` with a wildcard is not supported; write `<{rest}, >={}`",
                bump(n)
            ),
        ));
    }
    Ok(())
}

impl VersionReq {
    /// The requirement that anything satisfies.
    pub fn any() -> VersionReq {
        VersionReq {
            clauses: vec![Clause::Any],
        }
    }

    /// A requirement of exactly `v` (`==v`).
    pub fn exact(v: &Version) -> VersionReq {
        VersionReq {
            clauses: vec![Clause::Eq(v.clone())],
        }
    }

    /// Parses `*`, `12.4`, `==V`, `!=V`, `>=V`, `>V`, `<=V`, `<V`, joined by commas; and
    /// the PEP 440 habits `==12.*` / `12.*` (the bare prefix `12`) and `~=12.4` (`>=12.4, 12`).
    /// Other ecosystems' operators (`^12.4`, `~12.4`, `!=12.*`, `===`) are refused with the
    /// equivalent written out, and [`ReqError::at`] on the operator.
    ///
    /// ```
    /// use gpustack::VersionReq;
    /// assert_eq!("==12.*".parse::<VersionReq>().unwrap().to_string(), "12");
    /// assert_eq!("~=12.4".parse::<VersionReq>().unwrap().to_string(), ">=12.4, 12");
    /// let e = "^12.4".parse::<VersionReq>().unwrap_err();
    /// assert_eq!((e.at, e.reason.as_str()), (0, "`^` is not a PEP 440 operator; write `>=12.4, <13`"));
    /// ```
    pub fn parse(text: &str) -> Result<VersionReq, ReqError> {
        let err = |at: usize, reason: String| ReqError {
            text: text.to_string(),
            reason,
            at,
        };
        if text.trim().is_empty() {
            return Err(err(0, "it is empty; use `*` for any version".into()));
        }
        let mut clauses = Vec::new();
        let mut start = 0;
        for raw in text.split(',') {
            let raw_at = start;
            start += raw.len() + 1;
            let c = raw.trim();
            // Byte offset of the clause (its operator) within `text`.
            let at = raw_at + (raw.len() - raw.trim_start().len());
            parse_clause(c, at, &mut clauses).map_err(|(at, reason)| err(at, reason))?;
        }
        Ok(VersionReq { clauses })
    }

    /// Whether `v` satisfies every clause.
    pub fn matches(&self, v: &Version) -> bool {
        self.clauses.iter().all(|c| c.matches(v))
    }

    /// `true` for `*`.
    pub fn is_any(&self) -> bool {
        self.clauses.iter().all(|c| matches!(c, Clause::Any))
    }

    /// The clauses.
    pub fn clauses(&self) -> &[Clause] {
        &self.clauses
    }

    /// The local label any clause names (`cu124` in `==2.5.1+cu124` or `!=2.5.1+cu124`).
    pub fn any_local(&self) -> Option<&str> {
        self.clauses.iter().find_map(|c| match c {
            Clause::Eq(v) | Clause::Ne(v) => v.local(),
            _ => None,
        })
    }

    /// The local label an `==` clause pins, if any (`cu124` in `==2.5.1+cu124`).
    pub fn pinned_local(&self) -> Option<&str> {
        self.clauses.iter().find_map(|c| match c {
            Clause::Eq(v) => v.local(),
            _ => None,
        })
    }
}

impl FromStr for VersionReq {
    type Err = ReqError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        VersionReq::parse(s)
    }
}

impl fmt::Display for VersionReq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, c) in self.clauses.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `raw` takes apart, `from_raw` puts back as it was, every field (the stock
    /// catalog's snapshot stores versions so); pieces no parse gives are refused.
    #[test]
    fn raw_pieces_round_trip() {
        for text in [
            "12.4.1",
            "1.0rc2",
            "2.0.post1",
            "1.0.dev3",
            "2.5.1+cu124",
            "1a1",
            "3b2",
            "550.54.15",
            "1-2",
        ] {
            let v = Version::parse(text).unwrap();
            let back = Version::from_raw(v.raw()).unwrap();
            assert_eq!(format!("{back:?}"), format!("{v:?}"), "{text}");
        }
        let v = Version::parse("1.2").unwrap();
        fn bad(phase: (u8, u64), parts: &[u64]) -> RawVersion<'_> {
            RawVersion {
                text: "x",
                parts,
                phase,
                local: None,
            }
        }
        assert!(Version::from_raw(bad((6, 0), v.parts())).is_none());
        assert!(Version::from_raw(bad((4, 1), v.parts())).is_none());
        assert!(Version::from_raw(bad((4, 0), &[])).is_none());
        assert!(Version::from_raw(bad((4, 0), &[1; 7])).is_none());
    }

    fn v(s: &str) -> Version {
        s.parse().unwrap()
    }

    #[test]
    fn parses_the_stack_shapes() {
        for s in [
            "550.144.03",
            "12.4",
            "9.1.0.70",
            "2.21.5-1",
            "0.6.3.post1",
            "2.5.1+cu124",
            "3.11",
            "570.26",
            "0.0.28.post3",
            "2.9.0a0",
            "1.0rc1",
            "2.6.0.dev20241112",
        ] {
            assert_eq!(v(s).to_string(), s);
        }
    }

    #[test]
    fn rejects_garbage() {
        for s in [
            "",
            "abc",
            "1..2",
            ".1",
            "1.",
            "1.2.x",
            "1.2+",
            "1.2+cu 1",
            "1.2.post1x",
            "1-",
            "1.2.3.4.5.6.7",
            "99999999999999999999",
        ] {
            assert!(Version::parse(s).is_err(), "{s} parsed");
        }
    }

    #[test]
    fn total_order() {
        let ordered = [
            "0.6.3rc1",
            "0.6.3",
            "0.6.3.post1",
            "2.21.5",
            "2.21.5-1",
            "2.21.5-2",
            "12.4",
            "12.4.0",
            "12.4.1",
            "12.10",
            "550.54.15",
            "550.144.03",
        ];
        for w in ordered.windows(2) {
            assert!(v(w[0]) < v(w[1]), "{} < {}", w[0], w[1]);
        }
        assert!(v("2.5.1") < v("2.5.1+cu121"));
        assert!(v("2.5.1+cu121") < v("2.5.1+cu124"));
        assert_ne!(v("12.4"), v("12.4.0"));
    }

    #[test]
    fn requirements() {
        let r = |s: &str| VersionReq::parse(s).unwrap();
        assert!(r("12.4").matches(&v("12.4.1")));
        assert!(r("12.4").matches(&v("12.4")));
        assert!(!r("12.4").matches(&v("12.40")));
        assert!(!r("12").matches(&v("13.0")));
        assert!(r("550").matches(&v("550.144.03")));
        assert!(r("==2.5.1").matches(&v("2.5.1+cu124")));
        assert!(!r("==2.5.1+cu121").matches(&v("2.5.1+cu124")));
        assert!(r("==12.4").matches(&v("12.4.0")));
        assert!(!r("==12.4").matches(&v("12.4.1")));
        assert!(r(">=2.4, <2.6").matches(&v("2.5.1")));
        assert!(!r(">=2.4, <2.6").matches(&v("2.6.0")));
        assert!(r("!=2.5.0").matches(&v("2.5.1")));
        assert!(r("*").matches(&v("1")));
        assert!(!r("<0.6.3").matches(&v("0.6.3.post1")));
        assert!(r(">0.6.3").matches(&v("0.6.3.post1")));
    }

    #[test]
    fn bad_requirements() {
        for s in [
            "",
            ">=",
            "=2.4",
            ">=2.4,",
            "~=2",
            "^2.4",
            "~2.4",
            "!=2.*",
            ">=2.*",
            "=>2.4",
            ">=2.5.1+cu124",
            ">=a",
        ] {
            assert!(VersionReq::parse(s).is_err(), "{s} parsed");
        }
    }
}

#[cfg(test)]
mod pep440_habits {
    use super::VersionReq;

    fn ok(s: &str) -> String {
        VersionReq::parse(s).unwrap().to_string()
    }
    fn refused(s: &str) -> (usize, String) {
        let e = VersionReq::parse(s).unwrap_err();
        (e.at, e.reason)
    }

    #[test]
    fn wildcards_and_compatible_release_are_accepted() {
        assert_eq!(ok("==12.*"), "12");
        assert_eq!(ok("12.*"), "12");
        assert_eq!(ok("== 12.4.*"), "12.4");
        assert_eq!(ok("~=12.4"), ">=12.4, 12");
        assert_eq!(ok("~=2.5.1"), ">=2.5.1, 2.5");
        assert_eq!(ok(">=2.4, ~=2.5.0"), ">=2.4, >=2.5.0, 2.5");
        let r = VersionReq::parse("~=12.4").unwrap();
        for (v, want) in [
            ("12.4", true),
            ("12.9.1", true),
            ("12.3", false),
            ("13.0", false),
        ] {
            assert_eq!(r.matches(&v.parse().unwrap()), want, "{v}");
        }
    }

    #[test]
    fn other_habits_are_refused_on_the_operator_with_the_equivalent() {
        assert_eq!(
            refused("^12.4"),
            (
                0,
                "`^` is not a PEP 440 operator; write `>=12.4, <13`".into()
            )
        );
        assert_eq!(
            refused(">=2.4, ~2.5"),
            (
                7,
                "`~` is not a PEP 440 operator; write `>=2.5, <2.6`".into()
            )
        );
        assert_eq!(
            refused("!=12.*"),
            (
                0,
                "`!=` with a wildcard is not supported; write `<12, >=13`".into()
            )
        );
        assert_eq!(
            refused("~=12"),
            (
                0,
                "`~=` needs at least two parts (`~=12.0`); write `>=12`".into()
            )
        );
        assert_eq!(refused(">=12.*").0, 0);
        assert_eq!(
            refused("  ===12.4"),
            (
                2,
                "`===` (arbitrary equality) is not supported; write `==12.4`".into()
            )
        );
        assert_eq!(refused("=12.4").0, 0);
    }
}
