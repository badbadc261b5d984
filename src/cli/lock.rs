//! `gpustack lock`: resolve the spec, then write the lock and its pylock files
//! ([`gpustack::generate::write_lock`]) or compare them with the ones on disk (`--check`).
//! An offline re-lock whose inputs are byte for byte those of an earlier run that changed
//! nothing answers from that run's cache entry ([`gpustack::generate::fresh`]).

use std::path::{Path, PathBuf};

use gpustack::error::{Diagnostic, Stage};
use gpustack::generate::fresh::{self, Said};
use gpustack::generate::{LockOutput, LockStatus};
use gpustack::{Catalog, Error, Lock, PythonOutcome};

use super::{json_text, load_catalog, read_spec, TextOrJson};
use crate::stdout;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// The spec to read
    #[arg(long, default_value = "gpustack.toml", value_name = "PATH")]
    spec: PathBuf,
    /// Where to write the lock (`-` for standard output)
    #[arg(long, default_value = "gpustack.lock", value_name = "PATH|-")]
    out: String,
    /// A catalog overlay directory (repeatable; later ones win)
    #[arg(long = "catalog", value_name = "DIR")]
    catalogs: Vec<PathBuf>,
    /// Do not write; exit 1 if the existing lock differs from the resolved one
    /// (never uses the network)
    #[arg(long)]
    check: bool,
    /// Use no network: digests and package versions come from the existing lock and the
    /// catalog (also `GPUSTACK_OFFLINE=1`)
    #[arg(long)]
    offline: bool,
    /// Write the lock even without its Python closure (no uv of the pinned version could be
    /// had, or the catalog has no platform to resolve for): the builds then resolve Python
    /// packages at build time. Without it, such a lock is refused (exit 2)
    #[arg(long)]
    allow_open: bool,
    /// Seconds all registry and repository queries of this run may take together
    /// (default: the spec's `[resolve].timeout`, else 30)
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=3600))]
    timeout: Option<u64>,
    /// Re-resolve every pick; without it, the existing lock's picks that still fit the
    /// spec and catalog are kept
    #[arg(long, conflicts_with = "upgrade_package")]
    upgrade: bool,
    /// Re-resolve this component or Python package only (repeatable)
    #[arg(long = "upgrade-package", value_name = "NAME")]
    upgrade_package: Vec<String>,
    /// The summary's format: a line on standard error, or JSON on standard output
    #[arg(long, value_enum, default_value_t = TextOrJson::Text)]
    format: TextOrJson,
}

/// A resolved lock and what to say about it after it is written.
struct Resolved {
    lock: Lock,
    /// Every note, one per image or finding (`-v`, and the JSON summary).
    notes: Vec<String>,
    /// What the default output says: at most one line per kind of note.
    brief: Vec<String>,
}

/// What a run printed to standard error, kept for the re-lock fast path.
#[derive(Default)]
struct Say(Vec<Said>);

impl Say {
    /// A progress line (left out with `-q`).
    fn info(&mut self, text: String) {
        crate::info!("{text}");
        self.0.push(Said { info: true, text });
    }

    /// A note, warning or error line; with `-q`, only an error is printed.
    fn note(&mut self, text: String) {
        shown_note(&text);
        self.0.push(Said { info: false, text });
    }
}

/// `-q` prints nothing on success but errors: notes and warnings are left out too.
fn shown_note(text: &str) {
    if !crate::quiet() || text.starts_with("error:") {
        note!("{text}");
    }
}

pub(crate) fn run(args: Args, verbose: bool) -> Result<u8, Error> {
    let offline = args.offline
        || args.check
        || std::env::var_os("GPUSTACK_OFFLINE").is_some_and(|v| !v.is_empty() && v != "0");
    let fresh = Fresh::of(&args, offline, verbose);
    if let Some(said) = fresh.as_ref().and_then(Fresh::recall) {
        for s in said {
            if s.info {
                crate::info!("{}", s.text);
            } else {
                shown_note(&s.text);
            }
        }
        return Ok(0);
    }
    let mut say = Say::default();
    let (code, unchanged) = full(&args, offline, verbose, &mut say)?;
    if let (Some(f), 0, true) = (fresh, code, unchanged) {
        f.remember(&say.0);
    }
    Ok(code)
}

/// The re-lock fast path ([`gpustack::generate::fresh`]): an offline run with nothing
/// that could change its answer but the files it reads.
struct Fresh {
    cache: PathBuf,
    request: (PathBuf, PathBuf, String),
    key: fresh::Key,
}

impl Fresh {
    fn of(args: &Args, offline: bool, verbose: bool) -> Option<Fresh> {
        let eligible = offline
            && !args.upgrade
            && args.upgrade_package.is_empty()
            && args.catalogs.is_empty()
            && args.out != "-"
            && args.format == TextOrJson::Text;
        if !eligible {
            return None;
        }
        let cache = fresh::cache_dir(
            std::env::var_os("GPUSTACK_CACHE_DIR").map(PathBuf::from),
            std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from),
            std::env::var_os("HOME").map(PathBuf::from),
        )?;
        let request = (
            args.spec.clone(),
            PathBuf::from(&args.out),
            format!("check={} verbose={verbose}", args.check),
        );
        let key = fresh::Key::of(&fresh::Request {
            spec: &request.0,
            out: &request.1,
            flags: &request.2,
        })?;
        Some(Fresh {
            cache,
            request,
            key,
        })
    }

    fn recall(&self) -> Option<Vec<Said>> {
        fresh::recall(&self.cache, &self.key)
    }

    /// Records the run, if every file is still what it was when the key was taken.
    fn remember(&self, said: &[Said]) {
        let (spec, out, flags) = &self.request;
        let now = fresh::Key::of(&fresh::Request { spec, out, flags });
        if now.as_ref() == Some(&self.key) {
            fresh::remember(&self.cache, &self.key, said);
        }
    }
}

/// The full path: solve, lock the closure, write (or compare). Returns the exit code and
/// whether every file was already what it would be.
fn full(args: &Args, offline: bool, verbose: bool, say: &mut Say) -> Result<(u8, bool), Error> {
    let catalog = load_catalog(&args.catalogs)?;
    // The lock being replaced: its registry digests stand when a registry cannot be asked
    // (`--offline`, unreachable), and its picks are kept unless upgraded.
    let previous = (args.out != "-")
        .then(|| gpustack::generate::previous_lock(Path::new(&args.out)))
        .flatten();
    let Some(resolved) = resolve(args, &catalog, offline, previous.as_ref(), verbose)? else {
        return Ok((1, false));
    };
    // The process ends right after; freeing the catalog would only cost time.
    std::mem::forget(catalog);
    let output = LockOutput::of(&resolved.lock);
    if args.out == "-" {
        if args.check {
            return Err(Diagnostic::new(
                Stage::Usage,
                "`--check` compares against a lock file; it cannot be used with `--out -`",
            )
            .hint("name the lock: `gpustack lock --check --out gpustack.lock`")
            .into());
        }
        let _ = stdout(&output.text);
        for n in resolved.brief {
            say.note(n);
        }
        return Ok((0, false));
    }
    let out_path = PathBuf::from(&args.out);
    let out_shown = gpustack::emit::shown(&out_path);
    if args.check {
        return check(args, &out_path, &output, say);
    }
    let changed =
        gpustack::generate::write_lock(&out_path, &args.spec, &output, previous.as_ref())?;
    if args.format == TextOrJson::Json {
        let _ = stdout(&json_text(&crate::show::lock_summary_json(
            &resolved.lock,
            &out_shown,
            &resolved.notes,
        )));
        return Ok((0, !changed));
    }
    let summary: Vec<String> = resolved
        .lock
        .components
        .iter()
        .map(|c| format!("{} {}", c.name, c.version))
        .collect();
    say.info(format!(
        "locked `{}` into {out_shown}: {}",
        resolved.lock.request.name,
        summary.join(", ")
    ));
    for n in resolved.brief {
        say.note(n);
    }
    Ok((0, !changed))
}

/// Solves the spec and locks the Python closure. `None`: `--check` found that the closure
/// would have to be resolved again (said already; exit 1).
fn resolve(
    args: &Args,
    catalog: &Catalog,
    offline: bool,
    previous: Option<&Lock>,
    verbose: bool,
) -> Result<Option<Resolved>, Error> {
    let python_upgrade = gpustack::PythonUpgrade {
        all: args.upgrade,
        packages: args.upgrade_package.clone(),
    };
    let upgrade = if args.upgrade {
        gpustack::Upgrade::All
    } else if args.upgrade_package.is_empty() {
        gpustack::Upgrade::Nothing
    } else {
        gpustack::Upgrade::Packages(args.upgrade_package.clone())
    };
    let spec_shown = gpustack::emit::shown(&args.spec);
    let text = read_spec(&args.spec)?;
    let (mut lock, report) = if offline {
        gpustack::lock_spec_upgrading(
            catalog,
            &spec_shown,
            &text,
            &gpustack::resolve::http::Offline,
            previous,
            &upgrade,
        )?
    } else {
        // One budget for the registry and repository queries of this run.
        let http = gpustack::resolve::http::Http::for_lock(args.timeout);
        gpustack::lock_spec_upgrading(catalog, &spec_shown, &text, &http, previous, &upgrade)?
    };
    // The pinned uv's download, when it is needed, has its own time (a 25 MB wheel).
    let fetch = gpustack::resolve::http::Http::new(offline);
    let python = gpustack::lock_python(
        catalog,
        &mut lock,
        offline,
        previous,
        &python_upgrade,
        &fetch,
    );
    let python = match python {
        // `--allow-open`: a closure that cannot be had is what was accepted.
        Err(e @ Error::Network(_)) if args.allow_open && !args.check => Ok(PythonOutcome::Open(
            e.to_string().trim_start_matches("error: ").to_string(),
        )),
        other => other,
    };
    let outcome = match python {
        Ok(PythonOutcome::Open(why)) if !offline && !args.allow_open => {
            return Err(Diagnostic::new(
                    Stage::Lock,
                    format!("the Python closure is not locked: {why}"),
                )
                .hint("a lock without its closure lets every build resolve Python packages itself; pass `--allow-open` to write it anyway, or `--offline` to reuse the previous lock's closure")
                .into());
        }
        Ok(o) => o,
        // `--check` never resolves: a closure that would have to be is stale.
        Err(e) if args.check => {
            note!(
                "error: {} is stale: `gpustack lock` would resolve the Python closure again\n\n{e}",
                gpustack::emit::shown(Path::new(&args.out))
            );
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    // Offline by request (`--offline`, `GPUSTACK_OFFLINE`), digests from the lock or the
    // catalog are what was asked for: those notes are printed with `-v` only.
    let quiet_fallback = offline && !verbose;
    // Every note for `-v` and the JSON summary; by default the fallbacks as one line.
    let brief = notes(catalog, &lock, &report, &outcome, quiet_fallback, verbose);
    let notes = notes(catalog, &lock, &report, &outcome, quiet_fallback, true);
    Ok(Some(Resolved { lock, notes, brief }))
}

/// Said after the lock is written: an unknown driver branch, where each digest came from
/// when not the registry, and the Python closure's state.
fn notes(
    catalog: &Catalog,
    lock: &Lock,
    report: &gpustack::resolve::Report,
    outcome: &PythonOutcome,
    quiet_fallback: bool,
    verbose: bool,
) -> Vec<String> {
    let mut notes: Vec<String> = if verbose {
        report
            .fallback
            .iter()
            .map(|(r, why)| format!("note: `{r}`: digest from the {why}"))
            .collect()
    } else {
        summary(report).into_iter().collect()
    };
    if quiet_fallback {
        notes.clear();
    }
    if !report.unpinned.is_empty() && !quiet_fallback {
        notes.push(format!(
            "note: pinned by tag only (no registry was asked or answered, and the catalog has no digest): {}",
            report.unpinned.join(", ")
        ));
    }
    if let Some(w) = catalog.unknown_branch(&lock.hardware.driver) {
        notes.insert(0, format!("warning: {w}\n\nhint: check the version `nvidia-smi` prints; `gpustack catalog show driver` lists the branches, and a catalog overlay can add one"));
    }
    match outcome {
        PythonOutcome::Open(why) => notes.push(format!(
            "warning: the Python closure is not locked: {why}\n  the generated builds resolve Python packages at build time until it is locked"
        )),
        PythonOutcome::Closed { resolved } if !resolved.is_empty() => {
            notes.push(format!("note: resolved the Python closure: {}", resolved.join(", ")));
        }
        _ => {}
    }
    notes
}

/// The fallbacks of a run whose registries and repositories did not answer, as one line
/// (`-v`: one line each).
fn summary(report: &gpustack::resolve::Report) -> Option<String> {
    if report.fallback.is_empty() && report.unverified.is_empty() {
        return None;
    }
    let mut parts = Vec::new();
    if !report.fallback.is_empty() {
        parts.push(format!(
            "{} image digest{} from the previous lock or the catalog",
            report.fallback.len(),
            if report.fallback.len() == 1 { "" } else { "s" }
        ));
    }
    if !report.unverified.is_empty() {
        parts.push(format!(
            "{} OS package pin{} unverified",
            report.unverified.len(),
            if report.unverified.len() == 1 {
                ""
            } else {
                "s"
            }
        ));
    }
    let first = report
        .first_failure
        .as_deref()
        .map(|f| format!(" (first: {f})"))
        .unwrap_or_default();
    Some(format!(
        "note: {}: a registry or repository did not answer{first}; `-v` lists each",
        parts.join(", ")
    ))
}

/// `--check`: exit 0 when the lock and its pylock files are what would be written, 1 (with
/// the command to run) when not.
fn check(
    args: &Args,
    out_path: &Path,
    output: &LockOutput,
    say: &mut Say,
) -> Result<(u8, bool), Error> {
    let out_shown = gpustack::emit::shown(out_path);
    // `gpustack lock` as the user would re-run it: their --spec and --out repeated.
    let mut again = String::from("gpustack lock");
    if args.spec != Path::new("gpustack.toml") {
        again.push_str(&format!(
            " --spec {}",
            gpustack::render::sh_quote(&gpustack::emit::shown(&args.spec))
        ));
    }
    if args.out != "gpustack.lock" {
        again.push_str(&format!(
            " --out {}",
            gpustack::render::sh_quote(&out_shown)
        ));
    }
    match gpustack::generate::check_lock(out_path, output)? {
        LockStatus::UpToDate => {
            say.info(format!("{out_shown} is up to date"));
            Ok((0, true))
        }
        LockStatus::Missing => {
            say.note(format!("error: {out_shown} does not exist: `gpustack lock` would create it\n\nhint: run `{again}` and commit the result"));
            Ok((1, false))
        }
        _ => {
            say.note(format!("error: {out_shown} is stale: `gpustack lock` would change it\n\nhint: run `{again}` and commit the result"));
            Ok((1, false))
        }
    }
}

#[cfg(test)]
mod tests {
    use gpustack::{Catalog, Lock, PythonOutcome};

    /// The default output folds the per-image digest notes into one line per source;
    /// `-v` (the full list) keeps one line per image with its observation.
    #[test]
    fn digest_notes_fold_into_one_line_per_kind() {
        let catalog = Catalog::stock().unwrap();
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("lockfiles/h100-ib-train-serve.lock"),
        )
        .unwrap();
        let lock = Lock::parse("gpustack.lock", &text).unwrap();
        let observation = "catalog observation of 2026-11-20 (a few hundred characters of source)";
        let report = gpustack::resolve::Report {
            fallback: vec![
                (
                    "nvcr.io/a:1".into(),
                    format!("{observation} (connection refused)"),
                ),
                (
                    "nvcr.io/b:1".into(),
                    format!("{observation} (connection refused)"),
                ),
                ("docker.io/c:1".into(), "previous lock (dns failure)".into()),
            ],
            ..Default::default()
        };
        let outcome = PythonOutcome::None;
        let full = super::notes(&catalog, &lock, &report, &outcome, false, true);
        assert_eq!(full.len(), 3, "{full:#?}");
        assert!(full[0].starts_with("note: `nvcr.io/a:1`: digest from the catalog observation"));
        // By default, one line for all three, pointing at `-v`.
        let brief = super::notes(&catalog, &lock, &report, &outcome, false, false);
        assert_eq!(brief.len(), 1, "{brief:#?}");
        assert!(
            brief[0].starts_with("note: ") && brief[0].contains("-v"),
            "{brief:#?}"
        );
        // Offline by request, none is said without `-v`.
        assert!(super::notes(&catalog, &lock, &report, &outcome, true, false).is_empty());
    }
}
