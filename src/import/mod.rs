//! Importers: catalog entries read from upstream metadata, written as overlay TOML.
//!
//! ```text
//! PyPI simple API (PEP 691/503) ─┐                        ┌─▶ Vec<OverlayFile> (catalog TOML, --catalog DIR)
//! PEP 658 metadata / range reads ┼─▶ Vec<Entry> (typed) ──┤
//! NVIDIA redistrib_X.Y.Z.json ───┤        ▲               └─▶ summary: written, kept, not derived
//! nvidia/cuda tag lists (.md) ───┘        │
//!                                  base Catalog (facts an importer cannot derive are kept
//!                                  from it, or left out and listed; never guessed)
//! ```
//!
//! * `pypi` reads project pages and core metadata; `archive` reads a wheel's
//!   `METADATA` through HTTP range requests and an sdist's `PKG-INFO`; [`redist`] reads
//!   NVIDIA's redistrib manifests; [`images`] reads NVIDIA's `nvidia/cuda` tag lists;
//!   [`outdated`] compares upstream with the catalog.
//! * Only [`http`] touches the network, behind the [`Fetch`] trait, so every parser is
//!   tested on recorded responses.
//! * Output is deterministic given the same responses: entries sorted by family and
//!   version, and the date each entry was read comes from `--date` or the response's
//!   `Date` header, never the clock (a local manifest file without `--date` is the one
//!   exception, and says so).
//! * An entry whose *required* field cannot be derived and is not in the base catalog is
//!   written commented out, with what it needs, so the overlay still loads.

mod archive;
pub mod http;
pub mod images;
mod install;
pub mod outdated;
mod pypi;
pub mod redist;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

pub use http::{Fetch, FetchError, Http, Request, Response};

use crate::catalog::{Catalog, TorchBuild};
use crate::core::version::{Version, VersionReq};
use crate::core::Component;
use crate::error::{Diagnostic, Stage};

/// PyPI's simple index, the default `--index`.
pub const PYPI: &str = "https://pypi.org/simple";

/// Why an import failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImportError {
    /// No response at all.
    Fetch(FetchError),
    /// An HTTP error status.
    Status {
        /// The URL.
        url: String,
        /// `500`.
        status: u16,
    },
    /// A response the importer cannot read.
    Malformed {
        /// The URL or file.
        url: String,
        /// What is wrong.
        what: String,
    },
    /// The project is not one the catalog models.
    UnknownProject(String),
    /// The index has no such project.
    NoProject {
        /// The project.
        project: String,
        /// The index.
        index: String,
    },
    /// The project has no such release (or none installable on Linux x86_64).
    NoRelease {
        /// The project.
        project: String,
        /// The version asked for, or `None` for "any".
        version: Option<String>,
        /// The newest versions it has, for the hint.
        have: Vec<String>,
    },
    /// A command-line argument is malformed.
    Usage(String),
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImportError::Fetch(FetchError::Offline { url }) => {
                write!(f, "`{url}` is needed, but `--offline` was given")
            }
            ImportError::Fetch(e @ FetchError::Unreachable { .. }) => {
                write!(f, "cannot fetch {e}")
            }
            ImportError::Status { url, status } => write!(f, "`{url}` answered HTTP {status}"),
            ImportError::Malformed { url, what } => write!(f, "cannot read `{url}`: {what}"),
            ImportError::UnknownProject(p) => {
                write!(f, "`{p}` is not a project the catalog models")
            }
            ImportError::NoProject { project, index } => {
                write!(f, "`{index}` has no project `{project}`")
            }
            ImportError::NoRelease {
                project,
                version: Some(v),
                ..
            } => write!(
                f,
                "`{project}` has no release `{v}` with a Linux x86_64 wheel or an sdist"
            ),
            ImportError::NoRelease {
                project,
                version: None,
                ..
            } => write!(
                f,
                "`{project}` has no final release with a Linux x86_64 wheel or an sdist"
            ),
            ImportError::Usage(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ImportError {}

impl From<ImportError> for Diagnostic {
    fn from(e: ImportError) -> Diagnostic {
        let stage = match e {
            ImportError::UnknownProject(_) | ImportError::Usage(_) => Stage::Usage,
            _ => Stage::Io,
        };
        let hint = match &e {
            ImportError::Fetch(FetchError::Offline { .. }) => Some(
                "drop `--offline`, or import NVIDIA manifests from a local FILE with `catalog import redist FILE`".to_string(),
            ),
            ImportError::Fetch(FetchError::Unreachable {
                cause: crate::resolve::http::Cause::Deadline { secs },
                ..
            }) => Some(format!(
                "the run's network budget is {secs} s; give it more with `--timeout SECS`, or import fewer releases per run"
            )),
            ImportError::Fetch(FetchError::Unreachable { .. }) => Some(
                "check the network (and `HTTPS_PROXY`); pypi.org must be reachable, or pass `--index URL` for a mirror".to_string(),
            ),
            ImportError::UnknownProject(_) => Some(
                "importable: torch, vllm, deepspeed, nvidia-cudnn-cuXX, nvidia-nccl-cuXX, and the extras the catalog lists (flash-attn, xformers, transformers, accelerate, bitsandbytes, tensorrt-llm, cupy-cuda12x, nvidia-dali-cuda120, …)".to_string(),
            ),
            ImportError::NoRelease { have, .. } if !have.is_empty() => {
                Some(format!("newest releases there: {}", have.join(", ")))
            }
            _ => None,
        };
        let d = Diagnostic::new(stage, e.to_string());
        match hint {
            Some(h) => d.hint(h),
            None => d,
        }
    }
}

impl From<ImportError> for crate::Error {
    /// A host that did not answer as it must is a network failure (exit 3), as in `lock`;
    /// everything else is a problem with the input (exit 2).
    fn from(e: ImportError) -> crate::Error {
        let network = matches!(e, ImportError::Fetch(FetchError::Unreachable { .. }));
        let d = Diagnostic::from(e);
        if network {
            crate::Error::Network(vec![d])
        } else {
            d.into()
        }
    }
}

/// A catalog family an importer writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Family {
    /// `cuda.toml` `[[release]]`.
    Cuda,
    /// `cudnn.toml`.
    Cudnn,
    /// `nccl.toml`.
    Nccl,
    /// `torch.toml` (`[[release]]` and `[[wheel]]`).
    Torch,
    /// `vllm.toml`.
    Vllm,
    /// `deepspeed.toml`.
    Deepspeed,
    /// `extras.toml` (`[[extra]]`).
    Extra,
    /// `images.toml` (`[[image]]`).
    Image,
}

impl Family {
    /// The catalog's `family = "…"`.
    pub fn name(self) -> &'static str {
        match self {
            Family::Cuda => "cuda",
            Family::Cudnn => "cudnn",
            Family::Nccl => "nccl",
            Family::Torch => "torch",
            Family::Vllm => "vllm",
            Family::Deepspeed => "deepspeed",
            Family::Extra => "extra",
            Family::Image => "image",
        }
    }
}

/// A field value, as the catalog's TOML spells it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Value {
    Bool(bool),
    Str(String),
    Strs(Vec<String>),
    Ints(Vec<u64>),
    Files(Vec<FileOut>),
    /// An inline table of strings: `{ reason = "…", observed = "…" }`.
    Table(Vec<(&'static str, String)>),
    /// An array of inline tables of strings, one per line.
    Tables(Vec<Vec<(&'static str, String)>>),
}

/// One `files = [...]` row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FileOut {
    pub(crate) version: Option<String>,
    pub(crate) python: Option<String>,
    pub(crate) index: Option<String>,
    pub(crate) filename: String,
    pub(crate) sha256: String,
}

/// A fact the importer did not derive from upstream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotDerived {
    /// The catalog field: `arch_list`, `driver_min`.
    pub field: &'static str,
    /// Why upstream metadata does not give it.
    pub why: String,
    /// Where the value written was kept from (`catalog/torch.toml:310`), when the base
    /// catalog has the entry.
    pub kept_from: Option<String>,
}

/// One catalog entry, built from upstream data: the input of the TOML writer.
///
/// The fields are kept as (catalog key, value) pairs in the catalog's own order because
/// this is a serialization plan, like cargo's `emit_package` table: the importer decides
/// every value once, the writer only lays them out, and the catalog loader (`wire.rs`,
/// `deny_unknown_fields`) is what checks the keys when the overlay is loaded back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its family (and so its overlay file).
    pub family: Family,
    /// `release`, `wheel` or `extra`.
    pub table: &'static str,
    /// What the entry is, for the summary: `torch 2.4.0+cu121`.
    pub label: String,
    /// The version it sorts by.
    pub(crate) sort: Version,
    /// Fields in the catalog's order, `source` and `note` excluded.
    pub(crate) fields: Vec<(&'static str, Value)>,
    /// The URLs read and the date, as the catalog's `source`.
    pub source: String,
    /// What else the reader should know (raw values, files not recorded).
    pub notes: Vec<String>,
    /// Facts left out or kept from the base catalog.
    pub not_derived: Vec<NotDerived>,
    /// Required facts neither derived nor kept: the entry is written commented out.
    pub missing: Vec<String>,
    /// Sub-tables written after the entry (`[[image.digest]]`), each a table name and its
    /// fields in order.
    pub(crate) children: Vec<(&'static str, Vec<(&'static str, Value)>)>,
}

impl Entry {
    fn new(family: Family, table: &'static str, label: String, sort: Version) -> Entry {
        Entry {
            family,
            table,
            label,
            sort,
            fields: Vec::new(),
            source: String::new(),
            notes: Vec::new(),
            not_derived: Vec::new(),
            missing: Vec::new(),
            children: Vec::new(),
        }
    }

    fn set(&mut self, k: &'static str, v: Value) {
        self.fields.push((k, v));
    }

    fn str(&mut self, k: &'static str, v: impl Into<String>) {
        self.fields.push((k, Value::Str(v.into())));
    }

    /// Records a fact not derived; keeps `kept` (value, location) when the base catalog
    /// has it, else leaves it out (or marks the entry incomplete when `required`).
    fn not_derived(
        &mut self,
        field: &'static str,
        why: impl Into<String>,
        kept: Option<(Value, String)>,
        required: bool,
    ) {
        let kept_from = match kept {
            Some((v, at)) => {
                self.fields.push((field, v));
                Some(at)
            }
            None => {
                if required {
                    self.missing.push(field.to_string());
                }
                None
            }
        };
        self.not_derived.push(NotDerived {
            field,
            why: why.into(),
            kept_from,
        });
    }

    /// The value of a field written, for tests and the summary.
    pub fn field(&self, k: &str) -> Option<String> {
        self.fields
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| match v {
                Value::Bool(b) => b.to_string(),
                Value::Str(s) => s.clone(),
                Value::Strs(l) => l.join(", "),
                Value::Ints(l) => l
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                Value::Files(f) => f
                    .iter()
                    .map(|f| format!("{} {}", f.filename, f.sha256))
                    .collect::<Vec<_>>()
                    .join("\n"),
                Value::Table(_) | Value::Tables(_) => write_value(v),
            })
    }
}

/// A file to write into the overlay directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverlayFile {
    /// `torch.toml`, `torch-cu124.toml`, `cuda-redist.toml`.
    pub name: String,
    /// The TOML text.
    pub contents: String,
}

/// The result of an import: the entries and the files that hold them.
#[derive(Clone, Debug, Default)]
pub struct Import {
    /// Every entry, sorted by family, table and version.
    pub entries: Vec<Entry>,
    /// Which command produced it, for the file header: `catalog import pypi`.
    pub command: String,
    /// Where the entries were read (`https://pypi.org/simple`, a manifest).
    pub origin: String,
    /// The overlay file names per family (`torch-cu124.toml` for a PyTorch index).
    pub(crate) file_suffix: String,
    /// What upstream lists that the overlay leaves out, and why (a CUDA release or an OS
    /// the catalog does not model).
    pub not_written: Vec<String>,
    /// How the entries differ from the catalog's own (a status that moved, tags added).
    pub changed: Vec<String>,
}

impl Import {
    /// The overlay file an entry goes to.
    fn file_of(&self, e: &Entry) -> String {
        let base = match e.family {
            Family::Extra => "extras",
            Family::Image => "images",
            f => f.name(),
        };
        format!("{base}{}.toml", self.file_suffix)
    }

    /// The overlay files, one per family, in file-name order.
    pub fn files(&self) -> Vec<OverlayFile> {
        let mut by: BTreeMap<String, Vec<&Entry>> = BTreeMap::new();
        for e in &self.entries {
            by.entry(self.file_of(e)).or_default().push(e);
        }
        by.into_iter()
            .map(|(name, entries)| OverlayFile {
                contents: write_file(&self.command, &self.origin, &entries),
                name,
            })
            .collect()
    }

    /// The human summary: what was written, what was kept, what is not derived.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        for f in self.files() {
            let labels: Vec<String> = self
                .entries
                .iter()
                .filter(|e| self.file_of(e) == f.name)
                .map(|e| {
                    if e.missing.is_empty() {
                        e.label.clone()
                    } else {
                        format!("{} (commented out)", e.label)
                    }
                })
                .collect();
            out.push_str(&format!("{}: {}\n", f.name, labels.join(", ")));
        }
        let nd: Vec<String> = self
            .entries
            .iter()
            .flat_map(|e| {
                e.not_derived.iter().map(move |n| {
                    let what = match &n.kept_from {
                        Some(at) => format!("kept from {at}"),
                        None => "left out".to_string(),
                    };
                    format!("  {} `{}`: {} ({what})\n", e.label, n.field, n.why)
                })
            })
            .collect();
        if !nd.is_empty() {
            out.push_str("\nnot derived from upstream metadata:\n");
            out.extend(nd);
        }
        for (title, lines) in [
            ("differs from the catalog", &self.changed),
            ("not written", &self.not_written),
        ] {
            if !lines.is_empty() {
                out.push_str(&format!("\n{title}:\n"));
                for l in lines {
                    out.push_str(&format!("  {l}\n"));
                }
            }
        }
        let inc: Vec<String> = self
            .entries
            .iter()
            .filter(|e| !e.missing.is_empty())
            .map(|e| format!("  {}: needs {}\n", e.label, e.missing.join(", ")))
            .collect();
        if !inc.is_empty() {
            out.push_str(
                "\nincomplete (written commented out: fill in the fields and uncomment):\n",
            );
            out.extend(inc);
        }
        out
    }
}

/// TOML basic string.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn write_value(v: &Value) -> String {
    match v {
        Value::Bool(b) => b.to_string(),
        Value::Str(s) => quote(s),
        Value::Strs(l) => format!(
            "[{}]",
            l.iter().map(|s| quote(s)).collect::<Vec<_>>().join(", ")
        ),
        Value::Ints(l) => format!(
            "[{}]",
            l.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Table(t) => inline_table(t),
        Value::Tables(rows) => {
            let mut s = String::from("[\n");
            for r in rows {
                s.push_str(&format!("  {},\n", inline_table(r)));
            }
            s.push(']');
            s
        }
        Value::Files(files) => {
            let mut s = String::from("[\n");
            for f in files {
                let mut parts = Vec::new();
                for (k, v) in [
                    ("version", &f.version),
                    ("python", &f.python),
                    ("index", &f.index),
                ] {
                    if let Some(v) = v {
                        parts.push(format!("{k} = {}", quote(v)));
                    }
                }
                parts.push(format!("filename = {}", quote(&f.filename)));
                parts.push(format!("sha256 = {}", quote(&f.sha256)));
                s.push_str(&format!("  {{ {} }},\n", parts.join(", ")));
            }
            s.push(']');
            s
        }
    }
}

fn inline_table(t: &[(&'static str, String)]) -> String {
    let parts: Vec<String> = t
        .iter()
        .map(|(k, v)| format!("{k} = {}", quote(v)))
        .collect();
    format!("{{ {} }}", parts.join(", "))
}

fn write_entry(e: &Entry) -> String {
    let mut s = format!("[[{}]]\n", e.table);
    for (k, v) in &e.fields {
        s.push_str(&format!("{k} = {}\n", write_value(v)));
    }
    s.push_str(&format!("source = {}\n", quote(&e.source)));
    let mut note: Vec<String> = e.notes.clone();
    for n in &e.not_derived {
        note.push(match &n.kept_from {
            Some(at) => format!("`{}` kept from {at} ({})", n.field, n.why),
            None => format!("`{}` not derived ({})", n.field, n.why),
        });
    }
    if !note.is_empty() {
        s.push_str(&format!("note = {}\n", quote(&note.join("; "))));
    }
    for (table, fields) in &e.children {
        s.push_str(&format!("\n[[{table}]]\n"));
        for (k, v) in fields {
            s.push_str(&format!("{k} = {}\n", write_value(v)));
        }
    }
    if e.missing.is_empty() {
        s
    } else {
        let mut c = format!(
            "# INCOMPLETE: needs {} (not derivable from upstream metadata); fill in and uncomment\n",
            e.missing
                .iter()
                .map(|m| format!("`{m}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        for line in s.lines() {
            c.push_str("# ");
            c.push_str(line);
            c.push('\n');
        }
        c
    }
}

fn write_file(command: &str, origin: &str, entries: &[&Entry]) -> String {
    let family = entries.first().map_or("", |e| e.family.name());
    let mut s = format!(
        "# @generated by `gpustack {command}` from {origin}.\n\
         # Review before use: load it with `--catalog DIR`; facts the importer cannot derive\n\
         # are kept from the catalog or left out, and each entry's `note` says which.\n\
         family = {}\n",
        quote(family)
    );
    for e in entries {
        s.push('\n');
        s.push_str(&write_entry(e));
    }
    s
}

/// `2026-11-25` for today (UTC), for a local file read without `--date`.
pub fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// An HTTP `Date` header (`Wed, 25 Nov 2026 17:33:42 GMT`) as `2026-11-25`.
pub fn http_date(v: &str) -> Option<String> {
    http::http_date_to_iso(v)
}

/// Checks a `--date` argument: a real calendar date `YYYY-MM-DD` in the years the catalog
/// accepts (2000 to 2099), so that what an import writes always loads.
pub fn check_date(s: &str) -> Result<(), ImportError> {
    if crate::core::url::parse_date(s).is_some_and(|(y, _, _)| (2000..2100).contains(&y)) {
        Ok(())
    } else {
        Err(ImportError::Usage(format!(
            "invalid date `{}`: write a calendar date YYYY-MM-DD (2000 to 2099)",
            crate::error::shown_value(s)
        )))
    }
}

// ------------------------------------------------------------------------- PyPI import

/// What a requested project is, for the catalog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Torch,
    Vllm,
    Deepspeed,
    /// `nvidia-cudnn-cuXX` (`true`) or `nvidia-nccl-cuXX` (`false`).
    Lib(bool),
    Extra(Component),
}

fn kind_of(base: &Catalog, project: &str) -> Option<Kind> {
    let p = pypi::normalize(project);
    match p.as_str() {
        "torch" => return Some(Kind::Torch),
        "vllm" => return Some(Kind::Vllm),
        "deepspeed" => return Some(Kind::Deepspeed),
        _ => {}
    }
    for (prefix, cudnn) in [("nvidia-cudnn-cu", true), ("nvidia-nccl-cu", false)] {
        if let Some(n) = p.strip_prefix(prefix) {
            if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) {
                return Some(Kind::Lib(cudnn));
            }
        }
    }
    if let Some(e) = base
        .extras
        .iter()
        .find(|e| pypi::normalize(&e.pypi_name) == p)
    {
        return Some(Kind::Extra(e.component));
    }
    Component::from_name(&p)
        .filter(|c| c.is_extra())
        .map(Kind::Extra)
}

/// The options of `catalog import pypi`.
#[derive(Clone, Debug)]
pub struct PypiOptions {
    /// The simple index (`https://pypi.org/simple`, `https://download.pytorch.org/whl/cu124`).
    pub index: String,
    /// The index URL the entries record (`files`, an extra's `index`, a variant's
    /// `index_url`) when `index` is a mirror of it; `None`: `index` itself.
    pub record_index: Option<String>,
    /// The date entries record as read; `None`: each page's `Date` header.
    pub date: Option<String>,
    /// Also import the cuDNN/NCCL releases a torch wheel pins and the torch release a
    /// vLLM release pins, when the base catalog lacks them.
    pub follow_pins: bool,
}

impl Default for PypiOptions {
    fn default() -> PypiOptions {
        PypiOptions {
            index: PYPI.to_string(),
            record_index: None,
            date: None,
            follow_pins: true,
        }
    }
}

/// `index` is PyPI itself (its own spelling or a trailing slash).
fn is_pypi(index: &str) -> bool {
    let i = index.trim_end_matches('/');
    i == PYPI || i == "https://pypi.org/simple"
}

/// The overlay-file suffix of a non-PyPI index: `-cu124` for
/// `https://download.pytorch.org/whl/cu124`.
fn suffix_of(index: &str) -> String {
    if is_pypi(index) {
        return String::new();
    }
    let last = index.trim_end_matches('/').rsplit('/').next().unwrap_or("");
    if last == "simple" {
        return String::new(); // PyPI or a mirror of it
    }
    let slug: String = last
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    if slug.is_empty() {
        "-index".into()
    } else {
        format!("-{slug}")
    }
}

/// Imports `requests` (`NAME` or `NAME==VERSION`) from a simple index.
///
/// `base` is the catalog the overlay will sit on: facts an importer cannot derive are kept
/// from it where it has the entry, and pins it lacks are followed.
pub fn import_pypi(
    fetch: &dyn Fetch,
    base: &Catalog,
    requests: &[String],
    opts: &PypiOptions,
) -> Result<Import, ImportError> {
    if let Some(d) = &opts.date {
        check_date(d)?;
    }
    let mut queue: Vec<(String, Option<String>)> = Vec::new();
    for r in requests {
        let (name, version) = match r.split_once("==") {
            Some((n, v)) => (n.trim(), Some(v.trim().to_string())),
            None => (r.trim(), None),
        };
        if name.is_empty() || r.contains(['<', '>', '~', '!']) || version.as_deref() == Some("") {
            return Err(ImportError::Usage(format!(
                "invalid request `{r}`: write NAME or NAME==VERSION"
            )));
        }
        if kind_of(base, name).is_none() {
            return Err(ImportError::UnknownProject(name.to_string()));
        }
        queue.push((name.to_string(), version));
    }
    let mut ctx = Ctx {
        fetch,
        base,
        opts,
        pages: BTreeMap::new(),
        entries: Vec::new(),
        done: BTreeSet::new(),
        queue: Vec::new(),
    };
    let mut i = 0;
    while i < queue.len() {
        let (name, version) = queue[i].clone();
        i += 1;
        let key = (pypi::normalize(&name), version.clone().unwrap_or_default());
        if !ctx.done.insert(key) {
            continue;
        }
        ctx.import_one(&name, version.as_deref())?;
        queue.append(&mut ctx.queue);
    }
    let mut entries = ctx.entries;
    entries.sort_by(|a, b| {
        (a.family, a.table, &a.sort, &a.label).cmp(&(b.family, b.table, &b.sort, &b.label))
    });
    entries.dedup_by(|a, b| a.family == b.family && a.table == b.table && a.label == b.label);
    Ok(Import {
        entries,
        command: "catalog import pypi".into(),
        origin: opts.index.trim_end_matches('/').to_string(),
        file_suffix: suffix_of(opts.recorded()),
        ..Import::default()
    })
}

impl PypiOptions {
    /// The index URL entries record.
    fn recorded(&self) -> &str {
        self.record_index
            .as_deref()
            .unwrap_or(&self.index)
            .trim_end_matches('/')
    }
}

struct Ctx<'a> {
    fetch: &'a dyn Fetch,
    base: &'a Catalog,
    opts: &'a PypiOptions,
    pages: BTreeMap<String, Option<pypi::Page>>,
    entries: Vec<Entry>,
    done: BTreeSet<(String, String)>,
    /// Pins to follow, filled by `import_one`.
    queue: Vec<(String, Option<String>)>,
}

/// What [`Ctx::install_facts`] found: the catalog's `yanked`, `platforms` and
/// `glibc_floor`, as written.
#[derive(Clone, Debug, Default)]
struct Facts {
    yanked: Option<Vec<(&'static str, String)>>,
    platforms: Vec<String>,
    floors: Vec<Vec<(&'static str, String)>>,
}

impl Facts {
    /// Adds the facts to an entry (`platforms` only when `with_platforms`).
    fn write(&self, e: &mut Entry, with_platforms: bool) {
        if with_platforms && !self.platforms.is_empty() {
            e.set("platforms", Value::Strs(self.platforms.clone()));
        }
        if let Some(y) = &self.yanked {
            e.set("yanked", Value::Table(y.clone()));
        }
        if !self.floors.is_empty() {
            e.set("glibc_floor", Value::Tables(self.floors.clone()));
        }
    }
}

/// A release's files on a page.
struct Release<'p> {
    page: &'p pypi::Page,
    /// The full version string of the files (`2.4.0`, `2.5.1+cu124`).
    version: String,
    files: Vec<(&'p pypi::DistFile, pypi::FileName)>,
}

impl Release<'_> {
    fn linux_wheels(&self) -> Vec<&(&pypi::DistFile, pypi::FileName)> {
        self.files
            .iter()
            .filter(|(_, n)| n.wheel.as_ref().is_some_and(pypi::WheelTags::linux_x86_64))
            .collect()
    }

    /// The file whose metadata is read: a Linux x86_64 wheel with PEP 658 metadata, else
    /// any Linux x86_64 wheel, else the sdist (file-name order within each).
    fn metadata_file(&self) -> Option<&pypi::DistFile> {
        let wheels = self.linux_wheels();
        wheels
            .iter()
            .find(|(f, _)| f.core_metadata.is_some())
            .or_else(|| wheels.first())
            .map(|(f, _)| *f)
            .or_else(|| {
                self.files
                    .iter()
                    .find(|(_, n)| n.wheel.is_none())
                    .map(|(f, _)| *f)
            })
    }

    /// `files = [...]` rows: the Linux x86_64 wheels with a sha256.
    fn file_rows(&self, index: &str, public: &str, with_version: bool) -> Vec<FileOut> {
        let mut wheels = self.linux_wheels();
        let minor = |n: &pypi::FileName| {
            n.wheel
                .as_ref()
                .and_then(pypi::WheelTags::cpython_minor)
                .and_then(|m| Version::parse(&m).ok())
        };
        wheels.sort_by(|a, b| (minor(&a.1), &a.0.filename).cmp(&(minor(&b.1), &b.0.filename)));
        wheels
            .into_iter()
            .filter_map(|(f, n)| {
                Some(FileOut {
                    version: with_version.then(|| public.to_string()),
                    python: n.wheel.as_ref().and_then(pypi::WheelTags::cpython_minor),
                    index: Some(index.trim_end_matches('/').to_string()),
                    filename: f.filename.clone(),
                    sha256: f.sha256.clone()?,
                })
            })
            .collect()
    }

    /// `>=3.9, <3.13` from the `cpXY` tags of the Linux x86_64 wheels.
    fn python_from_tags(&self) -> Option<String> {
        let minors: BTreeSet<u64> = self
            .linux_wheels()
            .iter()
            .filter_map(|(_, n)| n.wheel.as_ref()?.cpython_minor())
            .filter_map(|m| m.strip_prefix("3.")?.parse().ok())
            .collect();
        let (lo, hi) = (minors.first()?, minors.last()?);
        Some(format!(">=3.{lo}, <3.{}", hi + 1))
    }

    fn date(&self, opts: &PypiOptions) -> String {
        opts.date
            .clone()
            .or_else(|| self.page.date.clone())
            .unwrap_or_else(today)
    }

    fn source(&self, md: &pypi::DistFile, how: &str, opts: &PypiOptions) -> String {
        format!(
            "{} ({} project page: files, sha256, tags; {how} of {}), read {}",
            self.page.url,
            self.page.format,
            md.filename,
            self.date(opts)
        )
    }
}

/// Normalizes a PEP 440 specifier for the catalog (`>=2.0.0,<3` → `>=2.0.0, <3`); `None`
/// when the catalog's requirement syntax cannot hold it (`~=`, `===`, wildcards).
fn catalog_req(spec: &str) -> Option<String> {
    let s = spec
        .split(',')
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(", ");
    (!s.contains('*') && VersionReq::parse(&s).is_ok()).then_some(s)
}

impl Ctx<'_> {
    fn page(&mut self, project: &str) -> Result<Option<&pypi::Page>, ImportError> {
        let key = pypi::normalize(project);
        if !self.pages.contains_key(&key) {
            let p = pypi::project_page(self.fetch, &self.opts.index, project)?;
            self.pages.insert(key.clone(), p);
        }
        Ok(self.pages.get(&key).and_then(Option::as_ref))
    }

    /// Whether a release installs, from its project page and, with `md`, its
    /// dependencies' pages (see [`install`]).
    fn install_facts(
        &mut self,
        project: &str,
        version: &str,
        md: Option<&pypi::Metadata>,
    ) -> Result<Facts, ImportError> {
        let Some(page) = self.page(project)?.cloned() else {
            return Ok(Facts::default());
        };
        let date = self
            .opts
            .date
            .clone()
            .or_else(|| page.date.clone())
            .unwrap_or_else(today);
        let files: Vec<(&pypi::DistFile, pypi::FileName)> = page
            .files
            .iter()
            .filter_map(|f| pypi::parse_filename(project, &f.filename).map(|n| (f, n)))
            .filter(|(_, n)| n.version == version)
            .collect();
        let refs: Vec<&pypi::DistFile> = files.iter().map(|(f, _)| *f).collect();
        let window = install::python_window(md.and_then(|m| m.requires_python.as_deref()));
        let wheels = install::wheels_of(&files, window);
        let mut facts = Facts {
            yanked: install::yank_of(&refs).map(|reason| {
                let mut t = Vec::new();
                if let Some(r) = reason {
                    t.push(("reason", r));
                }
                t.push(("observed", date.clone()));
                t.push(("source", format!("{} ({})", page.url, page.format)));
                t
            }),
            platforms: wheels.catalog_platforms(),
            floors: Vec::new(),
        };
        let Some(md) = md else {
            return Ok(facts);
        };
        let cpus: Vec<&'static str> = if wheels.best.is_empty() {
            install::CPUS.to_vec()
        } else {
            install::CPUS
                .iter()
                .copied()
                .filter(|c| wheels.best.contains_key(c))
                .collect()
        };
        let reqs: Vec<pypi::Requirement> = md
            .requires_dist
            .iter()
            .filter_map(|r| pypi::parse_requirement(r))
            .filter(|r| r.name != pypi::normalize(project))
            .collect();
        for cpu in cpus {
            let mut best = install::own_floor(&wheels, cpu, &page.url);
            for r in reqs.iter().filter(|r| install::applies(r, cpu)) {
                let Some(dep) = self.page(&r.name)? else {
                    continue;
                };
                if let Some(f) = install::dependency_floor(dep, r, cpu, window) {
                    if best.as_ref().is_none_or(|b| f.glibc > b.glibc) {
                        best = Some(f);
                    }
                }
            }
            if let Some(f) = best {
                facts.floors.push(vec![
                    ("cpu", f.cpu.to_string()),
                    ("glibc", f.glibc.to_string()),
                    ("by", f.by),
                    (
                        "source",
                        if f.url == page.url {
                            format!("{} (wheel tags), read {date}", f.url)
                        } else {
                            format!(
                                "{} (wheel tags), read {date}; the requirement is {}'s Requires-Dist",
                                f.url,
                                pypi::normalize(project)
                            )
                        },
                    ),
                ]);
            }
        }
        Ok(facts)
    }

    /// The files of `version` (or the newest final release) of `project`.
    fn release<'p>(
        page: &'p pypi::Page,
        project: &str,
        version: Option<&str>,
    ) -> Result<Release<'p>, ImportError> {
        // A release named exactly may be yanked (PEP 592): it is imported with its
        // `yanked` status; "the newest" is never a yanked one.
        let mut by: BTreeMap<String, Vec<(&pypi::DistFile, pypi::FileName)>> = BTreeMap::new();
        let mut yanked: BTreeMap<String, Vec<(&pypi::DistFile, pypi::FileName)>> = BTreeMap::new();
        for f in &page.files {
            if let Some(n) = pypi::parse_filename(project, &f.filename) {
                let installable = n.wheel.as_ref().is_none_or(pypi::WheelTags::linux_x86_64);
                if installable {
                    let into = if f.yanked { &mut yanked } else { &mut by };
                    into.entry(n.version.clone()).or_default().push((f, n));
                }
            }
        }
        if let Some(want) = version.filter(|w| !by.contains_key(*w)) {
            if let Some(files) = yanked.remove(want) {
                by.insert(want.to_string(), files);
            }
        }
        let parsed = |v: &str| Version::parse(v).ok();
        let have = || {
            let mut v: Vec<Version> = by
                .keys()
                .filter(|v| pypi::is_final(v))
                .filter_map(|v| parsed(v))
                .collect();
            v.sort();
            v.iter().rev().take(5).map(ToString::to_string).collect()
        };
        let chosen = match version {
            Some(want) => {
                let w = parsed(want);
                by.keys()
                    .find(|k| *k == want)
                    .or_else(|| {
                        // `2.4.0` matches `2.4.0+cu121` on a variant index, and `2.4`
                        // matches `2.4.0`.
                        by.keys().find(|k| {
                            let public = k.split('+').next().unwrap_or(k);
                            (!want.contains('+') && public == want)
                                || (w.is_some() && parsed(k) == w)
                        })
                    })
                    .cloned()
            }
            None => by
                .keys()
                .filter(|v| pypi::is_final(v))
                .filter_map(|v| parsed(v).map(|p| (p, v)))
                .max_by(|a, b| a.0.cmp(&b.0))
                .map(|(_, v)| v.clone()),
        };
        let Some(chosen) = chosen else {
            return Err(ImportError::NoRelease {
                project: project.to_string(),
                version: version.map(str::to_string),
                have: have(),
            });
        };
        let mut files = by.remove(&chosen).unwrap_or_default();
        files.sort_by(|a, b| a.0.filename.cmp(&b.0.filename));
        Ok(Release {
            page,
            version: chosen,
            files,
        })
    }

    fn import_one(&mut self, project: &str, version: Option<&str>) -> Result<(), ImportError> {
        let kind = kind_of(self.base, project)
            .ok_or_else(|| ImportError::UnknownProject(project.to_string()))?;
        if let Kind::Lib(cudnn) = kind {
            let public = match version {
                Some(v) => v.to_string(),
                None => {
                    let index = self.opts.index.clone();
                    let page = self.page(project)?.ok_or_else(|| ImportError::NoProject {
                        project: project.to_string(),
                        index,
                    })?;
                    Ctx::release(page, project, None)?.version
                }
            };
            return self.import_lib(cudnn, &public);
        }
        let fetch = self.fetch;
        let opts = self.opts;
        let base = self.base;
        let page = self.page(project)?.ok_or_else(|| ImportError::NoProject {
            project: project.to_string(),
            index: opts.index.clone(),
        })?;
        let rel = Ctx::release(page, project, version)?;
        let md_file = rel.metadata_file();
        let Some(md_file) = md_file else {
            return Err(ImportError::NoRelease {
                project: project.to_string(),
                version: version.map(str::to_string),
                have: Vec::new(),
            });
        };
        let (md, how) = pypi::metadata_of(fetch, md_file)?;
        let source = rel.source(md_file, how, opts);
        let reqs: Vec<pypi::Requirement> = md
            .requires_dist
            .iter()
            .filter_map(|r| pypi::parse_requirement(r))
            .filter(pypi::Requirement::unconditional_on_linux)
            .collect();
        let public = rel
            .version
            .split('+')
            .next()
            .unwrap_or(&rel.version)
            .to_string();
        let Ok(sort) = Version::parse(&public) else {
            return Err(ImportError::Malformed {
                url: page.url.clone(),
                what: format!("version `{public}` is not one the catalog can hold"),
            });
        };
        let got = Pulled {
            base,
            opts,
            project,
            url: &page.url,
            rel: &rel,
            md: &md,
            source,
            reqs,
            public,
            sort,
        };
        let mut follow = Vec::new();
        let mut new = match kind {
            Kind::Torch => got.torch(&mut follow)?,
            Kind::Vllm => vec![got.vllm(&mut follow)],
            Kind::Deepspeed => vec![got.deepspeed()],
            Kind::Extra(component) => vec![got.extra(component)],
            Kind::Lib(_) => unreachable!("handled above"),
        };
        let skipped = rel.files.len() - rel.linux_wheels().len();
        for e in &mut new {
            if e.fields.iter().any(|(k, _)| *k == "files") && skipped > 0 {
                e.notes.push(format!(
                    "{skipped} file(s) for other platforms or the sdist not recorded (the catalog models Linux x86_64)"
                ));
            }
        }
        let rel_version = rel.version.clone();
        let facts = self.install_facts(project, &rel_version, Some(&md))?;
        for e in &mut new {
            if e.table == "release" || e.table == "extra" {
                facts.write(e, e.family != Family::Deepspeed);
            }
        }
        self.entries.extend(new);
        self.queue.extend(follow);
        Ok(())
    }

    /// A cuDNN or NCCL release: which `nvidia-*-cuXX` projects have a Linux x86_64 wheel
    /// of exactly this version (11, 12 and 13 are asked).
    fn import_lib(&mut self, cudnn: bool, version: &str) -> Result<(), ImportError> {
        let stem = if cudnn {
            "nvidia-cudnn-cu"
        } else {
            "nvidia-nccl-cu"
        };
        let Ok(sort) = Version::parse(version) else {
            return Err(ImportError::Usage(format!(
                "`{version}` is not a version the catalog can hold"
            )));
        };
        let mut majors = Vec::new();
        let mut urls = Vec::new();
        let mut notes = Vec::new();
        let mut date = None;
        // Majors with only non-Linux wheels (8.9.5.29: `win_amd64`), and whether every file
        // of every major is yanked.
        let mut other_majors = Vec::new();
        let mut other_urls = Vec::new();
        let mut other_tags: Vec<String> = Vec::new();
        let mut all_files: Vec<pypi::DistFile> = Vec::new();
        for major in [11u64, 12, 13] {
            let project = format!("{stem}{major}");
            let opts = self.opts;
            let Some(page) = self.page(&project)? else {
                continue;
            };
            let files: Vec<(&pypi::DistFile, pypi::FileName)> = page
                .files
                .iter()
                .filter_map(|f| pypi::parse_filename(&project, &f.filename).map(|n| (f, n)))
                .filter(|(_, n)| n.version == version && n.wheel.is_some())
                .collect();
            if files.is_empty() {
                continue;
            }
            all_files.extend(files.iter().map(|(f, _)| (*f).clone()));
            let linux: Vec<&(&pypi::DistFile, pypi::FileName)> = files
                .iter()
                .filter(|(_, n)| n.wheel.as_ref().is_some_and(pypi::WheelTags::linux_x86_64))
                .collect();
            let page_date = opts.date.clone().or_else(|| page.date.clone());
            if linux.is_empty() {
                other_majors.push(major);
                other_urls.push(page.url.clone());
                let w = install::wheels_of(&files, (9, 14));
                for t in w.other {
                    if !other_tags.contains(&t) {
                        other_tags.push(t);
                    }
                }
                if date.is_none() {
                    date = page_date;
                }
                continue;
            }
            majors.push(major);
            urls.push(page.url.clone());
            if date.is_none() {
                date = page_date;
            }
            for (f, _) in linux {
                if let Some(h) = &f.sha256 {
                    notes.push(format!("{} sha256 {h}", f.filename));
                }
            }
        }
        let windows_only = majors.is_empty() && !other_majors.is_empty();
        if windows_only {
            majors = other_majors;
            urls = other_urls;
            other_tags.sort();
            notes.push(format!(
                "no Linux wheel on PyPI, only {}: never locked",
                other_tags.join(", ")
            ));
        }
        let refs: Vec<&pypi::DistFile> = all_files.iter().collect();
        let yank = install::yank_of(&refs);
        if majors.is_empty() {
            return Err(ImportError::NoRelease {
                project: format!("{stem}XX"),
                version: Some(version.to_string()),
                have: Vec::new(),
            });
        }
        let family = if cudnn { Family::Cudnn } else { Family::Nccl };
        let mut e = Entry::new(
            family,
            "release",
            format!("{} {version}", family.name()),
            sort.clone(),
        );
        e.str("version", version);
        e.set("cuda_majors", Value::Ints(majors));
        if windows_only {
            e.set("platforms", Value::Strs(other_tags));
        }
        if let Some(reason) = yank {
            let mut t = Vec::new();
            if let Some(r) = reason {
                t.push(("reason", r));
            }
            t.push(("observed", date.clone().unwrap_or_else(today)));
            t.push(("source", urls.join(", ")));
            e.set("yanked", Value::Table(t));
        }
        let list = if cudnn {
            &self.base.cudnn
        } else {
            &self.base.nccl
        };
        let known = list.iter().find(|l| l.version == sort);
        e.not_derived(
            "min_cc",
            "the lowest compute capability is in NVIDIA's support matrix, not the package metadata",
            known.and_then(|k| {
                k.min_cc
                    .map(|c| (Value::Str(c.to_string()), k.origin.location()))
            }),
            false,
        );
        e.source = format!(
            "{} (PEP 691/503 project pages: a Linux x86_64 wheel of this exact version per CUDA major), read {}",
            urls.join(", "),
            date.unwrap_or_else(today)
        );
        e.notes = notes;
        self.entries.push(e);
        Ok(())
    }
}

// --------------------------------------------------------- installability, in place

/// What `catalog import installability` changed.
#[derive(Clone, Debug, Default)]
pub struct Refresh {
    /// The files rewritten (name as given, new text); unchanged files are left out.
    pub files: Vec<OverlayFile>,
    /// One line per release whose facts changed.
    pub changed: Vec<String>,
    /// Releases whose facts could not be read, and why.
    pub failed: Vec<String>,
}

/// The catalog keys `catalog import installability` owns in an entry of `file`.
fn owned_keys(file: &str) -> &'static [&'static str] {
    match file {
        "torch.toml" => &["yanked", "glibc_floor", "triton"],
        "vllm.toml" | "deepspeed.toml" | "extras.toml" => &["yanked", "glibc_floor"],
        "cudnn.toml" | "nccl.toml" => &["yanked", "platforms"],
        _ => &[],
    }
}

/// A `key = "value"` line's value.
fn line_str<'a>(lines: &[&'a str], key: &str) -> Option<&'a str> {
    lines.iter().find_map(|l| {
        let v = l.strip_prefix(key)?.trim_start().strip_prefix('=')?.trim();
        v.strip_prefix('"')?.strip_suffix('"')
    })
}

/// Recomputes the installability facts (`yanked`, `glibc_floor`, torch's `triton`, and
/// for cuDNN/NCCL `platforms` of a release without Linux wheels) of every PyPI release in
/// the catalog files given (`torch.toml`, `vllm.toml`, `deepspeed.toml`, `extras.toml`,
/// `cudnn.toml`, `nccl.toml`; others are passed over) and rewrites those lines in place,
/// leaving every other line as it was.
pub fn refresh_installability(
    fetch: &dyn Fetch,
    base: &Catalog,
    files: &[(String, String)],
    opts: &PypiOptions,
) -> Result<Refresh, ImportError> {
    if let Some(d) = &opts.date {
        check_date(d)?;
    }
    let mut ctx = Ctx {
        fetch,
        base,
        opts,
        pages: BTreeMap::new(),
        entries: Vec::new(),
        done: BTreeSet::new(),
        queue: Vec::new(),
    };
    let mut out = Refresh::default();
    for (name, text) in files {
        let keys = owned_keys(name);
        if keys.is_empty() {
            continue;
        }
        let lines: Vec<&str> = text.lines().collect();
        let mut new_text = String::new();
        let mut i = 0;
        while i < lines.len() {
            let l = lines[i];
            let is_entry = l == "[[release]]" || (name == "extras.toml" && l == "[[extra]]");
            if !is_entry {
                new_text.push_str(l);
                new_text.push('\n');
                i += 1;
                continue;
            }
            let mut end = i + 1;
            while end < lines.len() && !lines[end].starts_with('[') {
                end += 1;
            }
            // Trailing blank lines and comments belong to what follows.
            let mut body_end = end;
            while body_end > i + 1
                && (lines[body_end - 1].trim().is_empty() || lines[body_end - 1].starts_with('#'))
            {
                body_end -= 1;
            }
            let block = &lines[i..body_end];
            let facts = match ctx.facts_of_entry(name, block) {
                Ok(f) => f,
                Err(e) => {
                    out.failed.push(format!(
                        "{name} `{}`: {e}",
                        line_str(block, "version").unwrap_or("?")
                    ));
                    None
                }
            };
            let rewritten = match &facts {
                Some(f) => patch_block(block, keys, f),
                None => block.iter().map(|l| format!("{l}\n")).collect(),
            };
            let old: String = block.iter().map(|l| format!("{l}\n")).collect();
            if rewritten != old {
                out.changed.push(format!(
                    "{name} {}{}",
                    line_str(block, "pypi_name").map_or(String::new(), |p| format!("{p} ")),
                    line_str(block, "version").unwrap_or("?")
                ));
            }
            new_text.push_str(&rewritten);
            for l in &lines[body_end..end] {
                new_text.push_str(l);
                new_text.push('\n');
            }
            i = end;
        }
        if !text.ends_with('\n') {
            new_text.pop();
        }
        if &new_text != text {
            out.files.push(OverlayFile {
                name: name.clone(),
                contents: new_text,
            });
        }
    }
    Ok(out)
}

/// The block with the owned keys' lines replaced by `f`'s, before `source`.
fn patch_block(block: &[&str], keys: &[&str], f: &Entry) -> String {
    let owned = |l: &str| {
        keys.iter().any(|k| {
            l.strip_prefix(k)
                .is_some_and(|r| r.trim_start().starts_with('='))
        })
    };
    let mut kept: Vec<String> = Vec::new();
    let mut skipping = false;
    for l in block {
        if skipping {
            if l.trim() == "]" {
                skipping = false;
            }
            continue;
        }
        if owned(l) {
            let v = l.split_once('=').map_or("", |(_, v)| v.trim());
            skipping = v.starts_with('[') && !v.ends_with(']');
            continue;
        }
        kept.push((*l).to_string());
    }
    let at = kept
        .iter()
        .position(|l| l.starts_with("source =") || l.starts_with("source="))
        .unwrap_or(kept.len());
    let mut new: Vec<String> = Vec::new();
    for (k, v) in &f.fields {
        if keys.contains(k) {
            new.push(format!("{k} = {}", write_value(v)));
        }
    }
    kept.splice(at..at, new);
    kept.iter().map(|l| format!("{l}\n")).collect()
}

impl Ctx<'_> {
    /// The installability facts of one catalog entry, as an entry whose fields hold them;
    /// `None` for an entry not on PyPI (an extra from another index).
    fn facts_of_entry(&mut self, file: &str, block: &[&str]) -> Result<Option<Entry>, ImportError> {
        let version = line_str(block, "version").unwrap_or_default().to_string();
        let mut e = Entry::new(
            Family::Extra,
            "release",
            version.clone(),
            Version::parse("0").expect("0"),
        );
        if let Some(stem) = match file {
            "cudnn.toml" => Some("nvidia-cudnn-cu"),
            "nccl.toml" => Some("nvidia-nccl-cu"),
            _ => None,
        } {
            let before = self.entries.len();
            match self.import_lib(stem == "nvidia-cudnn-cu", &version) {
                Ok(()) => {}
                Err(ImportError::NoRelease { .. }) => return Ok(None), // a tarball-only release
                Err(err) => return Err(err),
            }
            let got = self.entries.split_off(before);
            if let Some(g) = got.into_iter().next() {
                e.fields = g.fields;
            }
            return Ok(Some(e));
        }
        let project = match file {
            "torch.toml" => "torch".to_string(),
            "vllm.toml" => "vllm".to_string(),
            "deepspeed.toml" => "deepspeed".to_string(),
            _ => {
                let index = line_str(block, "index").unwrap_or("");
                if !is_pypi(index) {
                    return Ok(None);
                }
                line_str(block, "pypi_name").unwrap_or_default().to_string()
            }
        };
        let fetch = self.fetch;
        let Some(page) = self.page(&project)? else {
            return Ok(None);
        };
        let rel = Ctx::release(page, &project, Some(&version))?;
        let Some(md_file) = rel.metadata_file() else {
            return Ok(None);
        };
        let rel_version = rel.version.clone();
        let (md, _) = pypi::metadata_of(fetch, md_file)?;
        let facts = self.install_facts(&project, &rel_version, Some(&md))?;
        facts.write(&mut e, false);
        if file == "torch.toml" {
            let triton = md
                .requires_dist
                .iter()
                .filter_map(|d| pypi::parse_requirement(d))
                .find(|d| d.name == "triton" && install::applies(d, "x86_64"));
            if let Some(req) = triton.and_then(|t| catalog_req(&t.specifier)) {
                e.str("triton", req);
            }
        }
        Ok(Some(e))
    }
}

/// `cu124` → `12.4`, `cu118` → `11.8`, `cu130` → `13.0`.
fn cuda_of_label(label: &str) -> Option<String> {
    let n = label.strip_prefix("cu")?;
    if n.len() < 3 || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (major, minor) = n.split_at(2);
    Some(format!("{}.{}", major.trim_start_matches('0'), minor))
}

/// What [`Ctx::import_one`] read for one release of a PyPI project: the steps below turn
/// it into catalog entries, one kind of project each.
struct Pulled<'a> {
    base: &'a Catalog,
    opts: &'a PypiOptions,
    project: &'a str,
    /// The project page's URL, for errors.
    url: &'a String,
    rel: &'a Release<'a>,
    md: &'a pypi::Metadata,
    source: String,
    /// `Requires-Dist` that applies on Linux unconditionally.
    reqs: Vec<pypi::Requirement>,
    /// The version without its `+local` label.
    public: String,
    sort: Version,
}

/// The facts of one torch wheel build, for [`Pulled::torch_wheel`].
struct TorchWheel<'a> {
    variant: String,
    cuda: String,
    /// The base catalog's build of this release and variant.
    build: Option<&'a TorchBuild>,
    /// Whether the base catalog has this release's `[[release]]` entry.
    has_release: bool,
    /// Whether the wheel pins a CUDA runtime wheel.
    runtime_pinned: bool,
    /// A PyPI-default build (no `+cuXYZ` label).
    from_pypi: bool,
}

impl Pulled<'_> {
    /// The exact pin of the first requirement whose name starts with `name_prefix`.
    fn pin(&self, name_prefix: &str) -> Option<(String, String)> {
        self.reqs
            .iter()
            .find(|r| r.name.starts_with(name_prefix))
            .and_then(|r| r.exact().map(|v| (r.name.clone(), v.to_string())))
    }

    /// A torch wheel (and, for the PyPI-default build, the release entry).
    fn torch(&self, follow: &mut Vec<(String, Option<String>)>) -> Result<Vec<Entry>, ImportError> {
        let (rel, sort, base) = (self.rel, &self.sort, self.base);
        let local = rel.version.split_once('+').map(|(_, l)| l.to_string());
        if let Some(l) = local.as_deref().filter(|l| cuda_of_label(l).is_none()) {
            return Err(ImportError::Malformed {
                url: self.url.clone(),
                what: format!(
                    "torch {} is a `+{l}` build; the catalog lists CUDA builds (`+cuXYZ`)",
                    rel.version
                ),
            });
        }
        // The CUDA runtime wheel pin: `nvidia-cuda-runtime-cu12==12.4.127`, or from
        // torch 2.11 on the `cuda-toolkit[...]==13.0.2` meta-package.
        let runtime = self
            .pin("nvidia-cuda-runtime-cu")
            .or_else(|| {
                self.pin("cuda-toolkit")
                    .filter(|(n, _)| n == "cuda-toolkit")
            })
            .map(|(_, v)| v);
        let cuda = runtime
            .as_deref()
            .and_then(|v| Version::parse(v).ok())
            .map(|v| format!("{}.{}", v.major(), v.minor()))
            .or_else(|| local.as_deref().and_then(cuda_of_label));
        let variant = local
            .clone()
            .or_else(|| cuda.as_deref().map(|c| format!("cu{}", c.replace('.', ""))));
        let (Some(variant), Some(cuda)) = (variant, cuda) else {
            return Err(ImportError::Malformed {
                url: self.url.clone(),
                what: format!(
                    "torch {} pins neither `nvidia-cuda-runtime-cuXX` nor `cuda-toolkit` and has no `+cuXYZ` label: not a CUDA build",
                    rel.version
                ),
            });
        };
        let build = base
            .torch
            .iter()
            .find(|b| b.version == *sort && b.variant == variant);
        let has_release = base.torch_releases.iter().any(|r| r.version == *sort);
        // Wheels without a `+cuXYZ` label are the PyPI-default build.
        let from_pypi = local.is_none();
        let mut new = Vec::new();
        if from_pypi {
            new.push(self.torch_release(&variant));
        }
        new.push(self.torch_wheel(
            &TorchWheel {
                variant,
                cuda,
                build,
                has_release,
                runtime_pinned: runtime.is_some(),
                from_pypi,
            },
            follow,
        ));
        Ok(new)
    }

    /// The `[[release]]` entry of the PyPI-default torch build.
    fn torch_release(&self, variant: &str) -> Entry {
        let (rel, md, public, sort) = (self.rel, self.md, &self.public, &self.sort);
        let python = rel
            .python_from_tags()
            .or_else(|| md.requires_python.clone());
        let mut r = Entry::new(
            Family::Torch,
            "release",
            format!("torch {public}"),
            sort.clone(),
        );
        r.str("version", public);
        match &python {
            Some(p) => r.str("python", p),
            None => r.missing.push("python".into()),
        }
        r.str("pypi_variant", variant);
        let triton = md
            .requires_dist
            .iter()
            .filter_map(|d| pypi::parse_requirement(d))
            .find(|d| d.name == "triton" && install::applies(d, "x86_64"));
        if let Some(t) = triton {
            match catalog_req(&t.specifier) {
                Some(req) => r.str("triton", req),
                None => r.notes.push(format!(
                    "Requires-Dist: triton{} (not representable)",
                    t.specifier
                )),
            }
        }
        r.source.clone_from(&self.source);
        if let Some(rp) = &md.requires_python {
            r.notes.push(format!(
                "`python` is the cpXY tags of the Linux x86_64 wheels; Requires-Python {rp}"
            ));
        }
        r
    }

    /// The `[[wheel]]` entry of one torch build; pins of cuDNN and NCCL the base catalog
    /// lacks go to `follow`.
    fn torch_wheel(&self, t: &TorchWheel<'_>, follow: &mut Vec<(String, Option<String>)>) -> Entry {
        let (rel, public, sort, base, opts) =
            (self.rel, &self.public, &self.sort, self.base, self.opts);
        let variant = &t.variant;
        let mut w = Entry::new(
            Family::Torch,
            "wheel",
            format!("torch {public}+{variant}"),
            sort.clone(),
        );
        w.set("torch", Value::Strs(vec![public.clone()]));
        w.str("variant", &t.variant);
        w.str("cuda", &t.cuda);
        if t.from_pypi {
            // The same build, with its `+cuXYZ` label, on PyTorch's variant index:
            // where a lock that pins the label installs it from.
            let pytorch = format!("https://download.pytorch.org/whl/{variant}");
            match t.build {
                Some(b) => w.str("index_url", &b.index_url),
                None => {
                    w.str("index_url", &pytorch);
                    w.notes.push(format!(
                        "`index_url` is PyTorch's index for the `+{variant}` build of this PyPI wheel"
                    ));
                }
            }
        } else {
            w.str("index_url", opts.recorded());
        }
        w.not_derived(
            "arch_list",
            "TORCH_CUDA_ARCH_LIST is compiled into the binaries, not in the metadata; an empty list is never picked",
            t.build
                .filter(|b| !b.arch_list.is_empty())
                .map(|b| {
                    (
                        Value::Strs(crate::core::arch::torch_list(&b.arch_list)),
                        b.origin.location(),
                    )
                }),
            false,
        );
        if !w.fields.iter().any(|(k, _)| *k == "arch_list") {
            w.set("arch_list", Value::Strs(Vec::new()));
        }
        for (field, prefix, lib) in [
            ("cudnn", "nvidia-cudnn-cu", Some(true)),
            ("nccl", "nvidia-nccl-cu", Some(false)),
            ("cusparselt", "nvidia-cusparselt-cu", None),
        ] {
            if let Some((name, v)) = self.pin(prefix) {
                w.str(field, &v);
                if let (Some(is_cudnn), true) = (lib, opts.follow_pins) {
                    let list = if is_cudnn { &base.cudnn } else { &base.nccl };
                    let known =
                        Version::parse(&v).is_ok_and(|pv| list.iter().any(|l| l.version == pv));
                    if !known {
                        follow.push((name, Some(v)));
                    }
                }
            }
        }
        if !t.from_pypi {
            if let Some(p) = rel.python_from_tags() {
                w.str("python", p);
            }
        }
        let rows = rel.file_rows(opts.recorded(), public, true);
        w.set("files", Value::Files(rows));
        if !t.runtime_pinned {
            w.notes.push(format!(
                "`cuda` from the `+{variant}` label (the wheel pins no CUDA runtime wheel)"
            ));
        }
        if !t.from_pypi && !t.has_release {
            w.missing.push(format!(
                "the `[[release]]` entry of torch {public} (import `torch=={public}` from {PYPI} first)"
            ));
        }
        w.source = self.source.clone();
        w
    }

    /// A vLLM release; its torch pin goes to `follow` when the base catalog lacks it.
    fn vllm(&self, follow: &mut Vec<(String, Option<String>)>) -> Entry {
        let (rel, md, public, sort, base, opts) = (
            self.rel,
            self.md,
            &self.public,
            &self.sort,
            self.base,
            self.opts,
        );
        let mut e = Entry::new(
            Family::Vllm,
            "release",
            format!("vllm {public}"),
            sort.clone(),
        );
        e.str("version", public);
        let others: Vec<String> = self
            .reqs
            .iter()
            .filter(|r| r.name != "torch" && r.exact().is_some())
            .map(|r| format!("{}{}", r.name, r.specifier))
            .collect();
        if !others.is_empty() {
            e.notes
                .push(format!("other exact pins: {}", others.join(", ")));
        }
        let torch = self.reqs.iter().find(|r| r.name == "torch");
        match torch.and_then(|r| r.exact()) {
            Some(t) => {
                e.str("torch", t);
                let known = Version::parse(t)
                    .is_ok_and(|tv| base.torch_releases.iter().any(|r| r.version == tv));
                if !known && opts.follow_pins {
                    follow.push(("torch".to_string(), Some(t.to_string())));
                }
            }
            None => e.missing.push(format!(
                "torch (Requires-Dist has `torch{}`, not an exact pin)",
                torch.map(|r| r.specifier.as_str()).unwrap_or("")
            )),
        }
        let known = base.vllm.iter().find(|v| v.version == *sort);
        e.not_derived(
            "cuda",
            "the CUDA of vLLM's PyPI wheel is in its build, not its metadata",
            known.map(|k| (Value::Str(k.cuda.to_string()), k.origin.location())),
            true,
        );
        match md.requires_python.as_deref().and_then(catalog_req) {
            Some(p) => e.str("python", p),
            None => e.missing.push("python (no usable Requires-Python)".into()),
        }
        e.not_derived(
            "min_cc",
            "the lowest compute capability is stated in vLLM's docs, not its metadata",
            known.and_then(|k| {
                k.min_cc
                    .map(|c| (Value::Str(c.to_string()), k.origin.location()))
            }),
            false,
        );
        e.set(
            "files",
            Value::Files(rel.file_rows(opts.recorded(), public, false)),
        );
        e.source = self.source.clone();
        e
    }

    /// A DeepSpeed release.
    fn deepspeed(&self) -> Entry {
        let (rel, md, public, sort, base) =
            (self.rel, self.md, &self.public, &self.sort, self.base);
        let mut e = Entry::new(
            Family::Deepspeed,
            "release",
            format!("deepspeed {public}"),
            sort.clone(),
        );
        e.str("version", public);
        let torch = self.reqs.iter().find(|r| r.name == "torch");
        match torch.map(|r| r.specifier.as_str()) {
            Some("") => e.notes.push("Requires-Dist: torch (no version)".into()),
            Some(s) => match catalog_req(s) {
                Some(req) => e.str("torch", req),
                None => e
                    .notes
                    .push(format!("Requires-Dist: torch{s} (not representable)")),
            },
            None => e.notes.push("no torch in Requires-Dist".into()),
        }
        match md.requires_python.as_deref() {
            Some(p) => match catalog_req(p) {
                Some(req) => e.str("python", req),
                None => e
                    .notes
                    .push(format!("Requires-Python {p} (not representable)")),
            },
            None => e.notes.push("no Requires-Python".into()),
        }
        let known = base.deepspeed.iter().find(|d| d.version == *sort);
        e.not_derived(
            "cuda_mismatch_ok",
            "op_builder/builder.py's cuda_minor_mismatch_ok is source code, not metadata",
            known.filter(|k| !k.cuda_mismatch_ok.is_empty()).map(|k| {
                (
                    Value::Strs(k.cuda_mismatch_ok.iter().map(ToString::to_string).collect()),
                    k.origin.location(),
                )
            }),
            false,
        );
        for (f, _) in &rel.files {
            if let Some(h) = &f.sha256 {
                e.notes.push(format!("{} sha256 {h}", f.filename));
            }
        }
        e.source = self.source.clone();
        e
    }

    /// An extra's release from one distribution (`cupy-cuda12x`).
    fn extra(&self, component: Component) -> Entry {
        let (rel, md, public, sort, base, opts) = (
            self.rel,
            self.md,
            &self.public,
            &self.sort,
            self.base,
            self.opts,
        );
        let mut e = Entry::new(
            Family::Extra,
            "extra",
            format!(
                "{} {public} ({})",
                component.name(),
                pypi::normalize(self.project)
            ),
            sort.clone(),
        );
        let known = base.extras.iter().find(|x| {
            x.component == component
                && x.version == *sort
                && pypi::normalize(&x.pypi_name) == pypi::normalize(self.project)
        });
        let pypi_name = base
            .extras
            .iter()
            .find(|x| pypi::normalize(&x.pypi_name) == pypi::normalize(self.project))
            .map_or_else(|| pypi::normalize(self.project), |x| x.pypi_name.clone());
        e.str("name", component.name());
        e.str("version", public);
        e.str("layer", component.layer().name());
        let torch = self.reqs.iter().find(|r| r.name == "torch");
        if let Some(s) = torch
            .map(|r| r.specifier.as_str())
            .filter(|s| !s.is_empty())
        {
            match catalog_req(s) {
                Some(req) => e.str("torch", req),
                None => e
                    .notes
                    .push(format!("Requires-Dist: torch{s} (not representable)")),
            }
        }
        e.not_derived(
            "cuda_majors",
            "the CUDA majors of the binaries are in the build, not the metadata",
            known.and_then(|k| {
                k.cuda_majors
                    .clone()
                    .map(|m| (Value::Ints(m), k.origin.location()))
            }),
            false,
        );
        e.not_derived(
            "min_cc",
            "a lowest compute capability is stated in docs, not metadata",
            known.and_then(|k| {
                k.min_cc
                    .map(|c| (Value::Str(c.to_string()), k.origin.location()))
            }),
            false,
        );
        if let Some(p) = md.requires_python.as_deref() {
            match catalog_req(p) {
                Some(req) => e.str("python", req),
                None => e
                    .notes
                    .push(format!("Requires-Python {p} (not representable)")),
            }
        }
        e.str("pypi_name", pypi_name);
        e.str("index", opts.recorded());
        e.not_derived(
            "pypi_variant",
            "the CUDA variant of the wheel on the index is in its build, not its metadata",
            known.and_then(|k| {
                k.pypi_variant
                    .clone()
                    .map(|v| (Value::Str(v), k.origin.location()))
            }),
            false,
        );
        e.set(
            "files",
            Value::Files(rel.file_rows(opts.recorded(), public, false)),
        );
        // A pure-Python wheel has no CUDA build: nothing to derive there.
        let wheels = rel.linux_wheels();
        let pure = !wheels.is_empty()
            && wheels
                .iter()
                .all(|(_, n)| n.wheel.as_ref().is_some_and(|w| w.platform == "any"));
        if pure {
            e.not_derived.retain(|n| {
                n.kept_from.is_some()
                    || !matches!(n.field, "cuda_majors" | "min_cc" | "pypi_variant")
            });
        }
        e.source = self.source.clone();
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_incomplete_entry_is_written_commented_out() {
        let mut e = Entry::new(
            Family::Vllm,
            "release",
            "vllm 9.9.9".into(),
            Version::parse("9.9.9").unwrap(),
        );
        e.str("version", "9.9.9");
        e.str("torch", "2.99.0");
        e.not_derived("cuda", "not in the metadata", None, true);
        e.source = "https://pypi.org/simple/vllm/ (…), read 2026-11-25".into();
        assert_eq!(
            write_entry(&e),
            "# INCOMPLETE: needs `cuda` (not derivable from upstream metadata); fill in and uncomment\n\
             # [[release]]\n\
             # version = \"9.9.9\"\n\
             # torch = \"2.99.0\"\n\
             # source = \"https://pypi.org/simple/vllm/ (…), read 2026-11-25\"\n\
             # note = \"`cuda` not derived (not in the metadata)\"\n"
        );
        let imp = Import {
            entries: vec![e],
            command: "catalog import pypi".into(),
            origin: PYPI.into(),
            file_suffix: String::new(),
            ..Import::default()
        };
        assert_eq!(
            imp.summary(),
            "vllm.toml: vllm 9.9.9 (commented out)\n\
             \n\
             not derived from upstream metadata:\n  \
             vllm 9.9.9 `cuda`: not in the metadata (left out)\n\
             \n\
             incomplete (written commented out: fill in the fields and uncomment):\n  \
             vllm 9.9.9: needs cuda\n"
        );
    }

    #[test]
    fn installability_lines_are_replaced_in_place() {
        let block = [
            "[[release]]",
            "version = \"2.9.0\"",
            "python = \">=3.10\"",
            "glibc_floor = [",
            "  { cpu = \"x86_64\", glibc = \"2.17\", by = \"old\", source = \"old\" },",
            "]",
            "triton = \"==3.4.0\"",
            "source = \"https://pypi.org/project/torch/2.9.0/\"",
            "note = \"kept\"",
        ];
        let mut e = Entry::new(
            Family::Torch,
            "release",
            "2.9.0".into(),
            Version::parse("2.9.0").unwrap(),
        );
        e.set(
            "glibc_floor",
            Value::Tables(vec![vec![
                ("cpu", "x86_64".into()),
                ("glibc", "2.28".into()),
                ("by", "new".into()),
                ("source", "https://pypi.org/simple/torch/".into()),
            ]]),
        );
        e.str("triton", "==3.5.0");
        e.str("python", "ignored: not an owned key");
        let out = patch_block(&block, owned_keys("torch.toml"), &e);
        assert_eq!(
            out,
            "[[release]]\n\
             version = \"2.9.0\"\n\
             python = \">=3.10\"\n\
             glibc_floor = [\n  { cpu = \"x86_64\", glibc = \"2.28\", by = \"new\", source = \"https://pypi.org/simple/torch/\" },\n]\n\
             triton = \"==3.5.0\"\n\
             source = \"https://pypi.org/project/torch/2.9.0/\"\n\
             note = \"kept\"\n"
        );
        // Facts that no longer hold are removed (a release no longer yanked).
        let cudnn = [
            "[[release]]",
            "version = \"9.1.0.70\"",
            "yanked = { observed = \"2026-01-01\", source = \"x\" }",
            "source = \"y\"",
        ];
        let none = Entry::new(
            Family::Cudnn,
            "release",
            "x".into(),
            Version::parse("1").unwrap(),
        );
        assert_eq!(
            patch_block(&cudnn, owned_keys("cudnn.toml"), &none),
            "[[release]]\nversion = \"9.1.0.70\"\nsource = \"y\"\n"
        );
    }

    #[test]
    fn small_helpers() {
        assert_eq!(cuda_of_label("cu124").as_deref(), Some("12.4"));
        assert_eq!(cuda_of_label("cu130").as_deref(), Some("13.0"));
        assert_eq!(cuda_of_label("cpu"), None);
        assert_eq!(suffix_of("https://pypi.org/simple/"), "");
        assert_eq!(
            suffix_of("https://download.pytorch.org/whl/cu124"),
            "-cu124"
        );
        assert_eq!(catalog_req(">=2.0.0,<3").as_deref(), Some(">=2.0.0, <3"));
        // PEP 440 `~=` is a requirement gpustack reads (`>=2.0, 2`); `*` wildcards are
        // not kept from metadata.
        assert_eq!(catalog_req("~=2.0").as_deref(), Some("~=2.0"));
        assert_eq!(catalog_req("==2.*"), None);
        assert_eq!(quote("a\"b\\c\nd"), r#""a\"b\\c\nd""#);
        assert!(check_date("2026-11-25").is_ok() && check_date("25.11.2026").is_err());
        assert_eq!(today().len(), 10);
    }
}
