//! The repository stands alone: no tracked file names a path outside it. A fresh clone,
//! wherever it is cloned and with nothing beside it, has everything its tests, scripts and
//! book refer to.
//!
//! The rule, checked on every line of every git-tracked text file (a file with a NUL byte in
//! its first 8000 bytes is binary, as git decides; the fuzzers' corpora `fuzz/corpus/` and
//! `fuzz/artifacts/` are random bytes and are skipped). A line fails when it names:
//!
//! 1. `../shared`: the directory beside the checkout that this project was developed with;
//! 2. a relative path that starts with `../` (at the start of a word: after the line's start,
//!    a space, a quote, a backtick, `(`, `[`, `{`, `<`, `=`, `:`, `,`, `;` or `|`) and that,
//!    resolved from the file's own directory, climbs above the repository root
//!    (`../../examples/x.toml` in `book/src/` stays inside; `../x` in a top-level file
//!    does not);
//! 3. an absolute path into a development machine, starting at the start of a word:
//!    * `/work/…`, the workspace of the machines gpustack is developed on;
//!    * `/home/USER/…`, `/Users/USER/…` or `/root/…` followed by a path some tail of which is
//!      a tracked file or directory of this repository (`/home/me/gpustack/tests/k8s.rs`):
//!      a checkout in someone's home directory. A home directory inside an image or a VM
//!      (`/root/.cache/uv`, `/home/mpiuser/.ssh`) is not a checkout and is fine;
//! 4. this checkout's own absolute path.
//!
//! A line that says `not-a-repo-path` (a comment giving the reason) is exempt: a hostile
//! stack name a test feeds the CLI (it must be refused), or a checker's own examples of what
//! it rejects. This file, which spells the rule out, is not read.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::*;

const EXEMPT: &str = "not-a-repo-path";

/// Characters after which a path starts a word.
fn starts_word(prev: Option<char>) -> bool {
    prev.is_none_or(|c| c.is_whitespace() || "\"'`([{<=:,;|".contains(c))
}

/// The path-like run of characters that starts at `text[i..]`.
fn path_at(text: &str, i: usize) -> &str {
    let rest = &text[i..];
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || "._-/@+~".contains(c)))
        .unwrap_or(rest.len());
    &rest[..end]
}

/// Whether `rel` (a relative path), taken from `dir` (the file's directory, relative to the
/// repository root), ever climbs above the root.
fn leaves_root(dir: &Path, rel: &str) -> bool {
    let mut depth = dir.components().count();
    for c in rel.split('/') {
        match c {
            ".." if depth == 0 => return true,
            ".." => depth -= 1,
            "" | "." => {}
            _ => depth += 1,
        }
    }
    false
}

/// Whether an absolute path reaches into a checkout of this repository: a tail of it (after
/// `/home/USER`, `/Users/USER` or `/root`) is a tracked file or directory.
fn into_checkout(path: &str, tracked: &BTreeSet<String>) -> bool {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let skip = match parts.first() {
        Some(&"home" | &"Users") => 2,
        Some(&"root") => 1,
        _ => return false,
    };
    (skip..parts.len()).any(|k| tracked.contains(&parts[k..].join("/")))
}

/// What one line names outside the repository, if anything.
fn outside(file: &str, line: &str, tracked: &BTreeSet<String>, checkout: &str) -> Option<String> {
    if line.contains(EXEMPT) {
        return None;
    }
    if line.contains("../shared") {
        return Some("`../shared`".into());
    }
    let dir = Path::new(file).parent().unwrap_or(Path::new(""));
    for (i, c) in line.char_indices() {
        if !starts_word(line[..i].chars().next_back()) {
            continue;
        }
        let path = path_at(line, i);
        if c == '.' && path.starts_with("../") && leaves_root(dir, path) {
            return Some(format!("`{path}`, which leaves the repository from {file}"));
        }
        if c == '/' && (path == checkout || path.starts_with(&format!("{checkout}/"))) {
            return Some(format!("`{path}`, in this checkout"));
        }
        if c == '/' && (path.starts_with("/work/") || into_checkout(path, tracked)) {
            return Some(format!("`{path}`, a path on a development machine"));
        }
    }
    None
}

/// Tracked files and every directory above one (`tests/provision/fake`, `tests/provision`,
/// `tests`).
fn tracked_paths(files: &[String]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for f in files {
        let mut p = f.as_str();
        out.insert(p.to_string());
        while let Some((head, _)) = p.rsplit_once('/') {
            out.insert(head.to_string());
            p = head;
        }
    }
    out
}

#[test]
#[allow(clippy::print_stderr)] // the loud skip notice is the point
fn no_tracked_file_names_a_path_outside_the_repository() {
    let root = root();
    let out = std::process::Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(&root)
        .output();
    let Some(out) = out.ok().filter(|o| o.status.success()) else {
        // Not a git checkout (a source archive): nothing says which files are tracked.
        let msg = format!(
            "\n!!! `git ls-files` failed in {}: the standalone check is SKIPPED.\n",
            root.display()
        );
        assert!(
            !std::env::var("CI").is_ok_and(|v| v == "true"),
            "{msg}CI=true: a missing tool is a failure"
        );
        eprintln!("{msg}");
        return;
    };
    let files: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .split('\0')
        .filter(|f| !f.is_empty())
        .map(str::to_string)
        .collect();
    let tracked = tracked_paths(&files);
    let checkout = root.canonicalize().unwrap().display().to_string();
    let mut failures = Vec::new();
    let mut read = 0;
    for file in &files {
        if file.starts_with("fuzz/corpus/")
            || file.starts_with("fuzz/artifacts/")
            || file == "tests/standalone.rs"
        {
            continue;
        }
        // A tracked file deleted in the working tree is not this test's business.
        let Ok(bytes) = std::fs::read(root.join(file)) else {
            continue;
        };
        if bytes[..bytes.len().min(8000)].contains(&0) {
            continue;
        }
        read += 1;
        let text = String::from_utf8_lossy(&bytes);
        for (n, line) in text.lines().enumerate() {
            if let Some(what) = outside(file, line, &tracked, &checkout) {
                failures.push(format!("{file}:{}: {what}", n + 1));
            }
        }
    }
    assert!(read > 500, "only {read} tracked text files read");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_rule_catches_what_it_should() {
    let tracked = tracked_paths(&[
        "tests/provision/fake".into(),
        "book/src/kubernetes.md".into(),
    ]);
    let checkout = "/srv/ci/gpustack";
    let bad = [
        ("tests/k8s.rs", r#"root().join("../shared/schemas")"#),
        ("tests/run.sh", "# see ../shared/reference/validators.md"),
        ("README.md", "[x](../other/README.md)"),
        ("book/src/x.md", "{{#include ../../../elsewhere/x.toml}}"),
        ("tests/x.rs", "let p = \"../../x\";"),
        ("Cargo.toml", "path = \"../gpustack-core\""),
        (
            "x.lock",
            "source = \"https://x ; /work/shared/reference/x.toml\"",
        ),
        ("x.md", "cd /home/alice/gpustack/tests/provision"),
        ("x.md", "ln -s /root/src/gpustack/tests/provision/fake"),
        ("x.md", "see /Users/bob/gpustack/book/src/kubernetes.md"),
        ("x.sh", "cp /srv/ci/gpustack/tests/provision/fake bin/"),
    ];
    for (file, line) in bad {
        assert!(
            outside(file, line, &tracked, checkout).is_some(),
            "{file}: {line}"
        );
    }
    let good = [
        ("book/src/x.md", "{{#include ../../examples/ci/check.yml}}"),
        (
            "book/src/x.md",
            "`cd ../..` from out/docker reaches the project",
        ),
        ("tests/x.rs", "let p = \"../fixtures/x\";"),
        (
            "fixtures/gen/a/docker/Dockerfile",
            "RUN --mount=type=cache,target=/root/.cache/uv \\",
        ),
        (
            "fixtures/gen/a/docker/Dockerfile",
            " && echo 'PidFile /home/mpiuser/sshd.pid' >> x",
        ),
        (
            "tests/provision/machine.sh",
            r#"mkdir -p "$dir/upper/$d" "$dir/work/$d""#,
        ),
        (
            "src/spec/deploy.rs",
            "like `workdir = \"lustre:/lustre/home/me/project\"`",
        ),
        ("x.md", "https://example.com/work/x and a/../b"),
        (
            "tests/x.rs",
            "let bad = \"../../evil\"; // not-a-repo-path: a hostile name",
        ),
        ("x.md", "/srv/ci/gpustack-old/x and /srv/ci/gpustackx"),
    ];
    for (file, line) in good {
        assert_eq!(
            outside(file, line, &tracked, checkout),
            None,
            "{file}: {line}"
        );
    }
}
