//! The validation context every family's step uses: wire strings to typed values, each
//! problem a diagnostic at the entry's `file:line`; and the checks on values that reach
//! generated files (plain words, https URLs, hex digests, ids).

use super::model::{DigestKind, DigestObservation, FileRef, Origin, WheelPlatform};
use super::wire::FileRefWire;
use crate::core::arch::Cc;
use crate::core::version::{Version, VersionReq};
use crate::error::{Diagnostic, Location, Stage};

/// Validation context: turns wire strings into typed values, recording diagnostics at the
/// entry's line.
pub(super) struct V<'a> {
    pub(super) diags: &'a mut Vec<Diagnostic>,
}

impl V<'_> {
    pub(super) fn fail(&mut self, o: &Origin, msg: String) {
        self.fail_hint(
            o,
            msg,
            "the catalog reference in the book says what each family's fields accept".into(),
        );
    }
    pub(super) fn fail_hint(&mut self, o: &Origin, msg: String, hint: String) {
        self.diags.push(
            Diagnostic::new(Stage::Catalog, msg)
                .at(Location {
                    file: o.file.to_string(),
                    line: o.line,
                    col: 0,
                })
                .hint(hint),
        );
    }
    pub(super) fn version(&mut self, o: &Origin, what: &str, s: &str) -> Option<Version> {
        match Version::parse(s) {
            Ok(v) => Some(v),
            Err(e) => {
                self.fail(o, format!("{what}: {e}"));
                None
            }
        }
    }
    pub(super) fn req(&mut self, o: &Origin, what: &str, s: &str) -> Option<VersionReq> {
        match VersionReq::parse(s) {
            Ok(v) => Some(v),
            Err(e) => {
                self.fail(o, format!("{what}: {e}"));
                None
            }
        }
    }
    pub(super) fn cc(&mut self, o: &Origin, what: &str, s: &str) -> Option<Cc> {
        match s.parse::<Cc>() {
            Ok(c) => Some(c),
            Err(e) => {
                self.fail(o, format!("{what}: {e}"));
                None
            }
        }
    }
    pub(super) fn branch(&mut self, o: &Origin, s: &str) -> Option<u64> {
        match s.strip_prefix('R').and_then(|n| n.parse::<u64>().ok()) {
            Some(n) => Some(n),
            None => {
                self.fail(
                    o,
                    format!("driver branch `{s}` must be written `R` and a number, like `R535`"),
                );
                None
            }
        }
    }
    /// Wheel platform tags; an unknown tag is an error at the entry.
    pub(super) fn platforms(&mut self, o: &Origin, tags: &[String]) -> Vec<WheelPlatform> {
        let mut out = Vec::new();
        for t in tags {
            match WheelPlatform::parse(t) {
                Some(p) => out.push(p),
                None => self.fail(
                    o,
                    format!("`{t}` is not a wheel platform tag the catalog reads (`manylinux_2_28_x86_64`, `manylinux2014_aarch64`, `linux_x86_64`, or `win_amd64` for a release without Linux wheels)"),
                ),
            }
        }
        out
    }

    /// `yanked` and `glibc_floor`: each has a date or a glibc version, a CPU the catalog
    /// models, and a source.
    pub(super) fn installability(
        &mut self,
        o: &Origin,
        yanked: Option<&super::wire::YankWire>,
        floors: &[super::wire::GlibcFloorWire],
    ) -> super::Installability {
        let yanked = yanked.and_then(|y| {
            if crate::core::url::parse_date(&y.observed).is_none() {
                self.fail(
                    o,
                    format!(
                        "`yanked.observed` `{}` is not a date YYYY-MM-DD",
                        y.observed
                    ),
                );
                return None;
            }
            if unsourced(&y.source) {
                self.fail(o, "`yanked.source` must be one non-empty line".into());
                return None;
            }
            Some(super::Yank {
                reason: y.reason.clone(),
                observed: y.observed.clone(),
                source: y.source.clone(),
            })
        });
        let mut glibc_floor = Vec::new();
        for f in floors {
            if !matches!(f.cpu.as_str(), "x86_64" | "aarch64") {
                self.fail(
                    o,
                    format!(
                        "`glibc_floor` cpu takes `x86_64` or `aarch64`, not `{}`",
                        f.cpu
                    ),
                );
                continue;
            }
            if unsourced(&f.source) {
                self.fail(o, "`glibc_floor` rows need a `source` on one line".into());
                continue;
            }
            if let Some(glibc) = self.version(o, "glibc_floor", &f.glibc) {
                glibc_floor.push(super::GlibcFloor {
                    cpu: f.cpu.clone(),
                    glibc,
                    by: f.by.clone(),
                    source: f.source.clone(),
                });
            }
        }
        super::Installability {
            yanked,
            glibc_floor,
        }
    }

    pub(super) fn source(&mut self, o: &Origin) {
        if o.source.trim().is_empty() {
            self.fail(
                o,
                "`source` is empty: every catalog fact needs a source a reader can open".into(),
            );
        } else if has_control(&o.source) {
            // A source is shown by `why` and `catalog show` and copied into generated
            // comments: a newline or an escape sequence would forge lines there.
            self.fail_hint(
                o,
                format!(
                    "`source` holds control characters: `{}`",
                    crate::error::escape_control(&o.source)
                ),
                "write the source on one line, without escape sequences".into(),
            );
        }
    }
    /// A dated digest observation: `digest` is `sha256:<64 lowercase hex>`, `observed` a
    /// calendar date `YYYY-MM-DD`, `source` an https URL on one line, `kind` `index`,
    /// `manifest` or `unknown`; each problem reported at the entry.
    pub(super) fn observation(
        &mut self,
        o: &Origin,
        tag: &str,
        digest: &str,
        observed: &str,
        source: &str,
        kind: &str,
    ) -> Option<DigestObservation> {
        let mut ok = true;
        if !digest.strip_prefix("sha256:").is_some_and(is_sha256_hex) {
            self.fail(
                o,
                format!("digest `{digest}` of `{tag}` must be `sha256:<64 lowercase hex>`"),
            );
            ok = false;
        }
        if !is_date(observed) {
            self.fail_hint(
                o,
                format!("`observed = \"{observed}\"` of `{tag}` is not a date"),
                "write the source's date as `YYYY-MM-DD` (a commit's date, a release's)".into(),
            );
            ok = false;
        }
        if !source.starts_with("https://") || has_control(source) {
            self.fail_hint(
                o,
                format!(
                    "the source of `{tag}`'s digest must be an https URL on one line, not `{}`",
                    crate::error::escape_control(source)
                ),
                "cite the page or the file at a commit where the digest was seen".into(),
            );
            ok = false;
        }
        let kind = match kind {
            "index" => DigestKind::Index,
            "manifest" => DigestKind::Manifest,
            "unknown" => DigestKind::Unknown,
            other => {
                self.fail(
                    o,
                    format!(
                        "digest kind `{other}` of `{tag}` is not `index`, `manifest` or `unknown`"
                    ),
                );
                return None;
            }
        };
        ok.then(|| DigestObservation {
            tag: tag.to_string(),
            digest: digest.to_string(),
            observed: observed.to_string(),
            source: source.to_string(),
            kind,
        })
    }
    pub(super) fn files(&mut self, o: &Origin, files: &[FileRefWire]) -> Vec<FileRef> {
        let mut out = Vec::new();
        for f in files {
            if f.sha256.len() != 64
                || !f
                    .sha256
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            {
                self.fail(
                    o,
                    format!("sha256 of `{}` must be 64 lowercase hex digits", f.filename),
                );
                continue;
            }
            if f.filename.is_empty()
                || f.filename
                    .contains(['/', '\\', '\n', ' ', '"', '\'', '$', '`'])
            {
                self.fail(
                    o,
                    format!("file name `{}` must be a plain file name", f.filename),
                );
                continue;
            }
            out.push(FileRef {
                version: f
                    .version
                    .as_deref()
                    .and_then(|s| self.version(o, "file version", s)),
                python: f
                    .python
                    .as_deref()
                    .and_then(|s| self.version(o, "file python", s)),
                index: f.index.clone(),
                filename: f.filename.clone(),
                sha256: f.sha256.clone(),
            });
        }
        out
    }
}

pub(super) fn newest_first<T>(v: &mut [T], key: impl Fn(&T) -> &Version) {
    v.sort_by(|a, b| key(b).cmp(key(a)));
}

/// Characters allowed in a catalog value that reaches generated files as a bare word
/// (tags, package pins, instance types): no quotes, spaces, `$`, backquotes or newlines.
pub(super) fn safe_word(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 200
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-+:=~*{}/@".contains(&b))
}

pub(super) fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A calendar date `YYYY-MM-DD` (years 2000 to 2099; the day within its month).
pub(super) fn is_date(s: &str) -> bool {
    crate::core::url::parse_date(s).is_some_and(|(y, _, _)| (2000..2100).contains(&y))
}

pub(super) fn safe_url(s: &str) -> bool {
    // Percent-escapes (`%2B` in python-build-standalone's archive names) are allowed as
    // `%` and two hex digits only, so no `%{` (an HCL template directive) gets through.
    let Some(rest) = s.strip_prefix("https://") else {
        return false;
    };
    // `user:token@host`: credentials would be copied into every generated file.
    if crate::core::url::has_credentials(s) || !crate::core::url::url_port_ok(s) {
        return false;
    }
    let b = rest.as_bytes();
    let mut plain = String::with_capacity(rest.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if i + 2 < b.len() && b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit() {
                plain.push('x');
                i += 3;
                continue;
            }
            return false;
        }
        plain.push(b[i] as char);
        i += 1;
    }
    safe_word(&plain)
}

/// A `source` that cannot stand: empty, or holding a control character (which would forge
/// lines where sources are shown and copied).
pub(crate) fn unsourced(s: &str) -> bool {
    s.trim().is_empty() || has_control(s)
}

/// Whether `s` holds a control character (`char::is_control`, Unicode's Cc: U+0000–U+001F
/// and U+007F–U+009F), read from the UTF-8 bytes without decoding: every catalog source is
/// checked at every start, and most are long URLs. (Tested against `char::is_control` for
/// every scalar value in `catalog/tests.rs`.)
pub(crate) fn has_control(s: &str) -> bool {
    let b = s.as_bytes();
    // A pass without early exit, which the compiler vectorizes, rules out most text; U+0080–
    // U+009F are 0xC2 0x80–0x9F (0xC2 is always a lead byte), so only text with a 0xC2 byte
    // is looked at again.
    let suspect = b.iter().fold(false, |acc, &c| {
        acc | (c < 0x20) | (c == 0x7f) | (c == 0xc2)
    });
    suspect
        && b.iter()
            .zip(b.iter().skip(1).map(Some).chain([None]))
            .any(|(&c, next)| {
                c < 0x20
                    || c == 0x7f
                    || (c == 0xc2 && next.is_some_and(|n| (0x80..=0x9f).contains(n)))
            })
}

pub(crate) fn valid_id(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}
