//! `gpustack matrix`: every stack the spec allows, best first, for CI test matrices.

use std::path::PathBuf;

use gpustack::Error;

use super::{load_catalog, read_spec};

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
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Json,
    Github,
}

pub(crate) fn run(args: Args) -> Result<u8, Error> {
    let catalog = load_catalog(&args.catalogs)?;
    let shown = gpustack::emit::shown(&args.spec);
    let text = read_spec(&args.spec)?;
    let spec = gpustack::Spec::parse(&shown, &text, &catalog)?;
    let m = gpustack::solve::matrix::matrix(&catalog, &spec, args.limit)?;
    // Row by row: `gpustack matrix | head -1` ends quietly when head exits.
    let written = crate::stdout_stream(|w| match args.format {
        Format::Github => m.write_github(w),
        Format::Json => m.write_json(w),
    });
    if written.is_err() {
        return Ok(0);
    }
    match (m.truncated(), m.total) {
        (false, _) => {}
        (true, Some(t)) => {
            note!("{} of {t} stacks (--limit {})", m.rows.len(), m.rows.len());
        }
        (true, None) => note!(
            "the best {} stacks (--limit {}); more exist, not counted",
            m.rows.len(),
            m.rows.len()
        ),
    }
    std::mem::forget(catalog);
    Ok(0)
}
