//! Build script: builds the stock catalog (`catalog/*.toml`) ahead of time, so that
//! `gpustack` neither parses ~190 KB of TOML nor validates and indexes the result at every
//! start (together they were most of a cold `gpustack lock`).
//!
//! It compiles the library's own catalog modules (`src/catalog/`, with the `core` and
//! `error` modules they use) rather than a copy of them:
//! * every file is parsed with the library's wire types (`wire.rs`, strict: unknown fields
//!   are errors) and encoded with its codec (`codec.rs`); a file that does not parse fails
//!   the build with `catalog/<file>:line:column`;
//! * that encoding is decoded, ingested and validated exactly as the library does for an
//!   overlay's layers (`ingest.rs`, `stack.rs`), and the validated [`Catalog`] is written
//!   as data (`snapshot.rs`), which the library decodes at start. Should the stock catalog
//!   not validate, no snapshot is written (a `cargo:warning` says so): the library then
//!   validates at run time and reports every problem with `file:line`, as `cargo test` does.
//!
//! Overlays (`--catalog DIR`) are still parsed and validated at run time, over the stock
//! files' encoding.
//!
//! It also embeds the generators' templates (`generators/**/*.j2`) as `templates.rs`, so
//! the binary renders from any directory.
//!
//! Writes to `OUT_DIR`:
//! * `stock.bin`: the encoded files;
//! * `stock-model.bin`: the validated catalog (empty when it does not validate);
//! * `stock.rs`: `STOCK` (display path, text of each file, for diagnostics and line numbers)
//!   `STOCK_BLOB` (`stock.bin`), `STOCK_MODEL` (`stock-model.bin`), and the catalog's
//!   identity (`STOCK_DIGEST`, `STOCK_DATE`: `identity.rs`), included by
//!   `src/catalog/mod.rs`.
//!
//! Lives under `src/` so that it is part of the published package (`include = ["src/**"]`),
//! and at its top so that `mod core;`, `mod error;` and `mod catalog { mod … }` below find
//! the library's files where the library does.

// A build script talks to cargo through stdout and stderr. It compiles whole library
// modules for a few of their functions.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    dead_code,
    unused_imports,
    unused_macros,
    unreachable_pub
)]

mod core;
mod error;

/// The library's catalog modules that build and encode a validated catalog.
mod catalog {
    mod codec;
    mod deploy;
    mod env_names;
    mod extras;
    mod identity;
    mod ingest;
    mod model;
    mod snapshot;
    mod stack;
    mod validate;
    mod wire;

    // What the library's `catalog/mod.rs` re-exports, which these modules name through it.
    use model::*;

    pub(crate) use codec::encode_files;
    pub(crate) use identity::identity;
    pub(crate) use model::Catalog;
    pub(crate) use wire::FileWire;

    /// The stock catalog, validated, as `snapshot.rs` writes it, or the problems found.
    /// `blob` is what [`encode_files`] wrote (leaked: validated entries borrow their
    /// canonical text from it, as they borrow from the executable's copy at run time).
    pub(crate) fn model(
        blob: &'static [u8],
        texts: &[(String, String)],
    ) -> Result<Vec<u8>, Vec<String>> {
        let files = codec::decode_files(blob)
            .ok_or_else(|| vec!["the encoded stock catalog does not decode".to_string()])?;
        let mut layer = ingest::Layers::default();
        let mut diags = Vec::new();
        ingest::ingest_stock(
            files,
            texts.iter().map(|(p, t)| (p.as_str(), t.as_str())),
            &mut layer,
            &mut diags,
        );
        let catalog = stack::build(layer, &mut diags);
        if !diags.is_empty() {
            return Err(diags.iter().map(ToString::to_string).collect());
        }
        snapshot::encode(&catalog, blob)
            .ok_or_else(|| vec!["the stock catalog has a value from outside it".to_string()])
    }
}

/// `error.rs` formats an unsatisfiable request with the solver's explanation
/// (`src/solve/explain.rs`), which a build script never makes.
impl std::fmt::Display for error::Explanation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("no solution")
    }
}

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let dir = root.join("catalog");
    println!("cargo:rerun-if-changed=catalog");
    for compiled in [
        "src/build.rs",
        "src/catalog",
        "src/core",
        "src/error.rs",
        "src/error",
    ] {
        println!("cargo:rerun-if-changed={compiled}");
    }

    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| fail(&[format!("cannot read {}: {e}", dir.display())]))
        .map(|e| {
            e.unwrap_or_else(|e| fail(&[format!("cannot read {}: {e}", dir.display())]))
                .file_name()
                .into_string()
                .unwrap_or_else(|n| fail(&[format!("catalog file name {n:?} is not UTF-8")]))
        })
        .filter(|n| n.ends_with(".toml") && dir.join(n).is_file())
        .collect();
    names.sort();

    let mut errors = Vec::new();
    let mut files = Vec::new();
    let mut stock_rs = String::from(
        "/// The embedded stock catalog: (display path, contents). Generated by `build.rs`.\n\
         const STOCK: &[(&str, &str)] = &[\n",
    );
    for name in &names {
        let display = format!("catalog/{name}");
        let path = dir.join(name);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                errors.push(format!("{display}: cannot read: {e}"));
                continue;
            }
        };
        match toml::from_str::<catalog::FileWire>(&text) {
            Ok(f) => files.push((display.clone(), text, f)),
            Err(e) => errors.push(format!("{display}: {e}")),
        }
        let abs = path
            .to_str()
            .unwrap_or_else(|| fail(&[format!("path {} is not UTF-8", path.display())]));
        let _ = writeln!(stock_rs, "    ({display:?}, include_str!({abs:?})),");
    }
    if !errors.is_empty() {
        fail(&errors);
    }
    stock_rs.push_str(
        "];\n\n\
         /// The stock catalog's files, parsed at build time (`codec.rs` layout).\n\
         static STOCK_BLOB: &[u8] = include_bytes!(concat!(env!(\"OUT_DIR\"), \"/stock.bin\"));\n\
         /// The stock catalog validated at build time (`snapshot.rs` layout; empty when it\n\
         /// does not validate).\n\
         static STOCK_MODEL: &[u8] = include_bytes!(concat!(env!(\"OUT_DIR\"), \"/stock-model.bin\"));\n",
    );
    let (digest, date) = catalog::identity(files.iter().map(|(p, t, _)| (p.as_str(), t.as_str())));
    let _ = write!(
        stock_rs,
        "\n/// The stock catalog's identity (`identity.rs`), computed at build time.\n\
         const STOCK_DIGEST: &str = {digest:?};\n\
         /// The newest date the stock catalog's sources record as read.\n\
         const STOCK_DATE: Option<&str> = {date:?};\n"
    );
    let blob: &'static [u8] = Vec::leak(catalog::encode_files(&files));
    let texts: Vec<(String, String)> = files.into_iter().map(|(p, t, _)| (p, t)).collect();
    let model = catalog::model(blob, &texts).unwrap_or_else(|problems| {
        // Not a build failure: the library validates at run time instead and reports every
        // problem where it is, which is how `cargo test` shows them.
        for p in problems.iter().take(5) {
            println!(
                "cargo:warning=the stock catalog does not validate: {}",
                p.lines().next().unwrap_or_default()
            );
        }
        Vec::new()
    });
    write(&out_dir.join("stock.bin"), blob);
    write(&out_dir.join("stock-model.bin"), &model);
    write(&out_dir.join("stock.rs"), stock_rs.as_bytes());
    embed_templates(&root, &out_dir);
}

/// `templates.rs`: `TEMPLATES`, every `generators/**/*.j2` as (name relative to
/// `generators/`, contents), sorted by name.
fn embed_templates(root: &Path, out_dir: &Path) {
    let dir = root.join("generators");
    println!("cargo:rerun-if-changed=generators");
    let mut found = Vec::new();
    let mut stack = vec![dir.clone()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                println!("cargo:rerun-if-changed={}", p.display());
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "j2") {
                let rel = p
                    .strip_prefix(&dir)
                    .expect("under generators/")
                    .to_str()
                    .unwrap_or_else(|| {
                        fail(&[format!("template path {} is not UTF-8", p.display())])
                    })
                    .replace('\\', "/");
                found.push((rel, p));
            }
        }
    }
    found.sort();
    let mut rs = String::from(
        "/// Every template under `generators/`: (name, contents). Generated by `build.rs`.\n\
         pub(crate) const TEMPLATES: &[(&str, &str)] = &[\n",
    );
    for (rel, p) in &found {
        let abs = p.to_str().expect("checked above");
        let _ = writeln!(rs, "    ({rel:?}, include_str!({abs:?})),");
    }
    rs.push_str("];\n");
    write(&out_dir.join("templates.rs"), rs.as_bytes());
}

fn write(path: &Path, bytes: &[u8]) {
    if let Err(e) = std::fs::write(path, bytes) {
        fail(&[format!("cannot write {}: {e}", path.display())]);
    }
}

/// Stops the build with the stock catalog's errors.
fn fail(errors: &[String]) -> ! {
    eprintln!("error: the stock catalog (catalog/*.toml) does not parse:");
    for e in errors {
        eprintln!("{e}");
    }
    std::process::exit(1);
}
