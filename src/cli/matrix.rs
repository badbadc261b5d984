//! `gpustack matrix`: every stack the spec allows, best first, for CI test matrices.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use gpustack::error::Stage;
use gpustack::solve::matrix::{self, Event, Writer};
use gpustack::{Component, Error, Version};

use super::{load_catalog, read_spec, read_text};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// The spec to read
    #[arg(long, default_value = "gpustack.toml", value_name = "PATH")]
    spec: PathBuf,
    /// A catalog overlay directory (repeatable; later ones win)
    #[arg(long = "catalog", value_name = "DIR")]
    catalogs: Vec<PathBuf>,
    /// Output format: JSON with every member, or GitHub's `strategy.matrix.include`
    #[arg(long, value_enum, default_value_t = Format::Json)]
    format: Format,
    /// At most N rows (the best ones)
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// The lock whose stack the JSON marks `"locked": true` [default: gpustack.lock beside
    /// the spec, if there is one]
    #[arg(long, value_name = "PATH")]
    lock: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Json,
    Github,
}

/// The versions of the lock's stack: `--lock`, else `gpustack.lock` beside the spec when
/// there is one.
#[allow(clippy::type_complexity)]
fn locked(args: &Args) -> Result<Option<(PathBuf, BTreeMap<Component, Version>)>, Error> {
    let path = match &args.lock {
        Some(p) => p.clone(),
        None => {
            let p = args
                .spec
                .parent()
                .unwrap_or(Path::new(""))
                .join("gpustack.lock");
            if !p.is_file() {
                return Ok(None);
            }
            p
        }
    };
    let text = read_text(
        &path,
        Stage::Lock,
        "lock",
        "create it with `gpustack lock`, or pass `--lock PATH`",
    )?;
    let lock = gpustack::Lock::parse(&gpustack::emit::shown(&path), &text)?;
    let versions = lock
        .components
        .iter()
        .map(|c| (c.name, c.version.clone()))
        .collect();
    Ok(Some((path, versions)))
}

pub(crate) fn run(args: Args) -> Result<u8, Error> {
    let catalog = load_catalog(&args.catalogs)?;
    let shown = gpustack::emit::shown(&args.spec);
    let text = read_spec(&args.spec)?;
    let spec = gpustack::Spec::parse(&shown, &text, &catalog)?;
    let (lock_path, locked) = locked(&args)?.unzip();
    let format = match args.format {
        Format::Json => matrix::Format::Json,
        Format::Github => matrix::Format::Github,
    };
    let axes = matrix::default_axes(&spec);
    // Row by row as the search gives them: memory does not grow with the number of rows,
    // and `gpustack matrix | head -1` ends quietly when head exits.
    let mut marked = false;
    let mut result = None;
    let written = crate::stdout_stream(|w| {
        let mut out: Option<Writer<'_>> = None;
        let streamed = matrix::for_each_row(&catalog, &spec, &axes, args.limit, |e| match e {
            Event::Start(s) => {
                let o = out.insert(Writer::new(format, s.clone(), locked.as_ref()));
                o.start(w)
            }
            Event::Row(r) => match out.as_mut() {
                Some(o) => {
                    marked |= o.row(w, r)?;
                    Ok(())
                }
                None => Ok(()),
            },
        });
        match streamed {
            Ok(Ok(shape)) => {
                if let Some(o) = out.as_mut() {
                    o.end(w)?;
                }
                result = Some(Ok(shape));
                Ok(())
            }
            Ok(Err(io)) => Err(io),
            Err(e) => {
                result = Some(Err(e));
                Ok(())
            }
        }
    });
    let shape = match result {
        Some(r) => r?,
        // Standard output was closed.
        None => return Ok(0),
    };
    if written.is_err() {
        return Ok(0);
    }
    match (shape.truncated(), shape.total) {
        (false, _) => {}
        (true, Some(t)) => {
            note!("{} of {t} stacks (--limit {})", shape.rows, shape.rows);
        }
        (true, None) => note!(
            "the best {} stacks (--limit {}); more exist, not counted",
            shape.rows,
            shape.rows
        ),
    }
    if let (Some(path), false, false) = (&lock_path, marked, shape.truncated()) {
        note!(
            "no row is the stack of `{}`: it was locked from another spec or catalog, or is stale (`gpustack lock --check` says which)",
            gpustack::emit::shown(path)
        );
    }
    std::mem::forget(catalog);
    Ok(0)
}
