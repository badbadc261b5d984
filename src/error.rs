//! Errors. Each stage reports [`Diagnostic`]s (what was wrong, where, and how to fix it);
//! the solver reports an [`Explanation`]. Text is produced by `Display` only;
//! the library never prints.

use std::fmt;

mod explanation;

pub use explanation::{Cause, Explanation, Fact, Rule, Violation};

/// A place in an input file: `gpustack.toml:4:9`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// The file as the user named it (never made absolute).
    pub file: String,
    /// 1-based line, 0 when unknown.
    pub line: usize,
    /// 1-based column, 0 when unknown.
    pub col: usize,
}

impl Location {
    /// A location in `file` at a byte offset of `text`.
    pub fn at_offset(file: &str, text: &str, offset: usize) -> Location {
        let offset = offset.min(text.len());
        let before = &text.as_bytes()[..offset];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1);
        let col = String::from_utf8_lossy(&before[line_start..])
            .chars()
            .count()
            + 1;
        Location {
            file: file.to_string(),
            line,
            col,
        }
    }

    /// A whole-file location.
    pub fn file(file: &str) -> Location {
        Location {
            file: file.to_string(),
            line: 0,
            col: 0,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.col) {
            (0, _) => write!(f, "{}", self.file),
            (l, 0) => write!(f, "{}:{l}", self.file),
            (l, c) => write!(f, "{}:{l}:{c}", self.file),
        }
    }
}

/// What kind of input a diagnostic is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Stage {
    /// `gpustack.toml`.
    Spec,
    /// `catalog/*.toml` or an overlay.
    Catalog,
    /// `gpustack.lock`.
    Lock,
    /// Command-line arguments, output paths and other files.
    Usage,
    /// Reading or writing files.
    Io,
    /// Rendering generated files from a lock.
    Generate,
}

/// One problem with the user's input: exit code 2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Which input.
    pub stage: Stage,
    /// Where, when known.
    pub location: Option<Location>,
    /// What was wrong, lowercase, no trailing period.
    pub message: String,
    /// The offending source line, shown under the location.
    pub snippet: Option<String>,
    /// One actionable fix each.
    pub hints: Vec<String>,
}

impl Diagnostic {
    /// A diagnostic with no location.
    pub fn new(stage: Stage, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            stage,
            location: None,
            message: message.into(),
            snippet: None,
            hints: Vec::new(),
        }
    }

    /// Sets the location.
    pub fn at(mut self, location: Location) -> Diagnostic {
        self.location = Some(location);
        self
    }

    /// Sets the location from a byte offset in `text`, with the line as snippet (a window
    /// of at most 100 characters around the column, for very long lines).
    pub fn at_offset(mut self, file: &str, text: &str, offset: usize) -> Diagnostic {
        let mut loc = Location::at_offset(file, text, offset);
        self.snippet = text.lines().nth(loc.line.saturating_sub(1)).map(|l| {
            let chars: Vec<char> = l.chars().collect();
            if chars.len() <= 100 {
                return l.to_string();
            }
            let start = loc
                .col
                .saturating_sub(50)
                .min(chars.len().saturating_sub(100));
            let end = (start + 100).min(chars.len());
            loc.col -= start;
            let mut s: String = chars[start..end].iter().collect();
            if start > 0 {
                s.insert(0, '…');
                loc.col += 1;
            }
            if end < chars.len() {
                s.push('…');
            }
            s
        });
        self.location = Some(loc);
        self
    }

    /// Adds a hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Diagnostic {
        self.hints.push(hint.into());
        self
    }
}

impl fmt::Display for Diagnostic {
    /// Every part is made safe to print here, once ([`safe_message`]): a value from a
    /// server, a manifest or the user cannot forge lines, drive the terminal or flood it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error: {}", safe_message(&self.message))?;
        if let Some(loc) = &self.location {
            write!(f, "\n  --> {}", escape_control(&loc.to_string()))?;
            if let Some(snippet) = &self.snippet {
                // One line of the user's file: its tabs stay (an editor shows them).
                let snippet = terminal_safe(snippet);
                let n = loc.line.to_string();
                let pad = " ".repeat(n.len());
                write!(f, "\n {pad} |\n {n} | {snippet}")?;
                if loc.col > 0 {
                    write!(f, "\n {pad} | {}^", " ".repeat(loc.col - 1))?;
                }
            }
        }
        for h in &self.hints {
            write!(f, "\n\nhint: {}", safe_message(h))?;
        }
        Ok(())
    }
}

/// Every error the library returns.
///
/// `Debug` prints the same text as `Display` (the text the CLI shows), so that
/// `fn main() -> Result<(), gpustack::Error>` and `.unwrap()` print the message and its
/// hints rather than a dump of the diagnostics; match on the variants for the data.
///
/// ```
/// let catalog = gpustack::Catalog::stock()?;
/// let err = gpustack::Spec::parse("gpustack.toml", "[stack]\n", &catalog).unwrap_err();
/// assert_eq!(format!("{err:?}"), err.to_string());
/// # Ok::<(), gpustack::Error>(())
/// ```
#[non_exhaustive]
pub enum Error {
    /// Invalid input: one or more diagnostics (exit code 2).
    Invalid(Vec<Diagnostic>),
    /// The request has no solution (exit code 1).
    NoSolution(Box<Explanation>),
    /// A resolver after the solver (uv, for the Python closure) found no solution: its
    /// explanation (exit code 1).
    Unresolvable(Vec<Diagnostic>),
    /// A host the run needed did not answer as it must: DNS, connect, TLS, an HTTP status,
    /// a deadline or a byte cap (exit code 3). Each diagnostic names the host, the URL, the
    /// cause and the setting that points elsewhere (or `--offline`).
    Network(Vec<Diagnostic>),
}

impl Error {
    /// The process exit code the CLI uses for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Invalid(_) => 2,
            Error::NoSolution(_) | Error::Unresolvable(_) => 1,
            Error::Network(_) => 3,
        }
    }
}

impl From<Diagnostic> for Error {
    fn from(d: Diagnostic) -> Error {
        Error::Invalid(vec![d])
    }
}

impl From<Vec<Diagnostic>> for Error {
    fn from(d: Vec<Diagnostic>) -> Error {
        Error::Invalid(d)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Invalid(ds) | Error::Unresolvable(ds) | Error::Network(ds) => {
                for (i, d) in ds.iter().enumerate() {
                    if i > 0 {
                        f.write_str("\n\n")?;
                    }
                    write!(f, "{d}")?;
                }
                Ok(())
            }
            // `{:#}`: sources in full (`--verbose`).
            Error::NoSolution(e) if f.alternate() => write!(f, "{e:#}"),
            Error::NoSolution(e) => write!(f, "{e}"),
        }
    }
}

/// The same text as `Display` (see [`Error`]); `{:#?}` is `{:#}`.
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for Error {}

impl std::error::Error for Diagnostic {}

/// Turns a TOML parse error into a diagnostic at its span.
pub(crate) fn toml_diagnostic(
    stage: Stage,
    file: &str,
    text: &str,
    e: &toml::de::Error,
) -> Diagnostic {
    let msg = e.message().trim().trim_end_matches('.').to_string();
    let msg = if msg.is_empty() {
        "invalid TOML".to_string()
    } else {
        msg
    };
    let mut d = Diagnostic::new(stage, msg);
    if let Some(span) = e.span() {
        d = d.at_offset(file, text, span.start);
    } else {
        d = d.at(Location::file(file));
    }
    d
}

/// Whether a character must not reach a terminal raw: C0 and C1 controls (ESC starts an
/// ANSI sequence) and the Unicode bidirectional overrides that reorder what is shown.
fn is_unsafe_char(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn escape_one(c: char) -> String {
    match c {
        '\n' | '\r' | '\t' => c.escape_debug().to_string(),
        _ => c.escape_unicode().to_string(),
    }
}

/// `s` with every control character escaped (`\n`, `\u{1b}`), for a value inside one
/// line of output: a path or a name can then neither forge lines nor drive the terminal.
pub fn escape_control(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(is_unsafe_char) {
        return std::borrow::Cow::Borrowed(s);
    }
    std::borrow::Cow::Owned(
        s.chars()
            .map(|c| {
                if is_unsafe_char(c) {
                    escape_one(c)
                } else {
                    c.to_string()
                }
            })
            .collect(),
    )
}

/// `s` for a terminal: like [`escape_control`] but keeping newlines and tabs, for whole
/// blocks of output (`why`, `catalog show`, error messages).
pub fn terminal_safe(s: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| is_unsafe_char(c) && c != '\n' && c != '\t';
    if !s.chars().any(bad) {
        return std::borrow::Cow::Borrowed(s);
    }
    std::borrow::Cow::Owned(
        s.chars()
            .map(|c| if bad(c) { escape_one(c) } else { c.to_string() })
            .collect(),
    )
}

/// The longest run of characters without a space that a message quotes whole; a longer
/// one is cut to [`VALUE_KEPT`] characters with its length shown.
pub const VALUE_MAX: usize = 256;

/// How many characters of a value longer than [`VALUE_MAX`] a message keeps.
pub const VALUE_KEPT: usize = 80;

/// `s` for quoting inside a one-line message: control characters escaped
/// ([`escape_control`]), and a value longer than [`VALUE_MAX`] characters cut after
/// [`VALUE_KEPT`] with its length in bytes shown, so a 900 KB value does not fill the
/// terminal.
///
/// ```
/// use gpustack::error::shown_value;
/// assert_eq!(shown_value("a\nb"), "a\\nb");
/// let long = "x".repeat(912_345);
/// assert_eq!(shown_value(&long), format!("{}… (912345 bytes)", "x".repeat(80)));
/// ```
pub fn shown_value(s: &str) -> String {
    if s.chars().nth(VALUE_MAX).is_none() {
        return escape_control(s).into_owned();
    }
    let kept: String = s.chars().take(VALUE_KEPT).collect();
    format!("{}… ({} bytes)", escape_control(&kept), s.len())
}

/// A message (or hint) made safe to print, the rule [`Diagnostic`]'s `Display` applies:
///
/// * control characters and escape sequences are escaped ([`escape_control`]), except a
///   tab, a newline followed by indentation (how messages lay out their own lists and
///   code), and a blank line before a paragraph that does not read like a line of
///   gpustack's own; any other newline (`…\nerror: forged`) is escaped, so a server's
///   text cannot start a line of its own;
/// * a run of more than [`VALUE_MAX`] characters without a space is cut to [`VALUE_KEPT`]
///   with its length shown (`xxxx… (912345 bytes)`).
///
/// ```
/// use gpustack::error::safe_message;
/// assert_eq!(safe_message("bad `a\nerror: forged`"), "bad `a\\nerror: forged`");
/// assert_eq!(safe_message("two:\n    one\n    two"), "two:\n    one\n    two");
/// assert_eq!(safe_message("add:\n\n    x\n\nthen lock"), "add:\n\n    x\n\nthen lock");
/// assert_eq!(safe_message("a\n\nerror: forged"), "a\n\\nerror: forged");
/// assert_eq!(safe_message("\u{1b}[2J"), "\\u{1b}[2J");
/// ```
pub fn safe_message(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(4096));
    let mut chars = s.char_indices().peekable();
    let mut run_start: Option<usize> = None;
    while let Some((i, c)) = chars.next() {
        if c == ' ' || c == '\n' || c == '\t' {
            run_start = None;
        } else if run_start.is_none() {
            run_start = Some(i);
            // A long run: cut it here, and skip to its end.
            let end = s[i..].find([' ', '\n', '\t']).map_or(s.len(), |e| i + e);
            let run = &s[i..end];
            if run.chars().nth(VALUE_MAX).is_some() {
                out.push_str(&shown_value(run));
                while chars.peek().is_some_and(|&(j, _)| j < end) {
                    chars.next();
                }
                run_start = None;
                continue;
            }
        }
        match c {
            '\n' if chars
                .peek()
                .is_some_and(|&(_, n)| n == ' ' || n == '\n' || n == '\t') =>
            {
                out.push('\n');
            }
            // After a blank line, a paragraph of the message's own (`start the spec
            // with:\n\n    [stack]\n\n`gpustack init` writes …`), unless it reads like a
            // line of gpustack's own (`error:`, `hint:`).
            '\n' if out.ends_with('\n') && !looks_like_prefix(&s[i + 1..]) => out.push('\n'),
            '\t' => out.push('\t'),
            c if is_unsafe_char(c) => out.push_str(&escape_one(c)),
            c => out.push(c),
        }
    }
    out
}

/// Whether a line starts like one of gpustack's own (`error: `, `warning: `, `hint: `,
/// `note: `, `  --> `): a word and a colon, or an arrow.
fn looks_like_prefix(line: &str) -> bool {
    let t = line.trim_start();
    let word = t
        .find(|c: char| !(c.is_ascii_alphabetic() || c == '-'))
        .unwrap_or(t.len());
    (word > 0 && t[word..].starts_with(':')) || t.starts_with("-->") || t.starts_with('×')
}

pub use crate::core::names::{did_you_mean, name_key};

#[cfg(test)]
mod tests {
    #[test]
    fn suggestions() {
        assert_eq!(
            super::did_you_mean("clusters", ["stack", "cluster", "components"]),
            Some("cluster")
        );
        assert_eq!(super::did_you_mean("nmae", ["name", "os"]), Some("name"));
        assert_eq!(super::did_you_mean("zzzzzz", ["name", "os"]), None);
        let all = [
            "stack",
            "hardware",
            "components",
            "cluster",
            "image",
            "train",
            "serve",
            "packer",
            "k8s",
            "slurm",
            "storage",
            "name",
            "os",
            "gpus",
            "archs",
            "driver",
        ];
        assert_eq!(super::did_you_mean("clusters", all), Some("cluster"));
    }
}
