//! Every console transcript in the book is run and compared (issue 18: transcripts had gone
//! stale because only `toml spec` blocks were tested).
//!
//! Each page runs in its own directory, top to bottom, like a reader following it:
//! * a ```` ```toml spec ```` block (also `spec-conflict`, `spec-invalid`) becomes
//!   `gpustack.toml` (later ones replace it);
//! * an HTML comment `<!-- transcript: COMMAND -->` (invisible in the book) runs COMMAND
//!   under `bash` in the page's directory before the next block: the setup a reader has
//!   from the prose (a spec from `fixtures/specs/`, an overlay directory);
//! * in a ```` ```console ```` block each `$ gpustack …` line runs under `bash` (pipes and
//!   redirections work) with the built binary first on `PATH`, offline (also the file
//!   tools in [`RUN`], such as `sed -i` on the spec); the lines after it,
//!   up to the next `$`, are its expected standard output and error, merged. A line `…`
//!   stands for any number of lines, and `…` at the end of a line for the rest of that line.
//!   A command shown without output must exit 0 or 1 (never a usage error);
//! * `<!-- transcript: file PATH -->` before a block writes the block, as shown, to PATH in
//!   the page's directory (a later one replaces it): the overlay file or the saved
//!   `nvidia-smi` output the prose asks the reader to write;
//! * `<!-- transcript: skip WHY -->` before a block leaves it out (listed when the test
//!   runs; none is left, and the test fails on one);
//! * `$ cat FILE` of a file that does not exist yet writes the transcript's lines to it:
//!   that is how the book shows an overlay or a saved nvidia-smi output to create;
//! * other commands (`cargo build`, `docker`, `sbatch`, …) are not run.
//!
//! The page's directory links `fixtures/`, `lockfiles/` and `examples/` from the
//! repository, so `--lock lockfiles/…` works as it does from a checkout.
//!
//! `INSTA_UPDATE=always` (or `GPUSTACK_BLESS=1`) rewrites the expected output in the book
//! instead of comparing; `git diff book/` is the review.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{bless, code_blocks, root, tempdir, unified_diff, Block};

/// The commands a transcript runs: gpustack and the file tools the book uses around it
/// (`sed -i` on the spec, `grep` in generated files). Others (`cargo`, `docker`, `sbatch`,
/// `packer`, …) need what this test does not have and are shown, not run.
const RUN: &[&str] = &[
    "gpustack", "sed", "grep", "cat", "echo", "printf", "mkdir", "cp", "rm", "ls", "head", "tail",
    "diff", "find", "touch",
];

/// The blocks a reader follows: those at the start of a line (not inside a list item).
fn blocks(page: &str) -> Vec<Block> {
    code_blocks(page)
        .into_iter()
        .filter(|b| !b.indented)
        .collect()
}

/// Whether `actual` matches `expected`, where `…` is a wildcard (a whole line: any lines;
/// at the end of a line: the rest of it).
fn matches(expected: &[&str], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((&"…", rest)) => (0..=actual.len()).any(|k| matches(rest, &actual[k..])),
        Some((e, rest)) => match actual.split_first() {
            None => false,
            Some((a, arest)) => {
                let ok = match e.strip_suffix('…') {
                    Some(prefix) => a.starts_with(prefix),
                    None => a.trim_end() == e.trim_end(),
                };
                ok && matches(rest, arest)
            }
        },
    }
}

fn run(dir: &Path, bin_dir: &Path, cmd: &str) -> (i32, String) {
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "{{ {cmd}
}} 2>&1"
        ))
        .current_dir(dir)
        .env("PATH", path)
        .env("GPUSTACK_OFFLINE", "1")
        .env_remove("GPUSTACK_DEBUG")
        .env("NO_COLOR", "1")
        .output()
        .expect("run bash");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The test runs offline; the book shows a `gpustack lock` that could reach PyPI. The
/// lines only an offline run adds (the Python closure left open because nothing may be
/// resolved) are dropped before comparing. The Python closure's own notes on a networked
/// run are not in the book's `lock` transcripts (see the closure chapter).
///
/// Likewise `check`'s `open-closure` warning (a lock made offline has no closure; the
/// book's was made online): its block is dropped and the summary's warning count
/// lowered by one.
fn without_offline_notes(out: &str) -> String {
    let mut kept = String::new();
    let mut lines = out.lines().peekable();
    let mut open = 0;
    while let Some(l) = lines.next() {
        if l.starts_with("warning[open-closure]: ") {
            open += 1;
            while lines.next().is_some_and(|n| !n.is_empty()) {}
            continue;
        }
        if open > 0 && l.starts_with("checked ") {
            let fixed = (0..100).rev().find_map(|n: usize| {
                let was = format!(", {n} warning{}", if n == 1 { "" } else { "s" });
                let m = n.saturating_sub(open);
                let now = format!(", {m} warning{}", if m == 1 { "" } else { "s" });
                l.contains(&was).then(|| l.replacen(&was, &now, 1))
            });
            kept.push_str(&fixed.unwrap_or_else(|| l.to_string()));
            kept.push('\n');
            continue;
        }
        if l.starts_with("warning: the Python closure is not locked: offline") {
            if lines
                .peek()
                .is_some_and(|n| n.starts_with("  the generated builds resolve"))
            {
                lines.next();
            }
            continue;
        }
        kept.push_str(l);
        kept.push('\n');
    }
    kept
}

fn page_dir(name: &str) -> PathBuf {
    let dir = tempdir(&format!("book-{name}"));
    for link in ["fixtures", "lockfiles", "examples"] {
        std::os::unix::fs::symlink(root().join(link), dir.join(link)).unwrap();
    }
    dir
}

#[test]
#[allow(clippy::print_stderr)] // the list of skipped blocks is the point
fn every_console_transcript_in_the_book_is_what_gpustack_prints() {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_gpustack"));
    let bin_dir = bin.parent().unwrap().to_path_buf();
    let mut failures = Vec::new();
    let mut skipped: Vec<String> = Vec::new();
    let mut ran = 0;
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root().join("book/src"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    for page_path in pages {
        let name = page_path.file_stem().unwrap().to_str().unwrap().to_string();
        let mut page = std::fs::read_to_string(&page_path).unwrap();
        if !page.contains("```console") {
            continue;
        }
        let dir = page_dir(&name);
        // (range in the page, new text) for blessing, applied back to front.
        let mut rewrites: Vec<(std::ops::Range<usize>, String)> = Vec::new();
        let mut prev_end = 0;
        for b in blocks(&page) {
            let between = &page[prev_end..b.body.start];
            prev_end = b.body.end;
            let mut rest = between;
            let mut skip = false;
            let mut file: Option<String> = None;
            while let Some(i) = rest.find("<!-- transcript: ") {
                let after = &rest[i + "<!-- transcript: ".len()..];
                let end = after.find(" -->").expect("an unclosed transcript comment");
                let setup = &after[..end];
                if let Some(why) = setup.strip_prefix("skip ") {
                    skip = true;
                    skipped.push(format!(
                        "{name}.md (line {}): {why}",
                        page[..b.body.start].lines().count()
                    ));
                    rest = &after[end..];
                    continue;
                }
                if let Some(path) = setup.strip_prefix("file ") {
                    file = Some(path.trim().to_string());
                    rest = &after[end..];
                    continue;
                }
                let (code, out) = run(&dir, &bin_dir, setup);
                assert!(
                    code == 0 || code == 1,
                    "{name}.md: setup `{setup}` failed ({code}):\n{out}"
                );
                rest = &after[end..];
            }
            let body = &page[b.body.clone()];
            // `<!-- transcript: file PATH -->`: the block the reader is asked to write, as
            // the page shows it (an overlay file, saved nvidia-smi output).
            if let Some(path) = &file {
                assert!(
                    !path.starts_with('/') && !path.contains(".."),
                    "{name}.md: `transcript: file {path}` must be a relative path"
                );
                let path = dir.join(path);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, body).unwrap();
            }
            if b.info == "toml spec" || b.info.starts_with("toml spec-") {
                std::fs::write(dir.join("gpustack.toml"), body).unwrap();
                continue;
            }
            if b.info != "console" || skip {
                continue;
            }
            let mut new_body = String::new();
            let mut lines = body.lines().peekable();
            while let Some(line) = lines.next() {
                let Some(cmd) = line.strip_prefix("$ ") else {
                    new_body.push_str(line);
                    new_body.push('\n');
                    continue;
                };
                new_body.push_str(line);
                new_body.push('\n');
                let mut expected = Vec::new();
                while let Some(l) = lines.peek() {
                    if l.starts_with("$ ") {
                        break;
                    }
                    expected.push(*l);
                    lines.next();
                }
                let first = cmd.split_whitespace().next().unwrap_or("");
                if !RUN.contains(&first) {
                    for e in &expected {
                        new_body.push_str(e);
                        new_body.push('\n');
                    }
                    continue;
                }
                ran += 1;
                // `$ cat FILE` of a file the page has not made yet shows the reader a file to
                // write (an overlay, saved nvidia-smi output): the transcript creates it.
                if let Some(file) = cmd.strip_prefix("cat ").filter(|f| !f.contains(' ')) {
                    let path = dir.join(file);
                    if !path.exists() {
                        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                        let mut text = expected.join("\n");
                        text.push('\n');
                        std::fs::write(&path, text).unwrap();
                    }
                }
                let (code, actual) = run(&dir, &bin_dir, cmd);
                let actual = without_offline_notes(&actual);
                let actual_lines: Vec<&str> = actual.lines().collect();
                let ok = if expected.is_empty() {
                    code == 0 || code == 1
                } else {
                    matches(&expected, &actual_lines)
                };
                let keep_expected = ok
                    || expected.is_empty()
                    || expected.contains(&"…")
                    || expected.iter().any(|e| e.ends_with('…'));
                if ok || (bless() && keep_expected && !expected.is_empty()) {
                    if !ok {
                        failures.push(format!(
                            "{name}.md: `{cmd}` (has `…`; edit by hand)\n--- expected\n{}\n--- actual (exit {code})\n{actual}",
                            expected.join("\n")
                        ));
                    }
                    for e in &expected {
                        new_body.push_str(e);
                        new_body.push('\n');
                    }
                } else if bless() {
                    new_body.push_str(&actual);
                    if !actual.is_empty() && !actual.ends_with('\n') {
                        new_body.push('\n');
                    }
                } else {
                    let mut want = expected.join("\n");
                    want.push('\n');
                    failures.push(format!(
                        "{name}.md: `{cmd}` (exit {code})\n{}",
                        unified_diff(&want, &actual, &format!("{name}.md: {cmd}"))
                    ));
                    for e in &expected {
                        new_body.push_str(e);
                        new_body.push('\n');
                    }
                }
            }
            if new_body != body {
                rewrites.push((b.body.clone(), new_body));
            }
        }
        if bless() && !rewrites.is_empty() {
            for (r, t) in rewrites.into_iter().rev() {
                page.replace_range(r, &t);
            }
            std::fs::write(&page_path, &page).unwrap();
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    // Transcripts that need what a reader builds by hand (an overlay from the prose, saved
    // nvidia-smi output, an edited file) say so with `<!-- transcript: skip WHY -->`; they
    // are listed here. Every such block has since been made runnable (`transcript: file`),
    // so none may be skipped.
    eprintln!(
        "book transcripts: {ran} commands run, {} blocks skipped:",
        skipped.len()
    );
    for s in &skipped {
        eprintln!("  {s}");
    }
    assert!(
        skipped.is_empty(),
        "{} skipped transcripts:\n{}",
        skipped.len(),
        skipped.join("\n")
    );
    assert!(ran >= 40, "only {ran} transcript commands found");
    assert!(
        failures.is_empty(),
        "{} of {ran} book transcript commands differ (`INSTA_UPDATE=always cargo test --test \
         book_transcripts` rewrites them; review with `git diff book/`):\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn the_wildcard_matcher() {
    assert!(matches(&["a", "…", "d"], &["a", "b", "c", "d"]));
    assert!(matches(&["a", "…"], &["a"]));
    assert!(matches(&["abc…"], &["abcdef"]));
    assert!(!matches(&["a", "d"], &["a", "b", "d"]));
}
