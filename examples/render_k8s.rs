//! Rendering a target in memory: lock an example spec, then render the Kubernetes target
//! with `gpustack::plan::generate`. Nothing is written: the files come back as
//! `RenderedFile { path, contents, executable }` values, to be written, diffed or uploaded
//! by your own tool (`gpustack::emit` has the CLI's atomic writer).
//!
//! ```console
//! $ cargo run --example render_k8s                       # fixtures/specs/h100-ib-train-serve.toml
//! $ cargo run --example render_k8s -- path/to/gpustack.toml
//! ```
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::fmt::Write as _;

use gpustack::plan::Target;
use gpustack::Catalog;

fn main() {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "fixtures/specs/h100-ib-train-serve.toml".to_string());
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: cannot read `{path}`: {e}");
            std::process::exit(2);
        }
    };
    match Catalog::stock().and_then(|catalog| run(&catalog, &path, &text)) {
        Ok(report) => print!("{report}"),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(e.exit_code());
        }
    }
}

/// Locks the spec `text` (read from `path`, used in messages) and lists the Kubernetes
/// files rendered from the lock: size, path, and whether it is executable.
pub(crate) fn run(catalog: &Catalog, path: &str, text: &str) -> Result<String, gpustack::Error> {
    // Parse + solve + lock, as `gpustack lock` does (without writing gpustack.lock).
    let lock = gpustack::lock_spec(catalog, path, text)?;
    // Generation reads the lock only; `Lock::parse` of a committed gpustack.lock works too.
    let files = gpustack::plan::generate(&lock, Target::K8s)?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} files for target `{}`:",
        files.len(),
        Target::K8s.name()
    );
    for f in &files {
        let mode = if f.executable { "  (executable)" } else { "" };
        let _ = writeln!(out, "{:>7} bytes  {}{mode}", f.contents.len(), f.path);
    }
    Ok(out)
}
