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
mod installability;
pub mod outdated;
mod overlay;
mod pypi;
mod pypi_entries;
mod pypi_import;
pub mod redist;

use std::collections::BTreeMap;
use std::fmt;

pub use http::{Fetch, FetchError, Http, Request, Response};
pub use installability::{refresh_installability, Refresh};
pub use pypi_import::{import_pypi, PypiOptions};

use overlay::{write_file, write_value};

use crate::core::version::Version;
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

#[cfg(test)]
mod tests;
