//! The CRD schemas the tests validate custom resources against are vendored in
//! `fixtures/schemas/`, each with its upstream URL at a release tag and its sha256 in that
//! directory's README. This test holds the README to the files: every listed file has the
//! sha256 given (so a vendored CRD is the upstream file byte for byte, as copied), its URL is
//! a `raw.githubusercontent.com` address at a tag the tags table pins to a commit, its name is
//! the upstream name with that tag, every CRD there is listed, and every CRD `tests/k8s.rs`
//! names is listed (so no test reads a schema that is not here).

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use sha2::{Digest, Sha256};

/// One row of the README's file table.
#[derive(Debug)]
struct Vendored {
    file: String,
    owner_repo: String,
    tag: String,
    /// The file's path in its repository at `tag`.
    path: String,
    sha256: String,
}

/// The cells of a Markdown table row, trimmed (`| a | b |` → ["a", "b"]).
fn cells(line: &str) -> Vec<String> {
    line.trim()
        .trim_start_matches('|')
        .trim_end_matches('|')
        .split('|')
        .map(|c| c.trim().to_string())
        .collect()
}

/// The rows of the table whose header is `header`, up to the first line that is not a row.
fn table(readme: &str, header: &str) -> Vec<Vec<String>> {
    let mut lines = readme.lines().skip_while(|l| l.trim() != header);
    assert!(lines.next().is_some(), "no table `{header}` in the README");
    lines
        .skip(1) // |---|---|
        .take_while(|l| l.trim_start().starts_with('|'))
        .map(cells)
        .collect()
}

fn unquote(cell: &str) -> &str {
    cell.trim_matches('`')
}

/// `<https://raw.githubusercontent.com/OWNER/REPO/TAG/PATH>` → (OWNER/REPO, TAG, PATH).
fn parse_url(cell: &str) -> Option<(String, String, String)> {
    let url = cell.strip_prefix('<')?.strip_suffix('>')?;
    let rest = url.strip_prefix("https://raw.githubusercontent.com/")?;
    let mut parts = rest.splitn(4, '/');
    let (owner, repo, tag, path) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    Some((format!("{owner}/{repo}"), tag.to_string(), path.to_string()))
}

fn readme() -> String {
    std::fs::read_to_string(root().join("fixtures/schemas/README.md")).unwrap()
}

fn vendored() -> Vec<Vendored> {
    table(&readme(), "| File | Kind | Upstream, at its tag | sha256 |")
        .into_iter()
        .map(|row| {
            assert_eq!(row.len(), 4, "{row:?}");
            let (owner_repo, tag, path) = parse_url(&row[2])
                .unwrap_or_else(|| panic!("not a raw.githubusercontent.com URL: {}", row[2]));
            Vendored {
                file: unquote(&row[0]).to_string(),
                owner_repo,
                tag,
                path,
                sha256: unquote(&row[3]).to_string(),
            }
        })
        .collect()
}

/// The tags table: OWNER/REPO → (tag, commit).
fn tags() -> BTreeMap<String, (String, String)> {
    table(&readme(), "| Project | Tag | Commit |")
        .into_iter()
        .map(|row| {
            assert_eq!(row.len(), 3, "{row:?}");
            (
                row[0].clone(),
                (row[1].clone(), unquote(&row[2]).to_string()),
            )
        })
        .collect()
}

#[test]
fn every_vendored_schema_has_the_listed_sha256() {
    let rows = vendored();
    assert!(rows.len() >= 14, "only {} files listed", rows.len());
    let mut failures = Vec::new();
    for r in &rows {
        let path = root().join("fixtures/schemas").join(&r.file);
        let Ok(bytes) = std::fs::read(&path) else {
            failures.push(format!("{}: listed but missing", r.file));
            continue;
        };
        let got = format!("{:x}", Sha256::digest(&bytes));
        if got != r.sha256 {
            failures.push(format!(
                "{}: sha256 {got}, the README says {} (vendored files are copied unchanged; \
                 scripts/update-schemas.sh fetches a release)",
                r.file, r.sha256
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_vendored_schema_names_its_upstream_file_at_a_pinned_tag() {
    let tags = tags();
    let mut failures = Vec::new();
    for (repo, (tag, commit)) in &tags {
        if commit.len() != 40 || !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
            failures.push(format!("{repo} {tag}: `{commit}` is not a commit id"));
        }
    }
    for r in vendored() {
        match tags.get(&r.owner_repo) {
            Some((tag, _)) if *tag == r.tag => {}
            Some((tag, _)) => failures.push(format!(
                "{}: URL at {}, the tags table pins {} at {tag}",
                r.file, r.tag, r.owner_repo
            )),
            None => failures.push(format!(
                "{}: {} is not in the tags table",
                r.file, r.owner_repo
            )),
        }
        // `<upstream name without .yaml>.<tag>.yaml`; the upstream name may carry an
        // ordering prefix (`005-nv-ipam.nvidia.com_ippools.yaml`).
        let upstream = r.path.rsplit('/').next().unwrap();
        let ok = r
            .file
            .strip_suffix(&format!(".{}.yaml", r.tag))
            .is_some_and(|stem| {
                upstream
                    .strip_suffix(".yaml")
                    .is_some_and(|u| u.ends_with(stem))
            });
        if !ok {
            failures.push(format!(
                "{}: expected the upstream name `{upstream}` with `.{}` before `.yaml`",
                r.file, r.tag
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every CRD in `fixtures/schemas/` is listed, and every CRD file `tests/k8s.rs` names is.
#[test]
fn every_crd_here_and_every_crd_the_tests_name_is_listed() {
    let listed: BTreeSet<String> = vendored().into_iter().map(|r| r.file).collect();
    let dir = root().join("fixtures/schemas");
    let on_disk: BTreeSet<String> = sorted_files(&dir, "yaml")
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|f| f != "yamllint.yaml")
        .collect();
    let unlisted: Vec<_> = on_disk.difference(&listed).collect();
    assert!(
        unlisted.is_empty(),
        "in fixtures/schemas but not in its README: {unlisted:?}"
    );

    // The versioned CRD file names (`….v1.2.3.yaml`) in tests/k8s.rs.
    let k8s = std::fs::read_to_string(root().join("tests/k8s.rs")).unwrap();
    let named: BTreeSet<String> = k8s
        .split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        .filter(|s| {
            s.strip_suffix(".yaml")
                .and_then(|s| s.split(".v").nth(1))
                .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
        })
        .map(str::to_string)
        .collect();
    assert!(named.len() >= 10, "tests/k8s.rs names only {named:?}");
    let missing: Vec<_> = named.difference(&listed).collect();
    assert!(
        missing.is_empty(),
        "tests/k8s.rs validates against unlisted CRDs: {missing:?}"
    );
}

#[test]
fn the_readme_parser_reads_what_it_should() {
    assert_eq!(
        parse_url("<https://raw.githubusercontent.com/kubernetes-sigs/lws/v0.10.0/config/crd/bases/x.yaml>"),
        Some((
            "kubernetes-sigs/lws".to_string(),
            "v0.10.0".to_string(),
            "config/crd/bases/x.yaml".to_string()
        ))
    );
    assert_eq!(parse_url("https://github.com/kubernetes-sigs/lws"), None);
    assert_eq!(cells("| `a` | b |"), ["`a`", "b"]);
}
