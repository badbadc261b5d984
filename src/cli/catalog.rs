//! `gpustack catalog`: what the catalog holds (`list`, `show`), what upstream has that it
//! lacks (`outdated`), and `import` (in [`super::import`]).

use std::path::PathBuf;

use gpustack::error::{Diagnostic, Stage};
use gpustack::{Component, Error};

use super::{json_text, load_catalog, TextOrJson};
use crate::{out_text, show, stdout};

#[derive(clap::Subcommand)]
pub(crate) enum Command {
    /// One line per family: how many entries, newest versions
    List {
        /// A catalog overlay directory (repeatable)
        #[arg(long = "catalog", value_name = "DIR")]
        catalogs: Vec<PathBuf>,
        /// Output format
        #[arg(long, value_enum, default_value_t = TextOrJson::Text)]
        format: TextOrJson,
    },
    /// Every entry of one family with its source
    Show {
        /// driver, cuda, gpu, os, python, cudnn, nccl, torch, vllm, deepspeed, extra, image,
        /// package, instance, bandwidth or env
        family: String,
        /// A catalog overlay directory (repeatable)
        #[arg(long = "catalog", value_name = "DIR")]
        catalogs: Vec<PathBuf>,
        /// Output format
        #[arg(long, value_enum, default_value_t = TextOrJson::Text)]
        format: TextOrJson,
    },
    /// Write overlay TOML from upstream metadata (PyPI, NVIDIA redistrib manifests,
    /// NVIDIA's nvidia/cuda tag lists)
    #[command(
        after_help = "Examples:\n  gpustack catalog import pypi vllm==0.6.3.post1 --out site-catalog/\n  gpustack catalog import pypi torch==2.5.1 --index https://download.pytorch.org/whl/cu124\n  gpustack catalog import redist redistrib_12.6.3.json --date 2026-11-25\n  gpustack catalog import images --from supported-tags.md --from unsupported-tags.md\n  gpustack lock --catalog site-catalog/\n\nEvery entry records its source URL and the date it was read (--date, else the\nresponse's Date header). Facts upstream metadata does not carry (arch lists, driver\nminimums, rules) are kept from the catalog or left out, and listed; never guessed."
    )]
    Import {
        #[command(subcommand)]
        from: super::import::Command,
    },
    /// Load the catalog (and overlays) and check it; `--sources` reports what each fact cites
    #[command(
        after_help = "Examples:\n  gpustack catalog validate\n  gpustack catalog validate --catalog site-catalog/ --sources\n\n--sources counts facts (each `source` line) by the kind of source they cite and lists\nthe facts that cite only pages the public tools cannot open (docs.nvidia.com, …)."
    )]
    Validate {
        /// A catalog overlay directory (repeatable)
        #[arg(long = "catalog", value_name = "DIR")]
        catalogs: Vec<PathBuf>,
        /// Report the facts' sources by kind
        #[arg(long)]
        sources: bool,
    },
    /// What upstream has that the catalog lacks, per family
    #[command(
        after_help = "Examples:\n  gpustack catalog outdated\n  gpustack catalog outdated --format json\n  gpustack catalog outdated --redist redistrib_13.0.2.json\n\nPython families (torch, vllm, deepspeed, cuDNN and NCCL wheels, extras) are read from\nthe index; CUDA and cuDNN releases from the manifests given with --redist."
    )]
    Outdated {
        /// A catalog overlay directory (repeatable)
        #[arg(long = "catalog", value_name = "DIR")]
        catalogs: Vec<PathBuf>,
        /// The simple index to compare with
        #[arg(long, default_value = gpustack::import::PYPI, value_name = "URL")]
        index: String,
        /// An NVIDIA redistrib manifest, file or URL (repeatable)
        #[arg(long = "redist", value_name = "FILE_OR_URL")]
        redist: Vec<String>,
        /// Output format
        #[arg(long, value_enum, default_value_t = TextOrJson::Text)]
        format: TextOrJson,
        /// The date the report records as read (YYYY-MM-DD); default: the Date header
        #[arg(long, value_name = "YYYY-MM-DD")]
        date: Option<String>,
        #[command(flatten)]
        net: super::import::Network,
    },
}

pub(crate) fn run(what: Command) -> Result<u8, Error> {
    match what {
        Command::List { catalogs, format } => {
            let catalog = load_catalog(&catalogs)?;
            let _ = match format {
                TextOrJson::Json => stdout(&json_text(&show::list_json(&catalog))),
                TextOrJson::Text => out_text(&show::list(&catalog)),
            };
            Ok(0)
        }
        Command::Show {
            family,
            catalogs,
            format,
        } => show_family(&family, &catalogs, format),
        Command::Import { from } => super::import::run(from),
        Command::Validate { catalogs, sources } => {
            let catalog = load_catalog(&catalogs)?;
            let gaps = catalog.coverage();
            if !gaps.is_empty() {
                return Err(Error::Invalid(gaps));
            }
            let mut text = format!(
                "catalog valid: {} CUDA releases, {} torch builds, {} images\n",
                catalog.cuda.len(),
                catalog.torch.len(),
                catalog.images.len()
            );
            if sources {
                let mut files = gpustack::Catalog::stock_files();
                for dir in &catalogs {
                    files.extend(overlay_files(dir)?);
                }
                text.push('\n');
                text.push_str(&gpustack::catalog::sources::report(&files).to_string());
            }
            let _ = out_text(&text);
            Ok(0)
        }
        Command::Outdated {
            catalogs,
            index,
            redist,
            format,
            date,
            net,
        } => {
            let catalog = load_catalog(&catalogs)?;
            let http = net.client();
            let (manifests, _) = super::import::read_manifests(&http, &redist)?;
            if let Some(d) = &date {
                gpustack::import::check_date(d)?;
            }
            let report = gpustack::import::outdated::outdated(
                &http,
                &catalog,
                &index,
                &manifests,
                date.as_deref(),
            )?;
            let _ = match format {
                TextOrJson::Json => stdout(&format!(
                    "{}\n",
                    serde_json::to_string_pretty(&report.json()).unwrap_or_default()
                )),
                TextOrJson::Text => stdout(&report.text()),
            };
            Ok(0)
        }
    }
}

/// `catalog show FAMILY`; an unknown family gets the near miss and the list.
fn show_family(family: &str, catalogs: &[PathBuf], format: TextOrJson) -> Result<u8, Error> {
    let catalog = load_catalog(catalogs)?;
    let key = gpustack::error::name_key(family);
    let found = show::FAMILIES
        .iter()
        .find(|f| gpustack::error::name_key(f) == key);
    if let Some((f, t)) = found.and_then(|f| Some((*f, show::family(&catalog, f)?))) {
        let _ = match format {
            TextOrJson::Json => stdout(&json_text(&show::family_json(f, &t))),
            TextOrJson::Text => out_text(&t),
        };
        return Ok(0);
    }
    let mut d = Diagnostic::new(Stage::Usage, format!("unknown catalog family `{family}`"));
    // A component name shows its family (`flash-attn` → `extra`).
    let near = match Component::lookup(family) {
        Ok(c) if c.is_extra() => Some("extra"),
        _ => gpustack::error::did_you_mean(family, show::FAMILIES),
    };
    if let Some(s) = near {
        d = d.hint(format!("did you mean `gpustack catalog show {s}`?"));
    }
    Err(d
        .hint(format!("families are: {}", show::FAMILIES.join(", ")))
        .into())
}

/// An overlay directory's `*.toml` files as (path, text), in file-name order.
fn overlay_files(dir: &std::path::Path) -> Result<Vec<(String, String)>, Error> {
    let io = |e: std::io::Error| -> Error {
        Diagnostic::new(Stage::Io, format!("cannot read `{}`: {e}", dir.display())).into()
    };
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let text = super::read_text(
                &p,
                Stage::Catalog,
                "catalog file",
                "pass a catalog overlay directory",
            )?;
            Ok((p.display().to_string(), text))
        })
        .collect()
}
