//! Embedding the solver in your own tool: load the catalog (the stock one, plus overlay
//! directories given as arguments), build a spec in code, solve it, print each pick with
//! the facts that bound it, and write the lock to stdout.
//!
//! ```console
//! $ cargo run --example embed_solver                 # the stock catalog
//! $ cargo run --example embed_solver -- site-catalog # plus an overlay directory
//! ```
//!
//! The book's "Library API" chapter walks through the same steps.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::fmt::Write as _;
use std::path::Path;

use gpustack::version::VersionReq;
use gpustack::{Catalog, Component, Lock, Spec};

fn main() {
    let overlays: Vec<String> = std::env::args().skip(1).collect();
    let dirs: Vec<&Path> = overlays.iter().map(Path::new).collect();
    let result = Catalog::load(&dirs).and_then(|catalog| run(&catalog));
    match result {
        Ok(report) => print!("{report}"),
        Err(e) => {
            // The same text the CLI prints: `error: …`, `--> file:line:col`, hints.
            eprintln!("{e}");
            std::process::exit(e.exit_code());
        }
    }
}

/// Solves an in-code request against `catalog`; returns the report and the lock text.
pub(crate) fn run(catalog: &Catalog) -> Result<String, gpustack::Error> {
    // 1. The request. Build it as data (here from values an inventory could supply), then
    //    let `Spec::parse` validate it against the catalog: unknown GPUs, bad names and
    //    bad requirements come back as diagnostics, exactly as for a gpustack.toml.
    fn table<const N: usize>(entries: [(&str, toml::Value); N]) -> toml::Value {
        toml::Value::Table(
            entries
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        )
    }
    let gpus = ["H100", "a100"];
    let mut request = toml::Table::new();
    request.insert("stack".into(), table([("name", "embedded".into())]));
    request.insert(
        "hardware".into(),
        table([
            (
                "gpus",
                toml::Value::Array(gpus.iter().map(|g| (*g).into()).collect()),
            ),
            ("driver", "550.54.15".into()),
        ]),
    );
    request.insert(
        "components".into(),
        table([("cuda", "12.4".into()), ("torch", ">=2.4, <2.6".into())]),
    );
    let text = toml::to_string(&request).expect("a table of strings serializes");
    let mut spec = Spec::parse("embedded.toml", &text, catalog)?;

    // A parsed `Spec` is plain data: add a component with typed values.
    spec.components.insert(Component::Nccl, VersionReq::any());

    // 2. Solve. A request without a solution is `Error::NoSolution`, whose `Display` is
    //    the explanation with hints that `gpustack lock` prints.
    let resolution = gpustack::solve(catalog, &spec)?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "GPUs {} -> arch list {}",
        spec.gpus.join(", "),
        join(&resolution.arch_list)
    );
    for pick in &resolution.picks {
        let _ = writeln!(
            out,
            "{} {} (requested: {})",
            pick.component, pick.version, pick.requested
        );
        for why in &pick.because {
            let _ = writeln!(out, "    because {why}");
        }
    }

    // 3. The lock: the same bytes `gpustack lock --offline` writes for this request
    //    (offline resolution records where each digest and package pin came from).
    let mut lock = Lock::from_resolution(catalog, &resolution)?;
    let _ = gpustack::resolve::resolve(&mut lock, &gpustack::resolve::http::Offline, None);
    out.push_str("\n# ----- gpustack.lock -----\n");
    out.push_str(&lock.to_toml());
    Ok(out)
}

fn join(items: &[impl std::fmt::Display]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
