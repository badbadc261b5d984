//! `gpustack probe`: what a node has, read from `nvidia-smi`, as a `[hardware]` table.
//!
//! [`parse`] reads either of two outputs of `nvidia-smi` and tells them apart by their
//! first non-blank characters:
//!
//! * **CSV** from `nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total
//!   --format=csv` ([`NVIDIA_SMI_ARGS`]), with or without the header line (`noheader`) and
//!   with or without units (`nounits`). With a header, columns are found by name, so any
//!   `--query-gpu` field list that includes `name` works (extra columns are ignored), and
//!   R610 drivers' `kmd_version` stands in for `driver_version`. Without a header the
//!   columns must be those of [`NVIDIA_SMI_ARGS`] (4 values) or of
//!   [`NVIDIA_SMI_ARGS_NO_CC`] (3 values: drivers before `compute_cap` existed, such as
//!   R470, answer `Field "compute_cap" is not a valid field to query.`).
//! * **XML** from `nvidia-smi -q -x` (root element `<nvidia_smi_log>`): the driver from
//!   `driver_version` (or `kmd_version`), and per `<gpu>` its `product_name` and
//!   `fb_memory_usage/total`. The XML has no compute capability, so a GPU probed from XML
//!   has none ([`ProbedGpu::cc`] is `None`).
//!
//! Each GPU name is then mapped to a catalog GPU by [`match_name`]: an exact entry of a
//! catalog GPU's `smi_names` first, then the same comparison after [`normalize`] (case,
//! runs of white space, a leading `NVIDIA `), then the catalog's GPU name table (the names
//! the spec accepts). A name no catalog GPU goes by is an error that names the string and
//! the closest catalog GPUs; when nvidia-smi reported the compute capability, it gives the
//! `archs = ["sm_XY"]` line that builds for the GPU without a catalog entry, and the
//! overlay recipe as the alternative.
//! When nvidia-smi reports a compute capability that differs from the catalog GPU's, the
//! mapping is wrong and that is an error too. GPUs of different models on one node are
//! fine and are all listed; different drivers are not (one node runs one kernel driver,
//! so such input is several nodes' outputs pasted together).
//!
//! [`Probe::hardware_toml`] writes the result as the `[hardware]` table of a spec, which
//! `gpustack check --hardware` also reads.
//!
//! [`run_nvidia_smi`] is the one function here that starts a process, as [`crate::emit`] is
//! the one module that writes files; everything else is pure.
//!
//! Sources of the formats: the `--query-gpu` field list and CSV layout as recorded by the
//! real captures in `utkuozdemir/nvidia_gpu_exporter` (`internal/captures/`), the XML as
//! in Checkmk's and netdata's test data; `fixtures/probe/README.md` lists each sample.

use std::fmt;
use std::fmt::Write as _;

use crate::catalog::{Catalog, Gpu};
use crate::core::arch::Cc;
use crate::core::version::Version;
use crate::error::{Diagnostic, Error, Location, Stage};

/// The arguments `gpustack probe` gives `nvidia-smi`: name, driver, compute capability
/// and memory of every GPU, as CSV with a header.
pub const NVIDIA_SMI_ARGS: [&str; 2] = [
    "--query-gpu=name,driver_version,compute_cap,memory.total",
    "--format=csv",
];

/// The same query without `compute_cap`, for drivers that do not know the field (R470
/// answers `Field "compute_cap" is not a valid field to query.`).
pub const NVIDIA_SMI_ARGS_NO_CC: [&str; 2] = [
    "--query-gpu=name,driver_version,memory.total",
    "--format=csv",
];

/// The largest input [`parse`] reads: `nvidia-smi -q -x` is about 25 KiB per GPU.
const MAX_INPUT: usize = 16 << 20;

/// Which output of `nvidia-smi` a probe was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `--query-gpu=… --format=csv[,noheader][,nounits]`.
    Csv,
    /// `-q -x`.
    Xml,
}

impl Format {
    /// `CSV` or `XML`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Csv => "CSV",
            Format::Xml => "XML",
        }
    }
}

/// One model of GPU found on the node, with how many of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbedGpu {
    /// The catalog id the name maps to (`h100`).
    pub id: String,
    /// The name as nvidia-smi printed it (`NVIDIA H100 80GB HBM3`).
    pub smi_name: String,
    /// The compute capability nvidia-smi reported, when it did (CSV with `compute_cap`
    /// only). It always equals the catalog GPU's: a difference is an error.
    pub cc: Option<Cc>,
    /// `memory.total` in MiB, when reported (`[N/A]` on unified-memory systems).
    pub memory_mib: Option<u64>,
    /// How many GPUs with this name, compute capability and memory the node has.
    pub count: usize,
}

/// What `nvidia-smi` says a node has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    /// The output it was read from.
    pub format: Format,
    /// The installed driver, when the output has it (a CSV query may leave it out).
    pub driver: Option<Version>,
    /// The GPUs, grouped, in the order nvidia-smi first listed each group.
    pub gpus: Vec<ProbedGpu>,
}

impl Probe {
    /// The catalog ids of the GPUs, each once, in order.
    pub fn ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = Vec::new();
        for g in &self.gpus {
            if !ids.contains(&g.id.as_str()) {
                ids.push(&g.id);
            }
        }
        ids
    }

    /// The number of GPUs.
    pub fn gpu_count(&self) -> usize {
        self.gpus.iter().map(|g| g.count).sum()
    }

    /// The `[hardware]` table of a spec for this node, with comment lines that show how
    /// each name was mapped. The same probe always gives the same text.
    ///
    /// ```
    /// use gpustack::{probe, Catalog, Spec};
    ///
    /// let catalog = Catalog::stock()?;
    /// let csv = "name, driver_version, compute_cap, memory.total [MiB]\n\
    ///            NVIDIA L40S, 595.80, 8.9, 46068 MiB\n";
    /// let probe = probe::parse("gpus.csv", csv, &catalog)?;
    /// let toml = probe.hardware_toml();
    /// assert!(toml.contains("gpus = [\"l40s\"]\ndriver = \"595.80\"\n"));
    ///
    /// let spec = format!("[stack]\nname = \"node\"\n{toml}[components]\ncuda = \"*\"\n");
    /// let spec = Spec::parse("gpustack.toml", &spec, &catalog)?;
    /// assert_eq!(spec.gpus, ["l40s"]);
    /// # Ok::<(), gpustack::Error>(())
    /// ```
    pub fn hardware_toml(&self) -> String {
        let mut out = String::new();
        let n = self.gpu_count();
        let _ = writeln!(
            out,
            "# `gpustack probe` read {n} GPU{} from nvidia-smi's {} output:",
            if n == 1 { "" } else { "s" },
            self.format.name()
        );
        for g in &self.gpus {
            let mut facts = Vec::new();
            if let Some(cc) = g.cc {
                facts.push(format!("compute capability {cc}"));
            }
            if let Some(m) = g.memory_mib {
                facts.push(format!("{m} MiB"));
            }
            let facts = if facts.is_empty() {
                String::new()
            } else {
                format!(" ({})", facts.join(", "))
            };
            let _ = writeln!(
                out,
                "#   {} x {}{facts} -> {}",
                g.count,
                g.smi_name.escape_debug(),
                g.id
            );
        }
        if self.driver.is_none() {
            out.push_str(
                "# the output has no driver version: add `driver = \"…\"` with the driver the nodes run, or leave it out and gpustack picks one\n",
            );
        }
        out.push_str("[hardware]\n");
        let ids: Vec<String> = self.ids().into_iter().map(toml_string).collect();
        let _ = writeln!(out, "gpus = [{}]", ids.join(", "));
        if let Some(d) = &self.driver {
            let _ = writeln!(out, "driver = {}", toml_string(d.as_str()));
        }
        out
    }

    /// The probe as JSON, for `--format json`: `{"format", "driver", "gpus": [{"id",
    /// "smi_name", "count", "compute_capability", "memory_mib"}]}`; absent values are
    /// `null`. Keys are sorted.
    pub fn to_json(&self) -> serde_json::Value {
        let gpus: Vec<serde_json::Value> = self
            .gpus
            .iter()
            .map(|g| {
                serde_json::json!({
                    "id": g.id,
                    "smi_name": g.smi_name,
                    "count": g.count,
                    "compute_capability": g.cc.map(|c| c.to_string()),
                    "memory_mib": g.memory_mib,
                })
            })
            .collect();
        serde_json::json!({
            "format": self.format.name().to_ascii_lowercase(),
            "driver": self.driver.as_ref().map(Version::as_str),
            "gpus": gpus,
        })
    }
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// How a name printed by nvidia-smi matched the catalog.
#[derive(Debug)]
pub enum Match<'c> {
    /// Listed verbatim in the GPU's `smi_names`.
    Exact(&'c Gpu),
    /// Equal to one of its `smi_names` after [`normalize`], or to another of its names
    /// in the catalog's GPU name table ([`Catalog::gpu`]).
    Normalized(&'c Gpu),
    /// Several catalog GPUs list it (an overlay mistake).
    Ambiguous(Vec<&'c Gpu>),
    /// No catalog GPU lists it.
    Unknown,
}

/// The comparison form of a GPU name: ASCII lowercase, runs of white space as one space,
/// trimmed, and without a leading `nvidia `. Older drivers print GeForce names without
/// `NVIDIA ` (`GeForce GTX 960M` with driver 410.72, `GeForce 410M` with 390.157, where
/// recent ones print `NVIDIA GeForce …`), and hand-copied names differ in case and
/// spacing; nothing else is ignored, so `A100-SXM4-40GB` and `A100-SXM4-80GB` stay
/// different.
///
/// ```
/// assert_eq!(gpustack::probe::normalize("  NVIDIA  GeForce RTX 4090 "), "geforce rtx 4090");
/// assert_eq!(gpustack::probe::normalize("Tesla T4"), "tesla t4");
/// ```
pub fn normalize(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    let joined = lower.split_whitespace().collect::<Vec<_>>().join(" ");
    match joined.strip_prefix("nvidia ") {
        Some(rest) => rest.to_string(),
        None => joined,
    }
}

/// Maps a name printed by nvidia-smi to a catalog GPU: an exact `smi_names` entry first,
/// then equality after [`normalize`], then the catalog's GPU name table
/// ([`Catalog::gpu`]: marketing names, names without `NVIDIA ` or memory tokens), the
/// same names the spec and `init` accept. A name none of these give is [`Match::Unknown`].
///
/// ```
/// use gpustack::{probe, Catalog};
/// let catalog = Catalog::stock()?;
/// assert!(matches!(probe::match_name(&catalog, "NVIDIA H100 80GB HBM3"), probe::Match::Exact(g) if g.id == "h100"));
/// assert!(matches!(probe::match_name(&catalog, "nvidia h100 80gb  hbm3"), probe::Match::Normalized(g) if g.id == "h100"));
/// assert!(matches!(probe::match_name(&catalog, "NVIDIA GeForce GT 710"), probe::Match::Unknown));
/// # Ok::<(), gpustack::Error>(())
/// ```
pub fn match_name<'c>(catalog: &'c Catalog, smi_name: &str) -> Match<'c> {
    let one = |found: Vec<&'c Gpu>, wrap: fn(&'c Gpu) -> Match<'c>| match found.len() {
        0 => None,
        1 => Some(wrap(found[0])),
        _ => Some(Match::Ambiguous(found)),
    };
    let exact: Vec<&Gpu> = catalog
        .gpus
        .iter()
        .filter(|g| g.smi_names.iter().any(|s| s == smi_name))
        .collect();
    if let Some(m) = one(exact, Match::Exact) {
        return m;
    }
    let key = normalize(smi_name);
    let normalized: Vec<&Gpu> = catalog
        .gpus
        .iter()
        .filter(|g| g.smi_names.iter().any(|s| normalize(s) == key))
        .collect();
    if let Some(m) = one(normalized, Match::Normalized) {
        return m;
    }
    // The catalog's GPU name table: marketing names, and names without memory tokens
    // (`NVIDIA A100-SXM4-40GB` is the marketing name `NVIDIA A100 SXM4 40GB`).
    catalog
        .gpu(smi_name)
        .map_or(Match::Unknown, Match::Normalized)
}

/// Guesses which output `text` is: [`Format::Xml`] when it starts with `<`,
/// [`Format::Csv`] when its first non-blank line has a comma and is not a TOML comment or
/// table header, `None` otherwise (for example the `[hardware]` TOML that
/// [`Probe::hardware_toml`] writes). `check --hardware` uses this to accept either.
///
/// ```
/// use gpustack::probe::{sniff, Format};
/// assert_eq!(sniff("name, driver_version\nNVIDIA L4, 550.54.15\n"), Some(Format::Csv));
/// assert_eq!(sniff("<?xml version=\"1.0\" ?>\n<nvidia_smi_log>"), Some(Format::Xml));
/// assert_eq!(sniff("# probed\n[hardware]\ngpus = [\"h100\", \"l4\"]\n"), None);
/// ```
pub fn sniff(text: &str) -> Option<Format> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let first = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    if first.starts_with('<') {
        Some(Format::Xml)
    } else if first.contains(',') && !first.starts_with('#') && !first.starts_with('[') {
        Some(Format::Csv)
    } else {
        None
    }
}

/// Reads nvidia-smi output (`file` is used in messages only) and maps its GPUs to
/// catalog ids. See the [module documentation](self) for the formats and the rules.
///
/// Input errors are [`Error::Invalid`] with `file:line:column` locations: every unknown
/// GPU, malformed row or mismatch is reported, not only the first.
///
/// ```
/// use gpustack::{probe, Catalog};
///
/// let catalog = Catalog::stock()?;
/// let csv = "Tesla T4, 580.82.07, 15360 MiB\n"; // noheader, without compute_cap
/// let p = probe::parse("t4.csv", csv, &catalog)?;
/// assert_eq!(p.ids(), ["t4"]);
/// assert_eq!(p.driver.unwrap().to_string(), "580.82.07");
///
/// let err = probe::parse("gt710.csv", "NVIDIA GeForce GT 710, 470.256.02, 2048 MiB\n", &catalog)
///     .unwrap_err();
/// assert!(err.to_string().starts_with("error: unknown GPU `NVIDIA GeForce GT 710`"));
/// # Ok::<(), gpustack::Error>(())
/// ```
pub fn parse(file: &str, text: &str, catalog: &Catalog) -> Result<Probe, Error> {
    if text.len() > MAX_INPUT {
        return Err(Diagnostic::new(
            Stage::Usage,
            format!("`{file}` is larger than 16 MiB"),
        )
        .at(Location::file(file))
        .hint("nvidia-smi output for one node is a few KiB (CSV) to a few hundred KiB (XML); is this the right file?")
        .into());
    }
    let start = if text.starts_with('\u{feff}') { 3 } else { 0 };
    let body = &text[start..];
    let leading = body.len() - body.trim_start().len();
    let (format, rows, xml_driver) = if body.trim_start().starts_with('<') {
        let (driver, rows) = parse_xml(file, text, start + leading)?;
        (Format::Xml, rows, driver)
    } else {
        (Format::Csv, parse_csv(file, text, start)?, None)
    };
    resolve(file, text, format, rows, xml_driver, catalog)
}

/// One GPU as read, before mapping.
struct Row {
    name: String,
    /// Byte offset of the name in the input.
    name_at: usize,
    /// The driver and the byte offset of its value.
    driver: Option<(Version, usize)>,
    /// The compute capability and the byte offset of its value.
    cc: Option<(Cc, usize)>,
    memory_mib: Option<u64>,
}

fn resolve(
    file: &str,
    text: &str,
    format: Format,
    rows: Vec<Row>,
    xml_driver: Option<Version>,
    catalog: &Catalog,
) -> Result<Probe, Error> {
    let mut diags = Vec::new();
    let mut reported: Vec<&str> = Vec::new();
    let mut gpus: Vec<ProbedGpu> = Vec::new();
    for row in &rows {
        let gpu = match match_name(catalog, &row.name) {
            Match::Exact(g) | Match::Normalized(g) => g,
            Match::Ambiguous(found) => {
                if !reported.contains(&row.name.as_str()) {
                    reported.push(&row.name);
                    diags.push(ambiguous(file, text, row, &found));
                }
                continue;
            }
            Match::Unknown => {
                if !reported.contains(&row.name.as_str()) {
                    reported.push(&row.name);
                    diags.push(unknown(file, text, row, catalog));
                }
                continue;
            }
        };
        if let Some((cc, at)) = row.cc {
            if cc != gpu.cc {
                diags.push(
                    Diagnostic::new(
                        Stage::Usage,
                        format!(
                            "nvidia-smi reports compute capability {cc} for `{}`, but the catalog GPU `{}` it maps to has {}",
                            row.name.escape_debug(),
                            gpu.id,
                            gpu.cc
                        ),
                    )
                    .at_offset(file, text, at)
                    .hint(format!(
                        "the name is mapped to the wrong GPU: check the `smi_names` of `{}` ({}) and correct it in a catalog overlay",
                        gpu.id,
                        gpu.origin.location()
                    )),
                );
                continue;
            }
        }
        let cc = row.cc.map(|(c, _)| c);
        match gpus
            .iter_mut()
            .find(|g| g.smi_name == row.name && g.cc == cc && g.memory_mib == row.memory_mib)
        {
            Some(g) => g.count += 1,
            None => gpus.push(ProbedGpu {
                id: gpu.id.clone(),
                smi_name: row.name.clone(),
                cc,
                memory_mib: row.memory_mib,
                count: 1,
            }),
        }
    }

    let mut driver = xml_driver;
    let mut first: Option<&(Version, usize)> = None;
    for row in &rows {
        let Some(d) = &row.driver else { continue };
        match first {
            None => first = Some(d),
            Some(f) if f.0.as_str() != d.0.as_str() => {
                let line = Location::at_offset(file, text, f.1).line;
                diags.push(
                    Diagnostic::new(
                        Stage::Usage,
                        format!(
                            "GPUs report different drivers: `{}` (line {line}) and `{}`",
                            f.0, d.0
                        ),
                    )
                    .at_offset(file, text, d.1)
                    .hint("a node runs one kernel driver, so this looks like the output of several nodes in one file: probe each node on its own"),
                );
                break;
            }
            Some(_) => {}
        }
    }
    if driver.is_none() {
        driver = first.map(|(v, _)| v.clone());
    }

    if !diags.is_empty() {
        return Err(Error::Invalid(diags));
    }
    if gpus.is_empty() {
        return Err(
            Diagnostic::new(Stage::Usage, format!("`{file}` lists no GPU"))
                .at(Location::file(file))
                .hint(format!(
                "run `nvidia-smi {}` on the node; if it lists no GPU, the driver does not see any",
                NVIDIA_SMI_ARGS.join(" ")
            ))
                .into(),
        );
    }
    Ok(Probe {
        format,
        driver,
        gpus,
    })
}

fn unknown(file: &str, text: &str, row: &Row, catalog: &Catalog) -> Diagnostic {
    let mut d = Diagnostic::new(
        Stage::Usage,
        format!(
            "unknown GPU `{}`: no catalog GPU goes by this name",
            row.name.escape_debug()
        ),
    )
    .at_offset(file, text, row.name_at);
    let close = close_gpus(catalog, &row.name, row.cc.map(|(cc, _)| cc));
    if !close.is_empty() {
        let list: Vec<String> = close
            .iter()
            .map(|g| match g.smi_names.first() {
                Some(s) => format!("`{}` ({s})", g.id),
                None => format!("`{}` ({})", g.id, g.name),
            })
            .collect();
        d = d.hint(format!("close catalog GPUs: {}", list.join(", ")));
    }
    if let Some((cc, _)) = row.cc {
        d = d.hint(format!(
            "nvidia-smi reports compute capability {cc}: the stack can build for it without a catalog entry, with this line under `[hardware]` in place of `gpus`:\n\n    archs = [\"{}\"]",
            crate::core::arch::Target::sass(cc)
        ));
        return d.hint("or, to name the GPU itself: if it is a catalog GPU under another name, copy that `[[gpu]]` entry into a catalog overlay and add this name to its `smi_names`; otherwise add a `[[gpu]]` entry for it there (see the catalog chapter's overlays); `gpustack catalog show gpu` lists the GPUs");
    }
    d.hint("if it is a catalog GPU under another name, copy that `[[gpu]]` entry into a catalog overlay and add this name to its `smi_names`; otherwise add a `[[gpu]]` entry for it there (see the catalog chapter's overlays); `gpustack catalog show gpu` lists the GPUs")
}

fn ambiguous(file: &str, text: &str, row: &Row, found: &[&Gpu]) -> Diagnostic {
    let list: Vec<String> = found
        .iter()
        .map(|g| format!("`{}` ({})", g.id, g.origin.location()))
        .collect();
    Diagnostic::new(
        Stage::Usage,
        format!(
            "GPU name `{}` is listed in the `smi_names` of several catalog GPUs: {}",
            row.name.escape_debug(),
            list.join(", ")
        ),
    )
    .at_offset(file, text, row.name_at)
    .hint("a name printed by nvidia-smi must identify one GPU: remove it from all but one entry")
}

/// Up to three catalog GPUs whose names are within a third of the name's length in edit
/// distance (after [`normalize`]), closest first; with a reported compute capability, only
/// those of its architecture family (a GPU of compute capability 12.0 is no RTX 3090).
fn close_gpus<'c>(catalog: &'c Catalog, name: &str, cc: Option<Cc>) -> Vec<&'c Gpu> {
    let key = normalize(name);
    let limit = 2.max(key.chars().count() / 3);
    let family: Option<Vec<&str>> = cc.map(|cc| {
        catalog
            .gpus
            .iter()
            .filter(|g| g.cc.major == cc.major)
            .map(|g| g.arch.as_str())
            .collect()
    });
    let mut scored: Vec<(usize, &Gpu)> = catalog
        .gpus
        .iter()
        .filter(|g| {
            family
                .as_ref()
                .is_none_or(|f| f.is_empty() || f.contains(&g.arch.as_str()))
        })
        .filter_map(|g| {
            g.smi_names
                .iter()
                .chain(std::iter::once(&g.name))
                .map(|s| edit_distance(&key, &normalize(s)))
                .min()
                .filter(|d| *d <= limit)
                .map(|d| (d, g))
        })
        .collect();
    scored.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.id.cmp(&b.1.id)));
    scored.into_iter().take(3).map(|(_, g)| g).collect()
}

use crate::core::names::levenshtein as edit_distance;

// ---------------------------------------------------------------------------------------
// CSV

/// The columns a CSV row is read from.
struct Columns {
    count: usize,
    name: usize,
    driver: Option<usize>,
    cc: Option<usize>,
    memory: Option<usize>,
}

impl Columns {
    /// The columns of [`NVIDIA_SMI_ARGS`] (4) or [`NVIDIA_SMI_ARGS_NO_CC`] (3).
    fn fixed(count: usize) -> Option<Columns> {
        match count {
            4 => Some(Columns {
                count,
                name: 0,
                driver: Some(1),
                cc: Some(2),
                memory: Some(3),
            }),
            3 => Some(Columns {
                count,
                name: 0,
                driver: Some(1),
                cc: None,
                memory: Some(2),
            }),
            _ => None,
        }
    }
}

/// The field name of a header cell: `memory.total [MiB]` is `memory.total`.
fn field_name(cell: &str) -> &str {
    cell.split_once(" [").map_or(cell, |(f, _)| f).trim()
}

fn is_header(cells: &[(usize, &str)]) -> bool {
    !cells.is_empty()
        && cells.iter().all(|(_, c)| {
            let f = field_name(c);
            let mut chars = f.chars();
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        })
}

/// The comma-separated cells of a line, trimmed, with their byte offsets in the input.
/// nvidia-smi does not quote cells; GPU names contain no commas.
fn cells(line: &str, line_at: usize) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut pos = 0;
    for part in line.split(',') {
        let lead = part.len() - part.trim_start().len();
        out.push((line_at + pos + lead, part.trim()));
        pos += part.len() + 1;
    }
    out
}

/// The lines of `text` from byte `start`, without line ends (`\n` or `\r\n`), with the
/// byte offset of each.
fn lines_at(text: &str, start: usize) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut at = start;
    for raw in text[start..].split_inclusive('\n') {
        let line = raw.strip_suffix('\n').unwrap_or(raw);
        let line = line.strip_suffix('\r').unwrap_or(line);
        out.push((at, line));
        at += raw.len();
    }
    out
}

fn parse_csv(file: &str, text: &str, start: usize) -> Result<Vec<Row>, Error> {
    let lines: Vec<(usize, &str)> = lines_at(text, start)
        .into_iter()
        .filter(|(_, l)| !l.trim().is_empty())
        .collect();
    if let Some(d) = not_csv(file, text, &lines) {
        return Err(d.into());
    }
    let Some(&(first_at, first)) = lines.first() else {
        return Err(Diagnostic::new(Stage::Usage, format!("`{file}` is empty"))
            .at(Location::file(file))
            .hint(format!(
                "save the output of `nvidia-smi {}` on the node",
                NVIDIA_SMI_ARGS.join(" ")
            ))
            .into());
    };
    let first_cells = cells(first, first_at);
    let (columns, data) = if is_header(&first_cells) {
        let find = |names: &[&str]| {
            first_cells
                .iter()
                .position(|(_, c)| names.contains(&field_name(c)))
        };
        let Some(name) = find(&["name", "gpu_name"]) else {
            return Err(
                Diagnostic::new(Stage::Usage, "the CSV header has no `name` column")
                    .at_offset(file, text, first_at)
                    .hint(format!(
                        "query the GPU names too: `nvidia-smi {}`",
                        NVIDIA_SMI_ARGS.join(" ")
                    ))
                    .into(),
            );
        };
        let columns = Columns {
            count: first_cells.len(),
            name,
            driver: find(&["driver_version"]).or_else(|| find(&["kmd_version"])),
            cc: find(&["compute_cap"]),
            memory: find(&["memory.total"]),
        };
        (columns, &lines[1..])
    } else {
        let Some(columns) = Columns::fixed(first_cells.len()) else {
            return Err(Diagnostic::new(
                Stage::Usage,
                format!(
                    "expected 4 values per line (name, driver_version, compute_cap, memory.total) or 3 (without compute_cap), found {}",
                    first_cells.len()
                ),
            )
            .at_offset(file, text, first_at)
            .hint(format!(
                "without a header line, probe reads only the output of `nvidia-smi {},noheader`; keep the header line to use other columns",
                NVIDIA_SMI_ARGS.join(" ")
            ))
            .into());
        };
        (columns, &lines[..])
    };

    let mut rows = Vec::new();
    let mut diags = Vec::new();
    for &(line_at, line) in data {
        let cs = cells(line, line_at);
        if cs.len() != columns.count {
            diags.push(
                Diagnostic::new(
                    Stage::Usage,
                    format!(
                        "this row has {} values, {} has {}",
                        cs.len(),
                        if data.len() == lines.len() {
                            "the first row"
                        } else {
                            "the header"
                        },
                        columns.count
                    ),
                )
                .at_offset(file, text, line_at)
                .hint("the file is cut or edited: save the whole output of one nvidia-smi run"),
            );
            continue;
        }
        match csv_row(file, text, &columns, &cs) {
            Ok(r) => rows.push(r),
            Err(mut ds) => diags.append(&mut ds),
        }
    }
    if diags.is_empty() {
        Ok(rows)
    } else {
        Err(Error::Invalid(diags))
    }
}

fn csv_row(
    file: &str,
    text: &str,
    columns: &Columns,
    cs: &[(usize, &str)],
) -> Result<Row, Vec<Diagnostic>> {
    let mut diags = Vec::new();
    let (name_at, name) = cs[columns.name];
    if name.is_empty() || is_na(name) {
        diags.push(
            Diagnostic::new(Stage::Usage, "the GPU name is empty")
                .at_offset(file, text, name_at)
                .hint("nvidia-smi could not read the GPU; check `nvidia-smi -L` on the node"),
        );
    }
    let driver = columns.driver.and_then(|i| {
        let (at, v) = cs[i];
        match driver_version(v) {
            Some(d) => Some((d, at)),
            None => {
                diags.push(bad_driver(file, text, at, v));
                None
            }
        }
    });
    let cc = columns.cc.and_then(|i| {
        let (at, v) = cs[i];
        if is_na(v) {
            return None;
        }
        match v.parse::<Cc>() {
            Ok(c) => Some((c, at)),
            Err(e) => {
                diags.push(
                    Diagnostic::new(
                        Stage::Usage,
                        format!("invalid compute capability `{}`: {e}", v.escape_debug()),
                    )
                    .at_offset(file, text, at)
                    .hint("nvidia-smi prints `compute_cap` as MAJOR.MINOR, like `9.0`"),
                );
                None
            }
        }
    });
    let memory_mib = columns.memory.and_then(|i| {
        let (at, v) = cs[i];
        if is_na(v) {
            return None;
        }
        match mib(v) {
            Some(m) => Some(m),
            None => {
                diags.push(bad_memory(file, text, at, v));
                None
            }
        }
    });
    if diags.is_empty() {
        Ok(Row {
            name: name.to_string(),
            name_at,
            driver,
            cc,
            memory_mib,
        })
    } else {
        Err(diags)
    }
}

/// nvidia-smi's placeholders for a value it does not have: `[N/A]` (CSV), `N/A` (XML),
/// `[Not Supported]`.
fn is_na(v: &str) -> bool {
    matches!(v, "[N/A]" | "N/A" | "[Not Supported]")
}

/// A driver version as the spec accepts it: 2 or 3 dotted numbers (`550.54.15`, `595.80`).
fn driver_version(v: &str) -> Option<Version> {
    if v.is_empty() || !v.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    Version::parse(v)
        .ok()
        .filter(|d| (2..=3).contains(&d.parts().len()) && d.local().is_none())
}

fn bad_driver(file: &str, text: &str, at: usize, v: &str) -> Diagnostic {
    Diagnostic::new(
        Stage::Usage,
        format!("invalid driver version `{}`", v.escape_debug()),
    )
    .at_offset(file, text, at)
    .hint("expected the version nvidia-smi prints, like `550.54.15` or `595.80`; run the probe on the node itself, where the driver is loaded")
}

/// `81559 MiB`, `81559MiB` or `81559` (`nounits`).
fn mib(v: &str) -> Option<u64> {
    let n = v.strip_suffix("MiB").unwrap_or(v).trim_end();
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

fn bad_memory(file: &str, text: &str, at: usize, v: &str) -> Diagnostic {
    Diagnostic::new(
        Stage::Usage,
        format!("invalid `memory.total` `{}`", v.escape_debug()),
    )
    .at_offset(file, text, at)
    .hint("expected MiB as nvidia-smi prints them, like `81559 MiB` (or `81559` with `nounits`)")
}

/// Other outputs people save instead of the CSV query, recognised to say what to run.
fn not_csv(file: &str, text: &str, lines: &[(usize, &str)]) -> Option<Diagnostic> {
    let query = format!("nvidia-smi {}", NVIDIA_SMI_ARGS.join(" "));
    for &(at, line) in lines.iter().take(4) {
        let l = line.trim();
        if l.starts_with("Field \"") && l.contains("is not a valid field to query") {
            return Some(
                Diagnostic::new(
                    Stage::Usage,
                    format!("`{file}` holds an nvidia-smi error, not GPUs: {l}"),
                )
                .at_offset(file, text, at)
                .hint(format!(
                    "this driver predates the field; run `nvidia-smi {}` instead",
                    NVIDIA_SMI_ARGS_NO_CC.join(" ")
                )),
            );
        }
        if l.starts_with("NVIDIA-SMI has failed") || l.starts_with("No devices were found") {
            return Some(
                Diagnostic::new(
                    Stage::Usage,
                    format!("`{file}` holds an nvidia-smi error, not GPUs: {l}"),
                )
                .at_offset(file, text, at)
                .hint("nvidia-smi cannot reach the driver or sees no GPU on this node; fix that first (`nvidia-smi -L` lists the GPUs)"),
            );
        }
        if l.starts_with("==============NVSMI LOG") {
            return Some(
                Diagnostic::new(
                    Stage::Usage,
                    "this is the text of `nvidia-smi -q`, which probe does not read",
                )
                .at_offset(file, text, at)
                .hint(format!("run `nvidia-smi -q -x` (XML) or `{query}`")),
            );
        }
        if l.starts_with("+---") || l.starts_with("| NVIDIA-SMI") {
            return Some(
                Diagnostic::new(
                    Stage::Usage,
                    "this is the table nvidia-smi prints by default, which probe does not read",
                )
                .at_offset(file, text, at)
                .hint(format!("run `{query}` or `nvidia-smi -q -x`")),
            );
        }
    }
    None
}

// ---------------------------------------------------------------------------------------
// XML

fn parse_xml(file: &str, text: &str, start: usize) -> Result<(Option<Version>, Vec<Row>), Error> {
    let body = &text[start..];
    let opts = roxmltree::ParsingOptions {
        // nvidia-smi writes `<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">`; the
        // external DTD is not fetched, and roxmltree bounds entity expansion.
        allow_dtd: true,
        nodes_limit: 1_000_000,
        ..roxmltree::ParsingOptions::default()
    };
    let doc = roxmltree::Document::parse_with_options(body, opts).map_err(|e| {
        let (at, msg) = match e {
            // A cut file: point at its end.
            roxmltree::Error::UnclosedRootNode | roxmltree::Error::UnexpectedEndOfStream => (
                text.len(),
                "the file ends before `</nvidia_smi_log>`".to_string(),
            ),
            _ => (
                start + offset_of(body, e.pos().row, e.pos().col),
                xml_message(&e),
            ),
        };
        Diagnostic::new(Stage::Usage, format!("invalid XML: {msg}"))
            .at_offset(file, text, at)
            .hint("the file is cut or edited: save the whole output of `nvidia-smi -q -x` on the node")
    })?;
    let root = doc.root_element();
    if !root.has_tag_name("nvidia_smi_log") {
        return Err(Diagnostic::new(
            Stage::Usage,
            format!(
                "the XML's root element is `<{}>`, not `<nvidia_smi_log>`",
                root.tag_name().name()
            ),
        )
        .at_offset(file, text, start + root.range().start)
        .hint("probe reads the output of `nvidia-smi -q -x`")
        .into());
    }
    let value = |n: roxmltree::Node<'_, '_>| n.text().unwrap_or("").trim().to_string();

    let mut diags = Vec::new();
    let mut driver = None;
    if let Some(n) = child(root, "kmd_version").or_else(|| child(root, "driver_version")) {
        let v = value(n);
        match driver_version(&v) {
            Some(d) => driver = Some(d),
            None => diags.push(bad_driver(file, text, start + n.range().start, &v)),
        }
    }
    let mut rows = Vec::new();
    for gpu in root
        .children()
        .filter(|c| c.is_element() && c.has_tag_name("gpu"))
    {
        let gpu_at = start + gpu.range().start;
        let Some(name_node) = child(gpu, "product_name") else {
            diags.push(
                Diagnostic::new(Stage::Usage, "this `<gpu>` has no `<product_name>`")
                    .at_offset(file, text, gpu_at)
                    .hint("the file is cut or edited: save the whole output of `nvidia-smi -q -x` on the node"),
            );
            continue;
        };
        let name = value(name_node);
        let name_at = start + name_node.range().start;
        if name.is_empty() || is_na(&name) {
            diags.push(
                Diagnostic::new(Stage::Usage, "the GPU name is empty")
                    .at_offset(file, text, name_at)
                    .hint("nvidia-smi could not read the GPU; check `nvidia-smi -L` on the node"),
            );
            continue;
        }
        // The GPU's own `fb_memory_usage`, not those of its MIG devices.
        let memory_mib = match child(gpu, "fb_memory_usage").and_then(|m| child(m, "total")) {
            None => None,
            Some(t) => {
                let v = value(t);
                if is_na(&v) {
                    None
                } else if let Some(m) = mib(&v) {
                    Some(m)
                } else {
                    diags.push(bad_memory(file, text, start + t.range().start, &v));
                    None
                }
            }
        };
        rows.push(Row {
            name,
            name_at,
            driver: None,
            cc: None,
            memory_mib,
        });
    }
    if diags.is_empty() {
        Ok((driver, rows))
    } else {
        Err(Error::Invalid(diags))
    }
}

/// roxmltree's message without its position, lowercase first: `unexpected end of stream`.
fn xml_message(e: &roxmltree::Error) -> String {
    let msg = e.to_string();
    let msg = msg
        .rsplit_once(" at ")
        .filter(|(_, pos)| pos.bytes().all(|b| b.is_ascii_digit() || b == b':'))
        .map_or(msg.as_str(), |(m, _)| m)
        .trim_end_matches('.');
    let mut chars = msg.chars();
    chars
        .next()
        .map(|c| c.to_ascii_lowercase())
        .into_iter()
        .chain(chars)
        .collect()
}

/// The first child element of `n` named `tag`.
fn child<'a, 'i>(n: roxmltree::Node<'a, 'i>, tag: &str) -> Option<roxmltree::Node<'a, 'i>> {
    n.children().find(|c| c.is_element() && c.has_tag_name(tag))
}

/// The byte offset of 1-based `row` and `col` (in characters) in `text`.
fn offset_of(text: &str, row: u32, col: u32) -> usize {
    let mut at = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if i + 1 == row as usize {
            return at
                + line
                    .char_indices()
                    .nth(col.saturating_sub(1) as usize)
                    .map_or(line.len(), |(b, _)| b);
        }
        at += line.len();
    }
    text.len()
}

// ---------------------------------------------------------------------------------------
// Running nvidia-smi

/// Runs `nvidia-smi` with [`NVIDIA_SMI_ARGS`] (and, if this driver predates
/// `compute_cap`, again with [`NVIDIA_SMI_ARGS_NO_CC`]) and returns its output for
/// [`parse`]. `Ok(None)` when there is no `nvidia-smi` on `PATH`; an error when it runs
/// and fails (no driver loaded, no GPU). This is the only function of the module that
/// starts a process.
pub fn run_nvidia_smi() -> Result<Option<String>, Error> {
    run_program(std::ffi::OsStr::new("nvidia-smi"))
}

fn run_program(program: &std::ffi::OsStr) -> Result<Option<String>, Error> {
    let shown = program.to_string_lossy();
    let run = |args: &[&str]| std::process::Command::new(program).args(args).output();
    let out = match run(&NVIDIA_SMI_ARGS) {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(Diagnostic::new(Stage::Io, format!("cannot run `{shown}`: {e}"))
                .hint("check that nvidia-smi is executable, or save its output on the node and pass it with `--from FILE`")
                .into())
        }
    };
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    if out.status.success() {
        return Ok(Some(text(&out.stdout)));
    }
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    let out = if said.contains("is not a valid field to query") {
        run(&NVIDIA_SMI_ARGS_NO_CC).map_err(|e| {
            Error::from(Diagnostic::new(
                Stage::Io,
                format!("cannot run `{shown}`: {e}"),
            ))
        })?
    } else {
        out
    };
    if out.status.success() {
        return Ok(Some(text(&out.stdout)));
    }
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    let first = said
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    Err(Diagnostic::new(
        Stage::Io,
        format!("`{shown}` failed ({}): {first}", out.status),
    )
    .hint("check that the NVIDIA driver is loaded (`nvidia-smi -L` lists the GPUs), or save nvidia-smi's output on a node and pass it with `--from FILE`")
    .into())
}

impl fmt::Display for Probe {
    /// One line per GPU group: `8 x NVIDIA H100 80GB HBM3 -> h100`, then the driver.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for g in &self.gpus {
            writeln!(f, "{} x {} -> {}", g.count, g.smi_name, g.id)?;
        }
        match &self.driver {
            Some(d) => write!(f, "driver {d}"),
            None => write!(f, "driver unknown"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalization_keeps_model_distinctions() {
        assert_eq!(normalize("NVIDIA A100-SXM4-40GB"), "a100-sxm4-40gb");
        assert_ne!(
            normalize("NVIDIA A100-SXM4-40GB"),
            normalize("NVIDIA A100-SXM4-80GB")
        );
        assert_eq!(
            normalize("GeForce RTX 3090"),
            normalize("NVIDIA GeForce RTX 3090")
        );
        // Only a leading `NVIDIA ` goes, not one inside the name or a glued prefix.
        assert_eq!(normalize("NVIDIAX"), "nvidiax");
        assert_eq!(normalize("Tesla NVIDIA T4"), "tesla nvidia t4");
    }

    #[test]
    fn header_detection() {
        let h = cells("name, driver_version, compute_cap, memory.total [MiB]", 0);
        assert!(is_header(&h));
        let h = cells("encoder.stats.sessionCount, fan.speed [%]", 0);
        assert!(is_header(&h));
        let r = cells("NVIDIA L40S, 595.80, 8.9, 46068", 0);
        assert!(!is_header(&r));
        let r = cells("Tesla T4, 580.82.07, 15360 MiB", 0);
        assert!(!is_header(&r));
    }

    #[test]
    fn cells_keep_offsets() {
        let c = cells("a,  b ,c", 10);
        assert_eq!(c, vec![(10, "a"), (14, "b"), (17, "c")]);
    }

    #[test]
    fn memory_values() {
        assert_eq!(mib("81559 MiB"), Some(81559));
        assert_eq!(mib("81559"), Some(81559));
        assert_eq!(mib("81559MiB"), Some(81559));
        assert_eq!(mib("80 GiB"), None);
        assert_eq!(mib("MiB"), None);
        assert_eq!(mib("-1 MiB"), None);
    }

    #[test]
    fn driver_values() {
        assert_eq!(driver_version("550.54.15").unwrap().as_str(), "550.54.15");
        assert_eq!(driver_version("595.80").unwrap().as_str(), "595.80");
        assert!(driver_version("595").is_none());
        assert!(driver_version("1.2.3.4").is_none());
        assert!(driver_version("550.54.15rc1").is_none());
        assert!(driver_version("[N/A]").is_none());
    }

    #[test]
    fn xml_error_offsets() {
        assert_eq!(offset_of("ab\ncd\n", 2, 2), 4);
        assert_eq!(offset_of("ab\ncd\n", 9, 1), 6);
    }

    #[cfg(unix)]
    mod process {
        use super::super::run_program;
        use std::os::unix::fs::PermissionsExt;

        fn fake(dir: &std::path::Path, script: &str) -> std::path::PathBuf {
            std::fs::create_dir_all(dir).unwrap();
            let p = dir.join("nvidia-smi");
            std::fs::write(&p, format!("#!/bin/sh\n{script}")).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            p
        }

        fn dir(name: &str) -> std::path::PathBuf {
            std::env::temp_dir().join(format!("gpustack-probe-{name}-{}", std::process::id()))
        }

        #[test]
        fn missing_program_is_none() {
            let p = dir("missing").join("no-such-nvidia-smi");
            assert!(run_program(p.as_os_str()).unwrap().is_none());
        }

        #[test]
        fn passes_the_query_and_returns_stdout() {
            let d = dir("ok");
            let p = fake(&d, "echo \"$1 $2\"\n");
            let out = run_program(p.as_os_str()).unwrap().unwrap();
            assert_eq!(
                out,
                "--query-gpu=name,driver_version,compute_cap,memory.total --format=csv\n"
            );
            let _ = std::fs::remove_dir_all(d);
        }

        #[test]
        fn retries_without_compute_cap_on_old_drivers() {
            let d = dir("old");
            let p = fake(
                &d,
                "case \"$1\" in *compute_cap*) echo 'Field \"compute_cap\" is not a valid field to query.'; exit 2;; esac\necho \"$1\"\n",
            );
            let out = run_program(p.as_os_str()).unwrap().unwrap();
            assert_eq!(out, "--query-gpu=name,driver_version,memory.total\n");
            let _ = std::fs::remove_dir_all(d);
        }

        #[test]
        fn failure_is_an_error_with_its_first_line() {
            let d = dir("fail");
            let p = fake(
                &d,
                "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\"\nexit 9\n",
            );
            let err = run_program(p.as_os_str()).unwrap_err().to_string();
            assert!(
                err.contains("failed (exit status: 9): NVIDIA-SMI has failed because"),
                "{err}"
            );
            assert!(
                err.contains("hint: check that the NVIDIA driver is loaded"),
                "{err}"
            );
            let _ = std::fs::remove_dir_all(d);
        }
    }
}
