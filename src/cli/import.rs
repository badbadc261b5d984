//! `gpustack catalog import`: overlay TOML from upstream metadata (PyPI, NVIDIA redistrib
//! manifests, NVIDIA's `nvidia/cuda` tag lists).

use std::path::{Path, PathBuf};

use gpustack::error::{Diagnostic, Stage};
use gpustack::import::redist::Manifest;
use gpustack::import::{Fetch, Http, ImportError, Request};
use gpustack::Error;

use super::{load_catalog, read_text};
use crate::stdout;

/// The network flags of every command that reads upstream: one time budget, or no network.
#[derive(clap::Args)]
pub(crate) struct Network {
    /// The run's time budget in seconds, every request together (default 600)
    #[arg(long, value_name = "SECS")]
    timeout: Option<u64>,
    /// Fail instead of using the network (local files still work)
    #[arg(long)]
    offline: bool,
}

impl Network {
    /// The importers' client for this run.
    pub(crate) fn client(&self) -> Http {
        Http::with_timeout(self.offline, self.timeout)
    }
}

#[derive(clap::Subcommand)]
pub(crate) enum Command {
    /// Releases from a Python simple index (PEP 691/503 + PEP 658 metadata)
    Pypi {
        /// `NAME` (newest release) or `NAME==VERSION`: torch, vllm, deepspeed,
        /// nvidia-cudnn-cuXX, nvidia-nccl-cuXX or an extra's distribution
        #[arg(required = true, value_name = "NAME[==VERSION]")]
        requests: Vec<String>,
        /// The simple index (a PyTorch variant index gives `torch-<variant>.toml`)
        #[arg(long, default_value = gpustack::import::PYPI, value_name = "URL")]
        index: String,
        /// When --index is a mirror: the index URL the entries record (`files`, an
        /// extra's `index`), e.g. https://pypi.org/simple
        #[arg(long, value_name = "URL")]
        record_index: Option<String>,
        /// Overlay directory to write into (files are replaced whole)
        #[arg(long, default_value = "catalog-import", value_name = "DIR")]
        out: PathBuf,
        /// The catalog the overlay sits on (repeatable): facts not derived are kept from it
        #[arg(long = "catalog", value_name = "DIR")]
        catalogs: Vec<PathBuf>,
        /// The date entries record as read (YYYY-MM-DD); default: the Date header
        #[arg(long, value_name = "YYYY-MM-DD")]
        date: Option<String>,
        /// Do not also import the cuDNN/NCCL/torch releases a pin names
        #[arg(long)]
        no_follow: bool,
        #[command(flatten)]
        net: Network,
    },
    /// Installability facts of every PyPI release in catalog files, rewritten in place:
    /// `yanked` (PEP 592), `glibc_floor` (the release's and its dependencies' wheels),
    /// torch's `triton`, and cuDNN/NCCL `platforms` where PyPI has no Linux wheel
    Installability {
        /// The catalog directory whose torch.toml, vllm.toml, deepspeed.toml, extras.toml,
        /// cudnn.toml and nccl.toml are rewritten (other lines are left as they are)
        #[arg(long, default_value = "catalog", value_name = "DIR")]
        dir: PathBuf,
        /// Only these files (repeatable): `vllm.toml`, …
        #[arg(long = "only", value_name = "FILE")]
        only: Vec<String>,
        /// The simple index
        #[arg(long, default_value = gpustack::import::PYPI, value_name = "URL")]
        index: String,
        /// The date the facts record as read (YYYY-MM-DD); default: the Date header
        #[arg(long, value_name = "YYYY-MM-DD")]
        date: Option<String>,
        /// Report what would change; write nothing
        #[arg(long)]
        check: bool,
        #[command(flatten)]
        net: Network,
    },
    /// CUDA and cuDNN releases from NVIDIA `redistrib_X.Y.Z.json` manifests
    Redist {
        /// Manifest files or URLs
        #[arg(required = true, value_name = "FILE_OR_URL")]
        manifests: Vec<String>,
        /// Overlay directory to write into (files are replaced whole)
        #[arg(long, default_value = "catalog-import", value_name = "DIR")]
        out: PathBuf,
        /// The catalog the overlay sits on (repeatable): facts not derived are kept from it
        #[arg(long = "catalog", value_name = "DIR")]
        catalogs: Vec<PathBuf>,
        /// The date entries record as read (YYYY-MM-DD); default: the Date header of a
        /// URL, today for a file
        #[arg(long, value_name = "YYYY-MM-DD")]
        date: Option<String>,
        #[command(flatten)]
        net: Network,
    },
    /// `nvidia/cuda` image tags from NVIDIA's doc/supported-tags.md and
    /// doc/unsupported-tags.md (gitlab.com/nvidia/container-images/cuda)
    Images {
        /// The lists' URLs (at most one of each; the entries cite the URL)
        #[arg(value_name = "URL")]
        urls: Vec<String>,
        /// A list saved as a local file (repeatable)
        #[arg(long = "from", value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Where the --from files were published: the directory URL that holds
        /// supported-tags.md (a commit's, for a citable source)
        #[arg(long, default_value = gpustack::import::images::UPSTREAM_DOC, value_name = "URL")]
        origin: String,
        /// Overlay directory to write into (images.toml is replaced whole)
        #[arg(long, default_value = "catalog-import", value_name = "DIR")]
        out: PathBuf,
        /// The catalog the overlay sits on (repeatable): cuDNN and digests are kept from it
        #[arg(long = "catalog", value_name = "DIR")]
        catalogs: Vec<PathBuf>,
        /// The date entries record as read (YYYY-MM-DD); default: the Date header of a
        /// URL, today for a file
        #[arg(long, value_name = "YYYY-MM-DD")]
        date: Option<String>,
        #[command(flatten)]
        net: Network,
    },
}

pub(crate) fn run(from: Command) -> Result<u8, Error> {
    match from {
        Command::Pypi {
            requests,
            index,
            record_index,
            out,
            catalogs,
            date,
            no_follow,
            net,
        } => {
            let base = load_catalog(&catalogs)?;
            let http = net.client();
            let opts = gpustack::import::PypiOptions {
                index,
                record_index,
                date,
                follow_pins: !no_follow,
            };
            let imp = gpustack::import::import_pypi(&http, &base, &requests, &opts)?;
            write_import(&imp, &out, &catalogs)
        }
        Command::Installability {
            dir,
            only,
            index,
            date,
            check,
            net,
        } => installability(&dir, &only, index, date, check, &net),
        Command::Redist {
            manifests,
            out,
            catalogs,
            date,
            net,
        } => {
            let base = load_catalog(&catalogs)?;
            let http = net.client();
            let (parsed, header_date) = read_manifests(&http, &manifests)?;
            let date = dated(date.or(header_date));
            let imp = gpustack::import::redist::import(&base, &parsed, &date)?;
            write_import(&imp, &out, &catalogs)
        }
        Command::Images {
            urls,
            files,
            origin,
            out,
            catalogs,
            date,
            net,
        } => {
            if urls.is_empty() && files.is_empty() {
                return Err(ImportError::Usage(
                    "no tag list given: pass the lists' URLs or `--from FILE`".into(),
                )
                .into());
            }
            let base = load_catalog(&catalogs)?;
            let http = net.client();
            let mut lists = Vec::new();
            let mut header_date = None;
            for u in &urls {
                let (text, d) = fetch_text(&http, u)?;
                header_date = header_date.or(d);
                let dir = u.rsplit_once('/').map_or(u.as_str(), |(d, _)| d);
                lists.push(gpustack::import::images::parse(u, dir, &text)?);
            }
            for f in &files {
                let text = read_text(
                    f,
                    Stage::Usage,
                    "tag list",
                    "pass NVIDIA's doc/supported-tags.md or doc/unsupported-tags.md",
                )?;
                lists.push(gpustack::import::images::parse(
                    &f.display().to_string(),
                    &origin,
                    &text,
                )?);
            }
            let date = dated(date.or(header_date));
            let imp = gpustack::import::images::import(&base, &lists, &date)?;
            write_import(&imp, &out, &catalogs)
        }
    }
}

/// `catalog import installability`: the installability lines of the catalog files in
/// `dir` recomputed from the index and rewritten in place (`check`: only reported, exit 1
/// when a file would change).
fn installability(
    dir: &Path,
    only: &[String],
    index: String,
    date: Option<String>,
    check: bool,
    net: &Network,
) -> Result<u8, Error> {
    let base = load_catalog(&[dir.to_path_buf()])?;
    let http = net.client();
    let opts = gpustack::import::PypiOptions {
        index,
        record_index: None,
        date,
        follow_pins: false,
    };
    let mut files = Vec::new();
    for name in [
        "cudnn.toml",
        "deepspeed.toml",
        "extras.toml",
        "nccl.toml",
        "torch.toml",
        "vllm.toml",
    ] {
        if !only.is_empty() && !only.iter().any(|o| o == name) {
            continue;
        }
        let p = dir.join(name);
        if p.is_file() {
            let text = read_text(
                &p,
                Stage::Usage,
                "catalog file",
                "pass --dir DIR, a catalog directory",
            )?;
            files.push((name.to_string(), text));
        }
    }
    let r = gpustack::import::refresh_installability(&http, &base, &files, &opts)?;
    let mut text = String::new();
    for f in &r.files {
        let p = dir.join(&f.name);
        if !check {
            gpustack::emit::write_atomic(&p, f.contents.as_bytes())?;
        }
        text.push_str(&format!(
            "{} {}\n",
            if check { "would rewrite" } else { "rewrote" },
            p.display()
        ));
    }
    for c in &r.changed {
        text.push_str(&format!("  changed: {c}\n"));
    }
    for f in &r.failed {
        text.push_str(&format!("  not read: {f}\n"));
    }
    if !check && !r.files.is_empty() {
        load_catalog(&[dir.to_path_buf()])?;
    }
    let _ = stdout(&text);
    Ok(u8::from(check && !r.files.is_empty()))
}

/// The date given, else today (said on standard error).
fn dated(date: Option<String>) -> String {
    match date {
        Some(d) => d,
        None => {
            let d = gpustack::import::today();
            note!("note: no --date given; entries record today ({d}) as the day read");
            d
        }
    }
}

/// A URL's body as text, with the day its `Date` header gives.
fn fetch_text(http: &Http, url: &str) -> Result<(String, Option<String>), Error> {
    let r = http
        .fetch(&Request::get(url.to_string()))
        .map_err(ImportError::Fetch)?;
    if r.status != 200 {
        return Err(ImportError::Status {
            url: url.to_string(),
            status: r.status,
        }
        .into());
    }
    let date = r.date.as_deref().and_then(gpustack::import::http_date);
    Ok((String::from_utf8_lossy(&r.body).into_owned(), date))
}

/// Reads manifests from files or URLs, with the date the first URL's response gives.
pub(crate) fn read_manifests(
    http: &Http,
    sources: &[String],
) -> Result<(Vec<Manifest>, Option<String>), Error> {
    let mut out = Vec::new();
    let mut date = None;
    for s in sources {
        let text = if s.starts_with("https://") || s.starts_with("http://") {
            let (text, d) = fetch_text(http, s)?;
            date = date.or(d);
            text
        } else {
            read_text(
                Path::new(s),
                Stage::Usage,
                "manifest",
                "pass a redistrib_X.Y.Z.json file or its URL",
            )?
        };
        out.push(gpustack::import::redist::parse(s, &text)?);
    }
    Ok((out, date))
}

/// Writes an import's overlay files into `out`, checks that the overlay loads on top of
/// the base catalog, and prints the summary.
fn write_import(
    imp: &gpustack::import::Import,
    out: &Path,
    catalogs: &[PathBuf],
) -> Result<u8, Error> {
    let io = |e: std::io::Error, p: &Path| -> Error {
        Diagnostic::new(
            Stage::Io,
            format!("cannot write `{}`: {e}", gpustack::emit::shown(p)),
        )
        .into()
    };
    let created = gpustack::emit::create_dirs(out).map_err(|e| io(e, out))?;
    let files = imp.files();
    // Each file is replaced atomically (a temporary file renamed over it), and what it
    // held before is kept: an import whose overlay does not load is taken back whole, so
    // no unloadable overlay is left behind.
    let mut before: Vec<(PathBuf, Option<Vec<u8>>)> = Vec::new();
    let mut result: Result<(), Error> = Ok(());
    for f in &files {
        let p = out.join(&f.name);
        let old = std::fs::symlink_metadata(&p)
            .is_ok_and(|m| m.is_file())
            .then(|| std::fs::read(&p).ok())
            .flatten();
        if let Err(e) = gpustack::emit::write_atomic(&p, f.contents.as_bytes()) {
            result = Err(e.into());
            break;
        }
        before.push((p, old));
    }
    if result.is_ok() {
        let mut dirs = catalogs.to_vec();
        dirs.push(out.to_path_buf());
        result = load_catalog(&dirs).map(|_| ());
    }
    if let Err(mut e) = result {
        for (p, old) in before.iter().rev() {
            let _ = match old {
                Some(b) => gpustack::emit::write_atomic(p, b).map_err(|_| ()),
                None => std::fs::remove_file(p).map_err(|_| ()),
            };
        }
        gpustack::emit::remove_created(&created);
        if let Error::Invalid(ds) = &mut e {
            if let Some(d) = ds.last_mut() {
                d.hints.push(format!(
                    "nothing was imported: `{}` is as it was",
                    gpustack::emit::shown(out)
                ));
            }
        }
        return Err(e);
    }
    let mut text = String::new();
    for f in &files {
        text.push_str(&format!("wrote {}\n", out.join(&f.name).display()));
    }
    text.push_str(&imp.summary());
    let _ = stdout(&text);
    Ok(0)
}
