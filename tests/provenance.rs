//! Every catalog fact must cite something a reader can open: a URL or a public citation
//! (a repository at a commit, a package on PyPI), never a file that exists only on the
//! machine the catalog was written on. This test reads every string of every catalog file
//! (`source`, `note`, `description`) and fails on anything that looks like a machine path
//! or a private reference file.

mod common;

use common::*;

/// What a machine-local citation looks like: a private reference file anywhere, and in a
/// `source` also any absolute path outside a URL (a note may quote a path on the target
/// host, like MOFED's `/usr/mpi/gcc/openmpi-…`; a source may not point at one).
fn local_path(text: &str) -> Option<String> {
    marker(text).or_else(|| absolute_path(text))
}

fn marker(text: &str) -> Option<String> {
    const MARKERS: &[&str] = &[
        "/work/", // not-a-repo-path: what this check rejects
        "/home/",
        "/tmp/",
        "/Users/",
        "/root/",
        "file://",
        " ../",
        "(../",
        " ~/",
        "shared/reference",
        "-facts.md",
        "-facts.toml",
        "framework-facts",
        "cuda-stack-facts",
        "find_string",
    ];
    for m in MARKERS {
        if text.contains(m) || text.starts_with(m.trim_start_matches([' ', '('])) {
            return Some((*m).trim().to_string());
        }
    }
    None
}

fn absolute_path(text: &str) -> Option<String> {
    // An absolute path that is not part of a URL: `/` at the start of a word, followed by a
    // path segment and another `/` (`/usr/local/…`), not after `:` or `/` or a letter.
    let b = text.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        if c != b'/' {
            continue;
        }
        let prev = if i == 0 { b' ' } else { b[i - 1] };
        if prev.is_ascii_alphanumeric()
            || matches!(
                prev,
                b':' | b'/' | b'.' | b'-' | b'_' | b'<' | b'>' | b'=' | b'`'
            )
        {
            continue;
        }
        let rest = &text[i + 1..];
        let seg: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
            .collect();
        if !seg.is_empty() && rest[seg.len()..].starts_with('/') {
            return Some(format!("/{seg}/…"));
        }
    }
    None
}

fn strings<'a>(path: &str, v: &'a toml::Value, out: &mut Vec<(String, &'a str)>) {
    match v {
        toml::Value::String(s) => out.push((path.to_string(), s)),
        toml::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                strings(&format!("{path}[{i}]"), x, out);
            }
        }
        toml::Value::Table(t) => {
            for (k, x) in t {
                strings(&format!("{path}.{k}"), x, out);
            }
        }
        _ => {}
    }
}

#[test]
fn no_catalog_text_cites_a_machine_path_or_a_private_reference() {
    let root = root();
    let mut failures = Vec::new();
    let mut sources = 0;
    for dir in ["catalog", "catalog/pending"] {
        for path in sorted_files(&root.join(dir), "toml") {
            let name = path.strip_prefix(&root).unwrap().display().to_string();
            let text = std::fs::read_to_string(&path).unwrap();
            let value: toml::Value = toml::from_str(&text).unwrap();
            let mut all = Vec::new();
            strings("", &value, &mut all);
            for (key, s) in all {
                if key.ends_with(".source") {
                    sources += 1;
                }
                let found = if key.ends_with(".source") {
                    local_path(s)
                } else {
                    marker(s)
                };
                if let Some(m) = found {
                    failures.push(format!("{name} {key}: `{m}` in {s:?}"));
                }
            }
            for (n, line) in text.lines().enumerate() {
                if line.trim_start().starts_with('#') {
                    if let Some(m) = marker(line) {
                        failures.push(format!("{name}:{}: comment cites `{m}`", n + 1));
                    }
                }
            }
        }
    }
    assert!(sources > 500, "only {sources} sources read");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_local_path_check_catches_what_it_should() {
    for bad in [
        "/work/shared/reference/cuda-stack-facts.toml", // not-a-repo-path: rejected
        "see shared/reference/x.md",
        "framework-facts R6",
        "installed in /usr/local/lib/python3.12",
        "file:///etc/x",
    ] {
        assert!(local_path(bad).is_some(), "{bad}");
    }
    for good in [
        "https://docs.nvidia.com/cuda/archive/13.2.2/cuda-toolkit-release-notes/index.html",
        "pytorch/pytorch .ci/manywheel/build_cuda.sh @ 00c7a380",
        "op_builder/builder.py",
        "12.0+PTX and 13.0/13.1",
        "Requires-Python >=3.10",
    ] {
        assert!(local_path(good).is_none(), "{good}");
    }
}

/// No torch build in the catalog is unpickable: every `[[wheel]]` (in the stock catalog and
/// in `catalog/pending/`) carries the arch list it was compiled for. A build whose arch list
/// cannot be sourced is left out of the catalog (and listed in the file's description), not
/// listed with an empty one that the solver would silently skip.
#[test]
fn every_torch_build_has_an_arch_list() {
    let root = root();
    let mut failures = Vec::new();
    let mut builds = 0;
    for dir in ["catalog", "catalog/pending"] {
        for path in sorted_files(&root.join(dir), "toml") {
            let name = path.strip_prefix(&root).unwrap().display().to_string();
            let value: toml::Value =
                toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            if value.get("family").and_then(toml::Value::as_str) != Some("torch") {
                continue;
            }
            for w in value
                .get("wheel")
                .and_then(toml::Value::as_array)
                .into_iter()
                .flatten()
            {
                builds += 1;
                let list = w.get("arch_list").and_then(toml::Value::as_array);
                if list.is_none_or(|l| l.is_empty()) {
                    failures.push(format!(
                        "{name}: torch {} +{} has no arch list",
                        w.get("torch").map(ToString::to_string).unwrap_or_default(),
                        w.get("variant")
                            .and_then(toml::Value::as_str)
                            .unwrap_or("?"),
                    ));
                }
            }
        }
    }
    assert!(builds >= 30, "only {builds} torch builds read");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every CUDA (11.8 on) and cuDNN (8.9 on) release of NVIDIA's redistrib manifests that
/// the recorded listing names (`fixtures/import/redist/nixpkgs-manifests.txt`, the copies
/// nixpkgs keeps) has a catalog entry: a CUDA release by its exact version (a release known
/// only from its manifest is listed with `redist_only = true`), a cuDNN release by its
/// first three components (the manifest's label is `9.8.0`, the catalog's `9.8.0.87`).
#[test]
fn every_recorded_redist_manifest_is_in_the_catalog() {
    let root = root();
    let listing =
        std::fs::read_to_string(root.join("fixtures/import/redist/nixpkgs-manifests.txt")).unwrap();
    let versions = |family: &str| -> Vec<String> {
        let value: toml::Value = toml::from_str(
            &std::fs::read_to_string(root.join(format!("catalog/{family}.toml"))).unwrap(),
        )
        .unwrap();
        value
            .get("release")
            .and_then(toml::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|r| r.get("version").and_then(toml::Value::as_str))
            .map(str::to_string)
            .collect()
    };
    let (cuda, cudnn) = (versions("cuda"), versions("cudnn"));
    let nums = |v: &str| -> Vec<u64> { v.split('.').map(|p| p.parse().unwrap()).collect() };
    let mut missing = Vec::new();
    let mut read = 0;
    for line in listing
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let mut f = line.split_whitespace();
        let (product, label) = (f.next().unwrap(), f.next().unwrap());
        assert!(
            f.next().is_some_and(|c| c.len() == 40),
            "{line}: no nixpkgs commit"
        );
        read += 1;
        let n = nums(label);
        let found = match product {
            "cuda" if n < vec![11, 8] => continue,
            "cuda" => cuda.iter().any(|v| v == label),
            "cudnn" if n < vec![8, 9] => continue,
            "cudnn" => cudnn.iter().any(|v| nums(v).get(..3) == Some(&n[..])),
            other => panic!("{line}: unknown product {other}"),
        };
        if !found {
            missing.push(format!("{product} {label}"));
        }
    }
    assert!(read >= 20, "only {read} manifests listed");
    assert!(
        missing.is_empty(),
        "releases in NVIDIA's redistrib manifests with no catalog entry:\n{}",
        missing.join("\n")
    );
}

/// Every NCCL package build the catalog lists (`cuda_builds`, the `+cuda<X.Y>` of
/// `libnccl2=<v>-1+cuda<X.Y>`) is a CUDA minor the catalog knows, written `X.Y`, listed once
/// and in order, and named by the release's own `source`: the minor of a listed CUDA release,
/// or the first minor (`X.0`) of a listed CUDA major, which NVIDIA builds NCCL for to serve the
/// whole major (`+cuda11.0`). The lock picks the package build from this list, so a typo here
/// would name a package NVIDIA never published.
#[test]
fn every_nccl_cuda_build_is_a_known_cuda_minor_and_cited() {
    let root = root();
    let read = |family: &str| -> toml::Value {
        toml::from_str(
            &std::fs::read_to_string(root.join(format!("catalog/{family}.toml"))).unwrap(),
        )
        .unwrap()
    };
    let releases = |v: &toml::Value| -> Vec<toml::Value> {
        v.get("release")
            .and_then(toml::Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let minor_of = |v: &str| -> Option<(u64, u64)> {
        let mut p = v.split('.').map(str::parse::<u64>);
        Some((p.next()?.ok()?, p.next()?.ok()?))
    };
    let known: std::collections::BTreeSet<(u64, u64)> = releases(&read("cuda"))
        .iter()
        .filter_map(|r| r.get("version").and_then(toml::Value::as_str))
        .filter_map(minor_of)
        .collect();
    let majors: std::collections::BTreeSet<u64> = known.iter().map(|(m, _)| *m).collect();
    let (mut failures, mut builds) = (Vec::new(), 0);
    for r in releases(&read("nccl")) {
        let version = r.get("version").and_then(toml::Value::as_str).unwrap();
        let source = r
            .get("source")
            .and_then(toml::Value::as_str)
            .unwrap_or_default()
            .to_lowercase()
            .replace("cuda ", "cuda");
        let listed: Vec<&str> = r
            .get("cuda_builds")
            .and_then(toml::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(toml::Value::as_str)
            .collect();
        let mut parsed = Vec::new();
        for b in &listed {
            builds += 1;
            let two_parts = b.split('.').count() == 2;
            match minor_of(b).filter(|_| two_parts) {
                Some(m) if known.contains(&m) || (m.1 == 0 && majors.contains(&m.0)) => {
                    parsed.push(m);
                }
                _ => failures.push(format!(
                    "nccl {version}: cuda_builds `{b}` is not a CUDA minor the catalog knows"
                )),
            }
            if !source.contains(&format!("cuda{b}")) {
                failures.push(format!(
                    "nccl {version}: cuda_builds `{b}` is not named in the release's source"
                ));
            }
        }
        if parsed.windows(2).any(|w| w[0] >= w[1]) {
            failures.push(format!(
                "nccl {version}: cuda_builds {listed:?} are not sorted and unique"
            ));
        }
    }
    assert!(builds >= 20, "only {builds} NCCL builds read");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `catalog validate --sources`: every `source` line of the stock catalog is one fact,
/// counted once by its first citation's kind; the facts listed as citing only pages the
/// public tools cannot open cite nothing else (the forward-compatibility matrix among
/// them).
#[test]
fn validate_sources_counts_every_fact_and_lists_the_closed_ones() {
    use gpustack::catalog::sources::{report, CLOSED_HOSTS};
    let files = gpustack::Catalog::stock_files();
    let r = report(&files);
    let lines = files
        .iter()
        .flat_map(|(_, t)| t.lines())
        .filter(|l| {
            l.split_once(" = ")
                .is_some_and(|(k, _)| k == "source" || k.ends_with("_source"))
        })
        .count();
    assert_eq!(r.facts.len(), lines);
    assert_eq!(r.by_kind().values().sum::<usize>(), lines);
    for f in r.closed_only() {
        assert!(
            CLOSED_HOSTS.iter().any(|h| f.source.contains(h)),
            "{}:{} {}",
            f.file,
            f.line,
            f.source
        );
        assert!(
            !f.source.contains("github.com") && !f.source.contains("PyPI"),
            "{}",
            f.source
        );
    }
    assert!(r
        .closed_only()
        .any(|f| f.file == "catalog/cuda.toml" && f.source.contains("forward-compatibility.html")));

    let out = run_in(&root(), &["catalog", "validate", "--sources"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with("catalog valid: "), "{}", out.stdout);
    assert!(
        out.stdout.contains(&format!(
            "{lines} facts with a source in {} files",
            files.len()
        )),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("  catalog/cuda.toml:"),
        "{}",
        out.stdout
    );
}
