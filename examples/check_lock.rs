//! A custom CI tool built on gpustack's checks: fail the build on any error finding, and
//! print the findings in a site's own one-line format.
//!
//! ```text
//! cargo run --example check_lock -- gpustack.lock out/
//! ```
//!
//! Findings are data ([`gpustack::check::Finding`]: a typed code, a file and line, a
//! message), so a tool can filter, count or route them however it likes. Here: ignore the
//! `unpinned` warning the site accepts, and print the rest.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;

use gpustack::check::{check, Code, Inputs, Severity};
use gpustack::Catalog;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let lock_path = args.next().unwrap_or_else(|| "gpustack.lock".into());
    let out_dir = args.next();
    match run(&lock_path, out_dir.as_deref()) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
    }
}

fn run(lock_path: &str, out_dir: Option<&str>) -> Result<u8, Box<dyn std::error::Error>> {
    let catalog = Catalog::stock()?;
    let lock_text = std::fs::read_to_string(lock_path)?;
    let tree = match out_dir {
        Some(d) => Some(gpustack::emit::read_tree(std::path::Path::new(d))?),
        None => None,
    };
    let report = check(&Inputs {
        lock: (lock_path, &lock_text),
        spec: None,
        catalog: &catalog,
        out: out_dir.zip(tree.as_ref()),
        hardware: None,
    })?;
    let mut failed = false;
    for f in report.findings.iter().filter(|f| f.code != Code::Unpinned) {
        failed |= f.severity == Severity::Error;
        let at = match (&f.file, f.line) {
            (Some(file), Some(line)) => format!("{file}:{line}"),
            (Some(file), None) => file.clone(),
            _ => "-".into(),
        };
        println!("{at}\t{}\t{}", f.code.name(), f.message);
    }
    println!(
        "{}: {} error(s), {} warning(s)",
        report.lock,
        report.errors(),
        report.warnings()
    );
    Ok(u8::from(failed))
}
