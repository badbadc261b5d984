//! The book's examples are tested: every fenced block tagged `toml spec` must lock with the
//! stock catalog, `toml spec-conflict` must be "no compatible stack" (exit 1), and
//! `toml spec-invalid` must be rejected as invalid input (exit 2). Every chapter linked
//! from SUMMARY.md must exist, and relative links between chapters must resolve.

mod common;

use common::*;

#[test]
fn book_spec_examples_behave_as_labelled() {
    let root = root();
    let dir = root.join("book/src");
    let work = tempdir("book");
    let mut checked = 0;
    let mut failures = Vec::new();
    for page in sorted_files(&dir, "md") {
        let text = std::fs::read_to_string(&page).unwrap();
        for block in code_blocks(&text) {
            let (info, body, line) = (&block.info, block.text(&text), block.line);
            let want = match info.as_str() {
                "toml spec" => 0,
                "toml spec-conflict" => 1,
                "toml spec-invalid" => 2,
                _ => continue,
            };
            std::fs::write(work.join("gpustack.toml"), body).unwrap();
            let out = run_in(&work, &["lock", "--out", "-"]);
            if out.code != want {
                failures.push(format!(
                    "{}:{line}: `{info}` exited {} (want {want})\n{}",
                    page.display(),
                    out.code,
                    out.stderr
                ));
            }
            checked += 1;
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        checked >= 5,
        "the book should carry at least 5 tested spec examples, found {checked}"
    );
}

#[test]
fn book_links_resolve() {
    let root = root();
    let dir = root.join("book/src");
    let summary = std::fs::read_to_string(dir.join("SUMMARY.md")).expect("book/src/SUMMARY.md");
    let mut failures = Vec::new();
    for page in sorted_files(&dir, "md") {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.file_name().unwrap().to_string_lossy().into_owned();
        if name != "SUMMARY.md" && !summary.contains(&format!("({name})")) {
            failures.push(format!("{name} is not linked from SUMMARY.md"));
        }
        let mut rest = text.as_str();
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            let end = rest.find(')').unwrap_or(rest.len());
            let target = &rest[..end];
            if target.starts_with("http")
                || target.starts_with('#')
                || target.starts_with("mailto:")
            {
                continue;
            }
            let file = target.split('#').next().unwrap_or("");
            if !file.is_empty()
                && !dir.join(file).exists()
                && !page.parent().unwrap().join(file).exists()
            {
                failures.push(format!("{name}: broken link `{target}`"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `mdbook test book` compiles every Rust block without the crate's dependencies in scope
/// (tests/run.sh passes `-L target/debug/deps`, but nothing builds a block's `main`), so the
/// book's Rust blocks are fragments marked `ignore`, kept in library.md, where
/// tests/examples.rs checks each is quoted from code `cargo test` compiles and runs.
#[test]
fn book_rust_blocks_are_ignored_fragments_of_tested_code() {
    let dir = root().join("book/src");
    let mut failures = Vec::new();
    for page in sorted_files(&dir, "md") {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.file_name().unwrap().to_string_lossy().into_owned();
        for block in code_blocks(&text) {
            let (info, line) = (&block.info, block.line);
            let lang = info.split(',').next().unwrap_or("");
            if lang != "rust" {
                continue;
            }
            if !info.split(',').any(|a| a.trim() == "ignore") {
                failures.push(format!("{name}:{line}: mark the block `rust,ignore`"));
            } else if name != "library.md" {
                failures.push(format!(
                    "{name}:{line}: Rust fragments live in library.md (quoted from tested code)"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
