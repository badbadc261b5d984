//! The CRD schemas the tests validate custom resources against are vendored in
//! `fixtures/schemas/`, each with its upstream URL at a release tag and its sha256 in that
//! directory's README. This test holds the README to the files: every listed file has the
//! sha256 given (so a vendored CRD is the upstream file byte for byte, as copied), its URL is
//! a `raw.githubusercontent.com` address at a tag the tags table pins to a commit, its name is
//! the upstream name with that tag, every CRD there is listed, and every CRD `tests/k8s.rs`
//! names is listed (so no test reads a schema that is not here). `scripts/update-schemas.sh`,
//! run at the pinned tags against stand-ins for GitHub, writes those files and prints those
//! rows.

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

/// The project names `scripts/update-schemas.sh` takes, by repository.
const PROJECTS: &[(&str, &str)] = &[
    ("kubeflow/trainer", "trainer"),
    ("kubernetes-sigs/lws", "lws"),
    ("kubernetes-sigs/kueue", "kueue"),
    (
        "prometheus-operator/prometheus-operator",
        "prometheus-operator",
    ),
    ("Mellanox/network-operator", "network-operator"),
    ("kubeflow/training-operator", "training-operator"),
];

/// `scripts/update-schemas.sh` at the pinned tags, with GitHub answered by stand-ins (`curl`
/// serves each README URL's vendored file, `git ls-remote` the tags table's commit), writes
/// exactly the vendored files and prints exactly the README's rows: the script and the
/// README agree on every path, name and tag. The script is shellcheck-clean.
#[test]
fn the_update_script_reproduces_the_vendored_files_and_rows() {
    let script = root().join("scripts/update-schemas.sh");
    if let Some(sc) = validator("shellcheck") {
        let (code, out) = run_tool(&sc, &["-s", "bash", script.to_str().unwrap()], &root());
        assert_eq!(code, 0, "shellcheck scripts/update-schemas.sh:\n{out}");
    }
    let dir = tempdir("update-schemas");
    let (bin, out) = (dir.join("bin"), dir.join("out"));
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    let schemas = root().join("fixtures/schemas");
    let mut urls = String::new();
    for r in vendored() {
        let url = format!(
            "https://raw.githubusercontent.com/{}/{}/{}",
            r.owner_repo, r.tag, r.path
        );
        urls.push_str(&format!("{url} {}\n", schemas.join(&r.file).display()));
    }
    let mut refs = String::new();
    let mut args = Vec::new();
    for (repo, (tag, commit)) in tags() {
        refs.push_str(&format!("https://github.com/{repo}.git {tag} {commit}\n"));
        let project = PROJECTS.iter().find(|(r, _)| *r == repo).unwrap().1;
        args.push(format!("{project}={tag}"));
    }
    std::fs::write(dir.join("urls"), urls).unwrap();
    std::fs::write(dir.join("refs"), refs).unwrap();
    let stub = |name: &str, body: &str| {
        let p = bin.join(name);
        std::fs::write(&p, format!("#!/usr/bin/env bash\nset -eu\n{body}")).unwrap();
        let mut perm = std::fs::metadata(&p).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        std::fs::set_permissions(&p, perm).unwrap();
    };
    // curl -fsSL --retry 3 -o OUT URL
    stub(
        "curl",
        r#"eval "out=\${$(($# - 1))}" url=${!#}
file=$(awk -v u="$url" '$1 == u { print $2 }' "$STUB_DIR/urls")
[ -n "$file" ] && cp "$file" "$out"
"#,
    );
    // git ls-remote --tags URL refs/tags/TAG refs/tags/TAG^{}: an annotated tag, peeled.
    stub(
        "git",
        r#"[ "$1" = ls-remote ] || exit 2
awk -v u="$3" -v r="$4" '$1 == u && "refs/tags/" $2 == r { print "0000000000000000000000000000000000000000\t" r; print $3 "\t" r "^{}" }' "$STUB_DIR/refs"
"#,
    );
    let mut cmd = std::process::Command::new("bash");
    cmd.arg(&script)
        .arg("--out")
        .arg(&out)
        .args(&args)
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("STUB_DIR", &dir);
    let run = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    // Sorted: the script prints in the order of its arguments.
    let rows = |text: &str, first: &str| -> BTreeSet<String> {
        text.lines()
            .filter(|l| l.starts_with(first))
            .map(str::to_string)
            .collect()
    };
    let readme = readme();
    let printed_files = rows(&stdout, "| `");
    assert_eq!(printed_files, rows(&readme, "| `"));
    let is_tag_row = |l: &String| {
        PROJECTS
            .iter()
            .any(|(r, _)| l.starts_with(&format!("| {r} |")))
    };
    let printed_tags: BTreeSet<_> = rows(&stdout, "| ").into_iter().filter(is_tag_row).collect();
    let readme_tags: BTreeSet<_> = rows(&readme, "| ").into_iter().filter(is_tag_row).collect();
    assert_eq!(printed_tags, readme_tags);
    for r in vendored() {
        let wrote = std::fs::read(out.join(&r.file)).unwrap();
        assert_eq!(
            wrote,
            std::fs::read(schemas.join(&r.file)).unwrap(),
            "{}",
            r.file
        );
    }
}
