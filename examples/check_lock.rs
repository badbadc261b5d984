//! A custom CI tool built on gpustack's checks: fail the build on any error finding, and
//! print the findings in a site's own one-line format.
//!
//! ```console
//! $ cargo run --example check_lock -- gpustack.lock out/
//! ```
//!
//! Findings are data ([`gpustack::check::Finding`]: a typed code, a file and line, a
//! message), so a tool can filter, count or route them however it likes. Here: ignore the
//! `unpinned` warning the site accepts, and print the rest.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use gpustack::check::{check, Code, Inputs, Severity};
use gpustack::Catalog;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let lock_path = args.next().unwrap_or_else(|| "gpustack.lock".into());
    let out_dir = args.next();
    match run(&lock_path, out_dir.as_deref()) {
        Ok((report, failed)) => {
            print!("{report}");
            ExitCode::from(u8::from(failed))
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
    }
}

/// Checks `lock_path` (and the generated files under `out_dir`); returns the report and
/// whether the build should fail.
pub(crate) fn run(
    lock_path: &str,
    out_dir: Option<&str>,
) -> Result<(String, bool), Box<dyn std::error::Error>> {
    let catalog = Catalog::stock()?;
    let lock_text = std::fs::read_to_string(lock_path)?;
    // The library never touches the filesystem on its own: read the tree, pass it in.
    let tree = match out_dir {
        Some(d) => Some(gpustack::emit::read_tree(Path::new(d))?),
        None => None,
    };
    let report = check(&Inputs {
        today: None,
        lock: (lock_path, &lock_text),
        spec: None,
        catalog: &catalog,
        out: out_dir.zip(tree.as_ref()),
        hardware: None,
        unusual: &[],
        pylocks: &Default::default(),
    })?;
    let mut out = String::new();
    let mut failed = false;
    for f in report.findings.iter().filter(|f| f.code != Code::Unpinned) {
        failed |= f.severity == Severity::Error;
        let at = match (&f.file, f.line) {
            (Some(file), Some(line)) => format!("{file}:{line}"),
            (Some(file), None) => file.clone(),
            _ => "-".into(),
        };
        writeln!(out, "{at}\t{}\t{}", f.code.name(), f.message)?;
    }
    writeln!(
        out,
        "{}: {} error(s), {} warning(s)",
        report.lock,
        report.errors(),
        report.warnings()
    )?;
    Ok((out, failed))
}
