//! `gpustack diff`: two locks compared, each change classified by what it costs.

use std::path::PathBuf;

use gpustack::generate::LockFile;
use gpustack::Error;

use crate::{out_text, stdout};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// The old lock
    old: PathBuf,
    /// The new lock
    new: PathBuf,
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Exit 1 when the locks differ (as `git diff --exit-code`)
    #[arg(long)]
    exit_code: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Text,
    Json,
    Markdown,
}

pub(crate) fn run(args: Args) -> Result<u8, Error> {
    let hint = "pass two lock files: `gpustack diff OLD.lock NEW.lock`";
    let old = LockFile::read(&args.old, hint)?.lock;
    let new = LockFile::read(&args.new, hint)?.lock;
    let differ = old.to_toml() != new.to_toml();
    let d = gpustack::diff::diff(&old, &new);
    let _ = match args.format {
        Format::Json => stdout(&d.to_json()),
        Format::Markdown => stdout(&d.to_markdown()),
        Format::Text => out_text(&d.to_text()),
    };
    Ok(u8::from(args.exit_code && differ))
}
