//! The subcommands, one file each. Each takes its parsed arguments and returns the exit
//! code; what it has to say goes through main.rs, the only code that prints: results with
//! [`crate::stdout`] or [`crate::out_text`], messages with `note!` and progress lines with
//! `info!`. Errors are returned, and main.rs prints them.
//!
//! Argument values with a fixed set of choices (formats, `gen` targets, shells) are
//! `clap::ValueEnum`s, so clap rejects a bad value with its own message listing the valid
//! ones (exit 2).

use std::path::{Path, PathBuf};

use gpustack::emit::limits;
use gpustack::error::Stage;
use gpustack::{Catalog, Error};

pub(crate) mod alloc;
pub(crate) mod catalog;
pub(crate) mod check;
pub(crate) mod completions;
pub(crate) mod diff;
pub(crate) mod gen;
pub(crate) mod import;
pub(crate) mod init;
pub(crate) mod lock;
pub(crate) mod matrix;
pub(crate) mod probe;
pub(crate) mod why;

/// `--format` of the commands that print text or JSON.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TextOrJson {
    Text,
    Json,
}

/// The catalog: the built-in one with the overlay directories on top (later ones win).
pub(crate) fn load_catalog(dirs: &[PathBuf]) -> Result<Catalog, Error> {
    let refs: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
    Catalog::load(&refs)
}

/// Reads a text input with the size limit for its kind.
pub(crate) fn read_text(
    path: &Path,
    stage: Stage,
    what: &str,
    hint: &str,
) -> Result<String, Error> {
    let limit = match stage {
        Stage::Spec if what == "spec" => limits::SPEC,
        Stage::Lock => limits::LOCK,
        _ => limits::HARDWARE,
    };
    Ok(gpustack::emit::read_text(path, stage, what, hint, limit)?)
}

/// The spec at `path`, read as `lock` and `matrix` read it.
pub(crate) fn read_spec(path: &Path) -> Result<String, Error> {
    read_text(
        path,
        Stage::Spec,
        "spec",
        "create one with `gpustack init`, or pass `--spec PATH`",
    )
}

/// JSON text with one trailing newline.
pub(crate) fn json_text(v: &serde_json::Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}

/// `1 file`, `2 files`.
pub(crate) fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
