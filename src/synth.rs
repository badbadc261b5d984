//! Synthetic catalogs for scaling measurements: the stock catalog with every versioned
//! entry copied so that each family holds `factor` times its stock versions. Used by
//! `tests/scale.rs` and `benches/scale.rs`; not part of the stable API, and never a source
//! of facts.
//!
//! # The transformation
//!
//! Copy `k` (1 ≤ k < factor) of a version gets one more numeric part, `9000 + k`, after its
//! release numbers, which are first padded to three parts: `12.4.1` → `12.4.1.9001`,
//! `3.11` → `3.11.0.9001`, `0.6.3.post1` → `0.6.3.9001.post1`,
//! `9.1.0.70` → `9.1.0.70.9001`. A copy therefore sorts right after its original and before
//! the next real release (the copies interleave with the real versions), and no copy can be
//! mistaken for a real release: no NVIDIA, PyTorch, vLLM, DeepSpeed or Python version has a
//! part of 9000 or more in that position.
//!
//! A copy keeps every other field of its original, and its cross-references point at copy
//! `k` of what the original references, so each copy `k` of the catalog is consistent on
//! its own and every stack of the stock catalog stays a solution:
//!
//! | family | copied | references rewritten to copy `k` |
//! |---|---|---|
//! | driver | each version of each branch (the branches stay) | — |
//! | cuda, cudnn, nccl, python, deepspeed | each `[[release]]` | — |
//! | torch | each `[[release]]` and `[[wheel]]` | a wheel's torch releases and its cuDNN / NCCL pins |
//! | vllm | each `[[release]]` | the exact torch pin |
//! | extra | each `[[extra]]` | a `torch = "==V"` requirement naming a catalog torch release |
//! | image | each `[[image]]` of a CUDA release | the CUDA release and the tags' prefix |
//! | package | each versioned `[[package]]` (not those that follow the driver) | the version inside `url`, pins and package lists |
//!
//! GPUs, operating systems, nvcc target sets, compatibility floors, cloud instances,
//! bandwidth figures and environment variables are not versioned and are left as they are.
//! Copies carry `source = "synthetic: gpustack::synth, not a fact"` (driver branches, which
//! hold real and synthetic versions in one entry, say so before their real source) and no
//! files, hashes or digests: an artifact hash cannot be made up.
//!
//! ```
//! let files = gpustack::synth::scaled_catalog(3);
//! let catalog = gpustack::Catalog::from_layers(&[files]).unwrap();
//! let stock = gpustack::Catalog::stock().unwrap();
//! assert_eq!(catalog.cuda.len(), 3 * stock.cuda.len());
//! assert!(catalog.cuda.iter().any(|c| c.version.as_str() == "12.4.1.9002"));
//! ```

use std::collections::BTreeSet;

use toml::{Table, Value};

use crate::Catalog;

/// The `source` of every synthetic entry.
pub const SOURCE: &str = "synthetic: gpustack::synth, not a fact";

/// A request with no solution that makes the explainer work hardest: an installed driver
/// (every catalog driver above it is a candidate upgrade), five pinned components with three
/// independent conflicts (vLLM's exact torch pin against `torch`, Python 3.14 against that
/// torch and vLLM's range, CUDA 13 against a Volta GPU and the pinned torch), so that no
/// driver upgrade and no single relaxed requirement resolves and every pair is tried, and
/// DeepSpeed and vLLM, whose removal is tried too.
///
/// ```
/// let catalog = gpustack::Catalog::stock()?;
/// let err = gpustack::lock_spec(&catalog, "gpustack.toml", gpustack::synth::WORST_CASE_SPEC)
///     .unwrap_err();
/// assert!(matches!(err, gpustack::Error::NoSolution(_)));
/// # Ok::<(), gpustack::Error>(())
/// ```
pub const WORST_CASE_SPEC: &str = r#"[stack]
name = "worst-case-conflict"

[hardware]
gpus = ["v100"]
driver = "535.54.03"

[components]
cuda = "13"
python = "3.14"
torch = ">=2.6"
vllm = "0.6.3.post1"
deepspeed = "0.12.0"
"#;

/// Versioned entries per family, in a fixed order: `driver`, `cuda`, `cudnn`, `nccl`,
/// `python`, `torch` (releases), `torch-wheel` (release + variant builds), `vllm`,
/// `deepspeed`, `extra`, `image`, `package` (those with a version).
///
/// ```
/// let stock = gpustack::Catalog::stock().unwrap();
/// let counts = gpustack::synth::version_counts(&stock);
/// assert_eq!(counts[1], ("cuda", stock.cuda.len()));
/// ```
pub fn version_counts(c: &Catalog) -> Vec<(&'static str, usize)> {
    vec![
        ("driver", c.drivers.len()),
        ("cuda", c.cuda.len()),
        ("cudnn", c.cudnn.len()),
        ("nccl", c.nccl.len()),
        ("python", c.python.len()),
        ("torch", c.torch_releases.len()),
        ("torch-wheel", c.torch.len()),
        ("vllm", c.vllm.len()),
        ("deepspeed", c.deepspeed.len()),
        ("extra", c.extras.len()),
        ("image", c.images.len()),
        (
            "package",
            c.packages.iter().filter(|p| p.version.is_some()).count(),
        ),
    ]
}

/// The first synthetic part: copy `k` gets `BASE + k`.
const BASE: usize = 9000;

/// Copy `k` (≥ 1) of a catalog version string: see the module documentation.
///
/// ```
/// use gpustack::synth::synthetic_version;
/// assert_eq!(synthetic_version("550.54.15", 1), "550.54.15.9001");
/// assert_eq!(synthetic_version("3.11", 2), "3.11.0.9002");
/// assert_eq!(synthetic_version("0.6.3.post1", 3), "0.6.3.9003.post1");
/// assert_eq!(synthetic_version("4.7.1-4.9.0", 1), "4.7.1.9001-4.9.0");
/// ```
pub fn synthetic_version(version: &str, copy: usize) -> String {
    let b = version.as_bytes();
    let mut i = 0;
    let mut parts = 0;
    loop {
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if start == i {
            break;
        }
        parts += 1;
        if i + 1 < b.len() && b[i] == b'.' && b[i + 1].is_ascii_digit() {
            i += 1;
        } else {
            break;
        }
    }
    let (release, rest) = version.split_at(i);
    let mut out = release.to_string();
    for _ in parts..3 {
        out.push_str(".0");
    }
    out.push_str(&format!(".{}{rest}", BASE + copy));
    out
}

/// The stock catalog's files with `factor` times the versions of each versioned family
/// (`factor` ≥ 1; 1 gives the stock files unchanged). Each file is named
/// `synthetic/x<factor>/<stock file name>`; the list loads with
/// [`Catalog::from_layers`]`(&[files])`, or as a `--catalog` overlay directory over the
/// stock catalog (the copies add entries, the rest replaces stock entries with equal ones).
///
/// ```
/// let files = gpustack::synth::scaled_catalog(2);
/// assert!(files.iter().all(|(name, _)| name.starts_with("synthetic/x2/")));
/// let catalog = gpustack::Catalog::from_layers(&[files]).unwrap();
/// assert_eq!(catalog.torch.len(), 2 * gpustack::Catalog::stock().unwrap().torch.len());
/// ```
pub fn scaled_catalog(factor: usize) -> Vec<(String, String)> {
    let factor = factor.max(1);
    let stock = Catalog::stock_files();
    let parsed: Vec<(String, String, Table)> = stock
        .into_iter()
        .map(|(path, text)| {
            let table: Table = toml::from_str(&text).expect("the stock catalog parses");
            (path, text, table)
        })
        .collect();
    // Torch releases, for extras' `==V` requirements.
    let torch_releases: BTreeSet<String> = parsed
        .iter()
        .filter(|(_, _, t)| family(t) == "torch")
        .flat_map(|(_, _, t)| entries(t, "release"))
        .filter_map(|e| str_field(e, "version"))
        .collect();
    parsed
        .into_iter()
        .map(|(path, text, table)| {
            let name = path.rsplit('/').next().unwrap_or(&path).to_string();
            let shown = format!("synthetic/x{factor}/{name}");
            if factor == 1 {
                return (shown, text);
            }
            let fam = family(&table).to_string();
            let out = if fam == "driver" {
                driver_file(table, factor)
            } else {
                let extra = copies(&fam, &table, factor, &torch_releases);
                if extra.is_empty() {
                    text
                } else {
                    let tail = toml::to_string(&extra).expect("synthetic entries serialize");
                    format!("{text}\n# Synthetic copies (gpustack::synth), not facts.\n{tail}")
                }
            };
            (shown, out)
        })
        .collect()
}

fn family(t: &Table) -> &str {
    t.get("family").and_then(Value::as_str).unwrap_or("")
}

fn entries<'a>(t: &'a Table, key: &str) -> impl Iterator<Item = &'a Table> + 'a {
    t.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_table)
}

fn str_field(t: &Table, key: &str) -> Option<String> {
    t.get(key).and_then(Value::as_str).map(str::to_string)
}

/// Marks a copy as synthetic: the source, a note naming the original, no files or hashes.
fn mark(e: &mut Table, original: &str) {
    e.insert("source".into(), Value::String(SOURCE.into()));
    e.insert(
        "note".into(),
        Value::String(format!(
            "synthetic copy of `{original}`: every other field as that entry"
        )),
    );
    for k in [
        "files",
        "sha256",
        "digests",
        "digest",
        "image_digest",
        "image_digest_observed",
        "image_digest_source",
        "image_digest_kind",
        "minimum_safe",
    ] {
        e.remove(k);
    }
}

fn set_str(e: &mut Table, key: &str, v: String) {
    e.insert(key.into(), Value::String(v));
}

/// The driver file, rewritten: each branch lists its versions and their copies.
fn driver_file(mut table: Table, factor: usize) -> String {
    if let Some(Value::Array(branches)) = table.get_mut("branch") {
        for b in branches.iter_mut().filter_map(Value::as_table_mut) {
            let versions: Vec<String> = entries_str(b, "versions");
            let mut all: Vec<Value> = versions.iter().cloned().map(Value::String).collect();
            for v in &versions {
                for k in 1..factor {
                    all.push(Value::String(synthetic_version(v, k)));
                }
            }
            b.insert("versions".into(), Value::Array(all));
            let real = str_field(b, "source").unwrap_or_default();
            set_str(
                b,
                "source",
                format!(
                    "{SOURCE} (versions with a part of 9001 or more); the other versions: {real}"
                ),
            );
        }
    }
    let body = toml::to_string(&table).expect("the driver file serializes");
    format!("# Synthetic catalog (gpustack::synth): driver versions with a part of 9001 or more are not facts.\n{body}")
}

fn entries_str(t: &Table, key: &str) -> Vec<String> {
    t.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

/// The synthetic entries of one (non-driver) file, as a table of entry arrays.
fn copies(fam: &str, table: &Table, factor: usize, torch_releases: &BTreeSet<String>) -> Table {
    let versioned = matches!(
        fam,
        "cuda" | "cudnn" | "nccl" | "python" | "deepspeed" | "torch" | "vllm"
    );
    let mut out = Table::new();
    let mut add = |key: &str, copies: Vec<Table>| {
        if !copies.is_empty() {
            out.insert(
                key.to_string(),
                Value::Array(copies.into_iter().map(Value::Table).collect()),
            );
        }
    };
    if versioned {
        add("release", release_copies(fam, table, factor));
    }
    match fam {
        "torch" => add("wheel", wheel_copies(table, factor)),
        "extra" => add("extra", extra_copies(table, factor, torch_releases)),
        "image" => add("image", image_copies(table, factor)),
        "package" => add("package", package_copies(table, factor)),
        _ => {}
    }
    out
}

/// Copies of each `[[release]]` (vLLM's exact torch pin follows to copy `k`).
fn release_copies(fam: &str, table: &Table, factor: usize) -> Vec<Table> {
    let mut out = Vec::new();
    for r in entries(table, "release") {
        let Some(v) = str_field(r, "version") else {
            continue;
        };
        for k in 1..factor {
            let mut e = r.clone();
            set_str(&mut e, "version", synthetic_version(&v, k));
            if fam == "vllm" {
                if let Some(t) = str_field(r, "torch") {
                    set_str(&mut e, "torch", synthetic_version(&t, k));
                }
            }
            mark(&mut e, &format!("{fam} {v}"));
            out.push(e);
        }
    }
    out
}

/// Copies of each torch `[[wheel]]`: its torch releases and cuDNN / NCCL pins to copy `k`.
fn wheel_copies(table: &Table, factor: usize) -> Vec<Table> {
    let mut out = Vec::new();
    for w in entries(table, "wheel") {
        let releases = entries_str(w, "torch");
        let variant = str_field(w, "variant").unwrap_or_default();
        for k in 1..factor {
            let mut e = w.clone();
            let syn: Vec<Value> = releases
                .iter()
                .map(|t| Value::String(synthetic_version(t, k)))
                .collect();
            e.insert("torch".into(), Value::Array(syn));
            for pin in ["cudnn", "nccl"] {
                if let Some(p) = str_field(w, pin) {
                    set_str(&mut e, pin, synthetic_version(&p, k));
                }
            }
            mark(
                &mut e,
                &format!("torch wheel {} +{variant}", releases.join(", ")),
            );
            out.push(e);
        }
    }
    out
}

/// Copies of each `[[extra]]`; a `torch = "==V"` naming a catalog torch release follows.
fn extra_copies(table: &Table, factor: usize, torch_releases: &BTreeSet<String>) -> Vec<Table> {
    let mut out = Vec::new();
    for x in entries(table, "extra") {
        let (Some(name), Some(v)) = (str_field(x, "name"), str_field(x, "version")) else {
            continue;
        };
        for k in 1..factor {
            let mut e = x.clone();
            set_str(&mut e, "version", synthetic_version(&v, k));
            if let Some(req) = str_field(x, "torch") {
                if let Some(t) = req.strip_prefix("==").map(str::trim) {
                    if torch_releases.contains(t) {
                        set_str(&mut e, "torch", format!("=={}", synthetic_version(t, k)));
                    }
                }
            }
            mark(&mut e, &format!("{name} {v}"));
            out.push(e);
        }
    }
    out
}

/// Copies of each `[[image]]` of a CUDA release: the release and the tags' prefix.
fn image_copies(table: &Table, factor: usize) -> Vec<Table> {
    let mut out = Vec::new();
    for i in entries(table, "image") {
        let (Some(cuda), Some(os)) = (str_field(i, "cuda"), str_field(i, "os")) else {
            continue;
        };
        for k in 1..factor {
            let mut e = i.clone();
            let syn = synthetic_version(&cuda, k);
            let tags: Vec<Value> = entries_str(i, "tags")
                .iter()
                .map(|t| {
                    Value::String(match t.strip_prefix(cuda.as_str()) {
                        Some(rest) => format!("{syn}{rest}"),
                        None => t.clone(),
                    })
                })
                .collect();
            e.insert("tags".into(), Value::Array(tags));
            set_str(&mut e, "cuda", syn);
            mark(&mut e, &format!("image {cuda} {os}"));
            out.push(e);
        }
    }
    out
}

/// Copies of each versioned `[[package]]`: the version inside `url`, pins and package lists.
fn package_copies(table: &Table, factor: usize) -> Vec<Table> {
    let mut out = Vec::new();
    for p in entries(table, "package") {
        let (Some(name), Some(v)) = (str_field(p, "name"), str_field(p, "version")) else {
            continue; // follows the driver: one entry per package name
        };
        for k in 1..factor {
            let mut e = p.clone();
            let syn = synthetic_version(&v, k);
            for key in ["url", "apt_pin"] {
                if let Some(s) = str_field(p, key) {
                    set_str(&mut e, key, s.replace(&v, &syn));
                }
            }
            for key in ["apt_packages", "dnf_packages"] {
                if p.contains_key(key) {
                    let list: Vec<Value> = entries_str(p, key)
                        .iter()
                        .map(|s| Value::String(s.replace(&v, &syn)))
                        .collect();
                    e.insert(key.into(), Value::Array(list));
                }
            }
            set_str(&mut e, "version", syn);
            mark(&mut e, &format!("package {name} {v}"));
            out.push(e);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_interleave_with_real_versions() {
        use crate::Version;
        let v = |s: &str| Version::parse(s).unwrap();
        for (real, next) in [
            ("12.4.1", "12.5.0"),
            ("3.11", "3.12"),
            ("0.6.3.post1", "0.6.4"),
            ("9.1.0.70", "9.1.1.17"),
            ("2.21.5-1", "2.21.6"),
        ] {
            let a = v(&synthetic_version(real, 1));
            let b = v(&synthetic_version(real, 99));
            assert!(v(real) < a && a < b && b < v(next), "{real}: {a} {b}");
        }
    }

    #[test]
    fn factor_one_is_the_stock_text() {
        let stock = Catalog::stock_files();
        let one = scaled_catalog(1);
        assert_eq!(one.len(), stock.len());
        for ((p, t), (q, u)) in stock.iter().zip(&one) {
            assert!(q.ends_with(p.rsplit('/').next().unwrap()), "{p} {q}");
            assert_eq!(t, u, "{p}");
        }
    }
}
