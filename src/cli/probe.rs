//! `gpustack probe`: a node's GPUs and driver, from nvidia-smi, as a `[hardware]` table.

use std::path::PathBuf;

use gpustack::error::{Diagnostic, Stage};
use gpustack::Error;

use super::{load_catalog, read_text};
use crate::{out_text, stdout};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// Read saved nvidia-smi output (CSV or `-q -x` XML) instead of running nvidia-smi
    #[arg(long, value_name = "FILE")]
    from: Option<PathBuf>,
    /// A catalog overlay directory (repeatable; later ones win)
    #[arg(long = "catalog", value_name = "DIR")]
    catalogs: Vec<PathBuf>,
    /// Output format: the `[hardware]` TOML table, or JSON
    #[arg(long, value_enum, default_value_t = Format::Toml)]
    format: Format,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Toml,
    Json,
}

pub(crate) fn run(args: Args) -> Result<u8, Error> {
    let catalog = load_catalog(&args.catalogs)?;
    let (shown, text) = match &args.from {
        Some(p) => (
            gpustack::emit::shown(p),
            read_text(
                p,
                Stage::Usage,
                "nvidia-smi output",
                "save it with `nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv > smi.csv`",
            )?,
        ),
        None => match gpustack::probe::run_nvidia_smi()? {
            Some(t) => ("nvidia-smi".to_string(), t),
            None => {
                return Err(Diagnostic::new(
                    Stage::Usage,
                    "`nvidia-smi` is not on PATH: this is not a node with an NVIDIA driver",
                )
                .hint("run `gpustack probe` on a GPU node, or pass saved output with `--from FILE`")
                .into())
            }
        },
    };
    let probe = gpustack::probe::parse(&shown, &text, &catalog)?;
    let _ = match args.format {
        Format::Json => stdout(&format!(
            "{}\n",
            serde_json::to_string_pretty(&probe.to_json()).unwrap_or_default()
        )),
        Format::Toml => out_text(&probe.hardware_toml()),
    };
    Ok(0)
}
