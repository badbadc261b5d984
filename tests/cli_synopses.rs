//! The command-line reference (`book/src/cli.md`) against clap's own help (issue 34): every
//! subcommand has a synopsis, and each synopsis names exactly the flags `--help` lists
//! (the global `--quiet`/`--verbose`, `--help` and `--version` are documented once, at
//! the top of the chapter).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use common::root;

const GLOBAL: &[&str] = &["--help", "--quiet", "--verbose", "--version"];

fn help(path: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_gpustack"))
        .args(path)
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "{path:?} --help");
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands a help text lists under `Commands:` (without `help`).
fn subcommands(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// The long flags a help text lists under `Options:`, the global ones left out.
fn flags(text: &str) -> BTreeSet<String> {
    text.lines()
        .skip_while(|l| !l.starts_with("Options:"))
        .filter_map(|l| {
            let t = l.trim_start();
            let t = t.strip_prefix('-').map_or(t, |_| t);
            let t = if t.len() > 4 && t.as_bytes()[0] == b'-' && t.as_bytes()[2] == b',' {
                t[4..].trim_start()
            } else {
                t
            };
            let flag: String = t
                .strip_prefix("--")?
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '-')
                .collect();
            Some(format!("--{flag}"))
        })
        .filter(|f| !GLOBAL.contains(&f.as_str()))
        .collect()
}

/// Every command path clap knows, leaves only (`catalog import pypi`, not `catalog import`).
fn leaves() -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut todo: Vec<Vec<String>> = subcommands(&help(&[]))
        .into_iter()
        .map(|c| vec![c])
        .collect();
    while let Some(path) = todo.pop() {
        let refs: Vec<&str> = path.iter().map(String::as_str).collect();
        let subs = subcommands(&help(&refs));
        if subs.is_empty() {
            out.push(path);
        } else {
            for s in subs {
                let mut p = path.clone();
                p.push(s);
                todo.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The synopses of `cli.md`: each `gpustack …` line of a ```text block and its indented
/// continuation lines, keyed by the command path (the leading lowercase words).
fn synopses(book: &str) -> BTreeMap<Vec<String>, BTreeSet<String>> {
    let mut out: BTreeMap<Vec<String>, BTreeSet<String>> = BTreeMap::new();
    let mut in_text = false;
    let mut current: Option<Vec<String>> = None;
    for line in book.lines() {
        if line.starts_with("```") {
            in_text = line == "```text";
            current = None;
            continue;
        }
        if !in_text {
            continue;
        }
        if let Some(rest) = line.strip_prefix("gpustack ") {
            let path: Vec<String> = rest
                .split_whitespace()
                .take_while(|w| {
                    w.chars().all(|c| c.is_ascii_lowercase() || c == '-') && !w.starts_with('-')
                })
                .map(str::to_string)
                .collect();
            if path.is_empty() {
                current = None;
                continue;
            }
            out.entry(path.clone()).or_default();
            current = Some(path);
        } else if !line.starts_with(' ') {
            current = None;
        }
        if let Some(path) = &current {
            let set = out.get_mut(path).unwrap();
            for (i, _) in line.match_indices("--") {
                let flag: String = line[i + 2..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '-')
                    .collect();
                if !flag.is_empty() {
                    set.insert(format!("--{flag}"));
                }
            }
        }
    }
    out
}

#[test]
fn every_synopsis_names_exactly_the_flags_clap_has() {
    let book = std::fs::read_to_string(root().join("book/src/cli.md")).unwrap();
    let documented = synopses(&book);
    let mut failures = Vec::new();
    for path in leaves() {
        let refs: Vec<&str> = path.iter().map(String::as_str).collect();
        let have = flags(&help(&refs));
        let Some(said) = documented.get(&path) else {
            failures.push(format!(
                "`gpustack {}` has no synopsis in cli.md",
                path.join(" ")
            ));
            continue;
        };
        let said: BTreeSet<String> = said
            .iter()
            .filter(|f| !GLOBAL.contains(&f.as_str()))
            .cloned()
            .collect();
        for f in have.difference(&said) {
            failures.push(format!(
                "`gpustack {}`: {f} is missing from its synopsis",
                path.join(" ")
            ));
        }
        for f in said.difference(&have) {
            failures.push(format!(
                "`gpustack {}`: the synopsis names {f}, which clap does not have",
                path.join(" ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "book/src/cli.md:\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_parsers_see_flags_and_paths() {
    let text = "Options:\n  -q, --quiet  Q\n      --spec <PATH>  S\n      --no-drift  N\n  -h, --help  H\n";
    assert_eq!(
        flags(text),
        BTreeSet::from(["--spec".to_string(), "--no-drift".to_string()])
    );
    let book = "```text\ngpustack catalog import pypi NAME [--index URL]\n         [--out DIR]\ngpustack completions bash|zsh\n```\n";
    let s = synopses(book);
    assert_eq!(
        s[&vec!["catalog".to_string(), "import".into(), "pypi".into()]],
        BTreeSet::from(["--index".to_string(), "--out".to_string()])
    );
    assert!(s.contains_key(&vec!["completions".to_string()]));
}
