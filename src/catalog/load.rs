//! Reading the catalog: the stock catalog from the data the build script pre-parsed, site
//! overlays from directories (walked in file-name order, symbolic links not followed), then
//! every layer ingested, merged by key and validated.

use std::path::Path;

use super::ingest::{ingest_stock, merge, parse_file, Layers};
use super::model::{Catalog, StockIdentity};
use super::stack::build;
use super::{codec, snapshot, STOCK, STOCK_BLOB, STOCK_DATE, STOCK_DIGEST, STOCK_MODEL};
use crate::core::fs::{limits, read_bounded, ReadError};
use crate::error::{Diagnostic, Error, Location, Stage};

impl Catalog {
    /// The embedded stock catalog.
    ///
    /// ```
    /// let catalog = gpustack::Catalog::stock().unwrap();
    /// assert!(catalog.gpu("H100").is_some());
    /// ```
    pub fn stock() -> Result<Catalog, Error> {
        Catalog::load(&[])
    }

    /// What identifies the built-in catalog, for `gpustack --version`: a digest over its
    /// files and the newest date one of its sources records as read.
    ///
    /// ```
    /// let id = gpustack::Catalog::stock_identity();
    /// assert!(id.digest.starts_with("sha256:") && id.digest.len() == 7 + 64);
    /// assert_eq!(id.files, gpustack::Catalog::stock_files().len());
    /// ```
    pub fn stock_identity() -> StockIdentity {
        StockIdentity {
            digest: STOCK_DIGEST.to_string(),
            date: STOCK_DATE.map(str::to_string),
            files: STOCK.len(),
        }
    }

    /// The stock catalog's files as (display path, TOML text), in file-name order: the input
    /// [`Catalog::from_layers`] takes, for tools that want to reorder or edit them.
    pub fn stock_files() -> Vec<(String, String)> {
        STOCK
            .iter()
            .map(|(p, t)| ((*p).to_string(), (*t).to_string()))
            .collect()
    }

    /// The stock catalog plus overlay directories, in order: an overlay entry with the key
    /// of an earlier entry replaces it, a new key adds an entry (the book's catalog chapter,
    /// "Overlays"). Every problem in every overlay is reported at once, at its `file:line`.
    ///
    /// ```
    /// use std::path::Path;
    /// let err = gpustack::Catalog::load(&[Path::new("no-such-dir")]).unwrap_err();
    /// assert!(err.to_string().starts_with("error: catalog overlay `no-such-dir` is not a directory"));
    /// ```
    pub fn load(overlays: &[&Path]) -> Result<Catalog, Error> {
        let mut sources: Vec<Vec<(String, String)>> = Vec::new();
        let mut diags = Vec::new();
        for dir in overlays {
            sources.push(read_overlay(dir, &mut diags));
        }
        if !diags.is_empty() {
            return Err(Error::Invalid(diags));
        }
        Catalog::assemble(true, &sources)
    }

    /// The stock catalog with in-memory overlay layers on top, each a list of (display
    /// path, TOML text): [`Catalog::load`] without the directories. The stock layer comes
    /// pre-parsed, as for [`Catalog::stock`].
    ///
    /// ```
    /// let site = vec![("site/env.toml".to_string(), "family = \"env\"\n\n[[env]]\nfabric = \"all\"\nname = \"NCCL_DEBUG\"\nvalue = \"WARN\"\nsource = \"site runbook\"\n".to_string())];
    /// let catalog = gpustack::Catalog::stock_with(&[site]).unwrap();
    /// assert!(catalog.env.iter().any(|e| e.name == "NCCL_DEBUG" && e.value == "WARN"));
    /// ```
    pub fn stock_with(overlays: &[Vec<(String, String)>]) -> Result<Catalog, Error> {
        Catalog::assemble(true, overlays)
    }

    /// Builds a catalog from in-memory layers: each a list of (display path, TOML text).
    /// The first layer is the base; later layers overlay it. Used by tests and by tools that
    /// keep catalogs elsewhere.
    pub fn from_layers(layers: &[Vec<(String, String)>]) -> Result<Catalog, Error> {
        Catalog::assemble(false, layers)
    }

    /// [`Catalog::from_layers`], with the embedded stock catalog as the first layer when
    /// `stock` is set. The stock layer comes pre-parsed (no TOML parsing at run time) and is
    /// then validated like any other layer.
    fn assemble(stock: bool, layers: &[Vec<(String, String)>]) -> Result<Catalog, Error> {
        if stock && layers.is_empty() {
            if let Some(catalog) = stock_model() {
                return Ok(catalog);
            }
        }
        let mut diags = Vec::new();
        let mut merged = Layers::default();
        if stock {
            let mut this = Layers::default();
            stock_layer(&mut this, &mut diags);
            merge(&mut merged, this);
        }
        for layer in layers {
            let mut this = Layers::default();
            for (path, text) in layer {
                parse_file(path, text, &mut this, &mut diags);
            }
            merge(&mut merged, this);
        }
        if !diags.is_empty() {
            return Err(Error::Invalid(diags));
        }
        let cat = build(merged, &mut diags);
        if diags.is_empty() {
            Ok(cat)
        } else {
            Err(Error::Invalid(diags))
        }
    }
}

/// A path for a message, control characters escaped (as `emit::shown` writes paths).
fn shown_path(path: &Path) -> String {
    crate::error::escape_control(&path.display().to_string()).into_owned()
}

fn read_overlay(dir: &Path, diags: &mut Vec<Diagnostic>) -> Vec<(String, String)> {
    let shown = shown_path(dir);
    if !dir.is_dir() {
        diags.push(
            Diagnostic::new(
                Stage::Catalog,
                format!("catalog overlay `{shown}` is not a directory"),
            )
            .hint("`--catalog` takes a directory of `*.toml` files"),
        );
        return Vec::new();
    }
    let mut out = Vec::new();
    // Symbolic links inside an overlay are ignored (the book's catalog chapter): not
    // followed, so an overlay cannot pull in files from elsewhere or loop.
    for entry in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                diags.push(Diagnostic::new(
                    Stage::Catalog,
                    format!("cannot read catalog overlay `{shown}`: {e}"),
                ));
                continue;
            }
        };
        if !entry.file_type().is_file() || entry.path().extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let rel = entry.path().strip_prefix(dir).unwrap_or(entry.path());
        let display = format!("{}/{}", shown.trim_end_matches('/'), shown_path(rel));
        match read_bounded(entry.path(), limits::CATALOG_FILE) {
            Err(ReadError::TooLarge(_)) => diags.push(
                Diagnostic::new(Stage::Catalog, "catalog file is larger than 8 MiB")
                    .at(Location::file(&display)),
            ),
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => out.push((display, text)),
                Err(e) => diags.push(
                    Diagnostic::new(
                        Stage::Catalog,
                        format!(
                            "catalog file is not UTF-8 (invalid byte at offset {})",
                            e.utf8_error().valid_up_to()
                        ),
                    )
                    .at(Location::file(&display))
                    .hint("save it as UTF-8, e.g. `iconv -f latin1 -t utf-8 FILE`"),
                ),
            },
            Err(e) => diags.push(
                Diagnostic::new(Stage::Catalog, format!("cannot read: {e}"))
                    .at(Location::file(&display)),
            ),
        }
    }
    out
}

/// The stock catalog as the build script validated it (`snapshot.rs`); none when it did
/// not validate there, and the stock files are then validated here, to report why.
fn stock_model() -> Option<Catalog> {
    if STOCK_MODEL.is_empty() {
        return None;
    }
    let catalog = snapshot::decode(STOCK_MODEL, STOCK_BLOB);
    debug_assert!(
        catalog.is_some(),
        "the stock catalog's snapshot does not decode"
    );
    catalog
}

/// The stock catalog's files, from the blob the build script wrote (falling back to parsing
/// the embedded TOML should the blob not match it, which the tests rule out).
fn stock_layer(out: &mut Layers, diags: &mut Vec<Diagnostic>) {
    match codec::decode_files(STOCK_BLOB) {
        Some(files)
            if files.len() == STOCK.len()
                && files.iter().zip(STOCK).all(|(d, (p, _))| d.path == *p) =>
        {
            ingest_stock(files, STOCK.iter().copied(), out, diags);
        }
        _ => {
            debug_assert!(false, "the pre-parsed stock catalog does not decode");
            for (path, text) in STOCK {
                parse_file(path, text, out, diags);
            }
        }
    }
}
