//! `gpustack check`: the lock, the generated files and a node against each other.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use gpustack::emit::limits;
use gpustack::error::{Diagnostic, Stage};
use gpustack::{Catalog, Error, Lock};

use super::{load_catalog, read_text};
use crate::{out_text, stdout};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// The spec (default: gpustack.toml when present and --lock is the default)
    #[arg(long, value_name = "PATH")]
    spec: Option<PathBuf>,
    /// The lock to check
    #[arg(long, default_value = "gpustack.lock", value_name = "PATH")]
    lock: PathBuf,
    /// The generated files (default: out/ when present)
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Do not compare the generated files (drift and consistency are reported as skipped)
    #[arg(long, conflicts_with = "out")]
    no_drift: bool,
    /// A node's hardware: the `[hardware]` table `gpustack probe` prints, or saved
    /// nvidia-smi output
    #[arg(long, value_name = "FILE")]
    hardware: Option<PathBuf>,
    /// A catalog overlay directory (repeatable; later ones win)
    #[arg(long = "catalog", value_name = "DIR")]
    catalogs: Vec<PathBuf>,
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Fail on warnings too
    #[arg(long)]
    strict: bool,
    /// Also report facts you cannot act on from the spec (artifacts the catalog has no
    /// digest for)
    #[arg(long)]
    pedantic: bool,
    /// The date end-of-life warnings compare with (`YYYY-MM-DD`; default: today, UTC)
    #[arg(long, value_name = "DATE", value_parser = date)]
    today: Option<String>,
    /// Leave out findings with this code (repeatable), e.g. `--allow eol-driver`
    #[arg(long = "allow", value_name = "CODE", value_parser = clap::builder::PossibleValuesParser::new(gpustack::check::Code::ALL.map(gpustack::check::Code::name)))]
    allow: Vec<String>,
}

/// `--today`: a `YYYY-MM-DD` calendar date (`2026-02-30` is refused).
fn date(s: &str) -> Result<String, String> {
    if gpustack::core::url::parse_date(s).is_some() {
        Ok(s.to_string())
    } else {
        Err(format!(
            "`{}` is not a calendar date `YYYY-MM-DD`",
            gpustack::error::shown_value(s)
        ))
    }
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Text,
    Json,
    Github,
}

/// The generated files `check` compares: the directory as shown, and its tree.
type Tree = (String, gpustack::emit::OutTree);

pub(crate) fn run(args: Args, verbose: bool) -> Result<u8, Error> {
    let catalog = load_catalog(&args.catalogs)?;
    let lock_shown = gpustack::emit::shown(&args.lock);
    let lock_text = read_text(
        &args.lock,
        Stage::Lock,
        "lock",
        "create it with `gpustack lock`, or pass `--lock PATH`",
    )?;
    let spec_text = spec(&args)?;
    let tree = out_tree(&args)?;
    let hw = hardware(&args, &catalog)?;
    let pylocks = pylocks(&args.lock, &lock_shown, &lock_text);
    let today = Some(args.today.clone().unwrap_or_else(gpustack::import::today));
    let mut report = gpustack::check::check(&gpustack::check::Inputs {
        today: today.as_deref(),
        pylocks: &pylocks,
        lock: (&lock_shown, &lock_text),
        spec: spec_text.as_ref().map(|(p, t)| (p.as_str(), t.as_str())),
        catalog: &catalog,
        out: tree.as_ref().map(|(d, t)| (d.as_str(), &t.files)),
        unusual: tree.as_ref().map_or(&[][..], |(_, t)| &t.unusual),
        hardware: hw.as_ref(),
    })?;
    if args.no_drift {
        report.skip("drift", "--no-drift".to_string());
        report.skip("consistency", "--no-drift".to_string());
    }
    report.apply(&gpustack::check::Policy {
        pedantic: args.pedantic,
        strict: args.strict,
        allow: args
            .allow
            .iter()
            .filter_map(|a| gpustack::check::Code::from_name(a))
            .collect(),
    });
    let _ = match args.format {
        Format::Json => stdout(&report.to_json()),
        Format::Github => stdout(&report.to_github()),
        Format::Text => out_text(&report.text(verbose)),
    };
    Ok(report.exit_code(args.strict))
}

/// The spec as shown and its text. An explicit --spec must exist; the default is used when
/// present, and only with the default lock: `--lock other.lock` run where a gpustack.toml
/// lies would compare that lock with an unrelated spec.
fn spec(args: &Args) -> Result<Option<(String, String)>, Error> {
    let lock_is_default = args.lock == Path::new("gpustack.lock");
    let spec_path = match &args.spec {
        Some(p) => Some(p.clone()),
        None => Some(PathBuf::from("gpustack.toml")).filter(|p| lock_is_default && p.exists()),
    };
    Ok(match &spec_path {
        Some(p) => Some((
            gpustack::emit::shown(p),
            read_text(p, Stage::Spec, "spec", "pass `--spec PATH`")?,
        )),
        None => None,
    })
}

/// The generated files to compare: an explicit --out must exist; the default `out/` is used
/// when present, whichever lock it was generated from (a tree of another lock is the
/// `stale-outputs` finding, not a reason to skip). None with --no-drift.
fn out_tree(args: &Args) -> Result<Option<Tree>, Error> {
    let out_dir = match &args.out {
        _ if args.no_drift => None,
        Some(p) if !p.is_dir() => {
            return Err(Diagnostic::new(
                Stage::Usage,
                format!("output directory `{}` not found", gpustack::emit::shown(p)),
            )
            .hint("generate it with `gpustack gen all`, or leave out `--out`")
            .into())
        }
        Some(p) => Some(p.clone()),
        None => Some(PathBuf::from("out")).filter(|p| p.is_dir()),
    };
    Ok(match &out_dir {
        Some(d) => Some((gpustack::emit::shown(d), gpustack::emit::read_out_tree(d)?)),
        None => None,
    })
}

/// The node's hardware from `--hardware`: a `[hardware]` table, or raw nvidia-smi output
/// (CSV or XML), probed here.
fn hardware(
    args: &Args,
    catalog: &Catalog,
) -> Result<Option<gpustack::check::HostHardware>, Error> {
    let Some(p) = &args.hardware else {
        return Ok(None);
    };
    let shown = gpustack::emit::shown(p);
    let text = read_text(
        p,
        Stage::Spec,
        "hardware profile",
        "write one with `gpustack probe > node.toml`",
    )?;
    Ok(Some(match gpustack::probe::sniff(&text) {
        Some(_) => {
            let probe = gpustack::probe::parse(&shown, &text, catalog)?;
            gpustack::check::HostHardware::from_probe(&probe, catalog)
        }
        None => gpustack::check::HostHardware::parse(&shown, &text, catalog)?,
    }))
}

/// The closure's files beside the lock, as the lock names them (those that read).
fn pylocks(lock: &Path, lock_shown: &str, lock_text: &str) -> BTreeMap<String, String> {
    Lock::parse(lock_shown, lock_text)
        .ok()
        .and_then(|l| l.python)
        .map(|py| {
            let dir = lock
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            py.files
                .iter()
                .filter_map(|f| {
                    let b = gpustack::emit::read_bounded(&dir.join(&f.file), limits::LOCK).ok()?;
                    Some((f.file.clone(), String::from_utf8(b).ok()?))
                })
                .collect()
        })
        .unwrap_or_default()
}
